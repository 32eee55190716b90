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
use crate::stats::metrics::*;
use crate::stats::series::{self, bump, Count, Gauge};
use crate::stats::{LeaseStats, NodeStats, Stats, Votes};

/// Redis error codes counted one by one, then `OTHER`, where any other
/// code counts.
const CODES: [&str; 14] = [
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
    "OTHER",
];

/// Error replies that refuse this client's credentials: the node answers,
/// but votes on nothing until its password or ACL is fixed (down).
const CREDENTIALS: [&str; 2] = ["WRONGPASS", "NOAUTH"];

fn load(n: &AtomicU64) -> u64 {
    n.load(Relaxed)
}

/// One node's live counters, shared by every clone of the node.
#[derive(Debug)]
pub(crate) struct NodeCounters {
    /// The node's label, for the series looked up per event.
    node: String,
    /// Reported on a change only, so the hot path reads one shared flag.
    up_series: Gauge,
    commands: Count,
    /// `[acquire, extend, release][yes, no]`: indexed by [`Operation`],
    /// whose first three variants these are.
    votes: [[Count; 2]; 3],
    timeouts: Count,
    connection_errors: Count,
    protocol_errors: Count,
    quarantined: Count,
    not_durable: Count,
    latency: LatencyCounters,
    /// Indexed as [`CODES`].
    redis_errors: [AtomicU64; CODES.len()],
    /// Whether the last command got an answer the node can vote after.
    up: AtomicBool,
}

impl NodeCounters {
    /// The counters of node `label` (`host:port/db`), each registering its
    /// series now.
    pub(crate) fn new(label: &str) -> Self {
        let node = [("node", label)];
        let up_series = series::gauge(NODE_UP, &node);
        up_series.set(0.0);
        let vote = |op, vote| Count::new(VOTES, &[("node", label), ("op", op), ("vote", vote)]);
        Self {
            node: label.to_owned(),
            up_series,
            commands: Count::new(COMMANDS, &node),
            votes: ["acquire", "extend", "release"].map(|op| [vote(op, "yes"), vote(op, "no")]),
            timeouts: Count::new(TIMEOUTS, &node),
            connection_errors: Count::new(CONNECTION_ERRORS, &node),
            protocol_errors: Count::new(PROTOCOL_ERRORS, &node),
            quarantined: Count::new(QUARANTINED, &node),
            not_durable: Count::new(NOT_DURABLE, &node),
            latency: LatencyCounters::new(
                &LATENCY_BUCKETS,
                series::histogram(REPLY_SECONDS, &node),
            ),
            redis_errors: Default::default(),
            up: AtomicBool::new(false),
        }
    }

    /// A command is about to be sent.
    pub(crate) fn sent(&self) {
        self.commands.add();
    }

    /// A reply (not an error) came back after `elapsed`.
    pub(crate) fn replied(&self, elapsed: Duration) {
        self.latency.record(elapsed);
        self.set_up(true);
    }

    /// The node answered so that it can vote (`true`) or did not; the
    /// gauge is set on a change only.
    fn set_up(&self, up: bool) {
        if self.up.load(Relaxed) != up && self.up.swap(up, Relaxed) != up {
            self.up_series.set(if up { 1.0 } else { 0.0 });
        }
    }

