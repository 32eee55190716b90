//! A semaphore's acquire on one node (`acquire_slots.lua`): which slots
//! the node set for the token, read from its reply.

use redis::Value;

use crate::error::Operation;
use crate::node::commands::Command;
use crate::node::fence;
use crate::node::{Node, NodeResult, Window};

/// One node's answer to a semaphore's acquire: the slots it set to the
/// token, as positions in the order the command listed them (empty when it
/// refused: fewer than the slots wanted were free), and, for a fenced
/// semaphore, the fencing counter it read atomically with them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SlotGrant {
    pub(crate) positions: Vec<usize>,
    pub(crate) counter: u64,
}

impl SlotGrant {
    /// True when the node set the slots.
    pub(crate) fn granted(&self) -> bool {
        !self.positions.is_empty()
    }
}

impl Node {
    /// Takes `want` slots on this node with `command` (see
    /// [`Command::take_slots`]) over `listed` slots.
    pub(crate) async fn take_slots(
        &self,
        command: &Command,
        listed: usize,
        want: usize,
        window: Window,
    ) -> NodeResult<SlotGrant> {
        let reply = self.vote(command, window).await?;
        let grant = read(&reply, listed, want).map_err(|what| self.protocol(what))?;
        self.counters.vote(Operation::Acquire, grant.granted());
        Ok(grant)
    }
}

/// The reply of `acquire_slots.lua` over `listed` slots, `want` wanted:
/// `{counter, p1, …, pk}` (ascending positions, 1-based) or `{-1, free}`;
/// anything else says what it was.
fn read(reply: &Value, listed: usize, want: usize) -> Result<SlotGrant, String> {
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
        [-1, free] if usize::try_from(*free).is_ok_and(|f| f < want) => Ok(SlotGrant {
            positions: Vec::new(),
            counter: 0,
        }),
        [counter, rest @ ..] if rest.len() == want => {
            let counter = u64::try_from(*counter)
                .ok()
                .filter(|&c| fence::in_range(c))
                .ok_or_else(|| format!("fencing counter {counter} out of range"))?;
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
            Ok(SlotGrant { positions, counter })
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
