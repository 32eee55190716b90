//! The one fan-out: send a command to every node at once, count
//! the replies as they arrive, and decide at the earliest moment — success
//! at the `needed`-th yes, failure as soon as that has become impossible,
//! or no decision once a deadline passed. Whatever is still in flight at
//! that moment goes on in the background (the commands still reach their
//! nodes) and is never waited for.
//!
//! Acquire, the fencing-token commit, extend, release, the remote check,
//! the status read, the election's fan-outs and the first connection are
//! all uses of [`counted`]; they differ only in the command sent, in how a
//! reply votes and when that decides ([`Count`]), and in how many yes
//! votes they need.
//!
//! One timer per operation, not one per node: every node call shares the
//! operation's [`Window`]. A node that has not answered when it closes
//! counts as failed (a timeout); its call goes on in the background, where
//! a late reply is no longer counted as a reply.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::stream::{FuturesUnordered, StreamExt};
use tracing::debug;

use crate::error::lost::LostReason;
use crate::error::{NodeFailure, NodeFailureKind};
use crate::node::reply::Vote;
use crate::node::{Node, NodeResult, Window};
use crate::quorum::background::Background;
use crate::quorum::rule::{Decision, Tally};

/// How long a call still running after its operation's window may go on
/// in the background (a release queued on a hung node, for instance).
const STRAGGLER_LIMIT: Duration = Duration::from_secs(30);

/// The fan-out tracks nodes in one word: at most 64 of them.
const MAX_NODES: usize = crate::config::MAX_NODES;

/// When a fan-out is decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Yes votes that decide success (a majority, or every node to hear
    /// from all of them).
    pub(crate) needed: usize,
    /// How long each node may take to answer.
    pub(crate) timeout: Duration,
    /// After this instant the fan-out stops undecided, whoever has
    /// answered; `None` for no such limit.
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
    /// The nodes that failed before the decision (timeouts included), and
    /// why.
    pub(crate) failures: Vec<NodeFailure>,
}

impl<T> Outcome<T> {
    /// A quorum said yes in time.
    pub(crate) fn reached(&self) -> bool {
        self.decision == Some(Decision::Reached)
    }

    /// Why a held lock is lost when this outcome (an extension's, a
    /// proclamation's) reached no quorum: its validity ran out first
    /// (undecided), or the nodes refused or failed ([`LostReason::no_quorum`]).
    pub(crate) fn lost(self) -> LostReason {
        let t = &self.tally;
        match self.decision {
            None => LostReason::Expired,
            Some(_) => LostReason::no_quorum(
                t.yes(),
                t.no(),
                t.failed() + t.pending(),
                t.needed(),
                self.failures,
            ),
        }
    }
}

/// A fan-out's `send` that hands `call` its own clones of the node and of
/// `command`, which the node's future owns (see [`ask`]).
pub(crate) fn each<C, F, Fut>(
    command: Arc<C>,
    mut call: F,
) -> impl FnMut(usize, &Node, Window) -> Fut
where
    F: FnMut(usize, Node, Arc<C>, Window) -> Fut,
{
    move |i, node, window| call(i, node.clone(), command.clone(), window)
}

/// Sends `send(i, node, window)` to every node and decides per `plan`,
/// each reply voting as `vote` says (a failure always votes
/// [`Vote::Failed`]), decided on the yes votes alone ([`Tally::decision`]).
///
/// `send` builds each node's future before anything is awaited; the
/// futures must own what they use (`'static`), since those still running
/// at the decision are handed to `background`.
///
/// # Cancel safety
///
/// Dropping this future hands the unfinished per-node futures to
/// `background` too: every command still reaches its node.
pub(crate) async fn ask<T, F, Fut>(
    nodes: &Arc<[Node]>,
    background: &Background,
    plan: Plan,
    send: F,
    vote: impl FnMut(usize, &T) -> Vote,
) -> Outcome<T>
where
    F: FnMut(usize, &Node, Window) -> Fut,
    Fut: Future<Output = NodeResult<T>> + Send + 'static,
    T: Send + 'static,
{
    counted(nodes, background, plan, send, &mut (vote, Tally::decision)).await
}

