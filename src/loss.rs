//! Pure rules of the lost-lock signal: the kinds of loss, which one a
//! failed extension means, and how the signal moves from one kind to the
//! next. No I/O and no clock reads here.

use std::fmt;

use crate::error::LostReason;
use crate::quorum;

/// Why a lock's [`LostSignal`](crate::LostSignal) fired.
///
/// Two kinds leave the lock possibly still held for a while —
/// [`Uncertain`](LossKind::Uncertain) and
/// [`LimitReached`](LossKind::LimitReached) — and may later be replaced by a
/// final kind ([`Lost`](LossKind::Lost), [`Expired`](LossKind::Expired) or
/// [`Released`](LossKind::Released)) in [`LostSignal::kind`](crate::LostSignal::kind).
/// A final kind never changes.
///
/// # Examples
///
/// ```
/// use quorumlock::LossKind;
///
/// assert!(LossKind::Lost.is_final());
/// assert!(!LossKind::Uncertain.is_final());
/// assert_eq!(LossKind::Expired.to_string(), "expired");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LossKind {
    /// No renewal confirmed the lock and its validity fell below the safety
    /// margin, or an extension failed without a majority saying the key is
    /// gone (timeouts, connection or error replies). The keys may still be
    /// there, but the holder can no longer count on them: stop working on
    /// the protected resource.
    Uncertain,
    /// A majority of nodes answered that the key no longer carries this
    /// lock's token: the lock is certainly gone (expired early, deleted, or
    /// taken over).
    Lost,
    /// The validity ran out before a renewal or extension succeeded.
    Expired,
    /// The renewal cap (number of renewals or total hold time) was reached.
    /// Renewal has ended; the lock runs out the validity it has left.
    LimitReached,
    /// The holder released or dropped the lock.
    Released,
}

impl LossKind {
    /// True for the kinds after which this holder certainly does not hold
    /// the lock any more: [`Lost`](LossKind::Lost),
    /// [`Expired`](LossKind::Expired) and [`Released`](LossKind::Released).
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(quorumlock::LossKind::Released.is_final());
    /// assert!(!quorumlock::LossKind::LimitReached.is_final());
    /// ```
    pub fn is_final(self) -> bool {
        matches!(
            self,
            LossKind::Lost | LossKind::Expired | LossKind::Released
        )
    }

    /// A short lowercase name: `uncertain`, `lost`, `expired`,
    /// `limit-reached` or `released`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(quorumlock::LossKind::LimitReached.as_str(), "limit-reached");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            LossKind::Uncertain => "uncertain",
            LossKind::Lost => "lost",
            LossKind::Expired => "expired",
            LossKind::LimitReached => "limit-reached",
            LossKind::Released => "released",
        }
    }
}

impl fmt::Display for LossKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The kind of loss a failed extension means, on a cluster of `nodes`;
/// `None` for [`LostReason::AlreadyLost`] (the signal fired before).
///
/// An extension is *certainly* lost when so many nodes refused (the key is
/// absent or holds another token) that the nodes still holding the token
/// cannot be a majority; failures and timeouts leave it uncertain.
pub(crate) fn kind_of(reason: &LostReason, nodes: usize) -> Option<LossKind> {
    match reason {
        LostReason::Expired => Some(LossKind::Expired),
        LostReason::NoQuorum { refused, .. } => {
            if nodes.saturating_sub(*refused) < quorum::quorum(nodes) {
                Some(LossKind::Lost)
            } else {
                Some(LossKind::Uncertain)
            }
        }
        LostReason::TooSlow | LostReason::Uncertain { .. } => Some(LossKind::Uncertain),
        LostReason::LimitReached { .. } => Some(LossKind::LimitReached),
        LostReason::Released => Some(LossKind::Released),
        LostReason::AlreadyLost => None,
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

    /// The kind the signal first fired with.
    pub(crate) fn first(&self) -> Option<LossKind> {
        self.first
    }

    /// The latest kind.
    pub(crate) fn current(&self) -> Option<LossKind> {
        self.current
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

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
    fn unfired_state_is_empty() {
        let s = SignalState::default();
        assert_eq!((s.first(), s.current()), (None, None));
    }

    fn no_quorum(refused: usize, failed: usize) -> LostReason {
        LostReason::NoQuorum {
            extended: 0,
            refused,
            needed: 3,
            failures: (0..failed)
                .map(|i| {
                    crate::error::NodeFailure::new(
                        format!("n{i}"),
                        crate::error::NodeFailureKind::Timeout(Duration::from_millis(50)),
                    )
                })
                .collect(),
        }
    }

    #[test]
    fn a_refusing_majority_is_certain_loss_failures_are_not() {
        assert_eq!(kind_of(&no_quorum(3, 0), 5), Some(LossKind::Lost));
        assert_eq!(kind_of(&no_quorum(5, 0), 5), Some(LossKind::Lost));
        assert_eq!(kind_of(&no_quorum(2, 1), 5), Some(LossKind::Uncertain));
        assert_eq!(kind_of(&no_quorum(0, 3), 5), Some(LossKind::Uncertain));
        assert_eq!(kind_of(&no_quorum(1, 0), 1), Some(LossKind::Lost));
        // Four nodes need three: two refusals leave only two possible holders.
        assert_eq!(kind_of(&no_quorum(2, 0), 4), Some(LossKind::Lost));
        assert_eq!(kind_of(&no_quorum(1, 1), 4), Some(LossKind::Uncertain));
    }

    #[test]
    fn every_reason_maps_to_its_kind() {
        assert_eq!(kind_of(&LostReason::Expired, 5), Some(LossKind::Expired));
        assert_eq!(kind_of(&LostReason::TooSlow, 5), Some(LossKind::Uncertain));
        assert_eq!(kind_of(&LostReason::AlreadyLost, 5), None);
        assert_eq!(
            kind_of(
                &LostReason::LimitReached {
                    renewals: 3,
                    held_for: Duration::from_secs(1)
                },
                5
            ),
            Some(LossKind::LimitReached)
        );
        assert_eq!(kind_of(&LostReason::Released, 5), Some(LossKind::Released));
    }

    #[test]
    fn names_are_stable() {
        let names: Vec<_> = ALL.iter().map(|k| k.to_string()).collect();
        assert_eq!(
            names,
            ["uncertain", "lost", "expired", "limit-reached", "released"]
        );
    }
}
