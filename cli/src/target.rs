//! What `run` holds and `status` shows: the lock RESOURCE, or a permit of
//! the counting semaphore RESOURCE (`--permits L`). Taking either gives a
//! `Lock` (a permit is the lock over its slot), so everything after the
//! acquisition — renewal, the lost signal, the supervision, the release —
//! is one code path for both.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use quorumlock::{Lock, NodeView, Redlock, Retry, Status};

/// The lock, or one permit of a semaphore of `permits` permits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The lock RESOURCE.
    Lock,
    /// One permit of the semaphore RESOURCE, which has `permits`.
    Permit {
        /// The semaphore's number of permits.
        permits: u32,
    },
}

/// What an acquisition took: the lock, and for a permit its slot.
pub struct Taken {
    /// The lock, or the lock over the permit's slot.
    pub lock: Lock,
    /// The permit's slot (`0..permits`); `None` for the lock.
    pub slot: Option<usize>,
}

/// One acquisition attempt, boxed: a lock's and a permit's are different
/// futures.
pub type Attempt = Pin<Box<dyn Future<Output = quorumlock::Result<Taken>>>>;

/// What every node holds for the target: one key for the lock, one per
/// slot for a semaphore.
pub struct Reading {
    /// Per key (the lock's; the semaphore's slots in order), every node's
    /// view; empty when the read was refused before anything was sent.
    pub keys: Vec<Status>,
    /// The one-line summary (the library's `Display`, or the refusal).
    text: String,
}

impl Reading {
    /// Per key, the nodes' views.
    pub fn views(&self) -> Vec<&[(String, NodeView)]> {
        self.keys.iter().map(|s| s.nodes.as_slice()).collect()
    }
}

impl fmt::Display for Reading {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Target {
    /// The lock without `--permits`, a permit with it.
    pub fn new(permits: Option<u32>) -> Self {
        permits.map_or(Target::Lock, |permits| Target::Permit { permits })
    }

    /// `lock` or `permit`, for messages.
    pub fn noun(self) -> &'static str {
        match self {
            Target::Lock => "lock",
            Target::Permit { .. } => "permit",
        }
    }

    /// `the lock` or `a permit`: what a waiter waits for, for messages.
    pub fn wanted(self) -> &'static str {
        match self {
            Target::Lock => "the lock",
            Target::Permit { .. } => "a permit",
        }
    }

    /// One attempt to take the target, trying as `retry` says.
    pub fn attempt(
        self,
        redlock: &Redlock,
        resource: &str,
        ttl: Duration,
        fenced: bool,
        retry: Retry,
    ) -> Attempt {
        match self {
            Target::Lock => {
                let mut request = redlock.lock(resource, ttl).retry(retry);
                if fenced {
                    request = request.fenced();
                }
                Box::pin(async move {
                    let lock = request.acquire().await?;
                    Ok(Taken { lock, slot: None })
                })
            }
            Target::Permit { permits } => {
                let mut request = redlock.semaphore(resource, permits, ttl).retry(retry);
                if fenced {
                    request = request.fenced();
                }
                Box::pin(async move {
                    let permit = request.acquire().await?;
                    let slot = permit.slots().first().copied();
                    Ok(Taken {
                        lock: permit.into_lock(),
                        slot,
                    })
                })
            }
        }
    }

    /// Reads what every node holds for the target, taking nothing.
    pub async fn read(self, redlock: &Redlock, resource: &str) -> Reading {
        match self {
            Target::Lock => {
                let status = redlock.status(resource).await;
                Reading {
                    text: status.to_string(),
                    keys: vec![status],
                }
            }
            Target::Permit { permits } => match redlock.semaphore_status(resource, permits).await {
                Ok(status) => Reading {
                    text: status.to_string(),
                    keys: status.slots,
                },
                Err(e) => Reading {
                    text: e.to_string(),
                    keys: Vec::new(),
                },
            },
        }
    }
}
