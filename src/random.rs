//! Every random draw of the library, taken from the operating system at
//! each use (`getrandom(2)` on Linux) rather than from a generator whose
//! state lives in the process.
//!
//! Why: `fork()` copies a process's memory, and with it the state of any
//! user-space generator (rand 0.9's thread-local one has no fork
//! detection). A pre-fork worker that took a lock before forking would
//! then draw, in parent and children alike, the same tokens — and a
//! child's refused attempt, cleaning up with the parent's token, would
//! delete the parent's lock. With no state to copy, parent and child draw
//! independently. The cost is one system call per draw (measured in
//! BENCHMARKS.md, "Tokens after fork").
//!
//! What each draw is for, and what a repeat across fork would cost:
//!
//! - the lock token (`token`): safety — see above;
//! - the retry delay and the hand-off spread (`retry`): liveness — workers
//!   forked from one process would back off in step and collide again at
//!   every retry;
//! - the node a waiter looks at (`engine`) and the nodes the hand-off
//!   listens on (`builder`): load only — the same node for every worker.
//!
//! All of them use this module, so no draw depends on the process having
//! re-seeded anything after a fork.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use rand::rngs::OsRng;
use rand::TryRngCore;

/// 128 random bits.
pub(crate) fn bits128() -> u128 {
    u128::from_le_bytes(draw())
}

/// A number in `[0, 1)`, as the retry delay and the hand-off spread take.
pub(crate) fn unit() -> f64 {
    // The top 53 bits: every value a multiple of 2^-53, below 1.
    (u64::from_le_bytes(draw()) >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// An index in `[0, n)` (0 when `n` is 0). The modulo bias, below
/// `n / 2^64`, does not matter for picking one of a few nodes.
pub(crate) fn below(n: usize) -> usize {
    let n = u64::try_from(n).unwrap_or(u64::MAX);
    usize::try_from(u64::from_le_bytes(draw()).checked_rem(n).unwrap_or(0)).unwrap_or(0)
}

/// `N` bytes from the operating system. Should the system refuse (a
/// kernel without `getrandom(2)` and no readable `/dev/urandom`), the bytes
/// are derived from the process id, the time and a counter instead: no
/// longer unpredictable, but still distinct between a parent and its
/// children (they have different process ids) and from one draw to the
/// next — what a lock token needs.
fn draw<const N: usize>() -> [u8; N] {
    let mut buf = [0u8; N];
    if OsRng.try_fill_bytes(&mut buf).is_err() {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        derived(&mut buf, std::process::id(), nanos, next_count());
    }
    buf
}

/// A process-wide count of derived draws.
fn next_count() -> u64 {
    static COUNT: AtomicU64 = AtomicU64::new(0);
    COUNT.fetch_add(1, Ordering::Relaxed)
}

/// The fallback of [`draw`]: `buf` from a hash of (`pid`, `nanos`,
/// `count`), 8 bytes per chunk.
fn derived(buf: &mut [u8], pid: u32, nanos: u128, count: u64) {
    for (i, chunk) in buf.chunks_mut(8).enumerate() {
        let mut hasher = DefaultHasher::new();
        (pid, nanos, count, i).hash(&mut hasher);
        let word = hasher.finish().to_le_bytes();
        chunk.copy_from_slice(&word[..chunk.len()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_are_fresh_and_in_range() {
        assert_ne!(bits128(), bits128());
        for _ in 0..1000 {
            let u = unit();
            assert!((0.0..1.0).contains(&u), "{u}");
            assert!(below(5) < 5);
        }
        assert_eq!(below(0), 0);
        assert_eq!(below(1), 0);
        // Every node is picked (1000 draws over 5: missing one is ~1e-97).
        let mut seen = [false; 5];
        for _ in 0..1000 {
            seen[below(5)] = true;
        }
        assert_eq!(seen, [true; 5]);
        // The retry delay spreads: draws fall in both halves (1000 in
        // one half: ~1e-301).
        let units: Vec<f64> = (0..1000).map(|_| unit()).collect();
        assert!(units.iter().any(|u| *u < 0.5) && units.iter().any(|u| *u >= 0.5));
    }

    #[test]
    fn the_fallback_differs_between_processes_and_draws() {
        let draw = |pid, nanos, count| {
            let mut buf = [0u8; 16];
            derived(&mut buf, pid, nanos, count);
            buf
        };
        let parent = draw(100, 7, 3);
        assert_ne!(parent, draw(101, 7, 3), "same state, another process");
        assert_ne!(parent, draw(100, 7, 4), "the next draw");
        assert_ne!(parent, draw(100, 8, 3), "a later time");
        assert_eq!(parent, draw(100, 7, 3), "a pure function of its input");
        assert_ne!(parent[..8], parent[8..], "each chunk its own hash");
        assert_ne!(next_count(), next_count());
    }
}
