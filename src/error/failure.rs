//! One node's failure to take part in an operation, and how a list of them
//! reads in a message. Shared by [`Error`](crate::Error) and
//! [`LostReason`](crate::LostReason); depends on nothing else in the crate
//! but how durations read (`human`).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::error::human::Human;

/// One node's failure to take part in an operation. Its
/// [`source`](std::error::Error::source) is the redis crate's error, when
/// there was one.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct NodeFailure {
    /// The node, as `host:port/db` (never with its password).
    pub node: String,
    /// What went wrong.
    pub kind: NodeFailureKind,
    cause: Option<Arc<redis::RedisError>>,
}

impl fmt::Display for NodeFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.node, self.kind)
    }
}

impl std::error::Error for NodeFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.redis_error()? as &(dyn std::error::Error + 'static))
    }
}

impl NodeFailure {
    /// A failure of `node` (`host:port/db`) of this kind, without an
    /// underlying redis error; for tests of code that handles failures.
    ///
    /// # Examples
    ///
    /// ```
    /// use quorumlock::{NodeFailure, NodeFailureKind};
    /// let failure = NodeFailure::new("127.0.0.1:7001/0", NodeFailureKind::Protocol("?".into()));
    /// assert_eq!(failure.to_string(), "127.0.0.1:7001/0: unexpected reply: ?");
    /// assert!(failure.redis_error().is_none());
    /// ```
    pub fn new(node: impl Into<String>, kind: NodeFailureKind) -> Self {
        Self {
            node: node.into(),
            kind,
            cause: None,
        }
    }

    /// The same failure, caused by `error`.
    pub(crate) fn caused_by(mut self, error: redis::RedisError) -> Self {
        self.cause = Some(Arc::new(error));
        self
    }

    /// The redis crate's error behind this failure, if there was one (not
    /// for timeouts, quarantine, or replies this client could not read).
    pub fn redis_error(&self) -> Option<&redis::RedisError> {
        self.cause.as_deref()
    }
}

/// Equal when the node and the kind are: the source is not compared.
impl PartialEq for NodeFailure {
    fn eq(&self, other: &Self) -> bool {
        self.node == other.node && self.kind == other.kind
    }
}

impl Eq for NodeFailure {}

/// The ways a single node can fail.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NodeFailureKind {
    /// No answer within the per-node timeout.
    #[error("no answer within {}", Human::new(*.0))]
    Timeout(Duration),
    /// The connection was refused, dropped or could not be made.
    #[error("connection failed: {0}")]
    Connection(String),
    /// The node answered with an error reply, e.g. `WRONGTYPE`, `OOM`,
    /// `NOAUTH`, `READONLY`, `BUSY`.
    #[error("{code} {message}")]
    Redis {
        /// The error code (`WRONGTYPE`, `OOM`, …), or `ERR`.
        code: String,
        /// The rest of the message.
        message: String,
    },
    /// The node answered something this client cannot interpret.
    #[error("unexpected reply: {0}")]
    Protocol(String),
    /// The node was left out of the vote because it restarted too recently.
    #[error("restarted {} ago, not voting yet (restart quarantine)", Human::seconds(*uptime))]
    Quarantined {
        /// How long ago the node (re)started.
        uptime: Duration,
    },
    /// The node is the same server (the same `run_id` in `INFO server`) as
    /// another listed node, reached under another address: it never votes.
    /// [`Builder::build`](crate::Builder::build) refuses such a list; this
    /// is the failure when the duplicate is found later (a node that was
    /// down at build, or an address that now leads elsewhere).
    #[error("the same server as node {other}: not voting twice")]
    SameServer {
        /// The other node, as `host:port/db`.
        other: String,
    },
    /// The node may evict the lock's keys: `maxmemory` is set with a
    /// `maxmemory-policy` other than `noeviction`. It does not vote (see
    /// [`Builder::allow_eviction`](crate::Builder::allow_eviction)).
    #[error("maxmemory {maxmemory} with maxmemory-policy {policy} can evict the lock's keys")]
    Evicts {
        /// The node's `maxmemory-policy`.
        policy: String,
        /// The node's `maxmemory`, in bytes.
        maxmemory: u64,
    },
    /// With restart quarantine, the server that answered a vote is not the
    /// one whose uptime let the node vote (it restarted, or another server
    /// took its place, without the connection breaking, e.g. behind a
    /// proxy): the vote was not counted, and the uptime is read again.
    #[error("another server answered than the one whose uptime was read: vote not counted")]
    ServerChanged,
    /// With durable votes ([`Builder::durable_votes`](crate::Builder::durable_votes)),
    /// the node's yes did not reach enough replicas (`WAIT`) or append-only
    /// files (`WAITAOF`) in time: it was not counted.
    #[error(
        "the write reached {replicas} of {required} replicas{} in time: vote not counted",
        if *.fsynced { "" } else { " and was not fsynced to the AOF" }
    )]
    NotDurable {
        /// The replicas that acknowledged it.
        replicas: u32,
        /// The replicas required.
        required: u32,
        /// Whether the node's own AOF had it (always true for `WAIT`,
        /// which does not ask).
        fsynced: bool,
    },
    /// A master that a replica can replace (a Sentinel group's, a Redis
    /// Cluster master with replicas) whose replicas are not what its votes
    /// need: it does not vote. A promoted replica may lack the locks the
    /// old master granted, and a deposed master may go on granting while
    /// it keeps a replica; both are closed only by durable votes that wait
    /// for **every** replica ([`Builder::durable_votes`](crate::Builder::durable_votes),
    /// `docs/members.md`). With `required` `None` (no durable votes) or
    /// below `online`, the configuration is unsafe and
    /// [`Builder::build`](crate::Builder::build) refuses it; above
    /// `online`, replicas are missing (down, or resynchronizing after a
    /// failover) and the member votes again once they are back.
    #[error("{}", replicas_text(*online, *required))]
    Replicas {
        /// The master's replicas online (`INFO replication`).
        online: u32,
        /// The replicas durable votes wait for, if they are on.
        required: Option<u32>,
    },
}

