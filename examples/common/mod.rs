//! Nodes for the examples: `QUORUMLOCK_NODES` when set; otherwise five
//! local `redis-server` processes, started by the test harness
//! (`quorumlock-testkit`), for the example's duration.
// Each example uses only part of this module.
#![allow(dead_code)]

use std::time::Instant;

use quorumlock_testkit::{Cluster, NodeOptions};

/// Nodes for an example; local ones stop when this is dropped.
pub struct Nodes {
    pub urls: Vec<String>,
    _cluster: Cluster,
}

impl Nodes {
    /// `QUORUMLOCK_NODES` (comma-separated URLs) if set, else five local
    /// nodes when `redis-server` is on PATH, else a message saying how to
    /// get nodes.
    pub fn get() -> Result<Self, String> {
        let from_env: Vec<String> = std::env::var("QUORUMLOCK_NODES")
            .unwrap_or_default()
            .split(',')
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect();
        let cluster = if from_env.is_empty() {
            Cluster::try_local(5, &NodeOptions::default()).map_err(|e| {
                format!(
                    "no Redis nodes: set QUORUMLOCK_NODES=redis://host:port,... \
                     (e.g. after `docker/cluster.sh up`: QUORUMLOCK_NODES=$(docker/cluster.sh nodes)), \
                     or install redis-server (scripts/setup.sh) so the example can start five local nodes \
                     ({e})"
                )
            })?
        } else {
            Cluster::external(from_env)
        };
        Ok(Self {
            urls: cluster.urls(),
            _cluster: cluster,
        })
    }

    /// The URLs joined for `QUORUMLOCK_NODES`.
    pub fn env_value(&self) -> String {
        self.urls.join(",")
    }
}

/// Seconds since `start`, for log lines.
pub fn stamp(start: Instant) -> String {
    format!("[{:>6.3}s]", start.elapsed().as_secs_f64())
}
