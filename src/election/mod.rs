//! Leader election on the lock: a [`Campaign`] (`campaign.rs`) takes an
//! election's leadership lock — fenced, so that its fencing token is the
//! leader's **epoch** — and proclaims the leader's value at quorum; the
//! [`Leadership`] (`leadership.rs`) is that lock, renewed, with its lost
//! signal, a new value ([`Leadership::proclaim`]) and the way out
//! ([`Leadership::resign`]); an [`Observer`] (`observe.rs`) follows who
//! leads. Who leads, read once, is [`Redlock::leader`](crate::Redlock::leader).
//! What an epoch protects, and the argument: `docs/election.md`.

mod campaign;
mod leadership;
mod observe;

use crate::node::election::Record;

pub use campaign::Campaign;
pub use leadership::Leadership;
pub use observe::{Observed, Observer};

/// Who leads an election: the leader's epoch and the value it proclaimed
/// (what [`Redlock::leader`](crate::Redlock::leader) and an
/// [`Observer`] report).
///
/// The epoch is the leadership's fencing token: no two leaders of an
/// election share one, and a leader elected after another one was has a
/// larger one (`docs/election.md`).
///
/// # Examples
///
/// ```
/// let leader = quorumlock::Leader { epoch: 7, value: b"10.0.0.5:8080".to_vec() };
/// assert_eq!(leader.clone(), leader);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leader {
    /// The leadership's epoch: its fencing token.
    pub epoch: u64,
    /// The value the leader proclaimed last (empty unless it set one).
    pub value: Vec<u8>,
}

impl From<Record> for Leader {
    fn from(record: Record) -> Self {
        Self {
            epoch: record.epoch,
            value: record.value,
        }
    }
}
