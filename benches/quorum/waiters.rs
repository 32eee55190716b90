//! Contention by separate processes: `k` child processes (this binary
//! again, `QUORUMLOCK_BENCH_CHILD=waiter`), one client each, loop on one
//! resource: wait for the lock, hold it [`HOLD`], release, pause [`THINK`].
//!
//! Each child stamps its events with CLOCK_MONOTONIC (one clock for the
//! whole machine) and reports them when the window ends; the parent merges
//! them and measures, for every release made while someone was waiting,
//! the delay to the next grant (the hand-off latency when it went to a
//! client that was already waiting).

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::contenders::{Contender, Kind, TTL};
use crate::measure::{mono_ns, Summary};
use crate::scenarios::{Contention, HOLD, THINK};

/// One wait of one client: when it started waiting, when it got the lock
/// (None if the window ended first) and when it called release.
#[derive(Debug, Clone, Copy)]
struct Attempt {
    client: usize,
    since: u64,
    granted: Option<u64>,
    released: Option<u64>,
}

/// Runs `k` waiter processes of `kind` on one fresh resource for `window`.
pub fn run(kind: Kind, urls: &[String], k: usize, window: Duration) -> Contention {
    let exe = std::env::current_exe().expect("own path");
    let key = format!(
        "bench:waiters:{}:{k}:{:08x}",
        kind.name(),
        rand::random::<u32>()
    );
    let mut children: Vec<Child> = (0..k)
        .map(|_| {
            Command::new(&exe)
                .env("QUORUMLOCK_BENCH_CHILD", "waiter")
                .env("QUORUMLOCK_BENCH_KIND", kind.name())
                .env("QUORUMLOCK_BENCH_NODES", urls.join(","))
                .env("QUORUMLOCK_BENCH_KEY", &key)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("start a waiter process")
        })
        .collect();
    // Every child connected (and warmed up) before the window opens.
    let mut readers: Vec<BufReader<std::process::ChildStdout>> = children
        .iter_mut()
        .map(|c| BufReader::new(c.stdout.take().expect("piped stdout")))
        .collect();
    for r in &mut readers {
        let mut line = String::new();
        while !line.starts_with("READY") {
            line.clear();
            if r.read_line(&mut line).expect("read a waiter") == 0 {
                panic!(
                    "a {} waiter process exited before it was ready",
                    kind.name()
                );
            }
        }
    }
    let start = mono_ns();
    let until = start + window.as_nanos() as u64;
    for c in &mut children {
        let mut stdin = c.stdin.take().expect("piped stdin");
        writeln!(stdin, "GO {until}").expect("start a waiter");
    }
    let mut attempts = Vec::new();
    for (client, (r, mut c)) in readers.into_iter().zip(children).enumerate() {
        let mut out = String::new();
        let mut r = r;
        r.read_to_string(&mut out).expect("read a waiter's report");
        let status = c.wait().expect("wait for a waiter");
        let line = out
            .lines()
            .find_map(|l| l.strip_prefix("RESULT "))
            .unwrap_or_else(|| panic!("a {} waiter printed no result ({status})", kind.name()));
        let report: Value = serde_json::from_str(line).expect("waiter JSON");
        for a in report["attempts"].as_array().into_iter().flatten() {
            let at = |i: usize| a.get(i).and_then(Value::as_u64);
            if let Some(since) = at(0) {
                attempts.push(Attempt {
                    client,
                    since,
                    granted: at(1),
                    released: at(2),
                });
            }
        }
    }
    analyse(kind, k, &attempts, start, until)
}

/// Next grant, hand-off, wait and re-grabs from the merged attempts.
fn analyse(kind: Kind, k: usize, attempts: &[Attempt], start: u64, until: u64) -> Contention {
    let ns = Duration::from_nanos;
    let mut grants: Vec<(u64, usize, u64)> = attempts
        .iter()
        .filter_map(|a| a.granted.map(|g| (g, a.client, a.since)))
        .filter(|&(g, _, _)| g >= start && g < until)
        .collect();
    grants.sort_unstable();
    let waits: Vec<Duration> = grants.iter().map(|&(g, _, s)| ns(g - s)).collect();
    let mut releases: Vec<(u64, usize)> = attempts
        .iter()
        .filter_map(|a| a.released.map(|r| (r, a.client)))
        .filter(|&(r, _)| r >= start && r < until)
        .collect();
    releases.sort_unstable();
    let (mut next_grants, mut handoffs, mut regrabs) = (Vec::new(), Vec::new(), 0u64);
    for &(at, by) in &releases {
        // Someone else waiting at the release: started before it, not
        // granted until after it.
        let waiters = attempts
            .iter()
            .any(|a| a.client != by && a.since < at && a.granted.is_none_or(|g| g > at));
        let Some(&(g, client, since)) = grants.get(grants.partition_point(|&(g, _, _)| g <= at))
        else {
            continue;
        };
        if waiters {
            next_grants.push(ns(g - at));
            if client == by {
                regrabs += 1;
            }
        }
        if client != by && since < at {
            handoffs.push(ns(g - at));
        }
    }
    let mut holds: Vec<(u32, u64, u64)> = attempts
        .iter()
        .filter_map(|a| Some((1, a.granted?, a.released?)))
        .collect();
    let window = Duration::from_nanos(until - start);
    Contention {
        kind,
        k,
        grants_per_s: grants.len() as f64 / window.as_secs_f64(),
        next_grant: Summary::of(&next_grants),
        handoff: Summary::of(&handoffs),
        wait: Summary::of(&waits),
        regrabs: regrabs as f64 / grants.len().max(1) as f64,
        overlaps: crate::measure::overlaps(&mut holds, 1),
    }
}

/// The child's side: connect, say READY, wait for `GO <until>`, loop on the
/// resource until then, print every attempt.
pub fn child() {
    let kind = std::env::var("QUORUMLOCK_BENCH_KIND")
        .ok()
        .and_then(|k| Kind::parse(&k))
        .expect("QUORUMLOCK_BENCH_KIND");
    let urls: Vec<String> = std::env::var("QUORUMLOCK_BENCH_NODES")
        .expect("QUORUMLOCK_BENCH_NODES")
        .split(',')
        .map(str::to_owned)
        .collect();
    let key = std::env::var("QUORUMLOCK_BENCH_KEY").expect("QUORUMLOCK_BENCH_KEY");
    // One thread per process: many of them share two cores.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let c = rt.block_on(Contender::connect(kind, &urls));
    println!("READY");
    let _ = std::io::stdout().flush();
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    let until_ns: u64 = line
        .trim()
        .strip_prefix("GO ")
        .and_then(|v| v.parse().ok())
        .expect("GO <until>");
    let until = Instant::now() + Duration::from_nanos(until_ns.saturating_sub(mono_ns()));
    let attempts = rt.block_on(async move {
        let mut attempts = Vec::new();
        while Instant::now() < until {
            let since = mono_ns();
            let Some(held) = c.acquire_blocking(&key, TTL, until).await else {
                attempts.push(json!([since]));
                break;
            };
            let granted = mono_ns();
            tokio::time::sleep(HOLD).await;
            let released = mono_ns();
            c.release(&key, held).await;
            attempts.push(json!([since, granted, released]));
            tokio::time::sleep(THINK).await;
        }
        attempts
    });
    println!("RESULT {}", json!({ "attempts": attempts }));
}
