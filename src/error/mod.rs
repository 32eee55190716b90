//! The error type: contention, outage, bad input and a lost lock are
//! different things, and each keeps the per-node causes.

pub(crate) mod classify;
mod failure;
pub(crate) mod human;
pub(crate) mod lost;
mod name;

pub(crate) use failure::misconfigured;
pub(crate) use failure::NodeFailures;
pub use failure::{NodeFailure, NodeFailureKind};
pub use lost::{LossKind, LostReason};
pub use name::{Operation, Primitive, ResourceName};

use std::fmt;
use std::time::Duration;

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong when taking, extending or releasing a lock.
///
/// Use the `is_*` helpers rather than matching, so new variants do not break
/// your code:
///
/// ```
/// # fn handle(err: quorumlock::Error) {
/// if err.is_contended() {
///     // someone else holds it: skip this run or wait
/// } else if err.is_misconfigured() {
///     // wrong password, missing ACL right, a key of another type, a
///     // semaphore's permits named differently: fix the setup
/// } else if err.is_unavailable() {
///     // not enough nodes answered: alert, retry later
/// } else if err.is_invalid_input() {
///     // a bug in the caller: fix the TTL, resource or node list
/// } else if err.is_lost() {
///     // the lock ended before we were done: stop touching the resource
/// }
/// # }
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Error {
    /// Another owner holds the lock on enough nodes that no quorum was possible.
    #[non_exhaustive]
    Contended {
        /// The resource, printable; for a lock over several resources, the
        /// one a node was found holding (the first listed when none was).
        resource: ResourceName,
        /// Nodes that answered that the key holds another token; 0 for a
        /// waiter that gave up in the waiter queue before its turn came
        /// (then `attempts` counts its turns).
        held_elsewhere: usize,
        /// Nodes that granted the lock in the last attempt (released again).
        granted: usize,
        /// Votes a quorum needs.
        needed: usize,
        /// Nodes in the cluster.
        nodes: usize,
        /// Attempts made, the first one included.
        attempts: u32,
        /// Nodes that failed in the last attempt, and why.
        failures: Vec<NodeFailure>,
        /// For a semaphore: the permits wanted and how many the refusing
        /// nodes reported free; `None` for a lock or an election, and when
        /// no node refused for want of free permits (contenders split the
        /// nodes' slots between them).
        permits: Option<Occupancy>,
    },

    /// Too few nodes answered for a quorum to be possible: an outage
    /// ([`is_unavailable`](Error::is_unavailable)) or, when misconfigured
    /// nodes alone leave too few, a misconfiguration
    /// ([`is_misconfigured`](Error::is_misconfigured)).
    #[non_exhaustive]
    Unavailable {
        /// What was being done.
        operation: Operation,
        /// The resource, printable.
        resource: ResourceName,
        /// Nodes that said yes (for acquire: released again).
        granted: usize,
        /// Votes a quorum needs.
        needed: usize,
        /// Nodes in the cluster.
        nodes: usize,
        /// Attempts made, the first one included.
        attempts: u32,
        /// The nodes that failed, and why.
        failures: Vec<NodeFailure>,
        /// Nodes that had not answered when the outcome was decided
        /// (their answers were not waited for): neither failed nor fine.
        unanswered: usize,
    },

    /// A quorum said yes, but it took so long that no validity was left.
    #[non_exhaustive]
    ValidityExhausted {
        /// The resource, printable.
        resource: ResourceName,
        /// Time the last attempt took.
        elapsed: Duration,
        /// The TTL asked for.
        ttl: Duration,
        /// Attempts made, the first one included.
        attempts: u32,
    },

    /// A fenced acquire found the resource's fencing counter at
    /// [`MAX_FENCE`](crate::MAX_FENCE) on a node of its majority: no larger
    /// token can be handed out. The keys the attempt set were released; it
    /// was not retried.
    #[non_exhaustive]
    FenceExhausted {
        /// The resource, printable.
        resource: ResourceName,
        /// The highest counter the granting nodes read.
        highest: u64,
    },

    /// A semaphore acquire named another number of permits than the
    /// semaphore's holders: enough nodes record the limit its permits were
    /// taken with, `recorded`, that no quorum could grant `requested`.
    /// Nothing was set; it was not retried. A misconfiguration
    /// ([`is_misconfigured`](Error::is_misconfigured)): every client of a
    /// semaphore must name the same number of permits.
    #[non_exhaustive]
    LimitMismatch {
        /// The semaphore, printable.
        semaphore: ResourceName,
        /// The permits this acquire named.
        requested: u32,
        /// The permits the nodes record, named by its holders.
        recorded: u32,
    },

    /// The caller passed something that cannot work. Nothing was sent.
    InvalidInput(String),

    /// A node address given to the [`Builder`](crate::Builder) does not
    /// parse. Nothing was sent.
    #[non_exhaustive]
    InvalidNode {
        /// Where it stands in the list, from 1.
        position: usize,
        /// The address as given, any password replaced by `***`.
        address: String,
        /// What is wrong with it: the scheme, the host, the port, the
        /// database, …
        reason: String,
    },

    /// [`Builder::require_quorum`](crate::Builder::require_quorum): too few
    /// nodes were reachable, authenticated and admitted when the client
    /// was built.
    #[non_exhaustive]
    NotReady {
        /// Nodes ready.
        ready: usize,
        /// Nodes a quorum needs.
        needed: usize,
        /// Nodes in the cluster.
        nodes: usize,
        /// Each node that is not ready, and why.
        failures: Vec<NodeFailure>,
    },

    /// The lock is no longer held (or can no longer be known to be held).
    #[non_exhaustive]
    Lost {
        /// What was held, by the name it was asked for by, printable: the
        /// lock's (first) resource, the semaphore's or the election's name
        /// ([`ResourceName::primitive`] says which).
        resource: ResourceName,
        /// Why the lock counts as lost.
        reason: LostReason,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Contended {
                resource,
                held_elsewhere,
                granted,
                needed,
                nodes,
                attempts,
                failures,
                permits,
            } => {
                let resource = resource.named();
                match permits {
                    Some(p) => write!(
                        f,
                        "{resource}: {} permit(s) wanted, {} of {} held, {} free (on at least {} of \
                         {nodes} nodes)",
                        p.wanted,
                        p.permits.saturating_sub(p.free),
                        p.permits,
                        p.free,
                        p.nodes
                    ),
                    None if *held_elsewhere == 0 && *granted == 0 && failures.is_empty() => write!(
                        f,
                        "{resource} is held or waited for by others: this waiter was not at the \
                         head of its waiter queue yet"
                    ),
                    None => write!(
                        f,
                        "{resource} is held by another owner: {held_elsewhere} of {nodes} nodes \
                         refused ({granted} granted, {needed} needed)"
                    ),
                }?;
                write!(f, " after {attempts} attempt(s){}", NodeFailures(failures))
            }
            Error::Unavailable {
                operation,
                resource,
                granted,
                needed,
                nodes,
                attempts,
                failures,
                unanswered,
            } => {
                let why = match self.is_misconfigured() {
                    true => "misconfigured nodes keep the quorum out of reach",
                    false => "quorum unreachable",
                };
                write!(
                    f,
                    "{operation} on {} failed: {why}, {granted} of {needed} needed votes from \
                     {nodes} nodes",
                    resource.named()
                )?;
                if *unanswered > 0 {
                    write!(f, " ({unanswered} unanswered when it was decided)")?;
                }
                write!(f, " after {attempts} attempt(s){}", NodeFailures(failures))
            }
            Error::ValidityExhausted {
                resource,
                elapsed,
                ttl,
                attempts,
            } => write!(
                f,
                "acquire on {} reached quorum after {elapsed:?}, leaving no validity of a \
                 {ttl:?} TTL (after {attempts} attempt(s)); nodes are too slow for this TTL",
                resource.named()
            ),
            Error::FenceExhausted { resource, highest } => write!(
                f,
                "no fencing token left for {}: a node's counter is at {highest}, tokens end at \
                 2^53 - 1",
                resource.named()
            ),
            Error::LimitMismatch {
                semaphore,
                requested,
                recorded,
            } => write!(
                f,
                "semaphore {semaphore} is held with {recorded} permits, this acquire named \
                 {requested}: every client of a semaphore must name the same number of permits"
            ),
            Error::InvalidInput(message) => write!(f, "invalid input: {message}"),
            Error::InvalidNode {
                position,
                address,
                reason,
            } => write!(
                f,
                "invalid input: node #{position} of the list ({address}) does not parse: {reason}"
            ),
            Error::NotReady {
                ready,
                needed,
                nodes,
                failures,
            } => write!(
                f,
                "no quorum ready: {ready} of {nodes} nodes reachable, authenticated and \
                 admitted, {needed} needed{}",
                NodeFailures(failures)
            ),
            Error::Lost { resource, reason } => write!(f, "{} lost: {reason}", resource.held()),
        }
    }
}

