//! An acquire's reply on one node, of any kind (a lock's `SET NX PX` or
//! script, a semaphore's `acquire_slots.lua`): what the node granted, read
//! in one place ([`Shape::read`]).

use redis::Value;

use crate::node::fence;
use crate::node::reply::{self, Kind, Vote};

/// How an acquire's reply reads, by the command that asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// A lock's: `OK` or nil (`SET NX`), 1 or 0 (several resources).
    Lock,
    /// A fenced lock's: the fencing counter read with the `SET`, or −1.
    Fenced,
    /// A semaphore's `want` of `listed` slots: `{counter, p1, …, pk}`
    /// (ascending positions, 1-based), `{-1, free}` or `{-2, recorded}`
    /// (another limit recorded).
    Slots { listed: usize, want: usize },
}

/// One node's answer to an acquire: its vote, the fencing counter it read
/// atomically with the keys (0 when not fenced), and, for a semaphore, the
/// slots it set to the token, as positions in the order the command
/// listed them (empty when it refused: fewer than the slots wanted were
/// free, and `free` says how many were, or it records another limit).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Grant {
    pub(crate) vote: Vote,
    pub(crate) counter: u64,
    pub(crate) positions: Vec<usize>,
    /// The semaphore's limit the node records, when it refused because
    /// that is not the one asked with.
    pub(crate) other_limit: Option<u32>,
    /// The free slots the node saw, when it refused for want of them.
    pub(crate) free: Option<usize>,
}

impl Grant {
    /// A grant of `vote`, the `counter` read and the `positions` set,
    /// without a limit or a count of free slots.
    fn new(vote: Vote, counter: u64, positions: Vec<usize>) -> Self {
        Grant {
            vote,
            counter,
            positions,
            other_limit: None,
            free: None,
        }
    }

    /// True when the node set what was asked.
    pub(crate) fn granted(&self) -> bool {
        self.vote == Vote::Yes
    }
}

impl Shape {
    /// The grant an acquire's `reply` reads as; anything else says what
    /// it was.
    pub(crate) fn read(self, reply: &Value) -> Result<Grant, String> {
        // A `SET NX` reads as `acquire_multi.lua`'s 1 or 0.
        let (n, kind) = match (self, reply) {
            (Shape::Slots { listed, want }, reply) => return read(reply, listed, want),
            (Shape::Fenced, &Value::Int(n)) => (n, Kind::AcquireFenced),
            (Shape::Lock, &Value::Int(n)) => (n, Kind::AcquireMulti),
            (Shape::Lock, Value::Okay) => (1, Kind::AcquireMulti),
            (Shape::Lock, Value::Nil) => (0, Kind::AcquireMulti),
            (_, other) => return Err(format!("{other:?}")),
        };
        match reply::counts(kind, n) {
            Some(false) => Ok(Grant::new(Vote::No, 0, Vec::new())),
            // A fenced acquire's yes is the counter.
            Some(true) if kind == Kind::AcquireFenced => {
                Ok(Grant::new(Vote::Yes, counter(n)?, Vec::new()))
            }
            Some(true) => Ok(Grant::new(Vote::Yes, 0, Vec::new())),
            None => Err(format!("acquire answered {n}")),
        }
    }
}

/// A fencing counter a node read, in the range the scripts keep
/// ([`fence::in_range`]); anything else says what it was.
fn counter(n: i64) -> Result<u64, String> {
    u64::try_from(n)
        .ok()
        .filter(|&counter| fence::in_range(counter))
        .ok_or_else(|| format!("fencing counter {n} outside 0..={}", fence::MAX_FENCE))
}

/// The reply of `acquire_slots.lua` over `listed` slots, `want` wanted:
/// `{counter, p1, …, pk}` (ascending positions, 1-based), `{-1, free}` or
/// `{-2, recorded}` (a limit other than `listed`); anything else says what
/// it was.
fn read(reply: &Value, listed: usize, want: usize) -> Result<Grant, String> {
    let Value::Array(items) = reply else {
        return Err(format!("semaphore acquire answered {reply:?}"));
    };
    let ints: Option<Vec<i64>> = items
        .iter()
        .map(|v| match v {
            Value::Int(n) => Some(*n),
            _ => None,
        })
        .collect();
    let ints = ints.ok_or_else(|| format!("semaphore acquire answered {items:?}"))?;
    match ints.as_slice() {
        [-2, recorded] => match u32::try_from(*recorded) {
            Ok(other) if usize::try_from(other).is_ok_and(|o| o != listed) => Ok(Grant {
                other_limit: Some(other),
                ..Grant::new(Vote::No, 0, Vec::new())
            }),
            _ => Err(format!(
                "semaphore acquire found limit {recorded} of {listed}"
            )),
        },
        &[-1, free] => match usize::try_from(free) {
            Ok(free) if free < want => Ok(Grant {
                free: Some(free),
                ..Grant::new(Vote::No, 0, Vec::new())
            }),
            _ => Err(format!("semaphore acquire answered {{-1, {free}}}")),
        },
        [n, rest @ ..] if rest.len() == want => {
            let counter = counter(*n)?;
            let mut positions = Vec::with_capacity(want);
            for &p in rest {
                match usize::try_from(p) {
                    Ok(p)
                        if p >= 1 && p <= listed && positions.last().is_none_or(|&l| l < p - 1) =>
                    {
                        positions.push(p - 1);
                    }
                    _ => return Err(format!("semaphore acquire set slot {p} of {listed}")),
                }
            }
            Ok(Grant::new(Vote::Yes, counter, positions))
        }
        other => Err(format!("semaphore acquire answered {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ints(v: &[i64]) -> Value {
        Value::Array(v.iter().map(|&n| Value::Int(n)).collect())
    }

    #[test]
    fn a_grant_lists_the_slots_set_and_the_counter() {
        let g = read(&ints(&[7, 1, 3]), 4, 2).unwrap();
        assert_eq!(g.positions, [0, 2]);
        assert_eq!(g.counter, 7);
        assert!(g.granted());
        let refused = read(&ints(&[-1, 1]), 4, 2).unwrap();
        assert!(!refused.granted());
        assert_eq!(refused.other_limit, None);
        assert_eq!(refused.free, Some(1), "the free slots the node saw");
    }

    #[test]
    fn a_node_recording_another_limit_refuses_and_names_it() {
        let refused = read(&ints(&[-2, 3]), 2, 1).unwrap();
        assert!(!refused.granted());
        assert_eq!(refused.other_limit, Some(3));
        // The node's own limit, or none, is never "another".
        assert!(read(&ints(&[-2, 2]), 2, 1).is_err());
        assert!(read(&ints(&[-2, -1]), 2, 1).is_err());
    }

    #[test]
    fn replies_the_script_never_gives_are_refused() {
        // Too few or too many slots, out of range, repeated or unordered.
        for bad in [
            &[0, 1][..],
            &[0, 1, 2, 3],
            &[0, 0, 1],
            &[0, 1, 5],
            &[0, 2, 2],
            &[0, 3, 1],
            &[-2, 1, 2],
            &[-1, 2],
            &[-1],
        ] {
            assert!(read(&ints(bad), 4, 2).is_err(), "{bad:?}");
        }
        assert!(read(&Value::Nil, 4, 1).is_err());
        assert!(read(&ints(&[1 << 53, 1]), 4, 1).is_err());
    }
}
