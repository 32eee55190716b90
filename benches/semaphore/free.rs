//! A free permit against the mutex: one client, nothing contended, cycles
//! of one acquire attempt and a release, the two kinds alternating one by
//! one on the same nodes so that both see the same load.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use quorumlock::{Redlock, Retry};

use crate::measure::{micros, Spread, Summary};
use crate::{PERMITS, TTL};

/// Sizes of the free part.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    pub rounds: usize,
    /// Cycles of each kind per round.
    pub per_round: usize,
    /// Untimed cycles of each kind before a round.
    pub warmup: usize,
}

/// One round's latencies of each kind.
#[derive(Debug, Clone, Copy)]
pub struct Round {
    pub round: usize,
    pub lock: Summary,
    pub permit: Summary,
    pub fenced_lock: Summary,
    pub fenced_permit: Summary,
    /// A diagnostic pair: the lock against a permit of a semaphore of one
    /// permit (no other slots to release after the grant).
    pub single_lock: Summary,
    pub single_permit: Summary,
}

impl Round {
    pub fn rows(&self) -> [(&'static str, Summary); 6] {
        [
            ("lock", self.lock),
            ("permit", self.permit),
            ("fenced-lock", self.fenced_lock),
            ("fenced-permit", self.fenced_permit),
            ("single-lock", self.single_lock),
            ("single-permit", self.single_permit),
        ]
    }
}

/// What one cycle takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cycle {
    Lock,
    /// One permit of a semaphore of this many.
    Permit(u32),
}

/// One cycle: one acquire attempt, then release; its duration, or the
/// error when it failed (e.g. a node stalled past the timeout on a loaded
/// machine: left out of the samples and reported).
async fn cycle(
    rl: &Redlock,
    what: Cycle,
    fenced: bool,
    name: &str,
) -> Result<Duration, quorumlock::Error> {
    let began = Instant::now();
    match what {
        Cycle::Lock => {
            let mut req = rl.lock(name, TTL).retry(Retry::Times(0));
            if fenced {
                req = req.fenced();
            }
            let lock = req.acquire().await?;
            lock.release().await?;
        }
        Cycle::Permit(permits) => {
            let mut req = rl.semaphore(name, permits, TTL).retry(Retry::Times(0));
            if fenced {
                req = req.fenced();
            }
            let permit = req.acquire().await?;
            permit.release().await?;
        }
    }
    Ok(began.elapsed())
}

/// `n` cycles of the lock and `n` of one permit of a semaphore of
/// `of`, alternating (the order of each pair flips every time).
async fn pairs(
    rl: &Redlock,
    n: usize,
    of: u32,
    fenced: bool,
    tag: &str,
) -> (Vec<Duration>, Vec<Duration>) {
    let lock_name = format!("bench:sem:lock:{tag}");
    let sem_name = format!("bench:sem:permit:{of}:{tag}");
    let (mut locks, mut permits) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n {
        let order = if i % 2 == 0 {
            [Cycle::Lock, Cycle::Permit(of)]
        } else {
            [Cycle::Permit(of), Cycle::Lock]
        };
        for what in order {
            let (samples, name) = match what {
                Cycle::Lock => (&mut locks, &lock_name),
                Cycle::Permit(_) => (&mut permits, &sem_name),
            };
            match cycle(rl, what, fenced, name).await {
                Ok(took) => samples.push(took),
                Err(e) => {
                    eprintln!("a {what:?} cycle failed (fenced: {fenced}), left out: {e}");
                    // Whatever it left expires or is released: a fresh
                    // name is not needed, the next attempt waits for none.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }
    (locks, permits)
}

/// Every round on one client connected to `urls`.
pub async fn run(urls: &[String], plan: Plan) -> Vec<Round> {
    let rl = quorumlock::Builder::new(urls.to_vec())
        .build()
        .await
        .expect("build quorumlock");
    let tag = format!("{:08x}", rand::random::<u32>());
    let mut rounds = Vec::new();
    for round in 1..=plan.rounds {
        let _ = pairs(&rl, plan.warmup, PERMITS, false, &tag).await;
        let _ = pairs(&rl, plan.warmup, PERMITS, true, &tag).await;
        let _ = pairs(&rl, plan.warmup, 1, false, &tag).await;
        let (lock, permit) = pairs(&rl, plan.per_round, PERMITS, false, &tag).await;
        let (fenced_lock, fenced_permit) = pairs(&rl, plan.per_round, PERMITS, true, &tag).await;
        let (single_lock, single_permit) = pairs(&rl, plan.per_round, 1, false, &tag).await;
        let r = Round {
            round,
            lock: Summary::of(&lock),
            permit: Summary::of(&permit),
            fenced_lock: Summary::of(&fenced_lock),
            fenced_permit: Summary::of(&fenced_permit),
            single_lock: Summary::of(&single_lock),
            single_permit: Summary::of(&single_permit),
        };
        eprintln!(
            "free round {round}: p50 lock {:.0} µs, permit {:.0} µs; fenced {:.0} / {:.0} µs",
            micros(r.lock.p50),
            micros(r.permit.p50),
            micros(r.fenced_lock.p50),
            micros(r.fenced_permit.p50)
        );
        rounds.push(r);
    }
    rounds
}

/// The markdown table: per kind the median over rounds of p50, p99 and
/// mean, and the permit's ratio to the lock (median of the per-round
/// ratios, with their range).
pub fn table(rounds: &[Round]) -> String {
    let mut out = String::from(
        "| cycle (attempt + release) | p50 µs | p99 µs | mean µs | permit / lock, p50 (range) | permit / lock, mean (range) |\n|---|---|---|---|---|---|\n",
    );
    let med = |f: &dyn Fn(&Round) -> f64| Spread::of(&rounds.iter().map(f).collect::<Vec<_>>());
    type Pick = fn(&Round) -> Summary;
    let kinds: [(&str, &str, Pick, Pick); 3] = [
        ("plain", "permit, L = 4", |r| r.lock, |r| r.permit),
        (
            "fenced",
            "permit, L = 4",
            |r| r.fenced_lock,
            |r| r.fenced_permit,
        ),
        (
            "plain",
            "permit, L = 1",
            |r| r.single_lock,
            |r| r.single_permit,
        ),
    ];
    for (label, permits, lock, permit) in kinds {
        for (what, pick) in [("lock", lock), (permits, permit)] {
            let p50 = med(&|r| micros(pick(r).p50));
            let p99 = med(&|r| micros(pick(r).p99));
            let mean = med(&|r| micros(pick(r).mean));
            let (r50, rmean) = if what != "lock" {
                let r50 = med(&|r| micros(permit(r).p50) / micros(lock(r).p50));
                let rmean = med(&|r| micros(permit(r).mean) / micros(lock(r).mean));
                (
                    format!("{:.2}× ({:.2}–{:.2})", r50.median, r50.min, r50.max),
                    format!("{:.2}× ({:.2}–{:.2})", rmean.median, rmean.min, rmean.max),
                )
            } else {
                (String::new(), String::new())
            };
            let _ = writeln!(
                out,
                "| {label} {what} | {:.0} | {:.0} | {:.0} | {r50} | {rmean} |",
                p50.median, p99.median, mean.median
            );
        }
    }
    out
}
