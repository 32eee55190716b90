//! The reads: what the nodes hold for some keys, read-only — a waiter's
//! look at one node picked at random, the name of the resource found held,
//! and [`Redlock::status`](crate::Redlock::status) on every node.

use std::sync::Arc;

use crate::error::ResourceName;
use crate::keys::Keys;
use crate::member::Node;
use crate::node::commands::Command;
use crate::node::reply::Vote;
use crate::quorum::engine::Engine;
use crate::quorum::fanout::Plan;
use crate::quorum::rule;
use crate::random;
use crate::status::{NodeView, Status};

impl Engine {
    /// The resource to name when an attempt on `keys` was refused: for a
    /// lock over several resources, the first one a node picked at random
    /// sees set, not the first one listed (that one may be free); the
    /// first resource when none is seen set.
    pub(crate) async fn held_resource(&self, keys: &Keys) -> ResourceName {
        if !keys.is_multi() {
            return keys.name();
        }
        let views = self.look(keys).await;
        keys.slices()
            .zip(views)
            .find(|(_, view)| matches!(view, NodeView::Held { .. }))
            .map_or_else(|| keys.name(), |(key, _)| ResourceName::new(key))
    }

    /// Every key of `keys` on one node picked at random (from the OS:
    /// forked workers do not all look at the same node).
    pub(crate) async fn look(&self, keys: &Keys) -> Vec<NodeView> {
        let node = &self.nodes[random::below(self.nodes.len())];
        let one: Arc<[Node]> = Arc::new([node.clone()]);
        let resources = keys.resources();
        let views = self
            .views(&one, Command::peek(resources), resources.len())
            .await;
        views.into_iter().flatten().collect()
    }

    /// Reads the resource's key on every node, in parallel.
    pub(crate) async fn status(&self, resource: &[u8]) -> Status {
        let command = Command::peek(&[resource.to_vec()]);
        let views = self.views(&self.nodes, command, 1).await;
        self.status_of(&views, 0, resource)
    }

    /// Reads each of `keys` on every node, in parallel: one status per key.
    pub(crate) async fn statuses(&self, keys: Arc<[Vec<u8>]>) -> Vec<Status> {
        let views = self
            .views(&self.nodes, Command::peek(&keys), keys.len())
            .await;
        let status = |(k, key): (usize, &Vec<u8>)| self.status_of(&views, k, key);
        keys.iter().enumerate().map(status).collect()
    }

    /// A read–write lock on every node, in parallel, as two statuses of
    /// its resource: its writer's (the resource's value, but for the
    /// readers' marker) and its readers' (each node's view holds the
    /// count of live readers as its value, until the last ends).
    pub(crate) async fn read_write(&self, keys: &Keys) -> Vec<Status> {
        let name = keys.first();
        let Some(side) = keys.side() else {
            return Vec::new();
        };
        let command = Command::read_write_peek(name, side);
        let views = self.views(&self.nodes, command, 2).await;
        (0..2).map(|k| self.status_of(&views, k, name)).collect()
    }

    /// The status of `key`, the `k`th key of every node's `views`.
    fn status_of(&self, views: &[Vec<NodeView>], k: usize, key: &[u8]) -> Status {
        let nodes = self.nodes.iter().zip(views);
        let nodes = nodes
            .filter_map(|(node, views)| Some((node.label().to_owned(), views.get(k)?.clone())));
        Status {
            resource: ResourceName::new(key),
            nodes: nodes.collect(),
            quorum: self.needed(),
        }
    }

    /// What each of `nodes` holds for each of the `count` keys `command`
    /// reads (read-only; every
    /// node in parallel, all the keys of a node in one script that answers
    /// for the keys set only, so that a semaphore of 1024 slots with few
    /// held is one short round trip), within [`rule::read_timeout`]: per node,
    /// one view per key. A node that does not answer in time, or fails, is
    /// [`NodeView::Failed`] for every key (a timeout counted once); a key
    /// a node cannot read (another type) is `Failed` on its own. The one read
    /// behind [`status`](Self::status) and a waiter's look.
    async fn views(
        &self,
        nodes: &Arc<[Node]>,
        command: Arc<Command>,
        count: usize,
    ) -> Vec<Vec<NodeView>> {
        let timeout = rule::read_timeout(self.config.node_timeout, count);
        let plan = Plan {
            nodes: nodes.clone(),
            ..self.everyone(timeout)
        };
        let call = |_, node: Node, command: Arc<Command>, window| async move {
            node.peek(&command, count, window).await
        };
        let vote = &mut |_, _: &Vec<NodeView>| Vote::Yes;
        let outcome = self.ask(plan, command, call, vote).await;
        // Waiting for everyone, each node answered or failed (a timeout at
        // the latest).
        let mut views = vec![Vec::new(); nodes.len()];
        for failure in outcome.failures {
            if let Some(i) = nodes.iter().position(|n| n.label() == failure.node) {
                views[i] = vec![NodeView::Failed(failure); count];
            }
        }
        for (i, answered) in outcome.replies {
            views[i] = answered;
        }
        views
    }
}
