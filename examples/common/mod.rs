//! Nodes for the examples: `QUORUMLOCK_NODES` when set; otherwise five
//! local `redis-server` processes on free ports for the example's duration.
#![allow(dead_code)]

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Nodes for an example; local ones stop when this is dropped.
pub struct Nodes {
    pub urls: Vec<String>,
    children: Vec<Child>,
    _dir: Option<tempfile::TempDir>,
}

impl Nodes {
    /// `QUORUMLOCK_NODES` (comma-separated URLs) if set, else five local
    /// nodes when `redis-server` is on PATH, else a message saying how to
    /// get nodes.
    pub fn get() -> Result<Self, String> {
        if let Ok(list) = std::env::var("QUORUMLOCK_NODES") {
            let urls: Vec<String> = list
                .split(',')
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
                .collect();
            if !urls.is_empty() {
                return Ok(Self {
                    urls,
                    children: Vec::new(),
                    _dir: None,
                });
            }
        }
        Self::start_local(5)
    }

    fn start_local(n: usize) -> Result<Self, String> {
        let found = Command::new("redis-server")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok();
        if !found {
            return Err("no Redis nodes: set QUORUMLOCK_NODES=redis://host:port,... \
                        (e.g. after `docker/cluster.sh up`: QUORUMLOCK_NODES=$(docker/cluster.sh nodes)), \
                        or install redis-server (scripts/setup.sh) so the example can start five local nodes"
                .to_owned());
        }
        let dir = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
        let mut nodes = Self {
            urls: Vec::new(),
            children: Vec::new(),
            _dir: None,
        };
        for i in 0..n {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map(|a| a.port())
                .map_err(|e| format!("free port: {e}"))?;
            let node_dir = dir.path().join(format!("node{i}"));
            std::fs::create_dir_all(&node_dir).map_err(|e| format!("{e}"))?;
            let child = Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
                .arg("--dir")
                .arg(&node_dir)
                .arg("--logfile")
                .arg(node_dir.join("redis.log"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("start redis-server: {e}"))?;
            nodes.children.push(child);
            nodes.urls.push(format!("redis://127.0.0.1:{port}"));
        }
        nodes._dir = Some(dir);
        for url in &nodes.urls {
            wait_up(url)?;
        }
        Ok(nodes)
    }

    /// The URLs joined for `QUORUMLOCK_NODES`.
    pub fn env_value(&self) -> String {
        self.urls.join(",")
    }
}

fn wait_up(url: &str) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let client = redis::Client::open(url).map_err(|e| e.to_string())?;
    while Instant::now() < deadline {
        if let Ok(mut c) = client.get_connection_with_timeout(Duration::from_millis(200)) {
            if redis::cmd("PING").query::<String>(&mut c).is_ok() {
                return Ok(());
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(format!("{url} did not come up within 10 s"))
}

impl Drop for Nodes {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Seconds since `start`, for log lines.
pub fn stamp(start: Instant) -> String {
    format!("[{:>6.3}s]", start.elapsed().as_secs_f64())
}
