//! One acquisition attempt: `SET NX PX` on every node, decided at quorum;
//! for a fenced lock, followed by the commit of the fencing token. Both
//! phases are uses of [`fanout::ask`]; the deadline the lock gets is
//! [`validity::deadline`] from the attempt's start.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::debug;

use crate::quorum::traced::in_span;

use crate::error::NodeFailure;
use crate::keys::Keys;
use crate::node::commands::{Announce, Command};
use crate::node::fence::{self, Commit};
use crate::node::reply::Vote;
use crate::node::Grant;
use crate::quorum::engine::Engine;
use crate::quorum::fanout::{self, Outcome, Plan};
use crate::quorum::rule::Tally;
use crate::quorum::set_order::SetFuture;
use crate::token::Token;
use crate::validity;

/// How one acquisition attempt ended.
pub(crate) enum Attempt {
    /// A quorum said yes in time.
    Granted {
        /// The keys the lock holds (a semaphore's: the slots kept).
        keys: Keys,
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

/// What every kind of attempt sets up before its first send: the clock
/// read its validity counts from, the validity's end, how long each node
/// may take, the majority it needs, the `SET`s a release on each node
/// waits behind, and the release of `keys` spawned if the attempt is
/// dropped (until the attempt takes `guard.sets`).
pub(crate) struct Begun {
    pub(crate) start: Instant,
    pub(crate) valid_until: Instant,
    pub(crate) timeout: Duration,
    pub(crate) plan: Plan,
    pub(crate) sets: Vec<SetFuture>,
    pub(crate) guard: CleanupOnDrop,
}

impl Begun {
    /// An attempt of `token` on `keys` for `ttl`, starting now.
    pub(crate) fn now(
        engine: &Arc<Engine>,
        keys: &Keys,
        token: &Token,
        ttl: Duration,
        drift: Duration,
    ) -> Self {
        let start = Instant::now();
        let timeout = engine.config.node_timeout.min(validity::budget(ttl, drift));
        let sets = SetFuture::for_attempt(engine.nodes.len());
        Self {
            start,
            valid_until: validity::deadline(start, ttl, drift).unwrap_or(start),
            timeout,
            plan: Plan {
                timeout,
                ..engine.majority(None)
            },
            guard: CleanupOnDrop {
                engine: engine.clone(),
                keys: keys.clone(),
                token: token.clone(),
                sets: Some(sets.clone()),
            },
            sets,
        }
    }
}

/// One Redlock attempt with a fresh `token`.
///
/// On failure every node is told to release before this returns (each
/// release queued behind that node's `SET`, waiting at most one node
/// timeout). If this future is dropped mid-flight, the same cleanup is
/// spawned.
pub(crate) async fn acquire_once(
    engine: &Arc<Engine>,
    keys: &Keys,
    token: &Token,
    ttl: Duration,
    drift: Duration,
) -> Attempt {
    let span = tracing::debug_span!("acquire_attempt", resource = %keys, token = %token);
    in_span(span, async move {
        let Begun {
            start,
            valid_until,
            timeout,
            plan,
            sets,
            mut guard,
        } = Begun::now(engine, keys, token, ttl, drift);
        let command = Command::acquire(keys, token, ttl);
        let quarantine = engine.config.restart_quarantine;
        let set = fanout::ask(
            &engine.nodes,
            &engine.background,
            plan,
            |i, node, window| {
                let (node, command) = (node.clone(), command.clone());
                let over = sets[i].mark_over_on_drop();
                async move {
                    let _over = over;
                    if let Some(required) = quarantine {
                        node.check_standing(required, window).await?;
                    }
                    node.acquire(&command, window).await
                }
            },
            |i, grant: &Grant| {
                debug!(node = %engine.nodes[i].label(), vote = ?grant.vote, "node answered");
                grant.vote
            },
        )
        .await;

        let granted = set.reached();
        let Outcome {
            tally,
            failures,
            replies,
            ..
        } = set;
        let counters = replies
            .iter()
            .filter(|(_, g)| g.vote == Vote::Yes)
            .map(|(_, g)| g.counter);
        let proposed = fence::propose(counters, 0, 1);
        let Verdict {
            granted,
            tally,
            failures,
            fence,
            fence_exhausted,
        } = Verdict::new(granted, tally, failures)
            .fenced(engine, keys, token, proposed, valid_until)
            .await;
        // One clock read: the validity left is the deadline's, at `now`.
        let now = Instant::now();
        let elapsed = now.saturating_duration_since(start);
        let valid = !validity::left(valid_until, now).is_zero();

        if granted && valid {
            guard.sets = None;
            debug!(?elapsed, yes = tally.yes(), ?fence, "granted");
            return Attempt::Granted {
                keys: keys.clone(),
                deadline: valid_until,
                sets,
                fence,
            };
        }
        let exhausted = granted.then_some(elapsed);
        debug!(
            ?elapsed,
            yes = tally.yes(),
            no = tally.no(),
            failed = tally.failed(),
            "attempt failed"
        );
        guard.sets = None;
        clean_up(engine, keys, token, sets, &tally, timeout).await;
        Attempt::Failed(AttemptFailure {
            tally,
            failures,
            exhausted,
            fence_exhausted,
        })
    })
    .await
}

/// The end of a failed attempt: release `keys` everywhere before the next
/// attempt (a key left from this one would refuse it), but wait at most
/// `timeout`: a hung node gets its release in the background, queued
/// behind its `SET`. Lost to a holder (`tally`), the cleanup is silent:
/// that holder announces when it lets go, and waking the waiters now would
/// only send them to its keys.
pub(crate) async fn clean_up(
    engine: &Engine,
    keys: &Keys,
    token: &Token,
    sets: Vec<SetFuture>,
    tally: &Tally,
    timeout: Duration,
) {
    let all = engine.nodes.len();
    let announce = if tally.held_elsewhere() {
        Announce::Silently
    } else {
        Announce::Waiters
    };
    let cleanup = engine.release_after(keys, token, sets, all, announce);
    let _ = tokio::time::timeout(timeout, cleanup).await;
}

/// Where an attempt stands after its votes and, for a fenced lock or
/// semaphore, its fencing token: granted or not, the tally and failures an
/// error would report, the token.
pub(crate) struct Verdict {
    pub(crate) granted: bool,
    pub(crate) tally: Tally,
    pub(crate) failures: Vec<NodeFailure>,
    pub(crate) fence: Option<u64>,
    /// Set, to the highest counter read, when no token above it is left.
    pub(crate) fence_exhausted: Option<u64>,
}

impl Verdict {
    /// The verdict of the votes alone.
    pub(crate) fn new(granted: bool, tally: Tally, failures: Vec<NodeFailure>) -> Self {
        Self {
            granted,
            tally,
            failures,
            fence: None,
            fence_exhausted: None,
        }
    }

    /// For a granted attempt on fenced `keys`, the fencing token: the
    /// token `proposed` above the counters the granting nodes read (see
    /// [`fence::propose`]), committed ([`commit_fence`]). A commit that
    /// reaches no majority in time fails the attempt with the commit's
    /// tally; no token left fails it as exhausted. Otherwise unchanged.
    pub(crate) async fn fenced(
        mut self,
        engine: &Engine,
        keys: &Keys,
        token: &Token,
        proposed: Result<u64, u64>,
        valid_until: Instant,
    ) -> Self {
        if !self.granted || keys.fence_key().is_none() {
            return self;
        }
        match proposed {
            Ok(proposed) => {
                let commit = commit_fence(engine, keys, token, proposed, valid_until).await;
                if commit.reached() {
                    self.fence = Some(proposed);
                } else {
                    debug!(
                        yes = commit.tally.yes(),
                        no = commit.tally.no(),
                        "fence commit failed"
                    );
                    self.granted = false;
                    self.failures.extend(commit.failures);
                    self.tally = commit.tally;
                }
            }
            Err(highest) => {
                debug!(highest, "fencing tokens exhausted");
                self.granted = false;
                self.fence_exhausted = Some(highest);
            }
        }
        self
    }
}

/// Second phase of a fenced acquire: every node still holding the token
/// commits `fence` — a lock's raises its counter to it from strictly
/// below, a permit's counts once per round and slot; only those count, so
/// two commits of one token cannot both reach a majority
/// (`docs/fencing.md`). Decided at quorum, and before the validity ends.
async fn commit_fence(
    engine: &Engine,
    keys: &Keys,
    token: &Token,
    fence: u64,
    valid_until: Instant,
) -> Outcome<Commit> {
    let command = Command::commit_fence(keys, token, fence);
    let plan = Plan {
        timeout: engine
            .config
            .node_timeout
            .min(validity::left(valid_until, Instant::now())),
        ..engine.majority(Some(valid_until))
    };
    fanout::ask(
        &engine.nodes,
        &engine.background,
        plan,
        |_, node, window| {
            let (node, command) = (node.clone(), command.clone());
            async move { node.commit_fence(&command, window).await }
        },
        |_, commit| match commit {
            Commit::Raised => Vote::Yes,
            Commit::NotHeld | Commit::Behind => Vote::No,
        },
    )
    .await
}

/// Spawns the release of a half-finished attempt when the future running
/// it is dropped (e.g. by `tokio::time::timeout`), so its keys do not
/// linger until their TTL.
pub(crate) struct CleanupOnDrop {
    pub(crate) engine: Arc<Engine>,
    pub(crate) keys: Keys,
    pub(crate) token: Token,
    /// Taken once the attempt ended and needs no cleanup on drop.
    pub(crate) sets: Option<Vec<SetFuture>>,
}

impl Drop for CleanupOnDrop {
    fn drop(&mut self) {
        if let Some(sets) = self.sets.take() {
            self.engine
                .spawn_release(self.keys.clone(), self.token.clone(), sets, None);
        }
    }
}
