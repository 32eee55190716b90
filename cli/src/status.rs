//! `quorumlock status [--json] [--permits L] RESOURCE` and `quorumlock
//! leader [--json] NAME`.

use quorumlock::{NodeView, Redlock, RwLockStatus, Status};

use crate::args::{Common, LeaderArgs, StatusArgs};
use crate::output::{stderr_line, stdout_line};
use crate::{client, exit};

pub async fn status(common: &Common, args: StatusArgs) -> u8 {
    let redlock = match client::connect_reader(common).await {
        Ok(r) => r,
        Err(code) => return code,
    };
    let resource = args.resource.name();
    if let Some(permits) = args.permits {
        return semaphore(&redlock, &resource, permits, args.json).await;
    }
    if args.shared {
        return shared(&redlock, &resource, args.json).await;
    }
    let status = redlock.status(&resource).await;
    let code = exit_code(&status);
    if args.json {
        stdout_line(&crate::json::status(&resource, &status, code));
        return code;
    }
    for (node, view) in &status.nodes {
        match view {
            NodeView::Free => stdout_line(&format!("{node:<28} free")),
            NodeView::Held {
                token_prefix,
                expires_in,
            } => match expires_in {
                Some(left) => stdout_line(&format!(
                    "{node:<28} held by {token_prefix}…  expires in {:.3}s",
                    left.as_secs_f64()
                )),
                None => stdout_line(&format!("{node:<28} held by {token_prefix}…  no expiry")),
            },
            NodeView::Failed(f) => stdout_line(&format!("{node:<28} error: {}", f.kind)),
            other => stdout_line(&format!("{node:<28} {other:?}")),
        }
    }
    stdout_line(&status.to_string());
    code
}

/// The holders of the semaphore `resource` of `permits` permits: one line
/// per holder (token prefix, slots, expiry), then the summary.
async fn semaphore(redlock: &Redlock, resource: &str, permits: u32, json: bool) -> u8 {
    let status = match redlock.semaphore_status(resource, permits).await {
        Ok(s) => s,
        Err(e) => {
            stderr_line(&e.to_string());
            return client::status_of(&e);
        }
    };
    let code = semaphore_exit_code(status.slots.iter().map(exit_code));
    if json {
        stdout_line(&crate::json::semaphore(resource, permits, &status, code));
        return code;
    }
    for holder in status.holders() {
        let slots: Vec<String> = holder.slots.iter().map(ToString::to_string).collect();
        let noun = if slots.len() == 1 { "slot" } else { "slots" };
        let expiry = holder.expires_in.map_or("no expiry".to_owned(), |left| {
            format!("expires in {:.3}s", left.as_secs_f64())
        });
        stdout_line(&format!(
            "held by {}…  {noun} {}  {expiry}",
            holder.token_prefix,
            slots.join(", ")
        ));
    }
    stdout_line(&status.to_string());
    code
}

/// The read–write lock `resource`: per node its writer (or lock) and its
/// readers, then the summary; 0 when written or read by a quorum, else as
/// the writer's key says.
async fn shared(redlock: &Redlock, resource: &str, json: bool) -> u8 {
    let status = match redlock.rwlock_status(resource).await {
        Ok(s) => s,
        Err(e) => {
            stderr_line(&e.to_string());
            return client::status_of(&e);
        }
    };
    let code = shared_exit_code(&status);
    if json {
        stdout_line(&crate::json::shared(resource, &status, code));
        return code;
    }
    for ((node, writer), (_, readers)) in status.writer.nodes.iter().zip(&status.readers) {
        let line = match (writer, readers) {
            (NodeView::Failed(f), _) => format!("error: {}", f.kind),
            (NodeView::Held { token_prefix, .. }, _) => format!("written by {token_prefix}…"),
            (_, Some(0) | None) => "free".to_owned(),
            (_, Some(n)) => format!("{n} readers"),
        };
        stdout_line(&format!("{node:<28} {line}"));
    }
    stdout_line(&status.to_string());
    code
}

/// 0 when readers hold on a quorum, else the writer's key's code.
fn shared_exit_code(status: &RwLockStatus) -> u8 {
    match status.readers_held() {
        0 => exit_code(&status.writer),
        _ => exit::OK,
    }
}

/// Who leads the election NAME: its epoch and value (0), nobody (1), or
/// the error (69, 78; 2 for an empty name).
pub async fn leader(common: &Common, args: LeaderArgs) -> u8 {
    let redlock = match client::connect_reader(common).await {
        Ok(r) => r,
        Err(code) => return code,
    };
    let name = args.resource.name();
    let read = redlock.leader(&name).await;
    let code = match &read {
        Ok(Some(_)) => exit::OK,
        Ok(None) => exit::NOT_HELD,
        Err(e) => client::status_of(e),
    };
    if args.json {
        stdout_line(&crate::json::leader(&name, &read, code));
        return code;
    }
    match read {
        Ok(Some(leader)) => stdout_line(&format!(
            "{name:?} is led in epoch {} by {:?}",
            leader.epoch,
            String::from_utf8_lossy(&leader.value)
        )),
        Ok(None) => stdout_line(&format!("{name:?} has no leader")),
        Err(e) => stderr_line(&e.to_string()),
    }
    code
}

/// A semaphore's status from its slots' (as [`exit_code`] gives them): 0
/// when some permit is held, else the worst of the slots' (78, then 69),
/// else 1.
fn semaphore_exit_code(slots: impl Iterator<Item = u8>) -> u8 {
    let codes: Vec<u8> = slots.collect();
    [exit::OK, exit::CONFIG, exit::UNAVAILABLE]
        .into_iter()
        .find(|c| codes.contains(c))
        .unwrap_or(exit::NOT_HELD)
}

/// 0 held by a quorum, 78 a configuration error on too many nodes, 69 too
/// few answers, else 1.
fn exit_code(status: &Status) -> u8 {
    let failures = status.nodes.iter().filter_map(|(_, view)| match view {
        NodeView::Failed(f) => Some(f),
        _ => None,
    });
    let (failed, config) = failures.fold((0, 0), |(n, c), f| {
        (n + 1, c + usize::from(f.kind.is_misconfigured()))
    });
    let nodes = status.nodes.len();
    if status.held_by_quorum() {
        exit::OK
    } else if config > nodes.saturating_sub(status.quorum) {
        exit::CONFIG
    } else if nodes - failed < status.quorum {
        exit::UNAVAILABLE
    } else {
        exit::NOT_HELD
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_semaphore_is_held_when_one_slot_is_else_its_worst_slot_tells() {
        let code = |slots: &[u8]| semaphore_exit_code(slots.iter().copied());
        assert_eq!(code(&[1, 0, 69]), exit::OK);
        assert_eq!(code(&[1, 69, 78]), exit::CONFIG);
        assert_eq!(code(&[1, 69]), exit::UNAVAILABLE);
        assert_eq!(code(&[1, 1]), exit::NOT_HELD);
    }
}
