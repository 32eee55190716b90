//! One acquisition attempt, the same for every [`Claim`]: its command on
//! every node, decided as its votes count; for a fenced claim, followed by
//! the commit of the fencing token. Both phases are fan-outs
//! ([`Engine::ask`]); the deadline the holder gets is
//! [`Ttl::deadline`](crate::validity::Ttl::deadline) from the attempt's start.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use tracing::{debug, warn, Instrument};

use crate::error::{NodeFailure, Occupancy};
use crate::keys::Keys;
use crate::lease::state::Lease;
use crate::member::Node;
use crate::node::commands::{Announce, Command};
use crate::node::fence;
use crate::node::grant::Grant;
use crate::node::reply::{Kind, Vote};
use crate::quorum::claim::{Claim, Won};
use crate::quorum::engine::Engine;
use crate::quorum::fanout::{Outcome, Plan};
use crate::quorum::held::Held;
use crate::quorum::repair::Repairs;
use crate::quorum::rule::Tally;
use crate::quorum::set_order::SetFuture;
use crate::token::Token;
use crate::validity::{self, Term, Ttl};

/// Why an attempt failed, kept to build the final error after the retries.
pub(crate) struct AttemptFailure {
    pub(crate) tally: Tally,
    pub(crate) failures: Vec<NodeFailure>,
    /// Set when a quorum said yes but no validity was left.
    pub(crate) exhausted: Option<Duration>,
    /// Set, to the highest counter read, when no fencing token above it is
    /// left (see [`crate::MAX_FENCE`]); retrying cannot help.
    pub(crate) fence_exhausted: Option<u64>,
    /// A semaphore's limit asked with and the one its nodes record
    /// instead ([`Won::limit_mismatch`]); retrying cannot help.
    pub(crate) limit_mismatch: Option<(u32, u32)>,
    /// For permits, what the refusing nodes reported.
    pub(crate) permits: Option<Occupancy>,
}

/// One attempt at `claim` with a fresh `token`: its command on every node
/// at once, decided as its votes count; for a fenced claim, followed by
/// the commit of the fencing token.
///
/// On failure every key the claim may have set is released on every node
/// before this returns (each release queued behind that node's `SET`,
/// waiting at most one node timeout). If this future is dropped
/// mid-flight, the same cleanup is spawned.
pub(crate) async fn once<C: Claim>(
    engine: &Arc<Engine>,
    claim: &C,
    token: Token,
    ttl: Ttl,
) -> Result<Held, AttemptFailure> {
    let span = tracing::debug_span!("acquire_attempt", resource = %claim.name(), token = %token);
    async move {
        // The clock the validity counts from, the validity's end, how long
        // each node may take, the `SET`s a release on each node waits
        // behind, and the release of every key spawned if this is dropped
        // (until the attempt disarms `guard`).
        let start = Instant::now();
        let valid_until = ttl.deadline(start).unwrap_or(start);
        let timeout = engine.config.node_timeout.min(ttl.budget());
        let sets = SetFuture::for_attempt(engine.nodes.len());
        let cleanup = (
            engine.clone(),
            claim.keys().clone(),
            token.clone(),
            sets.clone(),
        );
        let mut guard = CleanupOnDrop(Some(cleanup));
        // The claim's command on every node at once, each call marking its
        // node's `SET` over when it ends.
        let (command, shape, mut votes) = claim.ask(&token, ttl.duration, engine.needed());
        let call = |i: usize, node: Node, command: Arc<Command>, window| {
            let over = sets[i].mark_over_on_drop();
            async move {
                let _over = over;
                node.acquire(&command, shape, window).await
            }
        };
        let plan = Plan {
            timeout,
            ..engine.majority()
        };
        let mut set = engine.ask(plan, command, call, &mut votes).await;
        let won = claim.won(&votes, set.tally.clone());
        let mut failure = AttemptFailure {
            tally: won.tally.clone(),
            failures: std::mem::take(&mut set.failures),
            exhausted: None,
            fence_exhausted: None,
            limit_mismatch: won.limit_mismatch,
            permits: won.permits,
        };
        let fence = fenced(engine, &won, &set, &token, valid_until, &mut failure).await;
        // One clock read: the validity left is the deadline's, at `now`.
        let now = Instant::now();
        let elapsed = now.saturating_duration_since(start);
        let valid = !validity::left(valid_until, now).is_zero();
        guard.0 = None;
        match fence {
            Ok(fence) if valid => {
                debug!(?elapsed, yes = failure.tally.yes(), ?fence, "granted");
                if let Some((spare, on)) = claim.beyond(&votes, &set.replies) {
                    engine.spawn_release(spare, token.clone(), sets.clone(), None, Some(&on));
                }
                let term = Term {
                    deadline: valid_until,
                    ttl,
                };
                let lease = Lease::new(
                    won.keys.clone(),
                    term,
                    engine.leases.clone(),
                    claim.holding(),
                );
                return Ok(Held {
                    engine: engine.clone(),
                    keys: won.keys,
                    token,
                    fence,
                    sets,
                    lease: Arc::new(lease),
                    extending: tokio::sync::Mutex::new(()),
                    repairs: Arc::new(Repairs::new(engine.nodes.len())),
                });
            }
            // Granted, but no validity left.
            Ok(_) => failure.exhausted = Some(elapsed),
            Err(()) => {}
        }
        let tally = &failure.tally;
        debug!(?elapsed, ?tally, "attempt failed");
        clean_up(engine, claim.keys(), &token, sets, tally, timeout).await;
        Err(failure)
    }
    .instrument(span)
    .await
}

