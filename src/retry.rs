//! The acquisition loop: attempts with fresh tokens, random delays between
//! them (cut short by a release announcement when fast hand-off is on),
//! until the lock is granted or the retry count or wait limit is spent;
//! then the error that says why.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::attempt::{self, Attempt, AttemptFailure};
use crate::engine::Engine;
use crate::error::{Error, Operation, Result};
use crate::handoff::Watch;
use crate::keys::Keys;
use crate::lock::Lock;
use crate::quorum;
use crate::token::Token;

/// Takes the lock on `keys`: at most `retries` retries after the first
/// attempt, and none that would start after `deadline`.
///
/// # Cancel safety
///
/// Dropping the future spawns the release of whatever the current attempt
/// had set (see [`attempt::acquire_once`]).
pub(crate) async fn acquire(
    engine: &Arc<Engine>,
    keys: Keys,
    ttl: Duration,
    retries: u32,
    deadline: Option<Instant>,
) -> Result<Lock> {
    let cfg = &engine.config;
    let (ttl, drift) = cfg.check_ttl(ttl)?;
    let mut attempts: u32 = 0;
    let mut watch: Option<Watch> = None;
    let mut spread = HANDOFF_JITTER;
    let mut woken = false;
    loop {
        attempts = attempts.saturating_add(1);
        let token = Token::generate();
        let failure = match attempt::acquire_once(engine, &keys, &token, ttl, drift).await {
            Attempt::Granted {
                deadline: valid_until,
                sets,
                fence,
            } => {
                return Ok(Lock::new(
                    engine.clone(),
                    keys,
                    token,
                    valid_until,
                    ttl,
                    sets,
                    fence,
                ));
            }
            Attempt::Failed(failure) => failure,
        };
        let delay = quorum::backoff(
            cfg.retry_delay_min,
            cfg.retry_delay_max,
            rand::random::<f64>(),
        );
        // A delay too large to add to an instant never fits.
        let out_of_time =
            deadline.is_some_and(|d| Instant::now().checked_add(delay).is_none_or(|t| t >= d));
        if attempts > retries || out_of_time || failure.fence_exhausted.is_some() {
            return Err(error(engine, &keys, ttl, attempts, failure));
        }
        let held = failure.tally.no() > 0;
        if held && woken {
            // Woken by a release, and another waiter was faster.
            spread = widened(spread);
        }
        woken = false;
        match (&engine.handoff, &watch) {
            (Some(handoff), None) if held => {
                // Subscribe, then retry at once: a release that came before
                // the subscription is not missed.
                watch = Some(handoff.watch(&keys, cfg.node_timeout).await);
            }
            (_, Some(w)) if held => {
                woken = wait_for_release(engine, &keys, w, delay, &mut spread).await;
            }
            _ => tokio::time::sleep(delay).await,
        }
    }
}

/// Longest pause between a release announcement and a woken waiter's look
/// at the key, at first: waiters woken together spread over it, so that the
/// first one's `SET` is on the nodes before most of the others look. A
/// waiter that finds the key taken again doubles it, up to
/// [`HANDOFF_SPREAD_MAX`]: the more waiters, the wider they spread.
const HANDOFF_JITTER: Duration = Duration::from_millis(1);

/// The widest spread of a waiter that keeps losing.
const HANDOFF_SPREAD_MAX: Duration = Duration::from_millis(16);

/// The spread after a loss: doubled, at most [`HANDOFF_SPREAD_MAX`].
fn widened(spread: Duration) -> Duration {
    spread.saturating_mul(2).min(HANDOFF_SPREAD_MAX)
}

/// Waits for a release announcement, or at most `delay` (the retry delay,
/// the fallback when an announcement is missed); true when a release ended
/// the wait.
///
/// A release wakes every waiting client (each subscribed on the nodes).
/// Woken, a waiter lets a random part of its spread pass and then
/// looks at the key on one node: if it is set again, another waiter was
/// faster, and this one goes back to waiting instead of sending a whole
/// attempt (five `SET`s, then five releases, whose announcements would
/// wake everyone once more). The look is a hint only: anything but "set"
/// ends the wait, and the attempt decides.
async fn wait_for_release(
    engine: &Engine,
    keys: &Keys,
    watch: &Watch,
    delay: Duration,
    spread: &mut Duration,
) -> bool {
    let fallback = tokio::time::sleep(delay);
    tokio::pin!(fallback);
    loop {
        tokio::select! {
            () = &mut fallback => return false,
            () = watch.released() => {}
        }
        let jitter = (*spread).mul_f64(rand::random::<f64>());
        tokio::select! {
            () = &mut fallback => return false,
            () = tokio::time::sleep(jitter) => {}
        }
        if !engine.taken_again(keys).await {
            return true;
        }
        // Another waiter was faster: spread wider next time.
        *spread = widened(*spread);
    }
}

/// The error after the last attempt: fencing tokens exhausted, no validity
/// left, too few nodes answering (an outage), or held by another owner.
fn error(engine: &Engine, keys: &Keys, ttl: Duration, attempts: u32, f: AttemptFailure) -> Error {
    let resource = keys.name();
    let nodes = engine.nodes.len();
    if let Some(highest) = f.fence_exhausted {
        return Error::FenceExhausted { resource, highest };
    }
    if let Some(elapsed) = f.exhausted {
        return Error::ValidityExhausted {
            resource,
            elapsed,
            ttl,
            attempts,
        };
    }
    if f.tally.outage() || f.tally.no() == 0 {
        Error::Unavailable {
            operation: Operation::Acquire,
            resource,
            granted: f.tally.yes(),
            needed: f.tally.needed(),
            nodes,
            attempts,
            failures: f.failures,
        }
    } else {
        Error::Contended {
            resource,
            held_elsewhere: f.tally.no(),
            granted: f.tally.yes(),
            needed: f.tally.needed(),
            nodes,
            attempts,
            failures: f.failures,
        }
    }
}
