//! The lease model: a lock's life on the nodes.
//!
//! Clients acquire (the fenced `SET NX`, `scripts::answer` on the node and
//! `reply::counts` on the client, as for every command here), hold, extend
//! with a short or a long TTL, cancel an extension while keeping the lock,
//! release (compare-and-delete, sent as messages to every node, also as the
//! cleanup of an attempt given up or lost) or stop without releasing (the
//! validity ran out, the process died). Each attempt draws its token from a
//! small pool: two clients that forked from one process draw the same ones.
//!
//! Each client has one connection per node name, and a connection delivers
//! its requests in order; a reconnect lets one request overtake the one
//! before it (never a release its `SET`: the client queues a release
//! behind its node's `SET`). Replies come back in any order. A node
//! restarts, losing its key and the requests queued to it (their replies
//! are failures); with the restart quarantine on, it then refuses every
//! command until no lock that may have relied on the lost key is still
//! alive (checked eagerly: the earliest moment the quarantine may pass).
//! One server may be listed under two names; with the `run_id` check a
//! server is counted once, as one name.
//!
//! Time is abstract. A key lasts until the deadline of the command that set
//! its TTL: `start + ttl` of the acquire or extension `seq` of its lock,
//! with starts in `seq` order. So one deadline is known to come no earlier
//! than another only when it is the same, or a later one with a TTL at
//! least as long (a later short one may come before an earlier long one).
//! A key may expire whenever it is not known to outlive the deadline its
//! holder counts on, or its lock is over.
//!
//! Properties checked in every reachable state:
//! - exclusion: no two clients hold the lock at once;
//! - a holder has a majority of servers (counted once) whose keys carry its
//!   lock and are known to last until its recorded deadline (a server in
//!   quarantine for it counts: nobody else can take the key there);
//! - a release never deletes a key another live lock set;
//! - a lock released (or given up, or lost) leaves no key once none of its
//!   requests is in flight.

use std::collections::VecDeque;
use std::fmt;

use crate::reply::{self, counts, Kind};
use crate::scripts::{self, answer, Command, Held};
use crate::search::Model;

/// A TTL: extensions pick one of two.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Ttl {
    /// Shorter than the acquire's.
    Short,
    /// The acquire's.
    Long,
}

/// What a node does with an extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExtendScript {
    /// `extend.lua` (`scripts::answer`): compare-and-pexpire that never
    /// shortens a key: its expiry becomes the later of the two.
    KeepLonger,
    /// The earlier script: the new TTL replaces the old one (it may
    /// shorten the key).
    Pexpire,
    /// Wrong: an absent key is re-created with the token.
    Recreate,
}

/// How the client moves its deadline around an extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeadlineRule {
    /// `Term::extended`: moves only once a majority confirmed, to that
    /// extension's deadline.
    OnlyWhenConfirmed,
    /// The earlier rule: lowered to the extension's deadline before
    /// sending when that may be earlier, replaced by it once a majority
    /// confirmed; a cancelled extension left it lowered.
    LowerThenReplace,
}

/// What a node does with a release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseScript {
    /// `release.lua` (`scripts::answer`): compare-and-delete.
    CompareAndDelete,
    /// Wrong: a plain `DEL`.
    PlainDel,
}

/// What a holder does where an extension that reached a quorum in time
/// found its key missing (docs/repair.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repair {
    /// Nothing: the key stays missing there.
    Off,
    /// `SET key token NX PX` (`scripts::answer`), with the extension's
    /// deadline, to each name that answered "missing" to it; also for a
    /// "missing" that arrives after the quorum, while the lock is held.
    SetNx,
    /// Wrong: a plain `SET` (no `NX`): it overwrites whatever is there by
    /// the time it arrives.
    PlainSet,
    /// Wrong: `SET NX`, but a "missing" that arrives after the holder
    /// released still repairs — nothing orders the repair before the
    /// release on its node (the library waits, per node, for a running
    /// repair before it sends the release there, and starts none after).
    Unordered,
}

