//! The semaphore model: `L` permits on 3 nodes, up to 3 clients taking
//! `k` permits each, in two designs.
//!
//! - [`Design::Slots`], the library's: `L` slots, each a quorum-mutex key
//!   on every node; one request per node per attempt (`acquire_slots`:
//!   the first `k` free slots in the client's order, all or nothing, with
//!   the fencing counter read atomically); the client has won slot `i`
//!   when a majority set `i` to its token, is granted once it has won `k`,
//!   keeps the first `k` won in its order and releases the others (the
//!   rules are [`crate::slots`]). Fenced, it then commits a fence as the
//!   mutex does — `fence::propose` over the counters of the nodes that set
//!   slots, one counter per semaphore on each node, counted where the
//!   first kept slot still carries the token and the counter rises from
//!   strictly below (`reply::answer`, `reply::counts`).
//! - [`Design::Counter`], the obvious one and wrong (negative control):
//!   each node admits while it has room for `k` more (the same node rule,
//!   read as a count), and the client holds once a majority admitted it.
//!
//! What the model lets happen, as in [`crate::fencing`]: any message is
//! delivered at any time after it was sent, in any order, or not yet; a
//! client gives up an attempt at any point (and stops counting on its
//! keys); a holder's validity ends at any point; keys of an attempt expire
//! only once it no longer counts on them — or early, through an injected
//! clock jump — and a node may crash-restart, losing its keys and, unless
//! persistence is assumed, its counter. A client's releases are messages;
//! once its attempt is over they are dropped, because its keys may then
//! expire at any moment anyway, which covers a release delivered at any
//! moment (a late acquire's keys stay until they expire).
//!
//! Properties checked in every reachable state:
//! (a) with no early expiry and no restart, the permits held by clients
//!     inside validity (granted, validity not ended) total at most `L`;
//! (b) fenced: fences are unique across the semaphore's holders and
//!     ordered by commit ([`crate::fences`]), with faults too.
//!
//! The search treats states that differ only by the names of nodes, or of
//! clients taking the same `k`, as one; it places faults on a node just
//! before the next request reaches it, and forgets replies nobody waits
//! for and the names on keys and requests of attempts that are over.

use std::fmt;

use crate::fences::{Broken, Fences};
use crate::fencing::Rule;
use crate::search::Model;
use crate::slots::{self, Slots};
use crate::symmetry::{client_orders, push_nodes};
use crate::{client_name, fence, node_name, reply};

const NODES: usize = 3;
const QUORUM: u8 = 2;
/// The most permits a configuration may have.
const MAX_PERMITS: usize = 3;

/// How a client decides it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Design {
    /// Per slot, a majority of nodes set it to the client's token.
    Slots,
    /// A majority of nodes admitted the client (negative control).
    Counter,
}

#[derive(Debug, Clone, Copy)]
pub struct Config {
    pub design: Design,
    /// `L`.
    pub permits: u8,
    /// `k` of each client (one entry per client, at most 3).
    pub takes: &'static [u8],
    /// Attempts per client (a failed or finished attempt starts the next).
    pub attempts: u8,
    /// Commit a fence after the grant.
    pub fenced: bool,
    /// The commit rule: [`Rule::RaiseFromBelow`] or [`Rule::AtLeast`].
    pub rule: Rule,
    pub early_expiries: u8,
    pub restarts: u8,
    /// A restarted node keeps its counter.
    pub persistent_counter: bool,
    /// Check (a): promised only without early expiry and restarts.
    pub exclusion: bool,
}

/// An attempt's token: (client, attempt).
type Token = (u8, u8);