/// How the replies of a fan-out count: each reply's vote, and the
/// decision after each vote (and once the window closed), which ends the
/// fan-out. A rule with state of its own (a semaphore's votes per slot, an
/// election's support per leader) keeps it here, read back by the caller
/// afterwards; a rule without is a pair of closures (vote, decide).
pub(crate) trait Count<T> {
    /// How node `i`'s reply votes.
    fn vote(&mut self, i: usize, reply: &T) -> Vote;
    /// The decision once `tally` (every vote so far) is counted, if known.
    fn decide(&self, tally: &Tally) -> Option<Decision>;
}

impl<T, V, D> Count<T> for (V, D)
where
    V: FnMut(usize, &T) -> Vote,
    D: Fn(&Tally) -> Option<Decision>,
{
    fn vote(&mut self, i: usize, reply: &T) -> Vote {
        (self.0)(i, reply)
    }

    fn decide(&self, tally: &Tally) -> Option<Decision> {
        (self.1)(tally)
    }
}

/// The fan-out itself: [`ask`] with the votes and the decision of `count`.
///
/// # Cancel safety
///
/// As [`ask`].
pub(crate) async fn counted<T, F, Fut>(
    nodes: &Arc<[Node]>,
    background: &Background,
    plan: Plan,
    mut send: F,
    count: &mut impl Count<T>,
) -> Outcome<T>
where
    F: FnMut(usize, &Node, Window) -> Fut,
    Fut: Future<Output = NodeResult<T>> + Send + 'static,
    T: Send + 'static,
{
    let window = Window::from_now(plan.timeout);
    let mut gather = Gather {
        pending: Some(
            nodes
                .iter()
                .enumerate()
                .map(|(i, node)| {
                    let reply = send(i, node, window);
                    async move { (i, reply.await) }
                })
                .collect(),
        ),
        background: background.clone(),
        nodes: nodes.clone(),
        window,
        uncounted: all(nodes.len()),
    };
    let mut outcome = Outcome {
        tally: Tally::new(nodes.len(), plan.needed),
        decision: None,
        replies: Vec::with_capacity(nodes.len()),
        failures: Vec::new(),
    };
    if let Some(decision) = count.decide(&outcome.tally) {
        // Nothing needed: the calls are background work.
        outcome.decision = Some(decision);
        return outcome;
    }
    let stop = plan
        .until
        .map_or(window.deadline, |until| until.min(window.deadline));
    let timer = tokio::time::sleep_until(stop.into());
    tokio::pin!(timer);
    loop {
        tokio::select! {
            biased;
            reply = gather.next() => {
                let Some((i, reply)) = reply else {
                    outcome.decision = count.decide(&outcome.tally);
                    break;
                };
                let v = match reply {
                    Ok(reply) => {
                        gather.counted(i);
                        let v = count.vote(i, &reply);
                        outcome.replies.push((i, reply));
                        v
                    }
                    Err(failure) => {
                        gather.failed(i, &failure);
                        debug!(%failure, "node failed");
                        outcome.failures.push(failure);
                        Vote::Failed
                    }
                };
                outcome.tally.record(v);
                if let Some(decision) = count.decide(&outcome.tally) {
                    outcome.decision = Some(decision);
                    break;
                }
            }
            () = &mut timer => {
                if plan.until.is_some_and(|until| until <= window.deadline) {
                    break; // undecided
                }
                // The nodes' window closed: whoever has not answered failed.
                for i in gather.take_uncounted() {
                    let failure = nodes[i].failure(NodeFailureKind::Timeout(plan.timeout));
                    nodes[i].counters().failed(&failure.kind, None);
                    debug!(%failure, "node failed");
                    outcome.failures.push(failure);
                    outcome.tally.record(Vote::Failed);
                }
                outcome.decision = count.decide(&outcome.tally);
                break;
            }
        }
    }
    outcome
}

/// A mask of the first `n` nodes.
fn all(n: usize) -> u64 {
    if n >= MAX_NODES {
        u64::MAX
    } else {
        (1u64 << n) - 1
    }
}

