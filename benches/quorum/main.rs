//! quorumlock against the ideal fan-out and rslock, on real `redis-server`
//! nodes started by the test harness. See BENCHMARKS.md for what each
//! scenario measures and how to read the results.
//!
//! ```text
//! cargo bench --bench quorum                 # everything (about 11 minutes)
//! cargo bench --bench quorum -- --quick      # the short version (about a minute)
//! cargo bench --bench quorum -- throughput   # only scenarios whose name matches
//! cargo bench --bench quorum -- scale        # the three scaling curves
//! ```
//!
//! `QUORUMLOCK_BENCH_QUICK=1` is the same as `--quick`. Results go to
//! `target/quorumlock-bench/` (results.json, results.csv, summary.md,
//! benchmarks.svg, scaling.svg). Run as a test (`cargo test --benches`) it only checks,
//! in a few seconds, that every scenario runs.

use quorumlock_testkit as support;

mod alloc;
mod contenders;
mod measure;
mod plot;
mod report;
mod scaling;
mod scenarios;
mod soak;
mod summary;
mod waiters;

/// Counts allocations while the CPU child asks it to (`alloc.rs`).
#[global_allocator]
static ALLOCATOR: alloc::Counting = alloc::Counting;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use criterion::Criterion;
use serde_json::json;

use contenders::{Contender, Kind, TTL};
use report::{LatencyRun, Results};
use scenarios::Sampling;
use support::{Cluster, Fault, Proxy};

/// The client side's runtime: two workers, as many as the machine's cores.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Sizes of one run.
#[derive(Debug, Clone)]
struct Settings {
    quick: bool,
    latency: Sampling,
    /// rslock samples per round with one node hung (each takes seconds).
    rslock_hung_per_round: usize,
    /// rslock samples per round with one node slowed (it waits for it).
    rslock_slow_per_round: usize,
    /// Independent runs of the key scenarios (healthy N=5, one node hung).
    repeats: usize,
    throughput_tasks: Vec<usize>,
    throughput_window: Duration,
    throughput_rounds: usize,
    contention_k: Vec<usize>,
    contention_window: Duration,
    soak: soak::Plan,
    /// Node counts of the node curve (`scale-nodes`).
    scale_nodes: Vec<usize>,
    /// Its latency sampling and its throughput (tasks, window, rounds).
    scale: scaling::Plan,
    /// Task counts of the concurrency curve (`scale-tasks`, at N=5).
    scale_tasks: Vec<usize>,
    /// Waiting processes of the hand-off curve (`scale-waiters`).
    scale_waiters: Vec<usize>,
    scale_waiters_window: Duration,
    /// Only scenarios whose name contains this.
    filter: Option<String>,
}

impl Settings {
    fn new(quick: bool, filter: Option<String>) -> Self {
        let soak = soak::Plan {
            kind: Kind::Quorumlock,
            sequential: if quick { 2_000 } else { 20_000 },
            soak: if quick { 20_000 } else { 1_000_000 },
            every: if quick { 5_000 } else { 100_000 },
            tasks: 64,
        };
        Settings {
            quick,
            latency: Sampling {
                rounds: if quick { 2 } else { 5 },
                per_round: if quick { 300 } else { 2_000 },
                rslock_per_round: if quick { 300 } else { 2_000 },
                warmup: if quick { 20 } else { 100 },
            },
            rslock_hung_per_round: if quick { 1 } else { 3 },
            rslock_slow_per_round: if quick { 10 } else { 60 },
            repeats: if quick { 1 } else { 3 },
            throughput_tasks: vec![1, 16, 64, 256],
            throughput_window: Duration::from_millis(if quick { 500 } else { 2_000 }),
            throughput_rounds: if quick { 1 } else { 3 },
            contention_k: vec![2, 8, 32],
            contention_window: Duration::from_millis(if quick { 1_000 } else { 5_000 }),
            soak,
            scale_nodes: vec![1, 3, 5, 7, 9],
            scale: scaling::Plan {
                latency: Sampling {
                    rounds: if quick { 1 } else { 3 },
                    per_round: if quick { 200 } else { 1_000 },
                    rslock_per_round: if quick { 200 } else { 1_000 },
                    warmup: if quick { 10 } else { 50 },
                },
                tasks: 64,
                window: Duration::from_millis(if quick { 300 } else { 1_500 }),
                rounds: if quick { 1 } else { 2 },
            },
            scale_tasks: vec![1, 4, 16, 64, 256],
            scale_waiters: vec![2, 4, 8, 16, 32, 64],
            scale_waiters_window: Duration::from_millis(if quick { 600 } else { 3_000 }),
            filter,
        }
    }