/// One configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Clients (at most 3).
    pub clients: u8,
    /// Attempts per client (a finished attempt starts the next).
    pub attempts: u8,
    /// Extensions per attempt (at most 3).
    pub extends: u8,
    /// The TTLs an extension may ask for.
    pub ttls: &'static [Ttl],
    /// Whether an extension in flight may be cancelled (its commands go
    /// on) while the lock is kept.
    pub cancel: bool,
    /// Whether a holder may stop without releasing (its keys then expire).
    pub lapse: bool,
    /// The server behind each name the clients are given.
    pub names: Vec<u8>,
    /// Reconnects that let one request overtake the one before it.
    pub overtakes: u8,
    /// Node restarts (each loses the key).
    pub restarts: u8,
    /// The restart quarantine.
    pub quarantine: bool,
    /// Clients 0 and 1 draw the same tokens (forked from one process).
    pub shared_tokens: bool,
    /// The node's extension.
    pub extend: ExtendScript,
    /// The client's deadline.
    pub deadline: DeadlineRule,
    /// The node's release.
    pub release: ReleaseScript,
    /// The repair after an extension.
    pub repair: Repair,
    /// Check that a holder's keys last until its deadline (off to show
    /// what else breaks where this breaks first).
    pub keys_last: bool,
}

impl Config {
    fn servers(&self) -> usize {
        self.names
            .iter()
            .map(|&s| usize::from(s) + 1)
            .max()
            .unwrap_or(0)
    }

    /// The client's quorum: a majority of the names it was given.
    fn quorum(&self) -> u8 {
        u8::try_from(self.names.len() / 2 + 1).expect("few names")
    }

    fn owner(&self, client: u8, attempt: u8) -> u8 {
        client * self.attempts + attempt
    }

    fn token(&self, client: u8, attempt: u8) -> u8 {
        if self.shared_tokens && client < 2 {
            attempt
        } else {
            self.owner(client, attempt)
        }
    }
}

/// A command's deadline, as a bit: `seq * 2 + ttl`. Sets of them are `u8`
/// masks (four commands per lock at most).
type Life = u8;

fn life(seq: u8, ttl: Ttl) -> Life {
    1 << (seq * 2 + u8::from(ttl == Ttl::Long))
}

/// Whether deadline bit `a` is known to come no earlier than bit `b`.
fn no_earlier(a: u8, b: u8) -> bool {
    let (seq_a, long_a) = (a / 2, a % 2);
    let (seq_b, long_b) = (b / 2, b % 2);
    a == b || (seq_a > seq_b && long_a >= long_b)
}

fn bits(set: Life) -> impl Iterator<Item = u8> {
    (0..8).filter(move |i| set & (1 << i) != 0)
}

/// Whether something lasting until every deadline of `lasts` (their
/// latest) is known to outlive the earliest of `until`.
fn outlives(lasts: Life, until: Life) -> bool {
    bits(lasts).any(|a| bits(until).any(|b| no_earlier(a, b)))
}

/// A key lasts until the latest of its deadlines.
impl scripts::Later for Life {
    fn later(self, other: Self) -> Self {
        latest(self | other)
    }
}

/// Whether the earliest of `set` has passed, given deadlines `passed`
/// that have.
fn has_passed(set: Life, passed: Life) -> bool {
    outlives(passed, set)
}

/// The earliest of a set of deadlines, as the smallest set: drops those
/// known to come no earlier than another.
fn earliest(set: Life) -> Life {
    bits(set)
        .filter(|&a| !bits(set).any(|b| b != a && no_earlier(a, b)))
        .fold(0, |acc, a| acc | 1 << a)
}

