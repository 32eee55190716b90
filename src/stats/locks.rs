//! The lock-level counters of one client, one set per [`Primitive`] (locks,
//! semaphore permits, elections): acquire calls by outcome, the time attempts, waits
//! and holds took, and what is held now. Each also reported to the
//! `metrics` facade, under the primitive's own series, when that feature
//! is on.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::error::Error;
use crate::stats::latency::LatencyCounters;
use crate::stats::metrics::*;
use crate::stats::series::{self, Count, Gauge};
use crate::stats::{Acquires, LockStats};

// What an acquisition takes and a lease holds, for counting: each has its
// own counters (`Stats`' field) and its own series. A new primitive is one
// variant (in `error/name.rs`, where messages name it), its five rows of
// `METRICS` (after the last primitive's, in the same order) and its field
// of `Stats`.
pub(crate) use crate::error::Primitive;

impl Primitive {
    /// Every primitive, in declaration order (the index of its counters).
    pub(crate) const ALL: [Primitive; 5] = [
        Primitive::Lock,
        Primitive::Permit,
        Primitive::Election,
        Primitive::Read,
        Primitive::Write,
    ];

    /// The names of its series, which [`METRICS`] lists together, each
    /// primitive's after the one before, from [`ACQUIRES`] on: acquire calls
    /// by outcome, the histograms of one attempt, one call and one hold, the
    /// gauge of what is held.
    pub(crate) fn series(self) -> [&'static str; 5] {
        let lock = METRICS.iter().position(|m| m.name == ACQUIRES);
        let first = lock.unwrap_or(0) + 5 * self as usize;
        std::array::from_fn(|i| METRICS.get(first + i).map_or("", |m| m.name))
    }
}

/// What one grant holds, for counting: the primitive, and how much of the
/// held-now gauge it is (a lock 1, a holder of `k` permits `k`, a
/// leadership 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Holding {
    /// Whose counters.
    pub(crate) primitive: Primitive,
    /// Its weight in `held`.
    pub(crate) count: u64,
}

impl Holding {
    /// One of `primitive`: a lock, a leadership.
    pub(crate) fn one(primitive: Primitive) -> Self {
        Self {
            primitive,
            count: 1,
        }
    }
}

/// How an acquire call ended, then a grant that later ended lost: the
/// index of its count and of its `outcome` label in [`OUTCOMES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Granted,
    Contended,
    Unavailable,
    Misconfigured,
    Other,
    Lost,
}

/// The `outcome` labels of the acquires series, in the order of [`Outcome`].
pub(crate) const OUTCOMES: [&str; 6] = [
    "granted",
    "contended",
    "unavailable",
    "misconfigured",
    "other",
    "lost",
];

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
    /// Indexed by [`Outcome`].
    acquires: [Count; OUTCOMES.len()],
    attempts: LatencyCounters,
    waits: LatencyCounters,
    held: AtomicU64,
    held_series: Gauge,
    holds: LatencyCounters,
    /// Attempts that found no quorum reachable, after which the call
    /// waited on, and the campaigns waiting so, by election, with since
    /// when: a campaign's only (see [`Self::unreachable`]).
    unreachable: Option<(Count, Waiting)>,
}

/// The campaigns waiting while too few nodes answer, by their key, with
/// when each began to wait.
type Waiting = Mutex<HashMap<Vec<u8>, Instant>>;

impl LockCounters {
    /// The counters of `primitive`, each registering its series now.
    pub(crate) fn new(primitive: Primitive) -> Self {
        let [acquires, attempt, wait, hold, held] = primitive.series();
        let histogram = |bounds, name| LatencyCounters::new(bounds, series::histogram(name, &[]));
        Self {
            acquires: OUTCOMES.map(|outcome| Count::new(acquires, &[("outcome", outcome)])),
            attempts: histogram(&LATENCY_BUCKETS, attempt),
            waits: histogram(&DURATION_BUCKETS, wait),
            held: AtomicU64::new(0),
            held_series: series::gauge(held, &[]),
            holds: histogram(&DURATION_BUCKETS, hold),
            unreachable: (primitive == Primitive::Election)
                .then(|| (Count::new(ELECTION_UNREACHABLE, &[]), Mutex::default())),
        }
    }

    /// An attempt of the campaign on the key `name`, begun at `began`, found too few
    /// nodes answering for a quorum, and the call waits on: counted for a
    /// campaign, which waits without limit by default and has no other
    /// way to tell; true when this begins the campaign's wait (its first
    /// such attempt since a quorum last answered it, whichever acquire
    /// call made it: a caller retrying in slices waits once). False for a
    /// lock or permits, whose calls end `unavailable` once their retries
    /// are spent.
    pub(crate) fn unreachable(&self, name: &[u8], began: Instant) -> bool {
        let Some((count, waiting)) = &self.unreachable else {
            return false;
        };
        count.add();
        let mut waiting = waiting.lock().unwrap_or_else(|e| e.into_inner());
        let begins = !waiting.contains_key(name);
        waiting.entry(name.to_vec()).or_insert(began);
        begins
    }

    /// An attempt of the campaign `name` found a quorum answering: how
    /// long it had waited without one, if it had
    /// ([`unreachable`](Self::unreachable)).
    pub(crate) fn answered(&self, name: &[u8]) -> Option<Duration> {
        let (_, waiting) = self.unreachable.as_ref()?;
        let mut waiting = waiting.lock().unwrap_or_else(|e| e.into_inner());
        waiting.remove(name).map(|since| since.elapsed())
    }

    /// One acquire attempt took `elapsed`.
    pub(crate) fn attempted(&self, elapsed: Duration) {
        self.attempts.record(elapsed);
    }

