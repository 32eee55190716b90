//! The quorum rule: how many votes make a majority, the running tally that
//! decides an operation as soon as its outcome is known, and the retry
//! delay. Pure: no I/O, every rule unit-tested in isolation. The time a
//! quorum buys is computed in [`crate::validity`].

use std::time::Duration;

use crate::config::MAX_PERMITS;
use crate::node::reply::Vote;

/// Number of votes that make a majority of `nodes` (`nodes / 2 + 1`).
///
/// For zero nodes this returns 1, so no quorum can ever be reached; the
/// builder rejects an empty node list before it gets here.
pub(crate) const fn majority(nodes: usize) -> usize {
    nodes / 2 + 1
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
        self.out_of_reach(self.failed)
    }

    /// True when `refusing` nodes alone make the quorum impossible: more
    /// than `nodes − needed` of them.
    pub(crate) fn out_of_reach(&self, refusing: usize) -> bool {
        self.nodes.saturating_sub(refusing) < self.needed
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

/// How long a node has to answer a read of `keys` keys (a status read, a
/// waiter's look): the node timeout, plus as much again per
/// [`MAX_PERMITS`] keys, pro rata — twice the node
/// timeout for a semaphore's widest read. The round trip does not grow
/// with the keys; the node's work on them does.
pub(crate) fn read_timeout(node_timeout: Duration, keys: usize) -> Duration {
    let keys = u32::try_from(keys).unwrap_or(u32::MAX);
    node_timeout.saturating_add(node_timeout.saturating_mul(keys) / MAX_PERMITS)
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Tally {
        /// A tally over `nodes` nodes needing a majority.
        const fn majority(nodes: usize) -> Self {
            Self::new(nodes, majority(nodes))
        }
    }

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
            assert_eq!(majority(n), q, "n = {n}");
            assert!(2 * majority(n) > n, "two quorums of {n} must intersect");
        }
        assert_eq!(majority(0), 1);
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
    fn a_read_gets_the_node_timeout_and_as_much_again_per_1024_keys() {
        let ms = Duration::from_millis;
        assert_eq!(
            read_timeout(ms(50), 1),
            ms(50) + Duration::from_nanos(48_828)
        );
        assert_eq!(read_timeout(ms(50), 512), ms(75));
        assert_eq!(read_timeout(ms(50), 1024), ms(100));
        assert_eq!(read_timeout(Duration::MAX, 1024), Duration::MAX);
        assert_eq!(
            read_timeout(ms(50), usize::MAX),
            ms(50) + ms(50) * u32::MAX / 1024
        );
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
}
