//! Locks on highly available members: each vote is a Sentinel group (or
//! a Redis Cluster), and a yes counts once every replica has it (durable
//! votes), so a failover keeps every lock and a deposed master grants
//! nothing.
//!
//! ```text
//! docker/topologies.sh up sentinel
//! QUORUMLOCK_NODES="$(docker/topologies.sh urls sentinel)" cargo run --example sentinel
//! ```
//!
//! Starts nothing by itself: the members come from `QUORUMLOCK_NODES`
//! (`redis+sentinel://host:port,…/group` or `redis+cluster://host:port,…`
//! each, or plain `redis://` servers, mixed as you like). It shows each
//! member's health, takes a fenced lock and runs a job under it (renewed
//! meanwhile), and takes two permits of a semaphore, with durable votes
//! on each member's `QUORUMLOCK_REPLICAS` replicas (default 1: `WAIT 1`)
//! and restart quarantine on (for plain servers: a restarted one does not
//! vote for 10 s).

use std::process::ExitCode;
use std::time::Duration;

use quorumlock::{Builder, Durability, Retry};

const TTL: Duration = Duration::from_secs(5);
const QUARANTINE: Duration = Duration::from_secs(10);

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sentinel: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), String> {
    let replicas = match std::env::var("QUORUMLOCK_REPLICAS") {
        Ok(n) => n
            .parse()
            .map_err(|e| format!("QUORUMLOCK_REPLICAS={n}: {e}"))?,
        Err(_) => 1,
    };
    let redlock = Builder::from_env("QUORUMLOCK_NODES")
        .restart_quarantine(Some(QUARANTINE))
        .durable_votes(Some(Durability::Replicas(replicas)))
        .node_timeout(Duration::from_millis(200))
        .build()
        .await
        .map_err(|e| {
            format!(
                "{e}\n(start members with `docker/topologies.sh up sentinel` and set \
                 QUORUMLOCK_NODES=\"$(docker/topologies.sh urls sentinel)\")"
            )
        })?;
    let health = redlock.health().await;
    println!("== members: {:?}", health.state());
    for member in &health.nodes {
        let votes = if member.admitted {
            "votes"
        } else {
            "does not vote"
        };
        println!("   {}: {votes}", member.node);
    }

    // One resource and its fencing counter hash to one slot, so a cluster
    // member takes them with one script.
    let retry = Retry::Until(Duration::from_secs(30));
    let lock = redlock
        .lock("invoice:2026-12", TTL)
        .fenced()
        .retry(retry)
        .acquire()
        .await
        .map_err(|e| e.to_string())?;
    let token = lock.fence().map(|f| f.to_string()).unwrap_or_default();
    println!("== lock invoice:2026-12 held, fencing token {token}, durable votes on {replicas} replica(s)");
    lock.run(|_lost| tokio::time::sleep(Duration::from_millis(300)))
        .await
        .map_err(|e| e.to_string())?;
    println!("== job done, lock released");

    let permits = redlock
        .semaphore("exports", 2, TTL)
        .take(2)
        .retry(retry)
        .acquire()
        .await
        .map_err(|e| e.to_string())?;
    println!("== semaphore exports: holding slots {:?}", permits.slots());
    permits.release().await.map_err(|e| e.to_string())?;
    println!("== permits released");
    redlock.settle(Duration::from_secs(1)).await;
    Ok(())
}
