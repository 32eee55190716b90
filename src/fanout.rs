//! The fan-out engine: sends one operation to every node at once and decides
//! as the replies arrive — success at the quorum-th yes, failure as soon as a
//! quorum is impossible. Whatever is still in flight at that moment keeps
//! running in the background (the commands still reach their nodes) but is
//! never waited for.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::stream::{FuturesUnordered, StreamExt};
use tokio::sync::Notify;
use tracing::{debug, Instrument};

use crate::background;
use crate::config::Config;
use crate::error::{Error, NodeFailure};
use crate::fence::{self, Commit};
use crate::handoff::Handoff;
use crate::keys::Keys;
use crate::lease::ending::LostReason;
use crate::node::Node;
use crate::quorum::{self, Decision, Tally, Vote};
use crate::stats::LeaseCounters;
use crate::token::Token;

/// A node's `SET NX` of one attempt, as a later release on that node sees
/// it: the release waits until the `SET` is over, so that it is queued
/// behind it. Cheap to clone; the clones of one attempt share one
/// allocation. (A shared future per node did the same job for about twenty
/// allocations per attempt.)
#[derive(Clone)]
pub(crate) struct SetFuture {
    sets: Arc<SetsOver>,
    node: usize,
}

/// Which nodes' `SET`s of one attempt are over.
struct SetsOver {
    over: Box<[AtomicBool]>,
    changed: Notify,
}

impl SetFuture {
    /// One handle per node for an attempt over `nodes` nodes.
    fn for_attempt(nodes: usize) -> Vec<SetFuture> {
        let sets = Arc::new(SetsOver {
            over: (0..nodes).map(|_| AtomicBool::new(false)).collect(),
            changed: Notify::new(),
        });
        (0..nodes)
            .map(|node| SetFuture {
                sets: sets.clone(),
                node,
            })
            .collect()
    }

    /// Resolves once this node's `SET` has finished, failed, timed out or
    /// was dropped.
    async fn over(&self) {
        loop {
            // Created before the check: `notify_waiters` reaches it even
            // before it is first polled.
            let changed = self.sets.changed.notified();
            if self.sets.over[self.node].load(Ordering::Acquire) {
                return;
            }
            changed.await;
        }
    }

    /// Marks this node's `SET` over when dropped: held by the `SET`'s future,
    /// so that a release never waits for a `SET` that will not finish.
    fn mark_over_on_drop(&self) -> MarkOver {
        MarkOver(self.clone())
    }
}

/// See [`SetFuture::mark_over_on_drop`].
struct MarkOver(SetFuture);

impl Drop for MarkOver {
    fn drop(&mut self) {
        let SetFuture { sets, node } = &self.0;
        sets.over[*node].store(true, Ordering::Release);
        sets.changed.notify_waiters();
    }
}

/// Per-node futures driven together. Dropping a `Gather` (because the
/// outcome is decided, or because the caller was cancelled) hands the
/// unfinished futures to a background task, so every command still reaches
/// its node and nothing waits for the slow ones. (The redis crate's
/// multiplexed connection skips a queued command whose reply future was
/// dropped before its connection task wrote it: the futures must live on.)
///
/// Generic over the future type rather than boxed: a lock cycle builds
/// two of these over five nodes, and each box is an allocation.
pub(crate) struct Gather<F>
where
    F: Future + Send + 'static,
    F::Output: Send,
{
    /// Taken by `drop`.
    pending: Option<FuturesUnordered<F>>,
}

impl<F> Gather<F>
where
    F: Future + Send + 'static,
    F::Output: Send,
{
    pub(crate) fn new(futures: impl IntoIterator<Item = F>) -> Self {
        Self {
            pending: Some(futures.into_iter().collect()),
        }
    }

    pub(crate) async fn next(&mut self) -> Option<F::Output> {
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
        background::spawn(async move { while pending.next().await.is_some() {} });
    }
}

/// How one acquisition attempt ended.
pub(crate) enum Attempt {
    /// A quorum said yes in time.
    Granted {
        deadline: Instant,
        sets: Vec<SetFuture>,
        /// The fencing token, for a fenced lock.
        fence: Option<u64>,
    },
    /// No lock; every node was told to release.
    Failed(AttemptFailure),
}

