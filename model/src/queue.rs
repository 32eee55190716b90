//! The waiter queue of fair acquisition: 3 nodes, 2 or 3 waiters, one
//! resource, in the design and in wrong ones (negative controls).
//!
//! Each node keeps, per queue, the waiters' entries (a ticket each, live
//! while its lease lasts) and a counter: the highest ticket it committed
//! since its queue was last empty (a node drops the counter with its last
//! entry, as `queue.lua` does).
//!
//! - **Join** ([`Design::Quorum`], the design): a waiter reads the counter
//!   on every node; once a majority answered it proposes `T = max + 1`
//!   (`fence::propose`, a fencing token's rule) and sends "commit `T`" to
//!   every node, which counts it only where its counter is below `T`: it
//!   then sets the counter to `T` and adds the entry. The waiter is queued
//!   once a majority counted; once it cannot be (a majority refused, or
//!   the answers still to come cannot make a majority), it leaves (its
//!   entries are removed everywhere) and joins again, under a fresh name.
//! - **Heartbeat** (a touch): a node answers whether the waiter's entry
//!   is there and whether its ticket is the lowest there (the node's
//!   head). A waiter is **head** once a majority answered "head"; it
//!   **rejoins** (leaves, joins again: at the back) once a heartbeat's
//!   answers, from a majority at least, show its entry on fewer than a
//!   majority of nodes ([`Rejoin`]).
//! - Only the head tries the **lock**, one exclusive slot here (a mutex's
//!   grant at a majority, whose exclusion the other models check). Once
//!   granted, the waiter leaves the queue; it releases the lock later.
//! - **Leases** are not timed: an entry lives until it is removed, or
//!   until it expires, which may happen at any time once nobody renews it
//!   (its waiter crashed, gave up its join, or was granted), and to a live
//!   waiter's entry only as a fault, a **lapse** (the waiter paused past
//!   its lease on that node). Wake-ups are not modelled: a wake-up only
//!   makes a waiter send its heartbeat sooner, and a heartbeat is always
//!   possible here.
//!
//! What the model lets happen, as the other models do: any request is
//! delivered at any time after it was sent, in any order, or not yet; a
//! waiter crashes at any point (its requests in flight may still land); a
//! node fails for good (it answers nothing more); with [`Config::slow`] a
//! waiter times out on a commit or a heartbeat whose requests are still in
//! flight. A plain acquirer (the barger, [`Config::barger`]) takes the
//! lock whenever it is free, without queueing.
//!
//! Reductions, each keeping every behaviour the checks can tell apart:
//!
//! - An answer is counted as its request runs. A read and a heartbeat
//!   change nothing on a node, and a late answer only makes its waiter act
//!   later (a waiter that timed out on an answer is one that timed out
//!   before its request ran, as far as anyone else can tell); a waiter
//!   that is not yet head only weakens the checks.
//! - Where leases expire, a leave is not a message: the entries of a
//!   waiter that no longer counts on them may vanish at any time — by its
//!   leave or by their lease, which nobody can tell apart. An entry
//!   vanishing shows to a heartbeat on its node, and to a read or a commit
//!   there only when it was the last one (the counter goes with it), so
//!   entries vanish just before such a request runs, which is the same as
//!   at any earlier moment since the node's last one, or when their
//!   waiter joins again.
//! - The read–write model's: a waiter joins again only once no commit of
//!   its last join is in flight (and, where leases never expire, no leave)
//!   and its entries are gone. A late commit of an abandoned join adds an
//!   entry nobody renews, which keeps others from being head on one node
//!   until it expires and never makes anyone head.
//! - States that differ only by the names of nodes or of waiters are one.
//!
//! Properties checked in every reachable state. A waiter is *live* while
//! its ticket is committed (counted by a majority, whether it knows it)
//! and none of its entries was removed or expired since; a crashed
//! waiter's entries stay live until they expire. Tickets are unique and
//! ordered among live waiters only: a node's counter starts again once
//! its queue is empty, and a ticket nobody holds any more orders nothing.
//!
//! 1. **Unique tickets**: no two live waiters hold the same ticket.
//! 2. **Order**: a waiter live when another's join began, and still live
//!    when that join's ticket is committed, holds a lower ticket.
//! 3. **One head**: no waiter that lost no entry is head while a live
//!    waiter holds a lower ticket, and at most one such waiter is head.
//! 4. **FIFO**: no waiter that lost no entry is granted while a live
//!    waiter holds a lower ticket; and, without time-outs and failed
//!    nodes, a live waiter never gives up its place while its entries are
//!    on a majority of the nodes.
//! 5. **Progress** ([`explore_progress`]): from every reachable state, some
//!    run ends with every waiter that did not crash granted (or out of
//!    joins). A state from which none does is *stuck*.
//! 6. **Exclusion**: at most one holder of the lock.
//!
//! The negative controls: node-local tickets ([`Design::LocalTickets`],
//! each node numbers its own joins) order three waiters in a cycle, and
//! nobody is ever head (stuck); the head decided by one node's answer
//! ([`Design::OneNodeHead`]) is ahead of a live lower ticket; leases that
//! never expire ([`Config::leases_expire`]) leave the others stuck behind
//! a crashed waiter; a waiter that rejoins only once a majority of all
//! the nodes miss its entry ([`Rejoin::AbsentOnMajority`]) waits forever
//! once a node of its majority fails; a heartbeat that stops at its first
//! "not head" majority ([`Rejoin::AtTheDecision`]) sends a waiter whose
//! entry is on a majority to the back.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::hash::BuildHasherDefault;
use std::time::Instant;

use crate::search::{report, Fx, Model};
use crate::symmetry::{client_orders, push_nodes};
use crate::{client_name, fence, node_name};

