//! Pure Redlock arithmetic: quorum size, clock drift, validity and the
//! deadline it gives, the running tally that decides an operation as soon
//! as its outcome is known, and the retry delay. No I/O lives here, so
//! every rule is unit-tested in isolation.

use std::time::{Duration, Instant};

/// The fixed part of the drift allowance the Redlock specification adds to
/// `ttl × drift_factor` (2 ms).
pub(crate) const DRIFT_FLOOR: Duration = Duration::from_millis(2);

/// Number of votes that make a majority of `nodes` (`nodes / 2 + 1`).
///
/// For zero nodes this returns 1, so no quorum can ever be reached; the
/// builder rejects an empty node list before it gets here.
pub(crate) const fn quorum(nodes: usize) -> usize {
    nodes / 2 + 1
}

/// Drift allowance for a lock of `ttl`: `ttl × factor + 2 ms`.
///
/// `factor` is clamped to `[0, 1]`; a non-finite factor counts as 0.
pub(crate) fn drift(ttl: Duration, factor: f64) -> Duration {
    let factor = if factor.is_finite() {
        factor.clamp(0.0, 1.0)
    } else {
        0.0
    };
    Duration::try_from_secs_f64(ttl.as_secs_f64() * factor)
        .unwrap_or(Duration::MAX)
        .saturating_add(DRIFT_FLOOR)
}

/// Validity left after an operation that took `elapsed`:
/// `ttl − elapsed − drift`, or `None` when nothing (or exactly nothing) is
/// left. Never underflows.
pub(crate) fn validity(ttl: Duration, elapsed: Duration, drift: Duration) -> Option<Duration> {
    let left = ttl.checked_sub(elapsed)?.checked_sub(drift)?;
    (!left.is_zero()).then_some(left)
}

/// The end of the validity bought by an operation that started at `start`
/// and set `ttl` on the nodes: `start + ttl − drift`. `None` when the drift
/// leaves nothing of the TTL, or the instant cannot be represented.
///
/// `start` must be taken before the first command is sent: every node
/// starts its TTL later, so the keys outlive this deadline.
pub(crate) fn deadline(start: Instant, ttl: Duration, drift: Duration) -> Option<Instant> {
    let budget = ttl.checked_sub(drift).filter(|b| !b.is_zero())?;
    start.checked_add(budget)
}

/// What a node said to an operation, reduced to the three cases the quorum
/// logic needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Vote {
    /// The node did what was asked (set the key, extended it, confirmed release).
    Yes,
    /// The node answered but refused: the key is held by another token.
    No,
    /// The node did not answer usably: timeout, connection error, error reply.
    Failed,
}

/// The decision a [`Tally`] reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// A quorum said yes.
    Reached,
    /// A quorum can no longer be reached, whatever the remaining nodes say.
    Impossible,
}

/// Running count of votes for one fan-out, deciding at the earliest moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Tally {
    nodes: usize,
    needed: usize,
    yes: usize,
    no: usize,
    failed: usize,
}

impl Tally {
    /// A tally over `nodes` nodes needing `needed` yes votes.
    pub(crate) const fn new(nodes: usize, needed: usize) -> Self {
        Self {
            nodes,
            needed,
            yes: 0,
            no: 0,
            failed: 0,
        }
    }

    /// Records one vote and returns the decision once it is known.
    pub(crate) fn record(&mut self, vote: Vote) -> Option<Decision> {
        match vote {
            Vote::Yes => self.yes += 1,
            Vote::No => self.no += 1,
            Vote::Failed => self.failed += 1,
        }
        self.decision()
    }

    /// The decision so far, if any.
    pub(crate) fn decision(&self) -> Option<Decision> {
        if self.yes >= self.needed {
            Some(Decision::Reached)
        } else if self.yes + self.pending() < self.needed {
            Some(Decision::Impossible)
        } else {
            None
        }
    }

    /// Nodes that have not voted yet.
    pub(crate) fn pending(&self) -> usize {
        self.nodes.saturating_sub(self.yes + self.no + self.failed)
    }

    /// Yes votes so far.
    pub(crate) fn yes(&self) -> usize {
        self.yes
    }

    /// No votes (held by someone else) so far.
    pub(crate) fn no(&self) -> usize {
        self.no
    }

    /// Failed votes so far.
    pub(crate) fn failed(&self) -> usize {
        self.failed
    }

    /// Yes votes needed.
    pub(crate) fn needed(&self) -> usize {
        self.needed
    }

    /// True when the failures alone make the quorum impossible: the cluster
    /// is unavailable rather than the lock being contended.
    pub(crate) fn outage(&self) -> bool {
        self.nodes.saturating_sub(self.failed) < self.needed
    }

