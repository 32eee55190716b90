//! The acquisition loop: attempts with fresh tokens, random delays between
//! them (cut short by a release announcement when fast hand-off is on),
//! a place in the waiter queue for a fair waiter or one a holder refused
//! (only its head tries), until the lock is granted, the retry count or
//! wait limit is spent, or misconfigured nodes make every retry futile;
//! then the error that says why.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{info, warn};

use crate::config::Retry;
use crate::error::{
    misconfigured, Error, NodeFailure, NodeFailureKind, Operation, ResourceName, Result,
};
use crate::keys::Shape;
use crate::quorum::attempt::{self, AttemptFailure};
use crate::quorum::claim::Claim;
use crate::quorum::engine::Engine;
use crate::quorum::handoff::Watch;
use crate::quorum::held::Held;
use crate::quorum::queue::{Place, Standing};
use crate::quorum::rule;
use crate::random;
use crate::stats::locks::{LockCounters, Outcome};
use crate::status::NodeView;
use crate::token::Token;

/// Takes the lock on `keys`, retrying as `retry` allows: at most its count
/// of retries after the first attempt, none that would start after its
/// time limit (counted from now); with `fair`, in the order of the
/// claim's waiter queue (see [`attempts`]).
///
/// # Cancel safety
///
/// Dropping the future spawns the release of whatever the current attempt
/// had set (see [`attempt::once`]).
pub(crate) async fn acquire(
    engine: &Arc<Engine>,
    claim: impl Claim,
    ttl: Duration,
    retry: Retry,
    fair: bool,
) -> Result<Held> {
    let start = Instant::now();
    let counters = engine.leases.of(claim.holding().primitive);
    let result = attempts(engine, &claim, ttl, retry, counters, fair).await;
    let outcome = match &result {
        Ok(_) => Outcome::Granted,
        Err(e) => Outcome::of(e),
    };
    counters.acquired(outcome, start.elapsed());
    result
}

