//! A counting semaphore's keys: one lock key per permit, under one hash
//! tag, with its fencing counter, limit record and release channel.

use std::sync::Arc;

use super::{Keys, Semaphore, Shape, SEMAPHORE_KEY_PREFIX};
use crate::config::MAX_PERMITS;
use crate::error::{Error, Result};

/// A counting semaphore's keys: `permits` slots, each an ordinary lock key
/// (`quorumlock:semaphore:{<name>}:<i>`), its fencing counter
/// (`…:fence`), the record of its limit (`…:limit`, the number of slots
/// its holders named) and the channel its releases are announced on
/// (`quorumlock:semaphore:{<name>}`). The braces are a hash tag: a Redis
/// Cluster would keep one semaphore's keys in one slot. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Slots {
    /// What every slot shares.
    semaphore: Arc<Semaphore>,
    /// Every slot, built once: what a failed attempt releases and a
    /// waiter watches and looks at.
    every: Keys,
}

impl Slots {
    /// The semaphore `name` with `permits` slots (checked against
    /// [`MAX_PERMITS`]), fenced or not.
    pub(crate) fn new(name: &[u8], permits: u32, fenced: bool) -> Result<Self> {
        if name.is_empty() {
            return Err(Error::invalid("semaphore name must not be empty"));
        }
        if permits == 0 || permits > MAX_PERMITS {
            return Err(Error::invalid(format!(
                "a semaphore has 1 to {MAX_PERMITS} permits, not {permits}"
            )));
        }
        let base = [SEMAPHORE_KEY_PREFIX, b"{", name, b"}"].concat();
        let resources = (0..permits)
            .map(|i| [&base[..], b":", i.to_string().as_bytes()].concat())
            .collect();
        let counter = [&base[..], b":fence"].concat();
        let round = [&counter[..], b":round"].concat();
        let semaphore = Arc::new(Semaphore {
            name: name.to_vec(),
            fence: fenced.then_some((counter, round)),
            limit: ([&base[..], b":limit"].concat(), permits),
            channel: base,
        });
        let every = keys(&semaphore, resources, Vec::new(), true);
        Ok(Self { semaphore, every })
    }
    /// The semaphore's name, as given.
    pub(crate) fn name(&self) -> &[u8] {
        &self.semaphore.name
    }

    /// Number of slots: the semaphore's permits.
    pub(crate) fn count(&self) -> usize {
        self.every.0.resources.len()
    }

    /// The key of slot `i`.
    pub(crate) fn key(&self, i: usize) -> &[u8] {
        self.every.slices().nth(i).unwrap_or_default()
    }

    /// The fencing counter, for a fenced semaphore.
    pub(crate) fn fence_key(&self) -> Option<&[u8]> {
        self.every.fence_key()
    }

    /// The record of the limit its holders named.
    pub(crate) fn limit_key(&self) -> &[u8] {
        &self.semaphore.limit.0
    }

    /// The slot whose key is `key`.
    pub(crate) fn index_of(&self, key: &[u8]) -> Option<usize> {
        self.every.slices().position(|k| k == key)
    }

    /// The keys of a holder of `slots` (indices, each below
    /// [`count`](Self::count)): released, extended and checked together,
    /// with the semaphore's fencing counter, announced on its channel; its
    /// release also clears the other slots where they carry its token.
    pub(crate) fn held(&self, slots: &[usize]) -> Keys {
        let held = slots.iter().map(|&i| self.key(i).to_vec()).collect();
        keys(&self.semaphore, held, self.rest(slots), true)
    }

    /// The keys of every slot but `kept`: what an attempt that keeps
    /// `kept` may also have set on some node.
    pub(crate) fn except(&self, kept: &[usize]) -> Keys {
        keys(&self.semaphore, self.rest(kept), Vec::new(), false)
    }

    /// Every slot (built once).
    pub(crate) fn every(&self) -> &Keys {
        &self.every
    }

