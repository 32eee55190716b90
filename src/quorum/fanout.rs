//! The one fan-out: send a command to every node at once, count
//! the replies as they arrive, and decide at the earliest moment — success
//! at the `needed`-th yes, failure as soon as that has become impossible,
//! or no decision once a deadline passed. Whatever is still in flight at
//! that moment goes on in the background (the commands still reach their
//! nodes) and is never waited for.
//!
//! Acquire, the fencing-token commit, extend, release, the remote check,
//! the status read, the election's fan-outs and the first connection are
//! all uses of [`Engine::ask`]; they differ only in the command sent, in
//! how a reply votes and when that decides ([`Count`]), and in their
//! [`Plan`].
//!
//! One timer per operation, not one per node: every node call shares the
//! operation's [`Window`]. A node that has not answered when it closes
//! counts as failed (a timeout); its call goes on in the background, where
//! a late reply is no longer counted as a reply.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::{FutureExt, OptionFuture};
use futures::stream::{FuturesUnordered, StreamExt};
use tracing::debug;

use crate::error::lost::LostReason;
use crate::error::{NodeFailure, NodeFailureKind};
use crate::member::{Node, NodeResult};
use crate::node::reply::Vote;
use crate::node::Window;
use crate::quorum::background::Background;
use crate::quorum::engine::Engine;
use crate::quorum::rule::{Decision, Tally};
use crate::validity;

/// How long a call still running after its operation's window may go on
/// in the background (a release queued on a hung node, for instance).
const STRAGGLER_LIMIT: Duration = Duration::from_secs(30);

/// The fan-out tracks nodes in one word: at most 64 of them.
const MAX_NODES: usize = crate::config::MAX_NODES;

/// Which nodes a fan-out asks, and when it is decided.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// The nodes asked (the engine's, or some of them).
    pub(crate) nodes: Arc<[Node]>,
    /// Yes votes that decide success; `None` to wait for every node's
    /// answer (a failure is one), each counted, before deciding.
    pub(crate) needed: Option<usize>,
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

    /// A node failed (timeouts included): one failed vote, and why.
    fn failed(&mut self, failure: NodeFailure) {
        debug!(%failure, "node failed");
        self.failures.push(failure);
        self.tally.record(Vote::Failed);
    }
}

/// How the replies of a fan-out count: each reply's vote, and the
/// decision after each vote (and once the window closed), which ends the
/// fan-out. A rule with state of its own (a semaphore's votes per slot, an
/// election's support per leader) keeps it here, read back by the caller
/// afterwards; a rule without is a closure (the vote, decided on the yes
/// votes alone) or a pair of closures (vote, decide).
pub(crate) trait Count<T> {
    /// How node `i`'s reply votes.
    fn vote(&mut self, i: usize, reply: &T) -> Vote;
    /// The decision once `tally` (every vote so far) is counted, if known:
    /// by default on the yes votes alone ([`Tally::decision`]).
    fn decide(&self, tally: &Tally) -> Option<Decision> {
        tally.decision()
    }
}

impl<T, V: FnMut(usize, &T) -> Vote> Count<T> for V {
    fn vote(&mut self, i: usize, reply: &T) -> Vote {
        self(i, reply)
    }
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

impl Engine {
    /// A majority of every node within the node timeout.
    pub(crate) fn majority(&self) -> Plan {
        Plan {
            nodes: self.nodes.clone(),
            needed: Some(self.needed()),
            timeout: self.config.node_timeout,
            until: None,
        }
    }

    /// Every node's answer (a failure counts as an answer) within `timeout`.
    pub(crate) fn everyone(&self, timeout: Duration) -> Plan {
        Plan {
            needed: None,
            timeout,
            ..self.majority()
        }
    }

    /// A majority before `deadline` (a held lock's validity), undecided
    /// after it, each node given at most what is left of it.
    pub(crate) fn before(&self, deadline: Instant) -> Plan {
        let left = validity::left(deadline, Instant::now());
        Plan {
            timeout: self.config.node_timeout.min(left),
            until: Some(deadline),
            ..self.majority()
        }
    }

    /// An operation that keeps a held lock (an extension, a proclamation):
    /// `command` asked of every node through `call` as [`ask`](Self::ask)
    /// does, decided at a majority [`before`](Self::before) `deadline`.
    /// Why the lock is lost otherwise: its validity ran out first (or was
    /// already over), or the nodes refused or failed
    /// ([`LostReason::no_quorum`]).
    pub(crate) async fn confirm<C: ?Sized, T, F, Fut>(
        &self,
        deadline: Instant,
        command: Arc<C>,
        call: F,
        mut vote: impl FnMut(usize, &T) -> Vote,
    ) -> Result<(), LostReason>
    where
        F: FnMut(usize, Node, Arc<C>, Window) -> Fut,
        Fut: Future<Output = NodeResult<T>> + Send + 'static,
        T: Send + 'static,
    {
        if validity::left(deadline, Instant::now()).is_zero() {
            return Err(LostReason::Expired);
        }
        let outcome = self
            .ask(self.before(deadline), command, call, &mut vote)
            .await;
        let t = &outcome.tally;
        match outcome.decision {
            Some(Decision::Reached) => Ok(()),
            None => Err(LostReason::Expired),
            Some(Decision::Impossible) => Err(LostReason::no_quorum(
                t.yes(),
                t.no(),
                t.failed() + t.pending(),
                t.needed(),
                outcome.failures,
            )),
        }
    }

