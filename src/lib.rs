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
//! let redlock = quorumlock::Redlock::builder([
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
//! [`Redlock::with_lock`] wraps all of it: acquire, renew, run a future,
//! cancel it if the lock is lost, release on every way out.
//!
//! ```no_run
//! use std::time::Duration;
//!
//! # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
//! let report = redlock
//!     .with_lock("report:monthly", Duration::from_secs(30), |signal| async move {
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
//! `quorum` holds the pure arithmetic (majority, drift, validity, the running
//! tally, backoff); `fence` the pure fencing-token rules (the proof that
//! tokens are unique is in `docs/fencing.md`); `node` one node's connection and commands; `fanout`
//! sends an operation to all nodes and decides as replies arrive; `redlock`
//! is the handle with retries; `lock` the held lock. The lease lifecycle
//! lives in `lease`: its `term` (deadline, TTL and drift), shared `state`,
//! the public [`LostSignal`] (`signal`), one vocabulary for how a lock ends
//! (`ending`: [`LostReason`] and its [`LossKind`]), the signal's pure rules
//! (`signal_state`), the [`Renewal`] settings, the pure renewal `schedule`
//! and the background renewal `task`; `lock` uses it, never the other way
//! round. `scoped` holds [`Redlock::with_lock`]. `stats` holds the
//! counters; `failure` one node's failure ([`NodeFailure`]). `keys`
//! says what a lock covers (one resource, several, a fencing counter);
//! `scripts` holds the Lua run on the nodes; `handoff` the release
//! announcements waiters subscribe to; `quarantine` the restart rule;
//! `status` the read-only view of a resource; `background` counts the work
//! left running after a call returned ([`Redlock::settle`]).

#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
#![forbid(unsafe_code)]

mod background;
mod config;
mod error;
mod failure;
mod fanout;
mod fence;
mod handoff;
mod keys;
mod lease;
mod link;
mod lock;
#[cfg(feature = "metrics")]
pub mod metrics;
#[cfg(not(feature = "metrics"))]
mod metrics;
mod node;
mod op;
mod quarantine;
mod quorum;
mod redlock;
mod reply_code;
mod scoped;
mod scripts;
mod stats;
mod status;
mod token;

pub use config::{
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_DRIFT_FACTOR, DEFAULT_NODE_TIMEOUT, DEFAULT_RETRY_COUNT,
    DEFAULT_RETRY_DELAY_MAX, DEFAULT_RETRY_DELAY_MIN, MAX_TTL,
};
pub use error::{Error, ResourceName, Result};
pub use failure::{NodeFailure, NodeFailureKind};
pub use fence::MAX_FENCE;
pub use keys::{FENCE_KEY_PREFIX, RELEASE_CHANNEL_PREFIX};
pub use lease::{LossKind, LostReason, LostSignal, Renewal};
pub use lock::Lock;
pub use redlock::{Acquisition, Builder, Redlock};
pub use stats::{Latency, LeaseStats, NodeStats, Stats, Votes};
pub use status::{NodeView, Status};

/// The README's examples, compiled as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
