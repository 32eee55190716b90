//! One cell of the matrix: K contenders on one resource for a window, each
//! taking it (waiting as its library waits), holding it for the hold time
//! and giving it back, over and over. Every hold is recorded on one clock
//! and the overlap validator counts any grant beyond what the primitive
//! admits.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use quorumlock::Retry;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::contenders::{self, Contender, Kind, TTL};
use crate::measure::{self, Summary};
use crate::members::Members;

/// Permits of the semaphore's cells; each contender takes one.
pub const PERMITS: u32 = 4;

/// What the contenders take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Series {
    /// The lock, by quorumlock, the ideal fan-out or rslock.
    Mutex(Kind),
    /// One permit of a semaphore of [`PERMITS`].
    Permit,
    /// The read–write lock: each acquire a write one time in four, else a
    /// read.
    ReadWrite,
    /// An election's leadership (campaign, then resign).
    Leader,
}

impl Series {
    pub fn name(self) -> &'static str {
        match self {
            Series::Mutex(Kind::Quorumlock) => "mutex",
            Series::Mutex(Kind::Ideal) => "mutex (ideal)",
            Series::Mutex(Kind::Rslock) => "mutex (rslock)",
            Series::Permit => "permit",
            Series::ReadWrite => "read–write",
            Series::Leader => "leader",
        }
    }

    /// The client each contender runs: quorumlock's built for `members`
    /// as a user would; the ideal fan-out and rslock connect to `urls`.
    pub async fn client(self, members: &Members, urls: &[String]) -> Contender {
        match self {
            Series::Mutex(Kind::Ideal) => Contender::connect(Kind::Ideal, urls).await,
            Series::Mutex(Kind::Rslock) => Contender::connect(Kind::Rslock, urls).await,
            _ => Contender::Quorumlock(members.client(urls).await),
        }
    }
}

/// A grant held by one contender.
enum Held {
    Mutex(contenders::Held),
    Permit(quorumlock::Permit),
    Rw(quorumlock::Lock),
    Leader(quorumlock::Leadership),
}

/// Takes what `series` takes, waiting until `until` at most; the weight of
/// the grant against the limit the validator checks.
async fn acquire(
    series: Series,
    client: &Contender,
    key: &str,
    until: Instant,
    writer: bool,
    k: u32,
) -> Option<(Held, u32)> {
    let retry = Retry::Until(until.saturating_duration_since(Instant::now()));
    let redlock = match client {
        Contender::Quorumlock(rl) => rl,
        _ => {
            // The ideal fan-out sets no timeout: contended, it may wait for
            // the stopped member's reply. The window's end cancels it (its
            // keys expire; every cell has its own resource).
            let wait = until.saturating_duration_since(Instant::now());
            let held = tokio::time::timeout(wait, client.acquire_blocking(key, TTL, until));
            return Some((Held::Mutex(held.await.ok()??), 1));
        }
    };
    match series {
        Series::Mutex(_) => client
            .acquire_blocking(key, TTL, until)
            .await
            .map(|h| (Held::Mutex(h), 1)),
        Series::Permit => redlock
            .semaphore(key, PERMITS, TTL)
            .retry(retry)
            .acquire()
            .await
            .ok()
            .map(|p| (Held::Permit(p), 1)),
        Series::ReadWrite => {
            let (side, weight) = match writer {
                true => (redlock.write(key, TTL), k),
                false => (redlock.read(key, TTL), 1),
            };
            let held = side.retry(retry).acquire().await.ok()?;
            Some((Held::Rw(held), weight))
        }
        Series::Leader => redlock
            .campaign(key, TTL)
            .retry(retry)
            .lead()
            .await
            .ok()
            .map(|l| (Held::Leader(l), 1)),
    }
}

async fn release(client: &Contender, key: &str, held: Held) {
    let _ = match held {
        Held::Mutex(h) => {
            client.release(key, h).await;
            Ok(())
        }
        Held::Permit(p) => p.release().await,
        Held::Rw(l) => l.release().await,
        Held::Leader(l) => l.resign().await,
    };
}

/// What one cell measured.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub grants: usize,
    pub grants_per_s: f64,
    /// From asking to holding, over the grants.
    pub wait: Summary,
    /// Grants made beyond what the primitive admits (must be 0).
    pub overlaps: usize,
    /// Fewest and most grants of one contender.
    pub fewest: usize,
    pub most: usize,
}

/// Runs `clients.len()` contenders of `series` on a fresh resource for
/// `window`, each holding for `hold`; `seed` draws the read–write mix.
pub async fn run(
    series: Series,
    clients: &[Contender],
    hold: Duration,
    window: Duration,
    seed: u64,
) -> Outcome {
    let k = clients.len();
    let key = format!(
        "bench:matrix:{}:{:016x}",
        series.name().replace(' ', ""),
        rand::random::<u64>()
    );
    let start = Instant::now();
    let until = start + window;
    // (weight, granted, released) in ns since start; waits; grants each.
    let holds = Arc::new(Mutex::new(Vec::new()));
    let waits = Arc::new(Mutex::new(Vec::new()));
    let tasks: Vec<_> = clients
        .iter()
        .enumerate()
        .map(|(me, client)| {
            let (client, key) = (client.clone(), key.clone());
            let (holds, waits) = (holds.clone(), waits.clone());
            tokio::spawn(async move {
                let mut rng = StdRng::seed_from_u64(seed ^ me as u64);
                let mut grants = 0;
                while Instant::now() < until {
                    let asked = Instant::now();
                    let writer = rng.random_ratio(1, 4);
                    let Some((held, weight)) =
                        acquire(series, &client, &key, until, writer, k as u32).await
                    else {
                        // Refused before the deadline (a node error, not
                        // a wait): ask again, without spinning.
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        continue;
                    };
                    let granted = Instant::now();
                    if granted < until {
                        grants += 1;
                        waits.lock().unwrap().push(granted - asked);
                    }
                    if !hold.is_zero() {
                        tokio::time::sleep(hold).await;
                    }
                    let nanos = |t: Instant| (t - start).as_nanos() as u64;
                    let released = Instant::now();
                    holds
                        .lock()
                        .unwrap()
                        .push((weight, nanos(granted), nanos(released)));
                    release(&client, &key, held).await;
                }
                grants
            })
        })
        .collect();
    let mut each = Vec::with_capacity(k);
    for task in tasks {
        each.push(task.await.expect("a contender panicked"));
    }
    let limit = match series {
        Series::Permit => PERMITS,
        Series::ReadWrite => k as u32,
        _ => 1,
    };
    let grants: usize = each.iter().sum();
    let waits = waits.lock().unwrap();
    let overlaps = measure::overlaps(&mut holds.lock().unwrap(), limit);
    Outcome {
        grants,
        grants_per_s: grants as f64 / window.as_secs_f64(),
        wait: Summary::of(&waits),
        overlaps,
        fewest: each.iter().copied().min().unwrap_or(0),
        most: each.iter().copied().max().unwrap_or(0),
    }
}
