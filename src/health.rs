//! Readiness: whether each node is reachable, accepts this client's
//! credentials and is admitted to vote, and whether that makes a quorum
//! ([`Redlock::health`](crate::Redlock::health),
//! [`Builder::require_quorum`](crate::Builder::require_quorum)).

use std::fmt;
use std::time::Duration;

use crate::error::{Error, NodeFailure, NodeFailureKind};

/// Every node's readiness, from [`Redlock::health`](crate::Redlock::health).
///
/// # Examples
///
/// ```no_run
/// # async fn demo(redlock: quorumlock::Redlock) {
/// let health = redlock.health().await;
/// if !health.quorum_ready() {
///     for node in health.nodes.iter().filter(|n| !n.is_ready()) {
///         eprintln!("{}: {:?}", node.node, node.error);
///     }
/// }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Health {
    /// Each node, in the order given to the builder.
    pub nodes: Vec<NodeHealth>,
    /// Nodes a quorum needs.
    pub needed: usize,
}

impl Health {
    /// Nodes that are ready ([`NodeHealth::is_ready`]).
    pub fn ready(&self) -> usize {
        self.nodes.iter().filter(|n| n.is_ready()).count()
    }

    /// Whether enough nodes are ready for a quorum: a lock can be taken
    /// now if no one else holds it.
    pub fn quorum_ready(&self) -> bool {
        self.ready() >= self.needed
    }

    /// Every node ready, a quorum but not every node, or no quorum: see
    /// [`HealthState`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) {
    /// use quorumlock::HealthState;
    ///
    /// let health = redlock.health().await;
    /// match health.state() {
    ///     HealthState::Ready => {}
    ///     HealthState::Degraded => eprintln!("warning: {health}"),
    ///     HealthState::Unavailable | _ => eprintln!("not ready: {health}"),
    /// }
    /// # }
    /// ```
    pub fn state(&self) -> HealthState {
        match self.ready() {
            n if n == self.nodes.len() => HealthState::Ready,
            n if n >= self.needed => HealthState::Degraded,
            _ => HealthState::Unavailable,
        }
    }

    /// The error of a build that requires a quorum, when there is none.
    pub(crate) fn not_ready(&self) -> Option<Error> {
        (!self.quorum_ready()).then(|| Error::NotReady {
            ready: self.ready(),
            needed: self.needed,
            nodes: self.nodes.len(),
            failures: self.nodes.iter().filter_map(|n| n.error.clone()).collect(),
        })
    }
}

/// `3 of 5 nodes ready (3 needed): degraded`, then each node that is not
/// ready and why.
impl fmt::Display for Health {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (ready, nodes, needed) = (self.ready(), self.nodes.len(), self.needed);
        let state = self.state();
        write!(
            f,
            "{ready} of {nodes} nodes ready ({needed} needed): {state}"
        )?;
        for error in self.nodes.iter().filter_map(|n| n.error.as_ref()) {
            write!(f, "; {error}")?;
        }
        Ok(())
    }
}

/// What [`Health::state`] makes of the nodes' readiness.
///
/// # Examples
///
/// ```
/// use quorumlock::HealthState;
///
/// assert_eq!(HealthState::Degraded.to_string(), "degraded");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HealthState {
    /// Every node is ready.
    Ready,
    /// A quorum of nodes is ready, not every node: locks are taken, but
    /// fewer failures than before take the quorum away (alert, do not
    /// take the service out of rotation).
    Degraded,
    /// Fewer nodes than a quorum are ready: no lock can be taken.
    Unavailable,
}

impl HealthState {
    /// `ready`, `degraded` or `unavailable`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(quorumlock::HealthState::Unavailable.as_str(), "unavailable");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            HealthState::Ready => "ready",
            HealthState::Degraded => "degraded",
            HealthState::Unavailable => "unavailable",
        }
    }
}

impl fmt::Display for HealthState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One node's readiness.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeHealth {
    /// The node, as `host:port/db`.
    pub node: String,
    /// A connection was made and the node answered (false: nothing
    /// listening, a host that does not resolve, no answer in time).
    pub reachable: bool,
    /// The node accepts this client's credentials on a new connection
    /// (false after `WRONGPASS` or `NOAUTH`), whatever the connection in
    /// use still gets away with.
    pub authenticated: bool,
    /// The node may vote: it answered, and is neither refused (another
    /// listed node's server, an evicting `maxmemory-policy`) nor in restart
    /// quarantine.
    pub admitted: bool,
    /// How long its `PING` took (connecting included when there was no
    /// connection); `None` without an answer.
    pub latency: Option<Duration>,
    /// Why it is not ready, if it is not.
    pub error: Option<NodeFailure>,
}

impl NodeHealth {
    /// Reachable, authenticated and admitted.
    pub fn is_ready(&self) -> bool {
        self.reachable && self.authenticated && self.admitted && self.error.is_none()
    }

