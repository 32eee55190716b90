//! The public lost-lock signal: a cheap handle on a lease that reports
//! when, and why, the lock ended or can no longer be counted on.

use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::state::Lease;
use crate::error::lost::{LossKind, LostReason};
use crate::error::Error;

/// Tells the holder that a lock is gone or can no longer be counted on.
///
/// Get one from [`Lock::lost_signal`](crate::Lock::lost_signal) or
/// [`Lock::auto_renew`](crate::Lock::auto_renew); [`Lock::run`](crate::Lock::run)
/// and [`LockRequest::run`](crate::LockRequest::run) pass one to the work
/// they run. Clones are cheap and all see the same
/// signal; a signal stays usable after the lock is released or dropped.
///
/// **The signal fires once**, with the first [`LossKind`] that applies:
///
/// - [`Uncertain`](LossKind::Uncertain) — with automatic renewal: no
///   renewal confirmed the lock and its validity fell below the safety
///   margin ([`Renewal::margin`](crate::Renewal::margin)), so this comes
///   *before* the validity reaches zero. Also when an explicit
///   [`extend`](crate::Lock::extend) failed on timeouts or errors;
/// - [`Lost`](LossKind::Lost) — a renewal or extension was refused by so
///   many nodes that the lock is certainly gone;
/// - [`Expired`](LossKind::Expired) — the validity ran out first;
/// - [`LimitReached`](LossKind::LimitReached) — the renewal cap was reached;
/// - [`Released`](LossKind::Released) — the holder released or dropped the
///   lock, so a waiter is never left hanging.
///
/// [`lost`](LostSignal::lost) and the [`cancellation_token`](LostSignal::cancellation_token)
/// report that first firing. [`kind`](LostSignal::kind) is the latest
/// state, which may move once from a non-final kind (`Uncertain`,
/// `LimitReached`) to a final one (`Lost`, `Expired`, `Released`) — for
/// example `Uncertain` first, then `Expired` if no renewal got through.
/// A renewal that succeeds after an `Uncertain` firing keeps the lock held
/// on the nodes, but the signal stays fired.
///
/// Without automatic renewal the signal still fires `Expired` once the
/// validity runs out; the check is lazy (on [`lost`](LostSignal::lost),
/// [`is_fired`](LostSignal::is_fired), [`kind`](LostSignal::kind)) unless a
/// cancellation token was asked for.
///
/// # Examples
///
/// ```no_run
/// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
/// use std::time::Duration;
/// use quorumlock::{LossKind, Renewal};
///
/// let lock = redlock.acquire("reindex", Duration::from_secs(30)).await?;
/// let signal = lock.auto_renew(Renewal::default())?;
/// tokio::select! {
///     kind = signal.lost() => {
///         // stop touching the protected resource
///         eprintln!("lock gone: {kind} ({:?})", signal.reason());
///     }
///     _ = async { /* the long job */ } => {}
/// }
/// lock.release().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct LostSignal {
    lease: Arc<Lease>,
}

impl LostSignal {
    pub(crate) fn new(lease: Arc<Lease>) -> Self {
        Self { lease }
    }

    /// Waits until the signal fires and returns the kind it first fired
    /// with; returns at once if it already has.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future changes nothing, and a later call
    /// sees the same firing.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(lock: quorumlock::Lock) {
    /// let signal = lock.lost_signal();
    /// tokio::spawn(async move {
    ///     let kind = signal.lost().await;
    ///     eprintln!("lock ended: {kind}");
    /// });
    /// # }
    /// ```
    pub async fn lost(&self) -> LossKind {
        let mut term = self.lease.watch();
        loop {
            // Seen before the check: a change after it wakes the wait below.
            term.mark_unchanged();
            // The deadline read under the same lock as the check.
            let deadline = match self.lease.checked().signal.first() {
                Some(kind) => return kind,
                None => self.lease.deadline(),
            };
            tokio::select! {
                _ = self.lease.fired.cancelled() => {}
                _ = tokio::time::sleep_until(deadline.into()) => {}
                // The lease owns the sender, so this never ends in an error.
                Ok(()) = term.changed() => {}
            }
        }
    }

    /// True once the signal has fired.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(lock: quorumlock::Lock) {
    /// let signal = lock.lost_signal();
    /// for chunk in 0..100 {
    ///     if signal.is_fired() {
    ///         break; // stop before the next write
    ///     }
    ///     // write chunk
    /// }
    /// # }
    /// ```
    pub fn is_fired(&self) -> bool {
        self.lease.checked().signal.first().is_some()
    }