    /// An acquire call ended in `outcome` after `waited`.
    pub(crate) fn acquired(&self, outcome: Outcome, waited: Duration) {
        self.acquires[outcome as usize].add();
        self.waits.record(waited);
    }

    /// `count` of what is counted (a lock, permits) was handed to its
    /// holder.
    pub(crate) fn held(&self, count: u64) {
        self.held.fetch_add(count, Relaxed);
        self.held_series.increment(count as f64);
    }

    /// `count` held for `held` was released or dropped; `lost` when it had
    /// already ended lost by then.
    pub(crate) fn ended(&self, count: u64, held: Duration, lost: bool) {
        // Never below zero, whatever the order of a snapshot's reads.
        let _ = self
            .held
            .fetch_update(Relaxed, Relaxed, |n| Some(n.saturating_sub(count)));
        self.held_series.decrement(count as f64);
        self.holds.record(held);
        if lost {
            self.acquires[Outcome::Lost as usize].add();
        }
    }

    pub(crate) fn snapshot(&self) -> LockStats {
        let [granted, contended, unavailable, misconfigured, other, lost] =
            self.acquires.each_ref().map(Count::get);
        LockStats {
            acquires: Acquires {
                granted,
                contended,
                unavailable,
                misconfigured,
                other,
                lost,
            },
            held: self.held.load(Relaxed),
            attempt_latency: self.attempts.snapshot(),
            wait: self.waits.snapshot(),
            hold: self.holds.snapshot(),
            unreachable: self
                .unreachable
                .as_ref()
                .map_or(0, |(count, _)| count.get()),
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
            assert_eq!(OUTCOMES[outcome as usize], label);
        }
        assert_eq!(OUTCOMES[Outcome::Lost as usize], "lost");
    }

    #[test]
    fn outcomes_waits_holds_and_the_held_gauge() {
        let c = LockCounters::new(Primitive::Lock);
        c.attempted(MS);
        c.acquired(Outcome::Granted, 2 * MS);
        c.held(1);
        c.held(1);
        c.acquired(Outcome::Contended, 300 * MS);
        c.acquired(Outcome::Misconfigured, MS);
        assert_eq!(c.snapshot().held, 2);
        c.ended(1, Duration::from_secs(20), false);
        c.ended(1, Duration::from_secs(1), true);
        c.ended(1, MS, false); // one end too many never wraps
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
        assert_eq!(s.wait.buckets.len(), DURATION_BUCKETS.len() + 1);
    }

    #[test]
    fn only_a_campaign_counts_attempts_that_found_no_quorum_and_waits_once() {
        let election = LockCounters::new(Primitive::Election);
        let now = Instant::now();
        // The first attempt begins the wait; the next ones, in this call
        // or another, continue it.
        assert!(election.unreachable(b"a", now));
        assert!(!election.unreachable(b"a", now));
        assert!(
            election.unreachable(b"b", now),
            "another election waits apart"
        );
        assert_eq!(election.snapshot().unreachable, 3);
        assert!(election.answered(b"a").is_some());
        assert_eq!(election.answered(b"a"), None, "once");
        assert!(election.unreachable(b"a", now), "a new outage");
        let lock = LockCounters::new(Primitive::Lock);
        assert!(!lock.unreachable(b"a", now));
        assert_eq!(lock.answered(b"a"), None);
        assert_eq!(lock.snapshot().unreachable, 0);
    }

    #[test]
    fn a_holder_of_k_permits_counts_k_held_and_one_hold() {
        let c = LockCounters::new(Primitive::Permit);
        c.held(3);
        c.held(1);
        assert_eq!(c.snapshot().held, 4);
        c.ended(3, MS, false);
        let s = c.snapshot();
        assert_eq!((s.held, s.hold.count), (1, 1));
        c.ended(3, MS, false); // more than held never wraps
        assert_eq!(c.snapshot().held, 0);
    }

    #[test]
    fn each_primitive_has_the_series_of_its_rows_of_the_table() {
        let lock = [
            ACQUIRES,
            ATTEMPT_SECONDS,
            WAIT_SECONDS,
            HOLD_SECONDS,
            LOCKS_HELD,
        ];
        let permit = [
            PERMIT_ACQUIRES,
            PERMIT_ATTEMPT_SECONDS,
            PERMIT_WAIT_SECONDS,
            PERMIT_HOLD_SECONDS,
            PERMITS_HELD,
        ];
        let election = [
            ELECTION_ACQUIRES,
            ELECTION_ATTEMPT_SECONDS,
            ELECTION_WAIT_SECONDS,
            ELECTION_HOLD_SECONDS,
            ELECTIONS_HELD,
        ];
        let read = [
            READ_ACQUIRES,
            READ_ATTEMPT_SECONDS,
            READ_WAIT_SECONDS,
            READ_HOLD_SECONDS,
            READS_HELD,
        ];
        let write = [
            WRITE_ACQUIRES,
            WRITE_ATTEMPT_SECONDS,
            WRITE_WAIT_SECONDS,
            WRITE_HOLD_SECONDS,
            WRITES_HELD,
        ];
        assert_eq!(
            Primitive::ALL.map(Primitive::series),
            [lock, permit, election, read, write]
        );
    }

    #[test]
    fn each_primitive_has_its_own_series() {
        let mut all: Vec<&str> = Primitive::ALL.iter().flat_map(|&p| p.series()).collect();
        let count = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), count, "a series shared by two primitives");
        assert_eq!(Primitive::ALL.map(|p| p as usize), [0, 1, 2, 3, 4]);
    }
}
