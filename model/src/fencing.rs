//! The fencing model: acquire (`SET NX` with the counter read), fence
//! commit, extend and release, over 2–3 clients and 3 nodes.
//!
//! What the model lets happen: any message (request or reply) is delivered
//! at any time after it was sent, in any order, or not yet (a delay as long
//! as the run); a client gives up an attempt at any point (its node timeout
//! or validity ran out, or its future was dropped) and sends releases that
//! may arrive after its own late `SET`s; a holder's validity ends at any
//! point (after which its keys may expire); a key expires early on a node
//! while its holder is still inside validity (a clock jump), and a node
//! crash-restarts, losing its keys and, as [`Persistence`] says, keeping
//! its counter, losing it, or getting it back older. Time is not modelled beyond that order: a key of an attempt
//! still inside validity expires only through an injected early expiry or
//! restart, and a key an extension did not reach may expire while the
//! extended holder still holds.
//!
//! With [`Missing::Clock`], a missing counter (never set, or lost in a
//! restart) reads as the nodes' clock, and an acquire that sets its key
//! stores it, as `fence_check.lua` does with the server's `TIME`. The
//! clock is abstract, and this is the modelling assumption: one clock for
//! every node (their clocks agree and never step back), which advances
//! faster than counters grow — it is at least every counter any node has
//! stored and every fence a client has proposed, and it moves on by one
//! at each read of a missing counter. An acquire reads a counter that is
//! there never below the clock either (a counter brought back older is
//! lifted to it), as `fence_check.lua` does. `docs/fencing.md` ("A counter that
//! is lost") argues why `TIME` in microseconds does so: a counter rises by
//! at most one per commit, far fewer than a million a second.
//!
//! Properties checked in every reachable state:
//! (a) fences are unique, and a fence granted after another holder's grant
//!     was complete when its commit began is larger (ordered by commit);
//! (b) with no early expiry and no restart injected, no two clients hold the
//!     lock within validity at once.
//!
//! The search treats states that differ only by the names of nodes or of
//! clients as one, places a fault on a node just before the next request
//! reaches it (where it has the same effect as at any earlier moment), and
//! forgets what can no longer matter (replies nobody waits for, the names
//! on orphaned keys).
//!
//! A node answers a commit with `scripts::answer` (the rule
//! `tests/conformance.rs` checks the scripts against) and the client reads
//! the reply with `reply::counts` (`src/node/reply.rs`); the token proposal
//! is `fence::propose`, the client's own. The negative controls run the old
//! rule ("counter >= T counts"), a restart that loses the counter and
//! starts it again from 0 ([`Missing::Zero`]) or from a clock set back
//! ([`Missing::ClockSetBack`]), a restart that brings it back older with
//! an acquire reading it as stored ([`Missing::ClockIfMissing`]), and
//! fences taken from `INCR` replies without a commit ([`Rule::IncrMax`],
//! the leader-election control of [`crate::election`]).

use std::fmt;

use crate::fences::{Broken, Fences};
use crate::search::Model;
use crate::symmetry::{client_orders, push_nodes};
use crate::{client_name, fence, node_name, reply, scripts};

const NODES: usize = 3;
const QUORUM: u8 = 2;

/// How a node answers a fence commit where the token is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Counts only when it raises the counter from below T (the fix).
    RaiseFromBelow,
    /// Counts whenever the counter ends up `>= T` (the old script).
    AtLeast,
    /// No commit at all: the `SET NX` also `INCR`s the counter where it
    /// sets the key, and the client takes the largest reply of the
    /// majority that granted it as its fence (an epoch scheme without a
    /// commit phase; negative control).
    IncrMax,
    /// A semaphore's permits: the fence is `round × L + slot` (the
    /// holder's first slot), and a node counts a commit once per slot and
    /// round (`scripts::commit_permit`, the fix for permits).
    Rounds,
    /// [`Rule::Rounds`] without the slots of the round: a commit of the
    /// counter's round always counts (negative control).
    RoundsAnySlot,
}

