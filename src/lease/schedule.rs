//! The pure renewal schedule: the durations it works with (resolved from
//! the settings for one TTL, with their defaults), the caps, what renewal
//! has done so far, and [`next_step`], which decides from the lock's term
//! whether to renew now, wait, or fire the lost-lock signal. The task that
//! follows it is in `renewal`; nothing here does I/O or reads the clock.

use std::time::{Duration, Instant};

use super::renewal::Renewal;
use crate::validity::{Term, Ttl};

/// Shortest delay between two renewal attempts, whatever the settings.
const MIN_SPACING: Duration = Duration::from_millis(1);

/// The durations the schedule works with, resolved for one TTL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Timing {
    pub(crate) interval: Duration,
    pub(crate) margin: Duration,
    pub(crate) retry: Duration,
    /// How long before the margin a renewal starts at the latest.
    pub(crate) lead: Duration,
}

impl Timing {
    /// The durations for a lock on `ttl`, from the `settings`' interval
    /// and margin (`None`: the default), or why these cannot work for it:
    /// [`clamped`](Self::clamped)'s, unless a setting is out of range.
    pub(crate) fn checked(
        settings: &Renewal,
        ttl: Ttl,
        node_timeout: Duration,
    ) -> Result<Self, String> {
        let timing = Self::clamped(settings, ttl, node_timeout);
        let (ttl, budget, margin) = (ttl.duration, ttl.budget(), timing.margin);
        match (settings.interval, settings.margin) {
            (_, Some(m)) if m >= budget => Err(format!(
                "renewal margin {m:?} must be below the validity budget {budget:?} \
                 of a {ttl:?} TTL"
            )),
            (Some(i), _) if i.is_zero() => Err("renewal interval must be larger than zero".into()),
            (Some(i), _) if i.saturating_add(margin) >= budget => Err(format!(
                "renewal every {i:?} would come after the safety margin {margin:?}: \
                 interval + margin must be below the validity budget {budget:?} \
                 of a {ttl:?} TTL"
            )),
            _ => Ok(timing),
        }
    }

    /// The durations for a lock on `ttl` whatever the settings, for a TTL
    /// that changed after they were [`checked`](Self::checked):
    /// out-of-range values are clamped, not refused.
    pub(crate) fn clamped(settings: &Renewal, ttl: Ttl, node_timeout: Duration) -> Self {
        let (ttl, budget) = (ttl.duration, ttl.budget());
        // By default `max(ttl / 10, 2 × node_timeout)`, at most half the
        // budget.
        let default_margin = (ttl / 10).max(node_timeout.saturating_mul(2));
        let margin = settings.margin.unwrap_or(default_margin.min(budget / 2));
        let margin = margin.min(budget);
        // By default a third of the TTL, shortened to half of what the
        // margin leaves of the budget, so renewal always comes before the
        // margin.
        let by_default = (ttl / 3).min(budget.saturating_sub(margin) / 2);
        let interval = settings.interval.unwrap_or(by_default).max(MIN_SPACING);
        // After a failed attempt: a tenth of the interval, at least the node
        // timeout, at most the interval.
        let retry = (interval / 10).max(node_timeout).min(interval);
        Self {
            interval,
            margin,
            retry: retry.max(MIN_SPACING),
            lead: node_timeout,
        }
    }
}

/// Caps that end renewal.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Limits {
    pub(crate) max_renewals: Option<u32>,
    /// When the hold-time cap is reached; `None` for no cap (or one so far
    /// away that it cannot be represented).
    pub(crate) hold_until: Option<Instant>,
}

impl Limits {
    /// The caps of `settings`, for a lock granted at `granted`.
    pub(crate) fn new(settings: &Renewal, granted: Instant) -> Self {
        Self {
            max_renewals: settings.max_renewals,
            hold_until: settings.max_hold.and_then(|d| granted.checked_add(d)),
        }
    }
}

