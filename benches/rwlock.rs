//! The read–write lock against the mutex, on the same `redis-server` nodes
//! in the same run. See BENCHMARKS.md ("Read–write lock") for the figures.
//!
//! ```text
//! cargo bench --bench rwlock            # every part
//! cargo bench --bench rwlock -- free    # a read lock's cycle against the mutex's
//! cargo bench --bench rwlock -- readers # 1, 16 and 64 concurrent readers
//! cargo bench --bench rwlock -- writer  # a writer's wait under 16 cycling readers
//! ```
//!
//! 1. **free**: one client, nothing contended: cycles (one acquire
//!    attempt, then release) of a lock and of a read lock, alternating one
//!    by one so that both see the same load; per round the p50 and mean of
//!    each and their ratio.
//! 2. **readers**: 1, 16 and 64 readers (tasks on 4 clients) each looping
//!    on one attempt at the read side of one resource and its release:
//!    cycles per second and the cycle's latency.
//! 3. **writer**: 16 readers cycle back to back (each holds 5 ms); a
//!    writer arrives, waits for the write side, holds 5 ms, leaves; its
//!    wait, repeated.
//!
//! Run as a test (`cargo test --benches`), each part runs once, tiny, on
//! three nodes.

use quorumlock_testkit as support;

#[allow(dead_code)]
#[path = "quorum/measure.rs"]
mod measure;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use measure::{micros, Summary};
use quorumlock::{Redlock, Retry};
use support::{unique, Cluster};

const TTL: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy)]
struct Plan {
    nodes: usize,
    rounds: usize,
    per_round: usize,
    readers: &'static [usize],
    window: Duration,
    waits: usize,
}

const FULL: Plan = Plan {
    nodes: 5,
    rounds: 5,
    per_round: 1_000,
    readers: &[1, 16, 64],
    window: Duration::from_secs(3),
    waits: 20,
};

const SMOKE: Plan = Plan {
    nodes: 3,
    rounds: 1,
    per_round: 5,
    readers: &[2],
    window: Duration::from_millis(200),
    waits: 1,
};

/// One cycle of a lock (`reader: false`) or a read lock: its duration.
async fn cycle(redlock: &Redlock, name: &str, reader: bool) -> Option<Duration> {
    let start = Instant::now();
    let lock = match reader {
        true => {
            redlock
                .read(name, TTL)
                .retry(Retry::Times(0))
                .acquire()
                .await
        }
        false => {
            redlock
                .lock(name, TTL)
                .retry(Retry::Times(0))
                .acquire()
                .await
        }
    };
    lock.ok()?.release().await.ok()?;
    Some(start.elapsed())
}

async fn free(redlock: &Redlock, plan: Plan) {
    println!("free: one client, cycles of one attempt + release, alternating");
    println!(
        "{:>5} {:>10} {:>10} {:>10} {:>10} {:>7}",
        "round", "lock p50", "read p50", "lock mean", "read mean", "ratio"
    );
    let (lock_name, read_name) = (unique("bench-lock"), unique("bench-read"));
    for round in 0..plan.rounds {
        let (mut locks, mut reads) = (Vec::new(), Vec::new());
        for i in 0..plan.per_round {
            // Lock then read, then read then lock.
            let order = if i % 2 == 0 {
                [false, true]
            } else {
                [true, false]
            };
            for reader in order {
                let name = if reader { &read_name } else { &lock_name };
                if let Some(d) = cycle(redlock, name, reader).await {
                    if reader {
                        reads.push(d)
                    } else {
                        locks.push(d)
                    }
                }
            }
        }
        let (l, r) = (Summary::of(&locks), Summary::of(&reads));
        println!(
            "{round:>5} {:>8.0}us {:>8.0}us {:>8.0}us {:>8.0}us {:>7.2}",
            micros(l.p50),
            micros(r.p50),
            micros(l.mean),
            micros(r.mean),
            micros(r.p50) / micros(l.p50).max(1.0)
        );
    }
}

/// `n` readers loop on the read side of one resource for `window`:
/// cycles per second and the cycle's latency.
async fn readers(clients: &[Redlock], n: usize, window: Duration) -> (f64, Summary) {
    let name = unique("bench-readers");
    let until = Instant::now() + window;
    let mut tasks = Vec::new();
    for t in 0..n {
        let (redlock, name) = (clients[t % clients.len()].clone(), name.clone());
        tasks.push(tokio::spawn(async move {
            let mut samples = Vec::new();
            while Instant::now() < until {
                if let Some(d) = cycle(&redlock, &name, true).await {
                    samples.push(d);
                }
            }
            samples
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap_or_default());
    }
    (all.len() as f64 / window.as_secs_f64(), Summary::of(&all))
}

/// A writer's waits under 16 readers cycling back to back.
async fn writer(clients: &[Redlock], waits: usize) -> Summary {
    let name = unique("bench-writer");
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for t in 0..16 {
        let (redlock, name) = (clients[t % clients.len()].clone(), name.clone());
        let (stop, reads) = (stop.clone(), reads.clone());
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let request = redlock.read(&name, Duration::from_secs(2));
                if let Ok(reader) = request
                    .retry(Retry::Until(Duration::from_secs(30)))
                    .acquire()
                    .await
                {
                    reads.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    let _ = reader.release().await;
                }
            }
        }));
    }
    let mut samples = Vec::new();
    for _ in 0..waits {
        // Reading continuously when the writer arrives.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let start = Instant::now();
        let request = clients[0]
            .write(&name, TTL)
            .retry(Retry::Until(Duration::from_secs(30)));
        if let Ok(w) = request.acquire().await {
            samples.push(start.elapsed());
            tokio::time::sleep(Duration::from_millis(5)).await;
            let _ = w.release().await;
        }
    }
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        let _ = task.await;
    }
    println!(
        "writer: {} reads by 16 readers meanwhile",
        reads.load(Ordering::Relaxed)
    );
    Summary::of(&samples)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `cargo bench` passes --bench; `cargo test --benches` does not.
    let plan = if args.iter().any(|a| a == "--bench") {
        FULL
    } else {
        SMOKE
    };
    let filter = args.iter().find(|a| !a.starts_with('-')).cloned();
    let wants = |part: &str| filter.as_deref().is_none_or(|f| part.contains(f));
    let cluster = Cluster::local(plan.nodes);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(async {
        let mut clients = Vec::new();
        for _ in 0..4 {
            clients.push(
                cluster
                    .builder()
                    .node_timeout(Duration::from_secs(1))
                    .build()
                    .await
                    .expect("client"),
            );
        }
        if wants("free") {
            free(&clients[0], plan).await;
        }
        if wants("readers") {
            println!("readers: n, cycles/s, p50, p99");
            for &n in plan.readers {
                let (rate, s) = readers(&clients, n, plan.window).await;
                println!(
                    "{n:>5} {rate:>9.0}/s {:>8.0}us {:>8.0}us",
                    micros(s.p50),
                    micros(s.p99)
                );
            }
        }
        if wants("writer") {
            let s = writer(&clients, plan.waits).await;
            println!(
                "writer wait: n={} p50={:.1}ms p99={:.1}ms max={:.1}ms",
                s.n,
                micros(s.p50) / 1e3,
                micros(s.p99) / 1e3,
                micros(s.max) / 1e3
            );
        }
    });
}
