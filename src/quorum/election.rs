//! Leader election at quorum: a leader's proclamation (its record written
//! on a majority, where its leadership lock still holds its token), the
//! read of who leads (the record a majority supports), and a resigning
//! leader's record removed — each one use of
//! [`fanout`](crate::quorum::fanout).
//!
//! The read's rule ([`Support::verdict`]) is pure: a node supports a
//! record when its lock key holds the record's token; a leader is one whose
//! token a majority supports, with the value of the latest proclamation
//! among them. A proclamation that reached a majority meets every later
//! read's majority on a node, so a read after it returns that value or a
//! later one.

use std::sync::Arc;
use std::time::Duration;

use crate::error::lost::LostReason;
use crate::error::{Error, Operation};
use crate::keys::Keys;
use crate::member::Node;
use crate::node::commands::Command;
use crate::node::election::{Reading, Record};
use crate::node::reply::{Kind, Vote};
use crate::quorum::engine::Engine;
use crate::quorum::fanout::Count;
use crate::quorum::held::Held;
use crate::quorum::rule::{Decision, Tally};

/// Writes `record` on every node where `held`, an election's leadership
/// lock, holds its token, decided at a majority before its deadline.
/// The reason otherwise: [`LostReason::Refused`] when so many nodes no
/// longer hold the leadership that it is certainly gone,
/// [`LostReason::Unconfirmed`] when failures left it open,
/// [`LostReason::Expired`] when the validity ran out first.
///
/// Each node that carries it (even one answering after the decision) is
/// noted in its repairs: a renewal writes the record where the lock holds
/// and no record of this leader is known to be.
pub(crate) async fn proclaim(held: &Held, record: &Record) -> Result<(), LostReason> {
    let call = |i, node: Node, command: Arc<Command>, window| {
        let repairs = held.repairs.clone();
        async move {
            let carried = node.says(&command, Kind::Proclaim, window).await?;
            if carried {
                repairs.recorded(i, true);
            }
            Ok(carried)
        }
    };
    let vote = |_, &carried: &bool| if carried { Vote::Yes } else { Vote::No };
    let command = Command::proclaim(&held.keys, record);
    let deadline = held.lease.deadline();
    held.engine.confirm(deadline, command, call, vote).await
}

/// Who leads the election of `keys`, read on every node (read-only) and
/// decided by [`Support::verdict`] as soon as it is known.
///
/// # Errors
///
/// [`Error::Unavailable`] (operation [`Operation::Check`]) when the nodes
/// that failed or did not answer could have made a leader or unmade one.
pub(crate) async fn read(engine: &Engine, keys: &Keys) -> Result<Found, Error> {
    let call = |_, node: Node, command: Arc<Command>, window| async move {
        node.read_leader(&command, window).await
    };
    let mut support = Support::default();
    let plan = engine.majority();
    let outcome = engine
        .ask(plan, Command::read_leader(keys), call, &mut support)
        .await;
    let leader = match support.verdict(&outcome.tally) {
        Some(Verdict::Leader(record)) => Some(record),
        Some(Verdict::None) => None,
        Some(Verdict::Unknown) | None => {
            return Err(engine.unavailable(Operation::Check, keys.name(), outcome));
        }
    };
    let hint = support.hint();
    Ok(Found { leader, hint })
}

/// Deletes a resigning leader's record where it is still its token's
/// (`held`'s), on every node, within the node timeout; nothing depends on it (a record
/// left behind counts nowhere once its lock is released), so its outcome
/// is not reported.
pub(crate) async fn retire(held: &Held) {
    let call = |i, node: Node, command: Arc<Command>, window| {
        let repairs = held.repairs.clone();
        async move {
            // A repair of the record still pending on this node (its
            // release timed out before taking it) lands first or not
            // at all: never after the record is deleted.
            repairs.close(i).await;
            node.says(&command, Kind::Retire, window).await
        }
    };
    let engine = &held.engine;
    let plan = engine.everyone(engine.config.node_timeout);
    let command = Command::retire(&held.keys, &held.token);
    engine
        .ask(plan, command, call, &mut |_, _: &_| Vote::Yes)
        .await;
}

