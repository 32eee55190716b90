//! The rule of the remote check ([`Lock::is_held_remotely`]): what the
//! nodes' answers to "do the lock's keys still carry this token?" add up to.
//!
//! A yes from a quorum says the lock is held. A no says only that one node
//! lacks the key; the lock is gone only once so many said no that the
//! others, whatever they would say, are no majority: `no > N − quorum`.
//! Anything in between — nodes silent or failing where their answer would
//! tip it — cannot be told, and is reported as such rather than guessed.
//!
//! [`Lock::is_held_remotely`]: crate::Lock::is_held_remotely

use crate::quorum::rule::{Decision, Tally};

/// What the answers of the nodes say about a held lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Remote {
    /// A quorum carries the token.
    Held,
    /// So many nodes do not that no quorum can: `no > N − quorum`.
    NotHeld,
    /// Neither can be told: the nodes that failed or never answered could
    /// have tipped it either way.
    Unknown,
}

/// The verdict of `tally` (over every node, needing a quorum of yes), or
/// `None` while the nodes yet to answer could still change it.
pub(crate) fn verdict(tally: &Tally) -> Option<Remote> {
    let (yes, no, pending) = (tally.yes(), tally.no(), tally.pending());
    let nodes = yes + no + tally.failed() + pending;
    // Refusals that leave no quorum possible.
    let refusals = nodes.saturating_sub(tally.needed()) + 1;
    if yes >= tally.needed() {
        Some(Remote::Held)
    } else if no >= refusals {
        Some(Remote::NotHeld)
    } else if yes + pending < tally.needed() && no + pending < refusals {
        Some(Remote::Unknown)
    } else {
        None
    }
}

/// When a fan-out for the remote check may stop: as soon as its
/// [`verdict`] is known (`Reached` for held, `Impossible` otherwise).
pub(crate) fn decision(tally: &Tally) -> Option<Decision> {
    verdict(tally).map(|v| match v {
        Remote::Held => Decision::Reached,
        Remote::NotHeld | Remote::Unknown => Decision::Impossible,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::reply::Vote;
    use crate::quorum::rule::majority;

    /// A majority tally over `nodes` with these answers so far.
    fn tally(nodes: usize, yes: usize, no: usize, failed: usize) -> Tally {
        let mut t = Tally::new(nodes, majority(nodes));
        let votes = [(Vote::Yes, yes), (Vote::No, no), (Vote::Failed, failed)];
        for (vote, count) in votes {
            for _ in 0..count {
                t.record(vote);
            }
        }
        t
    }

    #[test]
    fn five_nodes_at_each_boundary() {
        let v = |yes, no, failed| verdict(&tally(5, yes, no, failed));
        // A quorum of yes, whatever the rest.
        assert_eq!(v(3, 0, 0), Some(Remote::Held));
        assert_eq!(v(3, 2, 0), Some(Remote::Held));
        assert_eq!(v(3, 0, 2), Some(Remote::Held));
        // Three no: two nodes cannot be a majority.
        assert_eq!(v(0, 3, 0), Some(Remote::NotHeld));
        assert_eq!(v(1, 3, 1), Some(Remote::NotHeld));
        assert_eq!(v(0, 3, 2), Some(Remote::NotHeld));
        // Key deleted on one node, two silent: four may still carry it.
        assert_eq!(v(2, 1, 2), Some(Remote::Unknown));
        assert_eq!(v(2, 2, 1), Some(Remote::Unknown));
        assert_eq!(v(0, 2, 3), Some(Remote::Unknown));
        assert_eq!(v(0, 0, 5), Some(Remote::Unknown));
        // Still open: the nodes yet to answer decide.
        assert_eq!(v(2, 0, 0), None);
        assert_eq!(v(0, 2, 0), None);
        assert_eq!(v(2, 2, 0), None);
        // No quorum of yes is possible any more, but a third no is.
        assert_eq!(v(0, 1, 2), None);
        assert_eq!(v(0, 2, 2), None);
        // Neither is possible: known before the last node answers.
        assert_eq!(v(1, 2, 1), None);
        assert_eq!(v(1, 1, 2), Some(Remote::Unknown));
    }

    #[test]
    fn one_and_even_counts() {
        assert_eq!(verdict(&tally(1, 1, 0, 0)), Some(Remote::Held));
        assert_eq!(verdict(&tally(1, 0, 1, 0)), Some(Remote::NotHeld));
        assert_eq!(verdict(&tally(1, 0, 0, 1)), Some(Remote::Unknown));
        // Four nodes, quorum three: two no leave no majority.
        assert_eq!(verdict(&tally(4, 2, 2, 0)), Some(Remote::NotHeld));
        assert_eq!(verdict(&tally(4, 2, 1, 1)), Some(Remote::Unknown));
        assert_eq!(verdict(&tally(4, 3, 1, 0)), Some(Remote::Held));
    }

    /// Every tally of up to nine nodes: a verdict given early is the one
    /// every way the silent nodes could answer leads to; once everyone
    /// answered there is always one; held exactly at a quorum of yes, not
    /// held exactly at `no > N − quorum`.
    #[test]
    fn a_verdict_is_final_and_the_rule_is_exact() {
        for nodes in 1..=9 {
            let q = majority(nodes);
            for yes in 0..=nodes {
                for no in 0..=nodes - yes {
                    for failed in 0..=nodes - yes - no {
                        let t = tally(nodes, yes, no, failed);
                        let pending = nodes - yes - no - failed;
                        let early = verdict(&t);
                        for more_yes in 0..=pending {
                            for more_no in 0..=pending - more_yes {
                                let more_failed = pending - more_yes - more_no;
                                let full = tally(
                                    nodes,
                                    yes + more_yes,
                                    no + more_no,
                                    failed + more_failed,
                                );
                                let end = verdict(&full).expect("decided once all answered");
                                if let Some(v) = early {
                                    assert_eq!(
                                        v, end,
                                        "{nodes}: {yes}/{no}/{failed} then {full:?}"
                                    );
                                }
                                let (y, n) = (full.yes(), full.no());
                                assert_eq!(end == Remote::Held, y >= q);
                                assert_eq!(end == Remote::NotHeld, n > nodes - q);
                            }
                        }
                        assert_eq!(
                            decision(&t).is_some(),
                            early.is_some(),
                            "the fan-out stops exactly when the verdict is known"
                        );
                    }
                }
            }
        }
    }
}