    /// The keys of the slots not in `kept`.
    fn rest(&self, kept: &[usize]) -> Vec<Vec<u8>> {
        let rest = (0..self.count()).filter(|i| !kept.contains(i));
        rest.map(|i| self.key(i).to_vec()).collect()
    }
}

/// The [`Keys`] of some of the slots of `of` (`held`, and `strays` a
/// release clears as well), with its counter and channel, and its limit
/// record when they are `every` slot.
fn keys(of: &Arc<Semaphore>, held: Vec<Vec<u8>>, strays: Vec<Vec<u8>>, every: bool) -> Keys {
    let shape = Shape::Slots {
        semaphore: of.clone(),
        strays,
        every,
    };
    Keys::new(held, shape)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_semaphore_has_one_key_per_permit_under_one_hash_tag() {
        let slots = Slots::new(b"pool", 3, true).unwrap();
        assert_eq!(slots.count(), 3);
        assert_eq!(slots.key(2), b"quorumlock:semaphore:{pool}:2");
        assert_eq!(
            slots.fence_key(),
            Some(&b"quorumlock:semaphore:{pool}:fence"[..])
        );
        let held = slots.held(&[2, 0]);
        let keys: Vec<&[u8]> = held.slices().collect();
        assert_eq!(
            keys,
            [
                &b"quorumlock:semaphore:{pool}:2"[..],
                b"quorumlock:semaphore:{pool}:0"
            ]
        );
        assert_eq!(held.channels(), [&b"quorumlock:semaphore:{pool}"[..]]);
        // Its release clears the third slot too, where it carries the token.
        let Shape::Slots {
            semaphore,
            strays,
            every,
        } = held.shape()
        else {
            panic!("a holder's keys are slots");
        };
        assert_eq!(strays, &[b"quorumlock:semaphore:{pool}:1".to_vec()]);
        assert_eq!(held.fence_key(), slots.fence_key());
        // A fenced semaphore's round key sits beside its counter, and a
        // holder's keys carry it; an unfenced one has none.
        let round = b"quorumlock:semaphore:{pool}:fence:round".to_vec();
        assert_eq!(semaphore.fence.as_ref().map(|(_, r)| r), Some(&round));
        let unfenced = Slots::new(b"pool", 2, false).unwrap();
        assert!(unfenced.semaphore.fence.is_none());
        assert_eq!(slots.name(), b"pool");
        // The limit record, under the same hash tag, goes with every slot
        // (a holder's keys list them all), not with some.
        let limit = b"quorumlock:semaphore:{pool}:limit".to_vec();
        assert_eq!(semaphore.limit, (limit.clone(), 3));
        assert_eq!(slots.limit_key(), limit);
        assert!(every);
        let every_slot = |keys: &Keys| matches!(keys.shape(), Shape::Slots { every: true, .. });
        assert!(every_slot(slots.every()));
        assert!(!every_slot(&slots.except(&[2, 0])));
        assert_eq!(held.slot(), Some(super::super::hash_slot::slot(b"pool")));
        let rest = slots.except(&[2, 0]);
        assert_eq!(
            rest.resources(),
            [b"quorumlock:semaphore:{pool}:1".to_vec()]
        );
        assert!(Slots::new(b"pool", 0, false).is_err_and(|e| e.is_invalid_input()));
        assert!(Slots::new(b"pool", MAX_PERMITS + 1, false).is_err());
        assert!(Slots::new(b"", 1, false).is_err());
        assert!(Slots::new(b"pool", 1, false).unwrap().fence_key().is_none());
        assert_eq!(slots.index_of(b"quorumlock:semaphore:{pool}:1"), Some(1));
        assert_eq!(slots.index_of(b"quorumlock:semaphore:{pool}:3"), None);
        // A lock's releases are announced on each key's own channel.
        assert_eq!(
            Keys::many(["a", "b"]).unwrap().channels(),
            [&b"a"[..], b"b"]
        );
    }
}