    /// Sends `call(i, node, command, window)` to every node of `plan` and
    /// decides per `plan`, each reply voting as `count` says (a failure
    /// always votes [`Vote::Failed`]).
    ///
    /// `call` builds each node's future, from its own clones of the node and
    /// of `command`, before anything is awaited; the futures must own what
    /// they use (`'static`), since those still running at the decision are
    /// handed to the background.
    ///
    /// # Cancel safety
    ///
    /// Dropping this future hands the unfinished per-node futures to the
    /// background too: every command still reaches its node.
    pub(crate) async fn ask<C: ?Sized, T, F, Fut>(
        &self,
        plan: Plan,
        command: Arc<C>,
        mut call: F,
        count: &mut impl Count<T>,
    ) -> Outcome<T>
    where
        F: FnMut(usize, Node, Arc<C>, Window) -> Fut,
        Fut: Future<Output = NodeResult<T>> + Send + 'static,
        T: Send + 'static,
    {
        let nodes = &plan.nodes;
        let window = Window::from_now(plan.timeout);
        // Tagged with a map, not an async block: a block would hold the
        // call's future twice (before and while awaiting it), and each node's
        // future is moved into the set, and a straggler's into the background.
        let pending = nodes.iter().enumerate().map(|(i, node)| {
            call(i, node.clone(), command.clone(), window).map(move |reply| (i, reply))
        });
        let mut gather = Gather {
            pending: Some(pending.collect()),
            background: self.background.clone(),
            nodes: nodes.clone(),
            window,
            uncounted: (0..nodes.len()).fold(0, |mask, i| mask | 1 << i),
        };
        let mut outcome = Outcome {
            tally: Tally::new(nodes.len(), plan.needed.unwrap_or(nodes.len())),
            decision: None,
            replies: Vec::with_capacity(nodes.len()),
            failures: Vec::new(),
        };
        let stop = plan.until.unwrap_or(window.deadline).min(window.deadline);
        let timer = tokio::time::sleep_until(stop.into());
        tokio::pin!(timer);
        loop {
            // Before any reply (nothing needed: the calls are background
            // work), then after each one; a plan that waits for every node
            // decides once none is pending.
            let hearing = plan.needed.is_none() && outcome.tally.pending() > 0;
            if let Some(decision) = count.decide(&outcome.tally).filter(|_| !hearing) {
                outcome.decision = Some(decision);
                break;
            }
            tokio::select! {
                biased;
                reply = OptionFuture::from(gather.pending.as_mut().map(StreamExt::next)) => {
                    let Some(Some((i, reply))) = reply else {
                        outcome.decision = count.decide(&outcome.tally);
                        break;
                    };
                    counted(nodes, &mut gather.uncounted, i, reply.as_ref().err());
                    match reply {
                        Ok(reply) => {
                            outcome.tally.record(count.vote(i, &reply));
                            outcome.replies.push((i, reply));
                        }
                        Err(failure) => outcome.failed(failure),
                    }
                }
                () = &mut timer => {
                    if plan.until.is_some_and(|until| until <= window.deadline) {
                        break; // undecided
                    }
                    // The nodes' window closed: whoever has not answered failed.
                    for i in bits(std::mem::take(&mut gather.uncounted)) {
                        let failure = nodes[i].failure(NodeFailureKind::Timeout(plan.timeout));
                        nodes[i].counters().failed(&failure.kind, None);
                        outcome.failed(failure);
                    }
                    outcome.decision = count.decide(&outcome.tally);
                    break;
                }
            }
        }
        outcome
    }
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
struct Gather<F, T>
where
    F: Future<Output = (usize, NodeResult<T>)> + Send + 'static,
    T: Send + 'static,
{
    /// `None` once handed to the background (taking it leaves no empty
    /// set to allocate in its place).
    pending: Option<FuturesUnordered<F>>,
    background: Background,
    nodes: Arc<[Node]>,
    window: Window,
    /// Nodes whose outcome has not been counted yet (bit `i` for node `i`).
    uncounted: u64,
}

/// Node `i` answered, or ended in `failure`: counted now. A late answer (a
/// timeout the node did not count) is counted here, once.
fn counted(nodes: &[Node], uncounted: &mut u64, i: usize, failure: Option<&NodeFailure>) {
    let late = failure.filter(|f| f.kind.is_timeout() && *uncounted & (1 << i) != 0);
    if let Some(failure) = late {
        nodes[i].counters().failed(&failure.kind, None);
    }
    *uncounted &= !(1 << i);
}

/// The indices of the bits set in `mask`.
fn bits(mask: u64) -> impl Iterator<Item = usize> {
    (0..MAX_NODES).filter(move |i| mask & (1 << i) != 0)
}

/// The calls of a decided fan-out finish in the background: counted until
/// the window closes, a timeout each for those still silent then, and
/// driven (uncounted) for at most [`STRAGGLER_LIMIT`] after it.
impl<F, T> Drop for Gather<F, T>
where
    F: Future<Output = (usize, NodeResult<T>)> + Send + 'static,
    T: Send + 'static,
{
    fn drop(&mut self) {
        let Some(mut pending) = self.pending.take().filter(|p| !p.is_empty()) else {
            return;
        };
        let (nodes, window, mut uncounted) = (self.nodes.clone(), self.window, self.uncounted);
        self.background.spawn(async move {
            let in_time = tokio::time::timeout_at(window.deadline.into(), async {
                while let Some((i, result)) = pending.next().await {
                    counted(&nodes, &mut uncounted, i, result.as_ref().err());
                }
            })
            .await;
            if in_time.is_ok() {
                return;
            }
            for i in bits(uncounted) {
                let timeout = NodeFailureKind::Timeout(window.timeout());
                nodes[i].counters().failed(&timeout, None);
            }
            let _ = tokio::time::timeout(STRAGGLER_LIMIT, async {
                while pending.next().await.is_some() {}
            })
            .await;
        });
    }
}
