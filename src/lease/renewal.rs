//! The public settings of automatic renewal. What they resolve to for one
//! TTL (and the defaults) is the schedule's business (`schedule`).

use std::time::{Duration, Instant};

use super::schedule::{Limits, Timing};
use super::term::Term;

/// Settings of automatic renewal, for [`Lock::auto_renew`](crate::Lock::auto_renew)
/// and [`LockRequest::auto_renew`](crate::LockRequest::auto_renew).
///
/// Every renewal is the same compare-and-pexpire fan-out as
/// [`Lock::extend`](crate::Lock::extend), with the lock's current TTL: it
/// counts only with a majority inside the current validity, and never
/// re-creates an expired lock. Once a renewal is confirmed, the nodes that
/// answered that the key is missing get it back (`SET NX`, until the new
/// validity ends; never where another token holds it): a lock that lost a
/// key to a node restart regains its full coverage.
///
/// | setting | default |
/// |---|---|
/// | [`interval`](Renewal::interval) | `TTL / 3` (shortened if it would reach the safety margin) |
/// | [`margin`](Renewal::margin) | `max(TTL / 10, 2 × node timeout)`, at most half the validity budget `TTL − drift` |
/// | [`max_renewals`](Renewal::max_renewals) | unlimited |
/// | [`max_hold`](Renewal::max_hold) | unlimited |
///
/// After a failed attempt that leaves the lock uncertain (timeouts,
/// connection or error replies, but no majority saying the key is gone),
/// the next attempt follows after a tenth of the interval (at least the
/// node timeout) until the lock is renewed or its validity runs out.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use quorumlock::Renewal;
///
/// // Every 5 s; tell me when less than 4 s are left without a renewal;
/// // never hold for more than an hour.
/// let renewal = Renewal::every(Duration::from_secs(5))
///     .margin(Duration::from_secs(4))
///     .max_hold(Duration::from_secs(3600));
/// assert_ne!(renewal, Renewal::default());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[must_use = "settings do nothing until passed to auto_renew or LockRequest::auto_renew"]
pub struct Renewal {
    interval: Option<Duration>,
    margin: Option<Duration>,
    max_renewals: Option<u32>,
    max_hold: Option<Duration>,
}

impl Renewal {
    /// The defaults: renew every third of the TTL, no caps.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(quorumlock::Renewal::new(), quorumlock::Renewal::default());
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// The defaults, renewing every `interval`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let renewal = quorumlock::Renewal::every(Duration::from_secs(10));
    /// # let _ = renewal;
    /// ```
    pub fn every(interval: Duration) -> Self {
        Self::default().interval(interval)
    }

    /// Time from one successful renewal (or the acquisition) to the next
    /// attempt. Must be above zero and, with the margin, below the validity
    /// budget `TTL − drift`; [`Lock::auto_renew`](crate::Lock::auto_renew)
    /// checks this against the lock's TTL.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let renewal = quorumlock::Renewal::new().interval(Duration::from_millis(500));
    /// # let _ = renewal;
    /// ```
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = Some(interval);
        self
    }

    /// The safety margin: when the validity left drops below it and no
    /// renewal has confirmed the lock, the signal fires
    /// [`LossKind::Uncertain`](crate::LossKind::Uncertain) — before the
    /// validity reaches zero, so the holder can stop in time. Must be below
    /// the validity budget `TTL − drift`; zero turns the early warning off
    /// (the signal then fires only at expiry).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let renewal = quorumlock::Renewal::new().margin(Duration::from_secs(2));
    /// # let _ = renewal;
    /// ```
    pub fn margin(mut self, margin: Duration) -> Self {
        self.margin = Some(margin);
        self
    }

    /// Renew at most `count` times. After the last renewal the signal fires
    /// [`LossKind::LimitReached`](crate::LossKind::LimitReached), renewal
    /// ends, and the lock runs out the validity that renewal gave it.
    ///
    /// # Examples
    ///
    /// ```
    /// let renewal = quorumlock::Renewal::new().max_renewals(100);
    /// # let _ = renewal;
    /// ```
    pub fn max_renewals(mut self, count: u32) -> Self {
        self.max_renewals = Some(count);
        self
    }

    /// Renew only until `limit` has passed since the lock was granted. Then
    /// the signal fires [`LossKind::LimitReached`](crate::LossKind::LimitReached),
    /// renewal ends, and the lock runs out the validity it has left (at
    /// most one TTL more).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let renewal = quorumlock::Renewal::new().max_hold(Duration::from_secs(15 * 60));
    /// # let _ = renewal;
    /// ```
    pub fn max_hold(mut self, limit: Duration) -> Self {
        self.max_hold = Some(limit);
        self
    }

    /// The caps of these settings, for a lock granted at `granted`.
    pub(crate) fn limits(&self, granted: Instant) -> Limits {
        Limits {
            max_renewals: self.max_renewals,
            hold_until: self.max_hold.and_then(|limit| granted.checked_add(limit)),
        }
    }

    /// The schedule's durations for a lock on `term`, or why these
    /// settings cannot work for its TTL.
    pub(crate) fn timing(&self, term: &Term, node_timeout: Duration) -> Result<Timing, String> {
        Timing::checked(self.interval, self.margin, term, node_timeout)
    }

    /// As [`timing`](Self::timing), for a TTL that changed after the
    /// settings were checked: out-of-range values are clamped, not refused.
    pub(crate) fn timing_clamped(&self, term: &Term, node_timeout: Duration) -> Timing {
        Timing::clamped(self.interval, self.margin, term, node_timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_reach_the_schedule() {
        let granted = Instant::now();
        let hour = Duration::from_secs(3600);
        let limits = Renewal::new()
            .max_renewals(3)
            .max_hold(hour)
            .limits(granted);
        assert_eq!(limits.max_renewals, Some(3));
        assert_eq!(limits.hold_until, Some(granted + hour));
        let unbounded = Renewal::new().max_hold(Duration::MAX).limits(granted);
        assert_eq!(unbounded, Limits::default(), "too far away is no cap");

        let term = Term {
            deadline: granted,
            ttl: Duration::from_secs(30),
            drift: Duration::from_millis(302),
        };
        let every = Renewal::every(Duration::from_secs(5)).margin(Duration::from_secs(4));
        let timing = every.timing(&term, Duration::from_millis(50)).unwrap();
        assert_eq!(
            (timing.interval, timing.margin),
            (Duration::from_secs(5), Duration::from_secs(4))
        );
        let too_late = Renewal::every(Duration::from_secs(29));
        assert!(too_late.timing(&term, Duration::from_millis(50)).is_err());
        let clamped = too_late.timing_clamped(&term, Duration::from_millis(50));
        assert_eq!(clamped.interval, Duration::from_secs(29));
    }
}
