//! A randomized safety run: nodes behind proxies, a seeded nemesis on a
//! minority of them, a [`Load`] of clients recording their grants in a
//! [`Checker`], then recovery and leftovers checked.
//!
//! The load is what the clients do: take locks ([`Strategy`]), permits of
//! a semaphore ([`Permits`]), a side of a read–write lock ([`ReadWrite`])
//! or leaderships ([`Leaders`]), each turn played by one driver
//! ([`drive`]). The run, the faults, the checker's history and the summary
//! line's head are the same for all.
//!
//! [`Strategy`]: super::workload::Strategy
//! [`Permits`]: super::permits::Permits
//! [`Leaders`]: super::leaders::Leaders
//! [`ReadWrite`]: super::rwlock::ReadWrite
//! [`drive`]: super::turns::drive

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use quorumlock::{Builder, Redlock};

use super::checker::{Checker, Figures, Overlap, Store};
use super::workload::{resource_name, Workload};

/// One client of a load, as its task receives it.
pub struct Client {
    /// Its number, `0..clients`.
    pub id: usize,
    /// Its own `Redlock` (its own links to the nodes).
    pub redlock: Redlock,
    /// The shape of the load.
    pub workload: Workload,
    /// Where it records what it held.
    pub checker: Arc<Checker>,
    /// The run's resource names begin with this ([`resource_name`]).
    pub prefix: String,
    /// Seeds its choices.
    pub seed: u64,
    /// It starts nothing new after this.
    pub until: Instant,
}

