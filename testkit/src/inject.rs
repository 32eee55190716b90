//! Faults made on real servers through side connections: early expiry (a
//! forward clock jump on one node) and the error replies a node can give —
//! `WRONGTYPE`, `NOSCRIPT`, `OOM`, `BUSY`, `NOAUTH`/`WRONGPASS`, `READONLY`.
//!
//! Each injection has its heal. They act on node `i` of a [`Cluster`] and
//! work on external nodes too (no process control needed).

use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::Cluster;

/// A Lua busy loop running on one node (see [`Cluster::busy`]). Heal it
/// with [`Busy::heal`]; dropping it heals too.
pub struct Busy {
    url: String,
    thread: Option<JoinHandle<()>>,
}

impl Busy {
    /// `SCRIPT KILL` (retried until the script is gone) and waits for the
    /// side connection that ran it.
    pub fn heal(mut self) {
        self.kill();
    }

    fn kill(&mut self) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !thread.is_finished() && Instant::now() < deadline {
            if let Ok(mut c) = side(&self.url) {
                let _: redis::RedisResult<()> = redis::cmd("SCRIPT").arg("KILL").query(&mut c);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = thread.join();
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.kill();
    }
}

fn side(url: &str) -> redis::RedisResult<redis::Connection> {
    let c = redis::Client::open(url)?.get_connection_with_timeout(Duration::from_secs(2))?;
    c.set_read_timeout(Some(Duration::from_secs(2)))?;
    Ok(c)
}

impl Cluster {
    fn config_set(&self, i: usize, name: &str, value: &str) {
        let _: () = self.exec(i, redis::cmd("CONFIG").arg("SET").arg(name).arg(value));
    }

    /// Emulates node `i`'s wall clock jumping past the key's expiry: the key
    /// disappears there and nowhere else. True when it existed.
    pub fn expire_early(&self, i: usize, key: &[u8]) -> bool {
        let n: i64 = self.exec(i, redis::cmd("DEL").arg(key));
        n == 1
    }

    /// A smaller jump: the key's remaining life on node `i` becomes `left`.
    pub fn shorten_ttl(&self, i: usize, key: &[u8], left: Duration) -> bool {
        let ms = u64::try_from(left.as_millis()).unwrap_or(u64::MAX).max(1);
        let n: i64 = self.exec(i, redis::cmd("PEXPIRE").arg(key).arg(ms));
        n == 1
    }

    /// `WRONGTYPE` for scripts on `key`: replaces it with a hash on node `i`.
    pub fn plant_hash(&self, i: usize, key: &[u8]) {
        let _: () = redis::pipe()
            .cmd("DEL")
            .arg(key)
            .ignore()
            .cmd("HSET")
            .arg(key)
            .arg("planted")
            .arg("by-test")
            .ignore()
            .query(&mut self.conn(i))
            .expect("plant a hash");
    }

    /// `NOSCRIPT` for the next `EVALSHA`.
    pub fn flush_scripts(&self, i: usize) {
        let _: () = self.exec(i, redis::cmd("SCRIPT").arg("FLUSH"));
    }

    /// `OOM` for writes: `maxmemory 1` with `noeviction`.
    pub fn oom(&self, i: usize) {
        self.config_set(i, "maxmemory-policy", "noeviction");
        self.config_set(i, "maxmemory", "1");
    }

    /// Undoes [`Cluster::oom`].
    pub fn heal_oom(&self, i: usize) {
        self.config_set(i, "maxmemory", "0");
    }

    /// `BUSY`: starts a Lua busy loop on node `i` from a side connection,
    /// with the busy threshold lowered to 10 ms, and returns once other
    /// clients get `BUSY` replies.
    ///
    /// # Panics
    ///
    /// When the node does not turn busy within 5 s.
    pub fn busy(&self, i: usize) -> Busy {
        // Redis 7 and Valkey name it `busy-reply-threshold`; Redis 6.2
        // knows only the older name.
        let threshold: redis::RedisResult<()> = redis::cmd("CONFIG")
            .arg("SET")
            .arg("busy-reply-threshold")
            .arg("10")
            .query(&mut self.conn(i));
        if threshold.is_err() {
            self.config_set(i, "lua-time-limit", "10");
        }
        let url = self.side_url(i);
        let mut conn = side(&url).expect("side connection");
        conn.set_read_timeout(None).expect("no read timeout");
        let thread = std::thread::spawn(move || {
            // Ends with an error reply when SCRIPT KILL stops it.
            let _: redis::RedisResult<()> = redis::cmd("EVAL")
                .arg("while true do end")
                .arg(0)
                .query(&mut conn);
        });
        let busy = Busy {
            url: url.clone(),
            thread: Some(thread),
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let reply: redis::RedisResult<Option<String>> =
                side(&url).and_then(|mut c| redis::cmd("GET").arg("busy-probe").query(&mut c));
            if matches!(&reply, Err(e) if e.code() == Some("BUSY")) {
                return busy;
            }
            assert!(Instant::now() < deadline, "node {i} never turned busy");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// `NOAUTH` for connections made from now on without a password
    /// (connections already open stay authenticated).
    pub fn require_pass(&self, i: usize, password: &str) {
        self.config_set(i, "requirepass", password);
    }

    /// Undoes [`Cluster::require_pass`].
    pub fn heal_pass(&self, i: usize, password: &str) {
        let url = self
            .side_url(i)
            .replacen("redis://", &format!("redis://:{password}@"), 1);
        let mut c = side(&url).expect("side connection with the password");
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("requirepass")
            .arg("")
            .query(&mut c)
            .expect("clear requirepass");
    }

    /// `READONLY`: node `i` becomes a replica of `primary` (a `host:port`
    /// outside this cluster, so no lock keys are copied in).
    pub fn make_replica(&self, i: usize, primary: std::net::SocketAddr) {
        let _: () = self.exec(
            i,
            redis::cmd("REPLICAOF")
                .arg(primary.ip().to_string())
                .arg(primary.port()),
        );
    }

    /// Undoes [`Cluster::make_replica`].
    pub fn heal_replica(&self, i: usize) {
        let _: () = self.exec(i, redis::cmd("REPLICAOF").arg("NO").arg("ONE"));
    }

    /// Keys matching `pattern` on node `i` (None when it cannot be asked).
    pub fn keys(&self, i: usize, pattern: &str) -> Option<Vec<Vec<u8>>> {
        let mut c = side(&self.side_url(i)).ok()?;
        redis::cmd("KEYS").arg(pattern).query(&mut c).ok()
    }

    /// Keys matching `pattern` summed over every node.
    pub fn count_keys(&self, pattern: &str) -> usize {
        (0..self.len())
            .filter_map(|i| self.keys(i, pattern))
            .map(|k| k.len())
            .sum()
    }

    /// The plain `host:port` of node `i` (for `REPLICAOF`).
    pub fn side_addr(&self, i: usize) -> std::net::SocketAddr {
        let url = self.side_url(i);
        let rest = url.split_once("://").map_or(url.as_str(), |(_, r)| r);
        let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
        let hostport = rest.split('/').next().unwrap_or(rest);
        std::net::ToSocketAddrs::to_socket_addrs(hostport)
            .expect("resolve node")
            .next()
            .expect("node address")
    }
}