/// Why an attempt failed, kept to build the final error after the retries.
pub(crate) struct AttemptFailure {
    pub(crate) tally: Tally,
    pub(crate) failures: Vec<NodeFailure>,
    /// Set when a quorum said yes but no validity was left.
    pub(crate) exhausted: Option<Duration>,
    /// Set, to the highest counter read, when no fencing token above it is
    /// left (see [`crate::MAX_FENCE`]); retrying cannot help.
    pub(crate) fence_exhausted: Option<u64>,
}

/// The nodes, the tuning, and the operations that go to all of them.
#[derive(Debug)]
pub(crate) struct Engine {
    pub(crate) nodes: Vec<Node>,
    pub(crate) config: Config,
    /// Release announcements for waiters, when fast hand-off is on.
    pub(crate) handoff: Option<Arc<Handoff>>,
    /// Renewal and lost-signal counters of every lock taken through this engine.
    pub(crate) leases: Arc<LeaseCounters>,
}

impl Engine {
    pub(crate) fn quorum(&self) -> usize {
        quorum::quorum(self.nodes.len())
    }

    /// Opens every connection, waiting at most the connect timeout; a node
    /// that does not answer is not an error here (it may come up later).
    pub(crate) async fn connect_all(&self) {
        let wait = self.config.connect_timeout;
        let mut gather = Gather::new(self.nodes.iter().enumerate().map(|(i, node)| {
            let node = node.clone();
            let quarantine = self.config.restart_quarantine;
            async move {
                let mut result = node.ping(wait).await;
                if result.is_ok() {
                    result = node.load_scripts(wait).await;
                }
                if let (Ok(()), Some(required)) = (&result, quarantine) {
                    // Reads the uptime now, so a fresh node is known before
                    // the first acquire.
                    result = node.check_standing(required, wait).await;
                }
                (i, result)
            }
        }));
        while let Some((i, result)) = gather.next().await {
            if let Err(failure) = result {
                debug!(node = %self.nodes[i].label(), %failure, "node not reachable yet");
            }
        }
    }

    /// One Redlock attempt: `SET NX PX` everywhere, decided at quorum; for
    /// a fenced lock, followed by the commit of the fencing token.
    ///
    /// On failure every node is told to release before this returns (each
    /// release queued behind that node's `SET`). If this future is dropped
    /// mid-flight, the same cleanup is spawned.
    pub(crate) async fn acquire_once(
        self: &Arc<Self>,
        keys: &Keys,
        token: &Token,
        ttl: Duration,
        drift: Duration,
    ) -> Attempt {
        let span = tracing::debug_span!("acquire_attempt", resource = %keys, token = %token);
        async move {
            let start = Instant::now();
            let budget = ttl.saturating_sub(drift);
            let valid_until = quorum::deadline(start, ttl, drift).unwrap_or(start);
            let timeout = self.config.node_timeout.min(budget);
            let sets = SetFuture::for_attempt(self.nodes.len());
            let mut guard = CleanupOnDrop {
                engine: self.clone(),
                keys: keys.clone(),
                token: token.clone(),
                sets: Some(sets.clone()),
            };

            let mut tally = Tally::majority(self.nodes.len());
            let mut failures = Vec::new();
            let mut highest = None::<u64>;
            let mut gather = Gather::new(self.nodes.iter().zip(&sets).enumerate().map(
                |(i, (node, set))| {
                    let (node, keys, token) = (node.clone(), keys.clone(), token.clone());
                    let quarantine = self.config.restart_quarantine;
                    let over = set.mark_over_on_drop();
                    async move {
                        let _over = over;
                        if let Some(required) = quarantine {
                            if let Err(failure) = node.check_standing(required, timeout).await {
                                return (i, Err(failure));
                            }
                        }
                        (i, node.acquire(&keys, &token, ttl, timeout).await)
                    }
                },
            ));
            let mut decision = None;
            while let Some((i, result)) = gather.next().await {
                let vote = match result {
                    Ok(grant) => {
                        debug!(node = %self.nodes[i].label(), vote = ?grant.vote, "node answered");
                        if grant.vote == Vote::Yes {
                            highest = highest.max(Some(grant.counter));
                        }
                        grant.vote
                    }
                    Err(failure) => {
                        debug!(%failure, "node failed");
                        failures.push(failure);
                        Vote::Failed
                    }
                };
                decision = tally.record(vote);
                if decision.is_some() {
                    break;
                }
            }
            drop(gather);

            let mut fence = None;
            let mut fence_exhausted = None;
            if decision == Some(Decision::Reached) && keys.fence_key().is_some() {
                match fence::propose(highest) {
                    Ok(proposed) => {
                        let (commit, commit_failures) =
                            self.commit_fence(keys, token, proposed, valid_until).await;
                        if commit.decision() == Some(Decision::Reached) {
                            fence = Some(proposed);
                        } else {
                            debug!(yes = commit.yes(), no = commit.no(), "fence commit failed");
                            decision = Some(Decision::Impossible);
                            failures.extend(commit_failures);
                            tally = commit;
                        }
                    }
                    Err(highest) => {
                        debug!(highest, "fencing tokens exhausted");
                        decision = Some(Decision::Impossible);
                        fence_exhausted = Some(highest);
                    }
                }
            }
            let elapsed = start.elapsed();

            if decision == Some(Decision::Reached)
                && quorum::validity(ttl, elapsed, drift).is_some()
            {
                guard.sets = None;
                debug!(?elapsed, yes = tally.yes(), ?fence, "granted");
                return Attempt::Granted {
                    deadline: valid_until,
                    sets,
                    fence,
                };
            }
            let exhausted = (decision == Some(Decision::Reached)).then_some(elapsed);
            debug!(
                ?elapsed,
                yes = tally.yes(),
                no = tally.no(),
                failed = tally.failed(),
                "attempt failed"
            );
            // Release everywhere before the next attempt (a key left from
            // this one would refuse it), but wait at most one node timeout:
            // a hung node gets its release in the background, queued
            // behind its SET.
            guard.sets = None;
            let all = self.nodes.len();
            let _ = tokio::time::timeout(timeout, self.release_after(keys, token, sets, all)).await;
            Attempt::Failed(AttemptFailure {
                tally,
                failures,
                exhausted,
                fence_exhausted,
            })
        }
        .instrument(span)
        .await
    }

