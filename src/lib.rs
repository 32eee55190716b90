#![doc = include_str!("../README.md")]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod client;
mod config;
mod election;
mod error;
mod health;
mod keys;
mod lease;
mod lock;
mod member;
mod node;
mod quorum;
mod random;
mod redlock;
mod request;
mod rwlock;
mod semaphore;
mod stats;
mod status;
mod token;
mod validity;

pub use client::{Builder, IntoNode, NodeSource};
pub use config::{
    Durability, Retry, DEFAULT_CONNECT_TIMEOUT, DEFAULT_DRIFT_FACTOR, DEFAULT_NODE_TIMEOUT,
    DEFAULT_RETRY, DEFAULT_RETRY_DELAY_MAX, DEFAULT_RETRY_DELAY_MIN, DEFAULT_WAITER_LEASE,
    MAX_NODES, MAX_PERMITS, MAX_TTL,
};
pub use election::{Campaign, Leader, Leadership, Observed, Observer};
pub use error::{
    Error, LossKind, LostReason, NodeFailure, NodeFailureKind, Occupancy, Operation, Primitive,
    ResourceName, Result,
};
pub use health::{Health, HealthState, NodeHealth};
pub use keys::{
    ELECTION_KEY_PREFIX, FENCE_KEY_PREFIX, NEXT_CHANNEL_PREFIX, QUEUE_KEY_PREFIX,
    RELEASE_CHANNEL_PREFIX, RWLOCK_KEY_PREFIX, SEMAPHORE_KEY_PREFIX,
};
pub use lease::{LostSignal, Renewal};
pub use lock::Lock;
pub use node::fence::MAX_FENCE;
pub use redlock::Redlock;
pub use request::LockRequest;
pub use rwlock::{RwLockRequest, RwLockStatus};
pub use semaphore::{Permit, SemaphoreHolder, SemaphoreRequest, SemaphoreStatus};
#[cfg(feature = "metrics")]
pub use stats::metrics;
pub use stats::{Acquires, Latency, LeaseStats, LockStats, NodeStats, Stats, Votes};
pub use status::{NodeView, Status};