    /// The latest kind, or `None` before the signal fires. Unlike
    /// [`lost`](LostSignal::lost), this may have moved from a non-final kind
    /// to a final one since the first firing.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(lock: quorumlock::Lock) {
    /// let signal = lock.lost_signal();
    /// if let Some(kind) = signal.kind() {
    ///     println!("lock {kind}; final: {}", kind.is_final());
    /// }
    /// # }
    /// ```
    pub fn kind(&self) -> Option<LossKind> {
        self.lease.checked().signal.current()
    }

    /// The detailed reason behind [`kind`](LostSignal::kind), with the
    /// per-node failures where there were any; `None` before the signal
    /// fires.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(lock: quorumlock::Lock) {
    /// let signal = lock.lost_signal();
    /// if let Some(reason) = signal.reason() {
    ///     eprintln!("lost: {reason}");
    /// }
    /// # }
    /// ```
    pub fn reason(&self) -> Option<LostReason> {
        self.lease.checked().reason.clone()
    }

    /// When the signal first fired (monotonic clock), or `None` before.
    /// Compare with [`Lock::deadline`](crate::Lock::deadline) to see how
    /// much validity was left at that moment.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(lock: quorumlock::Lock) {
    /// let signal = lock.lost_signal();
    /// if let Some(at) = signal.fired_at() {
    ///     println!("fired {:?} ago", at.elapsed());
    /// }
    /// # }
    /// ```
    pub fn fired_at(&self) -> Option<Instant> {
        self.lease.checked().fired_at
    }

    /// Time left in which the lock is known to be held, as
    /// [`Lock::validity`](crate::Lock::validity); zero once it is lost,
    /// expired or released. Here for the work under
    /// [`Lock::run`](crate::Lock::run), which holds the signal but not the
    /// lock; the lock's other details (deadline, resource, fence) are read
    /// on the [`Lock`](crate::Lock).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(lock: quorumlock::Lock) {
    /// let signal = lock.lost_signal();
    /// assert!(signal.validity() <= std::time::Duration::from_secs(30));
    /// # }
    /// ```
    pub fn validity(&self) -> Duration {
        self.lease.validity()
    }

    /// A token cancelled when the signal first fires, for code that already
    /// stops on a tokio-util [`CancellationToken`]. Cancelling the returned
    /// token (a child) does not affect the signal.
    ///
    /// The first call starts a small task that fires the signal when the
    /// validity runs out, so the token is cancelled on time even without
    /// automatic renewal; the task ends when the signal fires (at the
    /// latest on release or drop). Outside a tokio runtime the token is
    /// still cancelled by everything but that lazy expiry.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(lock: quorumlock::Lock) {
    /// let token = lock.lost_signal().cancellation_token();
    /// tokio::select! {
    ///     _ = token.cancelled() => { /* lock gone */ }
    ///     _ = async { /* work */ } => {}
    /// }
    /// # }
    /// ```
    pub fn cancellation_token(&self) -> CancellationToken {
        // Marks the lease as watched for expiry, once.
        if !self.lease.watched.swap(true, Ordering::AcqRel) {
            match tokio::runtime::Handle::try_current() {
                Ok(handle) => {
                    let signal = self.clone();
                    handle.spawn(async move { signal.lost().await });
                }
                Err(_) => self.lease.watched.store(false, Ordering::Release),
            }
        }
        self.lease.fired.child_token()
    }

    /// The signal as an [`Error::Lost`] with its resource and reason, or
    /// `None` before it fires.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(lock: quorumlock::Lock) -> Result<(), quorumlock::Error> {
    /// let signal = lock.lost_signal();
    /// if let Some(err) = signal.to_error() {
    ///     return Err(err);
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn to_error(&self) -> Option<Error> {
        self.reason().map(|reason| self.lease.keys.lost(reason))
    }
}