/// What [`NodeFailureKind::Replicas`] says.
fn replicas_text(online: u32, required: Option<u32>) -> String {
    let plural = |n: u32| if n == 1 { "" } else { "s" };
    match required {
        None => format!(
            "its master has {online} replica{} and can fail over: votes must wait for every \
             replica (durable votes); restart quarantine does not stop a deposed master from granting",
            plural(online)
        ),
        Some(r) if r < online => format!(
            "its master has {online} replicas online and durable votes wait for {r}: a master \
             deposed with the others would still grant; wait for every replica"
        ),
        Some(r) => format!(
            "its master has {online} of the {r} replica{} durable votes wait for online: no vote \
             counts until they are back",
            plural(r)
        ),
    }
}

impl NodeFailureKind {
    /// The node did not answer within its timeout.
    pub fn is_timeout(&self) -> bool {
        matches!(self, NodeFailureKind::Timeout(_))
    }

    /// The node answered with this error code (e.g. `"WRONGTYPE"`).
    pub fn is_redis_error(&self, wanted: &str) -> bool {
        matches!(self, NodeFailureKind::Redis { code, .. } if code.eq_ignore_ascii_case(wanted))
    }

    /// A failure that no retry cures, only a change of configuration: the
    /// node refused the credentials (`WRONGPASS`, `NOAUTH`) or the user's
    /// rights (`NOPERM`), holds a key of another type under the lock's name
    /// (`WRONGTYPE`), holds a fencing counter that is not a canonical
    /// integer in `[0, 2^53)` (`FENCERANGE`), is another listed node's server
    /// ([`SameServer`](NodeFailureKind::SameServer)), can evict the keys
    /// ([`Evicts`](NodeFailureKind::Evicts)), or is a master whose
    /// replicas durable votes do not all cover
    /// ([`Replicas`](NodeFailureKind::Replicas) with fewer required than
    /// online, or none).
    ///
    /// # Examples
    ///
    /// ```
    /// use quorumlock::NodeFailureKind;
    /// let wrongpass = NodeFailureKind::Redis { code: "WRONGPASS".into(), message: String::new() };
    /// assert!(wrongpass.is_misconfigured());
    /// assert!(!NodeFailureKind::Timeout(std::time::Duration::from_millis(50)).is_misconfigured());
    /// ```
    pub fn is_misconfigured(&self) -> bool {
        match self {
            Self::Redis { .. } => MISCONFIGURED_CODES.iter().any(|c| self.is_redis_error(c)),
            Self::SameServer { .. } | Self::Evicts { .. } => true,
            Self::Replicas { online, required } => required.is_none_or(|r| r < *online),
            _ => false,
        }
    }
}

/// Error codes that only a change of configuration cures: credentials,
/// rights, a key of another type under the lock's name, and a fencing
/// counter that is not a canonical integer (set by hand or by a bug).
const MISCONFIGURED_CODES: [&str; 5] = ["WRONGPASS", "NOAUTH", "NOPERM", "WRONGTYPE", "FENCERANGE"];

/// Whether misconfigured nodes alone keep `needed` of `nodes` from being
/// reached: fewer than `needed` nodes are left once those whose failure
/// is [`NodeFailureKind::is_misconfigured`] are taken away, so that no
/// retry can reach the quorum.
pub(crate) fn misconfigured(failures: &[NodeFailure], nodes: usize, needed: usize) -> bool {
    let bad = failures
        .iter()
        .filter(|f| f.kind.is_misconfigured())
        .count();
    bad > 0 && nodes.saturating_sub(bad) < needed
}

/// A list of node failures as a message suffix: `; a: why, b: why`, or
/// nothing for an empty list.
pub(crate) struct NodeFailures<'a>(pub(crate) &'a [NodeFailure]);

impl fmt::Display for NodeFailures<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, failure) in self.0.iter().enumerate() {
            write!(f, "{}{failure}", if i == 0 { "; " } else { ", " })?;
        }
        Ok(())
    }
}
