//! The read–write lock model: 3 nodes, readers and writers (2 readers and
//! 1 writer in the configurations run), in two designs.
//!
//! - [`Design::Script`], the library's: one request per node per attempt,
//!   whose effect is the node's script, atomic — a reader's entry is added
//!   where no writer holds (`read_acquire.lua`), a writer's key set where
//!   no writer holds and no entry is live (`write_acquire.lua`). A client
//!   holds once a majority said yes.
//! - [`Design::TwoSteps`], the obvious multi-master one and wrong
//!   (negative control): a reader first asks every node whether a writer
//!   holds, and once a majority said none, adds its entry on every node
//!   without looking again; it holds once a majority added it. Writers as
//!   in the script design.
//!
//! What the model lets happen, as the other models do: any message is
//! delivered at any time after it was sent, in any order, or not yet (its
//! reply likewise); a client gives up an attempt at any point, and a
//! holder's validity ends at any point; an attempt's keys and entries
//! expire (or are released) at any time once it is over, never while its
//! client counts on them. A writer's intent mark only ever refuses readers,
//! so it removes behaviours and is left out of a safety model.
//!
//! One reduction: a client starts its next attempt only once no request of
//! the last one is in flight and its keys are gone. A late request of an
//! attempt that is over can only set a key nobody counts on, which refuses
//! others and admits no one.
//!
//! Property checked in every reachable state: no writer holds (granted,
//! validity not ended) while any other client — reader or writer — does.

use std::fmt;

use crate::search::Model;
use crate::{client_name, node_name};

const NODES: usize = 3;
const QUORUM: u8 = 2;

/// How a reader takes its side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Design {
    /// One atomic script per node.
    Script,
    /// Check for a writer at a majority, then add the entry (negative
    /// control).
    TwoSteps,
}

#[derive(Debug, Clone, Copy)]
pub struct Config {
    pub design: Design,
    /// Per client: a reader (`true`) or a writer. At most 4 clients.
    pub readers: &'static [bool],
    /// Attempts per client (a failed or finished attempt starts the next).
    pub attempts: u8,
}

/// 2 readers and 1 writer, one attempt each, the library's design.
pub const BASE: Config = Config {
    design: Design::Script,
    readers: &[true, true, false],
    attempts: 1,
};

