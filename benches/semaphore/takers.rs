//! Concurrent takers of free permits: `n` clients (8, then 64), each in a
//! loop taking one permit of one semaphore of `L = 64` with a single
//! attempt (`Retry::Times(0)`) and releasing it at once, for a window;
//! fenced and plain in turn, on the same nodes. With `n ≤ L` a permit is
//! always free, so every refusal is a conflict the protocol made: fenced
//! takers that proposed the same token refused each other before a
//! permit's token named its slot (`docs/fencing.md`, "Permits").

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use quorumlock::{Redlock, Retry};

use crate::measure::{micros, Summary};
use crate::TTL;

/// Sizes of the takers part.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// Takers at once, one run each.
    pub takers: &'static [usize],
    /// `L`.
    pub permits: u32,
    /// How long the takers loop.
    pub window: Duration,
}

/// One run: `takers` at once, fenced or not.
#[derive(Debug, Clone, Copy)]
pub struct Run {
    pub takers: usize,
    pub fenced: bool,
    /// Granted cycles: the acquire and the release.
    pub cycles: Summary,
    pub refused: usize,
    pub per_s: f64,
}

impl Run {
    /// Share of attempts granted, in percent.
    pub fn granted(&self) -> f64 {
        let tried = self.cycles.n + self.refused;
        100.0 * self.cycles.n as f64 / tried.max(1) as f64
    }
}

/// One taker's loop until `end`: the granted cycles' durations and the
/// refusals.
async fn take(
    rl: Redlock,
    name: String,
    permits: u32,
    fenced: bool,
    end: Instant,
) -> (Vec<Duration>, usize) {
    let (mut cycles, mut refused) = (Vec::new(), 0);
    while Instant::now() < end {
        let began = Instant::now();
        let mut req = rl.semaphore(&name, permits, TTL).retry(Retry::Times(0));
        if fenced {
            req = req.fenced();
        }
        match req.acquire().await {
            Ok(permit) => {
                let released = permit.release().await;
                if released.is_ok() {
                    cycles.push(began.elapsed());
                }
            }
            Err(_) => refused += 1,
        }
    }
    (cycles, refused)
}

/// Every run, plain then fenced for each number of takers, each taker a
/// client of its own connected to `urls`.
pub async fn run(urls: &[String], plan: Plan) -> Vec<Run> {
    let most = plan.takers.iter().copied().max().unwrap_or(0);
    let mut clients = Vec::with_capacity(most);
    for _ in 0..most {
        let rl = quorumlock::Builder::new(urls.to_vec())
            .build()
            .await
            .expect("build quorumlock");
        clients.push(rl);
    }
    let tag = format!("{:08x}", rand::random::<u32>());
    let mut runs = Vec::new();
    for &takers in plan.takers {
        for fenced in [false, true] {
            let name = format!("bench:sem:takers:{takers}:{fenced}:{tag}");
            let start = Arc::new(tokio::sync::Barrier::new(takers));
            let mut tasks = Vec::with_capacity(takers);
            for rl in clients.iter().take(takers) {
                let (rl, name, start) = (rl.clone(), name.clone(), start.clone());
                let (permits, window) = (plan.permits, plan.window);
                tasks.push(tokio::spawn(async move {
                    start.wait().await;
                    take(rl, name, permits, fenced, Instant::now() + window).await
                }));
            }
            let (mut cycles, mut refused) = (Vec::new(), 0);
            for task in tasks {
                let (c, r) = task.await.expect("taker");
                cycles.extend(c);
                refused += r;
            }
            let r = Run {
                takers,
                fenced,
                cycles: Summary::of(&cycles),
                refused,
                per_s: cycles.len() as f64 / plan.window.as_secs_f64(),
            };
            eprintln!(
                "takers {takers}, fenced {fenced}: {:.0} cycles/s, {:.1}% granted, p50 {:.0} µs",
                r.per_s,
                r.granted(),
                micros(r.cycles.p50)
            );
            runs.push(r);
        }
    }
    runs
}

/// The markdown table.
pub fn table(runs: &[Run], plan: Plan) -> String {
    let mut out = format!(
        "| takers of L = {} | cycles / s | attempts granted | p50 µs | p99 µs |\n|---|---|---|---|---|\n",
        plan.permits
    );
    for r in runs {
        let _ = writeln!(
            out,
            "| {} {} | {:.0} | {:.1}% | {:.0} | {:.0} |",
            r.takers,
            if r.fenced { "fenced" } else { "plain" },
            r.per_s,
            r.granted(),
            micros(r.cycles.p50),
            micros(r.cycles.p99)
        );
    }
    out
}
