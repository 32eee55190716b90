//! Leader election: three candidates campaign for one election; each leads
//! in turn, proclaims its address, works under its leadership and steps
//! down; an observer follows who leads; a store that checks epochs refuses
//! a deposed leader's late write.
//!
//! ```text
//! cargo run --example election
//! ```
//!
//! Nodes: `QUORUMLOCK_NODES` if set, else five local `redis-server`s.

mod common;

use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use quorumlock::{Leader, Observed, Redlock};

const ELECTION: &str = "example:scheduler";
const TTL: Duration = Duration::from_secs(2);

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("election: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A store that, like a table with an epoch column, accepts a write only
/// when its epoch is at least the highest one it has seen.
#[derive(Default)]
struct Store {
    epoch: Mutex<u64>,
}

impl Store {
    fn write(&self, epoch: u64) -> bool {
        let mut seen = self.epoch.lock().unwrap_or_else(|e| e.into_inner());
        if epoch >= *seen {
            *seen = epoch;
            true
        } else {
            false
        }
    }
}

async fn run() -> Result<(), String> {
    let nodes = common::Nodes::get()?;
    let build = || async {
        quorumlock::Builder::new(nodes.urls.clone())
            .build()
            .await
            .map_err(|e| e.to_string())
    };
    let t0 = Instant::now();
    let store = Arc::new(Store::default());

    // The observer: each change of leadership, as it happens.
    let mut leaders = build().await?.observe(ELECTION);
    let observer = tokio::spawn(async move {
        while let Some(observed) = leaders.next().await {
            match observed {
                Observed::Leader(Leader { epoch, value }) => println!(
                    "{} observer: epoch {epoch} led by {}",
                    common::stamp(t0),
                    String::from_utf8_lossy(&value)
                ),
                Observed::NoLeader => println!("{} observer: no leader", common::stamp(t0)),
                _ => println!("{} observer: no quorum answers", common::stamp(t0)),
            }
        }
    });

    let mut candidates = Vec::new();
    for (i, address) in ["10.0.0.1:8080", "10.0.0.2:8080", "10.0.0.3:8080"]
        .into_iter()
        .enumerate()
    {
        let redlock = build().await?;
        let store = store.clone();
        // Staggered, so that the log reads in order.
        tokio::time::sleep(Duration::from_millis(100)).await;
        candidates.push(tokio::spawn(async move {
            candidate(redlock, i, address, store, t0).await
        }));
    }
    let mut epochs = Vec::new();
    for c in candidates {
        epochs.push(c.await.map_err(|e| e.to_string())??);
    }

    // A deposed leader's write, arriving late: refused by the epoch check.
    let first = epochs.iter().min().copied().unwrap_or_default();
    println!(
        "{} a late write of epoch {first}: {}",
        common::stamp(t0),
        if store.write(first) {
            "accepted (!)"
        } else {
            "refused: a later leader wrote"
        }
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    observer.abort();
    epochs.sort_unstable();
    println!("epochs, in order of office: {epochs:?}");
    Ok(())
}

/// Campaigns, leads for a while (proclaiming a second address half-way),
/// and steps down; returns the epoch it led in.
async fn candidate(
    redlock: Redlock,
    i: usize,
    address: &'static str,
    store: Arc<Store>,
    t0: Instant,
) -> Result<u64, String> {
    let mut leadership = redlock
        .campaign(ELECTION, TTL)
        .value(address)
        .lead()
        .await
        .map_err(|e| e.to_string())?;
    let epoch = leadership.epoch();
    println!(
        "{} candidate {i}: elected, epoch {epoch}, valid for {:?}",
        common::stamp(t0),
        leadership.validity()
    );
    tokio::time::sleep(Duration::from_millis(700)).await;
    let moved = address.replace("8080", "9090");
    leadership
        .proclaim(moved.clone())
        .await
        .map_err(|e| e.to_string())?;
    println!("{} candidate {i}: now at {moved}", common::stamp(t0));
    let wrote = leadership
        .run(|signal| async move {
            // Lead: every write carries the epoch.
            tokio::time::sleep(Duration::from_millis(700)).await;
            !signal.is_fired() && store.write(epoch)
        })
        .await
        .map_err(|e| e.to_string())?;
    println!(
        "{} candidate {i}: wrote with epoch {epoch}: {wrote}; stepped down",
        common::stamp(t0)
    );
    Ok(epoch)
}
