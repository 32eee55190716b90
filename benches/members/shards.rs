//! Shard scaling: one client, three members (quorum 2), 10,000 distinct
//! resources locked at the same time and then released, on members that
//! are Redis Clusters of 1, 2 and 3 shards, and on three plain servers.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use quorumlock::{Builder, Lock, Redlock, Retry};
use quorumlock_testkit::{Cluster, ShardedCluster};

use crate::measure::{cpu_time, micros, Spread, Summary};
use crate::servers::{read_all, Reading, Server};

/// Members of the quorum.
pub const MEMBERS: usize = 3;

/// Long against a round: every lock stays held until the release phase.
const TTL: Duration = Duration::from_secs(60);

/// Sizes of the part.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// Shards per member, one configuration each.
    pub shards: &'static [usize],
    /// Distinct resources locked per round.
    pub resources: usize,
    /// Tasks taking them, each its share one after the other.
    pub tasks: usize,
    /// Measured rounds, after one untimed round.
    pub rounds: usize,
}

/// The members of one configuration, running.
pub struct Members {
    /// Shards per member; 0 for plain servers.
    pub shards: usize,
    /// Whether the client runs with restart quarantine (cluster members
    /// must).
    pub quarantined: bool,
    pub urls: Vec<String>,
    /// Every master, with its member.
    pub ports: Vec<(usize, u16)>,
    _plain: Option<Cluster>,
    _clusters: Vec<ShardedCluster>,
}

impl Members {
    /// Three plain servers, the client with restart quarantine or not.
    pub fn plain(quarantined: bool) -> Self {
        let cluster = Cluster::local(MEMBERS);
        let urls = cluster.urls();
        let ports = urls
            .iter()
            .enumerate()
            .map(|(m, u)| {
                let port = u.rsplit(':').next().and_then(|p| p.parse().ok());
                (m, port.expect("a local node's URL ends with its port"))
            })
            .collect();
        Self {
            shards: 0,
            quarantined,
            urls,
            ports,
            _plain: Some(cluster),
            _clusters: Vec::new(),
        }
    }

    /// Three Redis Clusters of `shards` masters each, no replicas.
    pub fn sharded(shards: usize) -> Self {
        let clusters: Vec<ShardedCluster> = (0..MEMBERS)
            .map(|_| ShardedCluster::start(shards, 0))
            .collect();
        let ports = clusters
            .iter()
            .enumerate()
            .flat_map(|(m, c)| c.masters().into_iter().map(move |p| (m, p)))
            .collect();
        Self {
            shards,
            quarantined: true,
            urls: clusters.iter().map(ShardedCluster::url).collect(),
            ports,
            _plain: None,
            _clusters: clusters,
        }
    }
}

impl Members {
    /// How the tables name the configuration.
    pub fn label(&self) -> String {
        match (self.shards, self.quarantined) {
            (0, true) => "3 plain servers".to_owned(),
            (0, false) => "3 plain servers, no quarantine".to_owned(),
            (1, _) => "3 clusters of 1 shard".to_owned(),
            (s, _) => format!("3 clusters of {s} shards"),
        }
    }
}

/// What one configuration measured, over its rounds.
#[derive(Debug, Clone)]
pub struct Run {
    /// [`Members::label`].
    pub label: String,
    pub shards: usize,
    pub quarantined: bool,
    /// Granted acquire + release cycles.
    pub cycles: usize,
    /// Attempts refused or failed, and releases that failed.
    pub failed: usize,
    /// Cycles per second, one per round.
    pub rates: Vec<f64>,
    pub acquire: Summary,
    /// Acquire and release phases, every round.
    pub wall: Duration,
    /// This process's CPU over the same phases.
    pub client_cpu: Duration,
    /// Per master (member, port): commands and CPU over every round.
    pub servers: Vec<(usize, u16, Reading)>,
    /// Per master: keys held once every lock of the last round was taken.
    pub peak_keys: Vec<u64>,
}

impl Run {
    pub fn rate(&self) -> Spread {
        Spread::of(&self.rates)
    }

    /// Cores the client kept busy.
    pub fn client_cores(&self) -> f64 {
        self.client_cpu.as_secs_f64() / self.wall.as_secs_f64()
    }

    /// Cores the busiest master kept busy (one at most: a server's
    /// commands run on one thread).
    pub fn busiest_cores(&self) -> f64 {
        let max = self.servers.iter().map(|s| s.2.cpu).max();
        max.unwrap_or_default().as_secs_f64() / self.wall.as_secs_f64()
    }

    /// Cores every master together kept busy.
    pub fn server_cores(&self) -> f64 {
        let all: Duration = self.servers.iter().map(|s| s.2.cpu).sum();
        all.as_secs_f64() / self.wall.as_secs_f64()
    }

    /// CPU per cycle, µs: the client's, and the busiest master's.
    pub fn per_cycle(&self) -> (f64, f64) {
        let n = self.cycles.max(1) as f64;
        let busiest = self.servers.iter().map(|s| s.2.cpu).max();
        (
            micros(self.client_cpu) / n,
            micros(busiest.unwrap_or_default()) / n,
        )
    }
}