/// What renewal has done so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Progress {
    /// Renewals that succeeded.
    pub(crate) renewals: u32,
    /// When the last attempt started.
    pub(crate) last_attempt: Option<Instant>,
    /// The last attempt failed (and left the lock uncertain).
    pub(crate) last_failed: bool,
    /// The signal already fired `Uncertain`.
    pub(crate) uncertain: bool,
}

/// The schedule's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// The validity is over: fire `Expired`, stop.
    Expired,
    /// A cap was reached: fire `LimitReached`, stop.
    LimitReached,
    /// The margin was crossed without a renewal: fire `Uncertain`, go on.
    Uncertain,
    /// Send a renewal now.
    Renew,
    /// Nothing to do before this instant.
    Sleep(Instant),
}

/// The instant at which the safety margin is crossed.
pub(crate) fn uncertain_at(deadline: Instant, margin: Duration) -> Instant {
    deadline.checked_sub(margin).unwrap_or(deadline)
}

/// Decides what renewal does at `now` for a lock on `term`: valid until
/// its deadline, each renewal buying its budget (`ttl − drift`).
///
/// The next renewal is due `interval` after the last successful one (that
/// is, at `deadline − budget + interval`, so a manual extension moves it
/// too), but at the latest `lead` before the margin is crossed; after a
/// failed attempt, `retry` after it. Attempts are never closer than
/// `retry`.
pub(crate) fn next_step(
    now: Instant,
    term: &Term,
    timing: &Timing,
    limits: &Limits,
    progress: &Progress,
) -> Step {
    let (deadline, budget) = (term.deadline, term.ttl.budget());
    if now >= deadline {
        return Step::Expired;
    }
    let count_reached = limits
        .max_renewals
        .is_some_and(|max| progress.renewals >= max);
    let time_reached = limits.hold_until.is_some_and(|until| now >= until);
    if count_reached || time_reached {
        return Step::LimitReached;
    }
    let warn_at = uncertain_at(deadline, timing.margin);
    if !progress.uncertain && now >= warn_at {
        return Step::Uncertain;
    }
    let after_attempt = |t: Instant| t.checked_add(timing.retry).unwrap_or(t);
    let mut due = match progress.last_attempt {
        Some(t) if progress.last_failed => after_attempt(t),
        _ => {
            let latest = warn_at.checked_sub(timing.lead).unwrap_or(warn_at);
            deadline
                .checked_sub(budget)
                .and_then(|anchor| anchor.checked_add(timing.interval))
                .map_or(latest, |by_interval| by_interval.min(latest))
        }
    };
    if let Some(t) = progress.last_attempt {
        due = due.max(after_attempt(t));
    }
    if now >= due {
        return Step::Renew;
    }
    let mut wake = due.min(deadline);
    if !progress.uncertain {
        wake = wake.min(warn_at);
    }
    if let Some(until) = limits.hold_until {
        wake = wake.min(until);
    }
    Step::Sleep(wake)
}

