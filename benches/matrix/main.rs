//! The benchmark matrix: every primitive, on every kind of member, with N
//! members, one of them healthy, slow (+20 ms) or down, with 1, 16 and 64
//! contenders on one resource holding it 0 or 50 ms; the mutex also by the
//! ideal fan-out and rslock on plain servers. Each cell counts grants per
//! second, the wait from asking to holding, how evenly the contenders were
//! served, and the grants the primitive must not have made (the overlap
//! validator: every cell must print 0, or the run fails). See
//! BENCHMARKS.md ("The matrix").
//!
//! ```text
//! cargo bench --bench matrix             # everything (about 13 minutes)
//! cargo bench --bench matrix -- --quick  # N = 3 and 5, short windows (about 3 minutes)
//! cargo bench --bench matrix -- sentinel # only rows whose member kind matches
//! ```
//!
//! Results: `matrix.md`, `matrix.csv` and `matrix.svg` in the bench output
//! folder (`quorumlock-bench` under the target directory). The seed of the
//! read–write mix is printed; `QUORUMLOCK_BENCH_SEED` replays it. Run as a
//! test (`cargo test --benches`), every member kind and condition runs
//! once, tiny, on three members.

#[allow(dead_code)]
#[path = "../quorum/contenders.rs"]
mod contenders;
#[allow(dead_code)]
#[path = "../quorum/measure.rs"]
mod measure;
#[allow(dead_code)]
#[path = "../members/servers.rs"]
mod servers;

mod cell;
mod members;
mod report;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use cell::Series;
use contenders::Kind as Client;
use members::{Condition, Kind, Members};
use report::Row;

/// Sizes of one run.
struct Plan {
    /// Member kinds and their N.
    rows: Vec<(Kind, usize)>,
    holds: Vec<Duration>,
    contenders: Vec<usize>,
    /// A cell's window with no hold, and with one (fewer grants fit).
    window: Duration,
    window_held: Duration,
    /// Restart quarantine of the members that fail over.
    quarantine: Duration,
}

impl Plan {
    fn full() -> Self {
        Plan {
            rows: vec![
                (Kind::Plain, 3),
                (Kind::Plain, 5),
                (Kind::Plain, 7),
                (Kind::Cluster, 3),
                (Kind::Sentinel, 3),
            ],
            holds: vec![Duration::ZERO, Duration::from_millis(50)],
            contenders: vec![1, 16, 64],
            window: Duration::from_secs(1),
            window_held: Duration::from_secs(2),
            // At least the TTL, as the builder's documentation asks.
            quarantine: contenders::TTL,
        }
    }

    /// The full plan without N = 7, in shorter windows.
    fn quick() -> Self {
        let full = Plan::full();
        Plan {
            rows: full.rows.iter().copied().filter(|&(_, n)| n < 7).collect(),
            window: Duration::from_millis(300),
            window_held: Duration::from_millis(600),
            ..full
        }
    }

    fn smoke() -> Self {
        Plan {
            rows: vec![(Kind::Plain, 3), (Kind::Cluster, 3), (Kind::Sentinel, 3)],
            holds: vec![Duration::ZERO],
            contenders: vec![4],
            window: Duration::from_millis(200),
            window_held: Duration::from_millis(200),
            quarantine: Duration::from_secs(1),
        }
    }

    /// The series measured on a kind of member: every primitive, and the
    /// mutex of the ideal fan-out and rslock where they can run (plain
    /// servers).
    fn series(kind: Kind) -> Vec<Series> {
        let mut all = vec![Series::Mutex(Client::Quorumlock)];
        if kind == Kind::Plain {
            all.extend([Series::Mutex(Client::Ideal), Series::Mutex(Client::Rslock)]);
        }
        all.extend([Series::Permit, Series::ReadWrite, Series::Leader]);
        all
    }
}