impl fmt::Debug for LostSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LostSignal")
            .field("resource", &self.lease.keys.name())
            .field("kind", &self.lease.state().signal.current())
            .field("deadline", &self.lease.deadline())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::Keys;
    use crate::stats::counters::LeaseCounters;
    use crate::stats::locks::{Holding, Primitive};
    use crate::validity::{Term, Ttl};

    const MS: Duration = Duration::from_millis(1);

    fn lease(valid: Duration) -> (Arc<Lease>, Arc<LeaseCounters>) {
        let counters = Arc::new(LeaseCounters::default());
        let term = Term {
            deadline: Instant::now() + valid,
            ttl: Ttl::new(valid, 0.01),
        };
        let keys = Keys::one(b"res", false).expect("a valid resource");
        let holding = Holding::one(Primitive::Lock);
        (
            Arc::new(Lease::new(keys, term, counters.clone(), holding)),
            counters,
        )
    }

    #[test]
    fn a_fresh_lease_is_valid_and_silent() {
        let (lease, _) = lease(Duration::from_secs(10));
        let signal = LostSignal::new(lease.clone());
        assert!(!signal.is_fired());
        assert_eq!(signal.kind(), None);
        assert_eq!(signal.reason(), None);
        assert!(signal.to_error().is_none());
        assert!(signal.validity() > Duration::from_secs(9));
    }

    #[test]
    fn failing_marks_lost_and_fires_the_kind_of_the_reason() {
        let (lease, counters) = lease(Duration::from_secs(10));
        let signal = LostSignal::new(lease.clone());
        let token = signal.cancellation_token();
        lease.fail(LostReason::Refused {
            extended: 0,
            refused: 3,
            needed: 3,
            failures: vec![],
        });
        assert_eq!(signal.kind(), Some(LossKind::Lost));
        assert!(token.is_cancelled());
        assert_eq!(signal.validity(), Duration::ZERO);
        assert!(lease.term().is_err());
        let err = signal.to_error().expect("fired");
        assert!(err.is_lost(), "{err}");
        assert!(signal.fired_at().is_some());
        lease.end();
        assert_eq!(signal.kind(), Some(LossKind::Lost), "final kinds stay");
        assert_eq!(counters.stats(Vec::new()).leases.lost, 1);
    }

    #[test]
    fn a_warning_keeps_the_lock_and_can_be_upgraded() {
        let (lease, counters) = lease(Duration::from_secs(10));
        let signal = LostSignal::new(lease.clone());
        lease.warn(LostReason::RenewalLate {
            validity_left: MS,
            failures: vec![],
        });
        assert!(signal.is_fired());
        assert!(
            signal.validity() > Duration::ZERO,
            "still held until expiry"
        );
        let held = lease.term().expect("still held");
        let later = Term {
            deadline: held.deadline + Duration::from_secs(1),
            ..held
        };
        assert_eq!(lease.extended(later), Ok(()));
        assert!(
            lease.deadline() > held.deadline,
            "a late renewal still counts"
        );
        lease.end();
        assert_eq!(signal.kind(), Some(LossKind::Released));
        assert_eq!(signal.reason(), Some(LostReason::Released));
        let s = counters.stats(Vec::new()).leases;
        assert_eq!((s.uncertain, s.lost, s.expired), (1, 0, 0));
    }

    #[tokio::test]
    async fn waiters_wake_on_firing_and_on_expiry() {
        let (lease, _) = lease(Duration::from_secs(60));
        let signal = LostSignal::new(lease.clone());
        let waiter = tokio::spawn({
            let signal = signal.clone();
            async move { signal.lost().await }
        });
        tokio::task::yield_now().await;
        lease.warn(LostReason::LimitReached {
            renewals: 1,
            held_for: MS,
        });
        let kind = tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("woken")
            .expect("task");
        assert_eq!(kind, LossKind::LimitReached);

        let (short, _) = self::lease(50 * MS);
        let token = LostSignal::new(short.clone()).cancellation_token();
        tokio::time::timeout(Duration::from_secs(5), token.cancelled())
            .await
            .expect("the token is cancelled at expiry without anyone polling");
        assert_eq!(LostSignal::new(short).kind(), Some(LossKind::Expired));
    }

    #[tokio::test]
    async fn a_waiter_follows_a_deadline_moved_earlier() {
        let (lease, _) = lease(Duration::from_secs(60));
        let signal = LostSignal::new(lease.clone());
        let token = signal.cancellation_token();
        let waiter = tokio::spawn({
            let signal = signal.clone();
            async move { signal.lost().await }
        });
        // Both are asleep until the 60 s deadline now.
        tokio::time::sleep(10 * MS).await;
        let start = Instant::now();
        let shorter = Term {
            deadline: start + 48 * MS,
            ttl: Ttl {
                duration: 50 * MS,
                drift: 2 * MS,
            },
        };
        assert!(lease.extended(shorter).is_ok());
        let kind = tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("woken at the new deadline, not the old one")
            .expect("task");
        assert_eq!(kind, LossKind::Expired);
        tokio::time::timeout(Duration::from_secs(5), token.cancelled())
            .await
            .expect("the token follows the new deadline too");
        let fired_at = signal.fired_at().expect("fired");
        assert!(fired_at >= start + 48 * MS, "never before the deadline");
    }
}
