//! How the model writes a state and a step: the trace's text, and the
//! state's key for the search (without the names of nodes, or of clients
//! taking the same number of permits).

use std::fmt;

use super::{bits, Action, Config, Design, Fault, Msg, Phase, Slots, State, Token, NODES, ORPHAN};
use crate::symmetry::{client_orders, push_nodes};
use crate::{client_name, node_name};

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
                    Msg::Acquire {
                        token, node, k, l, ..
                    } => write!(
                        f,
                        "{}'s acquire of {k} of {l} runs on {}",
                        c(token),
                        n(node)
                    ),
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
    /// The message without its node, the client renamed.
    fn encode(self, rename: impl Fn(Token) -> Token) -> [u8; 9] {
        let (kind, a, b, c) = match self {
            Msg::Acquire { k, start, l, .. } => (0, k, start, l),
            Msg::Release { which, .. } => (1, which, 0, 0),
            Msg::Commit { fence, slot, .. } => (2, fence, slot, 0),
            Msg::AcquireReply { taken, counter, .. } => (3, taken, counter, 0),
            Msg::CommitReply { ok, .. } => (4, u8::from(ok), 0, 0),
        };
        let t = rename(self.token());
        [kind, t.0, t.1, a, b, c, 0, 0, 0]
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
                floor,
            } => [
                1, start, yes[0], yes[1], yes[2], answered, admitted, max, floor,
            ],
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

/// Renames slot `i` to `i + by` (mod `l`): every order is a rotation, so
/// the slot design treats the slots alike up to such a renaming.
#[derive(Clone, Copy)]
struct Rotate {
    by: u8,
    l: u8,
}

impl Rotate {
    fn slot(self, i: u8) -> u8 {
        (i + self.by) % self.l
    }

    fn set(self, set: Slots) -> Slots {
        bits(set).fold(0, |out, i| out | 1 << self.slot(i))
    }

    fn msg(self, mut m: Msg) -> Msg {
        match &mut m {
            Msg::Acquire { start: i, .. } | Msg::Commit { slot: i, .. } => *i = self.slot(*i),
            Msg::Release { which: set, .. } | Msg::AcquireReply { taken: set, .. } => {
                *set = self.set(*set);
            }
            Msg::CommitReply { .. } => {}
        }
        m
    }

    fn state(self, s: &State) -> State {
        let mut out = s.clone();
        for (node, old) in out.nodes.iter_mut().zip(&s.nodes) {
            for i in 0..self.l {
                node.slots[usize::from(self.slot(i))] = old.slots[usize::from(i)];
            }
        }
        for c in &mut out.clients {
            if let Phase::Acquiring { start, yes, .. } = &mut c.phase {
                let old = *yes;
                for i in 0..self.l {
                    yes[usize::from(self.slot(i))] = old[usize::from(i)];
                }
                *start = self.slot(*start);
            }
        }
        for m in &mut out.msgs {
            *m = self.msg(*m);
        }
        out
    }
}

impl State {
    /// The state as bytes, the same for states that differ only by the
    /// names of the nodes, of clients taking the same number of permits,
    /// and (in the slot design, where every order is offered) of the slots
    /// up to a rotation.
    pub(super) fn canonical(&self, cfg: &Config) -> Vec<u8> {
        // Fences that name slots tell the slots apart, and so do clients
        // naming different limits (each lists its own `0..L`).
        let rotations = match cfg.design {
            Design::Slots if !(cfg.fenced && cfg.rule.rounds()) && cfg.one_limit() => cfg.permits,
            _ => 1,
        };
        let mut best = self.canonical_clients(cfg);
        for by in 1..rotations {
            let out = Rotate { by, l: cfg.permits }
                .state(self)
                .canonical_clients(cfg);
            if out < best {
                best = out;
            }
        }
        best
    }

    /// The state as bytes, the same for states that differ only by the
    /// names of the nodes, or of clients taking the same number of permits
    /// of the same limit.
    fn canonical_clients(&self, cfg: &Config) -> Vec<u8> {
        let takes = cfg.takes;
        let alike = |i: usize, c: u8| {
            takes[i] == takes[usize::from(c)] && cfg.limit(i as u8) == cfg.limit(c)
        };
        let mut best: Vec<u8> = Vec::new();
        for order in client_orders(self.clients.len(), |o| {
            o.iter().enumerate().all(|(i, &c)| alike(i, c))
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
            let mut signatures: [Vec<[u8; 9]>; NODES] = Default::default();
            for (i, n) in self.nodes.iter().enumerate() {
                let mut sig = [0u8; 9];
                for (j, slot) in n.slots.iter().enumerate() {
                    let t = slot.map_or((0xfe, 0xff), rename);
                    sig[2 * j] = t.0;
                    sig[2 * j + 1] = t.1;
                }
                sig[6] = n.counter;
                sig[7] = n.round;
                sig[8] = n.limit;
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