const NODES: usize = 3;
const QUORUM: u8 = 2;
/// The most waiters a configuration has.
const WAITERS: usize = 3;

/// How tickets are handed out and how a waiter decides it is head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Design {
    /// The design: tickets committed at a majority, head by a majority.
    Quorum,
    /// Each node numbers its own joins (`INCR`), no commit (negative
    /// control): nodes disagree on the order.
    LocalTickets,
    /// Tickets as in [`Design::Quorum`], head by one node's answer
    /// (negative control).
    OneNodeHead,
}

/// When a heartbeat ends, and when a waiter whose entry is missing gives
/// up its place and joins again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejoin {
    /// The design: a heartbeat that makes no head ends once every answer
    /// came (or it times out); the waiter rejoins when a majority answered
    /// and fewer than a majority hold its entry.
    AfterEveryAnswer,
    /// The same rule, applied as soon as a majority answered "not head"
    /// (negative control: the third node, unheard, may hold the entry).
    AtTheDecision,
    /// Only once a majority of all the nodes said its entry is missing
    /// (negative control: a failed node never answers).
    AbsentOnMajority,
}

#[derive(Debug, Clone, Copy)]
pub struct Config {
    pub design: Design,
    pub rejoin: Rejoin,
    /// Waiters (at most 3).
    pub waiters: u8,
    /// Joins per waiter (a join that fails or rejoins starts the next).
    pub attempts: u8,
    /// Waiters that may crash.
    pub crashes: u8,
    /// Live waiters' entries that may expire (a waiter paused past its
    /// lease on one node).
    pub lapses: u8,
    /// Nodes that may fail for good.
    pub node_failures: u8,
    /// A waiter may time out on a commit or a heartbeat whose requests are
    /// still in flight (a slow node), not only once every answer came.
    pub slow: bool,
    /// A plain acquirer takes the lock once, whenever it is free.
    pub barger: bool,
    /// Whether entries nobody renews expire (negative control: never).
    pub leases_expire: bool,
}

