//! A held lock's lease: its deadline and TTL, whether it is lost, and the
//! lost-lock signal the holder can wait on. Shared (behind an `Arc`) by the
//! lock, its renewal task and every [`LostSignal`]; the state sits behind a
//! std mutex that is never held across an `await`.
//!
//! The deadline and TTL live in one place, a `watch` channel ([`Term`]):
//! `validity()` reads it, and everything that sleeps until a point derived
//! from it — the renewal schedule, its safety-margin timer, the signal's
//! expiry — wakes when it changes and sleeps again on the new value. An
//! extension lowers the deadline *before* it is sent when its TTL is the
//! shorter one ([`quorum::deadline_while_extending`]), so a dropped or
//! failed extension never leaves a deadline later than the keys'.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::counters::LeaseCounters;
use crate::error::{Error, LostReason};
use crate::keys::Keys;
use crate::loss::{self, LossKind, SignalState, Transition};
use crate::quorum;

/// The shared state of one held lock.
pub(crate) struct Lease {
    keys: Keys,
    granted: Instant,
    counters: Arc<LeaseCounters>,
    /// The deadline and TTL: the one source of truth, watched by every
    /// sleeper. Changed only with `state` locked (so never after the end).
    term: watch::Sender<Term>,
    state: Mutex<State>,
    /// Cancelled when the signal first fires.
    fired: CancellationToken,
    /// Cancelled on release or drop; every renewal task stops on it.
    ended: CancellationToken,
    /// A task drives the signal to expiry (see [`LostSignal::cancellation_token`]).
    watched: AtomicBool,
}

/// Until when the lock is known to be held, and the TTL that renewals use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Term {
    pub(crate) deadline: Instant,
    pub(crate) ttl: Duration,
}

struct State {
    lost: bool,
    signal: SignalState,
    reason: Option<LostReason>,
    fired_at: Option<Instant>,
    /// Stops the current renewal task, if any.
    renewal: Option<CancellationToken>,
}

/// What the lock looks like now.
#[derive(Debug, Clone, Copy)]
pub(crate) struct View {
    pub(crate) deadline: Instant,
    pub(crate) ttl: Duration,
    pub(crate) lost: bool,
}