    fn smoke() -> Self {
        let mut s = Settings::new(true, None);
        s.latency = Sampling {
            rounds: 1,
            per_round: 5,
            rslock_per_round: 5,
            warmup: 1,
        };
        s.throughput_tasks = vec![4];
        s.throughput_window = Duration::from_millis(100);
        s.contention_k = vec![2];
        s.contention_window = Duration::from_millis(300);
        s.scale_nodes = vec![1, 3];
        s.scale = scaling::Plan {
            latency: s.latency,
            tasks: 4,
            window: Duration::from_millis(100),
            rounds: 1,
        };
        s.scale_tasks = vec![1, 4];
        s.scale_waiters = vec![2];
        s.scale_waiters_window = Duration::from_millis(300);
        s
    }

    fn wants(&self, scenario: &str) -> bool {
        self.filter
            .as_ref()
            .is_none_or(|f| scenario.contains(f.as_str()))
    }
}

fn main() {
    if let Ok(mode) = std::env::var("QUORUMLOCK_BENCH_CHILD") {
        if mode == "waiter" {
            waiters::child();
        } else {
            soak::child(&mode);
        }
        return;
    }
    measure::check_overlaps();
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `cargo bench` passes --bench; `cargo test --benches` does not.
    if !args.iter().any(|a| a == "--bench") {
        smoke();
        return;
    }
    let quick = args.iter().any(|a| a == "--quick")
        || std::env::var("QUORUMLOCK_BENCH_QUICK").is_ok_and(|v| v != "0" && !v.is_empty());
    let filter = args.iter().find(|a| !a.starts_with('-')).cloned();
    let settings = Settings::new(quick, filter);
    let started = Instant::now();
    let mut results = Results {
        machine: machine(),
        quick,
        ..Results::default()
    };
    run_all(&settings, &mut results);
    if settings.wants("criterion") {
        criterion_means(&settings);
    }
    results.machine["load_end"] = json!(loadavg());
    results.machine["seconds"] = json!(started.elapsed().as_secs_f64());
    let dir = out_dir();
    results.write(&dir).expect("write results");
    println!("\n{}", results.to_markdown());
    println!(
        "results: {} (took {:.0} s)",
        dir.display(),
        started.elapsed().as_secs_f64()
    );
}

/// Run as a test: every scenario once, tiny, on three nodes.
fn smoke() {
    let settings = Settings::smoke();
    let mut results = Results::default();
    run_all(&settings, &mut results);
    assert!(!results.latency.is_empty() && !results.throughput.is_empty());
    assert!(
        results.scale.iter().all(|p| p.latency.n > 0),
        "a scaling point made no cycle"
    );
    assert!(
        results.waiters.iter().all(|w| w.grants_per_s > 0.0),
        "a waiter scenario made no grant"
    );
    for run in &results.latency {
        for l in &run.results {
            assert!(
                l.pooled.n > 0,
                "{} made no cycle in {}",
                l.kind.name(),
                run.scenario
            );
        }
    }
    let dir = std::env::temp_dir().join(format!("quorumlock-bench-smoke-{}", std::process::id()));
    results.write(&dir).expect("write results");
    assert!(dir.join("benchmarks.svg").exists());
    assert!(dir.join("scaling.svg").exists());
    let _ = std::fs::remove_dir_all(&dir);
    println!("bench smoke: 1 passed, 0 failed");
}

fn out_dir() -> PathBuf {
    let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".to_owned());
    PathBuf::from(target).join("quorumlock-bench")
}

async fn connect_all(urls: &[String]) -> Vec<Contender> {
    let mut v = Vec::new();
    for kind in Kind::ALL {
        v.push(Contender::connect(kind, urls).await);
    }
    v
}