/// One configuration under measurement: its client, side connections to
/// its masters, and what its rounds measured so far.
pub struct Bench {
    rl: Redlock,
    servers: Vec<Server>,
    tag: String,
    took: Vec<Duration>,
    run: Run,
}

impl Bench {
    pub fn new(rt: &tokio::runtime::Runtime, members: &Members, quarantine: Duration) -> Self {
        let rl = rt
            .block_on(
                Builder::new(members.urls.clone())
                    .restart_quarantine(members.quarantined.then_some(quarantine))
                    .node_timeout(Duration::from_secs(1))
                    .build(),
            )
            .expect("a client of the three members");
        let servers: Vec<Server> = members
            .ports
            .iter()
            .map(|&(m, p)| Server::open(m, p))
            .collect();
        let run = Run {
            label: members.label(),
            shards: members.shards,
            quarantined: members.quarantined,
            cycles: 0,
            failed: 0,
            rates: Vec::new(),
            acquire: Summary::default(),
            wall: Duration::ZERO,
            client_cpu: Duration::ZERO,
            servers: servers
                .iter()
                .map(|s| (s.member, s.port, Reading::default()))
                .collect(),
            peak_keys: Vec::new(),
        };
        Self {
            rl,
            servers,
            tag: format!("{:08x}", rand::random::<u32>()),
            took: Vec::new(),
            run,
        }
    }

    /// One round on fresh names; round 0 is not counted.
    pub fn round(&mut self, rt: &tokio::runtime::Runtime, round: usize, plan: Plan) {
        let names: Vec<String> = (0..plan.resources)
            .map(|i| format!("bench:members:{}:{round}:{i}", self.tag))
            .collect();
        let before = read_all(&mut self.servers);
        let (cpu0, began) = (cpu(), Instant::now());
        let (held, latencies, refused) = rt.block_on(acquire_all(&self.rl, names, plan.tasks));
        let (acquiring, acquire_cpu) = (began.elapsed(), cpu() - cpu0);
        let keys: Vec<u64> = self.servers.iter_mut().map(Server::keys).collect();
        let (cpu0, began) = (cpu(), Instant::now());
        let unreleased = rt.block_on(release_all(held));
        let (wall, client) = (acquiring + began.elapsed(), acquire_cpu + (cpu() - cpu0));
        let after = read_all(&mut self.servers);
        if round == 0 {
            return;
        }
        let run = &mut self.run;
        run.rates.push(latencies.len() as f64 / wall.as_secs_f64());
        run.cycles += latencies.len();
        run.failed += refused + unreleased;
        run.wall += wall;
        run.client_cpu += client;
        for (i, (a, b)) in after.iter().zip(&before).enumerate() {
            run.servers[i].2.add(&a.since(b));
        }
        run.peak_keys = keys;
        self.took.extend(latencies);
    }

    pub fn finish(mut self) -> Run {
        self.run.acquire = Summary::of(&self.took);
        self.run
    }
}

fn cpu() -> Duration {
    let (user, sys) = cpu_time();
    user + sys
}

/// Takes a lock on every name (`tasks` tasks, each its share in turn,
/// one attempt each) and keeps them: the locks, each acquire's latency,
/// and how many were not granted.
async fn acquire_all(
    rl: &Redlock,
    names: Vec<String>,
    tasks: usize,
) -> (Vec<Vec<Lock>>, Vec<Duration>, usize) {
    let names = Arc::new(names);
    let handles: Vec<_> = (0..tasks)
        .map(|t| {
            let (rl, names) = (rl.clone(), names.clone());
            tokio::spawn(async move {
                let (mut held, mut took, mut refused) = (Vec::new(), Vec::new(), 0);
                for name in names.iter().skip(t).step_by(tasks) {
                    let began = Instant::now();
                    match rl.lock(name, TTL).retry(Retry::Times(0)).acquire().await {
                        Ok(lock) => {
                            took.push(began.elapsed());
                            held.push(lock);
                        }
                        Err(e) => {
                            if refused == 0 {
                                eprintln!("an acquire failed: {e}");
                            }
                            refused += 1;
                        }
                    }
                }
                (held, took, refused)
            })
        })
        .collect();
    let (mut held, mut took, mut refused) = (Vec::new(), Vec::new(), 0);
    for handle in handles {
        let (h, t, r) = handle.await.expect("an acquiring task panicked");
        held.push(h);
        took.extend(t);
        refused += r;
    }
    (held, took, refused)
}

/// Releases every lock, each task its own in turn; how many failed.
async fn release_all(held: Vec<Vec<Lock>>) -> usize {
    let handles: Vec<_> = held
        .into_iter()
        .map(|locks| {
            tokio::spawn(async move {
                let mut failed = 0;
                for lock in locks {
                    if let Err(e) = lock.release().await {
                        if failed == 0 {
                            eprintln!("a release failed: {e}");
                        }
                        failed += 1;
                    }
                }
                failed
            })
        })
        .collect();
    let mut failed = 0;
    for handle in handles {
        failed += handle.await.expect("a releasing task panicked");
    }
    failed
}