    /// True when the refusals alone are a quorum: other tokens sit on a
    /// majority of the nodes, so whoever set them, not this attempt's
    /// cleanup, has something to announce to waiters when it lets go.
    pub(crate) fn held_elsewhere(&self) -> bool {
        self.no >= self.needed
    }
}

/// Uniform random delay in `[min, max]` from `unit`, a number in `[0, 1)`.
/// Taking the random number as input keeps this deterministic under test.
pub(crate) fn backoff(min: Duration, max: Duration, unit: f64) -> Duration {
    let (lo, hi) = if min <= max { (min, max) } else { (max, min) };
    let unit = if unit.is_finite() {
        unit.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let span = hi.saturating_sub(lo);
    // `mul_f64` panics when rounding carries the product past
    // `Duration::MAX` (e.g. a span of `Duration::MAX` and a unit near 1).
    let part = Duration::try_from_secs_f64(span.as_secs_f64() * unit)
        .unwrap_or(span)
        .min(span);
    lo.saturating_add(part)
}

/// Truncates `ttl` to whole milliseconds, the unit of `PX`/`PEXPIRE`.
/// Validity must be computed from what the server was told, not from the
/// sub-millisecond remainder it never saw.
pub(crate) fn whole_millis(ttl: Duration) -> Duration {
    Duration::from_millis(millis(ttl))
}

/// `ttl` in whole milliseconds, saturating at `u64::MAX`.
pub(crate) fn millis(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Tally {
        /// A tally over `nodes` nodes needing a majority.
        const fn majority(nodes: usize) -> Self {
            Self::new(nodes, quorum(nodes))
        }
    }

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn quorum_is_a_strict_majority() {
        let expected = [
            (1, 1),
            (2, 2),
            (3, 2),
            (4, 3),
            (5, 3),
            (6, 4),
            (7, 4),
            (9, 5),
        ];
        for (n, q) in expected {
            assert_eq!(quorum(n), q, "n = {n}");
            assert!(2 * quorum(n) > n, "two quorums of {n} must intersect");
        }
        assert_eq!(quorum(0), 1);
    }

    #[test]
    fn an_attempt_is_held_elsewhere_when_its_refusals_are_a_quorum() {
        let held = |votes: &[Vote]| {
            let mut t = Tally::majority(5);
            for &v in votes {
                let _ = t.record(v);
            }
            t.held_elsewhere()
        };
        let (y, n, f) = (Vote::Yes, Vote::No, Vote::Failed);
        // Lost to a holder of three or more nodes; then a split, an outage.
        assert!(held(&[n, n, n, n, n]) && held(&[y, y, n, n, n]) && held(&[n, f, n, f, n]));
        assert!(!held(&[y, y, n, n, f]) && !held(&[y, n, n, f, f]) && !held(&[f; 5]));
    }

    #[test]
    fn drift_is_one_percent_plus_two_ms() {
        assert_eq!(
            drift(Duration::from_secs(10), 0.01),
            Duration::from_millis(102)
        );
        assert_eq!(
            drift(Duration::from_secs(30), 0.01),
            Duration::from_millis(302)
        );
        assert_eq!(drift(Duration::ZERO, 0.01), DRIFT_FLOOR);
        assert_eq!(drift(Duration::from_secs(1), f64::NAN), DRIFT_FLOOR);
        assert_eq!(drift(Duration::from_secs(1), -3.0), DRIFT_FLOOR);
        assert_eq!(
            drift(Duration::from_secs(1), 7.0),
            Duration::from_millis(1002)
        );
        assert_eq!(
            drift(Duration::MAX, 1.0),
            Duration::MAX,
            "saturates, never panics"
        );
        assert!(drift(Duration::MAX, 0.5) > Duration::from_secs(u64::MAX / 4));
    }

    #[test]
    fn validity_subtracts_elapsed_and_drift() {
        let ttl = Duration::from_secs(10);
        let d = drift(ttl, 0.01);
        assert_eq!(
            validity(ttl, Duration::from_millis(8), d),
            Some(Duration::from_millis(10_000 - 8 - 102))
        );
    }

    #[test]
    fn validity_never_underflows() {
        assert_eq!(validity(MS, Duration::ZERO, DRIFT_FLOOR), None);
        assert_eq!(validity(3 * MS, 2 * MS, 2 * MS), None);
        assert_eq!(
            validity(4 * MS, 2 * MS, 2 * MS),
            None,
            "exactly zero is not granted"
        );
        assert_eq!(
            validity(Duration::ZERO, Duration::ZERO, Duration::ZERO),
            None
        );
        assert_eq!(validity(5 * MS, Duration::MAX, Duration::ZERO), None);
        assert_eq!(validity(5 * MS, 2 * MS, 2 * MS), Some(MS));
    }

    #[test]
    fn deadline_is_start_plus_ttl_minus_drift() {
        let start = Instant::now();
        let ttl = Duration::from_secs(10);
        let d = drift(ttl, 0.01);
        assert_eq!(
            deadline(start, ttl, d),
            Some(start + Duration::from_millis(9_898))
        );
        assert_eq!(deadline(start, 2 * MS, 2 * MS), None, "nothing left");
        assert_eq!(deadline(start, MS, 2 * MS), None, "never underflows");
        assert_eq!(deadline(start, Duration::MAX, MS), None, "never overflows");
    }

    #[test]
    fn tally_decides_at_the_quorum_th_yes() {
        let mut t = Tally::majority(5);
        assert_eq!(t.record(Vote::Yes), None);
        assert_eq!(t.record(Vote::Failed), None);
        assert_eq!(t.record(Vote::Yes), None);
        assert_eq!(t.record(Vote::Yes), Some(Decision::Reached));
        assert_eq!(t.pending(), 1);
    }

    #[test]
    fn tally_fails_as_soon_as_quorum_is_impossible() {
        let mut t = Tally::majority(5);
        assert_eq!(t.record(Vote::No), None);
        assert_eq!(t.record(Vote::Failed), None);
        assert_eq!(t.record(Vote::No), Some(Decision::Impossible));
        assert_eq!(t.pending(), 2, "decided without waiting for two nodes");
        assert!(!t.outage());
    }

    #[test]
    fn tally_tells_outage_from_contention() {
        let mut t = Tally::majority(5);
        for _ in 0..3 {
            t.record(Vote::Failed);
        }
        assert_eq!(t.decision(), Some(Decision::Impossible));
        assert!(t.outage());

        let mut t = Tally::majority(5);
        t.record(Vote::Failed);
        t.record(Vote::Failed);
        assert_eq!(t.record(Vote::No), Some(Decision::Impossible));
        assert!(!t.outage(), "two failures alone leave a quorum possible");
    }

    #[test]
    fn tally_works_for_one_and_even_counts() {
        let mut t = Tally::majority(1);
        assert_eq!(t.record(Vote::Yes), Some(Decision::Reached));
        let mut t = Tally::majority(1);
        assert_eq!(t.record(Vote::No), Some(Decision::Impossible));

        let mut t = Tally::majority(4);
        assert_eq!(t.needed(), 3);
        t.record(Vote::Yes);
        t.record(Vote::Yes);
        assert_eq!(t.record(Vote::No), None);
        assert_eq!(t.record(Vote::Yes), Some(Decision::Reached));

        let mut t = Tally::majority(4);
        t.record(Vote::Yes);
        t.record(Vote::No);
        assert_eq!(t.record(Vote::No), Some(Decision::Impossible));
    }

    #[test]
    fn tally_counts_every_kind() {
        let mut t = Tally::majority(7);
        t.record(Vote::Yes);
        t.record(Vote::No);
        t.record(Vote::Failed);
        assert_eq!((t.yes(), t.no(), t.failed(), t.pending()), (1, 1, 1, 4));
    }

    #[test]
    fn backoff_stays_in_range() {
        let (lo, hi) = (Duration::ZERO, Duration::from_millis(200));
        assert_eq!(backoff(lo, hi, 0.0), lo);
        assert_eq!(backoff(lo, hi, 0.5), Duration::from_millis(100));
        assert!(backoff(lo, hi, 0.999_999) <= hi);
        assert_eq!(backoff(lo, hi, 2.0), hi);
        assert_eq!(backoff(lo, hi, f64::NAN), lo);
        assert_eq!(backoff(hi, lo, 0.0), lo, "swapped bounds are tolerated");
        assert_eq!(backoff(hi, hi, 0.7), hi);
    }

    #[test]
    fn backoff_never_overflows() {
        let max = Duration::MAX;
        for unit in [0.0, 0.5, 0.999_999_999, 1.0] {
            let d = backoff(Duration::ZERO, max, unit);
            assert!(d <= max, "{unit}: {d:?}");
            assert_eq!(backoff(max, max, unit), max);
        }
        assert_eq!(backoff(Duration::ZERO, max, 1.0), max);
    }

    #[test]
    fn ttl_is_truncated_to_what_the_server_sees() {
        assert_eq!(whole_millis(Duration::from_micros(1_999)), MS);
        assert_eq!(whole_millis(Duration::from_micros(999)), Duration::ZERO);
        assert_eq!(millis(Duration::MAX), u64::MAX);
    }
}
