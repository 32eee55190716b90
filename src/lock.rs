//! The held lock: its validity, extension, release, and release on drop;
//! and work under it: [`Lock::run`] and [`Lock::try_run`] renew the lock,
//! run a future, drop it if the lock is lost, and release on every way out
//! ([`LockRequest::run`](crate::LockRequest::run) is an acquire followed by
//! these).

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{debug, Instrument};

use crate::error::lost::LostReason;
use crate::error::{Error, Result};
use crate::lease::renewal::{keep_renewing, Renewal};
use crate::lease::schedule::Timing;
use crate::lease::signal::LostSignal;
use crate::quorum::held::Held;
use crate::validity;

/// A lock held on a quorum of nodes.
///
/// The lock is yours until [`validity`](Lock::validity) reaches zero; do the
/// protected work inside that window, or [`extend`](Lock::extend) it first.
/// [`release`](Lock::release) ends it early. Dropping a `Lock` without
/// releasing it spawns a best-effort release on the current tokio runtime
/// (never blocking); without a runtime the keys simply expire with their TTL.
///
/// For work that may outlast the TTL, [`auto_renew`](Lock::auto_renew)
/// renews the lock in the background, and [`lost_signal`](Lock::lost_signal)
/// tells the holder when it can no longer count on it.
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
    pub(crate) held: Arc<Held>,
    released: bool,
}

