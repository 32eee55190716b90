//! One local `redis-server` (or Valkey) process: how it is started (a
//! plain server, a Redis Cluster node or a Sentinel), signalled, stopped
//! and read back (its log, its replication role).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::env::SERVER_ENV;

/// A node started by the harness.
pub struct LocalNode {
    /// The plain-TCP port (side connections always use it).
    pub port: u16,
    /// The TLS port, when the node serves TLS; clients then use it.
    pub tls_port: Option<u16>,
    /// The server binary it runs: [`NodeOptions::server`], else
    /// [`server_binary`](crate::server_binary).
    pub binary: String,
    pub(crate) dir: tempfile::TempDir,
    pub(crate) child: Option<Child>,
    pub(crate) options: NodeOptions,
    pub(crate) paused: bool,
    /// The wall-clock offset written to the faketime file so far.
    pub(crate) clock_offset: Duration,
    pub(crate) mode: Mode,
}

/// What a process serves besides [`NodeOptions`].
#[derive(Debug, Clone, Default)]
pub(crate) enum Mode {
    /// A plain server.
    #[default]
    Data,
    /// A Redis Cluster node, its `nodes.conf` in its directory.
    Cluster { node_timeout: Duration },
    /// A Sentinel: `--sentinel` with `sentinel.conf` in its directory
    /// (which it rewrites), first written with these lines.
    Sentinel { conf: String },
}

/// How [`Cluster::local_custom`](crate::Cluster::local_custom) starts its nodes.
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
    /// The server binary; [`server_binary`](crate::server_binary) (`QUORUMLOCK_REDIS_SERVERS`,
    /// `QUORUMLOCK_REDIS_SERVER`, `REDIS_SERVER`, or `redis-server` on
    /// `PATH`) when unset. [`valkey_clock_options`](crate::valkey_clock_options) points it at Valkey.
    pub server: Option<PathBuf>,
    /// Run the node under this libfaketime library (`LD_PRELOAD`), reading
    /// its wall-clock offset from a file in the node's directory at every
    /// clock read: [`Cluster::jump_clock`](crate::Cluster::jump_clock) steps it. Needs a server built
    /// with libc malloc (Valkey from `scripts/fetch-servers.sh`); Debian's
    /// jemalloc `redis-server` hangs under libfaketime.
    pub faketime: Option<PathBuf>,
}

impl LocalNode {
    /// Starts a node running `binary` and waits until it answers `PING`;
    /// tries again on another port (up to five times) when it does not,
    /// as when another process took the port meanwhile.
    pub(crate) fn start(binary: String, options: &NodeOptions, mode: Mode) -> Result<Self, String> {
        let mut last = String::new();
        for _ in 0..5 {
            let mut node = LocalNode {
                port: match mode {
                    Mode::Cluster { .. } => cluster_port(),
                    _ => free_port(),
                },
                tls_port: options.tls_args.as_ref().map(|_| free_port()),
                binary: binary.clone(),
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
                mode: mode.clone(),
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
                Err(e) => last = format!("{e}\n{}", node.log()),
            }
        }
        Err(format!("could not start a redis-server: {last}"))
    }

    /// Kills the node (if running) and starts it again on the same port,
    /// with the same directory (its AOF, a Sentinel's rewritten config).
    ///
    /// # Panics
    ///
    /// When it does not answer within 10 s of retries.
    pub(crate) fn restart(&mut self) {
        self.stop();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            self.spawn().expect("respawn redis-server");
            let child = self.child.as_mut().expect("just spawned");
            match wait_until_up(self.port, child) {
                Ok(()) => return,
                Err(e) if Instant::now() < deadline => {
                    eprintln!("restart retry: {e}");
                    self.stop();
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => panic!("restart failed: {e}\n{}", self.log()),
            }
        }
    }

    /// True while the process runs (it may be paused).
    pub(crate) fn is_running(&self) -> bool {
        self.child.is_some()
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("redis.log")
    }

    fn clock_file(&self) -> PathBuf {
        self.dir.path().join("faketime")
    }