    /// Second phase of a fenced acquire: every node still holding the token
    /// raises its counter to `fence` from strictly below; only those count,
    /// so two commits of one token cannot both reach a majority
    /// (`docs/fencing.md`). Decided at quorum, and before the validity ends.
    async fn commit_fence(
        &self,
        keys: &Keys,
        token: &Token,
        fence: u64,
        valid_until: Instant,
    ) -> (Tally, Vec<NodeFailure>) {
        let timeout = self
            .config
            .node_timeout
            .min(valid_until.saturating_duration_since(Instant::now()));
        let mut gather = Gather::new(self.nodes.iter().enumerate().map(|(i, node)| {
            let (node, keys, token) = (node.clone(), keys.clone(), token.clone());
            async move { (i, node.commit_fence(&keys, &token, fence, timeout).await) }
        }));
        let mut tally = Tally::majority(self.nodes.len());
        let mut failures = Vec::new();
        let _ = tokio::time::timeout_at(valid_until.into(), async {
            while let Some((_, result)) = gather.next().await {
                let vote = match result {
                    Ok(Commit::Raised) => Vote::Yes,
                    Ok(Commit::NotHeld | Commit::Behind) => Vote::No,
                    Err(failure) => {
                        failures.push(failure);
                        Vote::Failed
                    }
                };
                if tally.record(vote).is_some() {
                    break;
                }
            }
        })
        .await;
        (tally, failures)
    }

    /// Compare-and-delete on every node, each queued behind that node's
    /// `SET` when `sets` is given. Returns the tally once `needed` nodes have
    /// confirmed or that has become impossible; the rest goes on in the
    /// background.
    pub(crate) async fn release_after(
        &self,
        keys: &Keys,
        token: &Token,
        sets: Vec<SetFuture>,
        needed: usize,
    ) -> (Tally, Vec<NodeFailure>) {
        let timeout = self.config.node_timeout;
        let mut sets = sets.into_iter();
        let mut gather = Gather::new(self.nodes.iter().enumerate().map(|(i, node)| {
            let (node, keys, token) = (node.clone(), keys.clone(), token.clone());
            let set = sets.next();
            async move {
                if let Some(set) = set {
                    set.over().await;
                }
                (i, node.release(&keys, &token, timeout).await)
            }
        }));
        let mut tally = Tally::new(self.nodes.len(), needed);
        let mut failures = Vec::new();
        if needed == 0 {
            return (tally, failures);
        }
        while let Some((i, result)) = gather.next().await {
            let vote = match result {
                Ok(deleted) => {
                    debug!(node = %self.nodes[i].label(), deleted, "released");
                    Vote::Yes
                }
                Err(failure) => {
                    debug!(%failure, "release failed");
                    failures.push(failure);
                    Vote::Failed
                }
            };
            if tally.record(vote).is_some() {
                break;
            }
        }
        (tally, failures)
    }