impl Lock {
    pub(crate) fn new(held: Held) -> Self {
        Self {
            held: Arc::new(held),
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
        self.held.keys.slices()
    }

    /// The fencing token of a lock taken with
    /// [`fenced`](crate::LockRequest::fenced) request: never the same
    /// as any other grant's, and larger than that of every holder granted
    /// before this lock's acquire began — as long as the nodes keep their
    /// counters (`docs/fencing.md`). At most [`MAX_FENCE`](crate::MAX_FENCE).
    /// `None` for an unfenced lock.
    ///
    /// Pass it with every write to the protected resource, and have the
    /// resource reject a write whose token is lower than one it has seen.
    pub fn fence(&self) -> Option<u64> {
        self.held.fence
    }

    /// Time left in which the lock is known to be held; zero once it has
    /// expired or was found lost. Measured on the monotonic clock.
    pub fn validity(&self) -> Duration {
        self.held.lease.validity()
    }

    /// The monotonic instant at which the validity ends. Moved only by a
    /// confirmed renewal or extension: later after a renewal or a longer
    /// extension, earlier after an extension to a shorter TTL.
    pub fn deadline(&self) -> Instant {
        self.held.lease.deadline()
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
    /// acquire — shorter than before if `ttl` is. Concurrent calls on the
    /// same lock run one after another. A running
    /// [automatic renewal](Lock::auto_renew) goes on with the new TTL.
    ///
    /// An extension never shortens a key's time left on a node: a key that
    /// already lives longer than `ttl` keeps its expiry. After an extension
    /// to a shorter TTL the validity is the shorter one, while the keys may
    /// live on until their earlier expiry ([`release`](Lock::release) ends
    /// them). That is what keeps the validity safe when extensions reach a
    /// node in another order than they were sent in (a dropped one retried
    /// after `NOSCRIPT`, or sent on a new connection): a late shorter one
    /// can no longer cut a later, longer one short.
    ///
    /// Once confirmed, the extension repairs the lock on the nodes that
    /// answered that its key is missing there (restarted empty, or left
    /// free by a race): `SET NX` until the new validity ends, never where
    /// another token holds the key (see `docs/repair.md`).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a TTL of zero, not above the drift, or
    /// beyond [`MAX_TTL`](crate::MAX_TTL) (the lock is untouched).
    /// [`Error::Lost`] when no majority extended in time; the lock then
    /// counts as lost for good: [`validity`](Lock::validity) is zero, later
    /// calls fail at once, and the [lost-lock signal](Lock::lost_signal)
    /// fires.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may leave some nodes extended and others not
    /// (commands already handed to a connection still reach their node,
    /// possibly after those of a later extension). The recorded deadline
    /// stays a safe bound either way: it moves only when a majority
    /// confirms, and no extension shortens a key, so
    /// [`validity`](Lock::validity) never outlives a majority of the keys.
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
        let ttl = held.engine.config.check_ttl(ttl)?;
        let deadline = held.extend(Some(ttl)).await.map_err(|reason| {
            held.lease.fail(reason.clone());
            held.lost(reason)
        })?;
        Ok(validity::left(deadline, Instant::now()))
    }
    /// The lost-lock signal of this lock: fires once when the lock is lost,
    /// expires, can no longer be counted on, reaches its renewal cap, or is
    /// released. See [`LostSignal`] for the kinds and when each fires.
    ///
    /// Without [`auto_renew`](Lock::auto_renew) it fires when an
    /// [`extend`](Lock::extend) fails, when the validity runs out, and on
    /// release or drop.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
    /// use std::time::Duration;
    ///
    /// let lock = redlock.acquire("export", Duration::from_secs(30)).await?;
    /// let signal = lock.lost_signal();
    /// if lock.extend(Duration::from_secs(30)).await.is_err() {
    ///     assert!(signal.is_fired());
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn lost_signal(&self) -> LostSignal {
        LostSignal::new(self.held.lease.clone())
    }

    /// Starts renewing this lock in the background on the schedule of
    /// `renewal` (by default every third of the TTL) and returns its
    /// [lost-lock signal](Lock::lost_signal).
    ///
    /// Each renewal extends the lock by its current TTL (the one it was
    /// acquired or last [extended](Lock::extend) with) on every node that
    /// still holds its token, and counts only with a majority inside the
    /// current validity — the same rules as [`extend`](Lock::extend). An
    /// expired key is never re-created. After an [`extend`](Lock::extend)
    /// the schedule follows the new deadline and TTL at once: the default
    /// interval and margin become those of the new TTL (an explicit
    /// interval is kept, but renewal still comes before the margin).
    ///
    /// - A renewal refused by so many nodes that no majority can hold the
    ///   token marks the lock lost and fires [`LossKind::Lost`].
    /// - A renewal that fails on timeouts or errors is retried; when the
    ///   validity left drops below the safety margin with no renewal
    ///   through, the signal fires [`LossKind::Uncertain`] (renewal goes on
    ///   trying), and [`LossKind::Expired`] follows if the validity runs out.
    /// - Reaching [`max_renewals`](Renewal::max_renewals) or
    ///   [`max_hold`](Renewal::max_hold) fires [`LossKind::LimitReached`]
    ///   and ends renewal; the lock runs out the validity it has left.
    ///
    /// [`LossKind::Lost`]: crate::LossKind::Lost
    /// [`LossKind::Uncertain`]: crate::LossKind::Uncertain
    /// [`LossKind::Expired`]: crate::LossKind::Expired
    /// [`LossKind::LimitReached`]: crate::LossKind::LimitReached
    ///
    /// Renewal stops for good when the lock is released or dropped, and
    /// never sends a renewal after [`release`](Lock::release) has returned
    /// or the `Lock` was dropped. Calling `auto_renew` again replaces the
    /// running renewal (its count starts again; the hold-time cap still
    /// counts from the acquisition). A node that restarts is reconnected by
    /// itself and takes part in later renewals.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] when the settings cannot work for this
    /// lock's TTL (zero interval, or interval plus margin not below the
    /// validity budget `TTL − drift`), or when called outside a tokio
    /// runtime. [`Error::Lost`] when the lock is already lost.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
    /// use std::time::Duration;
    /// use quorumlock::Renewal;
    ///
    /// let lock = redlock.acquire("reindex", Duration::from_secs(30)).await?;
    /// let signal = lock.auto_renew(Renewal::default().max_hold(Duration::from_secs(3600)))?;
    /// let token = signal.cancellation_token();
    /// // ... hand `token` to the job, which stops when it is cancelled ...
    /// lock.release().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn auto_renew(&self, renewal: Renewal) -> Result<LostSignal> {
        let held = &self.held;
        let term = held.lease.term().map_err(|reason| held.lost(reason))?;
        let node_timeout = held.engine.config.node_timeout;
        Timing::checked(&renewal, term.ttl, node_timeout).map_err(Error::invalid)?;
        let handle = tokio::runtime::Handle::try_current()
            .map_err(|_| Error::invalid("auto_renew must be called inside a tokio runtime"))?;
        let stop = held.lease.start_renewal();
        let span = tracing::debug_span!("renewal", resource = %held.keys, token = %held.token);
        let extension = held.clone();
        let renew = move || {
            let held = extension.clone();
            async move { held.extend(None).await }
        };
        let renewing = keep_renewing(held.lease.clone(), renew, renewal, node_timeout, stop);
        handle.spawn(renewing.instrument(span));
        Ok(self.lost_signal())
    }