/// What a read found: the leader's record, if a majority supports one, and
/// the TTL of the newest record any node answered with (an observer's
/// pace, even while no leader is in office).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Found {
    pub(crate) leader: Option<Record>,
    pub(crate) hint: Option<Duration>,
}

/// What a read's answers add up to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// A majority supports this leader (the latest proclamation among them).
    Leader(Record),
    /// No leader can have a majority, whatever the silent nodes hold.
    None,
    /// The nodes that failed could have tipped it either way.
    Unknown,
}

/// The records the nodes answered with so far, counted per leader: a
/// node votes yes when it supports a leader, and the read is decided once
/// [`Support::verdict`] is known.
#[derive(Debug, Default)]
pub(crate) struct Support {
    /// Per leader token: its supporters, and the latest record among them.
    leaders: Vec<(Record, usize)>,
    /// The newest record any node answered with (current or not).
    newest: Option<(u64, Duration)>,
}

impl Support {
    /// The TTL of the newest record seen.
    pub(crate) fn hint(&self) -> Option<Duration> {
        self.newest.map(|(_, ttl)| ttl)
    }

    /// The verdict once `tally` (every node's vote so far: yes for a node
    /// that supports a leader, failed for one that did not answer) decides
    /// it; `None` while the nodes yet to answer could still change it.
    ///
    /// A leader needs `tally.needed()` supporters. No leader is possible
    /// once no token, nor a token none has shown yet, can reach that with
    /// the nodes still pending; the failed nodes then decide between
    /// [`Verdict::None`] (they could not have made one either) and
    /// [`Verdict::Unknown`].
    pub(crate) fn verdict(&self, tally: &Tally) -> Option<Verdict> {
        let needed = tally.needed();
        let best = self.leaders.iter().max_by_key(|(_, count)| *count);
        let most = best.map_or(0, |(_, count)| *count);
        if most >= needed {
            return best.map(|(record, _)| Verdict::Leader(record.clone()));
        }
        let pending = tally.pending();
        if most + pending >= needed {
            return None;
        }
        if most + pending + tally.failed() >= needed {
            Some(Verdict::Unknown)
        } else {
            Some(Verdict::None)
        }
    }
}

/// Each node's reading, as [`Support`] counts it.
impl Count<Reading> for Support {
    fn vote(&mut self, _: usize, reading: &Reading) -> Vote {
        if let Some(r) = &reading.record {
            if self.newest.is_none_or(|(epoch, _)| r.epoch >= epoch) {
                self.newest = Some((r.epoch, r.ttl));
            }
        }
        let Some(record) = reading.current() else {
            return Vote::No;
        };
        match self
            .leaders
            .iter_mut()
            .find(|(seen, _)| seen.token == record.token)
        {
            Some((seen, count)) => {
                *count += 1;
                if record.seq > seen.seq {
                    *seen = record.clone();
                }
            }
            None => self.leaders.push((record.clone(), 1)),
        }
        Vote::Yes
    }