/// The latest of a set of deadlines, as the smallest set.
fn latest(set: Life) -> Life {
    bits(set)
        .filter(|&a| !bits(set).any(|b| b != a && no_earlier(b, a)))
        .fold(0, |acc, a| acc | 1 << a)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct NodeKey {
    token: u8,
    /// The lock (client and attempt) whose command set it.
    owner: u8,
    /// It lasts until the latest of these deadlines.
    life: Life,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
struct Server {
    key: Option<NodeKey>,
    /// The locks this server's quarantine waits for (by owner bit).
    quarantine: u16,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Phase {
    Idle,
    Acquiring { yes: u8, no: u8 },
    Holding,
    Extending { seq: u8, ttl: Ttl, yes: u8, no: u8 },
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Client {
    attempt: u8,
    phase: Phase,
    extends_left: u8,
    next_seq: u8,
    /// The recorded deadline: the earliest of these.
    deadline: Life,
    /// Deadlines of this attempt known to have passed: a key of it that
    /// lasted until them expired.
    passed: Life,
    /// The names that answered "missing" to the extension in flight.
    missing: u8,
    /// The `seq` of the last extension confirmed (0: none).
    confirmed: u8,
}

/// A request on a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Op {
    Acquire,
    Extend {
        seq: u8,
        ttl: Ttl,
    },
    Release,
    /// The repair after extension `seq` (or the acquire, `seq` 0).
    Repair {
        seq: u8,
        ttl: Ttl,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Request {
    owner: u8,
    token: u8,
    op: Op,
}

/// A node's reply, as its vote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Reply {
    client: u8,
    name: u8,
    owner: u8,
    /// `None` for an acquire, the extension's `seq` otherwise.
    extend: Option<u8>,
    yes: bool,
    /// An extension found the key missing (a no).
    missing: bool,
}

/// Every node, client and message.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct State {
    servers: Vec<Server>,
    clients: Vec<Client>,
    /// One connection per client and name: `client * names + name`.
    queues: Vec<VecDeque<Request>>,
    /// Sorted (a multiset).
    replies: Vec<Reply>,
    /// Locks that ended with a release sent (owner bits).
    released: u16,
    overtakes_left: u8,
    restarts_left: u8,
}

/// One step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// A client starts an attempt.
    Start(u8),
    /// A connection delivers a request: its first or (a reconnect) its
    /// second; the node's key may expire just before.
    Deliver {
        /// The client.
        client: u8,
        /// The node name.
        name: u8,
        /// The second request overtakes the first.
        overtake: bool,
        /// The key expires first.
        expire: bool,
    },
    /// A reply reaches its client.
    Reply(Reply),
    /// An acquiring client gives up (timeout, cancellation) and cleans up.
    GiveUp(u8),
    /// A holder extends.
    Extend(u8, Ttl),
    /// A holder drops its extension in flight and keeps the lock.
    Cancel(u8),
    /// A holder releases.
    Release(u8),
    /// A holder stops without releasing.
    Lapse(u8),
    /// A server restarts.
    Restart(u8),
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = |i: u8| char::from(b'A' + i);
        match *self {
            Action::Start(i) => write!(f, "{} starts an attempt (SET NX everywhere)", c(i)),
            Action::Deliver {
                client,
                name,
                overtake,
                expire,
            } => {
                if expire {
                    write!(f, "the key on name {name} expires; then ")?;
                }
                let which = if overtake {
                    "second request (reconnect: it overtakes)"
                } else {
                    "next request"
                };
                write!(f, "{}'s {which} runs on name {name}", c(client))
            }
            Action::Reply(r) => write!(
                f,
                "{} gets {} {} from name {}",
                c(r.client),
                r.extend
                    .map_or("acquire".to_owned(), |s| format!("extend #{s}")),
                match (r.yes, r.missing) {
                    (true, _) => "yes",
                    (false, true) => "no (missing: repair)",
                    (false, false) => "no",
                },
                r.name
            ),
            Action::GiveUp(i) => write!(f, "{} gives up and releases", c(i)),
            Action::Extend(i, ttl) => write!(f, "{} extends with the {ttl:?} TTL", c(i)),
            Action::Cancel(i) => write!(f, "{} cancels its extension, keeps the lock", c(i)),
            Action::Release(i) => write!(f, "{} releases", c(i)),
            Action::Lapse(i) => write!(f, "{} stops without releasing", c(i)),
            Action::Restart(s) => write!(f, "server {s} restarts, losing its key"),
        }
    }
}

/// A property broken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    /// Two clients hold the lock.
    TwoHolders,
    /// A holder has fewer than a majority of servers whose keys are known
    /// to last until its deadline.
    KeysShorterThanTheDeadline {
        /// The holder.
        client: u8,
    },
    /// A release deleted a key a live lock had set.
    DeletedAnotherLock {
        /// The client whose key it was.
        victim: u8,
    },
    /// A lock that ended with a release left a key with nothing in flight.
    KeyLeftBehind {
        /// The client whose lock it was.
        client: u8,
    },
}

/// The lease model with one configuration.
#[derive(Debug, Clone)]
pub struct Lease(pub Config);

impl Lease {
    fn live(&self, s: &State, owner: u8) -> bool {
        let cfg = &self.0;
        let client = &s.clients[usize::from(owner / cfg.attempts)];
        client.attempt == owner % cfg.attempts
            && matches!(
                client.phase,
                Phase::Acquiring { .. } | Phase::Holding | Phase::Extending { .. }
            )
    }

    fn live_owners(&self, s: &State) -> u16 {
        (0..self.0.clients * self.0.attempts)
            .filter(|&o| self.live(s, o))
            .fold(0, |acc, o| acc | 1 << o)
    }

