//! `quorumlock status --json` and `quorumlock leader --json`: one JSON
//! object on stdout for scripts and monitoring, for a lock, (`--permits`)
//! a semaphore, or an election's leader. The field names are stable
//! (README, "status --json"); new fields may be added, none renamed or
//! removed while `version` is 1.

use std::time::Duration;

use quorumlock::{Leader, NodeFailureKind, NodeView, RwLockStatus, SemaphoreStatus, Status};
use serde_json::{json, Value};

/// The schema version printed as `version`.
pub const VERSION: u64 = 1;

/// The overall state: `held` (one holder on a quorum), `free` (a quorum
/// answered and holds nothing), `partial` (held somewhere, by no one on a
/// quorum), `unknown` (too few nodes answered to tell).
pub fn state(status: &Status) -> &'static str {
    state_of(
        status.leading_holder().map(|(_, n)| n),
        status.free(),
        status.quorum,
    )
}

/// [`state`] from the leading holder's node count, the free answers and
/// the quorum.
fn state_of(holder_nodes: Option<usize>, free: usize, quorum: usize) -> &'static str {
    match holder_nodes {
        Some(n) if n >= quorum => "held",
        Some(_) => "partial",
        None if free >= quorum => "free",
        None => "unknown",
    }
}

fn millis(d: Option<Duration>) -> Value {
    d.map_or(Value::Null, |d| {
        Value::from(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    })
}

fn error(kind: &NodeFailureKind) -> Value {
    let (name, code) = match kind {
        NodeFailureKind::Timeout(_) => ("timeout", None),
        NodeFailureKind::Connection(_) => ("connection", None),
        NodeFailureKind::Redis { code, .. } => ("redis", Some(code.as_str())),
        NodeFailureKind::Protocol(_) => ("protocol", None),
        NodeFailureKind::Quarantined { .. } => ("quarantined", None),
        _ => ("other", None),
    };
    json!({ "kind": name, "code": code, "message": kind.to_string() })
}

fn node(label: &str, view: &NodeView) -> Value {
    let (state, holder, expires, err) = match view {
        NodeView::Free => ("free", None, None, Value::Null),
        NodeView::Held {
            token_prefix,
            expires_in,
        } => (
            "held",
            Some(token_prefix.as_str()),
            *expires_in,
            Value::Null,
        ),
        NodeView::Failed(f) => ("error", None, None, error(&f.kind)),
        _ => (
            "error",
            None,
            None,
            json!({ "kind": "other", "code": null, "message": format!("{view:?}") }),
        ),
    };
    json!({
        "node": label,
        "state": state,
        "holder": holder,
        "expires_in_ms": millis(expires),
        "error": err,
    })
}

/// The whole status of `resource` (as given on the command line) as one
/// JSON object; `exit_code` is the status the command exits with.
pub fn status(resource: &str, status: &Status, exit_code: u8) -> String {
    status_value(resource, status, exit_code).to_string()
}

fn status_value(resource: &str, status: &Status, exit_code: u8) -> Value {
    let leading = status.leading_holder();
    json!({
        "version": VERSION,
        "resource": resource,
        "state": state(status),
        "held": status.held_by_quorum(),
        "holder": leading.map(|(p, _)| p),
        "holder_nodes": leading.map_or(0, |(_, n)| n),
        "quorum": status.quorum,
        "nodes_total": status.nodes.len(),
        "expires_in_ms": millis(status.expires_in()),
        "exit_code": exit_code,
        "nodes": status.nodes.iter().map(|(l, v)| node(l, v)).collect::<Vec<_>>(),
    })
}

/// The status of the read–write lock `resource` as one JSON object: the
/// lock's fields for its writer (`state`, `holder`, `nodes`, …) and
/// `readers`, the readers a quorum of nodes sees.
pub fn shared(resource: &str, status: &RwLockStatus, exit_code: u8) -> String {
    let mut object = status_value(resource, &status.writer, exit_code);
    object["readers"] = Value::from(status.readers_held());
    if status.readers_held() > 0 {
        object["state"] = Value::from("read");
    }
    object.to_string()
}

/// The status of the semaphore `resource` of `permits` permits as one JSON
/// object: its holders, the permits held, free and unknown, the limit its
/// holders named as a majority records it (null when none), each slot's
/// state, and per node the first error it answered (null when none).
pub fn semaphore(resource: &str, permits: u32, status: &SemaphoreStatus, exit_code: u8) -> String {
    let (held, free) = (status.held(), status.free());
    let holders: Vec<Value> = status
        .holders()
        .iter()
        .map(|h| {
            json!({
                "holder": h.token_prefix,
                "slots": h.slots,
                "expires_in_ms": millis(h.expires_in),
            })
        })
        .collect();
    let slots: Vec<Value> = status
        .slots
        .iter()
        .enumerate()
        .map(|(i, slot)| {
            let leading = slot.leading_holder();
            json!({
                "slot": i,
                "state": state(slot),
                "holder": leading.map(|(p, _)| p),
                "holder_nodes": leading.map_or(0, |(_, n)| n),
                "expires_in_ms": millis(slot.expires_in()),
            })
        })
        .collect();
    let first = status.slots.first();
    let nodes: Vec<Value> = first
        .map(|s| s.nodes.as_slice())
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(i, (label, _))| {
            let failed = status
                .slots
                .iter()
                .find_map(|slot| match slot.nodes.get(i) {
                    Some((_, NodeView::Failed(f))) => Some(error(&f.kind)),
                    _ => None,
                });
            json!({ "node": label, "error": failed.unwrap_or(Value::Null) })
        })
        .collect();
    let value = json!({
        "version": VERSION,
        "resource": resource,
        "permits": permits,
        "permits_held": held,
        "permits_free": free,
        "permits_unknown": permits.saturating_sub(held + free),
        "permits_recorded": status.limit,
        "holders": holders,
        "quorum": first.map_or(0, |s| s.quorum),
        "nodes_total": nodes.len(),
        "exit_code": exit_code,
        "slots": slots,
        "nodes": nodes,
    });
    value.to_string()
}

