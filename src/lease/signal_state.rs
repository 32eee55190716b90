//! The lost-lock signal's pure state machine: it fires once with a first
//! kind, and may move once from a non-final kind to a final one. No I/O and
//! no clock reads here.

use crate::error::lost::LossKind;

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
}
