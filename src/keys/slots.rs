//! A counting semaphore's keys: one lock key per permit, under one hash
//! tag, with its fencing counter, limit record and release channel.

use std::sync::Arc;

use super::{Inner, Keys, SEMAPHORE_KEY_PREFIX};
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
    name: Arc<[u8]>,
    /// Every slot, built once: what a failed attempt releases and a
    /// waiter watches and looks at; the other keys of the slots are
    /// built from its counter and channel.
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
        let fence_key = fenced.then(|| [&base[..], b":fence"].concat());
        let every = Inner {
            round_key: fence_key.as_ref().map(|f| [f, &b":round"[..]].concat()),
            resources,
            fence_key,
            limit: Some(([&base[..], b":limit"].concat(), permits)),
            announce: Some(base),
            ..Inner::default()
        };
        Ok(Self {
            name: name.into(),
            every: Keys(Arc::new(every)),
        })
    }

    /// The semaphore's name, as given.
    pub(crate) fn name(&self) -> &[u8] {
        &self.name
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
        self.every.limit().map(|(key, _)| key).unwrap_or_default()
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
        self.keys_of(held, self.rest(slots), true)
    }

    /// The keys of every slot but `kept`: what an attempt that keeps
    /// `kept` may also have set on some node.
    pub(crate) fn except(&self, kept: &[usize]) -> Keys {
        self.keys_of(self.rest(kept), Vec::new(), false)
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

    /// The [`Keys`] of some of the slots (`resources`, and `strays` a
    /// release clears as well), with the semaphore's counter and channel,
    /// and its limit record when they are `all` the slots.
    fn keys_of(&self, resources: Vec<Vec<u8>>, strays: Vec<Vec<u8>>, all: bool) -> Keys {
        let every = &self.every.0;
        Keys(Arc::new(Inner {
            resources,
            fence_key: every.fence_key.clone(),
            round_key: every.round_key.clone(),
            announce: every.announce.clone(),
            strays,
            limit: every.limit.clone().filter(|_| all),
            read_write: None,
        }))
    }
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
        let released = held.released().unwrap_or_default();
        assert_eq!(released.len(), 3);
        assert_eq!(
            released.last().copied(),
            Some(&b"quorumlock:semaphore:{pool}:1"[..])
        );
        // A lock's release clears its resources only.
        assert!(Keys::one(b"job", false).unwrap().released().is_none());
        assert_eq!(held.fence_key(), slots.fence_key());
        // A fenced semaphore's round key sits beside its counter, and a
        // holder's keys carry it; an unfenced one has none.
        let round = Some(&b"quorumlock:semaphore:{pool}:fence:round"[..]);
        assert_eq!(slots.every().round_key(), round);
        assert_eq!(held.round_key(), round);
        let unfenced = Slots::new(b"pool", 2, false).unwrap();
        assert_eq!(unfenced.every().round_key(), None);
        assert_eq!(Keys::one(b"job", true).unwrap().round_key(), None);
        assert_eq!(slots.name(), b"pool");
        // The limit record, under the same hash tag, goes with every slot
        // (a holder's keys list them all), not with some.
        let limit = (&b"quorumlock:semaphore:{pool}:limit"[..], 3);
        assert_eq!(slots.limit_key(), limit.0);
        assert_eq!(held.limit(), Some(limit));
        assert_eq!(slots.every().limit(), Some(limit));
        assert_eq!(slots.except(&[2, 0]).limit(), None);
        assert_eq!(Keys::one(b"job", true).unwrap().limit(), None);
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
