//! Members that are more than one server: Redis Cluster members of 1, 2
//! and 3 shards against plain servers, and what durable votes add to an
//! acquire on a Sentinel group. See BENCHMARKS.md ("Members: cluster
//! shards and durable votes") for the method and the figures.
//!
//! ```text
//! cargo bench --bench members            # both parts: under 3 minutes
//! cargo bench --bench members -- shards  # shard scaling only
//! cargo bench --bench members -- durable # durable votes only
//! ```
//!
//! 1. **shards**: one client, three members (quorum 2), each a Redis
//!    Cluster of S = 1, 2, 3 masters (no replicas); then three plain
//!    servers, with restart quarantine as the clusters need it and
//!    without. Per round 10,000 distinct resources are locked by 64 tasks
//!    (each takes its share one after the other, one attempt each, and
//!    keeps every lock), so that all 10,000 are held at once; then all
//!    are released. Cycles per second, acquire latency, each master's
//!    commands and CPU (`INFO`) and keys at the peak (`DBSIZE`), and the
//!    client's CPU (`getrusage`). The configurations take turns round by
//!    round, so that each sees the same load from the rest of the machine.
//! 2. **durable**: one Sentinel group (a master and one replica) as the
//!    only member; cycles of one attempt and a release with durable votes
//!    off and `Replicas(1)`; on a Valkey group with `appendonly` also
//!    `Aof { local: true, replicas: 0 }` and `{ local: true, replicas: 1 }`
//!    (Debian's Redis 7.0 has no `WAITAOF`). One client per durability;
//!    they take turns cycle by cycle.
//!
//! Every cluster member needs restart quarantine (30 s; 1 s in the smoke
//! run; the Sentinel members get it too): every server is started first,
//! and the parts wait until each has been up that long. Results: tables
//! on stdout, and `members.md` and `members.svg` in the bench output
//! folder (`quorumlock-bench` under the target directory).
//! Run as a test (`cargo test --benches`), each part runs once, tiny, on
//! clusters of 2 shards and without Valkey.

use quorumlock_testkit as support;

#[allow(dead_code)]
#[path = "../quorum/measure.rs"]
mod measure;

mod durable;
mod plot;
mod servers;
mod shards;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use quorumlock::Durability;
use support::{GroupOptions, SentinelGroup};

use shards::{Bench, Members, Paper};

/// Sizes of one run.
#[derive(Debug, Clone, Copy)]
struct Plan {
    quarantine: Duration,
    shards: shards::Plan,
    durable: durable::Plan,
    /// Whether the Valkey group (`WAITAOF`) runs when Valkey is there.
    valkey: bool,
}

const FULL: Plan = Plan {
    quarantine: Duration::from_secs(30),
    shards: shards::Plan {
        shards: &[1, 2, 3],
        resources: 10_000,
        tasks: 64,
        rounds: 5,
    },
    durable: durable::Plan {
        cycles: 2_000,
        aof_replica_cycles: 20,
        warmup: 50,
    },
    valkey: true,
};

const SMOKE: Plan = Plan {
    quarantine: Duration::from_secs(1),
    shards: shards::Plan {
        shards: &[2],
        resources: 200,
        tasks: 8,
        rounds: 1,
    },
    durable: durable::Plan {
        cycles: 10,
        aof_replica_cycles: 3,
        warmup: 2,
    },
    valkey: false,
};

/// The Sentinel groups of the durable part: the default server's, and
/// Valkey's with `appendonly`.
struct Groups {
    redis: SentinelGroup,
    valkey: Option<SentinelGroup>,
}

impl Groups {
    fn start(valkey: bool) -> Self {
        let valkey = match (valkey, support::valkey_binary()) {
            (true, Some(server)) => Some(SentinelGroup::start(
                "bench-aof",
                &GroupOptions {
                    aof: true,
                    server: Some(server),
                    ..GroupOptions::default()
                },
            )),
            (true, None) => {
                eprintln!("no Valkey (scripts/fetch-servers.sh): WAITAOF is not measured");
                None
            }
            (false, _) => None,
        };
        Self {
            redis: SentinelGroup::start("bench", &GroupOptions::default()),
            valkey,
        }
    }