fn run_all(s: &Settings, results: &mut Results) {
    let rt = runtime();
    let smoke = s.latency.per_round < 10;
    let sizes: &[usize] = if smoke { &[3] } else { &[1, 3, 5, 7] };

    // 1. Healthy latency by cluster size; N=5 repeated.
    if s.wants("healthy") {
        for &n in sizes {
            let runs = if n == 5 { s.repeats } else { 1 };
            for run in 1..=runs {
                let cluster = Cluster::local(n);
                let urls = cluster.urls();
                let r = rt.block_on(async {
                    let c = connect_all(&urls).await;
                    scenarios::latency(&c, s.latency, "bench:lat").await
                });
                eprintln!("healthy N={n} run {run}: {}", brief(&r));
                results.latency.push(LatencyRun {
                    scenario: "healthy".into(),
                    nodes: n,
                    run,
                    results: r,
                });
            }
        }
    }

    let n = if smoke { 3 } else { 5 };
    let victim = n - 1;

    // 2a. One node slowed by +20 ms (a fault-injecting proxy in front of it).
    if s.wants("slow") {
        let cluster = Cluster::local(n);
        let mut urls = cluster.urls();
        let upstream = format!("127.0.0.1:{}", port_of(&urls[victim]))
            .parse()
            .expect("node address");
        let proxy = Proxy::start(upstream);
        urls[victim] = format!("redis://{}", proxy.addr());
        let mut sampling = s.latency;
        sampling.rslock_per_round = s.rslock_slow_per_round.min(sampling.per_round);
        let r = rt.block_on(async {
            let c = connect_all(&urls).await;
            proxy.set(Fault::latency(Duration::from_millis(20)));
            let r = scenarios::latency(&c, sampling, "bench:slow").await;
            proxy.set(Fault::None);
            r
        });
        eprintln!("slow node: {}", brief(&r));
        results.latency.push(LatencyRun {
            scenario: "slow-node".into(),
            nodes: n,
            run: 1,
            results: r,
        });
    }

    // 2b. One node hung (SIGSTOP): it accepts connections, answers nothing.
    if s.wants("hung") {
        for run in 1..=s.repeats {
            let mut cluster = Cluster::local(n);
            let urls = cluster.urls();
            let contenders = rt.block_on(connect_all(&urls));
            cluster.pause(victim);
            let mut sampling = s.latency;
            sampling.rslock_per_round = s.rslock_hung_per_round.min(sampling.per_round);
            sampling.warmup = sampling.warmup.min(2);
            let r = rt.block_on(scenarios::latency(&contenders, sampling, "bench:hung"));
            cluster.resume(victim);
            drop(contenders);
            eprintln!("hung node run {run}: {}", brief(&r));
            results.latency.push(LatencyRun {
                scenario: "hung-node".into(),
                nodes: n,
                run,
                results: r,
            });
        }
    }

    // 3. Throughput on distinct resources.
    if s.wants("throughput") {
        let cluster = Cluster::local(n);
        let urls = cluster.urls();
        rt.block_on(async {
            let c = connect_all(&urls).await;
            for &tasks in &s.throughput_tasks {
                let r = scenarios::throughput(&c, tasks, s.throughput_window, s.throughput_rounds)
                    .await;
                eprintln!(
                    "throughput {tasks} tasks: {}",
                    r.iter()
                        .map(|t| format!("{} {:.0}/s", t.kind.name(), t.rate.median))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                results.throughput.extend(r);
            }
        });
    }

    // 4. Contention on one resource.
    if s.wants("contention") {
        let cluster = Cluster::local(n);
        let urls = cluster.urls();
        for &k in &s.contention_k {
            for kind in Kind::ALL {
                let r = rt.block_on(scenarios::contention(kind, &urls, k, s.contention_window));
                eprintln!(
                    "contention K={k} {}: {:.0} grants/s, next grant p50 {:.0} µs, \
                     hand-off p50 {:.0} µs ({} samples), wait p99 {:.0} µs, re-grabs {:.0} %, \
                     overlaps {}",
                    kind.name(),
                    r.grants_per_s,
                    measure::micros(r.next_grant.p50),
                    measure::micros(r.handoff.p50),
                    r.handoff.n,
                    measure::micros(r.wait.p99),
                    r.regrabs * 100.0,
                    r.overlaps
                );
                assert_eq!(r.overlaps, 0, "two holders at once: contention K={k}");
                results.contention.push(r);
            }
        }
    }

    // 5. CPU per cycle and memory over a long run, a child process each.
    if s.wants("cpu") && !smoke {
        let cluster = Cluster::local(n);
        let urls = cluster.urls();
        for kind in Kind::ALL {
            let plan = soak::Plan {
                kind,
                ..s.soak.clone()
            };
            let r = soak::spawn(&plan, &urls);
            eprintln!("cpu/memory {}: {r}", kind.name());
            results.cpu.push(r);
        }
    }
    scale_all(s, &rt, results);
    rt.shutdown_timeout(Duration::from_secs(1));
}

/// The scaling curves: against N, against tasks at N=5 (three in a smoke
/// run), against waiting processes.
fn scale_all(s: &Settings, rt: &tokio::runtime::Runtime, results: &mut Results) {
    let smoke = s.latency.per_round < 10;
    let n = if smoke { 3 } else { 5 };
    if s.wants("scale-nodes") {
        for &nodes in &s.scale_nodes {
            let cluster = Cluster::local(nodes);
            let urls = cluster.urls();
            let r = rt.block_on(async {
                let c = connect_all(&urls).await;
                scaling::nodes_point(&c, nodes, s.scale).await
            });
            eprintln!("scale-nodes N={nodes}: {}", brief_scale(&r));
            results.scale.extend(r);
        }
    }
    if s.wants("scale-tasks") {
        let cluster = Cluster::local(n);
        let urls = cluster.urls();
        rt.block_on(async {
            let c = connect_all(&urls).await;
            for &tasks in &s.scale_tasks {
                let r = scaling::tasks_point(&c, n, tasks, s.scale).await;
                eprintln!("scale-tasks {tasks} tasks: {}", brief_scale(&r));
                results.scale.extend(r);
            }
        });
    }
    if s.wants("scale-waiters") {
        let cluster = Cluster::local(n);
        let urls = cluster.urls();
        for &k in &s.scale_waiters {
            for kind in Kind::ALL {
                let r = waiters::run(kind, &urls, k, s.scale_waiters_window);
                eprintln!(
                    "scale-waiters {k} processes {}: {:.0} grants/s, next grant p50 {:.0} µs \
                     p99 {:.0} µs, hand-offs {}, re-grabs {:.0} %, overlaps {}",
                    kind.name(),
                    r.grants_per_s,
                    measure::micros(r.next_grant.p50),
                    measure::micros(r.next_grant.p99),
                    r.handoff.n,
                    r.regrabs * 100.0,
                    r.overlaps
                );
                assert_eq!(r.overlaps, 0, "two holders at once: {k} processes");
                results.waiters.push(r);
            }
        }
    }
}

fn brief_scale(r: &[scaling::ScalePoint]) -> String {
    r.iter()
        .map(|p| {
            format!(
                "{} p50 {:.0} µs p99 {:.0} µs {:.0}/s (errors {})",
                p.kind.name(),
                measure::micros(p.latency.p50),
                measure::micros(p.latency.p99),
                p.rate.median,
                p.errors
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Criterion's mean (with its confidence interval, and its saved baselines
/// for comparing runs) of the healthy five-node cycle.
fn criterion_means(s: &Settings) {
    let mut c = Criterion::default().configure_from_args();
    if s.quick {
        c = c
            .warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_secs(1))
            .sample_size(10);
    } else {
        c = c
            .warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(4));
    }
    let cluster = Cluster::local(5);
    let urls = cluster.urls();
    let rt = runtime();
    let contenders = rt.block_on(connect_all(&urls));
    let mut group = c.benchmark_group("acquire_release_n5");
    for contender in &contenders {
        let key = format!("bench:criterion:{}", contender.kind().name());
        group.bench_function(contender.kind().name(), |b| {
            b.to_async(&rt).iter(|| async {
                contender.cycle(&key, TTL).await.expect("lock cycle");
            });
        });
    }
    group.finish();
    c.final_summary();
}

fn port_of(url: &str) -> u16 {
    url.rsplit(':')
        .next()
        .and_then(|p| p.trim_end_matches('/').parse().ok())
        .expect("port in node URL")
}

fn brief(r: &[scenarios::Latency]) -> String {
    r.iter()
        .map(|l| {
            format!(
                "{} p50 {:.0} µs p99 {:.0} µs (n={}, errors {})",
                l.kind.name(),
                measure::micros(l.pooled.p50),
                measure::micros(l.pooled.p99),
                l.pooled.n,
                l.errors
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// What the numbers were measured on.
fn machine() -> serde_json::Value {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|l| l.trim_start_matches([' ', '\t', ':']).to_owned())
        .unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_owned();
    let redis = std::process::Command::new("redis-server")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    json!({
        "cpu": model, "cores": cores, "kernel": kernel, "redis": redis,
        "load_start": loadavg(),
    })
}
