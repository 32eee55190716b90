//! A held lock's shared state: its term, whether (and why) it ended, the
//! lost-lock signal's state, and the token that stops its renewal. Shared
//! (behind an `Arc`) by the lock, its renewal task and every
//! [`LostSignal`](super::signal::LostSignal); the state sits behind a std
//! mutex that is never held across an `await`. The signal's state is a
//! pure state machine ([`SignalState`]): it fires once with a first kind,
//! and may move once from a non-final kind to a final one.
//!
//! The term lives in one place, a `watch` channel ([`Term`]): `validity()`
//! reads it, and everything that sleeps until a point derived from it —
//! the renewal schedule, its safety-margin timer, the signal's expiry —
//! wakes when it changes and sleeps again on the new value. Only a
//! confirmed extension moves it ([`Term::extended`]); one in flight, failed
//! or dropped leaves it as it is, which is safe because no extension
//! shortens a key on a node (see `Lock::extend`).

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::error::lost::{LossKind, LostReason};
use crate::keys::Keys;
use crate::stats::counters::LeaseCounters;
use crate::stats::locks::Holding;
use crate::validity::{self, Term};

/// The shared state of one held lock.
pub(crate) struct Lease {
    /// What the lock covers.
    pub(super) keys: Keys,
    /// When the lock was handed to the holder.
    pub(super) granted: Instant,
    /// The renewal and signal counters of the client.
    pub(super) counters: Arc<LeaseCounters>,
    /// What the grant counts as (a lock, `k` permits).
    holding: Holding,
    /// The term: the one source of truth, watched by every sleeper.
    /// Changed only with `state` locked (so never after the end).
    term: watch::Sender<Term>,
    state: Mutex<State>,
    /// Cancelled when the signal first fires.
    pub(super) fired: CancellationToken,
    /// Cancelled on release or drop (with the state locked); every renewal
    /// task stops on it.
    released: CancellationToken,
    /// A task drives the signal to expiry (see
    /// [`LostSignal::cancellation_token`](super::signal::LostSignal::cancellation_token)).
    pub(super) watched: AtomicBool,
}

#[derive(Default)]
pub(super) struct State {
    /// Why the lock stopped counting as held: the first reason only.
    ended: Option<LostReason>,
    pub(super) signal: SignalState,
    /// The reason behind the signal's current kind.
    pub(super) reason: Option<LostReason>,
    /// When the signal first fired.
    pub(super) fired_at: Option<Instant>,
    /// Stops the current renewal task, if any.
    renewal: Option<CancellationToken>,
}

impl Lease {
    /// A lease on `term`, granted just now, counted as `holding`.
    pub(crate) fn new(
        keys: Keys,
        term: Term,
        counters: Arc<LeaseCounters>,
        holding: Holding,
    ) -> Self {
        counters.of(holding.primitive).held(holding.count);
        Self {
            keys,
            granted: Instant::now(),
            counters,
            holding,
            term: watch::Sender::new(term),
            state: Mutex::default(),
            fired: CancellationToken::new(),
            released: CancellationToken::new(),
            watched: AtomicBool::new(false),
        }
    }

    pub(super) fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The current term while the lock is held;
    /// [`LostReason::AlreadyLost`] once it ended.
    pub(crate) fn term(&self) -> Result<Term, LostReason> {
        let s = self.state();
        match &s.ended {
            Some(earlier) => Err(already_lost(earlier)),
            None => Ok(*self.term.borrow()),
        }
    }

    pub(crate) fn deadline(&self) -> Instant {
        self.term.borrow().deadline
    }

    /// A receiver that sees every later change of the term.
    pub(crate) fn watch(&self) -> watch::Receiver<Term> {
        self.term.subscribe()
    }

    /// Time left; zero once lost or expired.
    pub(crate) fn validity(&self) -> Duration {
        if self.state().ended.is_some() {
            return Duration::ZERO;
        }
        validity::left(self.deadline(), Instant::now())
    }