    /// Whether `key` may expire now: its lock is over, or it is not known
    /// to outlive the deadline its holder counts on.
    fn may_expire(&self, s: &State, key: NodeKey) -> bool {
        if !self.live(s, key.owner) {
            return true;
        }
        let client = &s.clients[usize::from(key.owner / self.0.attempts)];
        match client.phase {
            Phase::Holding | Phase::Extending { .. } => !outlives(key.life, client.deadline),
            _ => false,
        }
    }

    fn queue(&self, client: u8, name: u8) -> usize {
        usize::from(client) * self.0.names.len() + usize::from(name)
    }

    /// Sends `op` to every name; a server in quarantine fails it at once.
    fn send_all(&self, s: &mut State, client: u8, op: Op) {
        self.send_to(s, client, op, u8::MAX);
    }

    /// Sends `op` to the names in the mask `names`.
    fn send_to(&self, s: &mut State, client: u8, op: Op, names: u8) {
        let cfg = &self.0;
        let c = s.clients[usize::from(client)];
        let request = Request {
            owner: cfg.owner(client, c.attempt),
            token: cfg.token(client, c.attempt),
            op,
        };
        for (name, &server) in cfg.names.iter().enumerate() {
            let name = u8::try_from(name).expect("few names");
            if names & (1 << name) == 0 {
                continue;
            }
            if s.servers[usize::from(server)].quarantine != 0 {
                if let Some(reply) = failure(client, name, request) {
                    s.replies.push(reply);
                }
            } else {
                let q = self.queue(client, name);
                s.queues[q].push_back(request);
            }
        }
    }

    /// Ends client `c`'s attempt; with `release`, sends its releases.
    fn end(&self, s: &mut State, c: u8, release: bool) {
        let cfg = &self.0;
        if release {
            self.send_all(s, c, Op::Release);
            let client = &s.clients[usize::from(c)];
            s.released |= 1 << cfg.owner(c, client.attempt);
        }
        let client = &mut s.clients[usize::from(c)];
        if client.attempt + 1 < cfg.attempts {
            *client = Client {
                attempt: client.attempt + 1,
                ..initial_client(cfg)
            };
        } else {
            client.phase = Phase::Done;
        }
    }

    /// Runs `request` on `server` with the configured scripts: whether the
    /// reply is a yes, and whether it says the key is missing.
    fn run(
        &self,
        s: &mut State,
        server: usize,
        request: Request,
    ) -> Result<(bool, bool), Violation> {
        let cfg = &self.0;
        let node = &mut s.servers[server];
        let held = Held {
            key: node.key.map(|k| scripts::Key {
                token: k.token,
                life: k.life,
            }),
            counter: 0,
        };
        let token = request.token;
        let (command, kind) = match request.op {
            Op::Acquire => (
                Command::Acquire {
                    token,
                    life: life(0, Ttl::Long),
                },
                Kind::AcquireFenced,
            ),
            Op::Extend { seq, ttl } => (
                Command::Extend {
                    token,
                    life: life(seq, ttl),
                },
                Kind::Extend,
            ),
            Op::Release => (Command::Release { token }, Kind::Release),
            Op::Repair { seq, ttl } => (
                Command::Repair {
                    token,
                    life: life(seq, ttl),
                },
                Kind::Repair,
            ),
        };
        let (n, after) = match (command, cfg.extend, cfg.release) {
            (Command::Repair { life, .. }, _, _) if cfg.repair == Repair::PlainSet => (
                1,
                Held {
                    key: Some(scripts::Key { token, life }),
                    ..held
                },
            ),
            (Command::Extend { life: new, .. }, ExtendScript::Pexpire, _) => {
                let (n, mut after) = answer(held, command);
                if let Some(key) = &mut after.key {
                    key.life = new;
                }
                (n, after)
            }
            (Command::Extend { life, .. }, ExtendScript::Recreate, _) if held.key.is_none() => (
                1,
                Held {
                    key: Some(scripts::Key { token, life }),
                    ..held
                },
            ),
            (Command::Release { .. }, _, ReleaseScript::PlainDel) => {
                (i64::from(held.key.is_some()), Held { key: None, ..held })
            }
            _ => answer(held, command),
        };
        let owner = match (node.key, after.key) {
            (Some(before), Some(now)) if before.token == now.token => before.owner,
            _ => request.owner,
        };
        if let (Some(before), None) = (node.key, after.key) {
            if before.owner != request.owner && self.live(s, before.owner) {
                return Err(Violation::DeletedAnotherLock {
                    victim: before.owner / cfg.attempts,
                });
            }
        }
        let node = &mut s.servers[server];
        node.key = after.key.map(|k| NodeKey {
            token: k.token,
            owner,
            life: k.life,
        });
        Ok((counts(kind, n) == Some(true), reply::missing(kind, n)))
    }

