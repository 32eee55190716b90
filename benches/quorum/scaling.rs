//! The scaling curves: latency and throughput against the number of nodes
//! and against the number of concurrent tasks. (Against the number of
//! waiting processes: `waiters.rs`.)

use std::time::{Duration, Instant};

use crate::contenders::{Contender, Kind, TTL};
use crate::measure::{Spread, Summary};
use crate::scenarios::{self, Sampling};

/// One point of a curve for one contender.
#[derive(Debug, Clone)]
pub struct ScalePoint {
    /// `nodes` (x = N, latency one cycle at a time, throughput with a fixed
    /// number of tasks) or `tasks` (x = concurrent tasks at a fixed N,
    /// latency of every cycle under that load).
    pub curve: &'static str,
    pub x: usize,
    pub nodes: usize,
    pub tasks: usize,
    pub kind: Kind,
    /// Acquire+release latency, every sample pooled.
    pub latency: Summary,
    /// Lock cycles per second, per round.
    pub rate: Spread,
    pub errors: u64,
}

/// How a curve is sampled.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// Latency one cycle at a time (the node curve).
    pub latency: Sampling,
    /// Tasks of the node curve's throughput.
    pub tasks: usize,
    pub window: Duration,
    pub rounds: usize,
}

/// One point of the node curve: `contenders` connected to N nodes.
pub async fn nodes_point(contenders: &[Contender], nodes: usize, plan: Plan) -> Vec<ScalePoint> {
    let lat = scenarios::latency(contenders, plan.latency, "bench:scale-nodes").await;
    let tp = scenarios::throughput(contenders, plan.tasks, plan.window, plan.rounds).await;
    lat.into_iter()
        .map(|l| {
            let t = tp.iter().find(|t| t.kind == l.kind);
            ScalePoint {
                curve: "nodes",
                x: nodes,
                nodes,
                tasks: plan.tasks,
                kind: l.kind,
                latency: l.pooled,
                rate: t.map(|t| t.rate).unwrap_or_default(),
                errors: l.errors as u64 + t.map_or(0, |t| t.errors),
            }
        })
        .collect()
}

/// One point of the task curve: `tasks` tasks on distinct resources for
/// `plan.window`, `plan.rounds` rounds interleaved; every cycle timed.
pub async fn tasks_point(
    contenders: &[Contender],
    nodes: usize,
    tasks: usize,
    plan: Plan,
) -> Vec<ScalePoint> {
    let n = contenders.len();
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); n];
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); n];
    let mut errors = vec![0u64; n];
    for round in 0..plan.rounds {
        for step in 0..n {
            let i = (round + step) % n;
            let (done, failed, s) = timed_window(&contenders[i], tasks, plan.window).await;
            rates[i].push(done as f64 / plan.window.as_secs_f64());
            errors[i] += failed;
            samples[i].extend(s);
        }
    }
    (0..n)
        .map(|i| ScalePoint {
            curve: "tasks",
            x: tasks,
            nodes,
            tasks,
            kind: contenders[i].kind(),
            latency: Summary::of(&samples[i]),
            rate: Spread::of(&rates[i]),
            errors: errors[i],
        })
        .collect()
}

/// `tasks` tasks, each cycling on its own resource until `window` is over;
/// (cycles done, failed, the duration of every successful cycle).
async fn timed_window(c: &Contender, tasks: usize, window: Duration) -> (u64, u64, Vec<Duration>) {
    let until = Instant::now() + window;
    let tag = rand::random::<u32>();
    let handles: Vec<_> = (0..tasks)
        .map(|t| {
            let c = c.clone();
            let key = format!("bench:scale-tasks:{}:{tag:08x}:{t}", c.kind().name());
            tokio::spawn(async move {
                let (mut samples, mut failed) = (Vec::new(), 0u64);
                while Instant::now() < until {
                    let start = Instant::now();
                    let ok = c.cycle(&key, TTL).await.is_ok();
                    let end = Instant::now();
                    if end > until {
                        break;
                    }
                    if ok {
                        samples.push(end - start);
                    } else {
                        failed += 1;
                    }
                }
                (samples, failed)
            })
        })
        .collect();
    let (mut all, mut failed) = (Vec::new(), 0u64);
    for h in handles {
        if let Ok((s, f)) = h.await {
            all.extend(s);
            failed += f;
        }
    }
    (all.len() as u64, failed, all)
}