    /// A majority extended the lock to `next` ([`Term::extended`]): earlier
    /// or later than before, the term is `next`. Refused with
    /// [`LostReason::AlreadyLost`] once the lock ended (it expired or was
    /// released while the replies came in).
    pub(crate) fn extended(&self, next: Term) -> Result<(), LostReason> {
        let s = self.state();
        if let Some(earlier) = &s.ended {
            return Err(already_lost(earlier));
        }
        self.term
            .send_if_modified(|term| std::mem::replace(term, next) != next);
        Ok(())
    }

    /// An extension or renewal failed for good: the lock counts as lost
    /// from now on, and the signal fires with the reason's kind. An
    /// [`AlreadyLost`](LostReason::AlreadyLost) reason changes nothing: its
    /// loss was reported when it happened.
    pub(crate) fn fail(&self, reason: LostReason) {
        if matches!(reason, LostReason::AlreadyLost { .. }) {
            return;
        }
        let mut s = self.state();
        s.ended.get_or_insert_with(|| reason.clone());
        self.fire(&mut s, reason);
    }

    /// Fires the signal without ending the lock (uncertain, limit reached).
    pub(crate) fn warn(&self, reason: LostReason) {
        self.fire(&mut self.state(), reason);
    }

    /// Release or drop: the lock counts as lost, renewal stops, and the
    /// signal fires `Released` (unless it already fired with a final kind).
    pub(crate) fn end(&self) {
        let mut s = self.state();
        // Cancelled by the first end only, with the state locked: the hold
        // is counted once. Lost, whatever the primitive: it ended for
        // another reason than this, or its holder was told it could not
        // count on it any more (what `run` ends the work and returns
        // `Error::Lost` for).
        if !self.released.is_cancelled() {
            let ended = matches!(&s.ended, Some(r) if r.kind() != LossKind::Released);
            let lost = ended || s.signal.told_lost();
            let counters = self.counters.of(self.holding.primitive);
            counters.ended(self.holding.count, self.granted.elapsed(), lost);
        }
        s.ended.get_or_insert(LostReason::Released);
        s.renewal = None;
        self.fire(&mut s, LostReason::Released);
        self.released.cancel();
    }

    /// Replaces any running renewal: returns the token the new task stops
    /// on (also cancelled by [`end`](Self::end)).
    pub(crate) fn start_renewal(&self) -> CancellationToken {
        let token = self.released.child_token();
        if let Some(old) = self.state().renewal.replace(token.clone()) {
            old.cancel();
        }
        token
    }

    /// True while a renewal task started by
    /// [`start_renewal`](Self::start_renewal) has not been replaced,
    /// stopped, or ended by the lease's end.
    pub(crate) fn renewing(&self) -> bool {
        let s = self.state();
        s.renewal.as_ref().is_some_and(|t| !t.is_cancelled())
    }

    /// Reports `reason` to the signal (see [`SignalState::fire`]), with
    /// the state locked; a first firing cancels [`fired`](Self::fired).
    fn fire(&self, s: &mut State, reason: LostReason) {
        let kind = reason.kind();
        let transition = s.signal.fire(kind);
        if transition != Transition::Unchanged {
            s.reason = Some(reason);
            if transition == Transition::Fired {
                s.fired_at = Some(Instant::now());
                self.fired.cancel();
            }
            self.counters.signalled(kind);
        }
    }

    /// The state, once the lease is expired if its deadline has passed:
    /// what the signal reads.
    pub(super) fn checked(&self) -> MutexGuard<'_, State> {
        let mut s = self.state();
        let deadline = self.deadline();
        if Instant::now() >= deadline && !s.signal.current().is_some_and(LossKind::is_final) {
            s.ended.get_or_insert(LostReason::Expired);
            self.fire(&mut s, LostReason::Expired);
        }
        s
    }
}

/// What [`SignalState::fire`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Transition {
    /// The signal fired now, for the first time.
    Fired,
    /// The signal had fired with a non-final kind; this final kind replaces it.
    Upgraded,
    /// Nothing changed: the signal already holds a final kind, or both
    /// kinds are non-final.
    Unchanged,
}

/// The signal's state: the kind it first fired with (what waiters are
/// told, never changes) and the current kind (may move once from a
/// non-final to a final kind).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct SignalState {
    first: Option<LossKind>,
    current: Option<LossKind>,
}

