//! The one quorum operation: send a command to every node at once, count
//! the replies as they arrive, and decide at the earliest moment — success
//! at the `needed`-th yes, failure as soon as that has become impossible,
//! or no decision once a deadline passed. Whatever is still in flight at
//! that moment goes on in the background (the commands still reach their
//! nodes) and is never waited for.
//!
//! Acquire, the fencing-token commit, extend, release, the remote check,
//! the status read and the first connection are all uses of [`quorum`];
//! they differ only in the command sent, in how a reply votes, and in how
//! many yes votes they need.

use std::future::Future;
use std::time::Instant;

use futures::stream::{FuturesUnordered, StreamExt};
use tracing::debug;

use crate::background::Background;
use crate::error::NodeFailure;
use crate::node::{Node, NodeResult};
use crate::quorum::{Decision, Tally, Vote};

/// When a fan-out is decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Yes votes that decide success (a majority, or every node to hear
    /// from all of them).
    pub(crate) needed: usize,
    /// After this instant the fan-out stops undecided; `None` waits for
    /// the nodes' own timeouts.
    pub(crate) until: Option<Instant>,
}

/// How a fan-out ended.
#[derive(Debug)]
pub(crate) struct Outcome<T> {
    /// The votes counted.
    pub(crate) tally: Tally,
    /// `None` when `until` passed before the outcome was known.
    pub(crate) decision: Option<Decision>,
    /// The replies counted, as (node index, reply), in arrival order.
    pub(crate) replies: Vec<(usize, T)>,
    /// The nodes that failed before the decision, and why.
    pub(crate) failures: Vec<NodeFailure>,
}

impl<T> Outcome<T> {
    /// A quorum said yes in time.
    pub(crate) fn reached(&self) -> bool {
        self.decision == Some(Decision::Reached)
    }
}

/// Sends `send(i, node)` to every node and decides per `plan`, each reply
/// voting as `vote` says (a failure always votes [`Vote::Failed`]).
///
/// `send` builds each node's future before anything is awaited; the
/// futures must own what they use (`'static`), since those still running
/// at the decision are handed to `background`.
///
/// # Cancel safety
///
/// Dropping this future hands the unfinished per-node futures to
/// `background` too: every command still reaches its node.
pub(crate) async fn quorum<T, F, Fut>(
    nodes: &[Node],
    background: &Background,
    plan: Plan,
    mut send: F,
    mut vote: impl FnMut(usize, &T) -> Vote,
) -> Outcome<T>
where
    F: FnMut(usize, &Node) -> Fut,
    Fut: Future<Output = NodeResult<T>> + Send + 'static,
    T: Send + 'static,
{
    let mut gather = Gather::new(
        background.clone(),
        nodes.iter().enumerate().map(|(i, node)| {
            let reply = send(i, node);
            async move { (i, reply.await) }
        }),
    );
    let mut outcome = Outcome {
        tally: Tally::new(nodes.len(), plan.needed),
        decision: None,
        replies: Vec::with_capacity(nodes.len()),
        failures: Vec::new(),
    };
    let count = async {
        if let Some(decision) = outcome.tally.decision() {
            return Some(decision); // nothing needed: the rest is background work
        }
        while let Some((i, reply)) = gather.next().await {
            let v = match reply {
                Ok(reply) => {
                    let v = vote(i, &reply);
                    outcome.replies.push((i, reply));
                    v
                }
                Err(failure) => {
                    debug!(%failure, "node failed");
                    outcome.failures.push(failure);
                    Vote::Failed
                }
            };
            if let Some(decision) = outcome.tally.record(v) {
                return Some(decision);
            }
        }
        outcome.tally.decision()
    };
    let decision = match plan.until {
        Some(until) => tokio::time::timeout_at(until.into(), count)
            .await
            .ok()
            .flatten(),
        None => count.await,
    };
    outcome.decision = decision;
    outcome
}

/// Per-node futures driven together. Dropping a `Gather` (because the
/// outcome is decided, or because the caller was cancelled) hands the
/// unfinished futures to the background registry, so every command still
/// reaches its node and nothing waits for the slow ones. (The redis crate's
/// multiplexed connection skips a queued command whose reply future was
/// dropped before its connection task wrote it: the futures must live on.)
///
/// Generic over the future type rather than boxed: a lock cycle builds
/// two of these over five nodes, and each box is an allocation.
struct Gather<F>
where
    F: Future + Send + 'static,
    F::Output: Send,
{
    /// Taken by `drop`.
    pending: Option<FuturesUnordered<F>>,
    background: Background,
}

impl<F> Gather<F>
where
    F: Future + Send + 'static,
    F::Output: Send,
{
    fn new(background: Background, futures: impl IntoIterator<Item = F>) -> Self {
        Self {
            pending: Some(futures.into_iter().collect()),
            background,
        }
    }

    async fn next(&mut self) -> Option<F::Output> {
        self.pending.as_mut()?.next().await
    }
}

impl<F> Drop for Gather<F>
where
    F: Future + Send + 'static,
    F::Output: Send,
{
    fn drop(&mut self) {
        let Some(mut pending) = self.pending.take().filter(|p| !p.is_empty()) else {
            return;
        };
        self.background
            .spawn(async move { while pending.next().await.is_some() {} });
    }
}