    /// Client `c` holds after extension `seq` and the names in `missing`
    /// found its key missing: repairs there (docs/repair.md).
    fn repair(&self, s: &mut State, c: u8, seq: u8, ttl: Ttl, missing: u8) {
        if self.0.repair != Repair::Off && missing != 0 {
            self.send_to(s, c, Op::Repair { seq, ttl }, missing);
        }
    }

    /// A reply reaches its client.
    fn receive(&self, s: &mut State, r: Reply) {
        let cfg = &self.0;
        let quorum = cfg.quorum();
        let impossible = u8::try_from(cfg.names.len()).expect("few names") - quorum;
        let c = usize::from(r.client);
        if let Some(of) = r.extend.filter(|_| self.repairs_after_release(s, &r)) {
            let request = Request {
                owner: r.owner,
                token: cfg.token(r.client, r.owner % cfg.attempts),
                op: Op::Repair {
                    seq: of,
                    ttl: cfg.ttls[0],
                },
            };
            let q = self.queue(r.client, r.name);
            s.queues[q].push_back(request);
            return;
        }
        match (s.clients[c].phase, r.extend) {
            (Phase::Acquiring { yes, no }, None) => {
                let (yes, no) = if r.yes { (yes + 1, no) } else { (yes, no + 1) };
                let deadline = life(0, Ttl::Long);
                s.clients[c].phase = if yes >= quorum && !has_passed(deadline, s.clients[c].passed)
                {
                    s.clients[c].deadline = deadline;
                    Phase::Holding
                } else if yes >= quorum || no > impossible {
                    self.end(s, r.client, true);
                    return;
                } else {
                    Phase::Acquiring { yes, no }
                };
            }
            (Phase::Extending { seq, ttl, yes, no }, Some(of)) if of == seq => {
                let (yes, no) = if r.yes { (yes + 1, no) } else { (yes, no + 1) };
                if r.missing {
                    s.clients[c].missing |= 1 << r.name;
                }
                // A majority counted once the extension's own deadline
                // passed is too late: the lock is lost.
                let deadline = life(seq, ttl);
                s.clients[c].phase = if yes >= quorum && !has_passed(deadline, s.clients[c].passed)
                {
                    let client = &mut s.clients[c];
                    client.deadline = deadline;
                    client.confirmed = seq;
                    let missing = std::mem::take(&mut client.missing);
                    self.repair(s, r.client, seq, ttl, missing);
                    Phase::Holding
                } else if yes >= quorum || no > impossible {
                    self.end(s, r.client, true);
                    return;
                } else {
                    Phase::Extending { seq, ttl, yes, no }
                };
            }
            // A "missing" after the quorum, while the lock is held on it.
            (Phase::Holding, Some(of)) if r.missing && of == s.clients[c].confirmed => {
                let ttl = if s.clients[c].deadline == life(of, Ttl::Long) {
                    Ttl::Long
                } else {
                    Ttl::Short
                };
                self.repair(s, r.client, of, ttl, 1 << r.name);
            }
            _ => {}
        }
    }

    /// With [`Repair::Unordered`], `r` is a "missing" for a lock its holder
    /// already released, which repairs all the same.
    fn repairs_after_release(&self, s: &State, r: &Reply) -> bool {
        self.0.repair == Repair::Unordered
            && r.missing
            && r.extend.is_some()
            && s.released & (1 << r.owner) != 0
    }

    /// Ends the locks whose deadline passed (their holders drop them: a
    /// release), forgets replies nobody waits for, ends quarantines nobody
    /// needs.
    fn normalize(&self, s: &mut State) {
        for c in 0..self.0.clients {
            let client = s.clients[usize::from(c)];
            if matches!(client.phase, Phase::Holding | Phase::Extending { .. })
                && has_passed(client.deadline, client.passed)
            {
                self.end(s, c, true);
            }
        }
        let live = self.live_owners(s);
        for server in &mut s.servers {
            server.quarantine &= live;
        }
        let clients = s.clients.clone();
        let attempts = self.0.attempts;
        let unordered = |r: &Reply| self.repairs_after_release(s, r);
        let late: Vec<Reply> = s.replies.iter().copied().filter(unordered).collect();
        s.replies.retain(|r| {
            let client = clients[usize::from(r.client)];
            late.contains(r)
                || (client.attempt == r.owner % attempts
                    && match (client.phase, r.extend) {
                        (Phase::Acquiring { .. }, None) => true,
                        (Phase::Extending { seq, .. }, Some(of)) => seq == of,
                        (Phase::Holding, Some(of)) => r.missing && of == client.confirmed,
                        _ => false,
                    })
        });
        s.replies.sort_unstable();
    }