    /// Asks the nodes whether a majority still carries this lock's token
    /// (a read-only script on every node): `Ok(true)` once a quorum said
    /// yes; `Ok(false)` once more than `N − quorum` said no (3 of 5), so
    /// that no majority can carry it; returns as soon as either is known.
    /// Changes nothing — neither the keys nor [`validity`](Lock::validity),
    /// which stays the bound to act on: `true` says the keys were there
    /// when the nodes answered, not for how long.
    ///
    /// Useful to detect a lock lost early — a node restarted without
    /// persistence, a key deleted by hand, a wall clock that jumped — before
    /// an expensive step, or for monitoring.
    ///
    /// # Errors
    ///
    /// [`Error::Unavailable`] when neither is known: nodes that failed or
    /// did not answer could have tipped it (five nodes, the key gone on
    /// one and two silent: the silent two may still carry it).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(lock: quorumlock::Lock) -> Result<(), quorumlock::Error> {
    /// if !lock.is_held_remotely().await? {
    ///     eprintln!("the nodes no longer carry this lock: stop");
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn is_held_remotely(&self) -> Result<bool> {
        self.held.holds().await
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
        self.held.lease.end();
        self.held.release().await
    }

    /// Runs `work` under this lock and returns what it returned; the lock
    /// is renewed meanwhile and released at the end.
    ///
    /// Renewal: the one already running (from [`auto_renew`](Lock::auto_renew)
    /// or [`LockRequest::auto_renew`](crate::LockRequest::auto_renew)) goes on; without
    /// one, the default [`Renewal`] starts (every third of the TTL).
    ///
    /// `work` receives the lock's [`LostSignal`] (to read the validity, or
    /// to check before an irreversible step). If the signal fires before
    /// the work is done — the lock is lost, its renewal is late
    /// ([`Uncertain`](crate::LossKind::Uncertain)), it expired, or a renewal
    /// cap was reached — the work future is **dropped** at its next await
    /// point and the call returns [`Error::Lost`] with the reason.
    ///
    /// The lock is released on every way out: the work finished, was
    /// dropped because the lock was lost, panicked, or the future returned
    /// by `run` was itself dropped (an aborted task; the release then runs
    /// in the background). Renewal stops before the release is sent.
    ///
    /// The returned future is `'static` and `Send` when `work` and its
    /// future are, so it can be spawned: answer a request once the lock is
    /// held, and keep working under it in the background.
    ///
    /// For work that returns a `Result`, [`try_run`](Lock::try_run) gives
    /// one error type instead of two layers.
    ///
    /// # Errors
    ///
    /// [`Error::Lost`] when the lock was lost while the work ran (or before
    /// it started); [`Error::InvalidInput`] outside a tokio runtime. A
    /// release that reaches too few nodes after the work finished is not an
    /// error: the work's output is returned and the keys left behind expire
    /// with their TTL.
    ///
    /// # Panics
    ///
    /// A panic inside `work` is not caught: it unwinds through this call
    /// (the lock's release is started as the lock is dropped).
    ///
    /// # Cancel safety
    ///
    /// Dropping the returned future drops the work, stops renewal and
    /// releases the lock in the background.
    ///
    /// # Examples
    ///
    /// Take the lock, answer at once, work in the background:
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
    /// use std::time::Duration;
    ///
    /// let lock = redlock.lock("export:daily", Duration::from_secs(30)).acquire().await?;
    /// let job = tokio::spawn(lock.run(|signal| async move {
    ///     // long work; the lock is renewed every 10 s meanwhile
    ///     assert!(!signal.is_fired());
    ///     42
    /// }));
    /// // ... answer "accepted" here; later, if anyone waits for it:
    /// match job.await {
    ///     Ok(Ok(rows)) => assert_eq!(rows, 42),
    ///     Ok(Err(e)) => eprintln!("stopped: {e}"),
    ///     Err(join) => eprintln!("the job panicked or was aborted: {join}"),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn run<F, Fut, T>(self, work: F) -> Result<T>
    where
        F: FnOnce(LostSignal) -> Fut,
        Fut: Future<Output = T>,
    {
        let signal = if self.held.lease.renewing() {
            self.lost_signal()
        } else {
            self.auto_renew(Renewal::default())?
        };
        // From here on the lock is owned by this future: a panic in `work`
        // or a drop of this future drops it, and its `Drop` stops renewal
        // and releases in the background.
        let outcome = {
            let work = std::pin::pin!(work(signal.clone()));
            tokio::select! {
                biased;
                _ = signal.lost() => None,
                output = work => Some(output),
            }
            // `work` is dropped here, before the release below.
        };
        // The reason is read before the release, which would turn a
        // non-final kind into `Released`.
        let result = outcome.ok_or_else(|| {
            let reason = signal.reason().unwrap_or(LostReason::Expired);
            self.held.lost(reason)
        });
        let resource = self.held.keys.name();
        if let Err(e) = self.release().await {
            debug!(
                %resource,
                error = %e,
                "release after the work failed; keys expire with their TTL"
            );
        }
        result
    }

