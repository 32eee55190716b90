//! What `run` and `elect` hold and `status` shows: the lock RESOURCE,
//! permits of the counting semaphore RESOURCE (`--permits L`), or the
//! leadership of the election RESOURCE (`elect`). Taking any of them gives
//! a `Lock` (permits are the lock over their slots, a leadership a fenced
//! lock whose token is the epoch), so everything after the acquisition —
//! renewal, the lost signal, the supervision, the release — is one code
//! path for all three.

use std::fmt;
use std::future::Future;
use std::ops::Deref;
use std::pin::Pin;
use std::time::Duration;

use quorumlock::{Leadership, Lock, NodeView, Redlock, Retry, Status, ELECTION_KEY_PREFIX};

/// The lock, permits of a semaphore, or the leadership of an election.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The lock RESOURCE.
    Lock {
        /// Ask for a fencing token.
        fenced: bool,
    },
    /// `take` permits of the semaphore RESOURCE, which has `permits`.
    Permit {
        /// The semaphore's number of permits.
        permits: u32,
        /// How many of them are taken at once.
        take: u32,
        /// Ask for a fencing token.
        fenced: bool,
    },
    /// The read side of the read–write lock RESOURCE (`--shared`).
    Shared,
    /// The leadership of the election RESOURCE (always fenced: the token
    /// is the epoch), proclaiming `value`.
    Leadership {
        /// What observers read while this process leads.
        value: String,
    },
}

/// What an acquisition took, and for permits their slots.
pub struct Taken {
    /// The lock, the lock over the permits' slots, or the leadership.
    pub lock: Held,
    /// The permits' slots (each in `0..permits`); empty for the others.
    pub slots: Vec<u32>,
}

/// A held lock, or a leadership: one [`Lock`] to renew and watch; a
/// leadership is released by resigning.
pub enum Held {
    /// The lock, or the lock over permits' slots.
    Lock(Lock),
    /// A leadership.
    Leadership(Leadership),
}

impl Deref for Held {
    type Target = Lock;

    fn deref(&self) -> &Lock {
        match self {
            Held::Lock(lock) => lock,
            Held::Leadership(leadership) => leadership,
        }
    }
}

impl Held {
    /// Releases the lock; resigns the leadership (its record goes too).
    pub async fn release(self) -> quorumlock::Result<()> {
        match self {
            Held::Lock(lock) => lock.release().await,
            Held::Leadership(leadership) => leadership.resign().await,
        }
    }
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
    /// `run`'s target: the lock without `--permits`, `take` permits (1
    /// without `--take`) with it.
    pub fn new(permits: Option<u32>, take: Option<u32>, fenced: bool) -> Self {
        permits.map_or(Target::Lock { fenced }, |permits| Target::Permit {
            permits,
            take: take.unwrap_or(1),
            fenced,
        })
    }

    /// `lock`, `permit` or `leadership`, for messages.
    pub fn noun(&self) -> &'static str {
        match self {
            Target::Lock { .. } => "lock",
            Target::Permit { .. } => "permit",
            Target::Shared => "read lock",
            Target::Leadership { .. } => "leadership",
        }
    }

    /// `the lock`, `a permit` (`the permits`) or `the leadership`: what a
    /// waiter waits for, for messages.
    pub fn wanted(&self) -> &'static str {
        match self {
            Target::Lock { .. } => "the lock",
            Target::Permit { take: 1, .. } => "a permit",
            Target::Permit { .. } => "the permits",
            Target::Shared => "the read side",
            Target::Leadership { .. } => "the leadership",
        }
    }

    /// One attempt to take the target, trying as `retry` says; in turn,
    /// in the resource's waiter queue, with `fair`.
    pub fn attempt(
        &self,
        redlock: &Redlock,
        resource: &str,
        ttl: Duration,
        retry: Retry,
        fair: bool,
    ) -> Attempt {
        match self {
            Target::Lock { fenced } => {
                let mut request = redlock.lock(resource, ttl).retry(retry);
                if fair {
                    request = request.fair();
                }
                if *fenced {
                    request = request.fenced();
                }
                Box::pin(async move {
                    let lock = Held::Lock(request.acquire().await?);
                    Ok(Taken {
                        lock,
                        slots: Vec::new(),
                    })
                })
            }
            Target::Permit {
                permits,
                take,
                fenced,
            } => {
                let mut request = redlock
                    .semaphore(resource, *permits, ttl)
                    .take(*take)
                    .retry(retry);
                if fair {
                    request = request.fair();
                }
                if *fenced {
                    request = request.fenced();
                }
                Box::pin(async move {
                    let permit = request.acquire().await?;
                    let slots = permit.slots().to_vec();
                    Ok(Taken {
                        lock: Held::Lock(permit.into_lock()),
                        slots,
                    })
                })
            }
            Target::Shared => {
                let mut request = redlock.read(resource, ttl).retry(retry);
                if fair {
                    request = request.fair();
                }
                Box::pin(async move {
                    let lock = Held::Lock(request.acquire().await?);
                    Ok(Taken {
                        lock,
                        slots: Vec::new(),
                    })
                })
            }
            Target::Leadership { value } => {
                let mut campaign = redlock
                    .campaign(resource, ttl)
                    .value(value.as_str())
                    .retry(retry);
                if fair {
                    campaign = campaign.fair();
                }
                Box::pin(async move {
                    let lock = Held::Leadership(campaign.lead().await?);
                    Ok(Taken {
                        lock,
                        slots: Vec::new(),
                    })
                })
            }
        }
    }

    /// Reads what every node holds for the target, taking nothing: the
    /// lock's key, the semaphore's slots, the election's leadership lock.
    pub async fn read(&self, redlock: &Redlock, resource: &str) -> Reading {
        let key = match self {
            Target::Lock { .. } => resource.as_bytes().to_vec(),
            Target::Shared => {
                return match redlock.rwlock_status(resource).await {
                    Ok(status) => Reading {
                        text: status.to_string(),
                        keys: vec![status.writer],
                    },
                    Err(e) => Reading {
                        text: e.to_string(),
                        keys: Vec::new(),
                    },
                }
            }
            Target::Leadership { .. } => {
                [ELECTION_KEY_PREFIX, b"{", resource.as_bytes(), b"}"].concat()
            }
            Target::Permit { permits, .. } => {
                return match redlock.semaphore_status(resource, *permits).await {
                    Ok(status) => Reading {
                        text: status.to_string(),
                        keys: status.slots,
                    },
                    Err(e) => Reading {
                        text: e.to_string(),
                        keys: Vec::new(),
                    },
                }
            }
        };
        let status = redlock.status(key).await;
        let mut text = status.to_string();
        if let Target::Leadership { .. } = self {
            // Name the election, and its leader by value and epoch: the key
            // and a token prefix say little to an operator.
            text = match redlock.leader(resource).await {
                Ok(Some(leader)) => format!(
                    "election {resource:?} is led by {:?} (epoch {})",
                    String::from_utf8_lossy(&leader.value),
                    leader.epoch
                ),
                Ok(None) => format!("election {resource:?} has no leader a quorum agrees on"),
                Err(e) => format!("election {resource:?}: {e}"),
            };
        }
        Reading {
            text,
            keys: vec![status],
        }
    }
}
