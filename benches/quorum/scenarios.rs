//! The measurement loops: sequential latency, concurrent throughput, and
//! contention on one resource. Every loop interleaves the contenders round
//! by round, so a burst of load on the machine hits all of them alike.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::contenders::{Contender, Kind, TTL};
use crate::measure::{micros, Spread, Summary};

/// Latency of one contender in one scenario run.
#[derive(Debug, Clone)]
pub struct Latency {
    pub kind: Kind,
    /// Every sample of every round.
    pub pooled: Summary,
    /// Per-round p50 and p99, in microseconds.
    pub p50_rounds: Spread,
    pub p99_rounds: Spread,
    pub rounds: usize,
    pub errors: usize,
}

/// How many samples each contender gets per round.
#[derive(Debug, Clone, Copy)]
pub struct Sampling {
    pub rounds: usize,
    pub per_round: usize,
    /// A lower count for rslock where one cycle takes seconds.
    pub rslock_per_round: usize,
    pub warmup: usize,
}

/// Acquire+release latency, one cycle at a time, `sampling.rounds` rounds
/// with the contenders' order rotated each round.
pub async fn latency(contenders: &[Contender], sampling: Sampling, key: &str) -> Vec<Latency> {
    let n = contenders.len();
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); n];
    let mut per_round: Vec<Vec<(f64, f64)>> = vec![Vec::new(); n];
    let mut errors = vec![0usize; n];
    for round in 0..sampling.rounds {
        for step in 0..n {
            let i = (round + step) % n;
            let c = &contenders[i];
            let count = match c.kind() {
                Kind::Rslock => sampling.rslock_per_round,
                _ => sampling.per_round,
            };
            let key = format!("{key}:{}", c.kind().name());
            let warmup = sampling.warmup.min(count);
            for _ in 0..warmup {
                let _ = c.cycle(&key, TTL).await;
            }
            let mut round_samples = Vec::with_capacity(count);
            for _ in 0..count {
                let start = Instant::now();
                let result = c.cycle(&key, TTL).await;
                let took = start.elapsed();
                match result {
                    Ok(()) => round_samples.push(took),
                    Err(_) => errors[i] += 1,
                }
            }
            let s = Summary::of(&round_samples);
            per_round[i].push((micros(s.p50), micros(s.p99)));
            samples[i].extend(round_samples);
        }
    }
    (0..n)
        .map(|i| {
            let p50: Vec<f64> = per_round[i].iter().map(|r| r.0).collect();
            let p99: Vec<f64> = per_round[i].iter().map(|r| r.1).collect();
            Latency {
                kind: contenders[i].kind(),
                pooled: Summary::of(&samples[i]),
                p50_rounds: Spread::of(&p50),
                p99_rounds: Spread::of(&p99),
                rounds: sampling.rounds,
                errors: errors[i],
            }
        })
        .collect()
}

/// Lock cycles per second of one contender at one concurrency.
#[derive(Debug, Clone)]
pub struct Throughput {
    pub kind: Kind,
    pub tasks: usize,
    /// Cycles per second, per round.
    pub rate: Spread,
    pub errors: u64,
}

/// `tasks` tasks, each on its own resource, cycling for `window`; repeated
/// `rounds` times per contender, interleaved.
pub async fn throughput(
    contenders: &[Contender],
    tasks: usize,
    window: Duration,
    rounds: usize,
) -> Vec<Throughput> {
    let n = contenders.len();
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); n];
    let mut errors = vec![0u64; n];
    for round in 0..rounds {
        for step in 0..n {
            let i = (round + step) % n;
            let (done, failed) = run_window(&contenders[i], tasks, window).await;
            rates[i].push(done as f64 / window.as_secs_f64());
            errors[i] += failed;
        }
    }
    (0..n)
        .map(|i| Throughput {
            kind: contenders[i].kind(),
            tasks,
            rate: Spread::of(&rates[i]),
            errors: errors[i],
        })
        .collect()
}