/// The first node failure is the source: its redis error, when there was one,
/// is the source after it.
impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.node_failures().first()? as &(dyn std::error::Error + 'static))
    }
}

impl Error {
    /// Another owner holds the lock.
    pub fn is_contended(&self) -> bool {
        matches!(self, Error::Contended { .. })
    }

    /// Not enough nodes answered in time (outage, timeouts, error replies,
    /// or replies so slow that no validity was left), or, for a
    /// [`require_quorum`](crate::Builder::require_quorum) build, not enough
    /// were ready, for reasons that may pass. Never true together with [`is_misconfigured`](Error::is_misconfigured):
    /// an outage that only a change of configuration ends is that instead.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) {
    /// if let Err(e) = redlock.try_acquire("report", std::time::Duration::from_secs(30)).await {
    ///     if e.is_unavailable() { /* retry later, alert if it lasts */ }
    /// }
    /// # }
    /// ```
    pub fn is_unavailable(&self) -> bool {
        match self {
            Error::Unavailable { .. } | Error::NotReady { .. } => !self.is_misconfigured(),
            Error::ValidityExhausted { .. } => true,
            _ => false,
        }
    }

    /// Too few nodes answered, and the misconfigured ones alone keep the
    /// quorum out of reach: more nodes than a quorum can spare refused the
    /// credentials or the user's rights (`WRONGPASS`, `NOAUTH`, `NOPERM`),
    /// hold a key of another type under the lock's name (`WRONGTYPE`) or a
    /// fencing counter that is not a canonical integer (`FENCERANGE`, the
    /// message names the counter's key), or are refused by this client
    /// (see [`NodeFailureKind::is_misconfigured`]).
    /// No retry helps: an acquire stops after the attempt that showed it.
    /// The error is an [`Error::Unavailable`] (or, from a
    /// [`require_quorum`](crate::Builder::require_quorum) build,
    /// [`Error::NotReady`]) whose [`is_unavailable`](Error::is_unavailable)
    /// is false — or an [`Error::LimitMismatch`]: a semaphore acquire that
    /// named another number of permits than the semaphore's holders.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) {
    /// match redlock.acquire("report", std::time::Duration::from_secs(30)).await {
    ///     Err(e) if e.is_misconfigured() => { /* fix the password, ACL or key; exit 78 */ }
    ///     Err(e) if e.is_unavailable() => { /* an outage: try again later */ }
    ///     _ => {}
    /// }
    /// # }
    /// ```
    pub fn is_misconfigured(&self) -> bool {
        match *self {
            Error::Unavailable { needed, nodes, .. } | Error::NotReady { needed, nodes, .. } => {
                failure::misconfigured(self.node_failures(), nodes, needed)
            }
            Error::LimitMismatch { .. } => true,
            _ => false,
        }
    }

