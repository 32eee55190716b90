//! A waiter queue's keys (`docs/queue.md`): beside the resource a claim
//! waits for, in its hash slot, one queue for every claim on it — a
//! lock's first resource, a semaphore, both sides of a read–write lock.

use super::{hash_slot, Keys, Shape, QUEUE_KEY_PREFIX};

/// The queue of the waiters for one resource: its keys, in the order its
/// scripts take them.
#[derive(Debug, Clone)]
pub(crate) struct Queue {
    /// The entries (`quorumlock:queue:{<resource>}`), their leases
    /// (`…:leases`) and the ticket counter (`…:ticket`).
    pub(crate) keys: [Vec<u8>; 3],
}

impl Keys {
    /// The queue of the waiters for these keys: one per lock's first
    /// resource, semaphore or read–write lock.
    pub(crate) fn queue(&self) -> Queue {
        let resource = match self.shape() {
            Shape::Slots { semaphore, .. } => &semaphore.channel[..],
            _ => self.first(),
        };
        let entries = hash_slot::beside(QUEUE_KEY_PREFIX, resource, b"");
        let leases = [&entries[..], b":leases"].concat();
        let ticket = [&entries[..], b":ticket"].concat();
        Queue {
            keys: [entries, leases, ticket],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::Slots;

    #[test]
    fn every_claim_on_a_resource_waits_in_its_one_queue_in_its_slot() {
        let read = Keys::read_write(b"doc", true, false).expect("reader");
        let write = Keys::read_write(b"doc", false, true).expect("writer");
        assert_eq!(read.queue().keys, write.queue().keys);
        assert_eq!(read.queue().keys[0], b"quorumlock:queue:{doc}".to_vec());
        let lock = Keys::one(b"{order:7}:a".to_vec(), false).expect("lock");
        let queue = lock.queue();
        assert_eq!(
            queue.keys[2],
            b"quorumlock:queue:tagged:{order:7}:a:ticket".to_vec()
        );
        let slots = Slots::new(b"pool", 3, false).expect("semaphore");
        for keys in [&lock, slots.every()] {
            let q = keys.queue();
            let all = keys.slices().chain(q.keys.iter().map(Vec::as_slice));
            assert!(hash_slot::same_slot(all).is_some(), "{keys}");
        }
    }
}