/// Attempts at `claim` with fresh tokens, waiting between them, until
/// one is granted or `retry` gives up (see [`acquire`]).
///
/// With `fair`, the waiter joins the claim's waiter queue first
/// ([`Place`]) and tries only at its head; otherwise it tries at once and
/// joins only when a holder refused it and releases are announced. In the
/// queue, a release wakes the head alone, and a head that leaves (granted,
/// or gone) names the next.
async fn attempts(
    engine: &Arc<Engine>,
    claim: &impl Claim,
    ttl: Duration,
    retry: Retry,
    counters: &LockCounters,
    fair: bool,
) -> Result<Held> {
    let deadline = retry.deadline(Instant::now());
    let cfg = &engine.config;
    if cfg.read_only {
        return Err(Error::invalid(
            "this client was built read-only (Builder::read_only): it takes no lock, permit \
             or leadership",
        ));
    }
    let ttl = cfg.check_ttl(ttl)?;
    engine.check_slot(claim.keys())?;
    let mut attempts: u32 = 0;
    // The waiter's place in the queue and its subscription to
    // announcements, once it has them; the last attempt's failure.
    // `own`: its own channel, where it is named the head; `releases`: the
    // claim's release channel, listened to only at the head (or outside
    // the queue), so that a release reaches no process whose waiters wait
    // behind.
    let (mut place, mut own, mut releases, mut last) = (None, None, None::<Watch>, None);
    // A reader waits for writers only: it is not kept out by the readers'
    // marker that a look shows, so it tries at once when its turn comes;
    // without fair mode it waits outside the queue, where a writer's
    // release wakes every reader, who enter together.
    let reader = matches!(claim.keys().shape(), Shape::Read(_));
    let (mut named, mut rechecks) = (false, 0u32);
    if fair {
        (place, own) = queue(engine, claim).await;
    }
    loop {
        attempts = attempts.saturating_add(1);
        // In the queue: behind, look whether it is its turn; renew the
        // entry when due; join again, at the back, when it lapsed. A
        // waiter just come to the head looks at the holder's keys first
        // (below) rather than trying at once. A plain waiter named the
        // head takes the leaver's word for it (it promises no order);
        // a fair one hears a majority first.
        let mut arrived = std::mem::take(&mut named) && !fair && !reader;
        if let Some(p) = place.as_mut().filter(|_| arrived) {
            p.head = true;
        }
        if let Some(p) = place
            .as_mut()
            .filter(|p| !p.head || p.due() <= Instant::now())
        {
            match p.touch().await {
                Standing::Lapsed => {
                    // The old place leaves before the new one joins.
                    drop(place.take());
                    (place, own) = queue(engine, claim).await;
                }
                Standing::Head => arrived |= own.is_some() && !reader,
                Standing::Behind => {}
            }
        }
        let turn = place.as_ref().is_none_or(|p| p.head) && !arrived;
        if turn {
            let began = Instant::now();
            let attempt = attempt::once(engine, claim, Token::generate(), ttl).await;
            counters.attempted(began.elapsed());
            // Whether a quorum answered: granted, or its answers (yes or
            // no) counted — the failed and the unanswered alone decided
            // nothing. Tells when a quorum answers again after a time
            // without one.
            let answered = attempt.as_ref().err().is_none_or(|f| {
                let t = &f.tally;
                t.yes() + t.no() >= t.needed()
            });
            let waited = answered.then(|| counters.answered(claim.keys().first()));
            if let Some(waited) = waited.flatten() {
                info!(resource = %claim.name(), ?waited, "campaign: a quorum answers again");
            }
            match attempt {
                // Leaving the queue (dropping the place) names the next head.
                Ok(held) => return Ok(held),
                Err(failure) => {
                    if !answered && counters.unreachable(claim.keys().first(), began) {
                        let nodes: Vec<&str> =
                            failure.failures.iter().map(|f| f.node.as_str()).collect();
                        warn!(
                            resource = %claim.name(),
                            nodes = %nodes.join(","),
                            "campaign waiting: too few nodes answer for a quorum; it keeps trying"
                        );
                    }
                    last = Some(failure);
                }
            }
        }
        // Drawn from the OS: workers forked from one process must not
        // back off in step (see `random`).
        let delay = rule::backoff(cfg.retry_delay_min, cfg.retry_delay_max, random::unit());
        // A delay too large to add to an instant never fits.
        let out_of_time =
            deadline.is_some_and(|d| Instant::now().checked_add(delay).is_none_or(|t| t >= d));
        let futile = turn
            && last
                .as_ref()
                .is_some_and(|f| hopeless(engine.nodes.len(), f));
        if !retry.allows(attempts) || out_of_time || futile {
            return Err(match last {
                Some(failure) => give_up(engine, claim, ttl.duration, attempts, failure).await,
                None => behind(engine, claim, attempts),
            });
        }
        // Refused by a holder, outside the queue (no channel of its own
        // yet: a fair waiter has one from the start): join it and try
        // again at once if at its head. A plain reader does not join.
        let held = arrived || turn && last.as_ref().is_some_and(|f| f.tally.no() > 0);
        if held && own.is_none() && !reader && engine.handoff.is_some() {
            (place, own) = queue(engine, claim).await;
            continue;
        }
        // Waiting for a release: listen (the look that begins the wait
        // covers a release before the subscription).
        let first = place.as_ref().is_none_or(|p| p.head) && held && releases.is_none();
        if let Some(handoff) = engine.handoff.as_ref().filter(|_| first) {
            releases = Some(handoff.watch(claim.keys(), cfg.node_timeout).await);
        }
        // Wait before the next turn: no longer than the entry's renewal
        // and the caller's deadline allow; with a count of retries to
        // keep, within the retry delay as drawn (see [`patience`]).
        let limit = deadline
            .into_iter()
            .chain(place.as_ref().map(Place::due))
            .min();
        let patience = patience(delay, retry.count().is_none(), limit, Instant::now());
        match (&own, &releases, place.as_ref().map(|p| p.head)) {
            // Behind in the queue: until named the head, or the renewal. A
            // fair waiter named the head that a majority does not name yet
            // (the leave that named it is still on its way to the other
            // nodes) looks again shortly, a few times.
            (Some(own), _, Some(false)) => {
                let wait = match rechecks {
                    0 => patience(Duration::MAX, Instant::now()),
                    _ => RECHECK,
                };
                rechecks = rechecks.saturating_sub(1);
                tokio::select! {
                    () = own.released() => {
                        named = true;
                        rechecks = if fair { RECHECKS } else { 0 };
                    }
                    () = tokio::time::sleep(wait) => {}
                }
            }
            (_, Some(releases), _) if held => {
                wait_for_release(engine, claim, releases, patience).await;
            }
            (_, _, Some(false)) => {
                tokio::time::sleep(patience(Duration::MAX, Instant::now())).await;
            }
            _ => tokio::time::sleep(patience(Duration::ZERO, Instant::now())).await,
        }
    }
}

