//! A node's answer to an acquire: its vote, and for a fenced lock the
//! fencing counter it read atomically with the `SET`.

use crate::node::reply::Vote;

/// One node's answer to an acquire: its vote and, for a fenced lock, the
/// fencing counter it held when the key was set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Grant {
    pub(crate) vote: Vote,
    pub(crate) counter: u64,
}

impl Grant {
    pub(crate) const NO: Grant = Grant {
        vote: Vote::No,
        counter: 0,
    };

    pub(crate) fn yes(counter: u64) -> Self {
        Grant {
            vote: Vote::Yes,
            counter,
        }
    }
}
