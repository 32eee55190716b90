//! Per-thread shards of a counter set: each thread writes to its own copy
//! (on its own cache line) and a reader adds the copies up. With every
//! command counted on its node, one shared copy would bounce between the
//! runtime's threads at every reply.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// Copies of a counter set; threads spread over them.
const SHARDS: usize = 8;

/// One copy, alone on its cache lines (128 bytes: two lines, as adjacent
/// lines are fetched in pairs).
#[derive(Debug, Default)]
#[repr(align(128))]
struct Padded<T>(T);

/// [`SHARDS`] copies of `T`.
#[derive(Debug)]
pub(crate) struct Sharded<T>(Box<[Padded<T>; SHARDS]>);

impl<T: Default> Default for Sharded<T> {
    fn default() -> Self {
        Self(Box::new(std::array::from_fn(|_| Padded::default())))
    }
}

impl<T> Sharded<T> {
    /// The copy of the calling thread.
    pub(crate) fn here(&self) -> &T {
        &self.0[thread_shard()].0
    }

    /// Every copy, for a reader to add up.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        self.0.iter().map(|p| &p.0)
    }
}

/// The calling thread's shard: threads take the next one as they first
/// ask, so a runtime's few worker threads get different shards.
fn thread_shard() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: usize = NEXT.fetch_add(1, Relaxed) % SHARDS;
    }
    SHARD.with(|s| *s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn threads_write_to_their_own_copy_and_a_reader_sees_the_sum() {
        let counters: Sharded<AtomicU64> = Sharded::default();
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..1000 {
                        counters.here().fetch_add(1, Relaxed);
                    }
                });
            }
        });
        assert_eq!(counters.iter().map(|c| c.load(Relaxed)).sum::<u64>(), 4000);
        let used = counters.iter().filter(|c| c.load(Relaxed) > 0).count();
        assert!(used >= 2, "threads spread over the shards: {used}");
    }

    #[test]
    fn each_copy_has_its_own_cache_lines() {
        assert_eq!(std::mem::align_of::<Padded<AtomicU64>>(), 128);
        assert_eq!(std::mem::size_of::<Padded<AtomicU64>>(), 128);
    }
}
