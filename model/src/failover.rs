//! One member that fails over — a Sentinel group: a master and its
//! replicas — under the rule of durable votes (`docs/members.md`, "Why
//! every replica"): after the lock script's yes on the master, the client
//! sends `WAIT required` on the same connection, and the member's yes
//! counts only when `required` replicas acknowledged the write.
//!
//! Servers: a master and `replicas` replicas at first. A master runs the
//! lock scripts (`scripts::answer`: `SET NX`, compare-and-delete) and
//! appends what they change to one ordered stream per replica that follows
//! it; a replica applies the stream in a later step, one write at a time,
//! and acknowledges a write once applied (`WAIT` counts the replicas that
//! follow that master now and applied up to the write). A replica is read
//! only: a lock command sent to it is refused (`READONLY`).
//!
//! The sentinels: a failover promotes one replica of the master they name
//! (it stops following and becomes a master; what it had not applied is
//! lost) and names it. Nothing else changes at once: every other server —
//! a replica still following the old master, or the old master itself,
//! deposed but still a master that accepts writes — is re-pointed to the
//! new master in a step of its own, which may never come (a partition).
//! Re-pointed, a server resyncs: its key becomes the new master's, and a
//! demoted master unblocks the `WAIT`s on it (they fall short).
//!
//! Clients: each holds a connection to the server it was told is the
//! master, and asks the sentinels again only between attempts — the
//! current view, or (with `stale_sentinels`) a master they named before
//! and deposed (a sentinel partitioned with it still names it). An attempt
//! runs `SET NX` there, then waits; granted, it holds until it releases
//! (compare-and-delete on that same server) or stops without releasing. A
//! `SET NX` that is refused changes nothing but the attempts left, so it
//! is not a step. A `WAIT` may fall short whenever it has not succeeded
//! (its timeout).
//!
//! Time is abstract: a key may expire, on each server by its own clock,
//! once the attempt that set it is over (the clocks of one group agree
//! within the drift, which the holder's validity leaves out: no key of a
//! waiting or holding attempt expires).
//!
//! The property: **never two clients holding at once**. With `WAIT` for
//! every replica it holds through any number of failovers, whichever
//! replica is promoted; the negative controls drop the wait ([`Required::Fixed`]
//! 0, with or without the restart quarantine on a promoted replica), wait
//! for one replica fewer, or for the replicas a connection reads online.
//! One more control shows what the rule leans on in the server: a `WAIT`
//! that a demotion leaves blocked (Redis unblocks it with an error) is
//! acknowledged, after a second failover promotes its server again, by
//! replicas of a history that lost its write.
//! Left out: a replica that restarts empty between acknowledging and being
//! promoted, and a promotion of a server that is not a replica of the
//! master — the rule's assumptions.

use std::fmt;

use crate::client_name;
use crate::reply::{counts, Kind};
use crate::scripts::{answer, Command, Held};
use crate::search::Model;

/// What a server holds for the lock: the key and the attempt (its owner:
/// client × attempts + attempt) whose token it carries. No TTL: a key
/// lasts until its attempt is over (see the module's docs).
type Value = Held<u8, ()>;

/// How many replicas a vote waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Required {
    /// The rule: every replica the master had when the client was built.
    Every,
    /// Wrong below the replicas: a fixed count.
    Fixed(u8),
    /// Wrong: the replicas following the master when the client connected
    /// to it (`INFO replication` on a new connection).
    Online,
}

/// Which replica the sentinels may promote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Promotion {
    /// Any replica of the master.
    Any,
    /// One with the largest offset among the master's replicas (the
    /// sentinels' preference).
    MostAdvanced,
}

