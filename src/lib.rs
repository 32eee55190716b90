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
//! Data flows one way: handle → lock → engine → node → scripts.
//!
//! - [`Builder`] (`builder`) checks the settings (`config`) and the nodes and
//!   builds a [`Redlock`] (`redlock`), the handle; [`LockRequest`]
//!   (`request`) holds the options of one lock.
//! - `retry` runs attempts until granted or out of retries; `attempt` is one
//!   attempt (`SET NX PX`, then the fencing-token commit); `engine` holds the
//!   nodes and the operations on a held lock (release, extend, the remote
//!   check) and the status read.
//! - `fanout` is the one quorum operation all of them use: send to every
//!   node, decide at quorum or as soon as it is impossible, leave the rest
//!   to the client's `background` registry. `set_order` queues a release
//!   behind its node's `SET`.
//! - `node` is one node's commands and what their replies mean; `link` its
//!   connection (replaced after it dies); `quarantine` the restart rule;
//!   `commands` builds each operation's command once, `scripts` holds the
//!   Lua; `classify` and `reply_code` read its errors; `failure` names them
//!   ([`NodeFailure`]).
//! - [`Lock`] (`lock`) is the held lock; its lease lives in `lease`: the
//!   `term` (deadline, TTL, drift), shared `state`, the [`LostSignal`]
//!   (`signal`), one vocabulary for how a lock ends (`ending`:
//!   [`LostReason`] and its [`LossKind`]), the [`Renewal`] settings, the
//!   pure renewal `schedule` and the renewal `task`.
//! - Pure rules, unit-tested apart from I/O: `quorum` (majority, drift,
//!   validity, deadline, tally, backoff), `fence` (fencing tokens; the proof
//!   is in `docs/fencing.md`), `lease::schedule`, `lease::signal_state`.
//! - Leaves: `keys` (what a lock covers), `token`, `handoff` (release
//!   announcements for waiters), `counters` (recording) and `stats` (the
//!   [`Stats`] read back), `status` ([`Status`]), `metrics`.

#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod admission;
mod attempt;
mod background;
mod builder;
mod classify;
mod commands;
mod config;
mod counters;
mod engine;
mod error;
mod failure;
mod fanout;
mod fence;
mod grant;
mod handoff;
mod keys;
mod latency;
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
mod random;
mod redlock;
mod remote_check;
mod reply;
mod reply_code;
mod request;
mod retry;
mod scripts;
mod set_order;
mod shards;
mod stats;
mod status;
mod token;
mod traced;

pub use builder::Builder;
pub use config::{
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_DRIFT_FACTOR, DEFAULT_NODE_TIMEOUT, DEFAULT_RETRY_COUNT,
    DEFAULT_RETRY_DELAY_MAX, DEFAULT_RETRY_DELAY_MIN, MAX_NODES, MAX_TTL,
};
pub use error::{Error, Operation, ResourceName, Result};
pub use failure::{NodeFailure, NodeFailureKind};
pub use fence::MAX_FENCE;
pub use keys::{FENCE_KEY_PREFIX, RELEASE_CHANNEL_PREFIX};
pub use lease::{LossKind, LostReason, LostSignal, Renewal};
pub use lock::Lock;
pub use redlock::Redlock;
pub use request::LockRequest;
pub use stats::{Latency, LeaseStats, NodeStats, Stats, Votes};
pub use status::{NodeView, Status};

/// The README's examples, compiled as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
