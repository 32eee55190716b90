//! # quorumlock
//!
//! Distributed locks on independent Redis nodes with the Redlock algorithm.
//!
//! A lock is taken by sending `SET resource token NX PX ttl` to every node at
//! once; it is held when a majority (`N/2 + 1`) said yes and validity is
//! left: `ttl − elapsed − drift`, with `drift = ttl × 0.01 + 2 ms` and
//! `elapsed` measured on the monotonic clock from before the first send. The
//! decision is taken as soon as it is known — at the quorum-th yes, or as
//! soon as a quorum has become impossible — so a slow or hung minority of
//! nodes costs nothing. Release is a compare-and-delete script on every
//! node, so a worker whose lock expired never deletes its successor's.
//!
//! ```no_run
//! use std::time::Duration;
//!
//! # async fn demo() -> Result<(), quorumlock::Error> {
//! let redlock = quorumlock::Builder::new([
//!     "redis://127.0.0.1:7001",
//!     "redis://127.0.0.1:7002",
//!     "redis://127.0.0.1:7003",
//!     "redis://127.0.0.1:7004",
//!     "redis://127.0.0.1:7005",
//! ])
//! .build()
//! .await?;
//!
//! let lock = redlock.acquire("invoice:nightly", Duration::from_secs(30)).await?;
//! // ... work for at most lock.validity() ...
//! lock.release().await?;
//! # Ok(())
//! # }
//! ```
//!
//! ## What it guarantees, and what it assumes
//!
//! While [`Lock::validity`] is above zero, no other client of these nodes
//! holds the same resource — provided that a majority of nodes keep their
//! keys (no restart without persistence inside a TTL), that no node's wall
//! clock jumps forward (Redis expires keys by wall clock), and that the
//! holder does not pause between checking validity and acting. Where a
//! double run does real damage, check a fencing token in the protected
//! resource as well.
//!
//! ## Long jobs: renewal, the lost-lock signal, scoped locking
//!
//! [`Lock::auto_renew`] renews a held lock in the background (by default
//! every third of its TTL) and returns a [`LostSignal`] that fires once when
//! the lock is lost, when renewal is late enough that the validity fell
//! below a safety margin ([`LossKind::Uncertain`], *before* the validity
//! ends), when it expired, or when a renewal cap was reached.
//! [`LockRequest::run`] wraps all of it: acquire, renew, run a future,
//! cancel it if the lock is lost, release on every way out.
//!
//! ```no_run
//! use std::time::Duration;
//!
//! # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
//! let report = redlock
//!     .lock("report:monthly", Duration::from_secs(30))
//!     .run(|signal| async move {
//!         // runs for as long as it needs; dropped if the lock is lost
//!         format!("built with {:?} of validity left", signal.validity())
//!     })
//!     .await?;
//! # Ok(())
//! # }
//! ```
//!
//! [`Redlock::stats`] reads per-node counters (commands, votes, timeouts,
//! errors by kind, latency) and renewal counters.
//!
//! ## Layout
//!
//! Each folder is one floor; a floor names only the floors below it
//! (`scripts/check-modules.py` checks it in CI). From the top:
//!
//! - **The public surface**: [`Builder`] (`builder.rs`) checks the
//!   settings and connects the nodes into a [`Redlock`] (`redlock.rs`);
//!   a [`LockRequest`] (`request.rs`) is one way to ask; a [`Lock`]
//!   (`lock.rs`) is a held lock.
//! - **`quorum/`: where the nodes decide together.** `rule.rs` is the
//!   majority and the running tally; `fanout.rs` sends one operation to
//!   every node and decides at the quorum-th yes or as soon as a quorum is
//!   impossible; `attempt.rs` is one acquisition, `retry.rs` the loop of
//!   attempts, `engine.rs` the operations on a held lock (extend, release,
//!   the look at who holds a key); `repair.rs` puts a missing key back
//!   after a confirmed extension; `handoff.rs` wakes waiters on release.
//! - **`lease/`: the life of a held lock** — its term, the renewal
//!   schedule and task, and the [`LostSignal`].
//! - **`node/`: one server.** Its connection (`link.rs`), admission
//!   (`admission.rs`, which server it is), the commands (`commands.rs`)
//!   and **what each reply means** (`reply.rs`, `fence.rs`, `grant.rs`),
//!   the restart quarantine; and **what runs on the server**: the Lua
//!   scripts in `node/lua/`.
//! - **`stats/`** counts and reads back ([`Stats`]); `status.rs` is the
//!   [`Status`] of a resource.
//! - **Values every floor uses**: `config.rs` (settings), `keys.rs` (what a
//!   lock covers), `token.rs`, and `validity.rs` — **where validity is
//!   computed**: drift, `ttl − elapsed − drift`, the deadline.
//! - **`error/`**: the public [`Error`], the per-node [`NodeFailure`]s and
//!   how they are classified, and how a lock ends ([`LostReason`]).
//! - `random.rs`: every random draw, from the OS.
//!
//! An acquire, through it: [`LockRequest::acquire`] → `quorum::retry`
//! (attempts until granted or out of time) → `quorum::attempt` (fresh
//! token, one fan-out of `SET NX PX` through `quorum::fanout`, each node's
//! reply read into a vote by `node/`, the votes counted by `quorum::rule`)
//! → `validity` (the deadline from the clock read before the first send)
//! → a [`Lock`] whose lease (`lease/`) renewal extends through
//! `quorum::engine`.

#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod builder;
mod config;
mod error;
mod keys;
mod lease;
mod lock;
mod node;
mod quorum;
mod random;
mod redlock;
mod request;
mod stats;
mod status;
mod token;
mod validity;

pub use builder::Builder;
pub use config::{
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_DRIFT_FACTOR, DEFAULT_NODE_TIMEOUT, DEFAULT_RETRY_COUNT,
    DEFAULT_RETRY_DELAY_MAX, DEFAULT_RETRY_DELAY_MIN, MAX_NODES, MAX_TTL,
};
pub use error::{
    Error, LossKind, LostReason, NodeFailure, NodeFailureKind, Operation, ResourceName, Result,
};
pub use keys::{FENCE_KEY_PREFIX, RELEASE_CHANNEL_PREFIX};
pub use lease::{LostSignal, Renewal};
pub use lock::Lock;
pub use node::fence::MAX_FENCE;
pub use redlock::Redlock;
pub use request::LockRequest;
#[cfg(feature = "metrics")]
pub use stats::metrics;
pub use stats::{Latency, LeaseStats, NodeStats, Stats, Votes};
pub use status::{NodeView, Status};

/// The README's examples, compiled as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
