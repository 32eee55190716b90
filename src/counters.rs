//! The live counters behind [`Redlock::stats`](crate::Redlock::stats): per
//! node (commands, votes, timeouts, errors by kind, reply latency) and per
//! client (renewals, lost-lock signals), each also reported to the
//! `metrics` facade when that feature is on.
//!
//! Recording is a handful of relaxed atomic adds — no lock and no
//! allocation on the hot path. A snapshot copies them into the plain
//! structs of `stats`; each counter is read on its own, so a snapshot taken
//! while operations run is not a consistent cut across counters.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use crate::error::NodeFailureKind;
use crate::lease::ending::LossKind;
use crate::metrics::{self, NodeMetrics};
use crate::op::Op;
use crate::stats::{Latency, LeaseStats, NodeStats, Votes};

/// Upper bounds (inclusive, in microseconds) of the latency buckets; one
/// more bucket counts everything slower.
const BOUNDS_MICROS: [u64; 15] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000,
];
const BUCKETS: usize = BOUNDS_MICROS.len() + 1;

/// Redis error codes counted one by one; any other code counts as `OTHER`.
const CODES: [&str; 13] = [
    "ERR",
    "WRONGTYPE",
    "NOSCRIPT",
    "OOM",
    "BUSY",
    "NOAUTH",
    "WRONGPASS",
    "NOPERM",
    "READONLY",
    "LOADING",
    "MISCONF",
    "MASTERDOWN",
    "EXECABORT",
];
/// The name under which codes outside [`CODES`] are counted.
const OTHER_CODE: &str = "OTHER";

/// Index of the bucket a latency of `micros` falls into.
///
/// Compared in seconds as `f64`, as the `metrics` histogram compares a
/// value with its `le` bounds: a latency a fraction of a microsecond above
/// a bound falls in the next bucket in both (truncating to whole
/// microseconds here put it one bucket lower).
fn bucket_index(elapsed: Duration) -> usize {
    let secs = elapsed.as_secs_f64();
    BOUNDS_MICROS
        .iter()
        .position(|&bound| secs <= bound as f64 / 1e6)
        .unwrap_or(BOUNDS_MICROS.len())
}

/// Index of the counter for an error `code` (case-insensitive).
fn code_index(code: &str) -> usize {
    CODES
        .iter()
        .position(|c| c.eq_ignore_ascii_case(code))
        .unwrap_or(CODES.len())
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

#[derive(Debug, Default)]
struct VoteCounters {
    yes: AtomicU64,
    no: AtomicU64,
}

impl VoteCounters {
    fn snapshot(&self) -> Votes {
        Votes {
            yes: self.yes.load(Relaxed),
            no: self.no.load(Relaxed),
        }
    }
}

#[derive(Debug, Default)]
struct LatencyCounters {
    count: AtomicU64,
    sum_micros: AtomicU64,
    max_micros: AtomicU64,
    buckets: [AtomicU64; BUCKETS],
}

impl LatencyCounters {
    fn record(&self, elapsed: Duration) {
        let us = micros(elapsed);
        self.count.fetch_add(1, Relaxed);
        self.sum_micros.fetch_add(us, Relaxed);
        self.max_micros.fetch_max(us, Relaxed);
        self.buckets[bucket_index(elapsed)].fetch_add(1, Relaxed);
    }

    fn snapshot(&self) -> Latency {
        let buckets = self
            .buckets
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let bound = BOUNDS_MICROS
                    .get(i)
                    .map_or(Duration::MAX, |&us| Duration::from_micros(us));
                (bound, n.load(Relaxed))
            })
            .collect();
        Latency {
            count: self.count.load(Relaxed),
            sum: Duration::from_micros(self.sum_micros.load(Relaxed)),
            max: Duration::from_micros(self.max_micros.load(Relaxed)),
            buckets,
        }
    }
}

/// One node's live counters, shared by every clone of the node.
#[derive(Debug, Default)]
pub(crate) struct NodeCounters {
    commands: AtomicU64,
    acquire: VoteCounters,
    extend: VoteCounters,
    release: VoteCounters,
    timeouts: AtomicU64,
    connection_errors: AtomicU64,
    protocol_errors: AtomicU64,
    quarantined: AtomicU64,
    redis_errors: [AtomicU64; CODES.len() + 1],
    latency: LatencyCounters,
    /// The same events for the `metrics` facade (a no-op without the
    /// feature).
    metrics: NodeMetrics,
}

impl NodeCounters {
    /// The counters of node `label` (`host:port/db`).
    pub(crate) fn new(label: &str) -> Self {
        Self {
            metrics: NodeMetrics::new(label),
            ..Self::default()
        }
    }

    /// A command is about to be sent.
    pub(crate) fn sent(&self) {
        self.commands.fetch_add(1, Relaxed);
        self.metrics.sent();
    }

    /// A reply (not an error) came back after `elapsed`.
    pub(crate) fn replied(&self, elapsed: Duration) {
        self.latency.record(elapsed);
        self.metrics.reply(elapsed);
    }

