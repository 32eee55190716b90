//! Scoped locking: acquire, renew in the background while a future runs,
//! cancel the future if the lock is lost, release on every way out.

use std::future::Future;
use std::time::Duration;

use tracing::debug;

use crate::error::{Error, ResourceName, Result};
use crate::lease::ending::LostReason;
use crate::lease::renewal::Renewal;
use crate::lease::signal::LostSignal;
use crate::redlock::Redlock;

impl Redlock {
    /// Runs `work` while holding the lock on `resource`, renewing it in the
    /// background with the default [`Renewal`] (every third of the TTL),
    /// and returns what the work returned.
    ///
    /// `work` receives the lock's [`LostSignal`] (to read the validity, or
    /// to check before an irreversible step). If the signal fires before
    /// the work is done — the lock is lost, its renewal is late
    /// ([`Uncertain`](crate::LossKind::Uncertain)), it expired, or a renewal
    /// cap was reached — the work future is **dropped** at its next await
    /// point and the call returns [`Error::Lost`] with the reason.
    ///
    /// The lock is released on every way out: the work finished, returned
    /// an error (as its output), panicked, was cancelled because the lock
    /// was lost, or the future returned by `with_lock` was itself dropped
    /// (e.g. by `tokio::time::timeout`; the release then runs in the
    /// background). Renewal stops before the release is sent.
    ///
    /// For fallible work, return a `Result` from the future and match on
    /// both layers.
    ///
    /// # Errors
    ///
    /// As for [`acquire`](Redlock::acquire) when the lock cannot be taken
    /// (the work does not run); [`Error::Lost`] when the lock was lost
    /// while the work ran. A release that reaches too few nodes after the
    /// work finished is not an error: the work's output is returned and
    /// the keys left behind expire with their TTL.
    ///
    /// # Panics
    ///
    /// A panic inside `work` is not caught: it unwinds through this call
    /// (after the lock's release has been started).
    ///
    /// # Cancel safety
    ///
    /// Dropping the returned future drops the work, stops renewal and
    /// releases the lock in the background.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
    /// use std::time::Duration;
    ///
    /// let rows = redlock
    ///     .with_lock("invoice:nightly", Duration::from_secs(30), |signal| async move {
    ///         // long job; the lock is renewed every 10 s meanwhile
    ///         assert!(!signal.is_fired());
    ///         42
    ///     })
    ///     .await?;
    /// assert_eq!(rows, 42);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn with_lock<F, Fut, T>(
        &self,
        resource: impl AsRef<[u8]>,
        ttl: Duration,
        work: F,
    ) -> Result<T>
    where
        F: FnOnce(LostSignal) -> Fut,
        Fut: Future<Output = T>,
    {
        self.with_lock_renewing(resource, ttl, Renewal::default(), work)
            .await
    }

    /// As [`with_lock`](Redlock::with_lock), renewing on the schedule of
    /// `renewal` (interval, safety margin, caps).
    ///
    /// # Errors
    ///
    /// As for [`with_lock`](Redlock::with_lock); also
    /// [`Error::InvalidInput`] when `renewal` cannot work for `ttl` (the
    /// lock is released again and the work does not run).
    ///
    /// # Panics
    ///
    /// As for [`with_lock`](Redlock::with_lock).
    ///
    /// # Cancel safety
    ///
    /// As for [`with_lock`](Redlock::with_lock).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
    /// use std::time::Duration;
    /// use quorumlock::Renewal;
    ///
    /// let result = redlock
    ///     .with_lock_renewing(
    ///         "reindex",
    ///         Duration::from_secs(20),
    ///         Renewal::every(Duration::from_secs(5)).max_hold(Duration::from_secs(600)),
    ///         |_signal| async move { Ok::<_, std::io::Error>(()) },
    ///     )
    ///     .await;
    /// match result {
    ///     Ok(Ok(())) => {}
    ///     Ok(Err(io)) => eprintln!("the job failed: {io}"),
    ///     Err(e) if e.is_lost() => eprintln!("stopped, lock lost: {e}"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn with_lock_renewing<F, Fut, T>(
        &self,
        resource: impl AsRef<[u8]>,
        ttl: Duration,
        renewal: Renewal,
        work: F,
    ) -> Result<T>
    where
        F: FnOnce(LostSignal) -> Fut,
        Fut: Future<Output = T>,
    {
        let lock = self.acquire(resource, ttl).await?;
        let signal = match lock.auto_renew(renewal) {
            Ok(signal) => signal,
            Err(e) => {
                let _ = lock.release().await;
                return Err(e);
            }
        };
        // From here on `lock` is owned by this future: a panic in `work` or
        // a drop of this future drops it, and its `Drop` stops renewal and
        // releases in the background.
        let outcome = {
            let work = work(signal.clone());
            tokio::pin!(work);
            tokio::select! {
                biased;
                _ = signal.lost() => None,
                output = &mut work => Some(output),
            }
            // `work` is dropped here, before the release below.
        };
        // The reason is read before the release, which would turn a
        // non-final kind into `Released`.
        let result = outcome.ok_or_else(|| {
            signal.to_error().unwrap_or_else(|| Error::Lost {
                resource: ResourceName::new(signal.resource()),
                reason: LostReason::Expired,
            })
        });
        if let Err(e) = lock.release().await {
            debug!(error = %e, "release after scoped work failed; keys expire with their TTL");
        }
        result
    }
}
