//! [`SemaphoreRequest`]: permits of a counting semaphore to take, with the
//! options of a lock — how many permits, a fencing token, how long and how
//! often to try, automatic renewal — and to take them
//! ([`SemaphoreRequest::acquire`]) or run work under them
//! ([`SemaphoreRequest::run`]).
//!
//! A semaphore of `L` permits is `L` slots, each an ordinary quorum lock
//! (`quorumlock:semaphore:{<name>}:<i>`); a holder of `k` permits holds `k`
//! slots, each set on a majority of the nodes. The vote rule is in
//! `quorum/slots.rs`, what an attempt asks for in `quorum/claim.rs`, the
//! script in `node/lua/acquire_slots.lua`, the argument in
//! `docs/semaphore.md`.

use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::keys::Slots;
use crate::quorum::claim::Permits;
use crate::quorum::engine::Engine;
use crate::request::{request_methods, Options};

mod permit;
mod status;

pub use permit::Permit;
pub use status::{SemaphoreHolder, SemaphoreStatus};

/// A number of permits or a slot's number, as the API gives them: `u32`,
/// like [`Redlock::semaphore`](crate::Redlock::semaphore)'s and
/// [`take`](SemaphoreRequest::take)'s. Lossless: a semaphore has at most
/// [`MAX_PERMITS`](crate::MAX_PERMITS) slots.
fn permits(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Permits of a counting semaphore to take, with their options; from
/// [`Redlock::semaphore`](crate::Redlock::semaphore).
///
/// **At most `permits` are held at once**, across every client and host,
/// while each holder's validity lasts — under the lock's assumptions (see
/// the README's guarantees). Every client must name the same number of
/// permits: the nodes record the one the holders named, and refuse an
/// acquire that names another while any permit is held
/// ([`Error::LimitMismatch`]).
///
/// | option | default |
/// |---|---|
/// | [`take`](SemaphoreRequest::take) | 1 permit |
/// | [`fenced`](SemaphoreRequest::fenced) | no fencing token |
/// | [`retry`](SemaphoreRequest::retry) | the builder's [`retry`](crate::Builder::retry) |
/// | [`auto_renew`](SemaphoreRequest::auto_renew) | no renewal for `acquire`; the default [`Renewal`](crate::Renewal) for `run` |
///
/// # Examples
///
/// ```no_run
/// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
/// use std::time::Duration;
/// use quorumlock::Retry;
///
/// // At most 4 exports at once, across every host.
/// let permit = redlock
///     .semaphore("exports", 4, Duration::from_secs(30))
///     .retry(Retry::Until(Duration::from_secs(60)))
///     .acquire()
///     .await?;
/// println!("export slot {:?}, valid for {:?}", permit.slots(), permit.validity());
/// permit.release().await
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a semaphore request does nothing until acquire() or run() is awaited"]
pub struct SemaphoreRequest {
    options: Options,
    name: Vec<u8>,
    permits: u32,
    take: u32,
}

impl SemaphoreRequest {
    pub(crate) fn new(engine: Arc<Engine>, name: Vec<u8>, permits: u32, ttl: Duration) -> Self {
        Self {
            options: Options::new(engine, ttl),
            name,
            permits,
            take: 1,
        }
    }

    /// Takes `k` permits at once, all or nothing (default 1): the holder
    /// counts `k` towards the bound, and nobody holds some of them.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
    /// // A big job counts as 3 of the 8 permits.
    /// let permit = redlock
    ///     .semaphore("gpu", 8, std::time::Duration::from_secs(60))
    ///     .take(3)
    ///     .acquire()
    ///     .await?;
    /// assert_eq!(permit.permits(), 3);
    /// # permit.release().await
    /// # }
    /// ```
    pub fn take(mut self, k: u32) -> Self {
        self.take = k;
        self
    }

    /// Hands out a **fencing token** ([`Lock::fence`](crate::Lock::fence))
    /// with the permits: unique across every holder of this semaphore, and
    /// larger for a holder whose acquire began after another holder was
    /// granted; holders whose acquires overlap get distinct tokens in no
    /// particular order. The semaphore has one counter
    /// (`quorumlock:semaphore:{<name>}:fence`, with a round key beside it);
    /// a token is a round times 1024 plus the holder's first slot, so
    /// holders of different slots commit side by side (`docs/fencing.md`,
    /// "Permits"), and a resource that remembers the highest token it
    /// accepted refuses a holder whose permits have since passed on. Costs
    /// one more round trip per acquire.
    ///
    /// Note that `L` holders are expected to hold permits at once: a
    /// resource that keeps one highest token refuses every holder but the
    /// latest. Fence per resource a holder writes (a row, a file), not the
    /// whole pool.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
    /// let permit = redlock
    ///     .semaphore("exports", 4, std::time::Duration::from_secs(30))
    ///     .fenced()
    ///     .acquire()
    ///     .await?;
    /// let token = permit.fence().expect("fenced permits carry a token");
    /// # permit.release().await
    /// # }
    /// ```
    pub fn fenced(mut self) -> Self {
        self.options.fenced = true;
        self
    }

    /// Takes the permits: granted when `k` slots were each set to this
    /// attempt's token by a majority of the nodes and validity (`ttl −
    /// elapsed − drift`) is left. While permits are free this is one
    /// round trip, as a lock's acquire; each attempt uses a fresh token,
    /// and a failed attempt releases whatever it set on every node before
    /// the next one.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] (nothing sent) for an empty name, no
    /// permits or more than [`MAX_PERMITS`](crate::MAX_PERMITS), taking
    /// none or more than there are, a TTL the lock would refuse, or
    /// renewal settings that cannot work for the TTL (the permits are
    /// released again). After the last attempt: [`Error::Contended`] when
    /// the permits are held by others, [`Error::Unavailable`] /
    /// [`Error::ValidityExhausted`] when too few nodes answered in time,
    /// [`Error::FenceExhausted`] when no fencing token is left. At once,
    /// with nothing set: [`Error::LimitMismatch`] when the semaphore's
    /// holders named another number of permits (a misconfiguration).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future spawns the release of whatever the current
    /// attempt had set, so no slot stays taken until its TTL.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
    /// match redlock.semaphore("exports", 4, std::time::Duration::from_secs(30)).acquire().await {
    ///     Ok(permit) => permit.release().await?,
    ///     Err(e) if e.is_contended() => println!("4 exports are running; try later"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn acquire(self) -> Result<Permit> {
        let slots = Slots::new(&self.name, self.permits, self.options.fenced)?;
        if self.take == 0 || self.take > self.permits {
            return Err(Error::invalid(format!(
                "cannot take {} of a semaphore's {} permits",
                self.take, self.permits
            )));
        }
        let claim = Permits {
            slots: slots.clone(),
            want: self.take as usize,
        };
        let lock = self.options.acquire(claim).await?;
        Ok(Permit::new(lock, slots))
    }

    request_methods!(
        "the permits",
        r#"redlock.semaphore("exports", 4, Duration::from_secs(30))"#
    );
}
