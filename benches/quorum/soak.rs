//! Client CPU per lock cycle and memory over a long run, measured in a
//! child process per contender so each one's CPU time and resident memory
//! are its own (getrusage of the whole process, /proc/self/statm).
//!
//! The parent re-runs this same binary with `QUORUMLOCK_BENCH_CHILD=soak`;
//! `QUORUMLOCK_BENCH_CHILD=cpu` runs only the sequential part, for counting
//! instructions under `valgrind --tool=callgrind` (see BENCHMARKS.md).
//! Both count the allocations per cycle of the sequential part (the bench
//! binary's global allocator counts while told to: `alloc.rs`).

use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::alloc::Counts;
use crate::contenders::{Contender, Kind, TTL};
use crate::measure::{cpu_time, rss_bytes};

/// Sequential cycles left out of the allocation count (warm-up).
const ALLOC_SKIP: u64 = 1_000;

/// What the parent asks of a child.
#[derive(Debug, Clone)]
pub struct Plan {
    pub kind: Kind,
    /// Cycles one after another, for CPU per cycle without concurrency.
    pub sequential: u64,
    /// Cycles by `tasks` concurrent tasks, RSS sampled every `every`.
    pub soak: u64,
    pub every: u64,
    pub tasks: usize,
}

/// Runs a child for `plan` against `urls` and returns its JSON report.
pub fn spawn(plan: &Plan, urls: &[String]) -> Value {
    let exe = std::env::current_exe().expect("own path");
    let out = Command::new(exe)
        .env("QUORUMLOCK_BENCH_CHILD", "soak")
        .env("QUORUMLOCK_BENCH_KIND", plan.kind.name())
        .env("QUORUMLOCK_BENCH_NODES", urls.join(","))
        .env("QUORUMLOCK_BENCH_SEQUENTIAL", plan.sequential.to_string())
        .env("QUORUMLOCK_BENCH_SOAK", plan.soak.to_string())
        .env("QUORUMLOCK_BENCH_EVERY", plan.every.to_string())
        .env("QUORUMLOCK_BENCH_TASKS", plan.tasks.to_string())
        .output()
        .expect("run the soak child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("RESULT "))
        .unwrap_or_else(|| {
            panic!(
                "soak child for {} printed no result ({}):\n{stdout}\n{}",
                plan.kind.name(),
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )
        });
    serde_json::from_str(line).expect("child JSON")
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The child's side: `mode` is `soak` or `cpu`.
pub fn child(mode: &str) {
    let kind = std::env::var("QUORUMLOCK_BENCH_KIND")
        .ok()
        .and_then(|k| Kind::parse(&k))
        .unwrap_or(Kind::Quorumlock);
    // Nodes from the parent, or (for a run under valgrind) five of our own.
    let (urls, _cluster) = match std::env::var("QUORUMLOCK_BENCH_NODES") {
        Ok(list) if !list.is_empty() => (list.split(',').map(str::to_owned).collect(), None),
        _ => {
            let cluster = crate::support::Cluster::local(5);
            (cluster.urls(), Some(cluster))
        }
    };
    let sequential = env_u64("QUORUMLOCK_BENCH_SEQUENTIAL", 10_000);
    let (soak, every, tasks) = if mode == "cpu" {
        (0, 1, 1)
    } else {
        (
            env_u64("QUORUMLOCK_BENCH_SOAK", 1_000_000),
            env_u64("QUORUMLOCK_BENCH_EVERY", 100_000).max(1),
            env_u64("QUORUMLOCK_BENCH_TASKS", 64) as usize,
        )
    };
    let rt = crate::runtime();
    let report = rt.block_on(async move {
        let c = Contender::connect(kind, &urls).await;
        let key = format!("bench:cpu:{}", kind.name());
        for _ in 0..200 {
            let _ = c.cycle(&key, TTL).await;
        }

        // Sequential: one cycle at a time. Allocations are counted from
        // cycle `skip` to the end (as the instruction count takes 1,000 →
        // 6,000 cycles), so one-time set-up does not count.
        let skip = ALLOC_SKIP.min(sequential / 6);
        let (u0, s0) = cpu_time();
        let start = Instant::now();
        let mut failed = 0u64;
        crate::alloc::counting(true);
        let mut from = Counts::now();
        for i in 0..sequential {
            if i == skip {
                from = Counts::now();
            }
            failed += u64::from(c.cycle(&key, TTL).await.is_err());
        }
        let to = Counts::now();
        crate::alloc::counting(false);
        let wall = start.elapsed();
        let (u1, s1) = cpu_time();
        let per = |d: Duration| d.as_secs_f64() * 1e6 / sequential.max(1) as f64;
        let counted = (sequential - skip).max(1) as f64;
        let seq = json!({
            "cycles": sequential,
            "errors": failed,
            "user_us_per_cycle": per(u1 - u0),
            "sys_us_per_cycle": per(s1 - s0),
            "wall_us_per_cycle": per(wall),
            "allocs_per_cycle": (to.allocs - from.allocs) as f64 / counted,
            "reallocs_per_cycle": (to.reallocs - from.reallocs) as f64 / counted,
            "alloc_bytes_per_cycle": (to.bytes - from.bytes) as f64 / counted,
            "alloc_cycles_counted": sequential - skip,
        });
        if soak == 0 {
            return json!({ "kind": kind.name(), "sequential": seq });
        }

        // Soak: `tasks` tasks share the work, RSS sampled every `every`.
        let done = Arc::new(AtomicU64::new(0));
        let failed = Arc::new(AtomicU64::new(0));
        let mut rss = vec![json!({ "cycles": 0, "rss_bytes": rss_bytes() })];
        let (u0, s0) = cpu_time();
        let start = Instant::now();
        let handles: Vec<_> = (0..tasks)
            .map(|t| {
                let (c, done, failed) = (c.clone(), done.clone(), failed.clone());
                let key = format!("bench:soak:{}:{t}", kind.name());
                tokio::spawn(async move {
                    while done.fetch_add(1, Ordering::Relaxed) < soak {
                        if c.cycle(&key, TTL).await.is_err() {
                            failed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        let mut next = every;
        while next <= soak {
            while done.load(Ordering::Relaxed) < next {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            rss.push(json!({ "cycles": next, "rss_bytes": rss_bytes() }));
            next += every;
        }
        for h in handles {
            let _ = h.await;
        }
        let wall = start.elapsed();
        let (u1, s1) = cpu_time();
        let per = |d: Duration| d.as_secs_f64() * 1e6 / soak as f64;
        json!({
            "kind": kind.name(),
            "sequential": seq,
            "soak": {
                "cycles": soak,
                "tasks": tasks,
                "errors": failed.load(Ordering::Relaxed),
                "seconds": wall.as_secs_f64(),
                "user_us_per_cycle": per(u1 - u0),
                "sys_us_per_cycle": per(s1 - s0),
                "rss": rss,
            }
        })
    });
    println!("RESULT {report}");
}
