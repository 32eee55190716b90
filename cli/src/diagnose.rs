//! What a failed acquisition means for the operator, from the library's
//! error and its per-node causes: contention (wait), an outage that may
//! pass (retry for a bounded time), or a configuration error that will not
//! pass by waiting (fail at once). Pure: no I/O.

use quorumlock::{Error, NodeFailure, NodeFailureKind, NodeView};

/// How to go on after a failed acquisition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Someone else holds the lock.
    Contended,
    /// Too few nodes took part, for reasons that may pass; the message.
    Outage(String),
    /// Too few nodes can ever take part with this configuration.
    Config(String),
    /// The input was refused before anything was sent.
    Usage(String),
    /// Anything else.
    Other(String),
}

/// Decides what `err` means for a cluster of `nodes` needing `quorum`.
pub fn classify(err: &Error, nodes: usize, quorum: usize) -> Verdict {
    if err.is_contended() {
        return Verdict::Contended;
    }
    if err.is_invalid_input() {
        return Verdict::Usage(err.to_string());
    }
    let failures = err.node_failures();
    let unanswered = match err {
        Error::Unavailable { unanswered, .. } => *unanswered,
        _ => 0,
    };
    let summary = no_quorum(failures, unanswered, nodes, quorum);
    if err.is_misconfigured() {
        // Without node failures (a semaphore's permits named differently)
        // the error says it best.
        return Verdict::Config(match failures.is_empty() {
            true => err.to_string(),
            false => summary,
        });
    }
    if !err.is_unavailable() {
        return Verdict::Other(err.to_string());
    }
    if failures.is_empty() {
        // Replies too slow for the TTL (no validity left).
        Verdict::Outage(err.to_string())
    } else {
        Verdict::Outage(summary)
    }
}

/// What a read of the target's keys after a refusal says about it: `None`
/// when enough nodes answered for the refusal to mean contention; else an
/// outage, a configuration error, or contention after all when the nodes
/// that failed only hold a key of another type (`WRONGTYPE`, reported by
/// [`wrongtype`]). `keys` holds, per key read (the lock's, or each slot of
/// a semaphore), every node's view in the order of the nodes; a node
/// counts as failed when it failed for some key.
pub fn after_refusal(
    keys: &[&[(String, NodeView)]],
    nodes: usize,
    quorum: usize,
) -> Option<Verdict> {
    let failures: Vec<NodeFailure> = (0..nodes)
        .filter_map(|i| {
            keys.iter().find_map(|views| match views.get(i) {
                Some((_, NodeView::Failed(f))) => Some(f.clone()),
                _ => None,
            })
        })
        .collect();
    if nodes.saturating_sub(failures.len()) >= quorum {
        return None;
    }
    let config = failures
        .iter()
        .filter(|f| f.kind.is_misconfigured())
        .count();
    let summary = no_quorum(&failures, 0, nodes, quorum);
    let too_many = config > nodes.saturating_sub(quorum);
    Some(
        if too_many && !failures.iter().all(|f| f.kind.is_redis_error("WRONGTYPE")) {
            Verdict::Config(summary)
        } else if too_many {
            Verdict::Contended
        } else {
            Verdict::Outage(summary)
        },
    )
}

/// The number of nodes that hold a value of another type (`WRONGTYPE`)
/// under every key of the target, when that is more than a quorum can
/// spare (no key can ever be taken); `None` otherwise.
pub fn wrongtype(keys: &[&[(String, NodeView)]], nodes: usize, quorum: usize) -> Option<usize> {
    keys.iter()
        .map(|views| {
            views
                .iter()
                .filter(
                    |(_, v)| matches!(v, NodeView::Failed(f) if f.kind.is_redis_error("WRONGTYPE")),
                )
                .count()
        })
        .min()
        .filter(|&n| n > nodes.saturating_sub(quorum))
}

/// `no quorum (3 of 5 nodes needed): 3 refused the connection, 2 hung`;
/// with nodes whose answer the decision did not wait for (`unanswered`),
/// `…: 3 refused the credentials (WRONGPASS); 2 unanswered when it was
/// decided` — they may have failed alike, or not.
pub fn no_quorum(
    failures: &[NodeFailure],
    unanswered: usize,
    nodes: usize,
    quorum: usize,
) -> String {
    let mut groups: Vec<(String, usize)> = Vec::new();
    for failure in failures {
        let what = describe(&failure.kind);
        match groups.iter_mut().find(|(w, _)| *w == what) {
            Some((_, n)) => *n += 1,
            None => groups.push((what, 1)),
        }
    }
    let parts: Vec<String> = groups
        .iter()
        .map(|(what, n)| format!("{n} {what}"))
        .collect();
    let unanswered = match unanswered {
        0 => String::new(),
        n => format!("; {n} unanswered when it was decided"),
    };
    format!(
        "no quorum ({quorum} of {nodes} nodes needed): {}{unanswered}",
        if parts.is_empty() {
            "no node failed, but too few agreed".to_owned()
        } else {
            parts.join(", ")
        }
    )
}