    /// The readiness that the outcome of a probe of `node` shows.
    pub(crate) fn from_probe(node: &str, result: Result<Duration, NodeFailure>) -> Self {
        let (latency, error) = (result.as_ref().ok().copied(), result.err());
        let kind = error.as_ref().map(|e| &e.kind);
        let reachable = !matches!(
            kind,
            Some(NodeFailureKind::Timeout(_) | NodeFailureKind::Connection(_))
        );
        let authenticated = reachable
            && !kind.is_some_and(|k| k.is_redis_error("WRONGPASS") || k.is_redis_error("NOAUTH"));
        Self {
            node: node.to_owned(),
            reachable,
            authenticated,
            admitted: authenticated && error.is_none(),
            latency,
            error,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(kind: NodeFailureKind) -> NodeHealth {
        NodeHealth::from_probe("h:1/0", Err(NodeFailure::new("h:1/0", kind)))
    }

    fn redis(code: &str) -> NodeFailureKind {
        NodeFailureKind::Redis {
            code: code.to_owned(),
            message: String::new(),
        }
    }

    fn flags(n: &NodeHealth) -> (bool, bool, bool, bool) {
        (n.reachable, n.authenticated, n.admitted, n.is_ready())
    }

    #[test]
    fn each_failure_says_which_step_failed() {
        let ms = Duration::from_millis(1);
        let ok = NodeHealth::from_probe("h:1/0", Ok(ms));
        assert_eq!(flags(&ok), (true, true, true, true));
        assert_eq!(ok.latency, Some(ms));
        let down = failed(NodeFailureKind::Connection("refused".to_owned()));
        assert_eq!(flags(&down), (false, false, false, false));
        assert_eq!(down.latency, None);
        assert_eq!(
            flags(&failed(NodeFailureKind::Timeout(ms))),
            (false, false, false, false)
        );
        for code in ["WRONGPASS", "NOAUTH"] {
            assert_eq!(flags(&failed(redis(code))), (true, false, false, false));
        }
        for kind in [
            redis("NOPERM"),
            redis("LOADING"),
            NodeFailureKind::Quarantined { uptime: ms },
            NodeFailureKind::SameServer {
                other: "g:1/0".to_owned(),
            },
        ] {
            assert_eq!(flags(&failed(kind)), (true, true, false, false));
        }
    }

    #[test]
    fn a_quorum_is_ready_with_a_majority_of_ready_nodes() {
        let ok = || NodeHealth::from_probe("h:1/0", Ok(Duration::ZERO));
        let down = || failed(NodeFailureKind::Connection("refused".to_owned()));
        let health = Health {
            nodes: vec![ok(), ok(), down()],
            needed: 2,
        };
        assert!(health.quorum_ready() && health.not_ready().is_none());
        let health = Health {
            nodes: vec![ok(), down(), down()],
            needed: 2,
        };
        assert!(!health.quorum_ready());
        let err = health.not_ready().expect("not ready");
        assert!(err.is_unavailable(), "{err}");
        assert_eq!(err.node_failures().len(), 2);
        assert!(health
            .to_string()
            .starts_with("1 of 3 nodes ready (2 needed): unavailable; h:1/0"));
    }

    #[test]
    fn all_ready_a_quorum_or_none_is_ready_degraded_or_unavailable() {
        let ok = || NodeHealth::from_probe("h:1/0", Ok(Duration::ZERO));
        let wrong = || failed(redis("WRONGPASS"));
        let state = |ready: usize| {
            let mut nodes: Vec<_> = (0..5).map(|_| wrong()).collect();
            nodes[..ready].fill_with(ok);
            Health { nodes, needed: 3 }.state()
        };
        let states: Vec<_> = (0..=5).map(state).collect();
        use HealthState::*;
        assert_eq!(
            states,
            [
                Unavailable,
                Unavailable,
                Unavailable,
                Degraded,
                Degraded,
                Ready
            ]
        );
        let names: Vec<_> = [Ready, Degraded, Unavailable].map(|s| s.to_string()).into();
        assert_eq!(names, ["ready", "degraded", "unavailable"]);
    }

    #[test]
    fn durations_read_humanly_and_never_as_zero() {
        let health = Health {
            nodes: vec![
                NodeHealth::from_probe("a:1/0", Ok(Duration::from_micros(300))),
                failed(NodeFailureKind::Timeout(Duration::from_millis(2000))),
                failed(NodeFailureKind::Quarantined {
                    uptime: Duration::ZERO,
                }),
                failed(NodeFailureKind::Quarantined {
                    uptime: Duration::from_secs(200),
                }),
            ],
            needed: 3,
        };
        assert_eq!(
            health.to_string(),
            "1 of 4 nodes ready (3 needed): unavailable; h:1/0: no answer within 2 s; \
             h:1/0: restarted less than 1 s ago, not voting yet (restart quarantine); \
             h:1/0: restarted 3 min 20 s ago, not voting yet (restart quarantine)"
        );
    }
}