    /// The command failed with `kind`; `elapsed` is `Some` when the node
    /// answered (an error reply), whose latency counts like any reply.
    pub(crate) fn failed(&self, kind: &NodeFailureKind, elapsed: Option<Duration>) {
        if let Some(elapsed) = elapsed {
            if matches!(kind, NodeFailureKind::Redis { .. }) {
                self.latency.record(elapsed);
                self.metrics.reply(elapsed);
            }
        }
        let m = &self.metrics;
        let counter = match kind {
            NodeFailureKind::Timeout(_) => {
                m.timeout();
                &self.timeouts
            }
            NodeFailureKind::Connection(_) => {
                m.connection_error();
                &self.connection_errors
            }
            NodeFailureKind::Redis { code, .. } => {
                let i = code_index(code);
                m.error_reply(CODES.get(i).copied().unwrap_or(OTHER_CODE));
                &self.redis_errors[i]
            }
            NodeFailureKind::Protocol(_) => {
                m.protocol_error();
                &self.protocol_errors
            }
            NodeFailureKind::Quarantined { .. } => {
                m.quarantined();
                &self.quarantined
            }
        };
        counter.fetch_add(1, Relaxed);
    }

    /// The node answered something that is not a valid reply.
    pub(crate) fn protocol_error(&self) {
        self.protocol_errors.fetch_add(1, Relaxed);
        self.metrics.protocol_error();
    }

    /// The node voted `yes` (granted, extended, deleted) or no (held
    /// elsewhere, not ours). Returns `yes`, to be used inline.
    pub(crate) fn vote(&self, op: Op, yes: bool) -> bool {
        let votes = match op {
            Op::Acquire => &self.acquire,
            Op::Extend => &self.extend,
            Op::Release => &self.release,
        };
        if yes { &votes.yes } else { &votes.no }.fetch_add(1, Relaxed);
        self.metrics.vote(op, yes);
        yes
    }

    /// A copy of the counters, for node `node`.
    pub(crate) fn snapshot(&self, node: &str) -> NodeStats {
        let mut redis_errors = Vec::new();
        for (i, n) in self.redis_errors.iter().enumerate() {
            let n = n.load(Relaxed);
            if n > 0 {
                redis_errors.push((CODES.get(i).copied().unwrap_or(OTHER_CODE), n));
            }
        }
        NodeStats {
            node: node.to_owned(),
            commands: self.commands.load(Relaxed),
            acquire: self.acquire.snapshot(),
            extend: self.extend.snapshot(),
            release: self.release.snapshot(),
            timeouts: self.timeouts.load(Relaxed),
            connection_errors: self.connection_errors.load(Relaxed),
            protocol_errors: self.protocol_errors.load(Relaxed),
            quarantined: self.quarantined.load(Relaxed),
            redis_errors,
            latency: self.latency.snapshot(),
        }
    }
}

/// Renewal and lost-signal counters of every lock of one client.
#[derive(Debug, Default)]
pub(crate) struct LeaseCounters {
    renewals: AtomicU64,
    renewal_failures: AtomicU64,
    uncertain: AtomicU64,
    lost: AtomicU64,
    expired: AtomicU64,
    limit_reached: AtomicU64,
}

impl LeaseCounters {
    /// An automatic renewal reached a quorum in time.
    pub(crate) fn renewed(&self) {
        self.renewals.fetch_add(1, Relaxed);
        metrics::renewal(true);
    }

    /// An automatic renewal did not.
    pub(crate) fn renewal_failed(&self) {
        self.renewal_failures.fetch_add(1, Relaxed);
        metrics::renewal(false);
    }

    /// A lock's signal reached `kind` (first firing or upgrade).
    pub(crate) fn signalled(&self, kind: LossKind) {
        let (counter, name) = match kind {
            LossKind::Uncertain => (&self.uncertain, "uncertain"),
            LossKind::Lost => (&self.lost, "lost"),
            LossKind::Expired => (&self.expired, "expired"),
            LossKind::LimitReached => (&self.limit_reached, "limit_reached"),
            LossKind::Released => return,
        };
        counter.fetch_add(1, Relaxed);
        metrics::signal(name);
    }

