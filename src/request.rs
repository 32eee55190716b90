//! [`LockRequest`]: one way to ask for a lock with options — one or many
//! resources, a fencing token, how long and how often to try, automatic
//! renewal — and to take it ([`LockRequest::acquire`]) or run work under
//! it ([`LockRequest::run`]).

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::debug;

use crate::config::Config;
use crate::error::lost::LostReason;
use crate::error::{Error, ResourceName, Result};
use crate::keys::Keys;
use crate::lease::renewal::Renewal;
use crate::lease::signal::LostSignal;
use crate::lock::Lock;
use crate::quorum::engine::Engine;
use crate::quorum::retry;

/// A lock to take, with its options; from [`Redlock::lock`](crate::Redlock::lock) or
/// [`Redlock::lock_all`](crate::Redlock::lock_all).
///
/// Every option is independent of the others and of the order in which
/// they are set: [`retries`](LockRequest::retries) and
/// [`wait`](LockRequest::wait) together mean "at most this many retries,
/// within this time".
///
/// | option | default |
/// |---|---|
/// | [`and`](LockRequest::and) | the resources given to `lock` / `lock_all` |
/// | [`fenced`](LockRequest::fenced) | no fencing token |
/// | [`retries`](LockRequest::retries) | the builder's [`retry_count`](crate::Builder::retry_count) (3); without a count limit when only `wait` is set |
/// | [`wait`](LockRequest::wait) | the builder's [`retry_deadline`](crate::Builder::retry_deadline) (none) |
/// | [`renew`](LockRequest::renew) | no renewal for `acquire`; the default [`Renewal`] for `run` |
///
/// # Examples
///
/// ```no_run
/// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
/// use std::time::Duration;
/// use quorumlock::Renewal;
///
/// // Two accounts, all or nothing; wait up to 5 s; keep renewing.
/// let lock = redlock
///     .lock("account:17", Duration::from_secs(5))
///     .and("account:42")
///     .wait(Duration::from_secs(5))
///     .renew(Renewal::default())
///     .acquire()
///     .await?;
/// // transfer between the two accounts, watching lock.lost_signal()
/// lock.release().await
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a lock request does nothing until acquire() or run() is awaited"]
pub struct LockRequest<'a> {
    engine: &'a Arc<Engine>,
    resources: Vec<Vec<u8>>,
    ttl: Duration,
    fenced: bool,
    retries: Option<u32>,
    wait: Option<Duration>,
    renewal: Option<Renewal>,
}

impl<'a> LockRequest<'a> {
    pub(crate) fn new(engine: &'a Arc<Engine>, resources: Vec<Vec<u8>>, ttl: Duration) -> Self {
        Self {
            engine,
            resources,
            ttl,
            fenced: false,
            retries: None,
            wait: None,
            renewal: None,
        }
    }

    /// Adds a resource: the lock covers all of them, taken all or nothing
    /// on each node (one script per node sets every key or none), released
    /// and extended together, with validity and quorum as for one resource.
    /// Two locks whose resource sets overlap exclude each other.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
    /// let lock = redlock
    ///     .lock("account:17", std::time::Duration::from_secs(5))
    ///     .and("account:42")
    ///     .acquire()
    ///     .await?;
    /// assert_eq!(lock.resources().len(), 2);
    /// # lock.release().await
    /// # }
    /// ```
    pub fn and(mut self, resource: impl AsRef<[u8]>) -> Self {
        self.resources.push(resource.as_ref().to_vec());
        self
    }