/// Runs `tasks` cycling tasks for `window`; (cycles done in it, errors).
pub async fn run_window(c: &Contender, tasks: usize, window: Duration) -> (u64, u64) {
    let done = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let until = start + window;
    let tag = rand::random::<u32>();
    let handles: Vec<_> = (0..tasks)
        .map(|t| {
            let (c, done, failed) = (c.clone(), done.clone(), failed.clone());
            let key = format!("bench:tp:{}:{tag:08x}:{t}", c.kind().name());
            tokio::spawn(async move {
                while Instant::now() < until {
                    let ok = c.cycle(&key, TTL).await.is_ok();
                    if Instant::now() > until {
                        break;
                    }
                    if ok {
                        done.fetch_add(1, Ordering::Relaxed);
                    } else {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for h in handles {
        let _ = h.await;
    }
    (done.load(Ordering::Relaxed), failed.load(Ordering::Relaxed))
}

/// Contention on one resource by `k` clients.
#[derive(Debug, Clone)]
pub struct Contention {
    pub kind: Kind,
    pub k: usize,
    pub grants_per_s: f64,
    /// Delay from a release made while someone waited to the next grant,
    /// whoever got it.
    pub next_grant: Summary,
    /// Delay from a release to the grant of a client that was already
    /// waiting when it happened (the hand-off).
    pub handoff: Summary,
    /// How long each client waited, from calling acquire to its grant.
    pub wait: Summary,
    /// Share of grants that went back to the client that released last
    /// while another client was waiting.
    pub regrabs: f64,
    /// Grants made while another client held the resource
    /// ([`overlaps`](crate::measure::overlaps)): must be 0.
    pub overlaps: usize,
}

/// How long a holder keeps the lock, and waits after releasing it before
/// competing again.
pub const HOLD: Duration = Duration::from_millis(1);
pub const THINK: Duration = Duration::from_millis(1);

/// The last release: who, when, and whether anyone was waiting then.
struct Release {
    by: usize,
    at: Instant,
    waiters: bool,
}

#[derive(Default)]
struct Shared {
    grants: AtomicU64,
    regrabs: AtomicU64,
    /// When each client started waiting (None while it holds or thinks).
    waiting_since: Mutex<Vec<Option<Instant>>>,
    last_release: Mutex<Option<Release>>,
    next_grants: Mutex<Vec<Duration>>,
    handoffs: Mutex<Vec<Duration>>,
    waits: Mutex<Vec<Duration>>,
    /// Every hold: (weight, granted, released), since the run's start.
    holds: Mutex<Vec<(u32, u64, u64)>>,
}

/// `k` clients (one client each, as `k` processes would have) loop on one
/// resource for `window`: wait for the lock, hold it [`HOLD`], release,
/// pause [`THINK`]. A grant counts as a hand-off when it goes to a client
/// that was waiting before the last release; the delay is measured from
/// the moment the holder called release.
pub async fn contention(kind: Kind, urls: &[String], k: usize, window: Duration) -> Contention {
    let mut clients = Vec::with_capacity(k);
    for _ in 0..k {
        clients.push(Contender::connect(kind, urls).await);
    }
    let key = format!(
        "bench:contended:{}:{k}:{:08x}",
        kind.name(),
        rand::random::<u32>()
    );
    let shared = Arc::new(Shared {
        waiting_since: Mutex::new(vec![None; k]),
        ..Shared::default()
    });
    let start = Instant::now();
    let until = start + window;
    let handles: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(me, c)| {
            let (key, shared) = (key.clone(), shared.clone());
            tokio::spawn(async move {
                while Instant::now() < until {
                    let since = Instant::now();
                    shared.waiting_since.lock().unwrap()[me] = Some(since);
                    let held = c.acquire_blocking(&key, TTL, until).await;
                    shared.waiting_since.lock().unwrap()[me] = None;
                    let Some(held) = held else { break };
                    let now = Instant::now();
                    if now < until {
                        shared.grants.fetch_add(1, Ordering::Relaxed);
                        shared.waits.lock().unwrap().push(now - since);
                        if let Some(r) = shared.last_release.lock().unwrap().take() {
                            if r.waiters {
                                shared.next_grants.lock().unwrap().push(now - r.at);
                            }
                            if r.by != me && since < r.at {
                                shared.handoffs.lock().unwrap().push(now - r.at);
                            } else if r.by == me && r.waiters {
                                shared.regrabs.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                    tokio::time::sleep(HOLD).await;
                    {
                        let waiters = shared
                            .waiting_since
                            .lock()
                            .unwrap()
                            .iter()
                            .any(Option::is_some);
                        let at = Instant::now();
                        let nanos = |t: Instant| (t - start).as_nanos() as u64;
                        shared
                            .holds
                            .lock()
                            .unwrap()
                            .push((1, nanos(now), nanos(at)));
                        *shared.last_release.lock().unwrap() = Some(Release {
                            by: me,
                            at,
                            waiters,
                        });
                    }
                    c.release(&key, held).await;
                    tokio::time::sleep(THINK).await;
                }
            })
        })
        .collect();
    for h in handles {
        let _ = h.await;
    }
    let grants = shared.grants.load(Ordering::Relaxed);
    let overlaps = crate::measure::overlaps(&mut shared.holds.lock().unwrap(), 1);
    let summary = |v: &Mutex<Vec<Duration>>| Summary::of(&v.lock().unwrap());
    let (next_grant, handoff, wait) = (
        summary(&shared.next_grants),
        summary(&shared.handoffs),
        summary(&shared.waits),
    );
    Contention {
        kind,
        k,
        grants_per_s: grants as f64 / window.as_secs_f64(),
        next_grant,
        handoff,
        wait,
        regrabs: shared.regrabs.load(Ordering::Relaxed) as f64 / grants.max(1) as f64,
        overlaps,
    }
}
