//! The semaphore model: `L` permits on 3 nodes, up to 3 clients taking
//! `k` permits each, in two designs; each client names its `L` (the same
//! one unless [`Config::limits`] says otherwise).
//!
//! - [`Design::Slots`], the library's: `L` slots, each a quorum-mutex key
//!   on every node; one request per node per attempt (`acquire_slots`:
//!   the first `k` free slots in the client's order, all or nothing, with
//!   the fencing counter read atomically); the client has won slot `i`
//!   when a majority set `i` to its token, is granted once it has won `k`
//!   (and fails once every node answered and it has not), keeps the first
//!   `k` won in its order and releases the others, one message per node
//!   (the rules are [`crate::slots`]). Fenced, it then commits a fence —
//!   `fence::propose` over the counters of the nodes that set slots among
//!   the replies before the grant: the next round after the highest, and
//!   the lowest kept slot, `round × L + slot` — on one counter and round
//!   key per semaphore on each node, counted where that slot still carries
//!   the token and the node has not committed the slot in that round or a
//!   later one (`scripts::commit_permit`, `reply::counts`); the permits are
//!   handed out once a majority counted. [`Rule::RaiseFromBelow`] runs the
//!   rule before (`max + 1`, raised from strictly below).
//!   A node records the `L` of the acquire that set its slots and refuses
//!   an acquire naming another ([`Config::limit_check`]); the record goes
//!   with the node's last slot (in the library it may outlive it by up to
//!   a TTL, which only refuses more).
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
//!     inside validity (granted, validity not ended; fenced, from the
//!     grant on, while the commit runs) total at most the smallest `L`
//!     a holder named;
//! (b) fenced: fences are unique across the semaphore's holders, and a
//!     fence whose acquire began after another fence was handed out is
//!     larger ([`crate::fences`], the floor taken when the acquire
//!     starts), with faults too.
//!
//! The search treats states that differ only by the names of nodes, of
//! clients taking the same `k`, or (in the slot design, unless fences name
//! slots) of the slots up to a rotation, as one; it places faults on a node just
//! before the next acquire or commit reaches it (a release only deletes
//! its own token's keys, which commutes with a fault), and forgets replies
//! nobody waits for, releases that can find nothing to delete, and the
//! names on keys and requests of attempts that are over.

use crate::fences::{Broken, Fences};
use crate::fencing::Rule;
use crate::search::Model;
use crate::slots::Slots;

mod key;
mod step;

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
    /// `L`, named by every client unless [`limits`](Self::limits) lists
    /// each one's.
    pub permits: u8,
    /// The `L` each client names (one entry per client), when they differ;
    /// empty: every client names [`permits`](Self::permits).
    pub limits: &'static [u8],
    /// The nodes record the `L` their slots were taken with and refuse an
    /// acquire naming another (`acquire_slots.lua`); off, the script
    /// without the record (negative control).
    pub limit_check: bool,
    /// `k` of each client (one entry per client, at most 3).
    pub takes: &'static [u8],
    /// Attempts per client (a failed or finished attempt starts the next).
    pub attempts: u8,
    /// Commit a fence after the grant.
    pub fenced: bool,
    /// The commit rule: [`Rule::Rounds`] (the library's),
    /// [`Rule::RoundsAnySlot`], [`Rule::RaiseFromBelow`] (one counter raised
    /// from below, the rule before) or [`Rule::AtLeast`].
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
    /// The round key: the slots committed in the counter's round (bit `s`
    /// for slot `s`; 0 when the key is absent, which is the only way the
    /// model has none set). [`Rule::Rounds`] only.
    round: u8,
    /// The `L` recorded with the slots (0: none).
    limit: u8,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Phase {
    Idle,
    /// `yes[i]`: nodes that set slot `i`; `admitted`: nodes that set any;
    /// `max`: the largest counter they read; `floor`: the largest fence
    /// handed out before this acquire began.
    Acquiring {
        start: u8,
        yes: [u8; MAX_PERMITS],
        answered: u8,
        admitted: u8,
        max: u8,
        floor: u8,
    },
    /// `floor`: the largest fence handed out before the acquire began.
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
        /// The `L` the client names: the slots it lists are `0..l`.
        l: u8,
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
    /// More permits held inside validity at once than a holder's `L`.
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
}

impl Config {
    /// The `L` client `c` names.
    fn limit(&self, c: u8) -> u8 {
        self.limits
            .get(usize::from(c))
            .copied()
            .unwrap_or(self.permits)
    }

    /// Whether every client names the same `L` ([`permits`](Self::permits)).
    fn one_limit(&self) -> bool {
        self.limits.iter().all(|&l| l == self.permits)
    }
}

impl Node {
    /// The record of the limit goes with the node's last slot.
    fn forget_limit_when_empty(&mut self) {
        if self.slots.iter().all(Option::is_none) {
            self.limit = 0;
        }
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
    limits: &[],
    limit_check: true,
    takes: &[1, 1, 1],
    attempts: 1,
    fenced: false,
    rule: Rule::Rounds,
    early_expiries: 0,
    restarts: 0,
    persistent_counter: true,
    exclusion: true,
};