    /// The input was rejected before any network call (an unparsable node
    /// address included).
    pub fn is_invalid_input(&self) -> bool {
        matches!(self, Error::InvalidInput(_) | Error::InvalidNode { .. })
    }

    /// A fenced acquire found no fencing token left for the resource
    /// (its counter is at [`MAX_FENCE`](crate::MAX_FENCE)).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) {
    /// match redlock.lock("ledger", std::time::Duration::from_secs(10)).fenced().acquire().await {
    ///     Err(e) if e.is_fence_exhausted() => { /* move to a fresh resource name */ }
    ///     _ => {}
    /// }
    /// # }
    /// ```
    pub fn is_fence_exhausted(&self) -> bool {
        matches!(self, Error::FenceExhausted { .. })
    }

    /// The lock was held but is not any more (or cannot be proven to be).
    pub fn is_lost(&self) -> bool {
        matches!(self, Error::Lost { .. })
    }

    /// The per-node failures behind this error, if any.
    pub fn node_failures(&self) -> &[NodeFailure] {
        match self {
            Error::Contended { failures, .. }
            | Error::Unavailable { failures, .. }
            | Error::NotReady { failures, .. } => failures,
            Error::Lost { reason, .. } => reason.node_failures(),
            _ => &[],
        }
    }

    pub(crate) fn invalid(msg: impl Into<String>) -> Self {
        Error::InvalidInput(msg.into())
    }
}

