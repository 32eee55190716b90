//! The model's steps: what each client, node and fault may do next, and
//! what follows.

use super::{
    bits, Action, Client, Config, Design, Fault, Msg, Node, Phase, State, Token, Violation,
    MAX_PERMITS, NODES, ORPHAN, QUORUM,
};
use crate::fences::Fences;
use crate::fencing::Rule;
use crate::slots::{self, Slots};
use crate::{fence, reply, scripts};

impl State {
    pub(super) fn initial(cfg: &Config) -> Self {
        assert!(usize::from(cfg.permits) <= MAX_PERMITS && cfg.permits > 0);
        assert!(cfg
            .limits
            .iter()
            .all(|&l| usize::from(l) <= MAX_PERMITS && l > 0));
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

    /// The smallest `L` named by a client holding permits (as
    /// [`permits`](Self::permits) counts them); `None` without holders.
    fn bound(&self, cfg: &Config) -> Option<u8> {
        let holding =
            |c: &Client| matches!(c.phase, Phase::Committing { .. } | Phase::Holding { .. });
        (0..self.clients.len() as u8)
            .filter(|&c| holding(&self.clients[usize::from(c)]))
            .map(|c| cfg.limit(c))
            .min()
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

    pub(super) fn actions(&self, cfg: &Config) -> Vec<Action> {
        let mut out = Vec::new();
        for (i, client) in self.clients.iter().enumerate() {
            let i = i as u8;
            let starts = match cfg.design {
                Design::Slots => cfg.limit(i),
                Design::Counter => 1,
            };
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

    pub(super) fn apply(&self, action: Action, cfg: &Config) -> Result<State, Violation> {
        let mut s = self.clone();
        match action {
            Action::Start(c, start) => {
                let token = (c, s.clients[usize::from(c)].attempt);
                let (k, l) = (cfg.takes[usize::from(c)], cfg.limit(c));
                s.send_all(|node| Msg::Acquire {
                    token,
                    node,
                    k,
                    start,
                    l,
                });
                s.clients[usize::from(c)].phase = Phase::Acquiring {
                    start,
                    yes: [0; MAX_PERMITS],
                    answered: 0,
                    admitted: 0,
                    max: 0,
                    floor: s.fences.floor(),
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
                            node.round = 0;
                        }
                        s.restarts_left -= 1;
                    }
                }
                node.forget_limit_when_empty();
                let at = s.msgs.iter().position(|x| *x == m).expect("in flight");
                s.msgs.remove(at);
                s.deliver(m, cfg)?;
            }
        }
        s.prune();
        s.msgs.sort_unstable();
        let held = s.permits(cfg);
        if cfg.exclusion && s.bound(cfg).is_some_and(|bound| held > bound) {
            return Err(Violation::TooManyPermits(held));
        }
        Ok(s)
    }

    fn deliver(&mut self, m: Msg, cfg: &Config) -> Result<(), Violation> {
        match m {
            Msg::Acquire {
                token,
                node,
                k,
                start,
                l,
            } => {
                let n = &mut self.nodes[usize::from(node)];
                // Another `L` recorded: refused before anything is set.
                let refused = cfg.limit_check && n.limit != 0 && n.limit != l;
                let taken = match refused {
                    true => 0,
                    false => {
                        slots::acquire(&mut n.slots[..usize::from(l)], token, k, start).unwrap_or(0)
                    }
                };
                if taken != 0 {
                    n.limit = l;
                }
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
                let n = &mut self.nodes[usize::from(node)];
                slots::release(&mut n.slots, token, which);
                n.forget_limit_when_empty();
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
                            let held = scripts::Held {
                                key: Some(scripts::Key { token, life: () }),
                                counter: n.counter.into(),
                            };
                            let command = scripts::Command::Commit {
                                token,
                                fence: fence.into(),
                            };
                            let (answer, after) = scripts::answer(held, command);
                            n.counter = u8::try_from(after.counter).expect("small");
                            reply::counts(reply::Kind::Commit, answer) == Some(true)
                        }
                        Rule::AtLeast => {
                            n.counter = n.counter.max(fence);
                            true
                        }
                        Rule::Rounds | Rule::RoundsAnySlot => {
                            let at = scripts::Round {
                                counter: n.counter.into(),
                                // Without the slots, a round's key always
                                // has room for one more.
                                committed: match cfg.rule {
                                    Rule::Rounds => (n.round != 0).then_some(n.round.into()),
                                    _ => Some(0),
                                },
                            };
                            let per_round = cfg.limit(token.0).into();
                            let (answer, after) =
                                scripts::commit_permit(true, at, fence.into(), per_round);
                            n.counter = u8::try_from(after.counter).expect("small");
                            n.round = u8::try_from(after.committed.unwrap_or(0)).expect("small");
                            reply::counts(reply::Kind::Commit, answer) == Some(true)
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
            floor,
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
        let l = cfg.limit(c);
        let kept = match cfg.design {
            Design::Slots => slots::keep(&yes[..usize::from(l)], QUORUM, k, start),
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
                    let slot = slots::first(kept).expect("granted");
                    let (at, per_round) = match cfg.rule.rounds() {
                        true => (slot.into(), l.into()),
                        false => (0, 1),
                    };
                    let proposed = fence::propose([u64::from(max)], at, per_round);
                    let fence = u8::try_from(proposed.expect("small")).expect("small");
                    self.send_all(|node| Msg::Commit {
                        token,
                        node,
                        fence,
                        slot,
                    });
                    Phase::Committing {
                        fence,
                        floor,
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
                floor,
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
}