impl Lease {
    /// A lease valid until `deadline`, granted with `ttl` just now.
    pub(crate) fn new(
        keys: Keys,
        deadline: Instant,
        ttl: Duration,
        counters: Arc<LeaseCounters>,
    ) -> Self {
        Self {
            keys,
            granted: Instant::now(),
            counters,
            term: watch::Sender::new(Term { deadline, ttl }),
            state: Mutex::new(State {
                lost: false,
                signal: SignalState::default(),
                reason: None,
                fired_at: None,
                renewal: None,
            }),
            fired: CancellationToken::new(),
            ended: CancellationToken::new(),
            watched: AtomicBool::new(false),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// When the lock was handed to the holder.
    pub(crate) fn granted(&self) -> Instant {
        self.granted
    }

    pub(crate) fn view(&self) -> View {
        let s = self.state();
        let term = *self.term.borrow();
        View {
            deadline: term.deadline,
            ttl: term.ttl,
            lost: s.lost,
        }
    }

    pub(crate) fn deadline(&self) -> Instant {
        self.term.borrow().deadline
    }

    /// A receiver that sees every later change of the deadline or TTL.
    pub(crate) fn watch(&self) -> watch::Receiver<Term> {
        self.term.subscribe()
    }

    /// Time left; zero once lost or expired.
    pub(crate) fn validity(&self) -> Duration {
        let s = self.state();
        if s.lost {
            Duration::ZERO
        } else {
            self.deadline().saturating_duration_since(Instant::now())
        }
    }

    /// An extension to `ttl` (with its `drift`) is about to be sent,
    /// measured from `start`: lowers the deadline to what the new TTL
    /// allows if that is earlier, and returns the deadline that holds
    /// while it is in flight. `None` once the lock is lost or released.
    pub(crate) fn begin_extend(
        &self,
        start: Instant,
        ttl: Duration,
        drift: Duration,
    ) -> Option<Instant> {
        let s = self.state();
        if s.lost {
            return None;
        }
        let mut in_flight = start;
        self.term.send_if_modified(|term| {
            in_flight = quorum::deadline_while_extending(term.deadline, start, ttl, drift);
            let lowered = in_flight != term.deadline;
            term.deadline = in_flight;
            lowered
        });
        drop(s);
        Some(in_flight)
    }

    /// A majority extended the lock with `ttl` until `deadline`. Ignored
    /// (and false) once the lock is lost or released.
    pub(crate) fn extended(&self, deadline: Instant, ttl: Duration) -> bool {
        let s = self.state();
        if s.lost {
            return false;
        }
        self.term.send_if_modified(|term| {
            let next = Term { deadline, ttl };
            let changed = *term != next;
            *term = next;
            changed
        });
        drop(s);
        true
    }

    /// An extension or renewal failed for good: the lock counts as lost
    /// from now on, and the signal fires with the kind `reason` means.
    pub(crate) fn fail(&self, reason: LostReason, nodes: usize) {
        let kind = loss::kind_of(&reason, nodes);
        let mut s = self.state();
        s.lost = true;
        let fired = kind.map(|kind| self.fire_locked(&mut s, kind, reason));
        drop(s);
        self.after_fire(fired);
    }

    /// Fires the signal without ending the lock (uncertain, limit reached).
    pub(crate) fn warn(&self, kind: LossKind, reason: LostReason) {
        let mut s = self.state();
        let fired = self.fire_locked(&mut s, kind, reason);
        drop(s);
        self.after_fire(Some(fired));
    }

    /// Release or drop: the lock counts as lost, renewal stops, and the
    /// signal fires `Released` (unless it already fired with a final kind).
    pub(crate) fn end(&self) {
        let mut s = self.state();
        s.lost = true;
        s.renewal = None;
        let fired = self.fire_locked(&mut s, LossKind::Released, LostReason::Released);
        drop(s);
        self.ended.cancel();
        self.after_fire(Some(fired));
    }

    /// Replaces any running renewal: returns the token the new task stops
    /// on (also cancelled by [`end`](Self::end)).
    pub(crate) fn start_renewal(&self) -> CancellationToken {
        let token = self.ended.child_token();
        if let Some(old) = self.state().renewal.replace(token.clone()) {
            old.cancel();
        }
        token
    }

    fn fire_locked(&self, s: &mut State, kind: LossKind, reason: LostReason) -> Transition {
        let transition = s.signal.fire(kind);
        if transition != Transition::Unchanged {
            s.reason = Some(reason);
            if transition == Transition::Fired {
                s.fired_at = Some(Instant::now());
            }
            self.counters.signalled(kind);
        }
        transition
    }

    fn after_fire(&self, transition: Option<Transition>) {
        if transition == Some(Transition::Fired) {
            self.fired.cancel();
        }
    }

    /// The first kind when the signal has fired — expiring the lease first
    /// if its deadline has passed — or the deadline to wait for.
    fn check(&self) -> Result<LossKind, Instant> {
        let mut s = self.state();
        let deadline = self.deadline();
        let fired =
            if Instant::now() >= deadline && !s.signal.current().is_some_and(LossKind::is_final) {
                s.lost = true;
                Some(self.fire_locked(&mut s, LossKind::Expired, LostReason::Expired))
            } else {
                None
            };
        let result = s.signal.first().ok_or(deadline);
        drop(s);
        self.after_fire(fired);
        result
    }
}

/// Tells the holder that a lock is gone or can no longer be counted on.
///
/// Get one from [`Lock::lost_signal`](crate::Lock::lost_signal) or
/// [`Lock::auto_renew`](crate::Lock::auto_renew); [`Redlock::with_lock`](crate::Redlock::with_lock)
/// passes one to the work it runs. Clones are cheap and all see the same
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
            let deadline = match self.lease.check() {
                Ok(kind) => return kind,
                Err(deadline) => deadline,
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
        self.lease.check().is_ok()
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
        let _ = self.lease.check();
        self.lease.state().signal.current()
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
        let _ = self.lease.check();
        self.lease.state().reason.clone()
    }

    /// When the signal first fired (monotonic clock), or `None` before.
    /// Compare with [`deadline`](LostSignal::deadline) to see how much
    /// validity was left at that moment.
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
        let _ = self.lease.check();
        self.lease.state().fired_at
    }

