//! `quorumlock status RESOURCE`.

use clap::Args;
use quorumlock::NodeView;

use crate::{exit, Common};

#[derive(Args, Debug)]
pub struct StatusArgs {
    /// The lock's name (the Redis key).
    pub resource: String,
}

pub async fn status(common: &Common, args: StatusArgs) -> u8 {
    let redlock = match crate::redlock(common).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("quorumlock: {e}");
            return crate::status_of(&e);
        }
    };
    let status = redlock.status(&args.resource).await;
    let mut failed = 0;
    for (node, view) in &status.nodes {
        match view {
            NodeView::Free => println!("{node:<28} free"),
            NodeView::Held {
                token_prefix,
                expires_in,
            } => match expires_in {
                Some(left) => println!(
                    "{node:<28} held by {token_prefix}…  expires in {:.3}s",
                    left.as_secs_f64()
                ),
                None => println!("{node:<28} held by {token_prefix}…  no expiry"),
            },
            NodeView::Failed(f) => {
                failed += 1;
                println!("{node:<28} error: {}", f.kind);
            }
            other => println!("{node:<28} {other:?}"),
        }
    }
    println!("{status}");
    if status.held_by_quorum() {
        exit::OK
    } else if status.nodes.len() - failed < status.quorum {
        exit::UNAVAILABLE
    } else {
        exit::NOT_HELD
    }
}
