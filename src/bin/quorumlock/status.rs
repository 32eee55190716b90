//! `quorumlock status RESOURCE`.

use clap::Args;
use quorumlock::NodeView;

use crate::output::{stderr_line, stdout_line};
use crate::{diagnose, exit, Common};

#[derive(Args, Debug)]
pub struct StatusArgs {
    /// The lock's name, for a name that begins with `-`.
    #[arg(
        long = "resource",
        value_name = "RESOURCE",
        allow_hyphen_values = true,
        conflicts_with = "resource"
    )]
    pub resource_flag: Option<String>,
    /// The lock's name (the Redis key).
    #[arg(required_unless_present = "resource_flag")]
    pub resource: Option<String>,
}

pub async fn status(common: &Common, args: StatusArgs) -> u8 {
    let redlock = match crate::redlock(common).await {
        Ok(r) => r,
        Err(e) => {
            stderr_line(&e.to_string());
            return crate::status_of(&e);
        }
    };
    let resource = args.resource_flag.or(args.resource).unwrap_or_default();
    let status = redlock.status(&resource).await;
    let (mut failed, mut config) = (0, 0);
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
            NodeView::Failed(f) => {
                failed += 1;
                if diagnose::is_config(&f.kind) {
                    config += 1;
                }
                stdout_line(&format!("{node:<28} error: {}", f.kind));
            }
            other => stdout_line(&format!("{node:<28} {other:?}")),
        }
    }
    stdout_line(&status.to_string());
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
