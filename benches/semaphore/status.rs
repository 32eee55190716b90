//! A status read of a wide semaphore: `semaphore_status(name, 1024)` with
//! six permits held, on every node, with the default node timeout.

use std::time::Instant;

use quorumlock::Retry;

use crate::measure::{micros, Summary};
use crate::TTL;

/// The semaphore's slots: the most a semaphore has (`MAX_PERMITS`).
pub const SLOTS: u32 = quorumlock::MAX_PERMITS;

/// What the reads took, and how many of them could not count every slot
/// (a node past its timeout: slots unknown).
#[derive(Debug, Clone, Copy)]
pub struct Reads {
    pub took: Summary,
    pub incomplete: usize,
}

/// `reads` status reads, one after the other, of a semaphore of
/// [`SLOTS`] slots of which six are held (three holders of two).
pub async fn run(urls: &[String], reads: usize) -> Reads {
    let rl = quorumlock::Builder::new(urls.to_vec())
        .build()
        .await
        .expect("build quorumlock");
    let name = format!("bench:sem:status:{:08x}", rand::random::<u32>());
    let mut permits = Vec::new();
    for _ in 0..3 {
        let permit = rl
            .semaphore(&name, SLOTS, TTL)
            .take(2)
            .retry(Retry::Times(3))
            .acquire()
            .await
            .expect("permits");
        permits.push(permit);
    }
    let (mut samples, mut incomplete) = (Vec::with_capacity(reads), 0);
    for _ in 0..reads {
        let began = Instant::now();
        let status = rl.semaphore_status(&name, SLOTS).await.expect("status");
        samples.push(began.elapsed());
        if (status.held(), status.free()) != (6, SLOTS - 6) {
            incomplete += 1;
        }
    }
    for permit in permits {
        let _ = permit.release().await;
    }
    Reads {
        took: Summary::of(&samples),
        incomplete,
    }
}

/// One markdown line.
pub fn table(r: &Reads, nodes: usize) -> String {
    format!(
        "| status read, L = {SLOTS}, 6 held, {nodes} nodes | n {} | p50 {:.0} µs | p99 {:.0} µs | max {:.0} µs | incomplete {} |",
        r.took.n,
        micros(r.took.p50),
        micros(r.took.p99),
        micros(r.took.max),
        r.incomplete
    )
}
