//! Fair acquisition (`.fair()`: the waiter queue) against plain requests,
//! on five `redis-server` nodes in the same run: what a fair request costs
//! on a free resource, and how evenly each mode serves contenders that ask
//! again as soon as they let go.
//!
//! ```text
//! cargo bench --bench fairness             # everything
//! cargo bench --bench fairness -- --quick  # short windows, few asks
//! cargo bench --bench fairness -- turns    # only the scenarios whose name matches
//! ```
//!
//! 1. **cost**: one client's acquire + release cycles of a free lock, each
//!    on a fresh resource, plain and fair in interleaved rounds: p50 and
//!    p99 of a cycle, and fair against plain.
//! 2. **turns**: 16 contenders on one lock, each holding it 10 ms and
//!    asking again at once (a releaser re-asks before the woken waiter
//!    looks): grants per second, the fewest and most grants of one
//!    contender, the wait from asking to holding.
//! 3. **permits**: one waiter for 2 of a semaphore's 4 permits among 6
//!    takers of one (each holding 50 ms, asking again at once); its wait.
//! 4. **readers**: one reader among 4 writers cycling likewise.
//! 5. **writers**: one writer among 4 readers cycling likewise (their
//!    holds overlap: the read side is never free).
//!
//! Every contender is a client of its own, as separate processes would
//! be; in fair mode every one asks `.fair()`. Every hold is recorded on
//! one clock and checked by the overlap validator (`benches/quorum/measure.rs`):
//! any overlap fails the run.
//!
//! Results: `fairness.md` and `fairness.csv` in the bench output folder
//! (`quorumlock-bench` under the target directory). The seed (the
//! contenders' start offsets, the waiter's pauses, each cost round's
//! order) is printed; `QUORUMLOCK_BENCH_SEED` replays it. Run as a test
//! (`cargo test --benches`), every scenario runs once, tiny, on three
//! nodes, and only behaviour is asserted: no overlap, and every fair
//! contender of `turns` granted at least once.

#[allow(dead_code)]
#[path = "../quorum/measure.rs"]
mod measure;

mod report;
mod scenarios;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use futures::future::try_join_all;
use quorumlock::Builder;
use quorumlock_testkit::Cluster;
use rand::rngs::StdRng;
use rand::SeedableRng;

use report::Table;

/// Sizes of one run.
pub struct Plan {
    nodes: usize,
    /// `cost`: rounds, and cycles of each mode per round.
    rounds: usize,
    cycles: usize,
    /// `turns`: contenders, and how long they contend in each mode.
    contenders: usize,
    window: Duration,
    /// `permits`, `readers`, `writers`: the waiter's asks in each mode,
    /// and how long each may wait.
    asks: usize,
    cap: Duration,
}

const FULL: Plan = Plan {
    nodes: 5,
    rounds: 5,
    cycles: 2_000,
    contenders: 16,
    window: Duration::from_secs(30),
    asks: 20,
    cap: Duration::from_secs(10),
};

const QUICK: Plan = Plan {
    rounds: 3,
    cycles: 300,
    window: Duration::from_secs(3),
    asks: 3,
    ..FULL
};

const SMOKE: Plan = Plan {
    nodes: 3,
    rounds: 1,
    cycles: 5,
    contenders: 4,
    window: Duration::from_millis(1500),
    asks: 1,
    cap: Duration::from_secs(1),
};

fn main() {
    measure::check_overlaps();
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `cargo bench` passes --bench; `cargo test --benches` does not.
    let smoke = !args.iter().any(|a| a == "--bench");
    let quick = args.iter().any(|a| a == "--quick")
        || std::env::var("QUORUMLOCK_BENCH_QUICK").is_ok_and(|v| v != "0" && !v.is_empty());
    let (plan, run) = match (smoke, quick) {
        (true, _) => (SMOKE, "smoke"),
        (false, true) => (QUICK, "quick"),
        (false, false) => (FULL, "full"),
    };
    let filter = args.iter().find(|a| !a.starts_with('-') && !smoke);
    let wants = |name: &str| filter.is_none_or(|f| name.contains(f.as_str()));
    let seed = std::env::var("QUORUMLOCK_BENCH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    eprintln!("fairness: seed {seed} (QUORUMLOCK_BENCH_SEED={seed} replays the draws)");
    let started = Instant::now();
    let cluster = Cluster::local(plan.nodes);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let tables = rt.block_on(async {
        let mut rng = StdRng::seed_from_u64(seed);
        // One client per contender, with the builder's defaults, as users
        // would build them.
        let waiters = scenarios::AMONG.iter().map(|s| s.1 + 1);
        let n = waiters.fold(plan.contenders, usize::max);
        let built = (0..n).map(|_| Builder::new(cluster.urls()).build());
        let clients = try_join_all(built).await.expect("the contenders' clients");
        let mut tables = Vec::new();
        let mut done = |table: Table| {
            eprint!("{}", table.markdown());
            tables.push(table);
        };
        if wants("cost") {
            done(scenarios::cost(&clients[0], &plan, &mut rng).await);
        }
        if wants("turns") {
            let contenders = &clients[..plan.contenders];
            done(scenarios::turns(contenders, &plan, &mut rng).await);
        }
        for among in scenarios::AMONG.iter().filter(|s| wants(s.0)) {
            done(scenarios::among(among, &clients, &plan, &mut rng).await);
        }
        tables
    });
    rt.shutdown_timeout(Duration::from_secs(1));
    drop(cluster);
    let took = started.elapsed().as_secs_f64();
    let dir = out_dir(smoke);
    let head = format!(
        "Fair against plain acquisition on {} local nodes ({run} run, seed {seed}, {took:.0} \
         s).\n",
        plan.nodes
    );
    report::write(&tables, &dir, &head).expect("write the fairness tables");
    let overlaps: usize = tables.iter().map(|t| t.overlaps).sum();
    assert_eq!(overlaps, 0, "grants beyond what a primitive admits");
    if smoke {
        let starved: usize = tables.iter().map(|t| t.starved).sum();
        assert_eq!(starved, 0, "fair contenders of `turns` never granted");
        let _ = std::fs::remove_dir_all(&dir);
        println!("bench smoke: 1 passed, 0 failed");
    } else {
        println!(
            "fairness: {} scenarios, 0 overlaps; results in {} (took {took:.0} s)",
            tables.len(),
            dir.display(),
        );
    }
}

fn out_dir(smoke: bool) -> PathBuf {
    if smoke {
        return std::env::temp_dir()
            .join(format!("quorumlock-fairness-smoke-{}", std::process::id()));
    }
    let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".to_owned());
    PathBuf::from(target).join("quorumlock-bench")
}
