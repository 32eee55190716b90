//! The engine behind a [`Redlock`](crate::Redlock): the client's shared
//! state — the nodes, the tuning, the lease counters, the background work —
//! and the error of an operation that reached no quorum. The operations
//! are beside it: the fan-out and its plans in [`crate::quorum::fanout`],
//! an acquire in [`crate::quorum::attempt`], those on a held lock in
//! [`crate::quorum::held`], the reads in [`crate::quorum::read`].

use std::sync::Arc;

use tracing::debug;

use crate::config::Config;
use crate::error::{Error, Operation, ResourceName};
use crate::keys::Keys;
use crate::member::Node;
use crate::node::reply::Vote;
use crate::quorum::background::Background;
use crate::quorum::fanout::Outcome;
use crate::quorum::handoff::Handoff;
use crate::quorum::rule;
use crate::stats::counters::LeaseCounters;
use crate::stats::Stats;

/// The nodes, the tuning, and the operations that go to all of them.
#[derive(Debug)]
pub(crate) struct Engine {
    pub(crate) nodes: Arc<[Node]>,
    pub(crate) config: Config,
    /// Release announcements for waiters, when fast hand-off is on.
    pub(crate) handoff: Option<Arc<Handoff>>,
    /// Renewal and lost-signal counters of every lock taken through this engine.
    pub(crate) leases: Arc<LeaseCounters>,
    /// Work left running after a call returned, for [`Redlock::settle`](crate::Redlock::settle).
    pub(crate) background: Background,
}

impl Engine {
    /// Whether `keys` can be taken on every member (a Redis Cluster
    /// takes a lock's keys in one hash slot).
    pub(crate) fn check_slot(&self, keys: &Keys) -> Result<(), Error> {
        self.nodes.iter().try_for_each(|node| node.check_slot(keys))
    }

    /// Votes a lock needs: a majority of the nodes.
    pub(crate) fn needed(&self) -> usize {
        rule::majority(self.nodes.len())
    }

    /// Opens every connection, waiting at most the connect timeout; a node
    /// that does not answer is not an error here (it may come up later).
    pub(crate) async fn connect_all(&self) {
        let call = |_, node: Node, _, window| async move {
            let connected = async {
                node.ping(window).await?;
                node.load_scripts(window).await?;
                // Reads the uptime now, so a fresh node is known before
                // the first acquire.
                node.check_standing(window).await
            };
            Ok(connected.await)
        };
        let plan = self.everyone(self.config.connect_timeout);
        let vote = &mut |_, _: &_| Vote::Yes;
        let outcome = self.ask(plan, Arc::new(()), call, vote).await;
        for (i, result) in outcome.replies {
            if let Err(failure) = result {
                debug!(node = %self.nodes[i].label(), %failure, "node not reachable yet");
            }
        }
    }

    /// A snapshot of every counter.
    pub(crate) fn stats(&self) -> Stats {
        let nodes = self.nodes.iter().map(|n| n.counters().snapshot());
        self.leases.stats(nodes.collect())
    }

    /// The error for an operation on a held lock that reached no quorum.
    pub(crate) fn unavailable<T>(
        &self,
        operation: Operation,
        resource: ResourceName,
        outcome: Outcome<T>,
    ) -> Error {
        Error::Unavailable {
            operation,
            resource,
            granted: outcome.tally.yes(),
            needed: outcome.tally.needed(),
            nodes: self.nodes.len(),
            attempts: 1,
            unanswered: outcome.tally.pending(),
            failures: outcome.failures,
        }
    }
}
