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

use std::future::Future;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use redis::{FromRedisValue, RedisError, Value};

use crate::config::Durability;
use crate::error::classify::classify;
use crate::error::{Error, NodeFailure, NodeFailureKind};
use crate::keys::Keys;
use crate::member::link::Target;
use crate::member::route::Route;
use crate::node::commands::Command;
use crate::node::Window;
use crate::stats::counters::NodeCounters;

/// A member of the quorum: one vote, cast by a single server, a Sentinel
/// group's master or a Redis Cluster's masters ([`Route`]).
///
/// Commands travel to each server over one multiplexed connection
/// ([`Link`](crate::member::link::Link)), in order.
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
    /// With restart quarantine: how long a (re)started server stays out,
    /// and the probe sent behind each vote (`INFO server`: its `run_id`).
    quarantine: Option<(Duration, Arc<Command>)>,
    /// With durable votes: what a yes must reach to count.
    durable: Option<Durability>,
    counters: NodeCounters,
    /// Whether the node has refused a release announcement (said once).
    announce_refused: AtomicBool,
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
    /// The member `label` reached through `route`; with `quarantine`,
    /// every vote is checked to come from the server whose uptime was
    /// read, and a server up for less does not vote; with `durable`, a
    /// yes counts once its write reached what it asks.
    pub(crate) fn new(
        label: &str,
        route: Route,
        quarantine: Option<Duration>,
        durable: Option<Durability>,
    ) -> Self {
        Self(Arc::new(Shared {
            label: label.into(),
            route,
            quarantine: quarantine.map(|q| (q, Command::server_info())),
            durable,
            counters: NodeCounters::new(label),
            announce_refused: AtomicBool::new(false),
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
        self.route.gate().refused()
    }

    /// Whether the member's master can be replaced by a replica (a
    /// Sentinel group, a Redis Cluster): durable votes apply to it.
    pub(crate) fn fails_over(&self) -> bool {
        self.route.gate().fails_over()
    }

    /// Whether this member can take `keys` at once: a Redis Cluster runs
    /// each lock's script on one hash slot, so the keys must share one.
    pub(crate) fn check_slot(&self, keys: &Keys) -> Result<(), Error> {
        if !matches!(self.route, Route::Cluster(_)) || keys.slot().is_some() {
            return Ok(());
        }
        Err(Error::invalid(format!(
            "the keys of {} span several hash slots, and member {} is a Redis Cluster, \
             which takes a lock's keys in one slot: give the resources one hash tag \
             (\"{{order:7}}:items\" and \"{{order:7}}:payment\" share the slot of \"order:7\"), \
             and no '}}' in a name without one",
            keys.name(),
            self.label
        )))
    }

    /// Where connections of other kinds (subscriptions) go.
    pub(crate) fn target(&self) -> Target {
        self.route.target()
    }

    /// The failure `e` after `latency`, counted — unless it is a cluster's
    /// redirection, which [`routed`](Self::routed) follows.
    fn failed_with(&self, e: RedisError, latency: Option<Duration>) -> NodeFailure {
        // A lost connection is the link's to report: it takes the
        // connection down, and the next one starts a new epoch.
        let refusal = self.route.gate().refusal(&e);
        let kind = refusal.unwrap_or_else(|| classify(&e, latency.unwrap_or_default()));
        self.route.failed(&e);
        if e.redirect_node().is_none() {
            self.counters.failed(&kind, latency);
        }
        self.failure(kind).caused_by(e)
    }

    /// A reply this client cannot read (counted as a protocol error).
    fn protocol(&self, what: String) -> NodeFailure {
        self.fail(NodeFailureKind::Protocol(what))
    }

    /// The failure `kind`, counted (without a latency).
    fn fail(&self, kind: NodeFailureKind) -> NodeFailure {
        self.counters.failed(&kind, None);
        self.failure(kind)
    }

    /// A reply as `T` (an error reply as the error it is; anything else
    /// that does not read as `T`, a protocol error).
    fn parse<T: FromRedisValue>(&self, value: Value) -> NodeResult<T> {
        let read = value
            .extract_error()
            .and_then(|v| Ok(T::from_redis_value(v)?));
        read.map_err(|e| self.protocol(e.to_string()))
    }

    pub(crate) fn failure(&self, kind: NodeFailureKind) -> NodeFailure {
        NodeFailure::new(&*self.label, kind)
    }

    /// `work` on this node, given up at the end of `window`: a node that
    /// has not answered by then failed with a timeout. For work outside a
    /// fan-out (which bounds its nodes itself).
    pub(crate) async fn within<T>(
        &self,
        window: Window,
        work: impl Future<Output = NodeResult<T>>,
    ) -> NodeResult<T> {
        tokio::time::timeout_at(window.deadline.into(), work)
            .await
            .unwrap_or_else(|_| Err(self.failure(NodeFailureKind::Timeout(window.timeout))))
    }
}