/// A place in `claim`'s waiter queue ([`Place::join`]; `None` when no
/// majority committed a ticket) and, with announcements on, the
/// subscription to its own channel, where it is named the head.
///
/// It listens before it joins: the head's leave that names it may come
/// before its join has returned.
async fn queue(engine: &Arc<Engine>, claim: &impl Claim) -> (Option<Place>, Option<Watch>) {
    let id = Token::generate();
    let own = match &engine.handoff {
        Some(handoff) => Some(handoff.named(&id, engine.config.node_timeout).await),
        None => None,
    };
    (Place::join(engine, claim.keys().queue(), id).await, own)
}

/// The error of a waiter that gave up in the queue before its turn came:
/// it made no attempt, and another owner held or waited for the claim.
fn behind(engine: &Engine, claim: &impl Claim, attempts: u32) -> Error {
    Error::Contended {
        resource: claim.name(),
        held_elsewhere: 0,
        granted: 0,
        needed: engine.needed(),
        nodes: engine.nodes.len(),
        attempts,
        failures: Vec::new(),
        permits: None,
    }
}

/// A failure no retry mends: nodes that refuse the credentials, the
/// rights, the key's type or the semaphore's limit refuse the next attempt
/// too (no retry reaches a quorum), and no fencing token is left.
fn hopeless(nodes: usize, failure: &AttemptFailure) -> bool {
    misconfigured(&failure.failures, nodes, failure.tally.needed())
        || failure.fence_exhausted.is_some()
        || failure.limit_mismatch.is_some()
}

/// How many times a fair waiter named the head looks again shortly when a
/// majority does not name it yet, and how long it waits between looks.
const RECHECKS: u32 = 3;
const RECHECK: Duration = Duration::from_millis(2);

/// The longest a watching waiter waits without an announcement before it
/// tries again anyway, unless its retry delay is longer: an announcement
/// missed (a subscriber reconnecting) costs at most this much.
const PATIENCE_MAX: Duration = Duration::from_secs(1);

/// How long a waiter that begins to wait at `start` waits for an
/// announcement before it tries anyway, given that the key was seen set
/// for `held_for` more at `now`: with `stretch` (no count of retries to
/// keep), its retry `delay` (drawn for this wait) up to the holder's
/// remaining time; else what is left of its retry delay since `start`.
/// Never past `limit` (the caller's deadline, a queued waiter's renewal).
///
/// Announcements tell a waiter about releases; what they cannot tell is
/// a holder that vanished (its keys expire, nobody announces) or an
/// announcement missed. So a waiter without a count tries again when the
/// holder's keys expire, but at the latest after [`PATIENCE_MAX`] (or its
/// retry delay, if longer), and never before its retry delay: it does not
/// poll every 0–200 ms as a waiter without announcements must.
///
/// A waiter with a count tries again at `start + delay` at the latest,
/// whatever it sees meanwhile. So its retries are spent in bounded time
/// under any stream of releases — each one within one retry delay of the
/// attempt before — as [`Retry`] documents.
fn patience(
    delay: Duration,
    stretch: bool,
    limit: Option<Instant>,
    start: Instant,
) -> impl Fn(Duration, Instant) -> Duration {
    let end = match stretch {
        true => limit,
        false => limit.into_iter().chain(start.checked_add(delay)).min(),
    };
    move |held_for, now| {
        let wait = if stretch {
            held_for.clamp(delay, PATIENCE_MAX.max(delay))
        } else {
            delay
        };
        end.map_or(wait, |end| wait.min(end.saturating_duration_since(now)))
    }
}

/// Waits for a release announcement, or at most as long as `patience`
/// allows (the fallback when an announcement is missed or the holder
/// vanished).
///
/// First the waiter reads how long the key stays set, on one node: not
/// set any more, it tries again at once; set, that time bounds the wait;
/// no answer (the node is down, or refuses), the retry delay does. The
/// look is a hint only: the attempt decides.
///
/// A release wakes one waiter of this client (the queue's head: the
/// others wait for their turn, not for releases), or every reader of a
/// read–write lock ([`Handoff`](crate::quorum::handoff::Handoff)).
async fn wait_for_release(
    engine: &Engine,
    claim: &impl Claim,
    watch: &Watch,
    patience: impl Fn(Duration, Instant) -> Duration,
) {
    let wait = match claim.hint(engine.look(claim.keys()).await) {
        NodeView::Free => return,
        // Held: until it expires at most; no answer: the retry delay.
        view => patience(view.held_for().unwrap_or_default(), Instant::now()),
    };
    tokio::select! {
        () = tokio::time::sleep(wait) => {}
        () = watch.released() => {}
    }
}

/// Names the fencing counter `key` in each `FENCERANGE` refusal among
/// `failures`: the script says what is wrong with a counter, not which one.
fn name_counter(failures: &mut [NodeFailure], key: &[u8]) {
    for failure in failures {
        if let NodeFailureKind::Redis { code, message } = &mut failure.kind {
            if code.eq_ignore_ascii_case("FENCERANGE") {
                *message = format!("{message} (key {})", ResourceName::new(key));
            }
        }
    }
}