    fn check(&self, s: &State) -> Result<(), Violation> {
        let cfg = &self.0;
        let holding = |c: &Client| matches!(c.phase, Phase::Holding | Phase::Extending { .. });
        if s.clients.iter().filter(|c| holding(c)).count() > 1 {
            return Err(Violation::TwoHolders);
        }
        let majority = cfg.servers() / 2 + 1;
        for (i, client) in s.clients.iter().enumerate() {
            if !holding(client) || !cfg.keys_last {
                continue;
            }
            let i = u8::try_from(i).expect("few clients");
            let owner = cfg.owner(i, client.attempt);
            let lasting = s
                .servers
                .iter()
                .filter(|server| {
                    server.quarantine & (1 << owner) != 0
                        || server
                            .key
                            .is_some_and(|k| k.owner == owner && outlives(k.life, client.deadline))
                })
                .count();
            if lasting < majority {
                return Err(Violation::KeysShorterThanTheDeadline { client: i });
            }
        }
        for owner in bits16(s.released) {
            let in_flight = s.queues.iter().flatten().any(|r| r.owner == owner);
            let left = s
                .servers
                .iter()
                .any(|server| server.key.is_some_and(|k| k.owner == owner));
            if left && !in_flight {
                return Err(Violation::KeyLeftBehind {
                    client: owner / cfg.attempts,
                });
            }
        }
        Ok(())
    }
}

fn bits16(set: u16) -> impl Iterator<Item = u8> {
    (0..16).filter(move |i| set & (1 << i) != 0)
}

/// The failure a client counts for `request` to `name` when the node is in
/// quarantine or its connection died: a no vote (nothing for a release).
fn failure(client: u8, name: u8, request: Request) -> Option<Reply> {
    let extend = match request.op {
        Op::Acquire => None,
        Op::Extend { seq, .. } => Some(seq),
        Op::Release | Op::Repair { .. } => return None,
    };
    Some(Reply {
        client,
        name,
        owner: request.owner,
        extend,
        yes: false,
        missing: false,
    })
}

fn initial_client(cfg: &Config) -> Client {
    Client {
        attempt: 0,
        phase: Phase::Idle,
        extends_left: cfg.extends,
        next_seq: 1,
        deadline: 0,
        passed: 0,
        missing: 0,
        confirmed: 0,
    }
}

impl Model for Lease {
    type State = State;
    type Key = Vec<u8>;
    type Action = Action;
    type Violation = Violation;

    fn initial(&self) -> State {
        let cfg = &self.0;
        State {
            servers: vec![Server::default(); cfg.servers()],
            clients: vec![initial_client(cfg); usize::from(cfg.clients)],
            queues: vec![VecDeque::new(); usize::from(cfg.clients) * cfg.names.len()],
            replies: Vec::new(),
            released: 0,
            overtakes_left: cfg.overtakes,
            restarts_left: cfg.restarts,
        }
    }

