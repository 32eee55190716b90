#![doc = include_str!("../README.md")]
//!
//! ## Reading the source
//!
//! This section is for readers of the source; everything above is the
//! README. Each folder is one floor; a floor names only the floors below it
//! (`scripts/check-modules.py` checks it in CI). From the top:
//!
//! - **The public surface**: [`Builder`] (`builder.rs`) takes the nodes
//!   ([`IntoNode`], `nodes.rs`), checks the settings and connects the
//!   nodes into a [`Redlock`] (`redlock.rs`), whose readiness is
//!   [`Health`] (`health.rs`);
//!   a [`LockRequest`] (`request.rs`) is one way to ask; a [`Lock`]
//!   (`lock.rs`) is a held lock, and `lock/run.rs` the work run under it
//!   ([`Lock::run`]). A counting semaphore is `semaphore.rs`
//!   ([`SemaphoreRequest`]), its held [`Permit`] and its
//!   [`SemaphoreStatus`] in `semaphore/`.
//! - **`election/`: leader election on the lock.** A [`Campaign`] takes
//!   an election's fenced leadership lock and proclaims the leader's
//!   value; a [`Leadership`] is that lock renewed, with its epoch; an
//!   [`Observer`] follows who leads. The fan-outs are in
//!   `quorum/election.rs`, the record and its scripts in `node/election.rs`.
//! - **`quorum/`: where the nodes decide together.** `rule.rs` is the
//!   majority and the running tally, `slots.rs` the semaphore's rule (a
//!   slot won at a majority, granted at `k` won slots); `fanout.rs` sends
//!   one operation to every node and decides at the needed yes or as soon
//!   as it is impossible; `claim.rs` is what an acquisition asks for (a
//!   lock, permits, a leadership: its command, its votes, what it keeps),
//!   `attempt.rs` one acquisition of any claim, `retry.rs` the loop of
//!   attempts; `engine.rs` is the client's shared state, `held.rs` the
//!   operations on a held lock (extend, release, the remote check),
//!   `read.rs` the reads of keys on the nodes (a waiter's look,
//!   [`Redlock::status`]); `repair.rs` puts a missing key back after a
//!   confirmed extension; `handoff.rs` wakes waiters on release.
//! - **`lease/`: the life of a held lock** — its term, the renewal
//!   schedule and task, and the [`LostSignal`].
//! - **`node/`: one server.** Its connection (`link.rs`), admission
//!   (`admission.rs`, which server it is), the commands (`commands.rs`)
//!   and **what each reply means** (`reply.rs`, `fence.rs`, an acquire's
//!   grant in `grant.rs`), the restart quarantine; and **what runs on the
//!   server**: the Lua scripts in `node/lua/` (release and extend: one
//!   script each, for one key or several; `acquire_slots.lua` takes a
//!   semaphore's slots).
//! - **`stats/`** counts and reads back ([`Stats`]), with **the one table
//!   of metrics** (`metrics.rs`: names, kinds, labels, help, buckets) that
//!   `describe()` and the docs come from; `status.rs` is what a
//!   node holds for a key ([`NodeView`]) and the [`Status`] of a resource.
//! - **Values every floor uses**: `config.rs` (settings, [`Retry`]),
//!   `address.rs` (a node address parsed, or why not; never its
//!   password shown), `keys.rs` (what a
//!   lock covers), `token.rs`, and `validity.rs` — **where validity is
//!   computed**: drift, the budget `ttl − drift`, the deadline, the time
//!   left (`ttl − elapsed − drift`, one clock read against the deadline).
//! - **`error/`**: the public [`Error`] and [`Operation`], the per-node
//!   [`NodeFailure`]s and how they are classified, and how a lock ends
//!   ([`LostReason`]).
//! - `random.rs`: every random draw, from the OS.
//!
//! An acquire, through it: [`LockRequest::acquire`] → `quorum::retry`
//! (attempts until granted or out of time) → `quorum::attempt` (fresh
//! token, one fan-out of `SET NX PX` through `quorum::fanout`, each node's
//! reply read into a vote by `node/`, the votes counted by `quorum::rule`)
//! → `validity` (the deadline from the clock read before the first send)
//! → a [`Lock`] whose lease (`lease/`) renewal extends through
//! `quorum::held`.

#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod address;
mod builder;
mod config;
mod election;
mod error;
mod health;
mod keys;
mod lease;
mod lock;
mod node;
mod nodes;
mod quorum;
mod random;
mod redlock;
mod request;
mod semaphore;
mod stats;
mod status;
mod token;
mod validity;

pub use builder::Builder;
pub use config::{
    Retry, DEFAULT_CONNECT_TIMEOUT, DEFAULT_DRIFT_FACTOR, DEFAULT_NODE_TIMEOUT, DEFAULT_RETRY,
    DEFAULT_RETRY_DELAY_MAX, DEFAULT_RETRY_DELAY_MIN, MAX_NODES, MAX_PERMITS, MAX_TTL,
};
pub use election::{Campaign, Leader, Leadership, Observer};
pub use error::{
    Error, LossKind, LostReason, NodeFailure, NodeFailureKind, Operation, ResourceName, Result,
};
pub use health::{Health, NodeHealth};
pub use keys::{
    ELECTION_KEY_PREFIX, FENCE_KEY_PREFIX, RELEASE_CHANNEL_PREFIX, SEMAPHORE_KEY_PREFIX,
};
pub use lease::{LostSignal, Renewal};
pub use lock::Lock;
pub use node::fence::MAX_FENCE;
pub use nodes::{IntoNode, NodeSource};
pub use redlock::Redlock;
pub use request::LockRequest;
pub use semaphore::{Permit, SemaphoreHolder, SemaphoreRequest, SemaphoreStatus};
#[cfg(feature = "metrics")]
pub use stats::metrics;
pub use stats::{Acquires, Latency, LeaseStats, LockStats, NodeStats, Stats, Votes};
pub use status::{NodeView, Status};