/// What the nodes that refused a semaphore's acquire reported
/// ([`Error::Contended`]'s `permits`): each had fewer permits free than
/// wanted.
///
/// # Examples
///
/// ```no_run
/// # async fn demo(redlock: quorumlock::Redlock) {
/// use quorumlock::{Error, Retry};
///
/// let ttl = std::time::Duration::from_secs(30);
/// let refused = redlock.semaphore("exports", 3, ttl).take(2).retry(Retry::Times(0)).acquire().await;
/// if let Err(Error::Contended { permits: Some(p), .. }) = refused {
///     println!("{} wanted, {} of {} free", p.wanted, p.free, p.permits);
/// }
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Occupancy {
    /// Permits wanted.
    pub wanted: u32,
    /// The semaphore's permits.
    pub permits: u32,
    /// The most permits free that one of the refusing nodes reported
    /// (fewer than `wanted`); `permits - free` were held there at least.
    pub free: u32,
    /// Nodes that refused so (the others were not waited for, set other
    /// slots, or failed).
    pub nodes: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unavailable(failures: Vec<NodeFailureKind>) -> Error {
        Error::Unavailable {
            operation: Operation::Acquire,
            resource: ResourceName::new(b"r"),
            granted: 0,
            needed: 3,
            nodes: 5,
            attempts: 1,
            failures: failures
                .into_iter()
                .map(|kind| NodeFailure::new("n:1/0", kind))
                .collect(),
            unanswered: 0,
        }
    }

    fn code(code: &str) -> NodeFailureKind {
        NodeFailureKind::Redis {
            code: code.into(),
            message: String::new(),
        }
    }

    #[test]
    fn misconfigured_when_the_misconfigured_nodes_alone_leave_too_few() {
        let timeout = || NodeFailureKind::Timeout(Duration::from_millis(50));
        for (failures, misconfigured) in [
            // Three of five refuse the password: two are left, three needed.
            (
                vec![code("WRONGPASS"), code("noauth"), code("NOPERM")],
                true,
            ),
            (
                vec![
                    code("WRONGTYPE"),
                    NodeFailureKind::SameServer { other: "x".into() },
                    NodeFailureKind::Evicts {
                        policy: "allkeys-lru".into(),
                        maxmemory: 1,
                    },
                ],
                true,
            ),
            // Two misconfigured and a timeout: a retry may still reach
            // three (the timeout may pass).
            (vec![code("WRONGPASS"), code("NOAUTH"), timeout()], false),
            // A fencing counter that is not a canonical integer.
            (
                vec![code("FENCERANGE"), code("FENCERANGE"), code("FENCERANGE")],
                true,
            ),
            (vec![timeout(), timeout(), timeout()], false),
            (vec![code("OOM"), code("BUSY"), code("READONLY")], false),
        ] {
            let err = unavailable(failures);
            assert_eq!(err.is_misconfigured(), misconfigured, "{err}");
            assert_eq!(err.is_unavailable(), !misconfigured, "{err}");
        }
        let contended = Error::Contended {
            resource: ResourceName::new(b"r"),
            held_elsewhere: 3,
            granted: 0,
            needed: 3,
            nodes: 5,
            attempts: 1,
            failures: vec![],
            permits: None,
        };
        assert!(!contended.is_misconfigured() && !contended.is_unavailable());
        // Another limit recorded: fix the setup, not an outage or contention.
        let mismatch = Error::LimitMismatch {
            semaphore: ResourceName::new(b"pool"),
            requested: 2,
            recorded: 3,
        };
        assert!(mismatch.is_misconfigured());
        assert!(!mismatch.is_unavailable() && !mismatch.is_contended());
        let message = mismatch.to_string();
        assert!(
            message.contains("3 permits") && message.contains("named 2"),
            "{message}"
        );
    }

    #[test]
    fn messages_name_the_failing_nodes() {
        let err = Error::Unavailable {
            operation: Operation::Acquire,
            resource: ResourceName::new(b"r"),
            granted: 1,
            needed: 3,
            nodes: 5,
            attempts: 1,
            failures: vec![NodeFailure::new(
                "127.0.0.1:7001/0",
                NodeFailureKind::Timeout(Duration::from_millis(50)),
            )],
            unanswered: 0,
        };
        let text = err.to_string();
        assert!(
            text.contains("127.0.0.1:7001/0: no answer within 50 ms"),
            "{text}"
        );
        assert!(err.is_unavailable() && !err.is_contended() && !err.is_lost());
        assert_eq!(err.node_failures().len(), 1);
        let source = std::error::Error::source(&err).expect("the first failure");
        assert_eq!(
            source.to_string(),
            "127.0.0.1:7001/0: no answer within 50 ms"
        );
    }
}