    /// Time left in which the lock is known to be held, as
    /// [`Lock::validity`](crate::Lock::validity); zero once it is lost,
    /// expired or released.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(lock: quorumlock::Lock) {
    /// let signal = lock.lost_signal();
    /// assert!(signal.validity() <= std::time::Duration::from_secs(30));
    /// # }
    /// ```
    pub fn validity(&self) -> std::time::Duration {
        self.lease.validity()
    }

    /// The monotonic instant at which the validity ends, as
    /// [`Lock::deadline`](crate::Lock::deadline): later after each renewal,
    /// earlier as soon as an extension to a shorter TTL is sent.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(lock: quorumlock::Lock) {
    /// let signal = lock.lost_signal();
    /// let left = signal.deadline().saturating_duration_since(std::time::Instant::now());
    /// # }
    /// ```
    pub fn deadline(&self) -> Instant {
        self.lease.deadline()
    }

    /// The resource, byte for byte as stored as the Redis key; for a lock
    /// over several resources, the first one.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(lock: quorumlock::Lock) {
    /// assert_eq!(lock.lost_signal().resource(), lock.resource());
    /// # }
    /// ```
    pub fn resource(&self) -> &[u8] {
        self.lease.keys.first()
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
        if !self.lease.watched.swap(true, Ordering::AcqRel) {
            match tokio::runtime::Handle::try_current() {
                Ok(handle) => {
                    let signal = self.clone();
                    handle.spawn(async move {
                        signal.lost().await;
                    });
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
        self.reason().map(|reason| Error::Lost {
            resource: self.lease.keys.name(),
            reason,
        })
    }
}

impl fmt::Debug for LostSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = self.lease.state().signal.current();
        f.debug_struct("LostSignal")
            .field("resource", &self.lease.keys.name())
            .field("kind", &kind)
            .field("deadline", &self.lease.deadline())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn lease(valid: Duration) -> (Arc<Lease>, Arc<LeaseCounters>) {
        let counters = Arc::new(LeaseCounters::default());
        let lease = Lease::new(
            Keys::one(b"res", false).expect("a valid resource"),
            Instant::now() + valid,
            valid,
            counters.clone(),
        );
        (Arc::new(lease), counters)
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
        assert_eq!(signal.resource(), b"res");
    }

    #[test]
    fn failing_marks_lost_and_fires_the_kind_of_the_reason() {
        let (lease, counters) = lease(Duration::from_secs(10));
        let signal = LostSignal::new(lease.clone());
        let token = signal.cancellation_token();
        lease.fail(
            LostReason::NoQuorum {
                extended: 0,
                refused: 3,
                needed: 3,
                failures: vec![],
            },
            5,
        );
        assert_eq!(signal.kind(), Some(LossKind::Lost));
        assert!(token.is_cancelled());
        assert_eq!(signal.validity(), Duration::ZERO);
        assert!(lease.view().lost);
        let err = signal.to_error().expect("fired");
        assert!(err.is_lost(), "{err}");
        assert!(signal.fired_at().is_some());
        lease.end();
        assert_eq!(signal.kind(), Some(LossKind::Lost), "final kinds stay");
        assert_eq!(counters.snapshot().lost, 1);
    }

    #[test]
    fn a_warning_keeps_the_lock_and_can_be_upgraded() {
        let (lease, counters) = lease(Duration::from_secs(10));
        let signal = LostSignal::new(lease.clone());
        lease.warn(
            LossKind::Uncertain,
            LostReason::Uncertain {
                validity_left: MS,
                failures: vec![],
            },
        );
        assert!(signal.is_fired());
        assert!(
            signal.validity() > Duration::ZERO,
            "still held until expiry"
        );
        let deadline = lease.deadline();
        assert!(lease.extended(deadline + Duration::from_secs(1), Duration::from_secs(11)));
        assert!(lease.deadline() > deadline, "a late renewal still counts");
        lease.end();
        assert_eq!(signal.kind(), Some(LossKind::Released));
        assert_eq!(signal.reason(), Some(LostReason::Released));
        let s = counters.snapshot();
        assert_eq!((s.uncertain, s.lost, s.expired), (1, 0, 0));
    }

    #[test]
    fn nothing_moves_the_deadline_after_the_end() {
        let (lease, _) = lease(Duration::from_secs(10));
        let deadline = lease.deadline();
        lease.end();
        assert!(!lease.extended(deadline + Duration::from_secs(5), Duration::from_secs(15)));
        assert_eq!(lease.deadline(), deadline);
        assert_eq!(lease.validity(), Duration::ZERO);
        let now = Instant::now();
        assert_eq!(lease.begin_extend(now, MS * 300, MS * 5), None);
        assert_eq!(lease.deadline(), deadline);
    }

    #[test]
    fn a_shorter_extension_lowers_the_deadline_before_it_is_sent() {
        let (lease, _) = lease(Duration::from_secs(10));
        let mut term = lease.watch();
        let start = Instant::now();
        let in_flight = lease.begin_extend(start, 300 * MS, 5 * MS);
        assert_eq!(in_flight, Some(start + 295 * MS));
        assert_eq!(lease.deadline(), start + 295 * MS);
        assert!(lease.validity() <= 295 * MS);
        assert_eq!(lease.view().ttl, Duration::from_secs(10), "until confirmed");
        assert!(term.has_changed().unwrap_or(false), "watchers are told");
        term.mark_unchanged();
        // Confirmed: the deadline and TTL of the extension, from its start.
        assert!(lease.extended(start + 295 * MS, 300 * MS));
        assert_eq!(lease.view().ttl, 300 * MS);
    }

    #[test]
    fn a_longer_extension_moves_nothing_until_it_is_confirmed() {
        let (lease, _) = lease(Duration::from_secs(1));
        let deadline = lease.deadline();
        let term = lease.watch();
        let start = Instant::now();
        assert_eq!(
            lease.begin_extend(start, Duration::from_secs(60), 602 * MS),
            Some(deadline)
        );
        assert_eq!(lease.deadline(), deadline);
        assert!(!term.has_changed().unwrap_or(true), "nothing changed");
        let later = start + Duration::from_secs(59);
        assert!(lease.extended(later, Duration::from_secs(60)));
        assert_eq!(lease.deadline(), later);
        assert!(term.has_changed().unwrap_or(false));
    }

    #[test]
    fn expiry_is_noticed_lazily() {
        let (lease, counters) = lease(Duration::ZERO);
        let signal = LostSignal::new(lease);
        assert!(signal.is_fired());
        assert_eq!(signal.kind(), Some(LossKind::Expired));
        assert_eq!(signal.reason(), Some(LostReason::Expired));
        assert_eq!(counters.snapshot().expired, 1);
    }

    #[test]
    fn a_new_renewal_stops_the_previous_one_and_the_end_stops_all() {
        let (lease, _) = lease(Duration::from_secs(10));
        let first = lease.start_renewal();
        let second = lease.start_renewal();
        assert!(first.is_cancelled());
        assert!(!second.is_cancelled());
        lease.end();
        assert!(second.is_cancelled());
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
        lease.warn(
            LossKind::LimitReached,
            LostReason::LimitReached {
                renewals: 1,
                held_for: MS,
            },
        );
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
        assert!(lease.begin_extend(start, 50 * MS, 2 * MS).is_some());
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
