//! What a leader's readers see: the leader's record beside its leadership
//! lock, through node restarts (each loses both keys), the restart
//! quarantine, and renewals that repair the lock where it went missing
//! (`docs/election.md`, `docs/repair.md`).
//!
//! One leader, renewing; its renewal reaches the nodes one at a time.
//! A read counts a node for the leader where the node's lock holds the
//! leader's token and the node has its record (the library's read rule);
//! the leader is read when a majority of nodes count.
//!
//! The property: **a valid leader is read by a quorum read while a
//! majority of nodes vote and were renewed since they last restarted (or
//! since the proclamation, for a node it missed).**
//! Valid means a majority of nodes hold its lock or are in quarantine (the
//! lock's own argument: a quarantined node grants nobody). A node that
//! came out of quarantine and has not seen a renewal yet holds nothing of
//! the leader — no rule can make a read see what is on no node — so the
//! property asks for the renewal first.
//!
//! The negative controls: the repair as it was, the lock's key restored
//! and the record not ([`Repair::LockOnly`]) — rolling restarts then leave
//! the record on a minority while the lock is on a majority; and the
//! record restored only with a missing lock ([`Repair::WithMissingLock`]),
//! which a proclamation that missed a node defeats.

use std::fmt;

use crate::search::Model;

/// What a confirmed renewal repairs on a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repair {
    /// The library: where the lock is missing, the lock's key and then the
    /// leader's record; where the lock holds but the node is not known to
    /// carry the record (it missed the proclamation), the record.
    Full,
    /// Wrong: the record only with a missing lock — a node that missed
    /// the proclamation but kept the lock never gets it.
    WithMissingLock,
    /// Wrong: the lock's key alone (the repair as it was).
    LockOnly,
}

/// One configuration.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// Nodes (3 or 5).
    pub nodes: u8,
    /// Node restarts in a run.
    pub restarts: u8,
    /// How many nodes the leader's proclamation reached (the first ones):
    /// a majority at least, all when every node answered it.
    pub proclaimed_on: u8,
    /// The repair.
    pub repair: Repair,
}

/// One node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Node {
    lock: bool,
    record: bool,
    quarantined: bool,
    /// Restarted (or missed the proclamation), and no renewal reached it
    /// since it votes again.
    unrenewed: bool,
}

/// Every node, the restarts left, and whether the leadership was lost.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct State {
    nodes: Vec<Node>,
    restarts_left: u8,
    lost: bool,
}

/// One step.
#[derive(Debug, Clone, Copy)]
pub enum Action {
    /// Node `i` restarts empty and enters its quarantine.
    Restart(u8),
    /// Node `i`'s quarantine ends: it votes again.
    Rejoin(u8),
    /// The leader's renewal reaches node `i`, repairing there.
    Renew(u8),
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Restart(i) => write!(f, "node {i} restarts empty (quarantined)"),
            Self::Rejoin(i) => write!(f, "node {i} leaves its quarantine"),
            Self::Renew(i) => write!(f, "the renewal reaches node {i}"),
        }
    }
}

/// The property broken: a valid leader that a quorum read does not see.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Invisible {
    /// Nodes that count for the leader in a read.
    pub supporting: u8,
    /// Nodes holding its lock.
    pub locked: u8,
}

/// The model of one configuration.
#[derive(Debug, Clone, Copy)]
pub struct Visibility(pub Config);

impl Visibility {
    fn majority(&self) -> usize {
        usize::from(self.0.nodes / 2 + 1)
    }
}

impl Model for Visibility {
    type State = State;
    type Key = State;
    type Action = Action;
    type Violation = Invisible;

    fn initial(&self) -> State {
        let nodes = (0..self.0.nodes)
            .map(|i| Node {
                lock: true,
                record: i < self.0.proclaimed_on,
                // A renewal is what reaches a node that missed it.
                unrenewed: i >= self.0.proclaimed_on,
                ..Node::default()
            })
            .collect();
        State {
            nodes,
            restarts_left: self.0.restarts,
            lost: false,
        }
    }

    fn actions(&self, state: &State) -> Vec<Action> {
        if state.lost {
            return Vec::new();
        }
        let mut actions = Vec::new();
        for (i, node) in state.nodes.iter().enumerate() {
            let i = u8::try_from(i).expect("few nodes");
            if state.restarts_left > 0 {
                actions.push(Action::Restart(i));
            }
            if node.quarantined {
                actions.push(Action::Rejoin(i));
            } else {
                actions.push(Action::Renew(i));
            }
        }
        actions
    }

    fn apply(&self, state: &State, action: Action) -> Result<State, Invisible> {
        let mut next = state.clone();
        match action {
            Action::Restart(i) => {
                next.nodes[usize::from(i)] = Node {
                    quarantined: true,
                    unrenewed: true,
                    ..Node::default()
                };
                next.restarts_left -= 1;
            }
            Action::Rejoin(i) => next.nodes[usize::from(i)].quarantined = false,
            Action::Renew(i) => {
                let node = &mut next.nodes[usize::from(i)];
                node.record |= match self.0.repair {
                    Repair::Full => true,
                    Repair::WithMissingLock => !node.lock,
                    Repair::LockOnly => false,
                };
                node.lock = true;
                node.unrenewed = false;
            }
        }
        let count = |f: fn(&Node) -> bool| next.nodes.iter().filter(|n| f(n)).count();
        if count(|n| n.lock || n.quarantined) < self.majority() {
            // Its renewal can no longer reach a majority: the leader knows
            // it is not valid (no read owes it anything from here on).
            next.lost = true;
            return Ok(next);
        }
        if count(|n| !n.quarantined && !n.unrenewed) >= self.majority() {
            let supporting = count(|n| n.lock && n.record);
            if supporting < self.majority() {
                return Err(Invisible {
                    supporting: u8::try_from(supporting).expect("few nodes"),
                    locked: u8::try_from(count(|n| n.lock)).expect("few nodes"),
                });
            }
        }
        Ok(next)
    }

    fn key(&self, state: &State) -> State {
        state.clone()
    }
}