    /// Release for a held lock: `Ok` once a majority confirmed that the key
    /// no longer carries the token (deleted now, or expired before).
    pub(crate) async fn release(
        &self,
        keys: &Keys,
        token: &Token,
        sets: Vec<SetFuture>,
    ) -> Result<(), Error> {
        let span = tracing::debug_span!("release", resource = %keys, token = %token);
        async move {
            let (tally, failures) = self.release_after(keys, token, sets, self.quorum()).await;
            if tally.decision() == Some(Decision::Reached) {
                return Ok(());
            }
            Err(Error::Unavailable {
                operation: "release",
                resource: keys.name(),
                granted: tally.yes(),
                needed: tally.needed(),
                nodes: self.nodes.len(),
                attempts: 1,
                failures,
            })
        }
        .instrument(span)
        .await
    }

    /// Compare-and-pexpire on every node, measured from `start` (taken
    /// before this is called); the new deadline when a majority extended
    /// before `deadline` (the one that holds while the extension is in
    /// flight), the reason the lock is lost otherwise.
    pub(crate) async fn extend(
        &self,
        keys: &Keys,
        token: &Token,
        ttl: Duration,
        drift: Duration,
        start: Instant,
        deadline: Instant,
    ) -> Result<Instant, LostReason> {
        let span = tracing::debug_span!("extend", resource = %keys, token = %token);
        async move {
            let remaining = deadline.saturating_duration_since(start);
            if remaining.is_zero() {
                return Err(LostReason::Expired);
            }
            let timeout = self.config.node_timeout.min(remaining);
            let mut gather = Gather::new(self.nodes.iter().enumerate().map(|(i, node)| {
                let (node, keys, token) = (node.clone(), keys.clone(), token.clone());
                async move { (i, node.extend(&keys, &token, ttl, timeout).await) }
            }));
            let mut tally = Tally::majority(self.nodes.len());
            let mut failures = Vec::new();
            let decided = tokio::time::timeout_at(deadline.into(), async {
                while let Some((i, result)) = gather.next().await {
                    let vote = match result {
                        Ok(true) => Vote::Yes,
                        Ok(false) => {
                            debug!(node = %self.nodes[i].label(), "token gone on node");
                            Vote::No
                        }
                        Err(failure) => {
                            debug!(%failure, "extend failed on node");
                            failures.push(failure);
                            Vote::Failed
                        }
                    };
                    if let Some(decision) = tally.record(vote) {
                        return Some(decision);
                    }
                }
                None
            })
            .await;
            let elapsed = start.elapsed();
            match decided {
                Err(_) => Err(LostReason::Expired),
                Ok(Some(Decision::Reached)) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return Err(LostReason::Expired);
                    }
                    match quorum::deadline(start, ttl, drift) {
                        Some(extended) if now < extended => {
                            let valid = extended.saturating_duration_since(now);
                            debug!(?elapsed, ?valid, "extended");
                            Ok(extended)
                        }
                        _ => Err(LostReason::TooSlow),
                    }
                }
                Ok(_) => Err(LostReason::no_quorum(&tally, failures)),
            }
        }
        .instrument(span)
        .await
    }
}

/// Spawns the release of a half-finished attempt when the future running
/// it is dropped (e.g. by `tokio::time::timeout`), so its keys do not
/// linger until their TTL.
struct CleanupOnDrop {
    engine: Arc<Engine>,
    keys: Keys,
    token: Token,
    sets: Option<Vec<SetFuture>>,
}

impl Drop for CleanupOnDrop {
    fn drop(&mut self) {
        let Some(sets) = self.sets.take() else {
            return;
        };
        spawn_release(
            self.engine.clone(),
            self.keys.clone(),
            self.token.clone(),
            sets,
        );
    }
}

/// Best-effort release in the background, when a tokio runtime is present.
pub(crate) fn spawn_release(engine: Arc<Engine>, keys: Keys, token: Token, sets: Vec<SetFuture>) {
    background::spawn(async move {
        let nodes = engine.nodes.len();
        engine.release_after(&keys, &token, sets, nodes).await;
    });
}
