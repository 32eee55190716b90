//! The held lock: its validity, extension, release, and release on drop.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::error::{Error, LostReason, Result};
use crate::fanout::{self, Engine, SetFuture};
use crate::keys::Keys;
use crate::token::Token;

/// A lock held on a quorum of nodes.
///
/// The lock is yours until [`validity`](Lock::validity) reaches zero; do the
/// protected work inside that window, or [`extend`](Lock::extend) it first.
/// [`release`](Lock::release) ends it early. Dropping a `Lock` without
/// releasing it spawns a best-effort release on the current tokio runtime
/// (never blocking); without a runtime the keys simply expire with their TTL.
///
/// # Examples
///
/// ```no_run
/// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
/// use std::time::Duration;
///
/// let lock = redlock.acquire("report:daily", Duration::from_secs(30)).await?;
/// println!("holding {:?} for {:?}", lock.resource(), lock.validity());
/// lock.extend(Duration::from_secs(30)).await?;
/// lock.release().await?;
/// # Ok(())
/// # }
/// ```
#[must_use = "a dropped Lock is released at once; keep it while the work runs"]
pub struct Lock {
    held: Arc<Held>,
    released: bool,
}

/// The state a lock shares with whatever extends it.
pub(crate) struct Held {
    engine: Arc<Engine>,
    keys: Keys,
    token: Token,
    fence: Option<u64>,
    sets: Vec<SetFuture>,
    state: Mutex<State>,
    /// Serialises extensions, so two racing ones cannot leave the nodes with
    /// a shorter TTL than the deadline recorded here.
    extending: tokio::sync::Mutex<()>,
}

#[derive(Debug, Clone, Copy)]
struct State {
    deadline: Instant,
    lost: bool,
}

impl Lock {
    pub(crate) fn new(
        engine: Arc<Engine>,
        keys: Keys,
        token: Token,
        deadline: Instant,
        sets: Vec<SetFuture>,
        fence: Option<u64>,
    ) -> Self {
        Self {
            held: Arc::new(Held {
                engine,
                keys,
                token,
                fence,
                sets,
                state: Mutex::new(State {
                    deadline,
                    lost: false,
                }),
                extending: tokio::sync::Mutex::new(()),
            }),
            released: false,
        }
    }

    /// The resource name, byte for byte as it is stored as the Redis key.
    /// For a lock over several resources, the first one.
    pub fn resource(&self) -> &[u8] {
        self.held.keys.first()
    }

    /// Every resource this lock covers, in the order given (one for a
    /// lock taken with [`acquire`](crate::Redlock::acquire)).
    pub fn resources(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        self.held.keys.resources().iter().map(Vec::as_slice)
    }

    /// The fencing token of a lock taken with
    /// [`acquire_fenced`](crate::Redlock::acquire_fenced): strictly larger
    /// than that of every earlier holder of the resource. `None` for an
    /// unfenced lock.
    ///
    /// Pass it with every write to the protected resource, and have the
    /// resource reject a write whose token is lower than one it has seen.
    pub fn fence(&self) -> Option<u64> {
        self.held.fence
    }

    /// Time left in which the lock is known to be held; zero once it has
    /// expired or was found lost. Measured on the monotonic clock.
    pub fn validity(&self) -> Duration {
        let state = self.held.state();
        if state.lost {
            Duration::ZERO
        } else {
            state.deadline.saturating_duration_since(Instant::now())
        }
    }

    /// The monotonic instant at which the validity ends.
    pub fn deadline(&self) -> Instant {
        self.held.state().deadline
    }

    /// True once an extension failed or the validity ran out.
    pub fn is_lost(&self) -> bool {
        self.validity().is_zero()
    }

    /// The first characters of this lock's token, as seen in `redis-cli` and
    /// in this crate's logs. The full token is never exposed.
    pub fn token_prefix(&self) -> &str {
        self.held.token.prefix()
    }

    /// Extends the lock to `ttl` from now on every node that still holds
    /// this lock's token (compare-and-pexpire; an expired key is never
    /// re-created). Returns the new validity.
    ///
    /// Success needs a majority of nodes to extend before the current
    /// validity runs out; the new validity is `ttl − elapsed − drift`, as for
    /// acquire. Concurrent calls on the same lock run one after another.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a TTL of zero, not above the drift, or
    /// beyond [`MAX_TTL`](crate::MAX_TTL) (the lock is untouched).
    /// [`Error::Lost`] when no majority extended in time; the lock then
    /// counts as lost for good: [`validity`](Lock::validity) is zero and later
    /// calls fail at once.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may leave some nodes extended and others not; the
    /// recorded deadline is unchanged, which stays a safe (earlier) bound.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(lock: &quorumlock::Lock) -> Result<(), quorumlock::Error> {
    /// use std::time::Duration;
    /// let left = lock.extend(Duration::from_secs(60)).await?;
    /// assert!(left <= Duration::from_secs(60));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn extend(&self, ttl: Duration) -> Result<Duration> {
        let held = &self.held;
        let (ttl, drift) = held.engine.config.check_ttl(ttl)?;
        let _serial = held.extending.lock().await;
        let state = held.state();
        if state.lost {
            return Err(held.lost(LostReason::AlreadyLost));
        }
        match held
            .engine
            .extend(&held.keys, &held.token, ttl, drift, state.deadline)
            .await
        {
            Ok(deadline) => {
                let mut state = held.state.lock().unwrap_or_else(PoisonError::into_inner);
                state.deadline = deadline;
                Ok(deadline.saturating_duration_since(Instant::now()))
            }
            Err(reason) => {
                held.mark_lost();
                Err(held.lost(reason))
            }
        }
    }

    /// Releases the lock on every node (compare-and-delete, so a key that
    /// now belongs to someone else is never touched).
    ///
    /// Returns `Ok(())` once a majority of nodes confirmed that the key no
    /// longer carries this lock's token — whether it was deleted now or had
    /// already expired. Releasing a lock that expired is therefore not an
    /// error. Nodes that have not answered yet still get the command; the
    /// call does not wait for them.
    ///
    /// # Errors
    ///
    /// [`Error::Unavailable`] when fewer than a majority of nodes answered;
    /// the keys left behind expire with their TTL.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future still delivers the release to every node (it
    /// continues in the background).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
    /// let lock = redlock.try_acquire("job", std::time::Duration::from_secs(10)).await?;
    /// lock.release().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn release(mut self) -> Result<()> {
        self.released = true;
        let held = &self.held;
        held.mark_lost();
        held.engine
            .release(&held.keys, &held.token, held.sets.clone())
            .await
    }
}

impl Held {
    fn state(&self) -> State {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn mark_lost(&self) {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .lost = true;
    }

    fn lost(&self, reason: LostReason) -> Error {
        Error::Lost {
            resource: self.keys.name(),
            reason,
        }
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        let held = &self.held;
        held.mark_lost();
        fanout::spawn_release(
            held.engine.clone(),
            held.keys.clone(),
            held.token.clone(),
            held.sets.clone(),
        );
    }
}

impl fmt::Debug for Lock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lock")
            .field("resource", &self.held.keys.name())
            .field("resources", &self.held.keys.resources().len())
            .field("fence", &self.held.fence)
            .field("token", &self.held.token)
            .field("validity", &self.validity())
            .finish()
    }
}
