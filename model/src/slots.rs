//! The semaphore's rules: how a node answers a request for `k` of its `L`
//! slots ([`acquire`], [`release`]; `acquire_slots.lua` and `release.lua`
//! in the library) and how a client reads the answers ([`keep`], by the
//! library's own vote rule, `SlotVotes` in `src/quorum/slots.rs`, and
//! [`first`]). The semaphore model ([`crate::semaphore`]) runs these.
//!
//! Slot `i` is an ordinary quorum-mutex key, `slot i`, on every node. An
//! attempt sends one request to every node with its token, `k` and the
//! order in which it prefers the slots: a rotation of `0..L` whose start
//! the client chooses (spreading clients over the slots). A node sets the
//! first `k` free slots in that order to the token, all or nothing. A
//! client has won slot `i` when a majority of nodes set `i` to its token,
//! and is granted `k` permits once it has won `k` slots: it keeps the
//! first `k` won in its order and releases the others.

use crate::quorum::rule::Decision;
use crate::quorum::slots::SlotVotes;

/// A set of slot indices: bit `i` for slot `i`.
pub type Slots = u8;

/// The slots `0..l` in the order starting at `start`, wrapping around.
pub fn order(l: u8, start: u8) -> impl Iterator<Item = u8> {
    (0..l).map(move |i| (start + i) % l)
}

/// A node's `acquire_slots(token, k, order)`, atomically: where at least
/// `k` slots are free, sets the first `k` free ones in `order(l, start)`
/// to `token` and returns them; otherwise sets nothing and returns `None`
/// (refused). `slots.len()` is `l`.
pub fn acquire<T: Copy>(slots: &mut [Option<T>], token: T, k: u8, start: u8) -> Option<Slots> {
    let l = u8::try_from(slots.len()).ok()?;
    let free: Vec<u8> = order(l, start)
        .filter(|&i| slots[usize::from(i)].is_none())
        .take(usize::from(k))
        .collect();
    if k == 0 || free.len() < usize::from(k) {
        return None;
    }
    let mut taken = 0;
    for i in free {
        slots[usize::from(i)] = Some(token);
        taken |= 1 << i;
    }
    Some(taken)
}

/// A node's compare-and-delete of `token` on each slot of `which`; returns
/// the slots it deleted (those that carried the token).
pub fn release<T: Copy + PartialEq>(slots: &mut [Option<T>], token: T, which: Slots) -> Slots {
    let mut deleted = 0;
    for (i, slot) in slots.iter_mut().enumerate() {
        if which & (1 << i) != 0 && *slot == Some(token) {
            *slot = None;
            deleted |= 1 << i;
        }
    }
    deleted
}

/// The slots a client keeps, by the library's rule: `yes[i]` nodes set
/// slot `i` to its token (of `yes.len()` slots, listed from `start` on),
/// `quorum` of them win a slot, and once `k` are won it keeps the first
/// `k` won in its order; `None` while it has won fewer (not granted).
pub fn keep(yes: &[u8], quorum: u8, k: u8, start: u8) -> Option<Slots> {
    let (l, start) = (yes.len(), usize::from(start));
    let mut votes = SlotVotes::new(l, start, k.into(), quorum.into());
    for (slot, &n) in yes.iter().enumerate() {
        let position = (slot + l - start) % l;
        for _ in 0..n {
            votes.record(&[position]);
        }
    }
    let granted = k > 0 && votes.decide(0) == Some(Decision::Reached);
    granted.then(|| votes.kept().iter().fold(0, |set, i| set | 1 << i))
}

/// The lowest slot of `kept`: the one a fence commit checks the token on,
/// and the slot a permit's fence names.
pub fn first(kept: Slots) -> Option<u8> {
    (0..8).find(|&i| kept & (1 << i) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_is_a_rotation() {
        assert_eq!(order(3, 0).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(order(3, 2).collect::<Vec<_>>(), [2, 0, 1]);
        assert_eq!(order(2, 1).collect::<Vec<_>>(), [1, 0]);
    }

    #[test]
    fn acquire_takes_the_first_free_slots_in_order_all_or_nothing() {
        let mut slots = [None, Some('b'), None];
        assert_eq!(acquire(&mut slots, 'a', 1, 1), Some(0b100));
        assert_eq!(slots, [None, Some('b'), Some('a')]);
        // One slot free, two asked: nothing set.
        assert_eq!(acquire(&mut slots, 'c', 2, 0), None);
        assert_eq!(slots, [None, Some('b'), Some('a')]);
        assert_eq!(acquire(&mut slots, 'c', 1, 2), Some(0b001));
        assert_eq!(acquire(&mut slots, 'd', 1, 0), None);
        let mut slots = [None, None, None];
        assert_eq!(acquire(&mut slots, 'a', 2, 2), Some(0b101));
        assert_eq!(acquire(&mut slots, 'b', 0, 0), None);
    }

    #[test]
    fn release_deletes_only_its_own_token_on_the_slots_named() {
        let mut slots = [Some('a'), Some('b'), Some('a')];
        assert_eq!(release(&mut slots, 'a', 0b011), 0b001);
        assert_eq!(slots, [None, Some('b'), Some('a')]);
        assert_eq!(release(&mut slots, 'a', 0b111), 0b100);
        assert_eq!(release(&mut slots, 'a', 0b111), 0);
        assert_eq!(slots, [None, Some('b'), None]);
    }

    #[test]
    fn a_client_keeps_the_first_k_slots_won_in_its_order() {
        // Slots 0 and 2 won (2 of 3 nodes needed), slot 1 not.
        let yes = [2, 1, 3];
        assert_eq!(keep(&yes, 2, 1, 0), Some(0b001));
        assert_eq!(keep(&yes, 2, 1, 1), Some(0b100));
        assert_eq!(keep(&yes, 2, 2, 1), Some(0b101));
        assert_eq!(keep(&yes, 2, 3, 0), None);
        assert_eq!(keep(&[1, 1], 2, 1, 0), None);
        assert_eq!(keep(&yes, 2, 0, 0), None);
        assert_eq!(first(0b101), Some(0));
        assert_eq!(first(0b100), Some(2));
        assert_eq!(first(0), None);
    }
}