/// One configuration.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// The master's replicas at first (1 or 2).
    pub replicas: u8,
    /// Clients (at most 3).
    pub clients: u8,
    /// Attempts per client.
    pub attempts: u8,
    /// Failovers in a run.
    pub failovers: u8,
    /// What a vote waits for.
    pub required: Required,
    /// Which replica a failover promotes.
    pub promotion: Promotion,
    /// Whether a client may be told of a master the sentinels deposed.
    pub stale_sentinels: bool,
    /// Whether a promoted replica sits out (refuses every `SET NX`) until
    /// every attempt live when it was promoted is over: the restart
    /// quarantine, for a server promoted since it was read.
    pub quarantine: bool,
    /// Whether a demoted master unblocks the `WAIT`s on it with an error
    /// (Redis's `-UNBLOCKED … instance state changed`), which the client
    /// reads as falling short. Off: they stay blocked across the resync.
    pub demotion_unblocks: bool,
}

/// The rule: two replicas, two clients of two attempts each, two
/// failovers, any replica promoted, stale sentinels, a demotion unblocking
/// its `WAIT`s.
pub const BASE: Config = Config {
    replicas: 2,
    clients: 2,
    attempts: 2,
    failovers: 2,
    required: Required::Every,
    promotion: Promotion::Any,
    stale_sentinels: true,
    quarantine: false,
    demotion_unblocks: true,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Role {
    Master,
    /// Follows this server.
    Replica(u8),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Server {
    role: Role,
    value: Value,
    /// Writes applied (a master's: written) in its current history.
    offset: u8,
    /// A replica's: its master's writes not yet applied, oldest first.
    stream: Vec<Value>,
    /// A promoted master's quarantine: the attempts (owner bits) it waits
    /// out.
    quarantine: u16,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Phase {
    Idle,
    /// The `SET NX` was applied on `server` as its write number `offset`;
    /// the `WAIT` runs.
    Waiting {
        server: u8,
        offset: u8,
    },
    Holding,
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Client {
    /// The server it is connected to as the master.
    view: u8,
    /// The replicas its votes wait for.
    required: u8,
    attempt: u8,
    phase: Phase,
}

/// Every server and client, and the sentinels' view.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct State {
    servers: Vec<Server>,
    clients: Vec<Client>,
    /// The master the sentinels name.
    master: u8,
    /// Every server they named master (bits).
    named: u8,
    failovers_left: u8,
}

/// One step.
#[derive(Debug, Clone, Copy)]
pub enum Action {
    /// A client asks the sentinels and connects to the master named.
    Reconnect {
        /// The client.
        client: u8,
        /// The server named.
        to: u8,
    },
    /// A client's `SET NX` is applied on its server.
    Acquire(u8),
    /// A client's `WAIT` returns with enough acknowledgements: it holds.
    Granted(u8),
    /// A client's `WAIT` falls short (its timeout): the attempt ends.
    FallsShort(u8),
    /// A holder's compare-and-delete runs on its server.
    Release(u8),
    /// A holder stops without releasing.
    Lapse(u8),
    /// A replica applies the next write of its stream.
    Replicate(u8),
    /// A server's key of an attempt that is over expires.
    Expire(u8),
    /// The sentinels promote a replica of their master.
    Promote(u8),
    /// A server follows the sentinels' master and resyncs (a deposed
    /// master is demoted).
    Repoint(u8),
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = client_name;
        match *self {
            Action::Reconnect { client, to } => {
                write!(f, "{} asks the sentinels: connects to S{to}", c(client))
            }
            Action::Acquire(i) => write!(f, "{}'s SET NX is applied on its server", c(i)),
            Action::Granted(i) => write!(f, "{}'s WAIT is acknowledged: it holds", c(i)),
            Action::FallsShort(i) => write!(f, "{}'s WAIT falls short", c(i)),
            Action::Release(i) => write!(f, "{} releases on its server", c(i)),
            Action::Lapse(i) => write!(f, "{} stops without releasing", c(i)),
            Action::Replicate(s) => write!(f, "S{s} applies the next write of its master"),
            Action::Expire(s) => write!(f, "the key on S{s} expires"),
            Action::Promote(s) => write!(f, "the sentinels promote S{s}"),
            Action::Repoint(s) => write!(f, "S{s} follows the new master and resyncs"),
        }
    }
}

/// The property broken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Violation {
    /// Two clients hold the lock at once.
    TwoHolders,
}

/// The model of one configuration.
#[derive(Debug, Clone, Copy)]
pub struct Failover(pub Config);

impl Failover {
    fn owner(&self, client: u8, attempt: u8) -> u8 {
        client * self.0.attempts + attempt
    }

    /// The attempts waiting or holding (owner bits).
    fn live(&self, state: &State) -> u16 {
        state
            .clients
            .iter()
            .zip(0..)
            .filter(|(c, _)| matches!(c.phase, Phase::Waiting { .. } | Phase::Holding))
            .fold(0, |acc, (c, i)| acc | 1 << self.owner(i, c.attempt))
    }

    /// The servers following `master`.
    fn followers(state: &State, master: u8) -> impl Iterator<Item = &Server> {
        state
            .servers
            .iter()
            .filter(move |s| s.role == Role::Replica(master))
    }

    fn required(&self, state: &State, view: u8) -> u8 {
        match self.0.required {
            Required::Every => self.0.replicas,
            Required::Fixed(k) => k,
            Required::Online => {
                u8::try_from(Self::followers(state, view).count()).expect("few servers")
            }
        }
    }

    /// `server` writes `value`: its offset moves, and the write joins the
    /// stream of every replica following it.
    fn write(state: &mut State, server: u8, value: Value) {
        let master = &mut state.servers[usize::from(server)];
        master.value = value;
        master.offset += 1;
        for s in &mut state.servers {
            if s.role == Role::Replica(server) {
                s.stream.push(value);
            }
        }
    }

    fn end_attempt(&self, client: &mut Client) {
        client.attempt += 1;
        client.phase = if client.attempt == self.0.attempts {
            Phase::Done
        } else {
            Phase::Idle
        };
    }
}

impl Model for Failover {
    type State = State;
    type Key = State;
    type Action = Action;
    type Violation = Violation;

    fn initial(&self) -> State {
        let server = |role| Server {
            role,
            value: Value::default(),
            offset: 0,
            stream: Vec::new(),
            quarantine: 0,
        };
        let mut servers = vec![server(Role::Master)];
        servers.extend((0..self.0.replicas).map(|_| server(Role::Replica(0))));
        let mut state = State {
            servers,
            clients: Vec::new(),
            master: 0,
            named: 1,
            failovers_left: self.0.failovers,
        };
        let client = Client {
            view: 0,
            required: self.required(&state, 0),
            attempt: 0,
            phase: Phase::Idle,
        };
        state.clients = vec![client; usize::from(self.0.clients)];
        state
    }

    fn actions(&self, state: &State) -> Vec<Action> {
        let mut actions = Vec::new();
        let live = self.live(state);
        for (client, i) in state.clients.iter().zip(0..) {
            match client.phase {
                Phase::Idle => {
                    for to in 0..u8::try_from(state.servers.len()).expect("few servers") {
                        let named = if self.0.stale_sentinels {
                            state.named & 1 << to != 0
                        } else {
                            to == state.master
                        };
                        if named && to != client.view {
                            actions.push(Action::Reconnect { client: i, to });
                        }
                    }
                    let server = &state.servers[usize::from(client.view)];
                    if server.role == Role::Master
                        && server.value.key.is_none()
                        && server.quarantine & live == 0
                    {
                        actions.push(Action::Acquire(i));
                    }
                }
                Phase::Waiting { server, offset } => {
                    let acks = Self::followers(state, server)
                        .filter(|s| s.offset >= offset)
                        .count();
                    if acks >= usize::from(client.required) {
                        actions.push(Action::Granted(i));
                    }
                    actions.push(Action::FallsShort(i));
                }
                Phase::Holding => {
                    actions.push(Action::Release(i));
                    actions.push(Action::Lapse(i));
                }
                Phase::Done => {}
            }
        }
        let max_offset = Self::followers(state, state.master).map(|s| s.offset).max();
        for (server, s) in state.servers.iter().zip(0..) {
            if !server.stream.is_empty() {
                actions.push(Action::Replicate(s));
            }
            if server
                .value
                .key
                .is_some_and(|key| live & 1 << key.token == 0)
            {
                actions.push(Action::Expire(s));
            }
            if server.role == Role::Replica(state.master) {
                if state.failovers_left > 0
                    && (self.0.promotion == Promotion::Any || Some(server.offset) == max_offset)
                {
                    actions.push(Action::Promote(s));
                }
            } else if s != state.master {
                actions.push(Action::Repoint(s));
            }
        }
        actions
    }

    fn apply(&self, state: &State, action: Action) -> Result<State, Violation> {
        let mut next = state.clone();
        match action {
            Action::Reconnect { client, to } => {
                let required = self.required(state, to);
                let c = &mut next.clients[usize::from(client)];
                c.view = to;
                c.required = required;
            }
            Action::Acquire(i) => {
                let c = next.clients[usize::from(i)];
                let server = c.view;
                let token = self.owner(i, c.attempt);
                let (n, value) = answer(
                    next.servers[usize::from(server)].value,
                    Command::Acquire { token, life: () },
                );
                debug_assert_eq!(counts(Kind::AcquireFenced, n), Some(true));
                Self::write(&mut next, server, value);
                next.clients[usize::from(i)].phase = Phase::Waiting {
                    server,
                    offset: next.servers[usize::from(server)].offset,
                };
            }
            Action::Granted(i) => next.clients[usize::from(i)].phase = Phase::Holding,
            Action::FallsShort(i) | Action::Lapse(i) => {
                self.end_attempt(&mut next.clients[usize::from(i)]);
            }
            Action::Release(i) => {
                let c = next.clients[usize::from(i)];
                let server = &next.servers[usize::from(c.view)];
                if server.role == Role::Master {
                    let token = self.owner(i, c.attempt);
                    let (n, value) = answer(server.value, Command::Release { token });
                    if counts(Kind::Release, n) == Some(true) {
                        Self::write(&mut next, c.view, value);
                    }
                }
                self.end_attempt(&mut next.clients[usize::from(i)]);
            }
            Action::Replicate(s) => {
                let server = &mut next.servers[usize::from(s)];
                server.value = server.stream.remove(0);
                server.offset += 1;
            }
            Action::Expire(s) => next.servers[usize::from(s)].value.key = None,
            Action::Promote(s) => {
                let live = self.live(state);
                let server = &mut next.servers[usize::from(s)];
                server.role = Role::Master;
                server.stream.clear();
                if self.0.quarantine {
                    server.quarantine = live;
                }
                next.master = s;
                next.named |= 1 << s;
                next.failovers_left -= 1;
            }
            Action::Repoint(s) => {
                let master = &state.servers[usize::from(state.master)];
                let (value, offset) = (master.value, master.offset);
                let server = &mut next.servers[usize::from(s)];
                let demoted = server.role == Role::Master;
                *server = Server {
                    role: Role::Replica(state.master),
                    value,
                    offset,
                    stream: Vec::new(),
                    quarantine: 0,
                };
                if demoted && self.0.demotion_unblocks {
                    for c in 0..next.clients.len() {
                        if matches!(next.clients[c].phase, Phase::Waiting { server, .. } if server == s)
                        {
                            self.end_attempt(&mut next.clients[c]);
                        }
                    }
                }
            }
        }
        let holders = next
            .clients
            .iter()
            .filter(|c| c.phase == Phase::Holding)
            .count();
        if holders > 1 {
            return Err(Violation::TwoHolders);
        }
        Ok(next)
    }

    fn key(&self, state: &State) -> State {
        state.clone()
    }
}