/// Per-node futures driven together. Dropping a `Gather` (because the
/// outcome is decided, or because the caller was cancelled) hands the
/// unfinished futures to the background registry, so every command still
/// reaches its node and nothing waits for the slow ones. (The redis crate's
/// multiplexed connection skips a queued command whose reply future was
/// dropped before its connection task wrote it: the futures must live on.)
/// There, a node still silent when the window closes is counted as a
/// timeout, once.
///
/// Generic over the future type rather than boxed: a lock cycle builds
/// two of these over five nodes, and each box is an allocation.
struct Gather<F, T>
where
    F: Future<Output = (usize, NodeResult<T>)> + Send + 'static,
    T: Send + 'static,
{
    /// Taken by `drop`.
    pending: Option<FuturesUnordered<F>>,
    background: Background,
    nodes: Arc<[Node]>,
    window: Window,
    /// Nodes whose outcome has not been counted yet (bit `i` for node `i`).
    uncounted: u64,
}

impl<F, T> Gather<F, T>
where
    F: Future<Output = (usize, NodeResult<T>)> + Send + 'static,
    T: Send + 'static,
{
    async fn next(&mut self) -> Option<(usize, NodeResult<T>)> {
        self.pending.as_mut()?.next().await
    }

    /// Node `i` answered in time (the node counted its reply).
    fn counted(&mut self, i: usize) {
        self.uncounted &= !(1 << i);
    }

    /// Node `i` failed: a late answer is a timeout the node did not count.
    fn failed(&mut self, i: usize, failure: &NodeFailure) {
        count_late(&self.nodes, &mut self.uncounted, i, failure);
    }

    /// The nodes not counted yet, now counted.
    fn take_uncounted(&mut self) -> impl Iterator<Item = usize> {
        bits(std::mem::take(&mut self.uncounted))
    }
}

/// Node `i` ended in `failure`: a late answer (a timeout the node did not
/// count) is counted here, once.
fn count_late(nodes: &[Node], uncounted: &mut u64, i: usize, failure: &NodeFailure) {
    if failure.kind.is_timeout() && *uncounted & (1 << i) != 0 {
        nodes[i].counters().failed(&failure.kind, None);
    }
    *uncounted &= !(1 << i);
}

/// The indices of the bits set in `mask`.
fn bits(mask: u64) -> impl Iterator<Item = usize> {
    (0..MAX_NODES).filter(move |i| mask & (1 << i) != 0)
}

impl<F, T> Drop for Gather<F, T>
where
    F: Future<Output = (usize, NodeResult<T>)> + Send + 'static,
    T: Send + 'static,
{
    fn drop(&mut self) {
        let Some(pending) = self.pending.take().filter(|p| !p.is_empty()) else {
            return;
        };
        self.background.spawn(drain(
            pending,
            self.nodes.clone(),
            self.window,
            self.uncounted,
        ));
    }
}

/// The calls of a decided fan-out, finishing in the background: counted
/// until the window closes, a timeout each for those still silent then,
/// and driven (uncounted) for at most [`STRAGGLER_LIMIT`] after it.
async fn drain<F, T>(
    mut pending: FuturesUnordered<F>,
    nodes: Arc<[Node]>,
    window: Window,
    mut uncounted: u64,
) where
    F: Future<Output = (usize, NodeResult<T>)> + Send + 'static,
    T: Send + 'static,
{
    let in_time = tokio::time::timeout_at(window.deadline.into(), async {
        while let Some((i, result)) = pending.next().await {
            match result {
                Err(failure) => count_late(&nodes, &mut uncounted, i, &failure),
                Ok(_) => uncounted &= !(1 << i),
            }
        }
    })
    .await;
    if in_time.is_ok() {
        return;
    }
    for i in bits(uncounted) {
        nodes[i]
            .counters()
            .failed(&NodeFailureKind::Timeout(window.timeout), None);
    }
    let _ = tokio::time::timeout(STRAGGLER_LIMIT, async {
        while pending.next().await.is_some() {}
    })
    .await;
}