/// The error after the last of `attempts`: fencing tokens exhausted
/// (its failures naming the counter), another limit recorded, no validity
/// left, too few nodes answering (an outage), or held by another owner
/// (for a refused lock over several resources, naming the one found held).
async fn give_up(
    engine: &Engine,
    claim: &impl Claim,
    ttl: Duration,
    attempts: u32,
    mut f: AttemptFailure,
) -> Error {
    if let Some(key) = claim.keys().fence_key() {
        name_counter(&mut f.failures, key);
    }
    let (resource, nodes) = (claim.name(), engine.nodes.len());
    if let Some(highest) = f.fence_exhausted {
        return Error::FenceExhausted { resource, highest };
    }
    if let Some((requested, recorded)) = f.limit_mismatch {
        return Error::LimitMismatch {
            semaphore: resource,
            requested,
            recorded,
        };
    }
    if let Some(elapsed) = f.exhausted {
        return Error::ValidityExhausted {
            resource,
            elapsed,
            ttl,
            attempts,
        };
    }
    let (granted, needed) = (f.tally.yes(), f.tally.needed());
    // Too few nodes answered for a quorum, or none refused: the attempt
    // failed for want of nodes, not to another owner.
    if f.tally.outage() || f.tally.no() == 0 {
        return Error::Unavailable {
            operation: Operation::Acquire,
            resource,
            granted,
            needed,
            nodes,
            attempts,
            unanswered: f.tally.pending(),
            failures: f.failures,
        };
    }
    let resource = match claim.resources() {
        Some(keys) => engine.held_resource(keys).await,
        None => resource,
    };
    Error::Contended {
        resource,
        held_elsewhere: f.tally.no(),
        granted,
        needed,
        nodes,
        attempts,
        failures: f.failures,
        permits: f.permits,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_patient_waiter_waits_for_the_holders_keys_within_bounds() {
        let now = Instant::now();
        let p = patience(100 * MS, true, None, now);
        // The holder's keys expire in 400 ms: that is when it looks again.
        assert_eq!(p(400 * MS, now), 400 * MS);
        // Never sooner than its retry delay, never later than a second.
        assert_eq!(p(3 * MS, now), 100 * MS);
        assert_eq!(p(Duration::from_secs(30), now), PATIENCE_MAX);
        assert_eq!(p(Duration::MAX, now), PATIENCE_MAX);
        // A retry delay above a second is kept as it is.
        let slow = patience(4000 * MS, true, None, now);
        assert_eq!(slow(Duration::from_secs(30), now), 4000 * MS);
        assert_eq!(slow(MS, now), 4000 * MS);
    }

    #[test]
    fn a_waiter_with_a_retry_count_keeps_its_retry_delay() {
        let now = Instant::now();
        let p = patience(150 * MS, false, None, now);
        assert_eq!(p(Duration::from_secs(30), now), 150 * MS);
        assert_eq!(p(MS, now), 150 * MS);
    }

    #[test]
    fn a_waiter_with_a_retry_count_never_waits_past_its_retry_delay() {
        // Woken 100 ms into its 150 ms, it finds the key taken again: it
        // waits what is left, not another 150 ms.
        let start = Instant::now();
        let p = patience(150 * MS, false, None, start);
        assert_eq!(p(Duration::from_secs(30), start + 100 * MS), 50 * MS);
        assert_eq!(p(MS, start + 149 * MS), MS);
        assert_eq!(p(MS, start + 200 * MS), Duration::ZERO);
        // The caller's deadline, if sooner, still ends it.
        let p = patience(150 * MS, false, Some(start + 40 * MS), start);
        assert_eq!(p(Duration::from_secs(30), start), 40 * MS);
        // A delay too large to add to an instant: no bound but the delay.
        let huge = patience(Duration::MAX, false, None, start);
        assert_eq!(huge(MS, start), Duration::MAX);
    }

    #[test]
    fn no_wait_goes_past_the_callers_deadline() {
        let now = Instant::now();
        let p = patience(100 * MS, true, Some(now + 250 * MS), now);
        assert_eq!(p(Duration::from_secs(30), now), 250 * MS);
        let past = patience(100 * MS, true, Some(now), now);
        assert_eq!(past(Duration::from_secs(30), now + MS), Duration::ZERO);
        let huge = patience(Duration::MAX, true, None, now);
        assert_eq!(huge(MS, now), Duration::MAX);
    }
}