    fn ports(&self) -> Vec<u16> {
        let mut ports = self.redis.data_ports();
        if let Some(v) = &self.valkey {
            ports.extend(v.data_ports());
        }
        ports
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `cargo bench` passes --bench; `cargo test --benches` does not.
    let smoke = !args.iter().any(|a| a == "--bench");
    let plan = if smoke { SMOKE } else { FULL };
    let filter = args.iter().find(|a| !a.starts_with('-')).cloned();
    let wants = |part: &str| filter.as_deref().is_none_or(|f| part.contains(f));
    let began = Instant::now();
    let load_at_start = load_average();

    // Everything starts first, so that one wait covers the quarantine.
    let mut configurations: Vec<Members> = Vec::new();
    if wants("shards") {
        configurations.extend(plan.shards.shards.iter().map(|&s| Members::sharded(s)));
        configurations.push(Members::plain(true));
        configurations.push(Members::plain(false));
    }
    let groups = wants("durable").then(|| Groups::start(plan.valkey));
    let mut ports: Vec<u16> = configurations
        .iter()
        .flat_map(|m| m.ports.iter().map(|p| p.1))
        .collect();
    ports.extend(groups.iter().flat_map(Groups::ports));
    eprintln!(
        "{} servers started in {:.1?}; waiting until each has been up {:?}",
        ports.len(),
        began.elapsed(),
        plan.quarantine
    );
    servers::await_uptime(&ports, plan.quarantine);

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let mut report = String::new();
    // Round by round, each configuration in turn: all of them see the
    // same load from the rest of the machine.
    let mut benches: Vec<Bench> = configurations
        .iter()
        .map(|m| Bench::new(&rt, m, plan.quarantine))
        .collect();
    for round in 0..=plan.shards.rounds {
        for bench in &mut benches {
            bench.round(&rt, round, plan.shards);
        }
    }
    let runs: Vec<shards::Run> = benches.into_iter().map(Bench::finish).collect();
    drop(configurations);
    for run in &runs {
        eprintln!(
            "{}: {:.0} cycles/s, acquire p50 {:.1} ms",
            run.label,
            run.rate().median,
            measure::micros(run.acquire.p50) / 1e3
        );
    }
    if !runs.is_empty() {
        let paper = Paper::of(&runs);
        report += &format!(
            "## shards\n\n{}\n{}\n{}\n{}",
            shards::table(&runs, plan.shards),
            shards::detail(&runs),
            shards::calls(&runs),
            paper_table(paper)
        );
        if smoke {
            assert!(
                runs.iter().all(|r| r.cycles > 0 && r.failed == 0),
                "{runs:?}"
            );
        } else {
            let path = out_dir().join("members.svg");
            let _ = std::fs::create_dir_all(out_dir());
            plot::draw(&path, &runs, paper, plan.shards.tasks).expect("draw members.svg");
            eprintln!("plot: {}", path.display());
        }
    }
    if let Some(groups) = &groups {
        let modes = [None, Some(Durability::Replicas(1))];
        let master = |g: &SentinelGroup| format!("redis://127.0.0.1:{}", g.master_port());
        let mut rows = rt.block_on(durable::run(
            "redis-server, no persistence",
            (&groups.redis.url(), &master(&groups.redis), 1),
            &modes,
            plan.quarantine,
            plan.durable,
        ));
        if let Some(valkey) = &groups.valkey {
            let local = Some(Durability::Aof {
                local: true,
                replicas: 0,
            });
            let aof = Some(Durability::Aof {
                local: true,
                replicas: 1,
            });
            rows.extend(rt.block_on(durable::run(
                "Valkey, AOF fsync always",
                (&valkey.url(), &master(valkey), 1),
                &[None, Some(Durability::Replicas(1)), local, aof],
                plan.quarantine,
                plan.durable,
            )));
        }
        report += &format!("\n## durable\n\n{}", durable::table(&rows, plan.durable));
        if smoke {
            assert!(rows.iter().all(|r| r.took.n > 0), "{rows:?}");
        }
    }
    report += &format!(
        "\nload average (1 min): {load_at_start} at the start, {} at the end\n",
        load_average()
    );
    println!("{report}");
    eprintln!("took {:.0?} in all", began.elapsed());
    if smoke {
        println!("bench smoke: 1 passed, 0 failed");
        return;
    }
    let path = out_dir().join("members.md");
    std::fs::write(&path, report).expect("write members.md");
    println!("results: {}", path.display());
}

/// On paper, against shards per member.
fn paper_table(paper: Option<Paper>) -> String {
    let Some(p) = paper else {
        return String::new();
    };
    let mut out = format!(
        "on paper: one master sustains {:.0} cycles/s on a core; one client core {:.0} cycles/s\n\n\
         | shards per member | shards × one shard | client on 1 core | on 2 cores | on 4 cores |\n|---|---|---|---|---|\n",
        p.per_shard, p.per_client_core
    );
    for s in [1, 2, 3, 4, 6, 8] {
        out += &format!(
            "| {s} | {:.0} | {:.0} | {:.0} | {:.0} |\n",
            s as f64 * p.per_shard,
            p.at(s, 1.0),
            p.at(s, 2.0),
            p.at(s, 4.0)
        );
    }
    out
}

/// The 1-minute load average: other work shares this machine.
fn load_average() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace().next().unwrap_or("?").to_owned()
}

fn out_dir() -> PathBuf {
    let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".to_owned());
    PathBuf::from(target).join("quorumlock-bench")
}
