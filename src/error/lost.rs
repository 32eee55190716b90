//! Why a lock ended, in one vocabulary: [`LostReason`] says what happened
//! and [`LossKind`] what it means for the holder; the kind is a property of
//! the reason ([`LostReason::kind`]). A failed extension is classified
//! where its tally is known ([`LostReason::no_quorum`]), so no later code
//! needs the node count to tell a certain loss from an uncertain one. Pure:
//! no I/O and no clock reads here.

use std::fmt;
use std::time::Duration;

use crate::error::human::Human;
use crate::error::{NodeFailure, NodeFailures};

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
        matches!(self, Self::Lost | Self::Expired | Self::Released)
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

/// Why a held lock counts as lost, or can no longer be counted on; its
/// [`kind`](LostReason::kind) is what the lost-lock signal reports.
///
/// # Examples
///
/// ```
/// use quorumlock::{LossKind, LostReason};
///
/// assert_eq!(LostReason::Expired.kind(), LossKind::Expired);
/// assert_eq!(LostReason::TooSlow.kind(), LossKind::Uncertain);
/// assert_eq!(LostReason::Expired.to_string(), "its validity ran out");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LostReason {
    /// The validity window ran out before the operation succeeded.
    Expired,
    /// An extension was refused by so many nodes (the key is absent or
    /// holds another token) that the nodes left cannot be a majority: the
    /// lock is certainly gone. Kind [`Lost`](LossKind::Lost).
    #[non_exhaustive]
    Refused {
        /// Nodes that still held the token and extended it.
        extended: usize,
        /// Nodes that answered that the key is absent or holds another token.
        refused: usize,
        /// Votes a quorum needs.
        needed: usize,
        /// Nodes that failed to answer, and why.
        failures: Vec<NodeFailure>,
    },
    /// An extension reached no quorum because nodes failed (timeouts,
    /// connection or error replies), without enough refusals to prove the
    /// key gone: the lock may still be held. Kind
    /// [`Uncertain`](LossKind::Uncertain).
    #[non_exhaustive]
    Unconfirmed {
        /// Nodes that still held the token and extended it.
        extended: usize,
        /// Nodes that answered that the key is absent or holds another token.
        refused: usize,
        /// Votes a quorum needs.
        needed: usize,
        /// Nodes that failed to answer, and why.
        failures: Vec<NodeFailure>,
    },
    /// The extension reached a quorum, but too late: no validity was left.
    TooSlow,
    /// The lock had already ended (an earlier extension failed, the
    /// validity ran out, or it was released) before this operation; it
    /// keeps the reason it ended with, and that reason's kind.
    #[non_exhaustive]
    AlreadyLost {
        /// Why the lock ended in the first place.
        earlier: Box<LostReason>,
    },
    /// Automatic renewal did not confirm the lock before its validity fell
    /// below the safety margin; the keys may still be there. Kind
    /// [`Uncertain`](LossKind::Uncertain).
    #[non_exhaustive]
    RenewalLate {
        /// Validity that was left when this was decided.
        validity_left: Duration,
        /// Why the last renewal attempt failed (empty while it was still
        /// waiting for replies).
        failures: Vec<NodeFailure>,
    },
    /// Automatic renewal reached its cap on renewals or on hold time.
    #[non_exhaustive]
    LimitReached {
        /// Renewals that succeeded.
        renewals: u32,
        /// Time since the lock was granted.
        held_for: Duration,
    },
    /// The holder released or dropped the lock.
    Released,
}

impl LostReason {
    /// What this reason means for the holder.
    ///
    /// # Examples
    ///
    /// ```
    /// use quorumlock::{LossKind, LostReason};
    ///
    /// assert_eq!(LostReason::Released.kind(), LossKind::Released);
    /// ```
    pub fn kind(&self) -> LossKind {
        match self {
            Self::Expired => LossKind::Expired,
            Self::Refused { .. } => LossKind::Lost,
            Self::Unconfirmed { .. } | Self::TooSlow | Self::RenewalLate { .. } => {
                LossKind::Uncertain
            }
            Self::AlreadyLost { earlier } => earlier.kind(),
            Self::LimitReached { .. } => LossKind::LimitReached,
            Self::Released => LossKind::Released,
        }
    }

    /// An extension decided without a quorum: `extended` nodes said yes,
    /// `refused` said no, `unanswered` failed or never answered, `needed`
    /// were needed. [`Refused`](LostReason::Refused) when the nodes that did
    /// not refuse cannot give the votes needed (the key is gone on too many
    /// nodes), [`Unconfirmed`](LostReason::Unconfirmed) otherwise.
    pub(crate) fn no_quorum(
        extended: usize,
        refused: usize,
        unanswered: usize,
        needed: usize,
        failures: Vec<NodeFailure>,
    ) -> Self {
        // Too few nodes could still hold the token for a majority.
        if extended + unanswered < needed {
            LostReason::Refused {
                extended,
                refused,
                needed,
                failures,
            }
        } else {
            LostReason::Unconfirmed {
                extended,
                refused,
                needed,
                failures,
            }
        }
    }

    /// The per-node failures behind this reason, if any.
    pub(crate) fn node_failures(&self) -> &[NodeFailure] {
        match self {
            LostReason::Refused { failures, .. }
            | LostReason::Unconfirmed { failures, .. }
            | LostReason::RenewalLate { failures, .. } => failures,
            LostReason::AlreadyLost { earlier } => earlier.node_failures(),
            _ => &[],
        }
    }
}