    fn decide(&self, tally: &Tally) -> Option<Decision> {
        self.verdict(tally).map(|_| Decision::Reached)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(token: &str, epoch: u64, seq: u64, value: &str) -> Record {
        Record {
            epoch,
            seq,
            ttl: Duration::from_secs(epoch),
            token: token.to_owned(),
            value: value.as_bytes().to_vec(),
        }
    }

    /// A node whose record is `r`, current or not.
    fn node(r: Option<Record>, current: bool) -> Reading {
        Reading { record: r, current }
    }

    /// `Support` and its tally after these readings (`None`: failed).
    fn read(nodes: usize, readings: &[Option<Reading>]) -> Option<Verdict> {
        let mut support = Support::default();
        let mut tally = Tally::new(nodes, crate::quorum::rule::majority(nodes));
        for reading in readings {
            match reading {
                Some(r) => {
                    tally.record(support.vote(0, r));
                }
                None => {
                    tally.record(Vote::Failed);
                }
            }
        }
        support.verdict(&tally)
    }

    #[test]
    fn the_pace_is_the_newest_records_ttl_whatever_the_order() {
        let mut support = Support::default();
        for epoch in [2, 1, 3, 3] {
            support.vote(0, &node(Some(record("aa", epoch, 1, "x")), false));
        }
        assert_eq!(support.hint(), Some(Duration::from_secs(3)));
        assert_eq!(Support::default().hint(), None);
    }

    #[test]
    fn a_read_is_decided_as_soon_as_its_verdict_is_known() {
        let mut support = Support::default();
        let mut tally = Tally::new(3, 2);
        let yes = node(Some(record("aa", 1, 1, "x")), true);
        tally.record(support.vote(0, &yes));
        assert_eq!(support.decide(&tally), None, "one of three supports");
        tally.record(support.vote(1, &yes));
        assert_eq!(support.decide(&tally), Some(Decision::Reached));
        let mut none = Support::default();
        let mut tally = Tally::new(3, 2);
        for i in 0..2 {
            tally.record(none.vote(i, &node(None, false)));
        }
        assert_eq!(
            none.decide(&tally),
            Some(Decision::Reached),
            "no one can lead"
        );
    }

    #[test]
    fn a_leader_needs_a_majority_of_current_records() {
        let a = || Some(record("aa", 1, 1, "x"));
        let yes = || Some(node(a(), true));
        let stale = || Some(node(a(), false));
        assert_eq!(
            read(3, &[yes(), yes()]),
            Some(Verdict::Leader(a().unwrap()))
        );
        assert_eq!(read(3, &[yes()]), None);
        // A crashed leader's records, left with their locks expired.
        assert_eq!(read(3, &[stale(), stale()]), Some(Verdict::None));
        assert_eq!(read(3, &[yes(), stale(), stale()]), Some(Verdict::None));
        // One node down: one supporter and the silent node could be two.
        assert_eq!(read(3, &[yes(), None, stale()]), Some(Verdict::Unknown));
        assert_eq!(read(3, &[None, stale(), stale()]), Some(Verdict::None));
        assert_eq!(
            read(3, &[yes(), None, yes()]),
            Some(Verdict::Leader(a().unwrap()))
        );
        assert_eq!(read(5, &[None, None, None]), Some(Verdict::Unknown));
    }

    #[test]
    fn the_value_is_the_latest_proclamation_among_the_supporters() {
        let first = record("aa", 4, 1, "old");
        let second = record("aa", 4, 2, "new");
        let readings = [
            Some(node(Some(first.clone()), true)),
            Some(node(Some(second.clone()), true)),
        ];
        assert_eq!(read(3, &readings), Some(Verdict::Leader(second)));
    }

    #[test]
    fn two_leaders_split_evenly_make_none() {
        let a = Some(node(Some(record("aa", 1, 1, "a")), true));
        let b = Some(node(Some(record("bb", 2, 1, "b")), true));
        let free = Some(node(None, false));
        assert_eq!(read(4, &[a.clone(), a.clone(), b.clone()]), None);
        assert_eq!(read(4, &[a.clone(), a, b.clone(), b]), Some(Verdict::None));
        assert_eq!(read(3, &[free.clone(), free]), Some(Verdict::None));
    }

    /// The negative control of the read: a reader that takes the newest
    /// record without asking whether its lock still holds its token names
    /// a crashed leader long after its lock expired; this rule does not.
    #[test]
    fn a_record_without_its_lock_names_no_one() {
        let crashed = record("aa", 9, 1, "gone");
        let readings = [
            Some(node(Some(crashed.clone()), false)),
            Some(node(Some(crashed.clone()), false)),
            Some(node(Some(crashed.clone()), false)),
        ];
        let mut support = Support::default();
        for r in readings.iter().flatten() {
            support.vote(0, r);
        }
        let trusting = readings
            .iter()
            .flatten()
            .filter_map(|r| r.record.clone())
            .max_by_key(|r| r.epoch);
        assert_eq!(trusting, Some(crashed), "the trusting reader's answer");
        assert_eq!(read(3, &readings), Some(Verdict::None));
        assert_eq!(support.hint(), Some(Duration::from_secs(9)));
    }
}
