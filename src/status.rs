//! Who holds a resource: a read-only look at every node, for operators and
//! for showing waiters what they wait for.

use std::fmt;
use std::time::Duration;

use crate::error::{NodeFailure, ResourceName};
use crate::token::Token;

/// What one node holds for a resource.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NodeView {
    /// The key is absent.
    Free,
    /// The key holds a value (a lock token, normally).
    Held {
        /// The first characters of the value.
        token_prefix: String,
        /// Time until the key expires; `None` when it has no expiry.
        expires_in: Option<Duration>,
    },
    /// The node did not answer usably.
    Failed(NodeFailure),
}

/// A resource as seen by every node at one moment.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Status {
    /// The resource, printable.
    pub resource: ResourceName,
    /// Per node, in the order the nodes were given: its label and view.
    pub nodes: Vec<(String, NodeView)>,
    /// Votes a quorum needs.
    pub quorum: usize,
}

impl NodeView {
    /// The view of a node that answered `GET` with `value` and `PTTL` with
    /// `pttl` (−1: no expiry; −2: no key, expired after the `GET`).
    pub(crate) fn from_peek(value: Option<&[u8]>, pttl: i64) -> Self {
        match value {
            Some(value) if pttl != -2 => NodeView::Held {
                token_prefix: String::from_utf8_lossy(value)
                    .chars()
                    .take(Token::SHOWN)
                    .collect(),
                expires_in: u64::try_from(pttl).ok().map(Duration::from_millis),
            },
            // No key, or it expired between the `GET` and the `PTTL`.
            _ => NodeView::Free,
        }
    }

    /// The view of a semaphore's slots on one node, for a waiter that
    /// wants `want` of them: free when that many are free; held otherwise,
    /// until enough of the held slots expire (the `want − free`-th soonest);
    /// failed when the node could not say.
    pub(crate) fn enough_free(mut views: Vec<NodeView>, want: usize) -> NodeView {
        if let Some(failed) = views.iter().find(|v| matches!(v, NodeView::Failed(_))) {
            return failed.clone();
        }
        let slots = views.len();
        views.retain(|v| matches!(v, NodeView::Held { .. }));
        views.sort_by_key(NodeView::held_for);
        // The `want − free`-th soonest to expire; none when enough are free.
        let nth = want.checked_sub(slots - views.len() + 1);
        nth.and_then(|k| views.into_iter().nth(k))
            .unwrap_or(NodeView::Free)
    }

    /// The view of a set of keys on one node from the view of each: held
    /// while any is set, until the last of those expires (the one held
    /// longest); free only when every key is; failed otherwise (the first
    /// failure).
    pub(crate) fn combined(views: impl IntoIterator<Item = NodeView>) -> NodeView {
        let (mut held, mut failed) = (None, None);
        for view in views {
            if view.held_for() > held.as_ref().and_then(Self::held_for) {
                held = Some(view);
            } else if failed.is_none() && matches!(view, NodeView::Failed(_)) {
                failed = Some(view);
            }
        }
        held.or(failed).unwrap_or(NodeView::Free)
    }

    /// How long the key stays set: `None` unless it is held,
    /// `Duration::MAX` when it has no expiry.
    pub(crate) fn held_for(&self) -> Option<Duration> {
        match self {
            NodeView::Held { expires_in, .. } => Some(expires_in.unwrap_or(Duration::MAX)),
            NodeView::Free | NodeView::Failed(_) => None,
        }
    }
}

impl Status {
    /// Each value held, with its expiry, in the order of the nodes.
    fn held(&self) -> impl DoubleEndedIterator<Item = (&str, Option<Duration>)> + '_ {
        self.nodes.iter().filter_map(|(_, view)| match view {
            NodeView::Held {
                token_prefix,
                expires_in,
            } => Some((token_prefix.as_str(), *expires_in)),
            _ => None,
        })
    }

    /// The value prefix held on the most nodes (the first listed of a
    /// tie), and on how many.
    pub fn leading_holder(&self) -> Option<(&str, usize)> {
        let on = |prefix| self.held().filter(|&(p, _)| p == prefix).count();
        // `max_by_key` keeps the last of a tie: the first, walking back.
        let counted = self.held().rev().map(|(p, _)| (p, on(p)));
        counted.max_by_key(|&(_, n)| n)
    }

    /// Nodes that answered that the key is absent. Only when a quorum of
    /// them did is the resource known to be free; nodes that failed to
    /// answer (`WRONGTYPE`, timeouts, refused connections) could hold it.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) {
    /// let status = redlock.status("invoice:nightly").await;
    /// if status.leading_holder().is_none() && status.free() < status.quorum {
    ///     eprintln!("cannot tell: too few nodes answered ({status})");
    /// }
    /// # }
    /// ```
    pub fn free(&self) -> usize {
        let free = self.nodes.iter().filter(|(_, v)| *v == NodeView::Free);
        free.count()
    }

    /// True when one value is held on a majority of nodes.
    pub fn held_by_quorum(&self) -> bool {
        self.leading_holder().is_some_and(|(_, n)| n >= self.quorum)
    }

    /// The time until the leading holder's key expires on the last of the
    /// majority of nodes that hold it (an upper bound of the lock's life).
    pub fn expires_in(&self) -> Option<Duration> {
        let (prefix, _) = self.leading_holder()?;
        let expiries = self.held().filter(|&(p, _)| p == prefix);
        expiries.filter_map(|(_, expires_in)| expires_in).max()
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (name, nodes, quorum, free) =
            (&self.resource, self.nodes.len(), self.quorum, self.free());
        match self.leading_holder() {
            Some((prefix, n)) if n >= quorum => {
                write!(f, "{name} is held by {prefix}… on {n} of {nodes} nodes")?;
            }
            Some((prefix, n)) => write!(
                f,
                "{name} is not held by a quorum ({prefix}… on {n} of {nodes} nodes, \
                 {quorum} needed)"
            )?,
            None if free >= quorum => write!(f, "{name} is free")?,
            None => {
                write!(
                    f,
                    "{name} is unknown: only {free} of {nodes} nodes answered (key absent), \
                     {quorum} needed"
                )?;
                let failed = self.nodes.iter().find_map(|(_, v)| match v {
                    NodeView::Failed(failure) => Some(failure),
                    _ => None,
                });
                if let Some(failure) = failed {
                    write!(f, " (first failure: {failure})")?;
                }
            }
        }
        f.write_str(&expiry(self.expires_in()))
    }
}