impl SignalState {
    /// Reports `kind`; see [`Transition`] for what may happen.
    pub(crate) fn fire(&mut self, kind: LossKind) -> Transition {
        match self.current {
            None => {
                self.first = Some(kind);
                self.current = Some(kind);
                Transition::Fired
            }
            Some(now) if !now.is_final() && kind.is_final() => {
                self.current = Some(kind);
                Transition::Upgraded
            }
            Some(_) => Transition::Unchanged,
        }
    }

    /// Whether the signal told the holder that the lock is gone or can no
    /// longer be counted on: it fired [`Uncertain`](LossKind::Uncertain),
    /// [`Lost`](LossKind::Lost) or [`Expired`](LossKind::Expired), first or
    /// later (a cap reached, a release: not on their own).
    pub(crate) fn told_lost(&self) -> bool {
        use LossKind::{Expired, Lost, Uncertain};
        let told = |kind| matches!(kind, Some(Uncertain | Lost | Expired));
        told(self.first) || told(self.current)
    }

    /// The kind the signal first fired with.
    pub(crate) fn first(&self) -> Option<LossKind> {
        self.first
    }

    /// The latest kind.
    pub(crate) fn current(&self) -> Option<LossKind> {
        self.current
    }
}

fn already_lost(earlier: &LostReason) -> LostReason {
    LostReason::AlreadyLost {
        earlier: Box::new(earlier.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::locks::Primitive;
    use crate::validity::Ttl;

    const MS: Duration = Duration::from_millis(1);

    fn lease(valid: Duration) -> Lease {
        let term = Term {
            deadline: Instant::now() + valid,
            ttl: Ttl::new(valid, 0.01),
        };
        let keys = Keys::one(b"res", false).expect("a valid resource");
        Lease::new(
            keys,
            term,
            Arc::new(LeaseCounters::default()),
            Holding::one(Primitive::Lock),
        )
    }

    fn ttl_of(lease: &Lease) -> Duration {
        lease.term().expect("held").ttl.duration
    }

    #[test]
    fn nothing_moves_the_deadline_after_the_end() {
        let lease = lease(Duration::from_secs(10));
        let deadline = lease.deadline();
        lease.end();
        let later = Term {
            deadline: deadline + Duration::from_secs(5),
            ttl: Ttl {
                duration: Duration::from_secs(15),
                drift: MS * 152,
            },
        };
        let refused = lease.extended(later).expect_err("ended");
        assert_eq!(refused.kind(), LossKind::Released);
        assert_eq!(lease.deadline(), deadline);
        assert_eq!(lease.validity(), Duration::ZERO);
        assert!(lease.term().is_err());
        let again = lease.term();
        assert!(
            matches!(&again, Err(LostReason::AlreadyLost { earlier }) if **earlier == LostReason::Released),
            "{again:?}"
        );
        assert_eq!(lease.deadline(), deadline);
    }

    #[test]
    fn the_first_reason_the_lock_ended_with_is_kept() {
        let lease = lease(Duration::from_secs(10));
        lease.fail(LostReason::TooSlow);
        lease.fail(LostReason::AlreadyLost {
            earlier: Box::new(LostReason::Expired),
        });
        lease.end();
        assert_eq!(
            lease.term(),
            Err(LostReason::AlreadyLost {
                earlier: Box::new(LostReason::TooSlow)
            })
        );
        assert_eq!(
            lease.state().signal.current(),
            Some(LossKind::Released),
            "upgraded"
        );
    }

    #[test]
    fn a_confirmed_extension_sets_the_term_earlier_or_later_and_tells_the_watchers() {
        let lease = lease(Duration::from_secs(10));
        let mut watched = lease.watch();
        let start = Instant::now();
        let shorter = Term {
            deadline: start + 295 * MS,
            ttl: Ttl {
                duration: 300 * MS,
                drift: 5 * MS,
            },
        };
        assert_eq!(lease.extended(shorter), Ok(()));
        assert_eq!(lease.term(), Ok(shorter));
        assert!(lease.validity() <= 295 * MS);
        assert!(watched.has_changed().unwrap_or(false), "watchers are told");
        watched.mark_unchanged();
        let longer = Term {
            deadline: start + Duration::from_secs(59),
            ttl: Ttl {
                duration: Duration::from_secs(60),
                drift: 602 * MS,
            },
        };
        assert_eq!(lease.extended(longer), Ok(()));
        assert_eq!(lease.deadline(), longer.deadline);
        assert_eq!(ttl_of(&lease), Duration::from_secs(60));
        assert!(watched.has_changed().unwrap_or(false));
    }

    #[test]
    fn expiry_is_noticed_lazily() {
        let lease = lease(Duration::ZERO);
        assert_eq!(lease.state().signal.current(), None, "not checked yet");
        assert_eq!(lease.checked().signal.first(), Some(LossKind::Expired));
        assert_eq!(lease.state().reason, Some(LostReason::Expired));
        assert!(lease.term().is_err());
        assert_eq!(lease.counters.stats(Vec::new()).leases.expired, 1);
    }

    #[test]
    fn a_new_renewal_stops_the_previous_one_and_the_end_stops_all() {
        let lease = lease(Duration::from_secs(10));
        let first = lease.start_renewal();
        let second = lease.start_renewal();
        assert!(first.is_cancelled());
        assert!(!second.is_cancelled());
        lease.end();
        assert!(second.is_cancelled());
    }

    const ALL: [LossKind; 5] = [
        LossKind::Uncertain,
        LossKind::Lost,
        LossKind::Expired,
        LossKind::LimitReached,
        LossKind::Released,
    ];

    #[test]
    fn the_first_kind_is_kept_for_waiters() {
        for first in ALL {
            for later in ALL {
                let mut s = SignalState::default();
                assert_eq!(s.fire(first), Transition::Fired);
                s.fire(later);
                assert_eq!(s.first(), Some(first), "{first} then {later}");
            }
        }
    }

    #[test]
    fn only_a_final_kind_replaces_a_non_final_one() {
        for first in ALL {
            for later in ALL {
                let mut s = SignalState::default();
                s.fire(first);
                let t = s.fire(later);
                if !first.is_final() && later.is_final() {
                    assert_eq!(t, Transition::Upgraded, "{first} then {later}");
                    assert_eq!(s.current(), Some(later));
                } else {
                    assert_eq!(t, Transition::Unchanged, "{first} then {later}");
                    assert_eq!(s.current(), Some(first));
                }
            }
        }
    }

    #[test]
    fn a_final_kind_never_changes_again() {
        let mut s = SignalState::default();
        s.fire(LossKind::Uncertain);
        assert_eq!(s.fire(LossKind::Expired), Transition::Upgraded);
        for k in ALL {
            assert_eq!(s.fire(k), Transition::Unchanged);
        }
        assert_eq!(s.current(), Some(LossKind::Expired));
        assert_eq!(s.first(), Some(LossKind::Uncertain));
    }

    #[test]
    fn a_grant_ends_lost_once_its_holder_was_told_so() {
        let lost = |fire: &dyn Fn(&Lease)| {
            let lease = lease(Duration::from_secs(10));
            fire(&lease);
            lease.end();
            lease.counters.stats(Vec::new()).locks.acquires.lost
        };
        let late = || LostReason::RenewalLate {
            validity_left: 599 * MS,
            failures: Vec::new(),
        };
        assert_eq!(lost(&|l| l.warn(late())), 1, "uncertain, then released");
        assert_eq!(lost(&|l| l.fail(LostReason::TooSlow)), 1);
        let capped = || LostReason::LimitReached {
            renewals: 3,
            held_for: MS,
        };
        assert_eq!(lost(&|l| l.warn(capped())), 0, "a cap is no loss");
        assert_eq!(lost(&|_| {}), 0, "released");
        for kind in ALL {
            let mut s = SignalState::default();
            s.fire(kind);
            let told = matches!(
                kind,
                LossKind::Uncertain | LossKind::Lost | LossKind::Expired
            );
            assert_eq!(s.told_lost(), told, "{kind}");
        }
    }

    #[test]
    fn unfired_state_is_empty() {
        let s = SignalState::default();
        assert_eq!((s.first(), s.current()), (None, None));
    }
}