    /// The command failed with `kind`; `elapsed` is `Some` when the node
    /// answered (an error reply), whose latency counts like any reply.
    pub(crate) fn failed(&self, kind: &NodeFailureKind, elapsed: Option<Duration>) {
        use NodeFailureKind as K;
        // The count of the failure, and whether the node can vote after it
        // (`None`: as before). A quarantined node answers, but may not vote.
        let (count, up) = match kind {
            K::Timeout(_) => (&self.timeouts, Some(false)),
            K::Connection(_) | K::SameServer { .. } | K::Evicts { .. } | K::Replicas { .. } => {
                (&self.connection_errors, Some(false))
            }
            K::Protocol(_) => (&self.protocol_errors, None),
            K::Quarantined { .. } => (&self.quarantined, Some(false)),
            K::ServerChanged => (&self.quarantined, None),
            K::NotDurable { .. } => (&self.not_durable, None),
            K::Redis { code, .. } => {
                if let Some(elapsed) = elapsed {
                    self.latency.record(elapsed);
                }
                let other = CODES.len() - 1;
                let known = CODES.iter().position(|c| c.eq_ignore_ascii_case(code));
                let i = known.unwrap_or(other);
                let labels = [("node", self.node.as_str()), ("code", CODES[i])];
                bump(&self.redis_errors[i], ERROR_REPLIES, &labels);
                return self.set_up(!CREDENTIALS.iter().any(|c| kind.is_redis_error(c)));
            }
        };
        count.add();
        if let Some(up) = up {
            self.set_up(up);
        }
    }

    /// The node voted `yes` (granted, extended, deleted) or no (held
    /// elsewhere, not ours). Returns `yes`, to be used inline. The remote
    /// check changes nothing on the node: its answers are not votes here.
    pub(crate) fn vote(&self, op: Operation, yes: bool) -> bool {
        if op != Operation::Check {
            self.votes[op as usize][usize::from(!yes)].add();
        }
        yes
    }

