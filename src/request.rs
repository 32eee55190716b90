//! [`LockRequest`]: one way to ask for a lock with options — one or many
//! resources, a fencing token, how long and how often to try, automatic
//! renewal — and to take it ([`LockRequest::acquire`]) or run work under
//! it ([`LockRequest::run`]).

use std::sync::Arc;
use std::time::Duration;

use crate::config::Retry;
use crate::error::{Error, Result};
use crate::keys::Keys;
use crate::lease::renewal::Renewal;
use crate::lock::Lock;
use crate::quorum::claim::Claim;
use crate::quorum::engine::Engine;
use crate::quorum::retry;

/// A lock to take, with its options; from [`Redlock::lock`](crate::Redlock::lock) or
/// [`Redlock::lock_all`](crate::Redlock::lock_all).
///
/// Every option is independent of the others and of the order in which
/// they are set.
///
/// | option | default |
/// |---|---|
/// | [`and`](LockRequest::and) | the resources given to `lock` / `lock_all` |
/// | [`fenced`](LockRequest::fenced) | no fencing token |
/// | [`retry`](LockRequest::retry) | the builder's [`retry`](crate::Builder::retry) ([`Retry::Times(3)`](Retry::Times)) |
/// | [`auto_renew`](LockRequest::auto_renew) | no renewal for `acquire`; the default [`Renewal`] for `run` |
///
/// # Examples
///
/// ```no_run
/// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
/// use std::time::Duration;
/// use quorumlock::{Renewal, Retry};
///
/// // Two accounts, all or nothing; wait up to 5 s; keep renewing.
/// let lock = redlock
///     .lock("account:17", Duration::from_secs(5))
///     .and("account:42")
///     .retry(Retry::Until(Duration::from_secs(5)))
///     .auto_renew(Renewal::default())
///     .acquire()
///     .await?;
/// // transfer between the two accounts, watching lock.lost_signal()
/// lock.release().await
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a lock request does nothing until acquire() or run() is awaited"]
pub struct LockRequest {
    options: Options,
    resources: Vec<Vec<u8>>,
}

impl LockRequest {
    pub(crate) fn new(engine: Arc<Engine>, resources: Vec<Vec<u8>>, ttl: Duration) -> Self {
        Self {
            options: Options::new(engine, ttl),
            resources,
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
    /// counter (`quorumlock:fence:{<resource>}`) atomically with the
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
        self.options.fenced = true;
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
        let keys = keys(self.resources, self.options.fenced)?;
        self.options.acquire(keys).await
    }

    request_methods!(
        "the lock",
        r#"redlock.lock("report", Duration::from_secs(30))"#
    );
}

/// What every request carries — the client, the TTL, and the options
/// [`LockRequest`], [`SemaphoreRequest`](crate::SemaphoreRequest) and
/// [`Campaign`](crate::Campaign) share — and the one way they take what
/// they ask for.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    pub(crate) engine: Arc<Engine>,
    pub(crate) ttl: Duration,
    /// Whether a fencing token is asked for.
    pub(crate) fenced: bool,
    /// `None`: the builder's.
    pub(crate) retry: Option<Retry>,
    /// `None`: no renewal.
    pub(crate) renewal: Option<Renewal>,
    /// Whether the waiter queues first and tries at its head only.
    pub(crate) fair: bool,
}

impl Options {
    pub(crate) fn new(engine: Arc<Engine>, ttl: Duration) -> Self {
        Self {
            engine,
            ttl,
            fenced: false,
            retry: None,
            renewal: None,
            fair: false,
        }
    }

    /// Takes `claim`, retrying as these options say, and starts its
    /// renewal when they ask for it (a lock whose renewal cannot start is
    /// released again).
    pub(crate) async fn acquire(&self, claim: impl Claim) -> Result<Lock> {
        let engine = &self.engine;
        let retry = self.retry.unwrap_or(engine.config.retry);
        let lock = Lock::new(retry::acquire(engine, claim, self.ttl, retry, self.fair).await?);
        if let Some(renewal) = self.renewal.clone() {
            if let Err(e) = lock.auto_renew(renewal) {
                let _ = lock.release().await;
                return Err(e);
            }
        }
        Ok(lock)
    }
}

