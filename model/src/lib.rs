//! An exhaustive model check of quorumlock's protocol, explored
//! breadth-first over every interleaving of its messages and faults
//! (`tests/*.rs` run the configurations and print their state counts).
//!
//! The models, each as small as its properties allow:
//!
//! - [`fencing`]: acquire with the counter read, fence commit, extend and
//!   release; fences unique and ordered by commit, mutual exclusion; also
//!   through restarts that lose the counter, which starts again from an
//!   abstract clock (a counter that starts again from 0, or from a clock
//!   set back, repeats a fence: negative controls).
//! - [`lease`]: a lock's life on the nodes — acquire, extensions with a
//!   short or a long TTL that may be cancelled, compare-and-delete releases
//!   as messages, tokens from a small pool, per-connection order with
//!   reconnects that let a request overtake, restarts that lose keys with
//!   the restart quarantine, one server under two names; mutual exclusion,
//!   no release deleting another lock, no key left behind, and "a holder
//!   has a majority of keys that last until its deadline".
//! - [`semaphore`]: `L` permits as `L` quorum-mutex slots taken with one
//!   request per node ([`slots`]), fenced or not; at most `L` permits held
//!   inside validity, fences unique and ordered by commit; and the counter
//!   design, which over-admits (a negative control).
//! - [`rwlock`]: a read–write lock's readers and writers, each side taken
//!   by one script per node and granted at a majority; no writer holds
//!   beside anyone; a reader that checks for a writer and adds its entry
//!   in two quorum steps holds beside one (a negative control).
//! - [`queue`]: the waiter queue of fair acquisition — a join's ticket
//!   committed at a majority, heartbeats that name the head at a majority,
//!   leases, crashes, lapses, a failed node and a plain acquirer beside
//!   it; tickets unique and ordered among live waiters, one head, FIFO
//!   grants, and progress (no reachable state from which no run grants
//!   every waiter that did not crash); node-local tickets, a head decided
//!   by one node, leases that never expire and two wrong rules for giving
//!   up a place are found out (negative controls).
//! - [`election`]: leader election as configurations of [`fencing`] — a
//!   leader holds a fenced mutex and its epoch is the committed fence;
//!   epochs unique and increasing across leaders, one leader at a time
//!   without faults; epochs from `INCR` replies repeat (a negative
//!   control).
//! - [`visibility`]: what an election's readers see through restarts, the
//!   quarantine and renewals that repair the leadership lock: a valid
//!   leader is read at quorum while a majority of nodes vote and were
//!   renewed since they restarted; a repair that restores the lock but not
//!   the leader's record hides the leader (a negative control).
//! - [`failover`]: one member that fails over (a Sentinel group: a master,
//!   its replicas, asynchronous replication, promotions that leave the old
//!   master running until it is re-pointed); a vote counts once `WAIT`
//!   saw every replica acknowledge it: never two holders; waiting for no
//!   replica (with or without the restart quarantine), for one fewer, or
//!   for the replicas read online gives the lock twice (negative
//!   controls).
//!
//! Shared by the models: the breadth-first [`search`], the [`symmetry`]
//! reduction and the record of [`fences`] handed out.
//!
//! How a node answers each command is the rule the Lua scripts apply,
//! stated in [`scripts`] (`tests/conformance.rs` in the library checks
//! every script against it on a real server). The rest are the library's
//! own rules, included by path: how each answer votes
//! (`src/node/reply.rs`), the fencing-token proposal (`src/node/fence.rs`)
//! and the semaphore's vote rule (`src/quorum/slots.rs`, with the tally of
//! `src/quorum/rule.rs`).
//!
//! This is its own package so that it builds optimized in every profile
//! (the workspace's `Cargo.toml`) without optimizing the library's other
//! tests.

#[allow(dead_code, unreachable_pub)]
#[path = "../../src/node/fence.rs"]
mod fence;
#[allow(dead_code, unreachable_pub)]
#[path = "../../src/node/reply.rs"]
mod reply;
/// The library's path to `reply`, which the rules below name.
mod node {
    pub(crate) use super::reply;
}
/// The semaphore's vote rule, and the tally it decides by. Their docs
/// link into the library, whose items are not here.
#[allow(dead_code, unreachable_pub, rustdoc::broken_intra_doc_links)]
#[path = "../../src/quorum"]
mod quorum {
    #[path = "rule.rs"]
    pub(crate) mod rule;
    #[path = "slots.rs"]
    pub(crate) mod slots;
}
/// The library's bound on a semaphore's permits (`src/config.rs`), which
/// `src/quorum/rule.rs` names.
mod config {
    pub(crate) const MAX_PERMITS: u32 = 1024;
}

pub mod election;
pub mod failover;
pub mod fences;
pub mod fencing;
pub mod lease;
pub mod queue;
pub mod rwlock;
pub mod scripts;
pub mod search;
pub mod semaphore;
pub mod slots;
pub mod symmetry;
pub mod visibility;

/// A client's name in a trace: `A`, `B`, …
fn client_name(i: u8) -> char {
    char::from(b'A' + i)
}

/// A node's name in a trace: `x`, `y`, `z`, …
fn node_name(i: u8) -> char {
    char::from(b'x' + i)
}