    /// Hands out a **fencing token** ([`Lock::fence`]) with the lock: no
    /// two grants ever carry the same token, and a holder whose acquire
    /// began after another holder was granted gets a larger one — provided
    /// the nodes never lose their counters. Only for a single resource.
    ///
    /// The token goes through the quorum in two phases. Each node reads its
    /// counter (`quorumlock:fence:<resource>`) atomically with the
    /// `SET NX`; the client proposes `T = max + 1` over the granting nodes;
    /// then a node still holding this lock's token counts for the commit
    /// only when it raises its counter from strictly below `T` to `T`, and
    /// `T` is handed out only after a majority counted, inside the validity
    /// window.
    ///
    /// Why tokens are unique: two commits of one `T` would each need a
    /// majority, and two majorities share a node, which raises its counter
    /// to `T` only once. Why they are ordered: a commit that starts after
    /// `A`'s grant meets `A`'s commit majority on a node whose counter is
    /// already at least `A`'s token, and counts there only if its own token
    /// is larger. No timing is involved: this survives a node's clock
    /// jumping (early expiry) and messages held for any time. It assumes
    /// that nodes keep their counters: a node that restarts without them
    /// (no AOF, or `appendfsync everysec` after a crash) can count for the
    /// same token twice, and restart quarantine does not prevent that. Run
    /// nodes with `appendfsync always` where tokens matter. The full proof
    /// is in `docs/fencing.md`.
    ///
    /// Cost: one more round trip per acquire, and one counter key per
    /// resource that never expires (about 80 bytes of memory per resource
    /// on each node).
    ///
    /// A commit that reaches no majority in time fails the attempt (it is
    /// released and retried). [`Error::FenceExhausted`] when the
    /// resource's counter is at [`MAX_FENCE`](crate::MAX_FENCE) (the
    /// attempt's keys are released, no retry); a node whose counter is not
    /// an integer in `[0, 2^53)` refuses with a `FENCERANGE` error reply
    /// and sets nothing.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
    /// let lock = redlock.lock("ledger", std::time::Duration::from_secs(10)).fenced().acquire().await?;
    /// let fence = lock.fence().expect("fenced locks carry a token");
    /// // Every write of this holder carries the same token: `<=` lets its
    /// // own later writes in and refuses any earlier holder's.
    /// // UPDATE ledger SET ..., fence = $fence WHERE fence <= $fence
    /// # lock.release().await
    /// # }
    /// ```
    pub fn fenced(mut self) -> Self {
        self.fenced = true;
        self
    }

    /// At most `retries` attempts after the first (0: one attempt only).
    /// Combined with [`wait`](LockRequest::wait), whichever is spent first
    /// ends the acquisition.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
    /// let lock = redlock.lock("job", std::time::Duration::from_secs(10)).retries(10).acquire().await?;
    /// # lock.release().await
    /// # }
    /// ```
    pub fn retries(mut self, retries: u32) -> Self {
        self.retries = Some(retries);
        self
    }

    /// Keeps trying for at most `limit`: no attempt starts after it, nor
    /// one whose retry delay would end after it. Without
    /// [`retries`](LockRequest::retries), the number of attempts is not
    /// limited, and with fast hand-off on a waiter does not poll: it tries
    /// again when the holder's release is announced, when the holder's
    /// keys expire, or after a second without either. A `limit` too large to add to the current instant
    /// (`Duration::MAX`) is no limit.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
    /// use std::time::Duration;
    /// let lock = redlock
    ///     .lock("report", Duration::from_secs(30))
    ///     .wait(Duration::from_secs(10))
    ///     .acquire()
    ///     .await?;
    /// # lock.release().await
    /// # }
    /// ```
    pub fn wait(mut self, limit: Duration) -> Self {
        self.wait = Some(limit);
        self
    }

    /// Renews the lock in the background on this schedule once it is
    /// taken (see [`Lock::auto_renew`]); for [`run`](LockRequest::run),
    /// replaces the default schedule.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
    /// use std::time::Duration;
    /// use quorumlock::Renewal;
    /// let lock = redlock
    ///     .lock("reindex", Duration::from_secs(30))
    ///     .renew(Renewal::default().max_hold(Duration::from_secs(3600)))
    ///     .acquire()
    ///     .await?;
    /// let token = lock.lost_signal().cancellation_token();
    /// # lock.release().await
    /// # }
    /// ```
    pub fn renew(mut self, renewal: Renewal) -> Self {
        self.renewal = Some(renewal);
        self
    }

    /// Takes the lock. The lock is granted when a majority of nodes
    /// accepted it and validity (`ttl − elapsed − drift`) is left. Each
    /// attempt uses a fresh token, and a failed attempt releases whatever
    /// it set on every node before the next one.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] (nothing sent) for an empty resource, one
    /// listed twice, a fenced lock over several resources, a TTL that is
    /// zero, not above the drift or above [`MAX_TTL`](crate::MAX_TTL), or
    /// renewal settings that cannot work for the TTL (the lock is released
    /// again). After the last attempt: [`Error::Contended`] when another
    /// owner holds it, [`Error::Unavailable`] /
    /// [`Error::ValidityExhausted`] when too few nodes answered in time,
    /// [`Error::FenceExhausted`] when no fencing token is left.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future (e.g. under `tokio::time::timeout`) spawns the
    /// release of whatever the current attempt had set, so no partial keys
    /// stay behind until their TTL.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
    /// let lock = redlock.lock("job", std::time::Duration::from_secs(10)).acquire().await?;
    /// lock.release().await
    /// # }
    /// ```
    pub async fn acquire(self) -> Result<Lock> {
        let engine = self.engine;
        let (retries, wait) = policy(self.retries, self.wait, &engine.config);
        // A wait too large to add to an instant is no deadline at all.
        let deadline = wait.and_then(|w| Instant::now().checked_add(w));
        let keys = keys(self.resources, self.fenced)?;
        let granted = retry::acquire(engine, keys, self.ttl, retries, deadline).await?;
        let lock = Lock::new(engine.clone(), granted);
        if let Some(renewal) = self.renewal {
            if let Err(e) = lock.auto_renew(renewal) {
                let _ = lock.release().await;
                return Err(e);
            }
        }
        Ok(lock)
    }

