//! What a lock token costs to draw: from the operating system at each
//! token (what `src/token.rs` does, so that tokens stay unique across
//! `fork()`), against the thread-local generator it replaced, and against
//! the process-id check the other fix would add to every draw.
//!
//! ```text
//! cargo bench --bench token
//! ```
//!
//! The token type is private to the library; each function here does what
//! its code does (128 bits, formatted as 32 hex characters). One acquire
//! draws one token per attempt, so the difference between the first two
//! lines is the cost per acquire (BENCHMARKS.md, "Tokens after fork").
//! Run as a test (`cargo test --benches`) it runs each function once.

use std::hint::black_box;
use std::time::Duration;

use criterion::Criterion;
use rand::rngs::OsRng;
use rand::{Rng, TryRngCore};

/// The token as drawn now: 16 bytes from `getrandom(2)`.
fn from_the_os() -> String {
    let mut bytes = [0u8; 16];
    OsRng.try_fill_bytes(&mut bytes).expect("getrandom");
    format!("{:032x}", u128::from_le_bytes(bytes))
}

/// The token as drawn before: rand's thread-local ChaCha12, whose state a
/// forked child copies.
fn thread_local() -> String {
    let bits: u128 = rand::rng().random();
    format!("{bits:032x}")
}

/// The other fix: check the process id before each draw (a `getpid`
/// system call; glibc no longer caches it) and reseed on a change.
fn thread_local_with_pid_check() -> String {
    black_box(std::process::id());
    thread_local()
}

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    let mut group = c.benchmark_group("token");
    group.bench_function("os_per_token", |b| b.iter(from_the_os));
    group.bench_function("thread_local", |b| b.iter(thread_local));
    group.bench_function("thread_local_pid_check", |b| {
        b.iter(thread_local_with_pid_check)
    });
    group.finish();
    c.final_summary();
}