    /// Steps the node's wall clock `by` further forward (whole seconds, as
    /// libfaketime reads them). The server reads the file at every clock
    /// read, so the step takes effect at once.
    pub(crate) fn jump_clock(&mut self, by: Duration) {
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

    pub(crate) fn spawn(&mut self) -> std::io::Result<()> {
        let mut cmd = Command::new(&self.binary);
        if let Mode::Sentinel { conf } = &self.mode {
            // The config file comes first; a restart keeps the rewritten one.
            let path = self.dir.path().join("sentinel.conf");
            if !path.exists() {
                std::fs::write(&path, conf)?;
            }
            cmd.arg(path);
        }
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
        if !matches!(self.mode, Mode::Sentinel { .. }) {
            // A master sends its data to a new replica at once, instead of
            // waiting 5 s for more replicas to share the transfer.
            cmd.args(["--repl-diskless-sync-delay", "0"]);
        }
        match &self.mode {
            Mode::Data => {}
            Mode::Cluster { node_timeout } => {
                cmd.args(["--cluster-enabled", "yes", "--cluster-config-file"])
                    .arg(self.dir.path().join("nodes.conf"))
                    .arg("--cluster-node-timeout")
                    .arg(node_timeout.as_millis().to_string())
                    // `CLUSTER SLOTS` lists a replica once its replication
                    // offset is not 0: with no writes, after the master's
                    // first replication ping (every 10 s by default).
                    .args(["--repl-ping-replica-period", "1"]);
                if self.tls_port.is_some() {
                    // The bus and replication over TLS; the bus stays on
                    // the plain port + 10000 (which `cluster_port` found
                    // free) instead of the TLS port's. Plain connections
                    // are told the plain ports, TLS ones the TLS ports.
                    cmd.args(["--tls-cluster", "yes", "--tls-replication", "yes"])
                        .arg("--cluster-port")
                        .arg((self.port + 10_000).to_string());
                }
            }
            Mode::Sentinel { .. } => {
                cmd.arg("--sentinel");
            }
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

    pub(crate) fn signal(&self, sig: &str) {
        if let Some(pid) = self.pid() {
            let status = Command::new("kill")
                .args([sig, &pid.to_string()])
                .status()
                .expect("run kill");
            assert!(status.success(), "kill {sig} {pid} failed");
        }
    }

    pub(crate) fn stop(&mut self) {
        // SIGKILL ends a stopped process as it is: no `SIGCONT` first,
        // which would let it answer what was queued while it was paused.
        self.paused = false;
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_else(|e| format!("(no log: {e})"))
    }

    /// The log under a header line naming the node as `label`.
    pub(crate) fn titled_log(&self, label: &str) -> String {
        format!(
            "----- {label} (port {}, {}) log -----\n{}\n",
            self.port,
            self.binary,
            self.log()
        )
    }
}

impl Drop for LocalNode {
    fn drop(&mut self) {
        self.stop();
    }
}

pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind an ephemeral port")
}

/// A free port whose cluster bus port (10000 higher) exists and is free.
fn cluster_port() -> u16 {
    for _ in 0..100 {
        let port = free_port();
        if port <= u16::MAX - 10_000 && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
    }
    panic!("no free port pair (port, port + 10000) for a cluster node")
}

/// A side connection to the server on `port` (1 s to connect, 2 s per reply).
pub(crate) fn connect(port: u16) -> redis::RedisResult<redis::Connection> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}"))?;
    let conn = client.get_connection_with_timeout(Duration::from_secs(1))?;
    conn.set_read_timeout(Some(Duration::from_secs(2)))?;
    conn.set_write_timeout(Some(Duration::from_secs(2)))?;
    Ok(conn)
}

/// The first word of `ROLE` on `port` (`master`, `slave`, `sentinel`); None
/// when it does not answer.
pub(crate) fn role(port: u16) -> Option<String> {
    let reply: Vec<redis::Value> = redis::cmd("ROLE").query(&mut connect(port).ok()?).ok()?;
    match reply.first()? {
        redis::Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        redis::Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

/// `field` of `INFO <section>` on `port`; None when absent or unreachable.
pub(crate) fn info_field(port: u16, section: &str, field: &str) -> Option<String> {
    let info: String = redis::cmd("INFO")
        .arg(section)
        .query(&mut connect(port).ok()?)
        .ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .map(|v| v.trim().to_owned())
}

/// True when `port` is a replica of `master` whose link is up.
pub(crate) fn replicates(port: u16, master: u16) -> bool {
    info_field(port, "replication", "master_port") == Some(master.to_string())
        && info_field(port, "replication", "master_link_status").as_deref() == Some("up")
}

/// How long a starting node may take to answer (an AOF replay on a loaded
/// machine included).
const UP_WITHIN: Duration = Duration::from_secs(30);

pub(crate) fn wait_until_up(port: u16, child: &mut Child) -> Result<(), String> {
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
