//! Seeded rounds of the race between a repair and the release: in each
//! round a holder's key is lost on one node of three (as a restart without
//! persistence would), that node's replies are slowed by a random delay,
//! the holder extends (so that node answers "missing", early or late) and
//! releases at once. Once the client settled, the key must be on no node:
//! a repair that a late "missing" started must never land behind the
//! release (`docs/repair.md`, rule 5).
//!
//! The caller writes the round (take, extend or wait for a renewal,
//! release); [`Races`] draws the faults and checks what is left.

use std::time::Duration;

use quorumlock::Redlock;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::{report, Cluster, Direction};

/// Longest delay drawn for the slow node's replies: past a release's
/// round trip on the other nodes, so that "missing" often arrives after it.
const MAX_DELAY: Duration = Duration::from_millis(150);

/// One round's draw.
#[derive(Debug, Clone, Copy)]
pub struct Draw {
    /// The node that loses the key and answers late.
    pub node: usize,
    /// How late its replies are.
    pub delay: Duration,
}

/// Three local nodes behind proxies, a client whose node timeout lets a
/// slowed reply still count, and the seeded draws.
pub struct Races {
    /// The nodes.
    pub cluster: Cluster,
    /// The client under test.
    pub redlock: Redlock,
    rng: StdRng,
    seed: u64,
    rounds: u64,
    slow_rounds: u64,
}

impl Races {
    /// Starts the nodes and the client, seeded for `test` (printed).
    pub async fn new(test: &str) -> Self {
        let seed = crate::seed(test);
        let mut cluster = Cluster::local(3);
        let redlock = cluster
            .proxied_builder()
            .node_timeout(Duration::from_secs(2))
            .build()
            .await
            .expect("build");
        Self {
            cluster,
            redlock,
            rng: StdRng::seed_from_u64(seed),
            seed,
            rounds: 0,
            slow_rounds: 0,
        }
    }

    /// Loses `key` on a random node and slows that node's replies; the
    /// round's draw.
    pub fn lose(&mut self, key: &str) -> Draw {
        let draw = Draw {
            node: self.rng.random_range(0..3),
            delay: Duration::from_millis(self.rng.random_range(0..=MAX_DELAY.as_millis() as u64)),
        };
        let _: () = self.cluster.exec(draw.node, redis::cmd("DEL").arg(key));
        self.cluster
            .proxy(draw.node)
            .delay(Direction::Replies, draw.delay);
        draw
    }

    /// After the round's release: waits for the client's background work,
    /// lifts the delay, and asserts that none of `keys` is on any node.
    pub async fn check(&mut self, keys: &[&str], draw: Draw) {
        assert!(
            self.redlock.settle(Duration::from_secs(10)).await,
            "background work never ended (seed {})",
            self.seed
        );
        self.cluster
            .proxy(draw.node)
            .delay(Direction::Replies, Duration::ZERO);
        self.rounds += 1;
        if draw.delay > Duration::from_millis(20) {
            self.slow_rounds += 1;
        }
        for key in keys {
            let left: Vec<usize> = self
                .cluster
                .values(key.as_bytes())
                .iter()
                .enumerate()
                .filter_map(|(i, v)| v.as_ref().map(|_| i))
                .collect();
            assert!(
                left.is_empty(),
                "round {}: {key} left on nodes {left:?} after the release \
                 (lost on node {}, its replies {:?} late; replay with QUORUMLOCK_SEED={})\n{}",
                self.rounds,
                draw.node,
                draw.delay,
                self.seed,
                self.cluster.logs()
            );
        }
    }

    /// Prints the run's summary line.
    pub fn report(&self, test: &str) {
        report(&format!(
            "{test}: seed={} rounds={} rounds_slowed_over_20ms={} keys_left_after_release=0",
            self.seed, self.rounds, self.slow_rounds
        ));
    }
}
