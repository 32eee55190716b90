//! Counters a user can read: per node (commands, votes, timeouts, errors by
//! kind, reply latency) and per client (renewals, lost-lock signals).
//!
//! Recording is a handful of relaxed atomic adds — no lock and no
//! allocation on the hot path. [`Redlock::stats`] copies the counters into
//! plain structs; each counter is read on its own, so a snapshot taken
//! while operations run is not a consistent cut across counters.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use crate::error::NodeFailureKind;
use crate::fanout::Engine;
use crate::lease::ending::LossKind;
use crate::metrics::{self, NodeMetrics};
use crate::op::Op;
use crate::redlock::Redlock;

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
fn bucket_index(micros: u64) -> usize {
    BOUNDS_MICROS
        .iter()
        .position(|&bound| micros <= bound)
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
        self.buckets[bucket_index(us)].fetch_add(1, Relaxed);
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

    fn snapshot(&self, node: &str) -> NodeStats {
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

impl Engine {
    pub(crate) fn stats(&self) -> Stats {
        Stats {
            nodes: self
                .nodes
                .iter()
                .map(|n| n.counters().snapshot(n.label()))
                .collect(),
            leases: self.leases.snapshot(),
        }
    }
}

impl Redlock {
    /// A snapshot of this client's counters: per node (commands, votes,
    /// timeouts, errors by kind, reply latency) and for its locks'
    /// renewals and lost-lock signals. Clones of a `Redlock` share the
    /// counters; they start at zero when [`build`](crate::Builder::build)
    /// runs and only grow.
    ///
    /// Recording costs a few relaxed atomic adds per command and never
    /// allocates; this snapshot allocates. Counters are read one by one, so
    /// while operations run the snapshot is not a consistent cut.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) {
    /// let stats = redlock.stats();
    /// for node in &stats.nodes {
    ///     println!(
    ///         "{}: {} commands, {} timeouts, p99 {:?}, granted {} / refused {}",
    ///         node.node,
    ///         node.commands,
    ///         node.timeouts,
    ///         node.latency.quantile(0.99),
    ///         node.acquire.yes,
    ///         node.acquire.no,
    ///     );
    /// }
    /// println!("renewals failed: {}", stats.leases.renewal_failures);
    /// # }
    /// ```
    pub fn stats(&self) -> Stats {
        self.engine.stats()
    }
}

/// A snapshot of a [`Redlock`]'s counters, from [`Redlock::stats`].
///
/// # Examples
///
/// ```no_run
/// # async fn demo(redlock: quorumlock::Redlock) {
/// let stats: quorumlock::Stats = redlock.stats();
/// let timeouts: u64 = stats.nodes.iter().map(|n| n.timeouts).sum();
/// println!("{timeouts} timeouts, {} locks lost", stats.leases.lost);
/// # }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// One entry per node, in the order the nodes were given.
    pub nodes: Vec<NodeStats>,
    /// Renewals and lost-lock signals of the locks taken through this client.
    pub leases: LeaseStats,
}

/// One node's counters.
///
/// `commands` counts every command sent (lock commands, and the `PING` and
/// `SCRIPT LOAD` of [`build`](crate::Builder::build)). Each command ends in
/// a reply — counted in `latency`, and for lock commands as a yes or no vote
/// — or in one of the failure counters; a command whose outcome is still
/// pending is only in `commands`.
///
/// # Examples
///
/// ```no_run
/// # async fn demo(redlock: quorumlock::Redlock) {
/// for node in redlock.stats().nodes {
///     if node.timeouts > 0 || node.connection_errors > 0 {
///         println!("{} is unhealthy: {node:?}", node.node);
///     }
/// }
/// # }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeStats {
    /// The node, as `host:port/db`.
    pub node: String,
    /// Commands sent to the node.
    pub commands: u64,
    /// `SET NX` replies: `yes` granted, `no` the key was already held.
    pub acquire: Votes,
    /// Compare-and-pexpire replies (manual extensions and automatic
    /// renewals): `yes` extended, `no` the key no longer carried the token.
    pub extend: Votes,
    /// Compare-and-delete replies: `yes` deleted, `no` the key was already
    /// gone or held another token.
    pub release: Votes,
    /// Commands with no reply within the per-node timeout.
    pub timeouts: u64,
    /// Commands that failed because the connection was refused, dropped or
    /// could not be made.
    pub connection_errors: u64,
    /// Replies this client could not interpret.
    pub protocol_errors: u64,
    /// Acquire votes withheld because the node restarted too recently
    /// (see [`Builder::restart_quarantine`](crate::Builder::restart_quarantine));
    /// no command was sent for these.
    pub quarantined: u64,
    /// Error replies by code (`WRONGTYPE`, `OOM`, `NOSCRIPT`, `BUSY`,
    /// `NOAUTH`, `READONLY`, … and `OTHER` for any code not listed), only
    /// codes seen at least once.
    pub redis_errors: Vec<(&'static str, u64)>,
    /// Time from sending a command to its reply (error replies included,
    /// timeouts and connection failures not).
    pub latency: Latency,
}

impl NodeStats {
    /// Error replies with this code (case-insensitive); codes that are not
    /// counted one by one are found under `"OTHER"`.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) {
    /// let oom: u64 = redlock.stats().nodes.iter().map(|n| n.redis_error_count("OOM")).sum();
    /// # }
    /// ```
    pub fn redis_error_count(&self, code: &str) -> u64 {
        self.redis_errors
            .iter()
            .filter(|(c, _)| c.eq_ignore_ascii_case(code))
            .map(|&(_, n)| n)
            .sum()
    }

    /// Every failed command: timeouts, connection and protocol errors, error replies
    /// (quarantine refusals are not commands and not counted).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) {
    /// let failing = redlock.stats().nodes.iter().filter(|n| n.failures() > 0).count();
    /// # }
    /// ```
    pub fn failures(&self) -> u64 {
        let replies: u64 = self.redis_errors.iter().map(|&(_, n)| n).sum();
        self.timeouts
            .saturating_add(self.connection_errors)
            .saturating_add(self.protocol_errors)
            .saturating_add(replies)
    }
}

/// Yes and no answers to one kind of lock command.
///
/// # Examples
///
/// ```no_run
/// # async fn demo(redlock: quorumlock::Redlock) {
/// let node = &redlock.stats().nodes[0];
/// let contended = node.acquire.no as f64 / (node.acquire.yes + node.acquire.no).max(1) as f64;
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Votes {
    /// The node did what was asked.
    pub yes: u64,
    /// The node answered but refused (the key is held by another token, or
    /// no longer ours).
    pub no: u64,
}

/// Reply latency of one node: count, sum, maximum, and a fixed-bucket
/// histogram (100 µs … 5 s, then everything slower).
///
/// # Examples
///
/// ```no_run
/// # async fn demo(redlock: quorumlock::Redlock) {
/// let latency = &redlock.stats().nodes[0].latency;
/// println!("mean {:?}, p50 ≤ {:?}, max {:?}", latency.mean(), latency.quantile(0.5), latency.max);
/// # }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Latency {
    /// Replies measured.
    pub count: u64,
    /// Sum of their latencies (microsecond resolution).
    pub sum: Duration,
    /// The slowest reply.
    pub max: Duration,
    /// `(upper bound, replies)` per bucket, bounds inclusive and
    /// increasing; the last bucket's bound is `Duration::MAX`.
    pub buckets: Vec<(Duration, u64)>,
}