impl fmt::Display for LostReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LostReason::Expired => f.write_str("its validity ran out"),
            LostReason::Refused {
                extended,
                refused,
                needed,
                failures,
            }
            | LostReason::Unconfirmed {
                extended,
                refused,
                needed,
                failures,
            } => {
                write!(
                    f,
                    "extension reached {extended} of {needed} needed nodes \
                     ({refused} no longer held the token"
                )?;
                if let LostReason::Unconfirmed { .. } = self {
                    write!(f, ", {} failed", failures.len())?;
                }
                write!(f, "){}", NodeFailures(failures))
            }
            LostReason::TooSlow => f.write_str("the extension came back with no validity left"),
            LostReason::AlreadyLost { earlier } => write!(f, "it had ended before: {earlier}"),
            LostReason::RenewalLate {
                validity_left,
                failures,
            } => write!(
                f,
                "no renewal succeeded and only {} of validity was left{}",
                Human::new(*validity_left),
                NodeFailures(failures)
            ),
            LostReason::LimitReached { renewals, held_for } => write!(
                f,
                "renewal cap reached after {renewals} renewal(s) and {} held",
                Human::new(*held_for)
            ),
            LostReason::Released => f.write_str("it was released"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::NodeFailureKind;

    /// An extension on `nodes` nodes decided after these votes.
    fn decided(nodes: usize, yes: usize, no: usize, failed: usize) -> LostReason {
        let unanswered = nodes - yes - no;
        let failures = (0..failed)
            .map(|i| {
                NodeFailure::new(
                    format!("n{i}"),
                    NodeFailureKind::Timeout(Duration::from_millis(50)),
                )
            })
            .collect();
        LostReason::no_quorum(yes, no, unanswered, nodes / 2 + 1, failures)
    }

    #[test]
    fn a_refusing_majority_is_certain_loss_failures_are_not() {
        assert_eq!(decided(5, 0, 3, 0).kind(), LossKind::Lost);
        assert_eq!(decided(5, 0, 5, 0).kind(), LossKind::Lost);
        assert_eq!(decided(5, 2, 3, 0).kind(), LossKind::Lost);
        assert_eq!(decided(5, 0, 2, 1).kind(), LossKind::Uncertain);
        assert_eq!(decided(5, 0, 0, 3).kind(), LossKind::Uncertain);
        assert_eq!(decided(1, 0, 1, 0).kind(), LossKind::Lost);
        // Four nodes need three: two refusals leave only two possible holders.
        assert_eq!(decided(4, 0, 2, 0).kind(), LossKind::Lost);
        assert_eq!(decided(4, 0, 1, 1).kind(), LossKind::Uncertain);
    }

    #[test]
    fn a_failed_extension_keeps_its_tally_and_failures() {
        match decided(5, 1, 2, 2) {
            LostReason::Unconfirmed {
                extended,
                refused,
                needed,
                failures,
            } => assert_eq!((extended, refused, needed, failures.len()), (1, 2, 3, 2)),
            other => panic!("{other:?}"),
        }
        let shown = decided(5, 0, 3, 0).to_string();
        assert!(shown.contains("3 no longer held the token"), "{shown}");
        let shown = decided(5, 0, 2, 3).to_string();
        assert!(shown.contains("3 failed); n0: no answer"), "{shown}");
        assert_eq!(decided(5, 0, 2, 3).node_failures().len(), 3);
    }

    #[test]
    fn every_reason_has_its_kind() {
        assert_eq!(LostReason::Expired.kind(), LossKind::Expired);
        assert_eq!(LostReason::TooSlow.kind(), LossKind::Uncertain);
        let limit = LostReason::LimitReached {
            renewals: 3,
            held_for: Duration::from_secs(1),
        };
        assert_eq!(limit.kind(), LossKind::LimitReached);
        let uncertain = LostReason::RenewalLate {
            validity_left: Duration::from_millis(1),
            failures: vec![],
        };
        assert_eq!(uncertain.kind(), LossKind::Uncertain);
        assert_eq!(LostReason::Released.kind(), LossKind::Released);
    }

    #[test]
    fn an_already_lost_lock_keeps_the_kind_and_failures_it_ended_with() {
        let earlier = decided(5, 0, 2, 3);
        let again = LostReason::AlreadyLost {
            earlier: Box::new(earlier.clone()),
        };
        assert_eq!(again.kind(), LossKind::Uncertain);
        assert_eq!(again.node_failures(), earlier.node_failures());
        let expired = LostReason::AlreadyLost {
            earlier: Box::new(LostReason::Expired),
        };
        assert_eq!(expired.kind(), LossKind::Expired);
        assert_eq!(
            expired.to_string(),
            "it had ended before: its validity ran out"
        );
    }

    #[test]
    fn names_are_stable() {
        let all = [
            LossKind::Uncertain,
            LossKind::Lost,
            LossKind::Expired,
            LossKind::LimitReached,
            LossKind::Released,
        ];
        let names: Vec<_> = all.iter().map(|k| k.to_string()).collect();
        assert_eq!(
            names,
            ["uncertain", "lost", "expired", "limit-reached", "released"]
        );
    }
}
