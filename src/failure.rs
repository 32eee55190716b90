//! One node's failure to take part in an operation, and how a list of them
//! reads in a message. Shared by [`Error`](crate::Error) and
//! [`LostReason`](crate::LostReason); depends on nothing else in the crate.

use std::fmt;
use std::time::Duration;

/// One node's failure to take part in an operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFailure {
    /// The node, as `host:port/db` (never with its password).
    pub node: String,
    /// What went wrong.
    pub kind: NodeFailureKind,
}

impl fmt::Display for NodeFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.node, self.kind)
    }
}

/// The ways a single node can fail.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NodeFailureKind {
    /// No answer within the per-node timeout.
    Timeout(Duration),
    /// The connection was refused, dropped or could not be made.
    Connection(String),
    /// The node answered with an error reply, e.g. `WRONGTYPE`, `OOM`,
    /// `NOAUTH`, `READONLY`, `BUSY`.
    Redis {
        /// The error code (`WRONGTYPE`, `OOM`, …), or `ERR`.
        code: String,
        /// The rest of the message.
        message: String,
    },
    /// The node answered something this client cannot interpret.
    Protocol(String),
    /// The node was left out of the vote because it restarted too recently.
    Quarantined {
        /// How long ago the node (re)started.
        uptime: Duration,
    },
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
}

impl fmt::Display for NodeFailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeFailureKind::Timeout(t) => write!(f, "no answer within {t:?}"),
            NodeFailureKind::Connection(m) => write!(f, "connection failed: {m}"),
            NodeFailureKind::Redis { code, message } => write!(f, "{code} {message}"),
            NodeFailureKind::Protocol(m) => write!(f, "unexpected reply: {m}"),
            NodeFailureKind::Quarantined { uptime } => {
                write!(f, "restarted {uptime:?} ago, not voting yet")
            }
        }
    }
}

/// A list of node failures as a message suffix: `; a: why, b: why`, or
/// nothing for an empty list.
pub(crate) struct NodeFailures<'a>(pub(crate) &'a [NodeFailure]);

impl fmt::Display for NodeFailures<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, failure) in self.0.iter().enumerate() {
            f.write_str(if i == 0 { "; " } else { ", " })?;
            write!(f, "{failure}")?;
        }
        Ok(())
    }
}
