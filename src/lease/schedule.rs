//! The pure renewal schedule: the durations it works with (resolved from
//! the settings for one TTL, with their defaults), the caps, what renewal
//! has done so far, and [`next_step`], which decides from the lock's term
//! whether to renew now, wait, or fire the lost-lock signal. The task that
//! follows it is `task`; nothing here does I/O or reads the clock.

use std::time::{Duration, Instant};

use super::term::Term;

/// Shortest delay between two renewal attempts, whatever the settings.
const MIN_SPACING: Duration = Duration::from_millis(1);

/// Default safety margin: `max(ttl / 10, 2 × node_timeout)`, at most half
/// the validity budget.
fn default_margin(ttl: Duration, budget: Duration, node_timeout: Duration) -> Duration {
    (ttl / 10)
        .max(node_timeout.saturating_mul(2))
        .min(budget / 2)
}

/// Default interval: a third of the TTL, shortened to half of what the
/// margin leaves of the budget, so renewal always comes before the margin.
fn default_interval(ttl: Duration, budget: Duration, margin: Duration) -> Duration {
    (ttl / 3)
        .min(budget.saturating_sub(margin) / 2)
        .max(MIN_SPACING)
}

/// Delay before retrying after a failed attempt: a tenth of the interval,
/// at least the node timeout, at most the interval.
fn retry_delay(interval: Duration, node_timeout: Duration) -> Duration {
    (interval / 10)
        .max(node_timeout)
        .min(interval)
        .max(MIN_SPACING)
}

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
    /// The durations for a lock on `term`'s TTL, from the settings'
    /// `interval` and `margin` (`None`: the default), or why these cannot
    /// work for it.
    pub(crate) fn checked(
        interval: Option<Duration>,
        margin: Option<Duration>,
        term: &Term,
        node_timeout: Duration,
    ) -> Result<Self, String> {
        let (ttl, budget) = (term.ttl, term.budget());
        let margin = match margin {
            Some(m) if m >= budget => {
                return Err(format!(
                    "renewal margin {m:?} must be below the validity budget {budget:?} \
                     of a {ttl:?} TTL"
                ))
            }
            Some(m) => m,
            None => default_margin(ttl, budget, node_timeout),
        };
        let interval = match interval {
            Some(i) if i.is_zero() => {
                return Err("renewal interval must be larger than zero".to_owned())
            }
            Some(i) if i.saturating_add(margin) >= budget => {
                return Err(format!(
                    "renewal every {i:?} would come after the safety margin {margin:?}: \
                     interval + margin must be below the validity budget {budget:?} \
                     of a {ttl:?} TTL"
                ))
            }
            Some(i) => i,
            None => default_interval(ttl, budget, margin),
        };
        Ok(Self::new(interval, margin, node_timeout))
    }

    /// As [`checked`](Self::checked), for a TTL that changed after the
    /// settings were checked: out-of-range values are clamped, not refused.
    pub(crate) fn clamped(
        interval: Option<Duration>,
        margin: Option<Duration>,
        term: &Term,
        node_timeout: Duration,
    ) -> Self {
        let (ttl, budget) = (term.ttl, term.budget());
        let margin = margin
            .unwrap_or_else(|| default_margin(ttl, budget, node_timeout))
            .min(budget);
        let interval = interval
            .unwrap_or_else(|| default_interval(ttl, budget, margin))
            .max(MIN_SPACING);
        Self::new(interval, margin, node_timeout)
    }

    fn new(interval: Duration, margin: Duration, node_timeout: Duration) -> Self {
        Self {
            interval,
            margin,
            retry: retry_delay(interval, node_timeout),
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
    let (deadline, budget) = (term.deadline, term.budget());
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

#[cfg(test)]
#[path = "schedule_tests.rs"]
mod tests;
