//! Unit tests of the renewal schedule: the durations resolved for a TTL,
//! and every decision of `next_step`.

use super::*;

const MS: Duration = Duration::from_millis(1);
const S: Duration = Duration::from_secs(1);
const NODE_TIMEOUT: Duration = Duration::from_millis(50);

/// A term of `ttl` (with the default drift) ending at `deadline`.
fn term_at(deadline: Instant, ttl: Duration, factor: f64) -> Term {
    Term {
        deadline,
        ttl,
        drift: crate::validity::drift(ttl, factor),
    }
}

fn term(ttl: Duration) -> Term {
    term_at(Instant::now(), ttl, 0.01)
}

fn timing_for(ttl: Duration) -> Timing {
    Timing::checked(None, None, &term(ttl), NODE_TIMEOUT).expect("defaults work")
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
    let t = Timing::checked(None, None, &tiny, NODE_TIMEOUT).expect("defaults always work");
    let budget = tiny.budget();
    assert!(t.margin <= budget / 2, "{t:?}");
    assert!(t.interval + t.margin < budget, "{t:?}");
    assert!(!t.interval.is_zero());
    // A huge drift factor shortens the default interval too.
    let drifty = term_at(Instant::now(), S, 0.6);
    let t = Timing::checked(None, None, &drifty, NODE_TIMEOUT).unwrap();
    assert!(t.interval + t.margin < drifty.budget(), "{t:?}");
}

#[test]
fn settings_that_cannot_work_are_refused() {
    let second = term(S);
    let check = |interval, margin| Timing::checked(interval, margin, &second, NODE_TIMEOUT);
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
    let second = Term {
        deadline: Instant::now(),
        ttl: S,
        drift: 12 * MS,
    };
    let t = Timing::clamped(Some(Duration::ZERO), Some(10 * S), &second, NODE_TIMEOUT);
    assert_eq!(t.margin, S - 12 * MS);
    assert_eq!(t.interval, MIN_SPACING);
    assert!(!t.retry.is_zero());
}

#[test]
fn retry_delay_is_bounded() {
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
    let short = term_at(c.at(S) + term(ttl).budget(), ttl, 0.01);
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
