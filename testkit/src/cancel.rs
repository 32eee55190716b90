//! Dropping futures mid-flight, as a caller's `select!`, timeout or task
//! abort would: a [`Cancel`] plan drawn from a seed, and the runner that
//! carries it out.
//!
//! A future is dropped either when a short time limit passes
//! ([`Cancel::After`]) or after it was polled a number of times without
//! finishing ([`Cancel::Polls`]): each poll is one await point reached, so
//! the second reaches states the first cannot (between the requests going
//! out and the replies coming back, in the middle of a multi-step protocol).

use std::future::Future;
use std::task::Poll;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::Rng;

/// When to drop a future.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cancel {
    /// Let it finish.
    Never,
    /// Drop it if it has not finished within this time.
    After(Duration),
    /// Drop it after this many polls that left it pending (at least 1).
    Polls(u32),
}

impl Cancel {
    /// With probability `1 / one_in` (never when 0) a cancellation: half of
    /// them a time limit `U(0, within)`, half a drop after 1–4 polls.
    pub fn draw(rng: &mut StdRng, one_in: u32, within: Duration) -> Self {
        if one_in == 0 || rng.random_range(0..one_in) != 0 {
            return Cancel::Never;
        }
        if rng.random_bool(0.5) {
            Cancel::After(within.mul_f64(rng.random::<f64>()))
        } else {
            Cancel::Polls(rng.random_range(1..=4))
        }
    }
}

/// Runs `fut` under `cancel`; `None` when it was dropped unfinished.
/// `after_poll` runs after every poll of `fut` (and after the drop), so a
/// caller can watch state that only changes while the future runs.
pub async fn observed<F: Future>(
    cancel: Cancel,
    fut: F,
    mut after_poll: impl FnMut(),
) -> Option<F::Output> {
    let mut fut = Box::pin(fut);
    let mut polls_left = match cancel {
        Cancel::Polls(n) => Some(n.max(1)),
        _ => None,
    };
    let stepped = std::future::poll_fn(|cx| {
        let out = fut.as_mut().poll(cx);
        after_poll();
        match out {
            Poll::Ready(v) => Poll::Ready(Some(v)),
            Poll::Pending => match &mut polls_left {
                Some(left) => {
                    *left -= 1;
                    if *left == 0 {
                        Poll::Ready(None)
                    } else {
                        Poll::Pending
                    }
                }
                None => Poll::Pending,
            },
        }
    });
    let out = match cancel {
        Cancel::After(limit) => tokio::time::timeout(limit, stepped).await.ok().flatten(),
        Cancel::Never | Cancel::Polls(_) => stepped.await,
    };
    // Drop the future itself now, so the observer sees what its drop
    // leaves.
    drop(fut);
    after_poll();
    out
}

/// [`observed`] without an observer.
pub async fn run<F: Future>(cancel: Cancel, fut: F) -> Option<F::Output> {
    observed(cancel, fut, || {}).await
}