impl Rule {
    /// Whether fences are `round × L + slot` (a semaphore's rules).
    pub fn rounds(self) -> bool {
        matches!(self, Rule::Rounds | Rule::RoundsAnySlot)
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Config {
    pub clients: u8,
    /// Attempts per client (a failed or finished attempt starts the next).
    pub attempts: u8,
    /// Extensions per held lock.
    pub extends: u8,
    pub early_expiries: u8,
    pub restarts: u8,
    /// What a restart leaves of a node's counter.
    pub persistence: Persistence,
    /// What a missing counter, or one below the clock, reads as.
    pub missing: Missing,
    pub rule: Rule,
    /// Check (b), mutual exclusion: promised only without early expiry
    /// and restarts (set with faults only in a negative control).
    pub exclusion: bool,
}

/// What a restart leaves of a node's fencing counter (its keys are lost).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Persistence {
    /// Kept: AOF with `appendfsync always`.
    Aof,
    /// Lost: no persistence.
    Off,
    /// Brought back older, as it was before its last change: a restart
    /// from a snapshot taken before that change (RDB, or a replica's full
    /// sync), `appendfsync everysec` losing its last second.
    Snapshot,
}

/// What a missing counter (never set, or lost in a restart) reads as, and
/// whether an acquire reads a counter below the clock as the clock; an
/// acquire that sets its key stores what it read (`scripts::answer_at`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missing {
    /// 0: the counter before it started from the time (negative control
    /// once a restart loses it).
    Zero,
    /// The clock (the fix), which keeps up with the counters: at least
    /// every counter stored and fence proposed, one more at each read of
    /// a missing counter. An acquire reads a counter never below it.
    Clock,
    /// [`Missing::Clock`] for a missing counter only: an acquire reads a
    /// counter that is there as it is, even below the clock (the rule
    /// before; negative control once a counter comes back older).
    ClockIfMissing,
    /// [`Missing::Clock`], set back to 0 by a restart that loses a
    /// counter: a host whose clock is reset at boot, or counters that
    /// outgrew the clock (negative control).
    ClockSetBack,
}