/// The methods [`LockRequest`] and [`SemaphoreRequest`](crate::SemaphoreRequest)
/// share, written once on the type's `acquire` and its `options`: `retry`,
/// `auto_renew`, `run` and `try_run`. `$what` names what is taken, `$new`
/// a request of the type for the examples.
macro_rules! request_methods {
    ($what:literal, $new:literal) => {
        /// How long to keep trying: a number of retries, a time limit, or
        /// both (see [`Retry`](crate::Retry)); replaces the builder's
        /// [`retry`](crate::Builder::retry) for this request. With
        /// [fast hand-off](crate::Builder::fast_handoff) on, a waiter also
        /// tries again as soon as a holder's release is announced.
        ///
        /// # Examples
        ///
        /// ```no_run
        /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
        /// use std::time::Duration;
        /// use quorumlock::Retry;
        #[doc = concat!("let held = ", $new)]
        ///     .retry(Retry::Until(Duration::from_secs(10)))
        ///     .acquire()
        ///     .await?;
        /// # held.release().await
        /// # }
        /// ```
        pub fn retry(mut self, retry: crate::Retry) -> Self {
            self.options.retry = Some(retry);
            self
        }

        #[doc = concat!("Takes ", $what, " in turn (`docs/queue.md`): the request joins")]
        /// the resource's waiter queue first, with a ticket committed through
        /// the quorum, and tries only once a majority of nodes names its
        /// ticket the lowest live one. Waiters are served in ticket order:
        /// a waiter for several permits is not overtaken by takers of one,
        /// readers and writers of a read–write lock are served first come,
        /// first served (FIFO; readers in a row enter one after the other,
        /// and hold together). A waiter renews its entry every third of the
        /// [waiter lease](crate::Builder::waiter_lease); one that crashed
        /// delays the others by at most that lease and a third more.
        ///
        /// Fairness never weakens exclusion: the queue decides who may try,
        /// the lock's own scripts still decide who holds. The order holds
        /// among requests that all ask `fair`: one that does not tries
        /// first and queues only when refused, so it may overtake. A node
        /// that restarts empty forgets its queue, which costs order, never
        /// exclusion. Without fair mode, a waiter refused by a holder joins
        /// the queue too (when releases are announced; a reader excepted,
        /// whom a writer's release wakes with every reader), so that each
        /// release wakes one waiter, not all.
        ///
        /// Each turn a waiter spends behind the head counts as an attempt of
        /// its [`retry`](Self::retry) count; ask with a time limit alone
        /// ([`Retry::Until`](crate::Retry::Until)) to wait for one's turn.
        /// Costs two round trips to join before the first attempt, and one
        /// to leave in the background after it.
        ///
        /// # Examples
        ///
        /// ```no_run
        /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
        /// use std::time::Duration;
        /// use quorumlock::Retry;
        #[doc = concat!("let held = ", $new)]
        ///     .fair()
        ///     .retry(Retry::Until(Duration::from_secs(30)))
        ///     .acquire()
        ///     .await?;
        /// # held.release().await
        /// # }
        /// ```
        pub fn fair(mut self) -> Self {
            self.options.fair = true;
            self
        }

        #[doc = concat!("Renews ", $what, " in the background on this schedule")]
        /// once taken (as [`Lock::auto_renew`](crate::Lock::auto_renew)
        /// does); for [`run`](Self::run), replaces the default schedule.
        ///
        /// # Examples
        ///
        /// ```no_run
        /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
        /// use std::time::Duration;
        /// use quorumlock::Renewal;
        #[doc = concat!("let held = ", $new)]
        ///     .auto_renew(Renewal::default().max_hold(Duration::from_secs(3600)))
        ///     .acquire()
        ///     .await?;
        /// let token = held.lost_signal().cancellation_token();
        /// # held.release().await
        /// # }
        /// ```
        pub fn auto_renew(mut self, renewal: crate::Renewal) -> Self {
            self.options.renewal = Some(renewal);
            self
        }

        #[doc = concat!("Runs `work` under ", $what, ", taken first:")]
        /// [`acquire`](Self::acquire) then [`Lock::run`](crate::Lock::run) —
        /// renewed in the background (with the default
        /// [`Renewal`](crate::Renewal) unless [`auto_renew`](Self::auto_renew)
        /// says otherwise), the work dropped on a loss, released on every way
        /// out. Returns what the work returned.
        ///
        /// # Errors
        ///
        /// As for [`acquire`](Self::acquire) when the acquire fails (the work
        /// does not run); as for [`Lock::run`](crate::Lock::run) after that
        /// ([`Error::Lost`](crate::Error::Lost) on a loss while the work ran).
        ///
        /// # Panics
        ///
        /// A panic inside `work` is not caught (see [`Lock::run`](crate::Lock::run)).
        ///
        /// # Cancel safety
        ///
        /// Dropping the returned future drops the work, stops renewal and
        /// releases what was taken (or the current attempt's keys) in the
        /// background.
        ///
        /// # Examples
        ///
        /// ```no_run
        /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
        /// use std::time::Duration;
        ///
        #[doc = concat!("let rows = ", $new)]
        ///     .run(|signal| async move {
        ///         // long job; renewed every third of the TTL meanwhile
        ///         assert!(!signal.is_fired());
        ///         42
        ///     })
        ///     .await?;
        /// assert_eq!(rows, 42);
        /// # Ok(())
        /// # }
        /// ```
        pub async fn run<F, Fut, T>(self, work: F) -> crate::Result<T>
        where
            F: FnOnce(crate::LostSignal) -> Fut,
            Fut: std::future::Future<Output = T>,
        {
            self.acquire().await?.run(work).await
        }

        #[doc = concat!("Runs fallible `work` under ", $what, ", taken first:")]
        /// [`acquire`](Self::acquire) then [`Lock::try_run`](crate::Lock::try_run).
        /// The work returns `Result<T, E>`; the request's own errors (not
        /// taken, lost) come back as `E` through `E: From<quorumlock::Error>`,
        /// so one `?` handles both. (How `E` is inferred: see
        /// [`Lock::try_run`](crate::Lock::try_run).)
        ///
        /// # Errors
        ///
        /// The work's error, or an error of [`run`](Self::run) converted into
        /// `E`.
        ///
        /// # Cancel safety
        ///
        /// As for [`run`](Self::run).
        ///
        /// # Examples
        ///
        /// ```no_run
        /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
        /// use std::time::Duration;
        ///
        #[doc = concat!("let n: u64 = ", $new)]
        ///     .try_run(|_signal| async move { Ok::<_, quorumlock::Error>(7) })
        ///     .await?;
        /// # Ok(())
        /// # }
        /// ```
        pub async fn try_run<F, Fut, T, E>(self, work: F) -> std::result::Result<T, E>
        where
            F: FnOnce(crate::LostSignal) -> Fut,
            Fut: std::future::Future<Output = std::result::Result<T, E>>,
            E: From<crate::Error>,
        {
            self.acquire().await?.try_run(work).await
        }
    };
}
pub(crate) use request_methods;

/// The keys of a lock over `resources`, checked.
fn keys(mut resources: Vec<Vec<u8>>, fenced: bool) -> Result<Keys> {
    match (resources.len(), fenced) {
        (1, _) => Keys::one(resources.pop().unwrap_or_default(), fenced),
        (_, true) => Err(Error::invalid(
            "fencing tokens are for single-resource locks",
        )),
        _ => Keys::many(resources),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
