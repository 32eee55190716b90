//! `quorumlock status [--json] RESOURCE`.

use quorumlock::{NodeView, Status};

use crate::args::{Common, StatusArgs};
use crate::output::{stderr_line, stdout_line};
use crate::{client, diagnose, exit};

pub async fn status(common: &Common, args: StatusArgs) -> u8 {
    let redlock = match client::redlock(common).await {
        Ok(r) => r,
        Err(e) => {
            stderr_line(&e.to_string());
            return client::status_of(&e);
        }
    };
    let resource = args.resource.name();
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

/// 0 held by a quorum, 78 a configuration error on too many nodes, 69 too
/// few answers, else 1.
fn exit_code(status: &Status) -> u8 {
    let failures = status.nodes.iter().filter_map(|(_, view)| match view {
        NodeView::Failed(f) => Some(f),
        _ => None,
    });
    let (failed, config) = failures.fold((0, 0), |(n, c), f| {
        (n + 1, c + usize::from(diagnose::is_config(&f.kind)))
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