// The durations resolved for a TTL, and every decision of `next_step`.
#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);
    const S: Duration = Duration::from_secs(1);
    const NODE_TIMEOUT: Duration = Duration::from_millis(50);

    /// A term of `ttl` (with the default drift) ending at `deadline`.
    fn term_at(deadline: Instant, ttl: Duration, factor: f64) -> Term {
        Term {
            deadline,
            ttl: Ttl::new(ttl, factor),
        }
    }

    fn term(ttl: Duration) -> Term {
        term_at(Instant::now(), ttl, 0.01)
    }

    fn timing_for(ttl: Duration) -> Timing {
        Timing::checked(&Renewal::new(), term(ttl).ttl, NODE_TIMEOUT).expect("defaults work")
    }

    #[test]
    fn defaults_renew_every_third_with_a_tenth_or_two_timeouts_of_margin() {
        let t = timing_for(30 * S);
        assert_eq!(t.interval, 10 * S);
        assert_eq!(t.margin, 3 * S);
        assert_eq!(t.retry, S, "a tenth of the interval");
        // Short TTL: two node timeouts beat a tenth.
        let t = timing_for(600 * MS);
        assert_eq!(t.margin, 100 * MS);
        assert_eq!(t.interval, 200 * MS);
        assert_eq!(t.retry, NODE_TIMEOUT, "at least the node timeout");
    }

    #[test]
    fn default_margin_stays_inside_the_budget_for_tiny_ttls() {
        let tiny = term(60 * MS);
        let t =
            Timing::checked(&Renewal::new(), tiny.ttl, NODE_TIMEOUT).expect("defaults always work");
        let budget = tiny.ttl.budget();
        assert!(t.margin <= budget / 2, "{t:?}");
        assert!(t.interval + t.margin < budget, "{t:?}");
        assert!(!t.interval.is_zero());
        // A huge drift factor shortens the default interval too.
        let drifty = term_at(Instant::now(), S, 0.6);
        let t = Timing::checked(&Renewal::new(), drifty.ttl, NODE_TIMEOUT).unwrap();
        assert!(t.interval + t.margin < drifty.ttl.budget(), "{t:?}");
    }

    #[test]
    fn settings_that_cannot_work_are_refused() {
        let second = term(S);
        let check = |interval, margin| {
            let settings = Renewal {
                interval,
                margin,
                ..Renewal::new()
            };
            Timing::checked(&settings, second.ttl, NODE_TIMEOUT)
        };
        let zero = check(Some(Duration::ZERO), None);
        assert!(zero.unwrap_err().contains("larger than zero"));
        let big_margin = check(None, Some(S));
        assert!(big_margin.unwrap_err().contains("margin"));
        let late = check(Some(900 * MS), None);
        assert!(late.unwrap_err().contains("after the safety margin"));
        let ok = check(Some(500 * MS), Some(Duration::ZERO)).unwrap();
        assert_eq!((ok.interval, ok.margin), (500 * MS, Duration::ZERO));
    }

    #[test]
    fn clamped_timing_clamps_instead_of_refusing() {
        let second = Ttl {
            duration: S,
            drift: 12 * MS,
        };
        let t = Timing::clamped(
            &Renewal::every(Duration::ZERO).margin(10 * S),
            second,
            NODE_TIMEOUT,
        );
        assert_eq!(t.margin, S - 12 * MS);
        assert_eq!(t.interval, MIN_SPACING);
        assert!(!t.retry.is_zero());
    }

    #[test]
    fn retry_delay_is_bounded() {
        let retry_delay = |interval, node_timeout| {
            let ttl = Ttl::new(Duration::from_secs(60), 0.01);
            Timing::clamped(&Renewal::every(interval), ttl, node_timeout).retry
        };
        assert_eq!(retry_delay(10 * S, NODE_TIMEOUT), S);
        assert_eq!(retry_delay(200 * MS, NODE_TIMEOUT), NODE_TIMEOUT);
        assert_eq!(retry_delay(20 * MS, NODE_TIMEOUT), 20 * MS);
        assert_eq!(retry_delay(Duration::ZERO, Duration::ZERO), MIN_SPACING);
    }

    /// A 30 s lock granted at `t0`, with the default timing.
    struct Clock {
        t0: Instant,
        ttl: Duration,
        timing: Timing,
    }

    impl Clock {
        fn new() -> Self {
            let ttl = 30 * S;
            Self {
                t0: Instant::now(),
                ttl,
                timing: timing_for(ttl),
            }
        }

        fn at(&self, d: Duration) -> Instant {
            self.t0 + d
        }

        fn budget(&self) -> Duration {
            self.ttl - crate::validity::drift(self.ttl, 0.01)
        }

        /// Deadline of a lock granted or renewed at `d`.
        fn renewed_at(&self, d: Duration) -> Instant {
            self.at(d) + self.budget()
        }

        /// The decision at the instant `now`.
        fn next(&self, now: Instant, deadline: Instant, limits: Limits, p: Progress) -> Step {
            let term = term_at(deadline, self.ttl, 0.01);
            next_step(now, &term, &self.timing, &limits, &p)
        }

        /// The decision at `now` after `t0`.
        fn step(&self, now: Duration, deadline: Instant, limits: Limits, p: Progress) -> Step {
            self.next(self.at(now), deadline, limits, p)
        }
    }

    #[test]
    fn healthy_renewal_sleeps_until_a_third_of_the_ttl() {
        let c = Clock::new();
        let deadline = c.renewed_at(Duration::ZERO);
        let p = Progress::default();
        assert_eq!(
            c.step(Duration::ZERO, deadline, Limits::default(), p),
            Step::Sleep(c.at(10 * S))
        );
        assert_eq!(c.step(10 * S, deadline, Limits::default(), p), Step::Renew);
        // After a renewal at 10 s the next is due at 20 s.
        let p = Progress {
            renewals: 1,
            last_attempt: Some(c.at(10 * S)),
            ..p
        };
        assert_eq!(
            c.step(10 * S + MS, c.renewed_at(10 * S), Limits::default(), p),
            Step::Sleep(c.at(20 * S))
        );
    }

    #[test]
    fn a_manual_extension_moves_the_next_renewal() {
        let c = Clock::new();
        let p = Progress::default();
        // Extended by hand at 7 s: the next renewal is due at 17 s.
        assert_eq!(
            c.step(8 * S, c.renewed_at(7 * S), Limits::default(), p),
            Step::Sleep(c.at(17 * S))
        );
    }

    #[test]
    fn after_an_extension_to_a_shorter_ttl_renewal_follows_the_new_ttl() {
        let c = Clock::new();
        // Granted for 30 s at 0; extended to 2 s at 1 s. The schedule is
        // asked with the new term: renew a third of 2 s after the extension,
        // not 10 s after the grant.
        let ttl = 2 * S;
        let timing = timing_for(ttl);
        let short = term_at(c.at(S) + term(ttl).ttl.budget(), ttl, 0.01);
        let p = Progress::default();
        let step = |now| next_step(now, &short, &timing, &Limits::default(), &p);
        let due = c.at(S) + timing.interval;
        assert_eq!(step(c.at(S)), Step::Sleep(due));
        assert!(due < c.at(2 * S), "{due:?}");
        assert_eq!(step(due), Step::Renew);
        // Had renewal missed it, the margin of the new TTL warns in time.
        let late = Progress {
            last_attempt: Some(due),
            last_failed: true,
            ..p
        };
        let warn_at = uncertain_at(short.deadline, timing.margin);
        assert_eq!(
            next_step(warn_at, &short, &timing, &Limits::default(), &late),
            Step::Uncertain
        );
    }

    #[test]
    fn failures_are_retried_then_uncertain_then_expired() {
        let c = Clock::new();
        let deadline = c.renewed_at(Duration::ZERO);
        let failed = Progress {
            last_attempt: Some(c.at(10 * S)),
            last_failed: true,
            ..Progress::default()
        };
        assert_eq!(
            c.step(10 * S + 50 * MS, deadline, Limits::default(), failed),
            Step::Sleep(c.at(11 * S)),
            "retry after a tenth of the interval"
        );
        assert_eq!(
            c.step(11 * S, deadline, Limits::default(), failed),
            Step::Renew
        );
        // Still failing when the margin (3 s before the deadline) is crossed.
        let warn = deadline - 3 * S;
        let late = Progress {
            last_attempt: Some(warn - 500 * MS),
            ..failed
        };
        assert_eq!(
            c.next(warn, deadline, Limits::default(), late),
            Step::Uncertain
        );
        let warned = Progress {
            uncertain: true,
            ..late
        };
        assert_eq!(
            c.next(warn, deadline, Limits::default(), warned),
            Step::Sleep(warn + 500 * MS),
            "keeps retrying after the warning"
        );
        assert_eq!(
            c.next(deadline, deadline, Limits::default(), warned),
            Step::Expired
        );
    }

    #[test]
    fn a_failed_renewal_is_retried_even_after_an_extension_moved_the_deadline() {
        let c = Clock::new();
        // Renewal failed at 10 s; the holder then extended by hand at 10.5 s.
        // The retry stays due a retry delay after the failure (11 s), not an
        // interval after the extension (20.5 s).
        let failed = Progress {
            last_attempt: Some(c.at(10 * S)),
            last_failed: true,
            ..Progress::default()
        };
        let extended = c.renewed_at(10 * S + 500 * MS);
        assert_eq!(
            c.step(10 * S + 600 * MS, extended, Limits::default(), failed),
            Step::Sleep(c.at(11 * S))
        );
    }

    #[test]
    fn the_margin_wakes_the_task_even_while_waiting_for_a_retry() {
        let c = Clock::new();
        let deadline = c.renewed_at(Duration::ZERO);
        let warn = deadline - 3 * S;
        // Retry due after the margin point: wake at the margin first.
        let p = Progress {
            last_attempt: Some(warn - 100 * MS),
            last_failed: true,
            ..Progress::default()
        };
        assert_eq!(
            c.next(warn - 50 * MS, deadline, Limits::default(), p),
            Step::Sleep(warn)
        );
    }

    #[test]
    fn renewal_comes_before_the_margin_even_with_a_long_interval() {
        let mut c = Clock::new();
        c.timing.interval = c.budget(); // as if the TTL had shrunk
        let deadline = c.renewed_at(Duration::ZERO);
        let latest = deadline - c.timing.margin - c.timing.lead;
        assert_eq!(
            c.step(
                Duration::ZERO,
                deadline,
                Limits::default(),
                Progress::default()
            ),
            Step::Sleep(latest)
        );
    }

    #[test]
    fn attempts_are_never_closer_than_the_retry_delay() {
        let mut c = Clock::new();
        c.timing.margin = c.budget(); // the margin point is already passed
        let deadline = c.renewed_at(Duration::ZERO);
        let p = Progress {
            last_attempt: Some(c.at(S)),
            uncertain: true,
            ..Progress::default()
        };
        assert_eq!(
            c.step(S + MS, deadline, Limits::default(), p),
            Step::Sleep(c.at(S) + c.timing.retry),
            "no busy loop"
        );
    }

    #[test]
    fn caps_end_renewal() {
        let c = Clock::new();
        let deadline = c.renewed_at(20 * S);
        let count = Limits {
            max_renewals: Some(2),
            hold_until: None,
        };
        let p = Progress {
            renewals: 2,
            last_attempt: Some(c.at(20 * S)),
            ..Progress::default()
        };
        assert_eq!(c.step(20 * S, deadline, count, p), Step::LimitReached);
        let under = Progress { renewals: 1, ..p };
        assert!(matches!(
            c.step(20 * S, deadline, count, under),
            Step::Sleep(_)
        ));

        let time = Limits {
            max_renewals: None,
            hold_until: Some(c.at(25 * S)),
        };
        assert_eq!(
            c.step(21 * S, deadline, time, under),
            Step::Sleep(c.at(25 * S)),
            "wakes at the hold cap, before the next renewal at 30 s"
        );
        assert_eq!(c.step(25 * S, deadline, time, under), Step::LimitReached);
        let zero = Limits {
            max_renewals: Some(0),
            hold_until: None,
        };
        assert_eq!(
            c.step(
                Duration::ZERO,
                c.renewed_at(Duration::ZERO),
                zero,
                Progress::default()
            ),
            Step::LimitReached
        );
    }

    #[test]
    fn expiry_beats_everything() {
        let c = Clock::new();
        let deadline = c.renewed_at(Duration::ZERO);
        let limits = Limits {
            max_renewals: Some(0),
            hold_until: Some(c.t0),
        };
        assert_eq!(
            c.next(deadline + S, deadline, limits, Progress::default()),
            Step::Expired
        );
    }

    #[test]
    fn uncertain_at_never_underflows() {
        let now = Instant::now();
        assert_eq!(uncertain_at(now, Duration::ZERO), now);
        assert!(uncertain_at(now, S) < now);
        assert_eq!(uncertain_at(now, Duration::MAX), now);
    }
}