    /// [`run`](Lock::run) for work that can fail: the work returns
    /// `Result<T, E>`, and a lost lock comes back as `E` too (through
    /// `E: From<quorumlock::Error>`), so one `?` handles both.
    ///
    /// `E` is inferred from where the result goes: as the function's tail
    /// (below) or into a binding of a known type. Followed by `?`, the
    /// compiler cannot tell which `E` to convert from: name it once in the
    /// work, `Ok::<_, JobError>(…)`.
    ///
    /// # Errors
    ///
    /// The work's error, or [`Error::Lost`] (and the other errors of
    /// [`run`](Lock::run)) converted into `E`.
    ///
    /// # Cancel safety
    ///
    /// As for [`run`](Lock::run).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::time::Duration;
    ///
    /// #[derive(Debug)]
    /// enum JobError {
    ///     Lock(quorumlock::Error),
    ///     Io(std::io::Error),
    /// }
    /// impl From<quorumlock::Error> for JobError {
    ///     fn from(e: quorumlock::Error) -> Self {
    ///         JobError::Lock(e)
    ///     }
    /// }
    /// impl From<std::io::Error> for JobError {
    ///     fn from(e: std::io::Error) -> Self {
    ///         JobError::Io(e)
    ///     }
    /// }
    ///
    /// async fn export(redlock: &quorumlock::Redlock) -> Result<usize, JobError> {
    ///     let lock = redlock.acquire("export:daily", Duration::from_secs(30)).await?;
    ///     lock.try_run(|_signal| async move {
    ///         let data = tokio::fs::read("/var/lib/export/today.csv").await?;
    ///         Ok(data.len())
    ///     })
    ///     .await
    /// }
    /// ```
    pub async fn try_run<F, Fut, T, E>(self, work: F) -> std::result::Result<T, E>
    where
        F: FnOnce(LostSignal) -> Fut,
        Fut: Future<Output = std::result::Result<T, E>>,
        E: From<Error>,
    {
        self.run(work).await?
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        let held = &self.held;
        held.lease.end();
        let (keys, token, sets) = (held.keys.clone(), held.token.clone(), held.sets.clone());
        let repairs = Some(held.repairs.clone());
        held.engine.spawn_release(keys, token, sets, repairs, None);
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