    fn actions(&self, s: &State) -> Vec<Action> {
        let cfg = &self.0;
        let mut out = Vec::new();
        for (i, client) in s.clients.iter().enumerate() {
            let i = u8::try_from(i).expect("few clients");
            match client.phase {
                Phase::Idle => out.push(Action::Start(i)),
                Phase::Acquiring { .. } => out.push(Action::GiveUp(i)),
                Phase::Holding | Phase::Extending { .. } => {
                    if matches!(client.phase, Phase::Holding) {
                        if client.extends_left > 0 {
                            out.extend(cfg.ttls.iter().map(|&ttl| Action::Extend(i, ttl)));
                        }
                    } else if cfg.cancel {
                        out.push(Action::Cancel(i));
                    }
                    out.push(Action::Release(i));
                    if cfg.lapse {
                        out.push(Action::Lapse(i));
                    }
                }
                Phase::Done => {}
            }
        }
        for client in 0..cfg.clients {
            for (name, &server) in cfg.names.iter().enumerate() {
                let name = u8::try_from(name).expect("few names");
                let q = &s.queues[self.queue(client, name)];
                let Some(first) = q.front() else {
                    continue;
                };
                let expirable = s.servers[usize::from(server)]
                    .key
                    .is_some_and(|k| self.may_expire(s, k));
                for expire in [false, true] {
                    if expire && !expirable {
                        continue;
                    }
                    out.push(Action::Deliver {
                        client,
                        name,
                        overtake: false,
                        expire,
                    });
                    let overtakes = q.get(1).is_some_and(|second| {
                        !(second.op == Op::Release
                            && first.op == Op::Acquire
                            && first.owner == second.owner)
                    });
                    if s.overtakes_left > 0 && overtakes {
                        out.push(Action::Deliver {
                            client,
                            name,
                            overtake: true,
                            expire,
                        });
                    }
                }
            }
        }
        let mut last = None;
        for &r in &s.replies {
            if last != Some(r) {
                out.push(Action::Reply(r));
                last = Some(r);
            }
        }
        if s.restarts_left > 0 {
            for (i, server) in s.servers.iter().enumerate() {
                if server.key.is_some() {
                    out.push(Action::Restart(u8::try_from(i).expect("few servers")));
                }
            }
        }
        out
    }

    fn apply(&self, state: &State, action: Action) -> Result<State, Violation> {
        let cfg = &self.0;
        let mut s = state.clone();
        match action {
            Action::Start(c) => {
                s.clients[usize::from(c)].phase = Phase::Acquiring { yes: 0, no: 0 };
                self.send_all(&mut s, c, Op::Acquire);
            }
            Action::Deliver {
                client,
                name,
                overtake,
                expire,
            } => {
                let server = usize::from(cfg.names[usize::from(name)]);
                if expire {
                    // Time has passed every deadline the key lasted until.
                    if let Some(key) = s.servers[server].key.take() {
                        if self.live(&s, key.owner) {
                            let c = usize::from(key.owner / cfg.attempts);
                            s.clients[c].passed |= key.life;
                        }
                    }
                }
                if overtake {
                    s.overtakes_left -= 1;
                }
                let q = self.queue(client, name);
                let request = s.queues[q]
                    .remove(usize::from(overtake))
                    .expect("a request to deliver");
                let (yes, missing) = self.run(&mut s, server, request)?;
                if let Some(mut reply) = failure(client, name, request) {
                    reply.yes = yes;
                    reply.missing = missing && self.0.repair != Repair::Off;
                    s.replies.push(reply);
                }
            }
            Action::Reply(r) => {
                let at = s.replies.iter().position(|x| *x == r).expect("in flight");
                s.replies.remove(at);
                self.receive(&mut s, r);
            }
            Action::GiveUp(c) | Action::Release(c) => self.end(&mut s, c, true),
            Action::Lapse(c) => self.end(&mut s, c, false),
            Action::Extend(c, ttl) => {
                let client = &mut s.clients[usize::from(c)];
                let seq = client.next_seq;
                client.next_seq += 1;
                client.extends_left -= 1;
                client.missing = 0;
                client.phase = Phase::Extending {
                    seq,
                    ttl,
                    yes: 0,
                    no: 0,
                };
                if cfg.deadline == DeadlineRule::LowerThenReplace {
                    client.deadline = earliest(client.deadline | life(seq, ttl));
                }
                self.send_all(&mut s, c, Op::Extend { seq, ttl });
            }
            Action::Cancel(c) => s.clients[usize::from(c)].phase = Phase::Holding,
            Action::Restart(server) => {
                s.restarts_left -= 1;
                let live = self.live_owners(&s);
                let node = &mut s.servers[usize::from(server)];
                node.key = None;
                if cfg.quarantine {
                    node.quarantine = live;
                }
                for client in 0..cfg.clients {
                    for (name, &at) in cfg.names.iter().enumerate() {
                        if at != server {
                            continue;
                        }
                        let name = u8::try_from(name).expect("few names");
                        let q = self.queue(client, name);
                        let dropped: Vec<Request> = s.queues[q].drain(..).collect();
                        s.replies
                            .extend(dropped.into_iter().filter_map(|r| failure(client, name, r)));
                    }
                }
            }
        }
        self.normalize(&mut s);
        self.check(&s)?;
        Ok(s)
    }