/// `, expires in 29.1s`, or nothing for no expiry.
pub(crate) fn expiry(left: Option<Duration>) -> String {
    left.map(|left| format!(", expires in {:.1}s", left.as_secs_f64()))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::NodeFailureKind;

    fn status(views: Vec<NodeView>) -> Status {
        let nodes = views
            .into_iter()
            .enumerate()
            .map(|(i, v)| (format!("127.0.0.1:700{i}/0"), v))
            .collect();
        Status {
            resource: ResourceName::new(b"r"),
            nodes,
            quorum: 2,
        }
    }

    #[test]
    fn a_peek_reads_as_free_or_held() {
        assert_eq!(NodeView::from_peek(None, -2), NodeView::Free);
        assert_eq!(
            NodeView::from_peek(Some(b"0123456789abcdef0123"), 1500),
            NodeView::Held {
                token_prefix: "0123456789abcdef0123".chars().take(Token::SHOWN).collect(),
                expires_in: Some(Duration::from_millis(1500)),
            }
        );
        assert!(matches!(
            NodeView::from_peek(Some(b"x"), -1),
            NodeView::Held {
                expires_in: None,
                ..
            }
        ));
        // Expired between the `GET` and the `PTTL`: gone, not held forever.
        assert_eq!(NodeView::from_peek(Some(b"x"), -2), NodeView::Free);
    }

    fn held(ms: Option<u64>) -> NodeView {
        NodeView::Held {
            token_prefix: format!("{ms:?}"),
            expires_in: ms.map(Duration::from_millis),
        }
    }

    #[test]
    fn a_set_of_keys_is_held_while_any_is_and_free_when_all_are() {
        let failed = NodeView::Failed(NodeFailure::new(
            "127.0.0.1:7000/0",
            NodeFailureKind::Timeout(Duration::from_millis(50)),
        ));
        let all = |views: &[NodeView]| NodeView::combined(views.iter().cloned());
        // The first key free, the second held: held (the spin of a waiter
        // that looked at the first key alone).
        assert_eq!(all(&[NodeView::Free, held(Some(400))]), held(Some(400)));
        assert_eq!(
            all(&[held(Some(9)), NodeView::Free, held(Some(70))]),
            held(Some(70)),
            "until the last one expires"
        );
        assert_eq!(all(&[failed.clone(), held(Some(5))]), held(Some(5)));
        assert_eq!(all(&[held(None), held(Some(1))]), held(None));
        assert_eq!(all(&[held(Some(1)), held(None)]), held(None));
        assert_eq!(held(None).held_for(), Some(Duration::MAX));
        assert_eq!(all(&[NodeView::Free, NodeView::Free]), NodeView::Free);
        assert_eq!(all(&[NodeView::Free, failed.clone()]), failed);
        assert_eq!(all(&[NodeView::Free]), NodeView::Free);
        assert_eq!(
            all(&[held(Some(1))]).held_for(),
            Some(Duration::from_millis(1))
        );
        assert_eq!(failed.held_for(), None);
    }

    #[test]
    fn enough_slots_are_free_once_the_soonest_held_expire() {
        let views = vec![NodeView::Free, held(Some(300)), held(None), held(Some(100))];
        let wait = |want| NodeView::enough_free(views.clone(), want);
        assert_eq!(wait(1), NodeView::Free);
        assert_eq!(wait(2), held(Some(100)));
        assert_eq!(wait(3), held(Some(300)));
        assert_eq!(wait(4), held(None));
        assert_eq!(
            wait(5),
            NodeView::Free,
            "more than there are: nothing to wait for"
        );
        let failed = NodeView::Failed(NodeFailure::new(
            "127.0.0.1:7000/0",
            NodeFailureKind::Timeout(Duration::from_millis(50)),
        ));
        let mut views = views;
        views.insert(2, failed.clone());
        assert_eq!(NodeView::enough_free(views, 1), failed);
    }

    #[test]
    fn failed_nodes_are_not_reported_as_free() {
        let wrongtype = NodeView::Failed(NodeFailure::new(
            "127.0.0.1:7000/0",
            NodeFailureKind::Redis {
                code: "WRONGTYPE".into(),
                message: "Operation against a key holding the wrong kind of value".into(),
            },
        ));
        let unknown = status(vec![wrongtype.clone(), wrongtype, NodeView::Free]);
        let text = unknown.to_string();
        assert!(!text.contains("is free"), "{text}");
        assert!(text.contains("WRONGTYPE"), "{text}");
        assert_eq!(unknown.free(), 1);
        let free = status(vec![NodeView::Free, NodeView::Free, NodeView::Free]);
        assert_eq!(free.to_string(), "\"r\" is free");
    }
}
