//! What a failed acquisition means for the operator, from the library's
//! error and its per-node causes: contention (wait), an outage that may
//! pass (retry for a bounded time), or a configuration error that will not
//! pass by waiting (fail at once). Pure: no I/O.

use quorumlock::{Error, NodeFailure, NodeFailureKind};

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
    let summary = no_quorum(failures, nodes, quorum);
    if err.is_misconfigured() {
        return Verdict::Config(summary);
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

/// `no quorum (3 of 5 nodes needed): 3 refused the connection, 2 hung`.
pub fn no_quorum(failures: &[NodeFailure], nodes: usize, quorum: usize) -> String {
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
    format!(
        "no quorum ({quorum} of {nodes} nodes needed): {}",
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

    #[test]
    fn the_summary_counts_each_kind_of_failure() {
        let hung = failure(NodeFailureKind::Timeout(Duration::from_millis(50)));
        let text = no_quorum(&[refused(), hung.clone(), refused(), hung, refused()], 5, 3);
        assert_eq!(
            text,
            "no quorum (3 of 5 nodes needed): 3 refused the connection, 2 hung (no answer in time)"
        );
    }
}