fn main() {
    measure::check_overlaps();
    raise_open_files();
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `cargo bench` passes --bench; `cargo test --benches` does not.
    let smoke = !args.iter().any(|a| a == "--bench");
    let quick = args.iter().any(|a| a == "--quick")
        || std::env::var("QUORUMLOCK_BENCH_QUICK").is_ok_and(|v| v != "0" && !v.is_empty());
    let mut plan = match (smoke, quick) {
        (true, _) => Plan::smoke(),
        (false, true) => Plan::quick(),
        (false, false) => Plan::full(),
    };
    if let Some(filter) = args.iter().find(|a| !a.starts_with('-') && !smoke) {
        plan.rows
            .retain(|(kind, _)| kind.name().contains(filter.as_str()));
    }
    let seed = std::env::var("QUORUMLOCK_BENCH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    eprintln!("matrix: seed {seed} (QUORUMLOCK_BENCH_SEED={seed} replays the read–write mix)");
    let started = Instant::now();
    let rows = run(&plan, seed);
    let dir = out_dir(smoke);
    report::write(&rows, &dir, seed).expect("write the matrix");
    let overlaps: usize = rows.iter().map(|r| r.outcome.overlaps).sum();
    assert_eq!(overlaps, 0, "grants beyond what a primitive admits");
    if smoke {
        let idle = rows
            .iter()
            .filter(|r| r.condition == Condition::Healthy && r.outcome.grants == 0)
            .map(|r| format!("{} on {} N={}", r.series.name(), r.kind.name(), r.nodes))
            .collect::<Vec<_>>();
        assert!(idle.is_empty(), "healthy cells with no grant: {idle:?}");
        let _ = std::fs::remove_dir_all(&dir);
        println!("bench smoke: 1 passed, 0 failed");
    } else {
        println!(
            "matrix: {} cells, 0 overlaps; results in {} (took {:.0} s)",
            rows.len(),
            dir.display(),
            started.elapsed().as_secs_f64()
        );
    }
}

/// Every cell of the plan, row by row: the members started once per row,
/// the contenders connected once per series and condition (the slowed
/// member through its proxy, every other directly), then the holds and
/// contender counts in turn.
fn run(plan: &Plan, seed: u64) -> Vec<Row> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let most = plan.contenders.iter().copied().max().unwrap_or(1);
    let mut rows = Vec::new();
    for &(kind, nodes) in &plan.rows {
        let mut members = Members::start(kind, nodes, plan.quarantine);
        for series in Plan::series(kind) {
            for condition in Condition::ALL {
                let urls = members.route(condition == Condition::Slow);
                let clients = rt.block_on(async {
                    let mut clients = Vec::with_capacity(most);
                    for _ in 0..most {
                        clients.push(series.client(&members, &urls).await);
                    }
                    clients
                });
                let undo = members.apply(condition);
                for &hold in &plan.holds {
                    let window = if hold.is_zero() {
                        plan.window
                    } else {
                        plan.window_held
                    };
                    for &k in &plan.contenders {
                        let cell_seed = seed ^ (rows.len() as u64).wrapping_mul(0x9e37_79b9);
                        let outcome =
                            rt.block_on(cell::run(series, &clients[..k], hold, window, cell_seed));
                        let row = Row {
                            kind,
                            nodes,
                            condition,
                            series,
                            hold,
                            contenders: k,
                            outcome,
                        };
                        eprintln!("{}", row.line());
                        rows.push(row);
                    }
                }
                // The condition ends, then its clients go.
                drop(undo);
                drop(clients);
            }
        }
    }
    rt.shutdown_timeout(Duration::from_secs(1));
    rows
}

/// 64 contenders of one series on seven members hold about 900 sockets:
/// the soft limit on open files is raised to the hard one (the servers
/// started after inherit it).
fn raise_open_files() {
    // SAFETY: getrlimit and setrlimit read and write the struct we own.
    unsafe {
        let mut limit: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

fn out_dir(smoke: bool) -> PathBuf {
    if smoke {
        return std::env::temp_dir()
            .join(format!("quorumlock-matrix-smoke-{}", std::process::id()));
    }
    let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".to_owned());
    PathBuf::from(target).join("quorumlock-bench")
}