/// The design, 2 waiters of 2 joins each, no fault.
pub const BASE: Config = Config {
    design: Design::Quorum,
    rejoin: Rejoin::AfterEveryAnswer,
    waiters: 2,
    attempts: 2,
    crashes: 0,
    lapses: 0,
    node_failures: 0,
    slow: false,
    barger: false,
    leases_expire: true,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
struct Node {
    /// The highest ticket counted since the queue was last empty (a join
    /// count under [`Design::LocalTickets`]).
    counter: u8,
    /// Each waiter's entry: its ticket, 0 for none.
    entries: [u8; WAITERS],
    /// Failed for good: it answers nothing, and what it held no longer
    /// matters.
    down: bool,
}

impl Node {
    /// Whether `w`'s entry is the node's head: the lowest ticket there.
    fn answer(&self, w: u8) -> Answer {
        let own = self.entries[usize::from(w)];
        if own == 0 {
            Answer::Absent
        } else if self.entries.iter().all(|&t| t == 0 || t >= own) {
            Answer::Head
        } else {
            Answer::Behind
        }
    }

    fn present(&self, w: u8) -> bool {
        !self.down && self.entries[usize::from(w)] != 0
    }
}

/// A node's answer to a heartbeat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Head,
    Behind,
    Absent,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Phase {
    Idle,
    /// Phase 1 of a join: counters read, the highest.
    Reading {
        answers: u8,
        max: u8,
    },
    /// Phase 2: commit answers.
    Committing {
        yes: u8,
        no: u8,
    },
    /// Queued, no heartbeat in flight.
    Waiting,
    /// A heartbeat in flight: its answers so far, those that named it
    /// head, and those where its entry is there.
    Touching {
        answers: u8,
        head: u8,
        present: u8,
    },
    /// Concluded head: may try the lock.
    Head,
    /// Granted; it left the queue.
    Holding,
    /// The join given up (failed, or rejoining): it left the queue.
    Leaving,
    Done {
        granted: bool,
    },
    Crashed,
}

impl Phase {
    fn encode(self) -> [u8; 4] {
        match self {
            Phase::Idle => [0, 0, 0, 0],
            Phase::Reading { answers, max } => [1, answers, max, 0],
            Phase::Committing { yes, no } => [2, yes, no, 0],
            Phase::Waiting => [3, 0, 0, 0],
            Phase::Touching {
                answers,
                head,
                present,
            } => [4, answers, head, present],
            Phase::Head => [5, 0, 0, 0],
            Phase::Holding => [6, 0, 0, 0],
            Phase::Leaving => [7, 0, 0, 0],
            Phase::Done { granted } => [8, u8::from(granted), 0, 0],
            Phase::Crashed => [9, 0, 0, 0],
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Waiter {
    /// Joins begun.
    attempt: u8,
    phase: Phase,
    /// The join's ticket (0 before its proposal, and under
    /// [`Design::LocalTickets`]).
    ticket: u8,
    /// The waiters live when this join began and live since (a bit each):
    /// property 2.
    ahead: u8,
    /// Nodes that counted the join's commit (each counts it once).
    counted: u8,
    /// One of the join's entries was removed or expired.
    lost: bool,
}

impl Waiter {
    const IDLE: Waiter = Waiter {
        attempt: 0,
        phase: Phase::Idle,
        ticket: 0,
        ahead: 0,
        counted: 0,
        lost: false,
    };

    /// Committed (counted by a majority) and no entry of it gone: its
    /// entry is on every node that counted it.
    fn live(&self) -> bool {
        self.counted >= QUORUM && !self.lost
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Msg {
    Read {
        waiter: u8,
        node: u8,
    },
    Commit {
        waiter: u8,
        node: u8,
        ticket: u8,
    },
    Touch {
        waiter: u8,
        node: u8,
    },
    /// Only where leases never expire (see the reductions).
    Leave {
        waiter: u8,
        node: u8,
    },
}

impl Msg {
    fn waiter(self) -> u8 {
        match self {
            Msg::Read { waiter, .. }
            | Msg::Commit { waiter, .. }
            | Msg::Touch { waiter, .. }
            | Msg::Leave { waiter, .. } => waiter,
        }
    }

    fn node(self) -> u8 {
        match self {
            Msg::Read { node, .. }
            | Msg::Commit { node, .. }
            | Msg::Touch { node, .. }
            | Msg::Leave { node, .. } => node,
        }
    }
}

/// Who holds the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Slot {
    Free,
    Waiter(u8),
    Barger,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct State {
    nodes: [Node; NODES],
    waiters: [Waiter; WAITERS],
    /// In flight, sorted (a multiset).
    msgs: Vec<Msg>,
    slot: Slot,
    /// Whether the barger took the lock already.
    barged: bool,
    crashes_left: u8,
    lapses_left: u8,
    failures_left: u8,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// A waiter begins a join (its first, or again).
    Join(u8),
    /// A request runs on its node; `expire` names the entries there that
    /// expire just before it (a bit per waiter).
    Deliver {
        msg: Msg,
        expire: u8,
    },
    /// A heartbeat to every node.
    Touch(u8),
    /// The head takes the free lock.
    Take(u8),
    Release(u8),
    /// A slow node: the waiter stops waiting for the answers of its commit
    /// or its heartbeat.
    TimeOut(u8),
    Crash(u8),
    /// A crashed holder's lock key expires.
    LockExpires,
    Fail(u8),
    BargerTakes,
    BargerReleases,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    /// Property 1: two live waiters hold one ticket.
    Duplicate { a: char, b: char, ticket: u8 },
    /// Property 2: `later`'s join began while `earlier` was live, and its
    /// ticket is not above `earlier`'s.
    OutOfOrder { earlier: char, later: char },
    /// Property 3: `head` is head while `ahead`, live, holds a lower
    /// ticket.
    HeadAhead { head: char, ahead: char },
    /// Property 3: two waiters that lost no entry are head.
    TwoHeads { a: char, b: char },
    /// Property 4: `granted` was granted while `ahead`, live, holds a lower
    /// ticket.
    GrantedAhead { granted: char, ahead: char },
    /// Property 4: a live waiter whose entries are on a majority of the
    /// nodes gave up its place (no time-out, no failed node).
    LeftItsPlace { waiter: char },
    /// Property 6.
    TwoHolders,
}

pub struct Queue(pub Config);

impl Queue {
    fn waiters(&self) -> impl Iterator<Item = u8> {
        0..self.0.waiters
    }

    fn send_all(s: &mut State, make: impl Fn(u8) -> Msg) {
        for n in 0..NODES as u8 {
            if !s.nodes[usize::from(n)].down {
                s.msgs.push(make(n));
            }
        }
    }

    /// Ends `w`'s join: it leaves the queue. Where leases expire, a leave
    /// is not a message: the entries of a waiter that left may vanish
    /// before a request reaches their node (`Queue::may_expire`), by its
    /// leave or by their lease, which is all a leave shows to anyone.
    fn leave(&self, s: &mut State, w: u8, then: Phase) {
        s.waiters[usize::from(w)].phase = then;
        if !self.0.leases_expire {
            Self::send_all(s, |node| Msg::Leave { waiter: w, node });
        }
    }

    /// `w` is no longer live: it lost an entry, or its join is over.
    fn lose(s: &mut State, w: u8) {
        s.waiters[usize::from(w)].lost = true;
        for c in &mut s.waiters {
            c.ahead &= !(1 << w);
        }
    }

    /// Removes `w`'s entry from `node`; the counter goes with the last one.
    fn remove(s: &mut State, node: u8, w: u8) {
        let n = &mut s.nodes[usize::from(node)];
        if n.entries[usize::from(w)] == 0 {
            return;
        }
        n.entries[usize::from(w)] = 0;
        if n.entries.iter().all(|&t| t == 0) {
            n.counter = 0;
        }
        Self::lose(s, w);
    }

    /// No commit or leave of `w` in flight, and no entry of it left (or
    /// leases expire, and it waits for them): its next join may begin.
    fn clean(&self, s: &State, w: u8) -> bool {
        !s.msgs
            .iter()
            .any(|m| m.waiter() == w && matches!(m, Msg::Commit { .. } | Msg::Leave { .. }))
            && (self.0.leases_expire
                || s.nodes
                    .iter()
                    .all(|n| n.down || n.entries[usize::from(w)] == 0))
    }

    /// The entries on `node` that may expire (a bit per waiter), and which
    /// of them would be a live waiter's lapse.
    ///
    /// An entry's expiry shows to a heartbeat on its node, and to a read
    /// or a commit there only when it empties the queue (and so drops the
    /// counter); a leave removes its own. So entries expire just before a
    /// heartbeat runs there (any of them), or a read or a commit (all of
    /// them), the same as at any earlier moment since the node's last
    /// request; and the entries a waiter left, when it joins again.
    fn may_expire(&self, s: &State, node: u8) -> (u8, u8) {
        let (mut may, mut lapse) = (0, 0);
        if !self.0.leases_expire {
            return (0, 0);
        }
        for w in self.waiters() {
            if !s.nodes[usize::from(node)].present(w) {
                continue;
            }
            match s.waiters[usize::from(w)].phase {
                Phase::Crashed | Phase::Leaving | Phase::Holding | Phase::Done { .. } => {
                    may |= 1 << w;
                }
                _ if s.lapses_left > 0 => {
                    may |= 1 << w;
                    lapse |= 1 << w;
                }
                _ => {}
            }
        }
        (may, lapse)
    }

    fn in_flight(s: &State, w: u8, pick: impl Fn(&Msg) -> bool) -> bool {
        s.msgs.iter().any(|m| m.waiter() == w && pick(m))
    }

    /// Every waiter that did not crash is done: the goal of progress.
    pub fn finished(&self, s: &State) -> bool {
        self.waiters().all(|w| {
            matches!(
                s.waiters[usize::from(w)].phase,
                Phase::Done { .. } | Phase::Crashed
            )
        })
    }

    /// Whether a crashed waiter's entry is still on a majority of the
    /// nodes that work (what keeps the others behind it).
    pub fn crashed_waiter_queued(&self, s: &State) -> bool {
        self.waiters().any(|w| {
            s.waiters[usize::from(w)].phase == Phase::Crashed
                && s.nodes.iter().filter(|n| n.present(w)).count() >= usize::from(QUORUM)
        })
    }

    /// Whether a node failed.
    pub fn node_failed(&self, s: &State) -> bool {
        s.nodes.iter().any(|n| n.down)
    }

    /// The state in a few words: each node's entries, each waiter's phase.
    pub fn describe(&self, s: &State) -> String {
        let mut out = String::new();
        for (i, n) in s.nodes.iter().enumerate() {
            out.push_str(&format!("{}:", node_name(i as u8)));
            if n.down {
                out.push_str(" down; ");
                continue;
            }
            for w in self.waiters() {
                let t = n.entries[usize::from(w)];
                if t != 0 {
                    out.push_str(&format!(" {}={t}", client_name(w)));
                }
            }
            out.push_str(&format!(" (counter {}); ", n.counter));
        }
        for w in self.waiters() {
            let c = s.waiters[usize::from(w)];
            out.push_str(&format!(
                "{} {:?} ticket {}; ",
                client_name(w),
                c.phase,
                c.ticket
            ));
        }
        out.push_str(&format!("{} in flight", s.msgs.len()));
        out
    }

    fn deliver(&self, s: &mut State, m: Msg) -> Result<(), Violation> {
        let w = m.waiter();
        let wi = usize::from(w);
        match m {
            // A read changes nothing on its node: its answer is counted as
            // it runs (a late answer only delays the commit, which may be
            // delayed anyway).
            Msg::Read { node, .. } => {
                let counter = s.nodes[usize::from(node)].counter;
                let Phase::Reading { answers, max } = s.waiters[wi].phase else {
                    unreachable!("a read kept for a waiter not reading");
                };
                let (answers, max) = (answers + 1, max.max(counter));
                if answers < QUORUM {
                    s.waiters[wi].phase = Phase::Reading { answers, max };
                } else {
                    let ticket = fence::propose([u64::from(max)], 0, 1)
                        .ok()
                        .and_then(|t| u8::try_from(t).ok())
                        .filter(|&t| t < u8::MAX)
                        .expect("a small ticket");
                    let waiter = &mut s.waiters[wi];
                    waiter.ticket = ticket;
                    waiter.phase = Phase::Committing { yes: 0, no: 0 };
                    Self::send_all(s, |node| Msg::Commit {
                        waiter: w,
                        node,
                        ticket,
                    });
                }
            }
            Msg::Commit { node, ticket, .. } => {
                let n = &mut s.nodes[usize::from(node)];
                let yes = if self.0.design == Design::LocalTickets {
                    n.counter += 1;
                    n.entries[wi] = n.counter;
                    true
                } else if n.counter < ticket {
                    n.counter = ticket;
                    n.entries[wi] = ticket;
                    true
                } else {
                    false
                };
                if yes {
                    s.waiters[wi].counted += 1;
                    if s.waiters[wi].counted == QUORUM {
                        self.check_committed(s, w)?;
                    }
                }
                // The answer is counted as the commit runs: a late answer
                // only makes its waiter act later (a waiter that times out
                // on it is one that timed out before the commit ran, as
                // far as anyone else can tell).
                let Phase::Committing { yes: y, no } = s.waiters[wi].phase else {
                    return Ok(());
                };
                let (y, no) = if yes { (y + 1, no) } else { (y, no + 1) };
                s.waiters[wi].phase = Phase::Committing { yes: y, no };
                if y >= QUORUM {
                    s.waiters[wi].phase = Phase::Waiting;
                } else if no > NODES as u8 - QUORUM {
                    self.leave(s, w, Phase::Leaving);
                }
            }
            // A heartbeat's answer is counted as it runs: a late answer
            // only makes its waiter act later, and a waiter not yet head
            // only weakens the checks.
            Msg::Touch { node, .. } => {
                let answer = s.nodes[usize::from(node)].answer(w);
                let Phase::Touching {
                    answers,
                    head,
                    present,
                } = s.waiters[wi].phase
                else {
                    unreachable!("a heartbeat kept for a waiter not touching");
                };
                let answers = answers + 1;
                let head = head + u8::from(answer == Answer::Head);
                let present = present + u8::from(answer != Answer::Absent);
                s.waiters[wi].phase = Phase::Touching {
                    answers,
                    head,
                    present,
                };
                let needed = match self.0.design {
                    Design::OneNodeHead => 1,
                    Design::Quorum | Design::LocalTickets => QUORUM,
                };
                let not_head = answers - head;
                if head >= needed {
                    s.waiters[wi].phase = Phase::Head;
                } else if match self.0.rejoin {
                    Rejoin::AfterEveryAnswer => false,
                    Rejoin::AtTheDecision => not_head > NODES as u8 - QUORUM,
                    Rejoin::AbsentOnMajority => answers - present > NODES as u8 - QUORUM,
                } {
                    self.end_heartbeat(s, w)?;
                }
            }
            Msg::Leave { node, .. } => Self::remove(s, node, w),
        }
        Ok(())
    }

    /// Properties 1 and 2, when `w`'s ticket is committed.
    fn check_committed(&self, s: &State, w: u8) -> Result<(), Violation> {
        if self.0.design == Design::LocalTickets {
            return Ok(());
        }
        let me = s.waiters[usize::from(w)];
        for v in self.waiters().filter(|&v| v != w) {
            let other = s.waiters[usize::from(v)];
            if me.live() && other.live() && other.ticket == me.ticket {
                return Err(Violation::Duplicate {
                    a: client_name(v),
                    b: client_name(w),
                    ticket: me.ticket,
                });
            }
            // `ahead` keeps only the waiters live since the join began.
            if me.ahead & (1 << v) != 0 && other.ticket >= me.ticket {
                return Err(Violation::OutOfOrder {
                    earlier: client_name(v),
                    later: client_name(w),
                });
            }
        }
        Ok(())
    }

    /// A live waiter other than `w` whose ticket is below `ticket`.
    fn live_ahead(&self, s: &State, w: u8, ticket: u8) -> Option<u8> {
        self.waiters().find(|&v| {
            let other = s.waiters[usize::from(v)];
            v != w && other.live() && other.ticket < ticket
        })
    }

    /// What ends a round without an action of its own: a commit or a
    /// heartbeat once no answer of it can come any more; reads and
    /// heartbeats nobody waits for are forgotten (they change nothing on
    /// a node).
    fn settle(&self, s: &mut State) -> Result<(), Violation> {
        for w in self.waiters() {
            match s.waiters[usize::from(w)].phase {
                Phase::Committing { .. }
                    if !Self::in_flight(s, w, |m| matches!(m, Msg::Commit { .. })) =>
                {
                    self.leave(s, w, Phase::Leaving);
                }
                Phase::Touching { .. }
                    if !Self::in_flight(s, w, |m| matches!(m, Msg::Touch { .. })) =>
                {
                    self.end_heartbeat(s, w)?;
                }
                _ => {}
            }
        }
        let waiters = s.waiters;
        s.msgs.retain(|m| {
            let phase = waiters[usize::from(m.waiter())].phase;
            match m {
                Msg::Commit { .. } | Msg::Leave { .. } => true,
                Msg::Read { .. } => matches!(phase, Phase::Reading { .. }),
                Msg::Touch { .. } => matches!(phase, Phase::Touching { .. }),
            }
        });
        s.msgs.sort_unstable();
        Ok(())
    }

    /// A heartbeat over without `w` being head: it stays queued, or gives
    /// up its place and joins again at the back (property 4 when it had
    /// no need to).
    fn end_heartbeat(&self, s: &mut State, w: u8) -> Result<(), Violation> {
        let Phase::Touching {
            answers, present, ..
        } = s.waiters[usize::from(w)].phase
        else {
            unreachable!("a heartbeat ends only while touching");
        };
        let rejoin = match self.0.rejoin {
            Rejoin::AfterEveryAnswer | Rejoin::AtTheDecision => {
                answers >= QUORUM && present < QUORUM
            }
            Rejoin::AbsentOnMajority => answers - present > NODES as u8 - QUORUM,
        };
        if !rejoin {
            s.waiters[usize::from(w)].phase = Phase::Waiting;
            return Ok(());
        }
        // Without time-outs and failed nodes, a waiter hears every node.
        let held = s.nodes.iter().filter(|n| n.present(w)).count();
        let heard_all = !self.0.slow && !s.nodes.iter().any(|n| n.down);
        if heard_all && s.waiters[usize::from(w)].live() && held >= usize::from(QUORUM) {
            return Err(Violation::LeftItsPlace {
                waiter: client_name(w),
            });
        }
        self.leave(s, w, Phase::Leaving);
        Ok(())
    }

    /// The state without the names of its nodes and waiters: the
    /// smallest encoding over the waiters' renamings, nodes as
    /// [`push_nodes`] forgets them (a node's state, then the requests to
    /// it).
    fn canonical(&self, s: &State) -> Vec<u8> {
        let waiters = usize::from(self.0.waiters);
        let mut best: Vec<u8> = Vec::new();
        for order in client_orders(waiters, |_| true) {
            let rename = |w: u8| order[usize::from(w)];
            let mut out = Vec::with_capacity(64 + 4 * s.msgs.len());
            let mut renamed = [[0u8; 9]; WAITERS];
            for (i, c) in s.waiters[..waiters].iter().enumerate() {
                let p = c.phase.encode();
                let ahead = (0..waiters)
                    .filter(|&v| c.ahead & (1 << v) != 0)
                    .fold(0u8, |mask, v| mask | 1 << order[v]);
                renamed[usize::from(order[i])] = [
                    c.attempt,
                    p[0],
                    p[1],
                    p[2],
                    p[3],
                    c.ticket,
                    ahead,
                    c.counted,
                    u8::from(c.lost),
                ];
            }
            out.extend(renamed[..waiters].iter().flatten());
            out.extend([
                match s.slot {
                    Slot::Free => 0xff,
                    Slot::Barger => 0xfe,
                    Slot::Waiter(w) => rename(w),
                },
                u8::from(s.barged),
                s.crashes_left,
                s.lapses_left,
                s.failures_left,
            ]);
            let mut signatures: [Vec<[u8; 5]>; NODES] = Default::default();
            for (i, n) in s.nodes.iter().enumerate() {
                let mut e = [0u8; WAITERS];
                for w in 0..waiters {
                    e[usize::from(order[w])] = n.entries[w];
                }
                signatures[i].push([n.counter, e[0], e[1], e[2], u8::from(n.down)]);
            }
            for &m in &s.msgs {
                let w = rename(m.waiter());
                let node = usize::from(m.node());
                signatures[node].push(match m {
                    Msg::Read { .. } => [0, w, 0, 0, 0],
                    Msg::Commit { ticket, .. } => [1, w, ticket, 0, 0],
                    Msg::Touch { .. } => [2, w, 0, 0, 0],
                    Msg::Leave { .. } => [3, w, 0, 0, 0],
                });
            }
            push_nodes(&mut out, &mut signatures);
            if best.is_empty() || out < best {
                best = out;
            }
        }
        best
    }

    /// Properties 3 and 6, in every state.
    fn check(&self, s: &State) -> Result<(), Violation> {
        let heads: Vec<u8> = self
            .waiters()
            .filter(|&w| {
                let c = s.waiters[usize::from(w)];
                c.phase == Phase::Head && !c.lost
            })
            .collect();
        if let [a, b, ..] = heads[..] {
            return Err(Violation::TwoHeads {
                a: client_name(a),
                b: client_name(b),
            });
        }
        if self.0.design != Design::LocalTickets {
            for &w in &heads {
                if let Some(v) = self.live_ahead(s, w, s.waiters[usize::from(w)].ticket) {
                    return Err(Violation::HeadAhead {
                        head: client_name(w),
                        ahead: client_name(v),
                    });
                }
            }
        }
        let holding = self
            .waiters()
            .filter(|&w| s.waiters[usize::from(w)].phase == Phase::Holding)
            .count()
            + usize::from(s.slot == Slot::Barger);
        if holding > 1 {
            return Err(Violation::TwoHolders);
        }
        Ok(())
    }
}

impl Model for Queue {
    type State = State;
    type Key = Vec<u8>;
    type Action = Action;
    type Violation = Violation;

    fn initial(&self) -> State {
        assert!(usize::from(self.0.waiters) <= WAITERS, "at most 3 waiters");
        State {
            nodes: [Node::default(); NODES],
            waiters: [Waiter::IDLE; WAITERS],
            msgs: Vec::new(),
            slot: Slot::Free,
            barged: !self.0.barger,
            crashes_left: self.0.crashes,
            lapses_left: self.0.lapses,
            failures_left: self.0.node_failures,
        }
    }

    fn actions(&self, s: &State) -> Vec<Action> {
        let mut out = Vec::new();
        for w in self.waiters() {
            let c = s.waiters[usize::from(w)];
            match c.phase {
                Phase::Idle => out.push(Action::Join(w)),
                Phase::Leaving if self.clean(s, w) => out.push(Action::Join(w)),
                Phase::Waiting => out.push(Action::Touch(w)),
                Phase::Head => {
                    if s.slot == Slot::Free {
                        out.push(Action::Take(w));
                    }
                    out.push(Action::Touch(w));
                }
                Phase::Holding => out.push(Action::Release(w)),
                Phase::Committing { .. } | Phase::Touching { .. } if self.0.slow => {
                    out.push(Action::TimeOut(w));
                }
                _ => {}
            }
            let started = !matches!(c.phase, Phase::Idle | Phase::Done { .. } | Phase::Crashed);
            if s.crashes_left > 0 && started {
                out.push(Action::Crash(w));
            }
        }
        if let Slot::Waiter(w) = s.slot {
            if s.waiters[usize::from(w)].phase == Phase::Crashed {
                out.push(Action::LockExpires);
            }
        }
        if s.slot == Slot::Free && !s.barged {
            out.push(Action::BargerTakes);
        }
        if s.slot == Slot::Barger {
            out.push(Action::BargerReleases);
        }
        if s.failures_left > 0 {
            for n in 0..NODES as u8 {
                if !s.nodes[usize::from(n)].down {
                    out.push(Action::Fail(n));
                }
            }
        }
        let mut last = None;
        for &m in &s.msgs {
            if last == Some(m) {
                continue;
            }
            last = Some(m);
            out.push(Action::Deliver { msg: m, expire: 0 });
            let node = m.node();
            let (may, lapse) = self.may_expire(s, node);
            let lapses_ok = |expire: u8| (expire & lapse).count_ones() <= u32::from(s.lapses_left);
            match m {
                Msg::Touch { .. } => {
                    for expire in (1..=may).filter(|&e| e & !may == 0 && lapses_ok(e)) {
                        out.push(Action::Deliver { msg: m, expire });
                    }
                }
                Msg::Read { .. } | Msg::Commit { .. } => {
                    let all = self
                        .waiters()
                        .filter(|&w| s.nodes[usize::from(node)].present(w))
                        .fold(0u8, |mask, w| mask | 1 << w);
                    if all != 0 && may == all && lapses_ok(all) {
                        out.push(Action::Deliver {
                            msg: m,
                            expire: all,
                        });
                    }
                }
                Msg::Leave { .. } => {}
            }
        }
        out
    }

    fn apply(&self, s: &State, action: Action) -> Result<State, Violation> {
        let mut s = s.clone();
        match action {
            Action::Join(w) => {
                for n in 0..NODES as u8 {
                    Self::remove(&mut s, n, w);
                }
                for c in &mut s.waiters {
                    c.ahead &= !(1 << w);
                }
                let ahead = self
                    .waiters()
                    .filter(|&v| v != w && s.waiters[usize::from(v)].live())
                    .filter(|_| self.0.design != Design::LocalTickets)
                    .fold(0u8, |mask, v| mask | 1 << v);
                let c = &mut s.waiters[usize::from(w)];
                if c.phase != Phase::Idle {
                    c.attempt += 1;
                }
                if c.attempt >= self.0.attempts {
                    c.phase = Phase::Done { granted: false };
                } else {
                    *c = Waiter {
                        attempt: c.attempt,
                        ahead,
                        ..Waiter::IDLE
                    };
                    if self.0.design == Design::LocalTickets {
                        c.phase = Phase::Committing { yes: 0, no: 0 };
                        Self::send_all(&mut s, |node| Msg::Commit {
                            waiter: w,
                            node,
                            ticket: 0,
                        });
                    } else {
                        c.phase = Phase::Reading { answers: 0, max: 0 };
                        Self::send_all(&mut s, |node| Msg::Read { waiter: w, node });
                    }
                }
            }
            Action::Deliver { msg, expire } => {
                let node = msg.node();
                let lapse = self.may_expire(&s, node).1;
                s.lapses_left -= (expire & lapse).count_ones() as u8;
                for w in self.waiters().filter(|w| expire & (1 << w) != 0) {
                    Self::remove(&mut s, node, w);
                }
                let at = s.msgs.iter().position(|&x| x == msg).expect("in flight");
                s.msgs.remove(at);
                self.deliver(&mut s, msg)?;
            }
            Action::Touch(w) => {
                s.msgs
                    .retain(|m| !(m.waiter() == w && matches!(m, Msg::Touch { .. })));
                s.waiters[usize::from(w)].phase = Phase::Touching {
                    answers: 0,
                    head: 0,
                    present: 0,
                };
                Self::send_all(&mut s, |node| Msg::Touch { waiter: w, node });
            }
            Action::Take(w) => {
                let c = s.waiters[usize::from(w)];
                if self.0.design != Design::LocalTickets && !c.lost {
                    if let Some(v) = self.live_ahead(&s, w, c.ticket) {
                        return Err(Violation::GrantedAhead {
                            granted: client_name(w),
                            ahead: client_name(v),
                        });
                    }
                }
                s.slot = Slot::Waiter(w);
                self.leave(&mut s, w, Phase::Holding);
            }
            Action::Release(w) => {
                s.slot = Slot::Free;
                s.waiters[usize::from(w)].phase = Phase::Done { granted: true };
            }
            Action::TimeOut(w) => match s.waiters[usize::from(w)].phase {
                Phase::Committing { .. } => self.leave(&mut s, w, Phase::Leaving),
                Phase::Touching { .. } => self.end_heartbeat(&mut s, w)?,
                p => unreachable!("a time-out in {p:?}"),
            },
            Action::Crash(w) => {
                s.crashes_left -= 1;
                s.waiters[usize::from(w)].phase = Phase::Crashed;
            }
            Action::LockExpires | Action::BargerReleases => s.slot = Slot::Free,
            Action::BargerTakes => {
                s.slot = Slot::Barger;
                s.barged = true;
            }
            Action::Fail(n) => {
                s.failures_left -= 1;
                s.nodes[usize::from(n)] = Node {
                    down: true,
                    ..Node::default()
                };
                s.msgs.retain(|m| m.node() != n);
            }
        }
        self.settle(&mut s)?;
        self.check(&s)?;
        Ok(s)
    }

    fn key(&self, s: &State) -> Vec<u8> {
        self.canonical(s)
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (c, n) = (client_name, node_name);
        match *self {
            Action::Join(w) => write!(f, "{} joins: reads the counters", c(w)),
            Action::Deliver { msg, expire } => {
                if expire != 0 {
                    let names: String = (0..WAITERS as u8)
                        .filter(|w| expire & (1 << w) != 0)
                        .map(c)
                        .collect();
                    write!(f, "the entries of {names} there expire; then ")?;
                }
                match msg {
                    Msg::Read { waiter, node } => {
                        write!(f, "{}'s read runs on {}", c(waiter), n(node))
                    }
                    Msg::Commit {
                        waiter,
                        node,
                        ticket,
                    } => write!(f, "{}'s commit of {ticket} runs on {}", c(waiter), n(node)),
                    Msg::Touch { waiter, node } => {
                        write!(f, "{}'s heartbeat runs on {}", c(waiter), n(node))
                    }
                    Msg::Leave { waiter, node } => {
                        write!(f, "{}'s leave runs on {}", c(waiter), n(node))
                    }
                }
            }
            Action::Touch(w) => write!(f, "{} sends a heartbeat", c(w)),
            Action::Take(w) => write!(f, "{}, head, takes the lock and leaves the queue", c(w)),
            Action::Release(w) => write!(f, "{} releases the lock", c(w)),
            Action::TimeOut(w) => write!(f, "{} times out on its answers", c(w)),
            Action::Crash(w) => write!(f, "{} CRASHES", c(w)),
            Action::LockExpires => write!(f, "the crashed holder's lock expires"),
            Action::Fail(node) => write!(f, "{} FAILS for good", n(node)),
            Action::BargerTakes => write!(f, "a plain acquirer takes the lock"),
            Action::BargerReleases => write!(f, "the plain acquirer releases"),
        }
    }
}

/// What a search for stuck states found.
pub struct Progress<M: Model> {
    /// Distinct states explored.
    pub states: usize,
    /// Transitions between them.
    pub edges: usize,
    /// A safety violation, and the steps to it (the search stops there).
    pub violation: Option<(M::Violation, Vec<M::Action>)>,
    /// Reachable states from which no run reaches the goal.
    pub stuck: usize,
    /// The first stuck state (in breadth-first order) that `wanted`
    /// accepts, and the steps to it: a shortest such.
    pub example: Option<(M::State, Vec<M::Action>)>,
}

/// Every reachable state, as [`crate::search::explore`], with its
/// transitions kept; then every state from which no run reaches a state
/// `goal` accepts (found backwards from the goal states).
///
/// # Panics
///
/// Past `2^32` states or transitions.
pub fn explore_progress<M: Model>(
    model: &M,
    goal: impl Fn(&M::State) -> bool,
    wanted: impl Fn(&M::State) -> bool,
) -> Progress<M> {
    let start = model.initial();
    let mut parents: Vec<(u32, Option<M::Action>)> = vec![(0, None)];
    let mut at_goal = vec![goal(&start)];
    let mut seen: HashMap<M::Key, u32, BuildHasherDefault<Fx>> = HashMap::default();
    seen.insert(model.key(&start), 0);
    // The successors of state i: succ[offsets[i]..offsets[i + 1]].
    let mut offsets: Vec<u32> = vec![0];
    let mut succ: Vec<u32> = Vec::new();
    let mut queue = VecDeque::from([(start, 0u32)]);
    let trace = |parents: &[(u32, Option<M::Action>)], mut at: u32| {
        let mut steps = Vec::new();
        while let (parent, Some(a)) = parents[at as usize] {
            steps.push(a);
            at = parent;
        }
        steps.reverse();
        steps
    };
    while let Some((state, index)) = queue.pop_front() {
        for action in model.actions(&state) {
            match model.apply(&state, action) {
                Ok(next) => {
                    let key = model.key(&next);
                    let to = match seen.get(&key) {
                        Some(&to) => to,
                        None => {
                            let to = u32::try_from(parents.len()).expect("fewer than 2^32 states");
                            parents.push((index, Some(action)));
                            at_goal.push(goal(&next));
                            seen.insert(key, to);
                            queue.push_back((next, to));
                            to
                        }
                    };
                    succ.push(to);
                }
                Err(violation) => {
                    let mut steps = trace(&parents, index);
                    steps.push(action);
                    return Progress {
                        states: seen.len(),
                        edges: succ.len(),
                        violation: Some((violation, steps)),
                        stuck: 0,
                        example: None,
                    };
                }
            }
        }
        offsets.push(u32::try_from(succ.len()).expect("fewer than 2^32 transitions"));
    }
    drop(seen);
    let states = parents.len();
    // The predecessors, in the same layout.
    let mut rev_offsets = vec![0u32; states + 1];
    for &to in &succ {
        rev_offsets[to as usize + 1] += 1;
    }
    for i in 0..states {
        rev_offsets[i + 1] += rev_offsets[i];
    }
    let mut fill = rev_offsets.clone();
    let mut pred = vec![0u32; succ.len()];
    for from in 0..states {
        for &to in &succ[offsets[from] as usize..offsets[from + 1] as usize] {
            pred[fill[to as usize] as usize] = from as u32;
            fill[to as usize] += 1;
        }
    }
    // Backwards from the goal: every state some run takes there.
    let mut reaches = at_goal;
    let mut work: Vec<u32> = (0..states as u32)
        .filter(|&i| reaches[i as usize])
        .collect();
    while let Some(i) = work.pop() {
        let i = i as usize;
        for &p in &pred[rev_offsets[i] as usize..rev_offsets[i + 1] as usize] {
            if !reaches[p as usize] {
                reaches[p as usize] = true;
                work.push(p);
            }
        }
    }
    let stuck = reaches.iter().filter(|&&r| !r).count();
    let example = (0..states as u32)
        .filter(|&i| !reaches[i as usize])
        .map(|i| trace(&parents, i))
        .map(|steps| (replay(model, &steps), steps))
        .find(|(state, _)| wanted(state));
    Progress {
        states,
        edges: succ.len(),
        violation: None,
        stuck,
        example,
    }
}

fn replay<M: Model>(model: &M, steps: &[M::Action]) -> M::State {
    let mut state = model.initial();
    for &a in steps {
        state = model
            .apply(&state, a)
            .unwrap_or_else(|_| unreachable!("a stored trace breaks nothing"));
    }
    state
}

fn print_trace<M: Model>(steps: &[M::Action]) {
    for (i, a) in steps.iter().enumerate() {
        report(&format!("  {:2}. {a}", i + 1));
    }
}

fn run_progress(name: &str, model: &Queue, wanted: impl Fn(&State) -> bool) -> Progress<Queue> {
    let t = Instant::now();
    let p = explore_progress(model, |s| model.finished(s), wanted);
    report(&format!(
        "model {name}: {} states, {} transitions explored in {:.2?}, {}",
        p.states,
        p.edges,
        t.elapsed(),
        match (&p.violation, p.stuck) {
            (Some((v, steps)), _) => format!("counterexample {v:?} in {} steps", steps.len()),
            (None, 0) => "no violation, no stuck state".to_owned(),
            (None, k) => format!("no violation, {k} stuck states"),
        }
    ));
    p
}

/// Asserts every property: no violation, and no stuck state. Returns the
/// number of states.
///
/// # Panics
///
/// With the trace printed, on a violation or a stuck state.
pub fn assert_live(name: &str, model: &Queue) -> usize {
    let p = run_progress(name, model, |_| true);
    if let Some((v, steps)) = &p.violation {
        print_trace::<Queue>(steps);
        panic!("{name}: {v:?}");
    }
    if let Some((state, steps)) = &p.example {
        print_trace::<Queue>(steps);
        report(&format!("      -> stuck: {}", model.describe(state)));
        panic!("{name}: {} stuck states", p.stuck);
    }
    p.states
}

/// A negative control of progress: asserts a stuck state that `wanted`
/// accepts, reached within `steps` steps, and prints its trace.
///
/// # Panics
///
/// On a safety violation, or when no such stuck state is found.
pub fn assert_stuck(name: &str, model: &Queue, steps: usize, wanted: impl Fn(&State) -> bool) {
    let p = run_progress(name, model, wanted);
    if let Some((v, trace)) = &p.violation {
        print_trace::<Queue>(trace);
        panic!("{name}: {v:?}");
    }
    let Some((state, trace)) = &p.example else {
        panic!("{name}: the negative control found no such stuck state");
    };
    print_trace::<Queue>(trace);
    report(&format!("      -> stuck: {}", model.describe(state)));
    assert!(
        trace.len() <= steps,
        "{name}: {} steps, more than {steps}",
        trace.len()
    );
}