/// The part's table: one row per configuration.
pub fn table(runs: &[Run], plan: Plan) -> String {
    let mut out = format!(
        "{} resources per round, {} tasks, {} rounds\n\n\
         | members | cycles/s (range) | acquire p50 | p99 | commands per cycle, each master (min–max) | keys per master at peak (min–max) | client CPU per cycle | busiest master's CPU per cycle | client cores | all masters' cores | busiest master's cores | failed |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|\n",
        plan.resources, plan.tasks, plan.rounds
    );
    for r in runs {
        let rate = r.rate();
        let per_cycle: Vec<f64> = r
            .servers
            .iter()
            .map(|s| s.2.commands as f64 / r.cycles.max(1) as f64)
            .collect();
        let (lo, hi) = min_max(&per_cycle);
        let keys: Vec<f64> = r.peak_keys.iter().map(|&k| k as f64).collect();
        let (klo, khi) = min_max(&keys);
        let (client, busiest) = r.per_cycle();
        let _ = writeln!(
            out,
            "| {} | {:.0} ({:.0}–{:.0}) | {:.1} ms | {:.1} ms | {lo:.2}–{hi:.2} | {klo:.0}–{khi:.0} | {client:.0} µs | {busiest:.0} µs | {:.2} | {:.2} | {:.2} | {} |",
            r.label,
            rate.median,
            rate.min,
            rate.max,
            micros(r.acquire.p50) / 1e3,
            micros(r.acquire.p99) / 1e3,
            r.client_cores(),
            r.server_cores(),
            r.busiest_cores(),
            r.failed
        );
    }
    out
}

/// Each master's share: commands and CPU per cycle.
pub fn detail(runs: &[Run]) -> String {
    let mut out = String::from(
        "| members | member | port | commands | per cycle | CPU | CPU per cycle |\n|---|---|---|---|---|---|---|\n",
    );
    for r in runs {
        let n = r.cycles.max(1) as f64;
        for (member, port, reading) in &r.servers {
            let _ = writeln!(
                out,
                "| {} | {member} | {port} | {} | {:.2} | {:.0} ms | {:.1} µs |",
                r.label,
                reading.commands,
                reading.commands as f64 / n,
                micros(reading.cpu) / 1e3,
                micros(reading.cpu) / n
            );
        }
    }
    out
}

/// Per configuration: calls per cycle of each command, all masters of
/// one member together (the mean over the members).
pub fn calls(runs: &[Run]) -> String {
    let mut out = String::from("| members | calls per cycle and member |\n|---|---|\n");
    for r in runs {
        let mut all = Reading::default();
        for (_, _, reading) in &r.servers {
            all.add(reading);
        }
        let n = (r.cycles.max(1) * MEMBERS) as f64;
        let calls: Vec<String> = all
            .calls
            .iter()
            .map(|(c, &k)| (c, k as f64 / n))
            .filter(|&(_, k)| k >= 0.005)
            .map(|(c, k)| format!("`{c}` {k:.2}"))
            .collect();
        let _ = writeln!(out, "| {} | {} |", r.label, calls.join(", "));
    }
    out
}

fn min_max(values: &[f64]) -> (f64, f64) {
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(0.0, f64::max);
    (if lo.is_finite() { lo } else { 0.0 }, hi)
}

/// On paper: how far cycles per second grow with shards per member when
/// each master has a core of its own and the client `cores` cores:
/// `min(shards × one shard's rate, cores × one client core's rate)`.
#[derive(Debug, Clone, Copy)]
pub struct Paper {
    /// Cycles per second one master sustains on one core: cycles over the
    /// busiest master's CPU with one shard per member.
    pub per_shard: f64,
    /// Cycles per second one core of the client sustains: cycles over
    /// the client's CPU, every cluster configuration together.
    pub per_client_core: f64,
}

impl Paper {
    /// From the runs; `None` without a one-shard run.
    pub fn of(runs: &[Run]) -> Option<Paper> {
        let one = runs.iter().find(|r| r.shards == 1)?;
        let busiest = one.servers.iter().map(|s| s.2.cpu).max()?;
        let clustered = runs.iter().filter(|r| r.shards > 0);
        let (cycles, cpu) = clustered.fold((0, Duration::ZERO), |(n, c), r| {
            (n + r.cycles, c + r.client_cpu)
        });
        Some(Paper {
            per_shard: one.cycles as f64 / busiest.as_secs_f64(),
            per_client_core: cycles as f64 / cpu.as_secs_f64(),
        })
    }

    pub fn at(&self, shards: usize, cores: f64) -> f64 {
        (shards as f64 * self.per_shard).min(cores * self.per_client_core)
    }
}