/// A lock attempt's token: (client, attempt).
type Token = (u8, u8);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Key {
    token: Token,
    /// Extension generation the key's TTL comes from.
    gen: u8,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
struct Node {
    key: Option<Key>,
    /// 0 when missing: no script stores 0.
    counter: u8,
    /// The counter before its last change, which a restart brings back
    /// under [`Persistence::Snapshot`] (0 otherwise).
    previous: u8,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Phase {
    Idle,
    /// `floor`: under [`Rule::IncrMax`] only, the largest fence granted
    /// before the attempt began (0 otherwise).
    Acquiring {
        yes: u8,
        no: u8,
        max: u8,
        floor: u8,
    },
    /// `floor`: the largest fence granted before this commit began.
    Committing {
        fence: u8,
        floor: u8,
        yes: u8,
        no: u8,
    },
    Holding {
        fence: u8,
        gen: u8,
    },
    Extending {
        fence: u8,
        gen: u8,
        yes: u8,
        no: u8,
    },
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Client {
    attempt: u8,
    extends_left: u8,
    phase: Phase,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Msg {
    Set {
        token: Token,
        node: u8,
    },
    Commit {
        token: Token,
        node: u8,
        fence: u8,
    },
    Extend {
        token: Token,
        node: u8,
        gen: u8,
    },
    SetReply {
        token: Token,
        node: u8,
        counter: Option<u8>,
    },
    CommitReply {
        token: Token,
        node: u8,
        ok: bool,
    },
    ExtendReply {
        token: Token,
        node: u8,
        gen: u8,
        ok: bool,
    },
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
    /// The clock a missing counter reads ([`Missing`]).
    clock: u8,
}

/// What happens to a node just before a request is delivered to it. A
/// node's state only matters when a request meets it, so a fault placed
/// there stands for the same fault at any earlier moment since the node's
/// previous request: nothing is lost by not interleaving faults elsewhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Before {
    Nothing,
    /// The key's holder no longer counts on it: it expires by its TTL.
    Expire,
    /// The key expires while its holder may still be inside validity.
    EarlyExpiry,
    /// The node crash-restarts.
    Restart,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Start(u8),
    Deliver(Msg, Before),
    GiveUp(u8),
    Extend(u8),
    /// The holder releases, or its validity ends: either way it stops
    /// counting on its keys, which may then vanish at any moment (a release
    /// delivered, or the TTL), or stay a while.
    Release(u8),
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (c, n) = (client_name, node_name);
        match *self {
            Action::Start(i) => write!(f, "{} starts an attempt: SET NX to x, y, z", c(i)),
            Action::Deliver(m, before) => {
                match before {
                    Before::Nothing => {}
                    Before::Expire => write!(f, "the key there expires; then ")?,
                    Before::EarlyExpiry => {
                        write!(f, "the key there expires EARLY (clock jump); then ")?
                    }
                    Before::Restart => write!(f, "the node restarts; then ")?,
                }
                match m {
                    Msg::Set { token, node } => {
                        write!(f, "{}'s SET runs on {}", c(token.0), n(node))
                    }
                    Msg::Commit { token, node, fence } => {
                        write!(f, "{}'s commit of {fence} runs on {}", c(token.0), n(node))
                    }
                    Msg::Extend { token, node, .. } => {
                        write!(f, "{}'s extend runs on {}", c(token.0), n(node))
                    }
                    Msg::SetReply {
                        token,
                        node,
                        counter,
                    } => match counter {
                        Some(k) => {
                            write!(f, "{} gets yes from {} (counter {k})", c(token.0), n(node))
                        }
                        None => write!(f, "{} gets no from {}", c(token.0), n(node)),
                    },
                    Msg::CommitReply { token, node, ok } => {
                        write!(f, "{} gets commit {} from {}", c(token.0), yn(ok), n(node))
                    }
                    Msg::ExtendReply {
                        token, node, ok, ..
                    } => {
                        write!(f, "{} gets extend {} from {}", c(token.0), yn(ok), n(node))
                    }
                }
            }
            Action::GiveUp(i) => write!(f, "{} gives up its attempt (releases)", c(i)),
            Action::Extend(i) => write!(f, "{} sends extends", c(i)),
            Action::Release(i) => write!(f, "{} releases (or its validity ends)", c(i)),
        }
    }
}

fn yn(ok: bool) -> &'static str {
    if ok {
        "yes"
    } else {
        "no"
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    Fence(Broken),
    TwoHolders,
}

impl Msg {
    /// The node a request goes to; `None` for a reply.
    fn request_node(&self) -> Option<u8> {
        match *self {
            Msg::Set { node, .. } | Msg::Commit { node, .. } | Msg::Extend { node, .. } => {
                Some(node)
            }
            _ => None,
        }
    }
}

impl State {
    fn initial(cfg: &Config) -> Self {
        State {
            nodes: [Node::default(); NODES],
            clients: vec![
                Client {
                    attempt: 0,
                    extends_left: cfg.extends,
                    phase: Phase::Idle,
                };
                usize::from(cfg.clients)
            ],
            msgs: Vec::new(),
            fences: Fences::default(),
            early_left: cfg.early_expiries,
            restarts_left: cfg.restarts,
            clock: 0,
        }
    }

    fn token(&self, c: u8) -> Token {
        (c, self.clients[usize::from(c)].attempt)
    }

    fn send_all(&mut self, make: impl Fn(u8) -> Msg) {
        for n in 0..NODES as u8 {
            self.msgs.push(make(n));
        }
    }

    /// Whether client `c`'s validity still rests on a key of `token` and
    /// generation `gen`: such a key cannot expire by its TTL.
    fn protects(&self, key: Key) -> bool {
        let (c, a) = key.token;
        if key.token == ORPHAN {
            return false;
        }
        let client = &self.clients[usize::from(c)];
        if client.attempt != a {
            return false;
        }
        match client.phase {
            Phase::Acquiring { .. } | Phase::Committing { .. } => true,
            Phase::Holding { gen, .. } | Phase::Extending { gen, .. } => key.gen >= gen,
            Phase::Idle | Phase::Done => false,
        }
    }

    fn holders(&self) -> usize {
        self.clients
            .iter()
            .filter(|c| matches!(c.phase, Phase::Holding { .. } | Phase::Extending { .. }))
            .count()
    }

    /// Ends client `c`'s attempt: it no longer counts on its keys.
    fn end_attempt(&mut self, c: u8, cfg: &Config) {
        let client = &mut self.clients[usize::from(c)];
        if client.attempt + 1 < cfg.attempts {
            client.attempt += 1;
            client.extends_left = cfg.extends;
            client.phase = Phase::Idle;
        } else {
            client.phase = Phase::Done;
        }
    }

    fn actions(&self, cfg: &Config) -> Vec<Action> {
        let mut out = Vec::new();
        for (i, client) in self.clients.iter().enumerate() {
            let i = i as u8;
            match client.phase {
                Phase::Idle => out.push(Action::Start(i)),
                Phase::Acquiring { .. } | Phase::Committing { .. } => out.push(Action::GiveUp(i)),
                Phase::Holding { .. } => {
                    if client.extends_left > 0 {
                        out.push(Action::Extend(i));
                    }
                    out.push(Action::Release(i));
                }
                Phase::Extending { .. } => out.push(Action::Release(i)),
                Phase::Done => {}
            }
        }
        let mut last = None;
        for &m in &self.msgs {
            if last == Some(m) {
                continue;
            }
            last = Some(m);
            out.push(Action::Deliver(m, Before::Nothing));
            let Some(k) = m.request_node() else {
                continue;
            };
            let node = self.nodes[usize::from(k)];
            if let Some(key) = node.key {
                if !self.protects(key) {
                    out.push(Action::Deliver(m, Before::Expire));
                } else if self.early_left > 0 {
                    out.push(Action::Deliver(m, Before::EarlyExpiry));
                }
            }
            let restart_changes = node.key.is_some()
                || match cfg.persistence {
                    Persistence::Aof => false,
                    Persistence::Off => node.counter > 0,
                    Persistence::Snapshot => node.previous != node.counter,
                };
            if self.restarts_left > 0 && restart_changes {
                out.push(Action::Deliver(m, Before::Restart));
            }
        }
        out
    }

    fn apply(&self, action: Action, cfg: &Config) -> Result<State, Violation> {
        let mut s = self.clone();
        match action {
            Action::Start(c) => {
                let token = s.token(c);
                s.send_all(|node| Msg::Set { token, node });
                s.clients[usize::from(c)].phase = Phase::Acquiring {
                    yes: 0,
                    no: 0,
                    max: 0,
                    floor: match cfg.rule {
                        Rule::IncrMax => s.fences.floor(),
                        _ => 0,
                    },
                };
            }
            Action::GiveUp(c) | Action::Release(c) => s.end_attempt(c, cfg),
            Action::Extend(c) => {
                let token = s.token(c);
                let client = &mut s.clients[usize::from(c)];
                let Phase::Holding { fence, gen } = client.phase else {
                    unreachable!("extend from {:?}", client.phase)
                };
                client.extends_left -= 1;
                client.phase = Phase::Extending {
                    fence,
                    gen,
                    yes: 0,
                    no: 0,
                };
                let next = gen + 1;
                s.send_all(|node| Msg::Extend {
                    token,
                    node,
                    gen: next,
                });
            }
            Action::Deliver(m, before) => {
                if let Some(k) = m.request_node() {
                    let node = &mut s.nodes[usize::from(k)];
                    match before {
                        Before::Nothing => {}
                        Before::Expire => node.key = None,
                        Before::EarlyExpiry => {
                            node.key = None;
                            s.early_left -= 1;
                        }
                        Before::Restart => {
                            node.key = None;
                            match cfg.persistence {
                                Persistence::Aof => {}
                                Persistence::Off => {
                                    node.counter = 0;
                                    if cfg.missing == Missing::ClockSetBack {
                                        s.clock = 0;
                                    }
                                }
                                Persistence::Snapshot => node.counter = node.previous,
                            }
                            s.restarts_left -= 1;
                        }
                    }
                }
                let at = s.msgs.iter().position(|x| *x == m).expect("in flight");
                s.msgs.remove(at);
                s.deliver(m, cfg)?;
            }
        }
        s.prune();
        s.msgs.sort_unstable();
        if cfg.exclusion && s.holders() > 1 {
            return Err(Violation::TwoHolders);
        }
        Ok(s)
    }

    fn deliver(&mut self, m: Msg, cfg: &Config) -> Result<(), Violation> {
        match m {
            Msg::Set { token, node } => {
                // The acquire script reads the counter; it keeps what it
                // read only where the key is free.
                let free = self.nodes[usize::from(node)].key.is_none();
                let now = if free { self.tick(node, cfg) } else { 0 };
                let n = &mut self.nodes[usize::from(node)];
                let counter = if cfg.rule == Rule::IncrMax {
                    n.key.is_none().then(|| {
                        n.key = Some(Key { token, gen: 0 });
                        n.counter += 1;
                        n.counter
                    })
                } else {
                    let key = n.key.map(|k| scripts::Key {
                        token: k.token,
                        life: (),
                    });
                    let command = scripts::Command::Acquire { token, life: () };
                    let (answer, _, after) =
                        scripts::answer_at(key, n.stored(cfg), now.into(), command);
                    let set = answer >= 0;
                    if set {
                        n.key = Some(Key { token, gen: 0 });
                    }
                    n.store(after.map_or(0, small), cfg);
                    set.then(|| small(u64::try_from(answer).expect("a counter")))
                };
                self.msgs.push(Msg::SetReply {
                    token,
                    node,
                    counter,
                });
            }
            Msg::Commit { token, node, fence } => {
                let held = self.nodes[usize::from(node)]
                    .key
                    .is_some_and(|k| k.token == token);
                // The commit script reads the counter only where held.
                let now = if held { self.tick(node, cfg) } else { 0 };
                let n = &mut self.nodes[usize::from(node)];
                let ok = held
                    && match cfg.rule {
                        Rule::RaiseFromBelow => {
                            let key = Some(scripts::Key { token, life: () });
                            let command = scripts::Command::Commit {
                                token,
                                fence: fence.into(),
                            };
                            let (answer, _, after) =
                                scripts::answer_at(key, n.stored(cfg), now.into(), command);
                            n.store(after.map_or(0, small), cfg);
                            reply::counts(reply::Kind::Commit, answer) == Some(true)
                        }
                        Rule::AtLeast => {
                            n.counter = n.counter.max(fence);
                            true
                        }
                        Rule::IncrMax => unreachable!("no commit under IncrMax"),
                        Rule::Rounds | Rule::RoundsAnySlot => unreachable!("a semaphore's rule"),
                    };
                self.msgs.push(Msg::CommitReply { token, node, ok });
            }
            Msg::Extend { token, node, gen } => {
                let n = &mut self.nodes[usize::from(node)];
                let ok = match &mut n.key {
                    Some(k) if k.token == token => {
                        k.gen = k.gen.max(gen);
                        true
                    }
                    _ => false,
                };
                self.msgs.push(Msg::ExtendReply {
                    token,
                    node,
                    gen,
                    ok,
                });
            }
            Msg::SetReply { token, counter, .. } => {
                let c = token.0;
                let Phase::Acquiring {
                    yes,
                    no,
                    max,
                    floor,
                } = self.clients[usize::from(c)].phase
                else {
                    return Ok(());
                };
                let (yes, no, max) = match counter {
                    Some(k) => (yes + 1, no, max.max(k)),
                    None => (yes, no + 1, max),
                };
                if yes >= QUORUM && cfg.rule == Rule::IncrMax {
                    // The largest INCR reply is the fence: no commit.
                    self.fences.grant(max, floor).map_err(Violation::Fence)?;
                    self.clients[usize::from(c)].phase = Phase::Holding { fence: max, gen: 0 };
                } else if yes >= QUORUM {
                    let fence =
                        u8::try_from(fence::propose([u64::from(max)], 0, 1).expect("small"))
                            .expect("small");
                    let floor = self.fences.floor();
                    if cfg.missing != Missing::Zero {
                        self.clock = self.clock.max(fence);
                    }
                    self.send_all(|node| Msg::Commit { token, node, fence });
                    self.clients[usize::from(c)].phase = Phase::Committing {
                        fence,
                        floor,
                        yes: 0,
                        no: 0,
                    };
                } else if no > NODES as u8 - QUORUM {
                    self.end_attempt(c, cfg);
                } else {
                    self.clients[usize::from(c)].phase = Phase::Acquiring {
                        yes,
                        no,
                        max,
                        floor,
                    };
                }
            }
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
                    self.clients[usize::from(c)].phase = Phase::Holding { fence, gen: 0 };
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
            Msg::ExtendReply { token, ok, gen, .. } => {
                let c = token.0;
                let Phase::Extending {
                    fence,
                    gen: old,
                    yes,
                    no,
                } = self.clients[usize::from(c)].phase
                else {
                    return Ok(());
                };
                debug_assert_eq!(gen, old + 1);
                let (yes, no) = if ok { (yes + 1, no) } else { (yes, no + 1) };
                if yes >= QUORUM {
                    self.clients[usize::from(c)].phase = Phase::Holding { fence, gen };
                } else if no > NODES as u8 - QUORUM {
                    // Lost: the holder stops (and releases what is left).
                    self.end_attempt(c, cfg);
                } else {
                    self.clients[usize::from(c)].phase = Phase::Extending {
                        fence,
                        gen: old,
                        yes,
                        no,
                    };
                }
            }
        }
        Ok(())
    }

    /// Drops what can no longer make a difference, so that states that
    /// differ only in it are one state: replies nobody waits for (they
    /// would be ignored); extends of an attempt that is over (they only
    /// touch keys nobody counts on); and, for an attempt that is over with
    /// no commit of it in flight, its requests still in flight and the
    /// names on its keys. Such a key is only an orphan that blocks a node
    /// until it expires (any time: the lazy `Expire`), and such a late
    /// `SET` only makes another client's `SET` meet one — which the model
    /// covers by delaying that `SET` instead.
    fn prune(&mut self) {
        let clients = &self.clients;
        let current = |token: Token| {
            token != ORPHAN && {
                let client = &clients[usize::from(token.0)];
                client.attempt == token.1 && !matches!(client.phase, Phase::Idle | Phase::Done)
            }
        };
        let committing: Vec<Token> = self
            .msgs
            .iter()
            .filter_map(|m| match *m {
                Msg::Commit { token, .. } => Some(token),
                _ => None,
            })
            .collect();
        let forgotten = |token: Token| !current(token) && !committing.contains(&token);
        self.msgs.retain(|m| {
            let waiting = |token: Token, want: fn(&Phase) -> bool| {
                let client = &clients[usize::from(token.0)];
                client.attempt == token.1 && want(&client.phase)
            };
            match *m {
                Msg::SetReply { token, .. } => {
                    waiting(token, |p| matches!(p, Phase::Acquiring { .. }))
                }
                Msg::CommitReply { token, .. } => {
                    waiting(token, |p| matches!(p, Phase::Committing { .. }))
                }
                Msg::ExtendReply { token, .. } => {
                    waiting(token, |p| matches!(p, Phase::Extending { .. }))
                }
                Msg::Extend { token, .. } => current(token),
                Msg::Set { token, .. } => !forgotten(token),
                Msg::Commit { .. } => true,
            }
        });
        for node in &mut self.nodes {
            if let Some(key) = &mut node.key {
                if !current(key.token) {
                    key.gen = 0;
                    if forgotten(key.token) {
                        key.token = ORPHAN;
                    }
                }
            }
        }
    }
}

impl Node {
    /// The counter as the scripts find it: missing (`None`) when 0, but
    /// under [`Missing::Zero`] a counter at 0.
    fn stored(&self, cfg: &Config) -> Option<u64> {
        (self.counter > 0 || cfg.missing == Missing::Zero).then_some(self.counter.into())
    }

    /// Sets the counter, keeping the one before under
    /// [`Persistence::Snapshot`].
    fn store(&mut self, counter: u8, cfg: &Config) {
        if cfg.persistence == Persistence::Snapshot && counter != self.counter {
            self.previous = self.counter;
        }
        self.counter = counter;
    }
}

impl State {
    /// The clock as a script on `node` reads it: one more when that node's
    /// counter is missing (the clock moves on between such reads); under
    /// [`Missing::ClockIfMissing`], 0 where the counter is there (the
    /// script read no time).
    fn tick(&mut self, node: u8, cfg: &Config) -> u8 {
        let stored = self.nodes[usize::from(node)].stored(cfg).is_some();
        if !stored {
            self.clock += 1;
        }
        match cfg.missing {
            Missing::ClockIfMissing if stored => 0,
            _ => self.clock,
        }
    }
}

/// A counter or fence of the model, which stays below 64 (the record of
/// fences handed out is a bitmap).
fn small(n: u64) -> u8 {
    u8::try_from(n).ok().filter(|&n| n < 64).expect("below 64")
}

impl Msg {
    fn node(self) -> u8 {
        match self {
            Msg::Set { node, .. }
            | Msg::Commit { node, .. }
            | Msg::Extend { node, .. }
            | Msg::SetReply { node, .. }
            | Msg::CommitReply { node, .. }
            | Msg::ExtendReply { node, .. } => node,
        }
    }

    /// The message without the node it travels to or from.
    fn encode(self) -> [u8; 4] {
        match self {
            Msg::Set { token, .. } => [0, token.0, token.1, 0],
            Msg::Commit { token, fence, .. } => [1, token.0, token.1, fence],
            Msg::Extend { token, gen, .. } => [2, token.0, token.1, gen],
            Msg::SetReply { token, counter, .. } => {
                [3, token.0, token.1, counter.map_or(0xff, |k| k)]
            }
            Msg::CommitReply { token, ok, .. } => [4, token.0, token.1, u8::from(ok)],
            Msg::ExtendReply { token, gen, ok, .. } => {
                [5, token.0, token.1, gen * 2 + u8::from(ok)]
            }
        }
    }
}

impl Phase {
    fn encode(self) -> [u8; 5] {
        match self {
            Phase::Idle => [0; 5],
            Phase::Acquiring {
                yes,
                no,
                max,
                floor,
            } => [1, yes, no, max, floor],
            Phase::Committing {
                fence,
                floor,
                yes,
                no,
            } => [2, fence, floor, yes, no],
            Phase::Holding { fence, gen } => [3, fence, gen, 0, 0],
            Phase::Extending {
                fence,
                gen,
                yes,
                no,
            } => [4, fence, gen, yes, no],
            Phase::Done => [5, 0, 0, 0, 0],
        }
    }
}

/// The token of a key nobody can commit on any more: which attempt left
/// it does not matter.
const ORPHAN: Token = (0xff, 0);

impl State {
    /// The state as bytes, the same for states that differ only by how the
    /// nodes and the clients are named: everything about a node — its key,
    /// its counter, the messages to and from it — forms its signature, and
    /// the signatures are listed in sorted order; of the client renamings,
    /// the smallest result is kept.
    fn canonical(&self) -> Vec<u8> {
        let clients = self.clients.len();
        let mut best: Vec<u8> = Vec::new();
        // Clients have the same budget: they are interchangeable, like nodes.
        for order in client_orders(clients, |_| true) {
            let rename = |t: Token| {
                if t == ORPHAN {
                    t
                } else {
                    (order[usize::from(t.0)], t.1)
                }
            };
            let mut out = Vec::with_capacity(64 + 4 * self.msgs.len());
            let mut renamed = [[0u8; 7]; 3];
            for (i, c) in self.clients.iter().enumerate() {
                let p = c.phase.encode();
                renamed[usize::from(order[i])] =
                    [c.attempt, c.extends_left, p[0], p[1], p[2], p[3], p[4]];
            }
            out.extend(renamed[..clients].iter().flatten());
            out.extend(self.fences.encode());
            out.extend([self.early_left, self.restarts_left, self.clock]);
            let mut signatures: [Vec<[u8; 4]>; NODES] = Default::default();
            for (i, n) in self.nodes.iter().enumerate() {
                signatures[i].push(match n.key {
                    None => [0xfe, 0xff, 0xff, n.counter],
                    Some(k) => {
                        let t = rename(k.token);
                        [t.0, t.1, k.gen, n.counter]
                    }
                });
                // Only under Persistence::Snapshot: one entry more, never
                // a message's (their first byte is below 6).
                if n.previous > 0 {
                    signatures[i].push([0xfd, n.previous, 0, 0]);
                }
            }
            for m in &self.msgs {
                let mut e = m.encode();
                e[1] = rename((e[1], e[2])).0;
                signatures[usize::from(m.node())].push(e);
            }
            push_nodes(&mut out, &mut signatures);
            if best.is_empty() || out < best {
                best = out;
            }
        }
        best
    }
}

/// The fencing model with one configuration.
#[derive(Debug, Clone, Copy)]
pub struct Fencing(pub Config);

/// Keys of this model carry no TTL.
impl scripts::Later for () {
    fn later(self, (): ()) {}
}

impl Model for Fencing {
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
        state.canonical()
    }
}

/// The smallest configuration: two clients, one attempt and one extension
/// each, no fault; the others change it.
pub const BASE: Config = Config {
    clients: 2,
    attempts: 1,
    extends: 1,
    early_expiries: 0,
    restarts: 0,
    persistence: Persistence::Aof,
    missing: Missing::Zero,
    rule: Rule::RaiseFromBelow,
    exclusion: true,
};
