//! A counting wrapper around the system allocator, installed as the bench
//! binary's global allocator. It counts only while switched on (the CPU
//! child's sequential phase): otherwise each allocation costs one relaxed
//! load of a flag that never changes, so the other scenarios are not
//! slowed.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

/// The system allocator, counting calls while [`start`] is in effect.
pub struct Counting;

static ON: AtomicBool = AtomicBool::new(false);
static ALLOCS: AtomicU64 = AtomicU64::new(0);
static REALLOCS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

fn count(counter: &AtomicU64, size: usize) {
    if ON.load(Relaxed) {
        counter.fetch_add(1, Relaxed);
        BYTES.fetch_add(size as u64, Relaxed);
    }
}

// SAFETY: every call is forwarded unchanged to the system allocator; the
// counters are plain atomics and never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(&ALLOCS, layout.size());
        // SAFETY: the caller's contract is passed on as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(&ALLOCS, layout.size());
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(&REALLOCS, new_size);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// Counts so far: allocations (alloc and alloc_zeroed), reallocations, and
/// bytes requested by both.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counts {
    pub allocs: u64,
    pub reallocs: u64,
    pub bytes: u64,
}

impl Counts {
    pub fn now() -> Counts {
        Counts {
            allocs: ALLOCS.load(Relaxed),
            reallocs: REALLOCS.load(Relaxed),
            bytes: BYTES.load(Relaxed),
        }
    }
}

/// Switches counting on or off for the whole process.
pub fn counting(on: bool) {
    ON.store(on, Relaxed);
}