    /// Runs `work` while holding the lock, renewing it in the background
    /// (with the default [`Renewal`], every third of the TTL, unless
    /// [`renew`](LockRequest::renew) says otherwise), and returns what the
    /// work returned.
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
    /// was lost, or the future returned by `run` was itself dropped (the
    /// release then runs in the background). Renewal stops before the
    /// release is sent. For fallible work, return a `Result` from the
    /// future and match on both layers.
    ///
    /// # Errors
    ///
    /// As for [`acquire`](LockRequest::acquire) when the lock cannot be
    /// taken (the work does not run); [`Error::Lost`] when the lock was
    /// lost while the work ran. A release that reaches too few nodes after
    /// the work finished is not an error: the work's output is returned and
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
    /// let result = redlock
    ///     .lock("invoice:nightly", Duration::from_secs(30))
    ///     .run(|signal| async move {
    ///         // long job; the lock is renewed every 10 s meanwhile
    ///         assert!(!signal.is_fired());
    ///         Ok::<_, std::io::Error>(42)
    ///     })
    ///     .await;
    /// match result {
    ///     Ok(Ok(rows)) => assert_eq!(rows, 42),
    ///     Ok(Err(io)) => eprintln!("the job failed: {io}"),
    ///     Err(e) if e.is_lost() => eprintln!("stopped, lock lost: {e}"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn run<F, Fut, T>(mut self, work: F) -> Result<T>
    where
        F: FnOnce(LostSignal) -> Fut,
        Fut: Future<Output = T>,
    {
        let renewal = self.renewal.take().unwrap_or_default();
        let lock = self.acquire().await?;
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

/// The retry count and wait limit from what was set and the builder's
/// defaults: independent of the order of the setters.
fn policy(retries: Option<u32>, wait: Option<Duration>, cfg: &Config) -> (u32, Option<Duration>) {
    match (retries, wait) {
        (None, None) => (cfg.retry_count, cfg.retry_deadline),
        (Some(n), None) => (n, cfg.retry_deadline),
        (None, Some(w)) => (u32::MAX, Some(w)),
        (Some(n), Some(w)) => (n, Some(w)),
    }
}

/// The keys of a lock over `resources`, checked.
fn keys(mut resources: Vec<Vec<u8>>, fenced: bool) -> Result<Keys> {
    if resources.len() == 1 {
        let resource = resources.pop().unwrap_or_default();
        return Keys::one(resource, fenced);
    }
    if fenced {
        return Err(Error::invalid(
            "fencing tokens are for single-resource locks",
        ));
    }
    Keys::many(resources)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn retries_and_wait_combine_in_any_order() {
        let cfg = Config {
            retry_count: 3,
            retry_deadline: Some(60 * S),
            ..Config::default()
        };
        assert_eq!(policy(None, None, &cfg), (3, Some(60 * S)));
        assert_eq!(policy(Some(0), None, &cfg), (0, Some(60 * S)));
        assert_eq!(policy(None, Some(5 * S), &cfg), (u32::MAX, Some(5 * S)));
        assert_eq!(policy(Some(7), Some(5 * S), &cfg), (7, Some(5 * S)));
    }

    #[test]
    fn a_fenced_lock_covers_one_resource() {
        let two = vec![b"a".to_vec(), b"b".to_vec()];
        assert!(keys(two.clone(), true).unwrap_err().is_invalid_input());
        assert_eq!(keys(two, false).map(|k| k.resources().len()).ok(), Some(2));
        let one = keys(vec![b"a".to_vec()], true).expect("one fenced resource");
        assert!(one.fence_key().is_some());
        let twice = vec![b"a".to_vec(), b"a".to_vec()];
        assert!(keys(twice, false).unwrap_err().is_invalid_input());
    }
}
