//! Work under a held lock: [`Lock::run`] and [`Lock::try_run`] renew the
//! lock, run a future, drop it if the lock is lost, and release on every
//! way out. [`LockRequest::run`](crate::LockRequest::run) is an acquire
//! followed by these.

use std::future::Future;

use tracing::debug;

use super::Lock;
use crate::error::lost::LostReason;
use crate::error::{Error, Result};
use crate::lease::renewal::Renewal;
use crate::lease::signal::LostSignal;

impl Lock {
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
