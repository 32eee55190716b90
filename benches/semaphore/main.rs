//! The counting semaphore against the mutex, on the same `redis-server`
//! nodes in the same run. See BENCHMARKS.md ("Semaphore") for the method
//! and the figures.
//!
//! ```text
//! cargo bench --bench semaphore            # every part
//! cargo bench --bench semaphore -- free    # a free permit against the mutex
//! cargo bench --bench semaphore -- procs   # L = 4, 16 contending processes
//! cargo bench --bench semaphore -- status  # a status read of L = 1024
//! cargo bench --bench semaphore -- takers  # 8 and 64 takers of L = 64 free permits
//! ```
//!
//! 1. **free**: one client, nothing contended. Cycles (one acquire
//!    attempt, then release) of a lock and of one permit of an `L = 4`
//!    semaphore, alternating one by one (lock then permit, then permit then
//!    lock), plain and fenced; per round the p50 and mean of each and
//!    their ratio.
//! 2. **procs**: 16 child processes (this binary again,
//!    `QUORUMLOCK_SEM_CHILD`), one client each, loop on one semaphore of
//!    `L = 4`: wait for a permit, hold it 1 ms, release, pause 1 ms; the
//!    same processes' loop on one lock (`L = 1`, the mutex) alternates
//!    with it round by round. Grants per second, and the next-grant gap:
//!    from a release made while another process waited to the next grant.
//! 3. **status**: `semaphore_status` of a semaphore of `L = 1024` with six
//!    permits held, read after read, with the default node timeout: its
//!    latency, and the reads that could not count every slot.
//! 4. **takers**: 8, then 64 clients in one process, each looping on one
//!    attempt at one permit of an `L = 64` semaphore and its release,
//!    plain and fenced: cycles per second, the share of attempts granted
//!    (every permit is free, so a refusal is a conflict between takers),
//!    and the cycle's latency.
//!
//! Results: a table on stdout and `target/quorumlock-bench/semaphore.csv`.
//! Run as a test (`cargo test --benches`), each part runs once, tiny, on
//! three nodes.

use quorumlock_testkit as support;

#[allow(dead_code)]
#[path = "../quorum/measure.rs"]
mod measure;

mod free;
mod procs;
mod status;
mod takers;

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use support::Cluster;

/// The TTL everywhere: long against every measured latency.
pub const TTL: Duration = Duration::from_secs(10);

/// The semaphore's permits in both parts.
pub const PERMITS: u32 = 4;

/// Sizes of one run.
#[derive(Debug, Clone, Copy)]
struct Plan {
    nodes: usize,
    free: free::Plan,
    procs: procs::Plan,
    /// Status reads of the wide semaphore.
    status_reads: usize,
    takers: takers::Plan,
}

impl Plan {
    fn full() -> Self {
        Plan {
            nodes: 5,
            free: free::Plan {
                rounds: 5,
                per_round: 1_000,
                warmup: 50,
            },
            procs: procs::Plan {
                processes: 16,
                permits: PERMITS,
                rounds: 3,
                window: Duration::from_secs(4),
            },
            status_reads: 500,
            takers: takers::Plan {
                takers: &[8, 64],
                permits: 64,
                window: Duration::from_secs(3),
            },
        }
    }

    fn smoke() -> Self {
        Plan {
            nodes: 3,
            free: free::Plan {
                rounds: 1,
                per_round: 5,
                warmup: 1,
            },
            procs: procs::Plan {
                processes: 3,
                permits: 2,
                rounds: 1,
                window: Duration::from_millis(300),
            },
            status_reads: 3,
            takers: takers::Plan {
                takers: &[3],
                permits: 4,
                window: Duration::from_millis(200),
            },
        }
    }
}

fn main() {
    if std::env::var_os(procs::CHILD).is_some() {
        procs::child();
        return;
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `cargo bench` passes --bench; `cargo test --benches` does not.
    let smoke = !args.iter().any(|a| a == "--bench");
    let plan = if smoke { Plan::smoke() } else { Plan::full() };
    let filter = args.iter().find(|a| !a.starts_with('-')).cloned();
    let wants = |part: &str| filter.as_deref().is_none_or(|f| part.contains(f));
    let cluster = Cluster::local(plan.nodes);
    let urls = cluster.urls();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let mut csv = String::from("part,round,what,n,p50_us,p99_us,mean_us,grants_per_s\n");
    if wants("free") {
        let rounds = rt.block_on(free::run(&urls, plan.free));
        for r in &rounds {
            for (what, s) in r.rows() {
                let _ = writeln!(
                    csv,
                    "free,{},{what},{},{:.0},{:.0},{:.0},",
                    r.round,
                    s.n,
                    measure::micros(s.p50),
                    measure::micros(s.p99),
                    measure::micros(s.mean)
                );
            }
        }
        println!("{}", free::table(&rounds));
        if smoke {
            assert!(rounds.iter().all(|r| r.rows().iter().all(|(_, s)| s.n > 0)));
        }
    }
    if wants("procs") {
        let runs = procs::run(&urls, plan.procs);
        for r in &runs {
            let _ = writeln!(
                csv,
                "procs,{},{},{},{:.0},{:.0},{:.0},{:.1}",
                r.round,
                r.what,
                r.gap.n,
                measure::micros(r.gap.p50),
                measure::micros(r.gap.p99),
                measure::micros(r.gap.mean),
                r.grants_per_s
            );
        }
        println!("{}", procs::table(&runs, plan.procs));
        if smoke {
            assert!(runs.iter().all(|r| r.grants_per_s > 0.0), "no grant");
        }
    }
    if wants("status") {
        let reads = rt.block_on(status::run(&urls, plan.status_reads));
        let _ = writeln!(
            csv,
            "status,1,read-{},{},{:.0},{:.0},{:.0},",
            status::SLOTS,
            reads.took.n,
            measure::micros(reads.took.p50),
            measure::micros(reads.took.p99),
            measure::micros(reads.took.mean)
        );
        println!("{}", status::table(&reads, plan.nodes));
        if smoke {
            assert_eq!(reads.incomplete, 0, "a status read left slots unknown");
        }
    }
    if wants("takers") {
        let runs = rt.block_on(takers::run(&urls, plan.takers));
        for r in &runs {
            let what = if r.fenced { "fenced" } else { "plain" };
            let _ = writeln!(
                csv,
                "takers,{},{what},{},{:.0},{:.0},{:.0},{:.1}",
                r.takers,
                r.cycles.n,
                measure::micros(r.cycles.p50),
                measure::micros(r.cycles.p99),
                measure::micros(r.cycles.mean),
                r.per_s
            );
        }
        println!("{}", takers::table(&runs, plan.takers));
        if smoke {
            assert!(runs.iter().all(|r| r.cycles.n > 0), "no grant");
        }
    }
    if smoke {
        println!("bench smoke: 1 passed, 0 failed");
        return;
    }
    let dir = out_dir();
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join("semaphore.csv");
    std::fs::write(&path, csv).expect("write semaphore.csv");
    println!("results: {}", path.display());
}

fn out_dir() -> PathBuf {
    let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".to_owned());
    PathBuf::from(target).join("quorumlock-bench")
}
