//! [`Permit`]: permits of a semaphore, held.

use std::fmt;
use std::future::Future;
use std::ops::Deref;

use crate::error::{Error, Result};
use crate::keys::Slots;
use crate::lease::signal::LostSignal;
use crate::lock::Lock;

/// Permits of a counting semaphore, held on a quorum of nodes: a [`Lock`]
/// over the semaphore's slots it took, with all of a lock's methods
/// (through `Deref`: [`validity`](Lock::validity),
/// [`extend`](Lock::extend), [`lost_signal`](Lock::lost_signal),
/// [`auto_renew`](Lock::auto_renew), [`fence`](Lock::fence), …) and the
/// lock's promises: yours while the validity lasts, released on
/// [`release`](Permit::release) or, in the background, on drop.
///
/// # Examples
///
/// ```no_run
/// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
/// let permit = redlock
///     .semaphore("exports", 4, std::time::Duration::from_secs(30))
///     .acquire()
///     .await?;
/// // Slot numbers are stable while held: one of 0..4, e.g. to pick a shard.
/// println!("slot {:?} for {:?}", permit.slots(), permit.validity());
/// permit.extend(std::time::Duration::from_secs(30)).await?;
/// permit.release().await
/// # }
/// ```
#[must_use = "dropped permits are released at once; keep them while the work runs"]
pub struct Permit {
    lock: Lock,
    semaphore: Slots,
    /// The slots held, in `0..semaphore.count()`.
    slots: Vec<u32>,
}

impl Permit {
    pub(crate) fn new(lock: Lock, semaphore: Slots) -> Self {
        let slots = lock.resources().filter_map(|key| semaphore.index_of(key));
        let slots = slots.map(super::permits).collect();
        Self {
            lock,
            semaphore,
            slots,
        }
    }

    /// The semaphore's name, as given.
    pub fn name(&self) -> &[u8] {
        self.semaphore.name()
    }

    /// Permits held.
    pub fn permits(&self) -> u32 {
        super::permits(self.slots.len())
    }

    /// The semaphore's number of permits, as this client named it: the
    /// bound on the permits held at once.
    pub fn limit(&self) -> u32 {
        super::permits(self.semaphore.count())
    }

    /// The slots held, each in `0..limit()`: no other holder has one of them
    /// while these permits are valid (a worker index, a shard).
    pub fn slots(&self) -> &[u32] {
        &self.slots
    }

    /// Releases the permits on every node: [`Lock::release`].
    ///
    /// # Errors
    ///
    /// As for [`Lock::release`].
    pub async fn release(self) -> Result<()> {
        self.lock.release().await
    }

    /// Runs `work` under the permits, renewed meanwhile, released at the
    /// end: [`Lock::run`].
    ///
    /// # Errors
    ///
    /// As for [`Lock::run`].
    ///
    /// # Cancel safety
    ///
    /// As for [`Lock::run`].
    pub async fn run<F, Fut, T>(self, work: F) -> Result<T>
    where
        F: FnOnce(LostSignal) -> Fut,
        Fut: Future<Output = T>,
    {
        self.lock.run(work).await
    }

    /// Runs fallible `work` under the permits: [`Lock::try_run`].
    ///
    /// # Errors
    ///
    /// As for [`Lock::try_run`].
    ///
    /// # Cancel safety
    ///
    /// As for [`Lock::run`].
    pub async fn try_run<F, Fut, T, E>(self, work: F) -> std::result::Result<T, E>
    where
        F: FnOnce(LostSignal) -> Fut,
        Fut: Future<Output = std::result::Result<T, E>>,
        E: From<Error>,
    {
        self.lock.try_run(work).await
    }

    /// The lock the permits are.
    pub fn into_lock(self) -> Lock {
        self.lock
    }
}

impl Deref for Permit {
    type Target = Lock;

    fn deref(&self) -> &Lock {
        &self.lock
    }
}

impl fmt::Debug for Permit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("semaphore", &self.name().escape_ascii().to_string())
            .field("slots", &self.slots)
            .field("limit", &self.limit())
            .field("lock", &self.lock)
            .finish()
    }
}
