//! Eight workers, three permits: at most three exports run at once, across
//! every client.
//!
//! ```text
//! cargo run --example semaphore
//! ```
//!
//! Each worker has a client of its own (as if on its own host) and runs
//! two exports under `redlock.semaphore("exports", 3, ttl).run(…)`: it waits
//! for one of the three permits (woken by a release, not by polling), works
//! under it (renewed meanwhile, stopped if it were lost) and releases it at
//! the end. Every line says who runs, on which slot, and how many run. The
//! example checks that never more than three ran at once.
//!
//! Nodes: `QUORUMLOCK_NODES` if set, else five local `redis-server`s.

mod common;

use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use quorumlock::Retry;

const SEMAPHORE: &str = "exports";
const PERMITS: u32 = 3;
const WORKERS: usize = 8;
const EXPORTS_EACH: usize = 2;
const TTL: Duration = Duration::from_secs(5);

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("semaphore: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Running exports now, and the most seen at once.
#[derive(Default)]
struct Running {
    now: AtomicUsize,
    most: AtomicUsize,
}

async fn run() -> Result<(), String> {
    let nodes = common::Nodes::get()?;
    let t0 = Instant::now();
    let running = Arc::new(Running::default());
    println!("== {WORKERS} workers, {EXPORTS_EACH} exports each, {PERMITS} permits");
    let mut workers = Vec::new();
    for w in 0..WORKERS {
        let redlock = quorumlock::Builder::new(nodes.urls.clone())
            .build()
            .await
            .map_err(|e| e.to_string())?;
        let running = running.clone();
        workers.push(tokio::spawn(async move {
            for n in 0..EXPORTS_EACH {
                let permit = redlock
                    .semaphore(SEMAPHORE, PERMITS, TTL)
                    .retry(Retry::Until(Duration::from_secs(60)))
                    .acquire()
                    .await
                    .map_err(|e| format!("worker {w}: {e}"))?;
                let slot = permit.slots()[0];
                let now = running.now.fetch_add(1, Ordering::SeqCst) + 1;
                running.most.fetch_max(now, Ordering::SeqCst);
                println!(
                    "{} worker {w} starts export {n} on slot {slot} ({now} of {PERMITS} running)",
                    common::stamp(t0)
                );
                // The work, under the permits: renewed, released at the end.
                let work = Duration::from_millis(200 + 100 * ((w + n) as u64 % 4));
                let running = running.clone();
                permit
                    .run(|_lost| async move {
                        tokio::time::sleep(work).await;
                        running.now.fetch_sub(1, Ordering::SeqCst);
                    })
                    .await
                    .map_err(|e| format!("worker {w}: {e}"))?;
                println!("{} worker {w} done with export {n}", common::stamp(t0));
            }
            redlock.settle(Duration::from_secs(1)).await;
            Ok::<(), String>(())
        }));
    }
    for worker in workers {
        worker.await.map_err(|e| e.to_string())??;
    }
    let most = running.most.load(Ordering::SeqCst);
    println!(
        "{} all {} exports done; at most {most} ran at once",
        common::stamp(t0),
        WORKERS * EXPORTS_EACH
    );
    if most > PERMITS as usize {
        return Err(format!("{most} exports ran at once with {PERMITS} permits"));
    }
    Ok(())
}
