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
//! Two topologies of real processes stand beside it for the server-side
//! replication modes: [`SentinelGroup`] (a master, its replicas and the
//! Sentinels watching them; `SENTINEL FAILOVER` on demand) and
//! [`ShardedCluster`] (a Redis Cluster; slot migrations, whole or held
//! half-way, and replica promotions on demand).
//!
//! Fault tools live beside it: [`proxy`] (latency, blackhole, reset, slow
//! replies in front of each node, see [`Cluster::proxied`]; scripted holds
//! and delays per direction and per link, see [`Cluster::links`]),
//! [`inject`] (early expiry and per-node error replies on real servers),
//! [`nemesis`] (seeded fault schedules), [`cancel`] (futures dropped
//! mid-flight), [`checker`] (the safety history), [`announce`] (release
//! announcements sent by the test), [`admission`] (holders
//! counted against a semaphore's bound) and [`races`] (repairs racing
//! releases); [`safety`] runs a randomized
//! fault run of a load: locks ([`workload`]), permits ([`permits`]), the
//! sides of a read–write lock ([`rwlock`]) or leaderships ([`leaders`]),
//! each played by one driver of turns ([`turns`]); [`failovers`] runs that load on Sentinel
//! groups as members, failing them over.
//!
//! Inside: `cluster.rs` (the [`Cluster`]), `sentinel.rs` and `shards.rs`
//! (the topologies), `node.rs` (one server process),
//! `env.rs` (the binaries and variables the harness reads), `client.rs`
//! (builders for a cluster, and [`OneAttempt`]), `logs.rs` (captured
//! tracing output); the crate's own tests are in `testkit/tests/`.
//!
//! The crate is a dev-dependency of `quorumlock` (its tests, benches and
//! examples) and of `quorumlock-cli` (its tests); it is never published.
//! Suites import it as `use quorumlock_testkit as support;`.
#![warn(missing_docs)]

pub mod admission;
pub mod announce;
pub mod cancel;
pub mod checker;
mod client;
mod cluster;
mod env;
pub mod failovers;
pub mod inject;
pub mod leaders;
pub mod logs;
pub mod nemesis;
mod node;
pub mod permits;
pub mod proxy;
pub mod races;
pub mod rwlock;
pub mod safety;
mod sentinel;
mod shards;
pub mod sticky;
pub mod turns;
pub mod workload;

use std::time::{Duration, Instant};

pub use client::{OneAttempt, EXTERNAL_NODE_TIMEOUT};
pub use cluster::Cluster;
pub use env::{
    server_binary, valkey_binary, valkey_clock_options, ALLOW_NO_VALKEY_ENV, LIBFAKETIME_ENV,
    NODES_ENV, SERVERS_ENV, SERVER_ENV, VALKEY_ENV,
};
pub use node::{LocalNode, NodeOptions};
pub use proxy::{Direction, Fault, FaultHandle, Links, Proxy};
pub use sentinel::{GroupOptions, SentinelGroup};
pub use shards::{ShardedCluster, SlotMigration};

/// Writes one line to the real stderr, past the test harness' capture, so
/// figures show in CI logs of passing tests too.
pub fn report(line: &str) {
    use std::io::Write as _;
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{line}");
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
