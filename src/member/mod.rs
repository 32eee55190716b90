//! A member of the quorum: one vote, cast by a single server, a Sentinel
//! group's master or a Redis Cluster's masters. Where its commands go
//! ([`route`]: one server, a group's master found by [`sentinel`], a
//! cluster's master per hash slot in [`cluster`]), each server's
//! connection ([`link`], replaced when it dies), restart quarantine
//! ([`quarantine`], the state; [`standing`], its readings), and what it
//! does on every server ([`servers`]). What it is asked and how one vote
//! travels to its server and back: [`vote`].

pub(crate) mod cluster;
pub(crate) mod link;
pub(crate) mod quarantine;
pub(crate) mod route;
pub(crate) mod sentinel;
mod servers;
mod standing;
mod vote;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use redis::Cmd;

use crate::config::{Config, Durability};
use crate::error::{NodeFailure, NodeFailureKind};
use crate::member::link::Target;
use crate::member::route::Route;
use crate::node::admission::{self, Gate};
use crate::stats::counters::NodeCounters;

/// A member of the quorum: one vote, cast by a single server, a Sentinel
/// group's master or a Redis Cluster's masters ([`Route`]).
///
/// Commands travel to each server over one multiplexed connection
/// ([`Shard`](crate::member::link::Shard)), in order.
/// That order is what lets a release sent after a stuck `SET` remove the
/// key the `SET` creates when the node wakes up. The connection is never
/// torn down for a slow reply (no response timeout inside it); the
/// fan-out's deadline only stops *waiting*.
///
/// Cheap to clone: one shared handle (every per-node future of a fan-out
/// holds a clone, so a clone is one reference count, not one per field).
#[derive(Clone)]
pub(crate) struct Node(Arc<Shared>);

/// What the clones of a node share.
pub(crate) struct Shared {
    label: Box<str>,
    route: Route,
    /// What every connection of the member must show before it is used,
    /// and why the last was refused.
    gate: Arc<Gate>,
    /// With restart quarantine: how long a (re)started server stays out,
    /// and the probe sent behind each vote (`INFO server`: its `run_id`).
    quarantine: Option<(Duration, Cmd)>,
    /// With durable votes: what a yes must reach to count.
    durable: Option<Durability>,
    counters: NodeCounters,
    /// Whether the node has refused a release announcement (said once).
    announce_refused: AtomicBool,
    /// Whether the node has refused the waiter queue's scripts (said once).
    queue_refused: AtomicBool,
}

impl std::ops::Deref for Node {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node").field("label", &self.label).finish()
    }
}

/// A node's answer to an extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Extended {
    /// The key carries the token and lives at least the new TTL.
    Yes,
    /// Another token holds the key: never repaired.
    Theirs,
    /// The key is missing: repaired if the extension is confirmed in time.
    Missing,
}

/// A node's reply, or why there was none.
pub(crate) type NodeResult<T> = Result<T, NodeFailure>;

impl Node {
    /// The member `label` reached through `route`, its connections
    /// admitted by `gate`; with `config`'s restart quarantine, every vote
    /// is checked to come from the server whose uptime was read, and a
    /// server up for less does not vote; with its durable votes (for a
    /// member that fails over only), a yes counts once its write reached
    /// what it asks.
    pub(crate) fn new(label: &str, route: Route, gate: Arc<Gate>, config: &Config) -> Self {
        let durable = config.durable.filter(|_| gate.fails_over());
        let quarantine = config.restart_quarantine;
        Self(Arc::new(Shared {
            label: label.into(),
            route,
            gate,
            quarantine: quarantine.map(|q| (q, admission::info("server"))),
            durable,
            counters: NodeCounters::new(label),
            announce_refused: AtomicBool::new(false),
            queue_refused: AtomicBool::new(false),
        }))
    }

    /// `host:port/db`.
    pub(crate) fn label(&self) -> &str {
        &self.label
    }

    /// This node's counters, shared by its clones.
    pub(crate) fn counters(&self) -> &NodeCounters {
        &self.counters
    }

    /// Why this client refused the node's last connection, if it did.
    pub(crate) fn refused(&self) -> Option<NodeFailureKind> {
        self.gate.refused()
    }

    /// Whether the member's master can be replaced by a replica (a
    /// Sentinel group, a Redis Cluster): durable votes apply to it.
    pub(crate) fn fails_over(&self) -> bool {
        self.gate.fails_over()
    }

    /// Where connections of other kinds (subscriptions) go.
    pub(crate) fn target(&self) -> Target {
        self.route.target()
    }
}