impl Latency {
    /// Mean latency, or `None` before the first reply.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) {
    /// if let Some(mean) = redlock.stats().nodes[0].latency.mean() {
    ///     println!("{mean:?}");
    /// }
    /// # }
    /// ```
    pub fn mean(&self) -> Option<Duration> {
        let count = u32::try_from(self.count).unwrap_or(u32::MAX);
        (count > 0).then(|| self.sum / count)
    }

    /// An upper bound for the `q`-quantile (`q` in `[0, 1]`, clamped): the
    /// bound of the first bucket that holds it, or the maximum for the last
    /// bucket and when it is smaller. `None` before the first reply.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) {
    /// let p99 = redlock.stats().nodes[0].latency.quantile(0.99);
    /// # }
    /// ```
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        quantile(&self.buckets, self.max, q)
    }
}

fn quantile(buckets: &[(Duration, u64)], max: Duration, q: f64) -> Option<Duration> {
    let total: u64 = buckets.iter().map(|&(_, n)| n).sum();
    if total == 0 {
        return None;
    }
    let q = if q.is_finite() {
        q.clamp(0.0, 1.0)
    } else {
        1.0
    };
    // The rank of the wanted reply, 1-based: at least the first one.
    let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
    let mut seen = 0u64;
    for &(bound, n) in buckets {
        seen = seen.saturating_add(n);
        if seen >= rank {
            return Some(bound.min(max));
        }
    }
    Some(max)
}

/// Renewal and lost-lock counters of the locks taken through one client.
///
/// A signal that first fired [`Uncertain`](LossKind::Uncertain) and later
/// became [`Expired`](LossKind::Expired) counts in both; releases are not
/// counted here.
///
/// # Examples
///
/// ```no_run
/// # async fn demo(redlock: quorumlock::Redlock) {
/// let leases = redlock.stats().leases;
/// println!("{} renewals, {} failed, {} lost", leases.renewals, leases.renewal_failures, leases.lost);
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaseStats {
    /// Automatic renewals that reached a quorum in time.
    pub renewals: u64,
    /// Automatic renewal attempts that did not.
    pub renewal_failures: u64,
    /// Signals that reached [`LossKind::Uncertain`].
    pub uncertain: u64,
    /// Signals that reached [`LossKind::Lost`].
    pub lost: u64,
    /// Signals that reached [`LossKind::Expired`].
    pub expired: u64,
    /// Signals that reached [`LossKind::LimitReached`].
    pub limit_reached: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn buckets_are_inclusive_upper_bounds() {
        assert_eq!(bucket_index(0), 0);
        assert_eq!(bucket_index(100), 0);
        assert_eq!(bucket_index(101), 1);
        assert_eq!(bucket_index(1_000), 3);
        assert_eq!(bucket_index(5_000_000), BOUNDS_MICROS.len() - 1);
        assert_eq!(bucket_index(5_000_001), BOUNDS_MICROS.len());
        assert_eq!(bucket_index(u64::MAX), BUCKETS - 1);
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