/// The token of a key or request whose attempt is over and can commit
/// nothing any more: which attempt it was does not matter.
const ORPHAN: Token = (0xff, 0);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
struct Node {
    slots: [Option<Token>; MAX_PERMITS],
    counter: u8,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Phase {
    Idle,
    /// `yes[i]`: nodes that set slot `i`; `admitted`: nodes that set any;
    /// `max`: the largest counter they read.
    Acquiring {
        start: u8,
        yes: [u8; MAX_PERMITS],
        answered: u8,
        admitted: u8,
        max: u8,
    },
    /// `floor`: the largest fence handed out before this commit began.
    Committing {
        fence: u8,
        floor: u8,
        yes: u8,
        no: u8,
    },
    Holding {
        fence: u8,
    },
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Client {
    attempt: u8,
    phase: Phase,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Msg {
    Acquire {
        token: Token,
        node: u8,
        k: u8,
        start: u8,
    },
    Release {
        token: Token,
        node: u8,
        which: Slots,
    },
    Commit {
        token: Token,
        node: u8,
        fence: u8,
        slot: u8,
    },
    /// `taken` empty: refused.
    AcquireReply {
        token: Token,
        node: u8,
        taken: Slots,
        counter: u8,
    },
    CommitReply {
        token: Token,
        node: u8,
        ok: bool,
    },
}

/// What happens to a node just before a request is delivered to it (see
/// [`crate::fencing::Before`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    Nothing,
    /// These slots' keys, which nobody counts on any more, expire.
    Expire(Slots),
    /// This slot's key expires while its attempt still counts on it.
    EarlyExpiry(u8),
    /// The node crash-restarts.
    Restart,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// A client starts an attempt with its order starting at this slot.
    Start(u8, u8),
    Deliver(Msg, Fault),
    GiveUp(u8),
    /// The holder releases, or its validity ends.
    Release(u8),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Violation {
    /// More than `L` permits held inside validity at once.
    TooManyPermits(u8),
    Fence(Broken),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct State {
    nodes: [Node; NODES],
    clients: Vec<Client>,
    /// In flight, sorted (a multiset).
    msgs: Vec<Msg>,
    fences: Fences,
    early_left: u8,
    restarts_left: u8,
}

fn bits(set: Slots) -> impl Iterator<Item = u8> {
    (0..8).filter(move |i| set & (1 << i) != 0)
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (c, n) = (client_name, node_name);
        let c = |t: Token| if t == ORPHAN { '?' } else { c(t.0) };
        let list = |set: Slots| {
            let names: Vec<String> = bits(set).map(|i| i.to_string()).collect();
            names.join(", ")
        };
        match *self {
            Action::Start(i, start) => write!(
                f,
                "{} starts an attempt, order from slot {start}: acquire to x, y, z",
                client_name(i)
            ),
            Action::GiveUp(i) => write!(f, "{} gives up its attempt", client_name(i)),
            Action::Release(i) => write!(f, "{} releases (or its validity ends)", client_name(i)),
            Action::Deliver(m, fault) => {
                match fault {
                    Fault::Nothing => {}
                    Fault::Expire(s) => write!(f, "slots {} there expire; then ", list(s))?,
                    Fault::EarlyExpiry(s) => {
                        write!(f, "slot {s} there expires EARLY (clock jump); then ")?
                    }
                    Fault::Restart => write!(f, "the node restarts; then ")?,
                }
                match m {
                    Msg::Acquire { token, node, k, .. } => {
                        write!(f, "{}'s acquire of {k} runs on {}", c(token), n(node))
                    }
                    Msg::Release { token, node, which } => {
                        write!(
                            f,
                            "{}'s release of slots {} runs on {}",
                            c(token),
                            list(which),
                            n(node)
                        )
                    }
                    Msg::Commit {
                        token, node, fence, ..
                    } => write!(f, "{}'s commit of {fence} runs on {}", c(token), n(node)),
                    Msg::AcquireReply {
                        token,
                        node,
                        taken: 0,
                        ..
                    } => write!(f, "{} gets refused from {}", c(token), n(node)),
                    Msg::AcquireReply {
                        token,
                        node,
                        taken,
                        counter,
                    } => write!(
                        f,
                        "{} gets slots {} from {} (counter {counter})",
                        c(token),
                        list(taken),
                        n(node)
                    ),
                    Msg::CommitReply { token, node, ok } => write!(
                        f,
                        "{} gets commit {} from {}",
                        c(token),
                        if ok { "yes" } else { "no" },
                        n(node)
                    ),
                }
            }
        }
    }
}

impl Msg {
    fn node(self) -> u8 {
        match self {
            Msg::Acquire { node, .. }
            | Msg::Release { node, .. }
            | Msg::Commit { node, .. }
            | Msg::AcquireReply { node, .. }
            | Msg::CommitReply { node, .. } => node,
        }
    }

    /// The slots whose keys a request's outcome depends on: a fault on
    /// its node matters only before an acquire or a commit (a release
    /// deletes only its own token's keys, which commutes with faults).
    fn reads(self) -> Slots {
        match self {
            Msg::Acquire { .. } => Slots::MAX,
            Msg::Commit { slot, .. } => 1 << slot,
            _ => 0,
        }
    }

    fn token(self) -> Token {
        match self {
            Msg::Acquire { token, .. }
            | Msg::Release { token, .. }
            | Msg::Commit { token, .. }
            | Msg::AcquireReply { token, .. }
            | Msg::CommitReply { token, .. } => token,
        }
    }

    /// The message without its node, the client renamed.
    fn encode(self, rename: impl Fn(Token) -> Token) -> [u8; 7] {
        let (kind, a, b) = match self {
            Msg::Acquire { k, start, .. } => (0, k, start),
            Msg::Release { which, .. } => (1, which, 0),
            Msg::Commit { fence, slot, .. } => (2, fence, slot),
            Msg::AcquireReply { taken, counter, .. } => (3, taken, counter),
            Msg::CommitReply { ok, .. } => (4, u8::from(ok), 0),
        };
        let t = rename(self.token());
        [kind, t.0, t.1, a, b, 0, 0]
    }
}

impl Phase {
    fn encode(self) -> [u8; 9] {
        match self {
            Phase::Idle => [0; 9],
            Phase::Acquiring {
                start,
                yes,
                answered,
                admitted,
                max,
            } => [1, start, yes[0], yes[1], yes[2], answered, admitted, max, 0],
            Phase::Committing {
                fence,
                floor,
                yes,
                no,
            } => [2, fence, floor, yes, no, 0, 0, 0, 0],
            Phase::Holding { fence } => [3, fence, 0, 0, 0, 0, 0, 0, 0],
            Phase::Done => [4, 0, 0, 0, 0, 0, 0, 0, 0],
        }
    }
}

impl State {
    fn initial(cfg: &Config) -> Self {
        assert!(usize::from(cfg.permits) <= MAX_PERMITS && cfg.permits > 0);
        State {
            nodes: [Node::default(); NODES],
            clients: vec![
                Client {
                    attempt: 0,
                    phase: Phase::Idle,
                };
                cfg.takes.len()
            ],
            msgs: Vec::new(),
            fences: Fences::default(),
            early_left: cfg.early_expiries,
            restarts_left: cfg.restarts,
        }
    }

    /// Whether `token`'s attempt is under way or granted: it counts on its
    /// keys, which do not expire by their TTL.
    fn current(&self, token: Token) -> bool {
        token != ORPHAN && {
            let client = &self.clients[usize::from(token.0)];
            client.attempt == token.1 && !matches!(client.phase, Phase::Idle | Phase::Done)
        }
    }

    fn permits(&self, cfg: &Config) -> u8 {
        self.clients
            .iter()
            .zip(cfg.takes)
            .filter(|(c, _)| matches!(c.phase, Phase::Committing { .. } | Phase::Holding { .. }))
            .map(|(_, k)| k)
            .sum()
    }

    fn end_attempt(&mut self, c: u8, cfg: &Config) {
        let client = &mut self.clients[usize::from(c)];
        if client.attempt + 1 < cfg.attempts {
            client.attempt += 1;
            client.phase = Phase::Idle;
        } else {
            client.phase = Phase::Done;
        }
    }

    fn send_all(&mut self, make: impl Fn(u8) -> Msg) {
        for n in 0..NODES as u8 {
            self.msgs.push(make(n));
        }
    }

    fn actions(&self, cfg: &Config) -> Vec<Action> {
        let mut out = Vec::new();
        let starts = match cfg.design {
            Design::Slots => cfg.permits,
            Design::Counter => 1,
        };
        for (i, client) in self.clients.iter().enumerate() {
            let i = i as u8;
            match client.phase {
                Phase::Idle => out.extend((0..starts).map(|s| Action::Start(i, s))),
                Phase::Acquiring { .. } | Phase::Committing { .. } => out.push(Action::GiveUp(i)),
                Phase::Holding { .. } => out.push(Action::Release(i)),
                Phase::Done => {}
            }
        }
        let mut last = None;
        for &m in &self.msgs {
            if last == Some(m) {
                continue;
            }
            last = Some(m);
            out.push(Action::Deliver(m, Fault::Nothing));
            let reads = m.reads();
            if reads == 0 {
                continue;
            }
            let node = self.nodes[usize::from(m.node())];
            let (mut lapsed, mut held) = (0, 0);
            for (i, slot) in node.slots.iter().enumerate() {
                if reads & (1 << i) == 0 {
                    continue;
                }
                match slot {
                    Some(t) if self.current(*t) => held |= 1 << i,
                    Some(_) => lapsed |= 1 << i,
                    None => {}
                }
            }
            // Every non-empty subset of the lapsed keys.
            let mut subset = lapsed;
            while subset != 0 {
                out.push(Action::Deliver(m, Fault::Expire(subset)));
                subset = (subset - 1) & lapsed;
            }
            if self.early_left > 0 {
                out.extend(bits(held).map(|i| Action::Deliver(m, Fault::EarlyExpiry(i))));
            }
            let restart_changes = node.slots.iter().any(Option::is_some)
                || (!cfg.persistent_counter && node.counter > 0);
            if self.restarts_left > 0 && restart_changes {
                out.push(Action::Deliver(m, Fault::Restart));
            }
        }
        out
    }

    fn apply(&self, action: Action, cfg: &Config) -> Result<State, Violation> {
        let mut s = self.clone();
        match action {
            Action::Start(c, start) => {
                let token = (c, s.clients[usize::from(c)].attempt);
                let k = cfg.takes[usize::from(c)];
                s.send_all(|node| Msg::Acquire {
                    token,
                    node,
                    k,
                    start,
                });
                s.clients[usize::from(c)].phase = Phase::Acquiring {
                    start,
                    yes: [0; MAX_PERMITS],
                    answered: 0,
                    admitted: 0,
                    max: 0,
                };
            }
            // Its releases are dropped: see the module's docs.
            Action::GiveUp(c) | Action::Release(c) => s.end_attempt(c, cfg),
            Action::Deliver(m, fault) => {
                let node = &mut s.nodes[usize::from(m.node())];
                match fault {
                    Fault::Nothing => {}
                    Fault::Expire(set) => {
                        for i in bits(set) {
                            node.slots[usize::from(i)] = None;
                        }
                    }
                    Fault::EarlyExpiry(i) => {
                        node.slots[usize::from(i)] = None;
                        s.early_left -= 1;
                    }
                    Fault::Restart => {
                        node.slots = [None; MAX_PERMITS];
                        if !cfg.persistent_counter {
                            node.counter = 0;
                        }
                        s.restarts_left -= 1;
                    }
                }
                let at = s.msgs.iter().position(|x| *x == m).expect("in flight");
                s.msgs.remove(at);
                s.deliver(m, cfg)?;
            }
        }
        s.prune();
        s.msgs.sort_unstable();
        let held = s.permits(cfg);
        if cfg.exclusion && held > cfg.permits {
            return Err(Violation::TooManyPermits(held));
        }
        Ok(s)
    }

    fn deliver(&mut self, m: Msg, cfg: &Config) -> Result<(), Violation> {
        let l = usize::from(cfg.permits);
        match m {
            Msg::Acquire {
                token,
                node,
                k,
                start,
            } => {
                let n = &mut self.nodes[usize::from(node)];
                let taken = slots::acquire(&mut n.slots[..l], token, k, start).unwrap_or(0);
                if token != ORPHAN {
                    self.msgs.push(Msg::AcquireReply {
                        token,
                        node,
                        taken,
                        counter: n.counter,
                    });
                }
            }
            Msg::Release { token, node, which } => {
                slots::release(&mut self.nodes[usize::from(node)].slots[..l], token, which);
            }
            Msg::Commit {
                token,
                node,
                fence,
                slot,
            } => {
                let n = &mut self.nodes[usize::from(node)];
                let held = n.slots[usize::from(slot)] == Some(token);
                let ok = held
                    && match cfg.rule {
                        Rule::RaiseFromBelow => {
                            let held = reply::Held {
                                key: Some(reply::Key { token, life: () }),
                                counter: n.counter.into(),
                            };
                            let command = reply::Command::Commit {
                                token,
                                fence: fence.into(),
                            };
                            let (answer, after) = reply::answer(held, command);
                            n.counter = u8::try_from(after.counter).expect("small");
                            reply::counts(reply::Kind::Commit, answer) == Some(true)
                        }
                        Rule::AtLeast => {
                            n.counter = n.counter.max(fence);
                            true
                        }
                        Rule::IncrMax => unreachable!("not a semaphore commit rule"),
                    };
                self.msgs.push(Msg::CommitReply { token, node, ok });
            }
            Msg::AcquireReply {
                token,
                taken,
                counter,
                ..
            } => self.on_acquire_reply(token, taken, counter, cfg),
            Msg::CommitReply { token, ok, .. } => {
                let c = token.0;
                let Phase::Committing {
                    fence,
                    floor,
                    yes,
                    no,
                } = self.clients[usize::from(c)].phase
                else {
                    return Ok(());
                };
                let (yes, no) = if ok { (yes + 1, no) } else { (yes, no + 1) };
                if yes >= QUORUM {
                    self.fences.grant(fence, floor).map_err(Violation::Fence)?;
                    self.clients[usize::from(c)].phase = Phase::Holding { fence };
                } else if no > NODES as u8 - QUORUM {
                    self.end_attempt(c, cfg);
                } else {
                    self.clients[usize::from(c)].phase = Phase::Committing {
                        fence,
                        floor,
                        yes,
                        no,
                    };
                }
            }
        }
        Ok(())
    }

    fn on_acquire_reply(&mut self, token: Token, taken: Slots, counter: u8, cfg: &Config) {
        let c = token.0;
        let Phase::Acquiring {
            start,
            mut yes,
            answered,
            admitted,
            max,
        } = self.clients[usize::from(c)].phase
        else {
            return;
        };
        let answered = answered + 1;
        let (admitted, max) = if taken == 0 {
            (admitted, max)
        } else {
            (admitted + 1, max.max(counter))
        };
        for i in bits(taken) {
            yes[usize::from(i)] += 1;
        }
        let k = cfg.takes[usize::from(c)];
        let l = cfg.permits;
        let kept = match cfg.design {
            Design::Slots => slots::keep(slots::won(&yes[..usize::from(l)], QUORUM), k, l, start),
            Design::Counter => (admitted >= QUORUM).then_some(0),
        };
        let phase = match kept {
            Some(kept) => {
                let others = ((1 << l) - 1) & !kept;
                if cfg.design == Design::Slots && others != 0 {
                    self.send_all(|node| Msg::Release {
                        token,
                        node,
                        which: others,
                    });
                }
                if cfg.fenced {
                    let fence = u8::try_from(fence::propose([u64::from(max)]).expect("small"))
                        .expect("small");
                    let slot = slots::first(kept, l, start).expect("granted");
                    self.send_all(|node| Msg::Commit {
                        token,
                        node,
                        fence,
                        slot,
                    });
                    Phase::Committing {
                        fence,
                        floor: self.fences.floor(),
                        yes: 0,
                        no: 0,
                    }
                } else {
                    Phase::Holding { fence: 0 }
                }
            }
            None if answered == NODES as u8 => return self.end_attempt(c, cfg),
            None => Phase::Acquiring {
                start,
                yes,
                answered,
                admitted,
                max,
            },
        };
        self.clients[usize::from(c)].phase = phase;
    }

    /// Drops what can no longer make a difference: replies nobody waits
    /// for, releases of attempts that are over (their keys may expire at
    /// any moment) and releases that can find nothing to delete, and, for an attempt over with no commit of it in
    /// flight, the name on its keys and its acquires still in flight.
    fn prune(&mut self) {
        let committing: Vec<Token> = self
            .msgs
            .iter()
            .filter_map(|m| match *m {
                Msg::Commit { token, .. } => Some(token),
                _ => None,
            })
            .collect();
        let forgotten = |s: &Self, t: Token| !s.current(t) && !committing.contains(&t);
        let waiting = |s: &Self, t: Token, acquiring: bool| {
            let client = &s.clients[usize::from(t.0)];
            client.attempt == t.1
                && match client.phase {
                    Phase::Acquiring { .. } => acquiring,
                    Phase::Committing { .. } => !acquiring,
                    _ => false,
                }
        };
        // A release finds something to delete only where the token holds
        // one of its slots, or an acquire of it is still on its way there.
        let acquiring: Vec<(Token, u8)> = self
            .msgs
            .iter()
            .filter_map(|m| match *m {
                Msg::Acquire { token, node, .. } => Some((token, node)),
                _ => None,
            })
            .collect();
        let finds = |s: &Self, token: Token, node: u8, which: Slots| {
            acquiring.contains(&(token, node))
                || bits(which)
                    .any(|i| s.nodes[usize::from(node)].slots[usize::from(i)] == Some(token))
        };
        let mut msgs = std::mem::take(&mut self.msgs);
        msgs.retain(|m| match *m {
            Msg::AcquireReply { token, .. } => waiting(self, token, true),
            Msg::CommitReply { token, .. } => waiting(self, token, false),
            Msg::Release { token, node, which } => {
                self.current(token) && finds(self, token, node, which)
            }
            Msg::Acquire { .. } | Msg::Commit { .. } => true,
        });
        for m in &mut msgs {
            if let Msg::Acquire { token, .. } = m {
                if forgotten(self, *token) {
                    *token = ORPHAN;
                }
            }
        }
        let orphaned: Vec<[bool; MAX_PERMITS]> = self
            .nodes
            .iter()
            .map(|n| n.slots.map(|s| s.is_some_and(|t| forgotten(self, t))))
            .collect();
        for (node, orphaned) in self.nodes.iter_mut().zip(orphaned) {
            for (slot, orphan) in node.slots.iter_mut().zip(orphaned) {
                if orphan {
                    *slot = Some(ORPHAN);
                }
            }
        }
        self.msgs = msgs;
    }

    /// The state as bytes, the same for states that differ only by the
    /// names of the nodes, or of clients taking the same number of permits.
    fn canonical(&self, cfg: &Config) -> Vec<u8> {
        let takes = cfg.takes;
        let mut best: Vec<u8> = Vec::new();
        for order in client_orders(self.clients.len(), |o| {
            o.iter()
                .enumerate()
                .all(|(i, &c)| takes[i] == takes[usize::from(c)])
        }) {
            let rename = |t: Token| {
                if t == ORPHAN {
                    t
                } else {
                    (order[usize::from(t.0)], t.1)
                }
            };
            let mut out = Vec::with_capacity(64 + 7 * self.msgs.len());
            let mut renamed = [[0u8; 10]; 3];
            for (i, c) in self.clients.iter().enumerate() {
                let p = c.phase.encode();
                let r = &mut renamed[usize::from(order[i])];
                r[0] = c.attempt;
                r[1..].copy_from_slice(&p);
            }
            out.extend(renamed[..self.clients.len()].iter().flatten());
            out.extend(self.fences.encode());
            out.extend([self.early_left, self.restarts_left]);
            let mut signatures: [Vec<[u8; 7]>; NODES] = Default::default();
            for (i, n) in self.nodes.iter().enumerate() {
                let mut sig = [0u8; 7];
                for (j, slot) in n.slots.iter().enumerate() {
                    let t = slot.map_or((0xfe, 0xff), rename);
                    sig[2 * j] = t.0;
                    sig[2 * j + 1] = t.1;
                }
                sig[6] = n.counter;
                signatures[i].push(sig);
            }
            for m in &self.msgs {
                signatures[usize::from(m.node())].push(m.encode(rename));
            }
            push_nodes(&mut out, &mut signatures);
            if best.is_empty() || out < best {
                best = out;
            }
        }
        best
    }
}

/// The semaphore model with one configuration.
#[derive(Debug, Clone, Copy)]
pub struct Semaphore(pub Config);

impl Model for Semaphore {
    type State = State;
    type Key = Vec<u8>;
    type Action = Action;
    type Violation = Violation;

    fn initial(&self) -> State {
        State::initial(&self.0)
    }

    fn actions(&self, state: &State) -> Vec<Action> {
        state.actions(&self.0)
    }

    fn apply(&self, state: &State, action: Action) -> Result<State, Violation> {
        state.apply(action, &self.0)
    }

    fn key(&self, state: &State) -> Vec<u8> {
        state.canonical(&self.0)
    }
}

/// `L = 2`, three clients taking one permit each, one attempt, unfenced,
/// no fault: the library's design; the others change it.
pub const BASE: Config = Config {
    design: Design::Slots,
    permits: 2,
    takes: &[1, 1, 1],
    attempts: 1,
    fenced: false,
    rule: Rule::RaiseFromBelow,
    early_expiries: 0,
    restarts: 0,
    persistent_counter: true,
    exclusion: true,
};