/// An attempt's token: client × 4 + attempt.
type Token = u8;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
struct Node {
    writer: Option<Token>,
    /// Live reader entries, one bit per client (a client has one attempt
    /// at a time, and an attempt that is over has its entries dropped
    /// before the next one starts, see [`Rw::apply`]).
    entries: u8,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Phase {
    Idle,
    /// A two-step reader's first step: nodes that saw no writer, and that
    /// saw one.
    Checking {
        yes: u8,
        no: u8,
    },
    Acquiring {
        yes: u8,
        no: u8,
    },
    Holding,
    /// The attempt is over; its keys may expire.
    Over,
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Client {
    attempt: u8,
    phase: Phase,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// A two-step reader's look for a writer.
    Check,
    /// The acquire: a script, or a two-step reader's unconditional add.
    Acquire,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Msg {
    Request {
        kind: Kind,
        client: u8,
        attempt: u8,
        node: u8,
    },
    Reply {
        kind: Kind,
        client: u8,
        attempt: u8,
        yes: bool,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct State {
    nodes: [Node; NODES],
    clients: Vec<Client>,
    /// In flight, sorted.
    msgs: Vec<Msg>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Start(u8),
    Deliver(Msg),
    /// The client gives up its attempt, or its validity ends.
    End(u8),
    /// An over attempt's key or entry on a node expires (or is released).
    Expire {
        client: u8,
        node: u8,
    },
}

/// A writer held beside another holder: the clients.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    Overlap { writer: char, other: char },
}

pub struct Rw(pub Config);

impl Rw {
    fn reader(&self, client: u8) -> bool {
        self.0.readers[client as usize]
    }
}

fn token(client: u8, attempt: u8) -> Token {
    client * 4 + attempt
}

impl Model for Rw {
    type State = State;
    type Key = State;
    type Action = Action;
    type Violation = Violation;

    fn initial(&self) -> State {
        let idle = Client {
            attempt: 0,
            phase: Phase::Idle,
        };
        State {
            nodes: [Node::default(); NODES],
            clients: vec![idle; self.0.readers.len()],
            msgs: Vec::new(),
        }
    }

    fn actions(&self, s: &State) -> Vec<Action> {
        let mut out = Vec::new();
        for (c, client) in s.clients.iter().enumerate() {
            let c = c as u8;
            match client.phase {
                Phase::Idle => out.push(Action::Start(c)),
                Phase::Checking { .. } | Phase::Acquiring { .. } | Phase::Holding => {
                    out.push(Action::End(c));
                }
                Phase::Over => {
                    let t = token(c, client.attempt);
                    for (n, node) in s.nodes.iter().enumerate() {
                        if node.writer == Some(t) || node.entries & (1 << c) != 0 {
                            out.push(Action::Expire {
                                client: c,
                                node: n as u8,
                            });
                        }
                    }
                    // The next attempt, once its keys are gone.
                    let clean = s
                        .nodes
                        .iter()
                        .all(|node| node.writer != Some(t) && node.entries & (1 << c) == 0);
                    let late = s.msgs.iter().any(|m| matches!(m,
                        Msg::Request { client, attempt, .. } if *client == c && *attempt == client_attempt(s, c)));
                    if clean && !late {
                        out.push(Action::Start(c));
                    }
                }
                Phase::Done => {}
            }
        }
        out.extend(s.msgs.iter().map(|&m| Action::Deliver(m)));
        out
    }

    fn apply(&self, s: &State, action: Action) -> Result<State, Violation> {
        let mut s = s.clone();
        match action {
            Action::Start(c) => {
                let client = &mut s.clients[c as usize];
                if client.phase == Phase::Over {
                    client.attempt += 1;
                }
                if client.attempt >= self.0.attempts {
                    client.phase = Phase::Done;
                } else {
                    let two_steps = self.0.design == Design::TwoSteps && self.reader(c);
                    let kind = if two_steps {
                        Kind::Check
                    } else {
                        Kind::Acquire
                    };
                    client.phase = match kind {
                        Kind::Check => Phase::Checking { yes: 0, no: 0 },
                        Kind::Acquire => Phase::Acquiring { yes: 0, no: 0 },
                    };
                    let attempt = client.attempt;
                    for node in 0..NODES as u8 {
                        s.msgs.push(Msg::Request {
                            kind,
                            client: c,
                            attempt,
                            node,
                        });
                    }
                }
            }
            Action::End(c) => s.clients[c as usize].phase = Phase::Over,
            Action::Expire { client, node } => {
                let n = &mut s.nodes[node as usize];
                if n.writer == Some(token(client, s.clients[client as usize].attempt)) {
                    n.writer = None;
                }
                n.entries &= !(1 << client);
            }
            Action::Deliver(m) => {
                let at = s.msgs.iter().position(|&x| x == m).unwrap_or(0);
                s.msgs.remove(at);
                match m {
                    Msg::Request {
                        kind,
                        client,
                        attempt,
                        node,
                    } => {
                        let n = &mut s.nodes[node as usize];
                        let yes = match (kind, self.reader(client)) {
                            (Kind::Check, _) => n.writer.is_none(),
                            // A two-step reader's add looks at nothing.
                            (Kind::Acquire, true) if self.0.design == Design::TwoSteps => true,
                            (Kind::Acquire, true) => n.writer.is_none(),
                            (Kind::Acquire, false) => n.writer.is_none() && n.entries == 0,
                        };
                        if yes && kind == Kind::Acquire {
                            if self.reader(client) {
                                n.entries |= 1 << client;
                            } else {
                                n.writer = Some(token(client, attempt));
                            }
                        }
                        s.msgs.push(Msg::Reply {
                            kind,
                            client,
                            attempt,
                            yes,
                        });
                    }
                    Msg::Reply {
                        kind,
                        client,
                        attempt,
                        yes,
                    } => {
                        let cl = &mut s.clients[client as usize];
                        if cl.attempt == attempt {
                            count(cl, kind, yes, client, &mut s.msgs);
                        }
                    }
                }
            }
        }
        // Replies nobody waits for are forgotten.
        let clients = s.clients.clone();
        s.msgs.retain(|m| match *m {
            Msg::Reply {
                client, attempt, ..
            } => {
                let cl = clients[client as usize];
                cl.attempt == attempt
                    && matches!(cl.phase, Phase::Checking { .. } | Phase::Acquiring { .. })
            }
            Msg::Request { .. } => true,
        });
        s.msgs.sort_unstable();
        check(self, &s)?;
        Ok(s)
    }

    fn key(&self, s: &State) -> State {
        s.clone()
    }
}

fn client_attempt(s: &State, c: u8) -> u8 {
    s.clients[c as usize].attempt
}

/// A reply counted: a majority of yes moves the client on (a two-step
/// reader from its check to its add), a majority of no ends the attempt.
fn count(cl: &mut Client, kind: Kind, yes: bool, client: u8, msgs: &mut Vec<Msg>) {
    let (y, n) = match (&mut cl.phase, kind) {
        (Phase::Checking { yes, no }, Kind::Check)
        | (Phase::Acquiring { yes, no }, Kind::Acquire) => (yes, no),
        _ => return,
    };
    if yes {
        *y += 1;
    } else {
        *n += 1;
    }
    let (y, n) = (*y, *n);
    if n > NODES as u8 - QUORUM {
        cl.phase = Phase::Over;
    } else if y >= QUORUM {
        cl.phase = match kind {
            Kind::Check => {
                for node in 0..NODES as u8 {
                    msgs.push(Msg::Request {
                        kind: Kind::Acquire,
                        client,
                        attempt: cl.attempt,
                        node,
                    });
                }
                Phase::Acquiring { yes: 0, no: 0 }
            }
            Kind::Acquire => Phase::Holding,
        };
    }
}

/// No writer holds beside another holder.
fn check(model: &Rw, s: &State) -> Result<(), Violation> {
    let holding = |c: usize| s.clients[c].phase == Phase::Holding;
    for w in (0..s.clients.len()).filter(|&c| holding(c) && !model.reader(c as u8)) {
        if let Some(other) = (0..s.clients.len()).find(|&c| c != w && holding(c)) {
            return Err(Violation::Overlap {
                writer: client_name(w as u8),
                other: client_name(other as u8),
            });
        }
    }
    Ok(())
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Action::Start(c) => write!(f, "{} starts an attempt", client_name(c)),
            Action::End(c) => write!(f, "{} gives up, or its validity ends", client_name(c)),
            Action::Expire { client, node } => write!(
                f,
                "{}'s key on {} expires",
                client_name(client),
                node_name(node)
            ),
            Action::Deliver(Msg::Request {
                kind,
                client,
                attempt,
                node,
            }) => write!(
                f,
                "{:?} of {} (attempt {attempt}) reaches {}",
                kind,
                client_name(client),
                node_name(node)
            ),
            Action::Deliver(Msg::Reply {
                kind, client, yes, ..
            }) => write!(
                f,
                "{}'s {:?} reply ({}) reaches it",
                client_name(client),
                kind,
                if yes { "yes" } else { "no" }
            ),
        }
    }
}