    pub(crate) fn snapshot(&self) -> LeaseStats {
        LeaseStats {
            renewals: self.renewals.load(Relaxed),
            renewal_failures: self.renewal_failures.load(Relaxed),
            uncertain: self.uncertain.load(Relaxed),
            lost: self.lost.load(Relaxed),
            expired: self.expired.load(Relaxed),
            limit_reached: self.limit_reached.load(Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn buckets_are_inclusive_upper_bounds() {
        let us = Duration::from_micros;
        assert_eq!(bucket_index(us(0)), 0);
        assert_eq!(bucket_index(us(100)), 0);
        assert_eq!(bucket_index(us(101)), 1);
        assert_eq!(bucket_index(us(1_000)), 3);
        assert_eq!(bucket_index(us(5_000_000)), BOUNDS_MICROS.len() - 1);
        assert_eq!(bucket_index(us(5_000_001)), BOUNDS_MICROS.len());
        assert_eq!(bucket_index(Duration::MAX), BUCKETS - 1);
        // A fraction of a microsecond above a bound is above it, as the
        // `metrics` histogram (seconds, `le`) sees it.
        assert_eq!(bucket_index(Duration::from_nanos(250_400)), 2);
        assert_eq!(bucket_index(Duration::from_nanos(250_000)), 1);
        assert!(BOUNDS_MICROS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn latency_keeps_count_sum_max_and_buckets() {
        let l = LatencyCounters::default();
        for ms in [1, 1, 2, 40, 3_000] {
            l.record(ms * MS);
        }
        let s = l.snapshot();
        assert_eq!(s.count, 5);
        assert_eq!(s.sum, 3_044 * MS);
        assert_eq!(s.max, 3_000 * MS);
        assert_eq!(s.buckets.len(), BUCKETS);
        assert_eq!(s.buckets.iter().map(|b| b.1).sum::<u64>(), 5);
        assert_eq!(s.buckets[3], (MS, 2), "two replies of exactly 1 ms");
        assert_eq!(s.buckets.last().map(|b| b.0), Some(Duration::MAX));
        assert_eq!(s.mean(), Some(Duration::from_micros(608_800)));
        assert!(l.snapshot().count == 5, "a snapshot does not reset");
    }

    #[test]
    fn quantiles_are_bucket_upper_bounds_capped_by_the_max() {
        let l = LatencyCounters::default();
        assert_eq!(l.snapshot().quantile(0.5), None);
        assert_eq!(l.snapshot().mean(), None);
        for _ in 0..98 {
            l.record(Duration::from_micros(700));
        }
        l.record(30 * MS);
        l.record(7 * Duration::from_secs(1));
        let s = l.snapshot();
        assert_eq!(s.quantile(0.5), Some(MS));
        assert_eq!(s.quantile(0.98), Some(MS));
        assert_eq!(s.quantile(0.99), Some(50 * MS));
        assert_eq!(s.quantile(1.0), Some(7 * Duration::from_secs(1)));
        assert_eq!(s.quantile(0.0), Some(MS), "the first reply's bucket");
        assert_eq!(s.quantile(f64::NAN), s.quantile(1.0));

        let one = LatencyCounters::default();
        one.record(Duration::from_micros(130));
        assert_eq!(
            one.snapshot().quantile(0.5),
            Some(Duration::from_micros(130)),
            "never above the maximum seen"
        );
    }

    #[test]
    fn failures_are_counted_by_kind_and_code() {
        let c = NodeCounters::default();
        c.sent();
        c.failed(&NodeFailureKind::Timeout(50 * MS), None);
        c.failed(&NodeFailureKind::Connection("refused".into()), None);
        for code in ["OOM", "oom", "WRONGTYPE", "SOMETHINGNEW"] {
            c.failed(
                &NodeFailureKind::Redis {
                    code: code.into(),
                    message: String::new(),
                },
                Some(MS),
            );
        }
        c.protocol_error();
        c.failed(
            &NodeFailureKind::Quarantined {
                uptime: Duration::from_secs(1),
            },
            None,
        );
        let s = c.snapshot("n:1/0");
        assert_eq!(s.node, "n:1/0");
        assert_eq!(s.commands, 1);
        assert_eq!(
            (
                s.timeouts,
                s.connection_errors,
                s.protocol_errors,
                s.quarantined
            ),
            (1, 1, 1, 1)
        );
        assert_eq!(s.redis_error_count("OOM"), 2);
        assert_eq!(s.redis_error_count("wrongtype"), 1);
        assert_eq!(s.redis_error_count("OTHER"), 1);
        assert_eq!(s.redis_error_count("BUSY"), 0);
        assert_eq!(s.failures(), 7);
        assert_eq!(s.latency.count, 4, "error replies are replies");
    }

    #[test]
    fn votes_are_counted_per_operation() {
        let c = NodeCounters::default();
        assert!(c.vote(Op::Acquire, true));
        assert!(!c.vote(Op::Acquire, false));
        c.vote(Op::Extend, true);
        c.vote(Op::Release, false);
        c.replied(MS);
        let s = c.snapshot("n");
        assert_eq!((s.acquire.yes, s.acquire.no), (1, 1));
        assert_eq!((s.extend.yes, s.extend.no), (1, 0));
        assert_eq!((s.release.yes, s.release.no), (0, 1));
        assert_eq!(s.latency.count, 1);
        assert_eq!(s.failures(), 0);
    }

    #[test]
    fn lease_counters_count_every_kind_but_release() {
        let c = LeaseCounters::default();
        c.renewed();
        c.renewed();
        c.renewal_failed();
        for k in [
            LossKind::Uncertain,
            LossKind::Expired,
            LossKind::Lost,
            LossKind::LimitReached,
            LossKind::Released,
        ] {
            c.signalled(k);
        }
        let s = c.snapshot();
        assert_eq!((s.renewals, s.renewal_failures), (2, 1));
        assert_eq!(
            (s.uncertain, s.lost, s.expired, s.limit_reached),
            (1, 1, 1, 1)
        );
    }
}
