//! The lock-level counters of one client: acquire calls by outcome, the
//! time attempts, waits and holds took, and the locks held now. Each also
//! reported to the `metrics` facade when that feature is on.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use crate::error::Error;
use crate::stats::latency::{LatencyCounters, DURATION_MICROS, LATENCY_MICROS};
use crate::stats::series::{self, LockMetrics};
use crate::stats::{Acquires, LockStats};

/// How an acquire call ended; in the order of the series' labels
/// ([`series::OUTCOMES`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Granted,
    Contended,
    Unavailable,
    Misconfigured,
    Other,
}

impl Outcome {
    /// The outcome of a call that failed with `e`.
    pub(crate) fn of(e: &Error) -> Self {
        if e.is_contended() {
            Outcome::Contended
        } else if e.is_misconfigured() {
            Outcome::Misconfigured
        } else if e.is_unavailable() {
            Outcome::Unavailable
        } else {
            Outcome::Other
        }
    }
}

#[derive(Debug)]
pub(crate) struct LockCounters {
    /// Indexed by [`Outcome`] in declaration order.
    outcomes: [AtomicU64; 5],
    lost: AtomicU64,
    held: AtomicU64,
    attempts: LatencyCounters,
    waits: LatencyCounters,
    holds: LatencyCounters,
    metrics: LockMetrics,
}

impl Default for LockCounters {
    fn default() -> Self {
        Self {
            outcomes: Default::default(),
            lost: AtomicU64::new(0),
            held: AtomicU64::new(0),
            attempts: LatencyCounters::new(&LATENCY_MICROS),
            waits: LatencyCounters::new(&DURATION_MICROS),
            holds: LatencyCounters::new(&DURATION_MICROS),
            metrics: LockMetrics::new(),
        }
    }
}

impl LockCounters {
    /// One acquire attempt took `elapsed`.
    pub(crate) fn attempted(&self, elapsed: Duration) {
        self.attempts.record(elapsed);
        self.metrics.attempt(elapsed);
    }

    /// An acquire call ended in `outcome` after `waited`.
    pub(crate) fn acquired(&self, outcome: Outcome, waited: Duration) {
        self.outcomes[outcome as usize].fetch_add(1, Relaxed);
        self.waits.record(waited);
        self.metrics.acquired(outcome as usize, Some(waited));
    }

    /// A lock was handed to its holder.
    pub(crate) fn held(&self) {
        self.held.fetch_add(1, Relaxed);
        self.metrics.held();
    }

    /// A lock was released or dropped after being held for `held`; `lost`
    /// when it had already ended lost by then.
    pub(crate) fn ended(&self, held: Duration, lost: bool) {
        // Never below zero, whatever the order of a snapshot's reads.
        let _ = self
            .held
            .fetch_update(Relaxed, Relaxed, |n| Some(n.saturating_sub(1)));
        self.holds.record(held);
        self.metrics.let_go(held);
        if lost {
            self.lost.fetch_add(1, Relaxed);
            self.metrics.acquired(series::LOST, None);
        }
    }

    pub(crate) fn snapshot(&self) -> LockStats {
        let n = |o: Outcome| self.outcomes[o as usize].load(Relaxed);
        LockStats {
            acquires: Acquires {
                granted: n(Outcome::Granted),
                contended: n(Outcome::Contended),
                unavailable: n(Outcome::Unavailable),
                misconfigured: n(Outcome::Misconfigured),
                other: n(Outcome::Other),
                lost: self.lost.load(Relaxed),
            },
            held: self.held.load(Relaxed),
            attempt_latency: self.attempts.snapshot(),
            wait: self.waits.snapshot(),
            hold: self.holds.snapshot(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn each_outcome_has_its_label() {
        let all = [
            (Outcome::Granted, "granted"),
            (Outcome::Contended, "contended"),
            (Outcome::Unavailable, "unavailable"),
            (Outcome::Misconfigured, "misconfigured"),
            (Outcome::Other, "other"),
        ];
        for (outcome, label) in all {
            assert_eq!(series::OUTCOMES[outcome as usize], label);
        }
        assert_eq!(series::OUTCOMES[series::LOST], "lost");
    }

    #[test]
    fn outcomes_waits_holds_and_the_held_gauge() {
        let c = LockCounters::default();
        c.attempted(MS);
        c.acquired(Outcome::Granted, 2 * MS);
        c.held();
        c.held();
        c.acquired(Outcome::Contended, 300 * MS);
        c.acquired(Outcome::Misconfigured, MS);
        assert_eq!(c.snapshot().held, 2);
        c.ended(Duration::from_secs(20), false);
        c.ended(Duration::from_secs(1), true);
        c.ended(MS, false); // one end too many never wraps
        let s = c.snapshot();
        assert_eq!(
            (
                s.acquires.granted,
                s.acquires.contended,
                s.acquires.misconfigured
            ),
            (1, 1, 1)
        );
        assert_eq!(
            (s.acquires.unavailable, s.acquires.other, s.acquires.lost),
            (0, 0, 1)
        );
        assert_eq!(s.held, 0);
        assert_eq!(
            (s.attempt_latency.count, s.wait.count, s.hold.count),
            (1, 3, 3)
        );
        assert_eq!(s.hold.max, Duration::from_secs(20));
        assert_eq!(s.wait.buckets.len(), DURATION_MICROS.len() + 1);
    }
}