    /// The state as bytes, the same for states that differ only by how
    /// the servers are named (when each has one name): everything about a
    /// server — its key, its quarantine, the requests queued to it and the
    /// replies from it — forms its signature, listed in sorted order.
    fn key(&self, s: &State) -> Vec<u8> {
        let cfg = &self.0;
        let mut out = Vec::with_capacity(64);
        for c in &s.clients {
            let phase = match c.phase {
                Phase::Idle => [0; 5],
                Phase::Acquiring { yes, no } => [1, yes, no, 0, 0],
                Phase::Holding => [2, 0, 0, 0, 0],
                Phase::Extending { seq, ttl, yes, no } => [3, seq, ttl as u8, yes, no],
                Phase::Done => [4, 0, 0, 0, 0],
            };
            out.extend([
                c.attempt,
                c.extends_left,
                c.next_seq,
                c.deadline,
                c.missing,
                c.confirmed,
            ]);
            out.extend(phase);
        }
        out.extend(s.released.to_le_bytes());
        out.extend([s.overtakes_left, s.restarts_left]);
        let symmetric = cfg
            .names
            .iter()
            .enumerate()
            .all(|(i, &n)| usize::from(n) == i);
        let mut signatures: Vec<Vec<u8>> = Vec::with_capacity(cfg.names.len() + 1);
        for (name, &server) in cfg.names.iter().enumerate() {
            let mut sig = Vec::with_capacity(16);
            if symmetric || name == 0 || cfg.names[..name].iter().all(|&n| n != server) {
                let node = &s.servers[usize::from(server)];
                match node.key {
                    None => sig.extend([0xff; 3]),
                    Some(k) => sig.extend([k.token, k.owner, k.life]),
                }
                sig.extend(node.quarantine.to_le_bytes());
            }
            let name = u8::try_from(name).expect("few names");
            for client in 0..cfg.clients {
                let q = &s.queues[self.queue(client, name)];
                sig.push(0xfe);
                for r in q {
                    let op = match r.op {
                        Op::Acquire => [0, 0],
                        Op::Extend { seq, ttl } => [1 + seq, ttl as u8],
                        Op::Release => [0xfd, 0],
                        Op::Repair { seq, ttl } => [0xe0 + seq, ttl as u8],
                    };
                    sig.extend([r.owner, r.token, op[0], op[1]]);
                }
            }
            sig.push(0xfc);
            for r in s.replies.iter().filter(|r| r.name == name) {
                sig.extend([
                    r.client,
                    r.owner,
                    r.extend.map_or(0xff, |e| e),
                    u8::from(r.yes) | u8::from(r.missing) << 1,
                ]);
            }
            signatures.push(sig);
        }
        if symmetric {
            signatures.sort_unstable();
        }
        for sig in &signatures {
            // Lengths differ: a separator keeps the concatenation unique.
            out.extend(u16::try_from(sig.len()).expect("short").to_le_bytes());
            out.extend(sig);
        }
        out
    }
}

/// Three servers, two clients with one attempt each, one extension with
/// either TTL, nothing else: the configurations change it.
pub fn base() -> Config {
    Config {
        clients: 2,
        attempts: 1,
        extends: 1,
        ttls: &[Ttl::Short, Ttl::Long],
        cancel: true,
        lapse: true,
        names: vec![0, 1, 2],
        overtakes: 0,
        restarts: 0,
        quarantine: true,
        shared_tokens: false,
        extend: ExtendScript::KeepLonger,
        deadline: DeadlineRule::OnlyWhenConfirmed,
        release: ReleaseScript::CompareAndDelete,
        repair: Repair::Off,
        keys_last: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_compare_only_when_known() {
        // Bit `seq * 2 + long`.
        let (l0, s1, l1, s2) = (1, 2, 3, 4);
        assert!(no_earlier(l1, l0), "later and as long");
        assert!(no_earlier(s2, s1));
        assert!(!no_earlier(s1, l0), "later but shorter: unknown");
        assert!(!no_earlier(l0, l1), "earlier");
        assert!(!no_earlier(l0, s1), "earlier but longer: unknown");
        let set = |b: &[u8]| b.iter().fold(0u8, |acc, i| acc | 1 << i);
        assert_eq!(earliest(set(&[l0, s1])), set(&[l0, s1]));
        assert_eq!(earliest(set(&[l0, l1])), set(&[l0]));
        assert_eq!(latest(set(&[l0, l1])), set(&[l1]));
        assert!(outlives(set(&[l1]), set(&[l0, s1])));
        assert!(!outlives(set(&[s1]), set(&[l1])));
    }
}