fn describe(kind: &NodeFailureKind) -> String {
    match kind {
        NodeFailureKind::Timeout(_) => "hung (no answer in time)".to_owned(),
        NodeFailureKind::Connection(m) if m.to_ascii_lowercase().contains("refused") => {
            "refused the connection".to_owned()
        }
        NodeFailureKind::Connection(_) => "could not be reached".to_owned(),
        NodeFailureKind::Redis { code, .. } if code == "WRONGPASS" || code == "NOAUTH" => {
            format!("refused the credentials ({code})")
        }
        NodeFailureKind::Redis { code, .. } if code == "WRONGTYPE" => {
            "hold a key of another type under this name (WRONGTYPE)".to_owned()
        }
        NodeFailureKind::Redis { code, .. } => format!("answered {code}"),
        NodeFailureKind::Quarantined { .. } | NodeFailureKind::ServerChanged => {
            "restarted too recently to vote".to_owned()
        }
        NodeFailureKind::SameServer { other } => {
            format!("duplicate another node's server ({other})")
        }
        NodeFailureKind::Evicts { policy, .. } => {
            format!("can evict the lock's keys (maxmemory-policy {policy})")
        }
        _ => "answered something unexpected".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn failure(kind: NodeFailureKind) -> NodeFailure {
        NodeFailure::new("127.0.0.1:7001/0", kind)
    }

    fn refused() -> NodeFailure {
        failure(NodeFailureKind::Connection(
            "Connection refused (os error 111)".into(),
        ))
    }

    fn views(list: &[NodeView]) -> Vec<(String, NodeView)> {
        list.iter()
            .enumerate()
            .map(|(i, v)| (format!("n{i}"), v.clone()))
            .collect()
    }

    fn wrong() -> NodeView {
        NodeView::Failed(failure(NodeFailureKind::Redis {
            code: "WRONGTYPE".into(),
            message: "wrong kind".into(),
        }))
    }

    #[test]
    fn a_refusal_is_contention_when_a_quorum_answered_on_every_key() {
        let held = NodeView::Held {
            token_prefix: "aaaa".into(),
            expires_in: None,
        };
        let down = NodeView::Failed(refused());
        let one = views(&[held.clone(), held.clone(), down.clone()]);
        assert_eq!(after_refusal(&[&one[..]], 3, 2), None);
        // Two slots, a different node down on each: two nodes failed.
        let other = views(&[down.clone(), held.clone(), held]);
        let verdict = after_refusal(&[&one[..], &other[..]], 3, 2);
        assert!(matches!(verdict, Some(Verdict::Outage(_))), "{verdict:?}");
    }

    #[test]
    fn wrongtype_counts_only_when_every_key_is_blocked() {
        let free = NodeView::Free;
        let blocked = views(&[wrong(), wrong(), free.clone()]);
        let open = views(&[free.clone(), free.clone(), free]);
        assert_eq!(wrongtype(&[&blocked[..]], 3, 2), Some(2));
        assert_eq!(wrongtype(&[&blocked[..], &blocked[..]], 3, 2), Some(2));
        assert_eq!(wrongtype(&[&blocked[..], &open[..]], 3, 2), None);
        assert_eq!(
            after_refusal(&[&blocked[..]], 3, 2),
            Some(Verdict::Contended),
            "WRONGTYPE alone reads as contention, reported by wrongtype()"
        );
    }

    #[test]
    fn the_summary_counts_each_kind_of_failure() {
        let hung = failure(NodeFailureKind::Timeout(Duration::from_millis(50)));
        let text = no_quorum(
            &[refused(), hung.clone(), refused(), hung, refused()],
            0,
            5,
            3,
        );
        assert_eq!(
            text,
            "no quorum (3 of 5 nodes needed): 3 refused the connection, 2 hung (no answer in time)"
        );
        // Decided at the third refusal: the other two are not said to be fine.
        let wrongpass = failure(NodeFailureKind::Redis {
            code: "WRONGPASS".into(),
            message: "invalid username-password pair".into(),
        });
        let text = no_quorum(&[wrongpass.clone(), wrongpass.clone(), wrongpass], 2, 5, 3);
        assert_eq!(
            text,
            "no quorum (3 of 5 nodes needed): 3 refused the credentials (WRONGPASS); 2 \
             unanswered when it was decided"
        );
    }
}