    /// A copy of the counters.
    pub(crate) fn snapshot(&self) -> NodeStats {
        let [acquire, extend, release] = self.votes.each_ref().map(|[yes, no]| Votes {
            yes: yes.get(),
            no: no.get(),
        });
        NodeStats {
            node: self.node.clone(),
            commands: self.commands.get(),
            acquire,
            extend,
            release,
            timeouts: self.timeouts.get(),
            connection_errors: self.connection_errors.get(),
            protocol_errors: self.protocol_errors.get(),
            quarantined: self.quarantined.get(),
            not_durable: self.not_durable.get(),
            redis_errors: CODES
                .into_iter()
                .zip(self.redis_errors.each_ref().map(load))
                .filter(|&(_, n)| n > 0)
                .collect(),
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
    /// Automatic renewals that reached a quorum in time, and those that
    /// did not.
    renewals: [AtomicU64; 2],
    /// Signals by kind, indexed as [`KINDS`]: by [`LossKind`], whose
    /// first four variants these are.
    signals: [AtomicU64; KINDS.len()],
}

/// The `kind` labels of [`SIGNALS`].
const KINDS: [&str; 4] = ["uncertain", "lost", "expired", "limit_reached"];

impl Default for LeaseCounters {
    fn default() -> Self {
        Self {
            held: Primitive::ALL.map(LockCounters::new),
            renewals: Default::default(),
            signals: Default::default(),
        }
    }
}

impl LeaseCounters {
    /// The lock-level counters of `primitive`.
    pub(crate) fn of(&self, primitive: Primitive) -> &LockCounters {
        &self.held[primitive as usize]
    }

    /// An automatic renewal reached a quorum in time (`renewed`), or did
    /// not.
    pub(crate) fn renewal(&self, renewed: bool) {
        let i = usize::from(!renewed);
        bump(&self.renewals[i], [RENEWALS, RENEWAL_FAILURES][i], &[]);
    }

    /// A lock's signal reached `kind` (first firing or upgrade).
    pub(crate) fn signalled(&self, kind: LossKind) {
        if kind != LossKind::Released {
            let i = kind as usize;
            bump(&self.signals[i], SIGNALS, &[("kind", KINDS[i])]);
        }
    }

    /// A copy of every counter, with the nodes' copies.
    pub(crate) fn stats(&self, nodes: Vec<NodeStats>) -> Stats {
        let [locks, permits, elections, reads, writes] =
            self.held.each_ref().map(LockCounters::snapshot);
        let [renewals, renewal_failures] = self.renewals.each_ref().map(load);
        let [uncertain, lost, expired, limit_reached] = self.signals.each_ref().map(load);
        Stats {
            nodes,
            leases: LeaseStats {
                renewals,
                renewal_failures,
                uncertain,
                lost,
                expired,
                limit_reached,
            },
            locks,
            permits,
            elections,
            reads,
            writes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn failures_are_counted_by_kind_and_code() {
        let c = NodeCounters::new("n:1/0");
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
        c.failed(&NodeFailureKind::Protocol("?".into()), None);
        c.failed(
            &NodeFailureKind::NotDurable {
                replicas: 1,
                required: 2,
                fsynced: true,
            },
            None,
        );
        let s = c.snapshot();
        assert_eq!(s.node, "n:1/0");
        assert_eq!(s.commands, 1);
        assert_eq!(
            (
                s.timeouts,
                s.connection_errors,
                s.protocol_errors,
                s.not_durable
            ),
            (1, 1, 1, 1)
        );
        assert_eq!(
            s.quarantined, 0,
            "a vote short of replicas is not a quarantine"
        );
        assert_eq!(s.redis_error_count("OOM"), 2);
        assert_eq!(s.redis_error_count("wrongtype"), 1);
        assert_eq!(s.redis_error_count("OTHER"), 1);
        assert_eq!(s.redis_error_count("BUSY"), 0);
        assert_eq!(s.failures(), 7);
        assert!(
            s.up,
            "an error reply is an answer; a vote short of replicas too"
        );
        c.failed(
            &NodeFailureKind::Quarantined {
                uptime: Duration::from_secs(1),
            },
            None,
        );
        let q = c.snapshot();
        assert_eq!(q.quarantined, 1);
        assert!(!q.up, "a quarantined node may not vote");
        c.replied(MS);
        c.failed(&NodeFailureKind::Timeout(50 * MS), None);
        assert!(!c.snapshot().up, "down after a timeout");
        let reply = |code: &str| NodeFailureKind::Redis {
            code: code.into(),
            message: String::new(),
        };
        for (kind, up) in [
            (reply("WRONGTYPE"), true),
            (reply("wrongpass"), false),
            (reply("NOPERM"), true),
            (reply("NOAUTH"), false),
            (reply("OOM"), true),
            (
                NodeFailureKind::SameServer {
                    other: "m:1/0".into(),
                },
                false,
            ),
        ] {
            c.failed(&kind, Some(MS));
            assert_eq!(c.snapshot().up, up, "{kind}");
        }
        assert_eq!(s.latency.count, 4, "error replies are replies");
    }

    #[test]
    fn votes_are_counted_per_operation() {
        let c = NodeCounters::new("n");
        assert!(c.vote(Operation::Acquire, true));
        assert!(!c.vote(Operation::Acquire, false));
        c.vote(Operation::Extend, true);
        c.vote(Operation::Release, false);
        c.replied(MS);
        let s = c.snapshot();
        assert_eq!((s.acquire.yes, s.acquire.no), (1, 1));
        assert_eq!((s.extend.yes, s.extend.no), (1, 0));
        assert_eq!((s.release.yes, s.release.no), (0, 1));
        assert_eq!(s.latency.count, 1);
        assert_eq!(s.failures(), 0);
    }

    #[test]
    fn lease_counters_count_every_kind_but_release() {
        let c = LeaseCounters::default();
        c.renewal(true);
        c.renewal(true);
        c.renewal(false);
        for (k, times) in [
            (LossKind::Uncertain, 1),
            (LossKind::Expired, 3),
            (LossKind::Lost, 2),
            (LossKind::LimitReached, 4),
            (LossKind::Released, 5),
        ] {
            for _ in 0..times {
                c.signalled(k);
            }
        }
        let s = c.stats(Vec::new()).leases;
        assert_eq!((s.renewals, s.renewal_failures), (2, 1));
        assert_eq!(
            (s.uncertain, s.lost, s.expired, s.limit_reached),
            (1, 2, 3, 4)
        );
    }
}