/// Who leads the election `name` (as given), as one JSON object: the
/// leader's epoch and value (lossy UTF-8), or nulls, and the error when the
/// read failed.
pub fn leader(name: &str, read: &quorumlock::Result<Option<Leader>>, exit_code: u8) -> String {
    let found = read.as_ref().ok().and_then(Option::as_ref);
    let value = json!({
        "version": VERSION,
        "election": name,
        "leader": found.is_some(),
        "epoch": found.map(|l| l.epoch),
        "value": found.map(|l| String::from_utf8_lossy(&l.value)),
        "error": read.as_ref().err().map(ToString::to_string),
        "exit_code": exit_code,
    });
    value.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use quorumlock::NodeFailure;

    #[test]
    fn state_tells_held_free_partial_and_unknown_apart() {
        assert_eq!(state_of(Some(2), 0, 2), "held");
        assert_eq!(state_of(Some(3), 0, 2), "held");
        assert_eq!(state_of(Some(1), 2, 2), "partial");
        assert_eq!(state_of(None, 2, 2), "free");
        assert_eq!(state_of(None, 1, 2), "unknown");
    }

    #[test]
    fn each_node_view_has_the_documented_fields() {
        let held = node(
            "a:1/0",
            &NodeView::Held {
                token_prefix: "3f9c2a1b".into(),
                expires_in: Some(Duration::from_micros(1_500_900)),
            },
        );
        assert_eq!(
            held,
            json!({"node": "a:1/0", "state": "held", "holder": "3f9c2a1b",
                   "expires_in_ms": 1500, "error": null})
        );
        let free = node("a:1/0", &NodeView::Free);
        assert_eq!(
            (free["state"].as_str(), free["holder"].is_null()),
            (Some("free"), true)
        );
        let failed = node(
            "a:1/0",
            &NodeView::Failed(NodeFailure::new(
                "a:1/0",
                NodeFailureKind::Redis {
                    code: "WRONGTYPE".into(),
                    message: "wrong kind".into(),
                },
            )),
        );
        assert_eq!(failed["state"], "error");
        assert_eq!(failed["error"]["kind"], "redis");
        assert_eq!(failed["error"]["code"], "WRONGTYPE");
        assert_eq!(failed["error"]["message"], "WRONGTYPE wrong kind");
        let timeout = error(&NodeFailureKind::Timeout(Duration::from_millis(50)));
        assert_eq!(
            (timeout["kind"].as_str(), timeout["code"].is_null()),
            (Some("timeout"), true)
        );
    }
}