/// Releases every key of a failed attempt before the next one (a key
/// left from this one would refuse it), but waits at most `timeout`: a
/// hung node gets its release in the background, queued behind its `SET`.
/// Lost to a holder (`tally`), the cleanup is silent: that holder
/// announces when it lets go, and waking the waiters now would only send
/// them to its keys.
async fn clean_up(
    engine: &Engine,
    keys: &Keys,
    token: &Token,
    sets: Vec<SetFuture>,
    tally: &Tally,
    timeout: Duration,
) {
    let announce = match tally.held_elsewhere() {
        true => Announce::Silently,
        false => Announce::Waiters,
    };
    let plan = engine.everyone(engine.config.node_timeout);
    let cleanup = engine.release_among(plan, keys, token, sets, None, announce);
    let _ = tokio::time::timeout(timeout, cleanup).await;
}

/// The fencing token of a granted attempt (`set`): none without a counter;
/// otherwise the token proposed above the counters the granting nodes read
/// (its replies, [`fence::propose`]) for the slot `won`, committed: every
/// node still holding the token commits it — a lock's raises its counter
/// to it from strictly below, a permit's counts once per round and slot;
/// only those count, so two commits of one token cannot both reach a
/// majority (`docs/fencing.md`). Decided at quorum, and before the
/// validity ends.
///
/// `Err` fails the attempt: `set` did not grant it, or the commit failed
/// (`failure` then holds its tally and failures), or no token is left
/// (`failure` then holds the highest counter).
async fn fenced(
    engine: &Engine,
    won: &Won,
    set: &Outcome<Grant>,
    token: &Token,
    valid_until: Instant,
    failure: &mut AttemptFailure,
) -> Result<Option<u64>, ()> {
    if !set.reached() {
        return Err(());
    }
    if won.keys.fence_key().is_none() {
        return Ok(None);
    }
    let counters = set.replies.iter().filter(|(_, g)| g.granted());
    let counters = counters.map(|(_, g)| g.counter);
    let proposed = fence::propose(counters, won.slot, won.per_round).map_err(|highest| {
        debug!(highest, "fencing tokens exhausted");
        failure.fence_exhausted = Some(highest);
    })?;
    let call = |_, node: Node, command: Arc<Command>, window| async move {
        node.says(&command, Kind::Commit, window).await
    };
    let vote = &mut |_, &raised: &bool| if raised { Vote::Yes } else { Vote::No };
    let Some(command) = Command::commit_fence(&won.keys, token, proposed) else {
        return Ok(None);
    };
    let commit = engine
        .ask(engine.before(valid_until), command, call, vote)
        .await;
    if commit.reached() {
        warn_if_ahead(&won.keys, proposed);
        return Ok(Some(proposed));
    }
    debug!(tally = ?commit.tally, "fence commit failed");
    failure.failures.extend(commit.failures);
    failure.tally = commit.tally;
    Err(())
}

/// Warns when `token` runs ahead of this client's clock by more than
/// [`fence::AHEAD`]: the counter it was committed to may no longer be
/// below a node's time, which a counter lost in a restart without
/// persistence starts from (`docs/fencing.md`, "A counter that is lost").
/// Once per counter, give or take: a counter's warning is kept in one of
/// 64 slots by the hash of its key, so another counter in that slot may
/// repeat it.
fn warn_if_ahead(keys: &Keys, token: u64) {
    static WARNED: [AtomicU64; 64] = [const { AtomicU64::new(0) }; 64];
    let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH);
    let now = now.map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
    let Some(counter) = keys
        .fence_key()
        .filter(|_| fence::ahead_of_time(token, now))
    else {
        return;
    };
    let mut hasher = DefaultHasher::new();
    counter.hash(&mut hasher);
    let hash = hasher.finish() | 1;
    let slot = &WARNED[(hash % 64) as usize];
    if slot.swap(hash, Ordering::Relaxed) != hash {
        warn!(
            counter = %String::from_utf8_lossy(counter),
            token,
            now,
            "fencing token ahead of this client's clock: after a restart of every \
             node without persistence, tokens may repeat (docs/fencing.md)"
        );
    }
}

/// Spawns the release of a half-finished attempt when the future running
/// it is dropped (e.g. by `tokio::time::timeout`), so its keys do not
/// linger until their TTL.
/// What it releases — the keys, the token and the `SET`s — is taken once
/// the attempt ended and needs no cleanup on drop.
struct CleanupOnDrop(Option<(Arc<Engine>, Keys, Token, Vec<SetFuture>)>);

impl Drop for CleanupOnDrop {
    fn drop(&mut self) {
        if let Some((engine, keys, token, sets)) = self.0.take() {
            engine.spawn_release(keys, token, sets, None, None);
        }
    }
}
