//! The live counters behind [`Redlock::stats`](crate::Redlock::stats): per
//! node (commands, votes, timeouts, errors by kind, reply latency) and per
//! client (renewals, lost-lock signals), each also reported to the
//! `metrics` facade when that feature is on.
//!
//! Recording is a handful of relaxed atomic adds — no lock and no
//! allocation on the hot path. (Per-thread copies of the counters every
//! command touches were measured and bought nothing clear: BENCHMARKS.md.)
//! A snapshot copies them into the plain structs of `stats`; each counter
//! is read on its own, so a snapshot taken while operations run is not a
//! consistent cut across counters.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use crate::error::lost::LossKind;
use crate::error::{NodeFailureKind, Operation};
use crate::stats::latency::LatencyCounters;
use crate::stats::locks::{LockCounters, Primitive};
use crate::stats::series::{self, NodeMetrics};
use crate::stats::{LeaseStats, LockStats, NodeStats, Votes};

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

/// Index of the counter for an error `code` (case-insensitive).
fn code_index(code: &str) -> usize {
    CODES
        .iter()
        .position(|c| c.eq_ignore_ascii_case(code))
        .unwrap_or(CODES.len())
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

/// One node's live counters, shared by every clone of the node.
#[derive(Debug, Default)]
pub(crate) struct NodeCounters {
    commands: AtomicU64,
    acquire: VoteCounters,
    extend: VoteCounters,
    release: VoteCounters,
    latency: LatencyCounters,
    timeouts: AtomicU64,
    connection_errors: AtomicU64,
    protocol_errors: AtomicU64,
    quarantined: AtomicU64,
    redis_errors: [AtomicU64; CODES.len() + 1],
    /// Whether the last command got a reply.
    up: AtomicBool,
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
        self.set_up(true);
    }

    /// The node answered (`true`) or did not; the gauge is set on a
    /// change only, so the hot path reads one shared flag.
    fn set_up(&self, up: bool) {
        if self.up.load(Relaxed) != up && self.up.swap(up, Relaxed) != up {
            self.metrics.up(up);
        }
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
        match kind {
            NodeFailureKind::Timeout(_) | NodeFailureKind::Connection(_) => self.set_up(false),
            NodeFailureKind::Redis { .. } => self.set_up(true),
            _ => {}
        }
        let m = &self.metrics;
        let counter = match kind {
            NodeFailureKind::Timeout(_) => {
                m.timeout();
                &self.timeouts
            }
            NodeFailureKind::Connection(_)
            | NodeFailureKind::SameServer { .. }
            | NodeFailureKind::Evicts { .. } => {
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
            NodeFailureKind::Quarantined { .. } | NodeFailureKind::ServerChanged => {
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
    /// elsewhere, not ours). Returns `yes`, to be used inline. The remote
    /// check changes nothing on the node: its answers are not votes here.
    pub(crate) fn vote(&self, op: Operation, yes: bool) -> bool {
        let votes = match op {
            Operation::Acquire => &self.acquire,
            Operation::Extend => &self.extend,
            Operation::Release => &self.release,
            Operation::Check => return yes,
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
            up: self.up.load(Relaxed),
        }
    }
}

/// Renewal and lost-signal counters of every lock of one client, and its
/// lock-level counters.
#[derive(Debug)]
pub(crate) struct LeaseCounters {
    /// Acquire outcomes, waits, holds, held now: one set per primitive,
    /// indexed by [`Primitive`].
    held: [LockCounters; Primitive::ALL.len()],
    renewals: AtomicU64,
    renewal_failures: AtomicU64,
    uncertain: AtomicU64,
    lost: AtomicU64,
    expired: AtomicU64,
    limit_reached: AtomicU64,
}

impl Default for LeaseCounters {
    fn default() -> Self {
        Self {
            held: Primitive::ALL.map(LockCounters::new),
            renewals: AtomicU64::new(0),
            renewal_failures: AtomicU64::new(0),
            uncertain: AtomicU64::new(0),
            lost: AtomicU64::new(0),
            expired: AtomicU64::new(0),
            limit_reached: AtomicU64::new(0),
        }
    }
}

impl LeaseCounters {
    /// The lock-level counters of `primitive`.
    pub(crate) fn of(&self, primitive: Primitive) -> &LockCounters {
        &self.held[primitive as usize]
    }

    /// An automatic renewal reached a quorum in time.
    pub(crate) fn renewed(&self) {
        self.renewals.fetch_add(1, Relaxed);
        series::renewal(true);
    }

    /// An automatic renewal did not.
    pub(crate) fn renewal_failed(&self) {
        self.renewal_failures.fetch_add(1, Relaxed);
        series::renewal(false);
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
        series::signal(name);
    }

    /// The lock-level counters' copy for `primitive`.
    pub(crate) fn held(&self, primitive: Primitive) -> LockStats {
        self.of(primitive).snapshot()
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
        assert!(
            s.up,
            "an error reply is an answer; a quarantine changes nothing"
        );
        c.failed(&NodeFailureKind::Timeout(50 * MS), None);
        assert!(!c.snapshot("n").up, "down after a timeout");
        assert_eq!(s.latency.count, 4, "error replies are replies");
    }

    #[test]
    fn votes_are_counted_per_operation() {
        let c = NodeCounters::default();
        assert!(c.vote(Operation::Acquire, true));
        assert!(!c.vote(Operation::Acquire, false));
        c.vote(Operation::Extend, true);
        c.vote(Operation::Release, false);
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
