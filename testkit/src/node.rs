//! One local `redis-server` (or Valkey) process: how it is started,
//! signalled, stopped and read back (its log).

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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
        if self.paused {
            self.signal("-CONT");
            self.paused = false;
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_else(|e| format!("(no log: {e})"))
    }
}

pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind an ephemeral port")
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