/// The seed of client `id` of a run seeded `seed`: each client's own
/// choices, replayable from the run's seed.
pub fn client_seed(seed: u64, id: usize) -> u64 {
    seed ^ (id as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// What the clients of a safety run do: every [`Turns`] is one.
///
/// [`Turns`]: super::turns::Turns
pub trait Load: Sync {
    /// How long nodes must have been up before the load can start (a
    /// restart quarantine).
    fn warmup(&self) -> Duration;

    /// Adjusts each client's builder.
    fn builder(&self, builder: Builder) -> Builder;

    /// The store the holders update, for `resources` resources.
    fn store(&self, resources: usize) -> Arc<dyn Store>;

    /// One client's loop, until [`Client::until`]; it ends once it let go
    /// of what it held.
    fn client(&self, client: Client) -> BoxFuture<'static, ()>;

    /// After the faults: takes resource `name` once with `redlock` (a
    /// fresh client) and lets it go; false when that failed within `wait`.
    fn take_once<'a>(
        &'a self,
        redlock: &'a Redlock,
        name: &'a str,
        w: &'a Workload,
        wait: Duration,
    ) -> BoxFuture<'a, bool>;

    /// The glob of the run's keys that must be gone once every TTL passed.
    fn keys(&self, prefix: &str) -> String;
}

/// A whole randomized safety run: its settings.
#[derive(Debug, Clone)]
pub struct SafetyRun {
    /// Seeds the workload and the nemesis.
    pub seed: u64,
    /// How long clients run; every fault is healed a second before the end.
    pub duration: Duration,
    /// Nodes started for the run.
    pub nodes: usize,
    /// Nodes faulted at once (keep it a minority).
    pub max_faulty: usize,
    /// How the nodes run; with `faketime` set the nemesis also steps their
    /// clocks forward.
    pub node_options: super::NodeOptions,
    /// The clients' load.
    pub workload: Workload,
}

/// What a safety run found. Holds the cluster, so a failing assertion on
/// it prints the node logs.
pub struct SafetyOutcome {
    /// The nodes the run used.
    pub cluster: super::Cluster,
    /// The history the clients recorded.
    pub checker: Arc<Checker>,
    /// The checker's figures.
    pub figures: Figures,
    /// Every overlap found.
    pub overlaps: Vec<Overlap>,
    /// Overlaps a clock jump explains (out of the model for mutual
    /// exclusion); the rest are violations.
    pub overlaps_by_jump: usize,
    /// The nemesis' clock jumps (before and after each step).
    pub jumps: Vec<(Instant, Instant)>,
    /// Episodes the nemesis applied, and their kinds.
    pub faults: usize,
    /// The episodes by kind, for the report line.
    pub fault_kinds: String,
    /// Keys of the run's resources left on any node once every TTL passed.
    pub leaked_keys: usize,
    /// How long a fresh client took, after the run, to take each resource
    /// (the slowest), or `None` when one could not be taken in time.
    pub recovery: Option<Duration>,
}

impl SafetyRun {
    /// The summary line's settings and run-wide figures: seed, size,
    /// faults, leaked keys, recovery.
    pub fn head(&self, outcome: &SafetyOutcome) -> String {
        let w = &self.workload;
        let ttls: Vec<String> = w.ttls.iter().map(|t| t.as_millis().to_string()).collect();
        format!(
            "seed={} secs={} clients={} nodes={}{} resources={} ttls_ms={} faults={} \
             fault_kinds={} leaked_keys={} recovery={}",
            self.seed,
            self.duration.as_secs(),
            w.clients,
            self.nodes,
            if self.node_options.faketime.is_some() {
                "(valkey+faketime)"
            } else {
                ""
            },
            w.resources,
            ttls.join("/"),
            outcome.faults,
            outcome.fault_kinds,
            outcome.leaked_keys,
            outcome.recovery.map_or("none".to_owned(), |d| format!(
                "{:.0}ms",
                d.as_secs_f64() * 1e3
            )),
        )
    }

    /// The one summary line of a lock run.
    pub fn line(&self, outcome: &SafetyOutcome) -> String {
        format!(
            "safety: {} {} overlaps_by_clock_jump={}",
            self.head(outcome),
            outcome.figures.line(),
            outcome.overlaps_by_jump,
        )
    }

    /// Starts `nodes` local nodes behind proxies, plays a seeded fault
    /// schedule on a minority of them while `load` runs, then checks
    /// recovery and leftovers.
    ///
    /// # Panics
    ///
    /// When a client cannot be built, or a client panics (its assertion).
    pub async fn run(&self, load: &dyn Load) -> SafetyOutcome {
        use super::nemesis::{Limits, Nemesis, Schedule};

        let w = &self.workload;
        let mut cluster = super::Cluster::local_custom(self.nodes, &self.node_options);
        let urls = cluster.proxied();
        tokio::time::sleep(load.warmup()).await;
        let limits = Limits {
            nodes: self.nodes,
            span: self.duration.saturating_sub(Duration::from_secs(1)),
            max_faulty: self.max_faulty,
            max_ttl: w.max_ttl(),
            process_faults: true,
            clock_jumps: self.node_options.faketime.is_some(),
            clients: w.clients,
        };
        let schedule = Schedule::generate(self.seed, &limits);
        let fault_kinds = schedule.counts();
        let prefix = super::unique("safety");
        let checker = Arc::new(Checker::new(w.resources, load.store(w.resources)));
        checker.watch_nodes((0..self.nodes).map(|i| cluster.side_url(i)).collect());
        let until = Instant::now() + self.duration;
        // Each client gets its own link to each node, so the nemesis can
        // fault one client's traffic apart from the others'.
        let links: Vec<super::Links> = (0..w.clients).map(|_| cluster.links()).collect();
        let handles = links
            .iter()
            .map(|l| (0..self.nodes).map(|i| l.link(i)).collect())
            .collect();
        let mut tasks = Vec::new();
        for (id, link) in links.iter().enumerate() {
            let redlock = load
                .builder(w.builder(&link.urls()))
                .build()
                .await
                .expect("build a client");
            tasks.push(load.client(Client {
                id,
                redlock,
                workload: w.clone(),
                checker: checker.clone(),
                prefix: prefix.clone(),
                seed: client_seed(self.seed, id),
                until,
            }));
        }
        let nemesis = Nemesis::start_with_links(cluster, handles, schedule);
        let tasks: Vec<_> = tasks.into_iter().map(tokio::spawn).collect();
        for t in tasks {
            if let Err(e) = t.await {
                if e.is_panic() {
                    std::panic::resume_unwind(e.into_panic());
                }
            }
        }
        let (played, report) = nemesis.finish();
        let cluster = played.cluster;

        // Every fault is healed: a fresh client takes each resource within
        // a TTL (orphans expire) plus retries.
        let probe = load
            .builder(w.builder(&urls))
            .build()
            .await
            .expect("probe client");
        let start = Instant::now();
        let mut recovery = Some(Duration::ZERO);
        for r in 0..w.resources {
            let name = resource_name(&prefix, r);
            let wait = w.max_ttl() + Duration::from_secs(3);
            if load.take_once(&probe, &name, w, wait).await {
                recovery = recovery.map(|d| d.max(start.elapsed()));
            } else {
                recovery = None;
            }
        }

        // Nothing outlives its TTL.
        tokio::time::sleep(w.max_ttl() + Duration::from_millis(500)).await;
        let leaked_keys = cluster.count_keys(&load.keys(&prefix));
        let overlaps = checker.overlaps();
        let overlaps_by_jump = overlaps
            .iter()
            .filter(|o| super::checker::explained_by_jump(o, &report.jumps))
            .count();
        SafetyOutcome {
            cluster,
            figures: checker.figures(),
            checker,
            overlaps,
            overlaps_by_jump,
            jumps: report.jumps,
            faults: report.faults,
            fault_kinds,
            leaked_keys,
            recovery,
        }
    }
}

/// The size of a randomized run: as CI runs it, and its long shape
/// (`QUORUMLOCK_SAFETY_LONG=1`: many resources, short TTLs and holds, many
/// grants per second).
#[derive(Debug, Clone, Copy)]
pub struct Sizes {
    /// Seconds, unless `QUORUMLOCK_SAFETY_SECS` says otherwise.
    pub secs: u64,
    /// Resources in CI.
    pub resources: usize,
    /// Resources in the long shape.
    pub long_resources: usize,
    /// Clients in the long shape (12 in CI), unless
    /// `QUORUMLOCK_SAFETY_CLIENTS` says otherwise.
    pub long_clients: u64,
}

impl SafetyRun {
    /// The randomized run of `sizes` on five nodes (two of them faulty at
    /// most), grown by the environment: the one shape every safety suite
    /// shares.
    pub fn ci(seed: u64, sizes: Sizes) -> SafetyRun {
        let long = long_shape();
        let secs = env_u64("QUORUMLOCK_SAFETY_SECS", sizes.secs).max(3);
        let clients = if long { sizes.long_clients } else { 12 };
        let clients = env_u64("QUORUMLOCK_SAFETY_CLIENTS", clients).max(1);
        let ms = Duration::from_millis;
        SafetyRun {
            seed,
            duration: Duration::from_secs(secs),
            nodes: 5,
            max_faulty: 2,
            node_options: super::NodeOptions::default(),
            workload: Workload {
                clients: usize::try_from(clients).unwrap_or(usize::MAX),
                resources: if long {
                    sizes.long_resources
                } else {
                    sizes.resources
                },
                ttls: if long {
                    vec![ms(150), ms(250), ms(400)]
                } else {
                    vec![ms(250), ms(400), ms(600)]
                },
                work: ms(if long { 20 } else { 40 }),
                extend_one_in: 4,
                extend_ttls: (ms(80), ms(if long { 500 } else { 800 })),
                cancel_one_in: 8,
                cancel_extend_one_in: 3,
                cancel_within: ms(60),
                think: ms(if long { 10 } else { 20 }),
                fair_one_in: 3,
                node_timeout: ms(if long { 100 } else { 50 }),
                retry_count: 2,
                retry_delay_max: ms(50),
            },
        }
    }
}

/// A number from the environment variable `name`, or `default`.
pub fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Whether `QUORUMLOCK_SAFETY_LONG=1` asks for a long run's shape.
pub fn long_shape() -> bool {
    std::env::var("QUORUMLOCK_SAFETY_LONG").as_deref() == Ok("1")
}

/// A second holder's turn in a negative control: `lock` (granted to
/// client 1 with `fence`) reads the counter through `checker`, writes it
/// back one higher 50 ms later if its validity lasts, and is released.
/// The checker flags the overlap with a first holder still inside its
/// validity.
pub async fn second_holder(checker: &Checker, lock: quorumlock::Lock, fence: Option<u64>) {
    let mut held = checker.granted(1, 0, fence, Instant::now(), lock.deadline());
    let (read, value) = held.read(|| !lock.validity().is_zero());
    if read == super::checker::Outcome::Accepted {
        tokio::time::sleep(Duration::from_millis(50)).await;
        held.write(value + 1, || !lock.validity().is_zero());
    }
    held.stop();
    let _ = lock.release().await;
}
