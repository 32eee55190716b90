//! Contention by separate processes: `k` child processes (this binary
//! again, [`CHILD`] set), one client each, loop on one semaphore of `L`
//! permits — wait for a permit, hold it [`HOLD`], release, pause
//! [`THINK`] — and, in the next round, on one lock (the mutex, `L = 1`),
//! alternating.
//!
//! Each child stamps its events with CLOCK_MONOTONIC (one clock for the
//! machine) and reports them when the window ends; the parent merges them:
//! grants per second, and for every release made while another process
//! waited, the gap to the next grant (to whoever got it).

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use quorumlock::Retry;
use serde_json::{json, Value};

use crate::measure::{micros, mono_ns, Spread, Summary};
use crate::TTL;

/// Set in a child process: `permit` or `lock`.
pub const CHILD: &str = "QUORUMLOCK_SEM_CHILD";

/// How long a process holds what it got.
const HOLD: Duration = Duration::from_millis(1);
/// How long it pauses before asking again.
const THINK: Duration = Duration::from_millis(1);

/// Sizes of the process part.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    pub processes: usize,
    pub permits: u32,
    /// Rounds of each kind (semaphore, mutex), alternating.
    pub rounds: usize,
    pub window: Duration,
}

/// One round of one kind.
#[derive(Debug, Clone)]
pub struct Run {
    pub round: usize,
    /// `permits` or `mutex`.
    pub what: &'static str,
    pub grants_per_s: f64,
    /// From a release made while another process waited to the next grant.
    pub gap: Summary,
    /// The most holders seen at once (from the merged events).
    pub most_held: usize,
}

/// One wait of one process.
#[derive(Debug, Clone, Copy)]
struct Attempt {
    client: usize,
    since: u64,
    granted: Option<u64>,
    released: Option<u64>,
}

/// Every round: the semaphore and the mutex alternating, the order
/// flipping each round.
pub fn run(urls: &[String], plan: Plan) -> Vec<Run> {
    let mut runs = Vec::new();
    for round in 1..=plan.rounds {
        let order = if round % 2 == 1 {
            [plan.permits, 1]
        } else {
            [1, plan.permits]
        };
        for permits in order {
            let r = one(urls, plan, permits, round);
            eprintln!(
                "procs round {round} {}: {:.0} grants/s, next-grant gap p50 {:.0} µs p99 {:.0} µs ({} gaps), at most {} held",
                r.what,
                r.grants_per_s,
                micros(r.gap.p50),
                micros(r.gap.p99),
                r.gap.n,
                r.most_held
            );
            runs.push(r);
        }
    }
    runs
}

/// One window of `plan.processes` processes on a fresh name: a semaphore
/// of `permits`, or the mutex when `permits` is 1.
fn one(urls: &[String], plan: Plan, permits: u32, round: usize) -> Run {
    let exe = std::env::current_exe().expect("own path");
    let mode = if permits == 1 { "lock" } else { "permit" };
    let name = format!("bench:sem:procs:{mode}:{:08x}", rand::random::<u32>());
    let mut children: Vec<Child> = (0..plan.processes)
        .map(|_| {
            Command::new(&exe)
                .env(CHILD, mode)
                .env("QUORUMLOCK_SEM_NODES", urls.join(","))
                .env("QUORUMLOCK_SEM_NAME", &name)
                .env("QUORUMLOCK_SEM_PERMITS", permits.to_string())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("start a child process")
        })
        .collect();
    // Every child connected (and warmed up) before the window opens.
    let mut readers: Vec<_> = children
        .iter_mut()
        .map(|c| BufReader::new(c.stdout.take().expect("piped stdout")))
        .collect();
    for r in &mut readers {
        let mut line = String::new();
        while !line.starts_with("READY") {
            line.clear();
            assert!(
                r.read_line(&mut line).expect("read a child") > 0,
                "a child exited before it was ready"
            );
        }
    }
    let start = mono_ns();
    let until = start + plan.window.as_nanos() as u64;
    for c in &mut children {
        let mut stdin = c.stdin.take().expect("piped stdin");
        writeln!(stdin, "GO {until}").expect("start a child");
    }
    let mut attempts = Vec::new();
    for (client, (mut r, mut c)) in readers.into_iter().zip(children).enumerate() {
        let mut out = String::new();
        r.read_to_string(&mut out).expect("read a child's report");
        let status = c.wait().expect("wait for a child");
        let line = out
            .lines()
            .find_map(|l| l.strip_prefix("RESULT "))
            .unwrap_or_else(|| panic!("a child printed no result ({status})"));
        let report: Value = serde_json::from_str(line).expect("child JSON");
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
    let what = if permits == 1 { "mutex" } else { "permits" };
    analyse(what, round, &attempts, start, until)
}

/// Grants per second, next-grant gaps and the most holders at once.
fn analyse(what: &'static str, round: usize, attempts: &[Attempt], start: u64, until: u64) -> Run {
    let mut grants: Vec<u64> = attempts
        .iter()
        .filter_map(|a| a.granted)
        .filter(|&g| g >= start && g < until)
        .collect();
    grants.sort_unstable();
    let mut gaps = Vec::new();
    for a in attempts {
        let Some(at) = a.released.filter(|&r| r >= start && r < until) else {
            continue;
        };
        // Another process waiting at the release: began before it, not
        // granted until after it.
        let waiting = attempts
            .iter()
            .any(|b| b.client != a.client && b.since < at && b.granted.is_none_or(|g| g > at));
        if let Some(&next) = grants.get(grants.partition_point(|&g| g <= at)) {
            if waiting {
                gaps.push(Duration::from_nanos(next - at));
            }
        }
    }
    // Holders at once, from the stamps (a grant counts from its stamp to
    // its release's; overlapping stamps of different processes may count
    // one early, so this is an upper bound of the truth).
    let mut events: Vec<(u64, i32)> = attempts
        .iter()
        .filter_map(|a| Some((a.granted?, a.released?)))
        .flat_map(|(g, r)| [(g, 1), (r, -1)])
        .collect();
    events.sort_unstable_by_key(|&(t, d)| (t, d));
    let (mut now, mut most) = (0i32, 0i32);
    for (_, d) in events {
        now += d;
        most = most.max(now);
    }
    Run {
        round,
        what,
        grants_per_s: grants.len() as f64 / Duration::from_nanos(until - start).as_secs_f64(),
        gap: Summary::of(&gaps),
        most_held: most.max(0) as usize,
    }
}

/// The markdown table: per kind the median over rounds, with the range.
pub fn table(runs: &[Run], plan: Plan) -> String {
    let mut out = format!(
        "{} processes, hold {HOLD:?}, pause {THINK:?}, {:?} windows, {} rounds each\n\n\
         | contended | grants/s (range) | next-grant gap p50 µs (range) | p99 µs (range) | most held |\n\
         |---|---|---|---|---|\n",
        plan.processes, plan.window, plan.rounds
    );
    for (what, label) in [
        ("permits", format!("semaphore, L = {}", plan.permits)),
        ("mutex", "mutex (one lock)".to_owned()),
    ] {
        let mine: Vec<&Run> = runs.iter().filter(|r| r.what == what).collect();
        let spread =
            |f: &dyn Fn(&Run) -> f64| Spread::of(&mine.iter().map(|r| f(r)).collect::<Vec<_>>());
        let g = spread(&|r| r.grants_per_s);
        let p50 = spread(&|r| micros(r.gap.p50));
        let p99 = spread(&|r| micros(r.gap.p99));
        let most = mine.iter().map(|r| r.most_held).max().unwrap_or(0);
        let _ = writeln!(
            out,
            "| {label} | {:.0} ({:.0}–{:.0}) | {:.0} ({:.0}–{:.0}) | {:.0} ({:.0}–{:.0}) | {most} |",
            g.median, g.min, g.max, p50.median, p50.min, p50.max, p99.median, p99.min, p99.max
        );
    }
    out
}

/// The child's side: connect, say READY, wait for `GO <until>`, loop until
/// then, print every attempt.
pub fn child() {
    let mode = std::env::var(CHILD).unwrap_or_default();
    let env = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("{k}"));
    let urls: Vec<String> = env("QUORUMLOCK_SEM_NODES")
        .split(',')
        .map(str::to_owned)
        .collect();
    let name = env("QUORUMLOCK_SEM_NAME");
    let permits: u32 = env("QUORUMLOCK_SEM_PERMITS").parse().expect("permits");
    // One thread per process: many of them share the cores.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let rl = rt.block_on(async {
        let rl = quorumlock::Builder::new(urls)
            .build()
            .await
            .expect("build quorumlock");
        // Scripts loaded, connections warm: one untimed cycle elsewhere.
        let warm = format!("{name}:warmup:{:08x}", rand::random::<u32>());
        let lock = rl.acquire(&warm, TTL).await.expect("warm-up");
        lock.release().await.expect("warm-up release");
        rl
    });
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
            let wait = Retry::Until(until.saturating_duration_since(Instant::now()));
            let held = if mode == "lock" {
                rl.lock(&name, TTL)
                    .retry(wait)
                    .acquire()
                    .await
                    .map(Held::Lock)
            } else {
                rl.semaphore(&name, permits, TTL)
                    .retry(wait)
                    .acquire()
                    .await
                    .map(Held::Permit)
            };
            let Ok(held) = held else {
                attempts.push(json!([since]));
                break;
            };
            let granted = mono_ns();
            tokio::time::sleep(HOLD).await;
            let released = mono_ns();
            let _ = match held {
                Held::Lock(l) => l.release().await,
                Held::Permit(p) => p.release().await,
            };
            attempts.push(json!([since, granted, released]));
            tokio::time::sleep(THINK).await;
        }
        attempts
    });
    println!("RESULT {}", json!({ "attempts": attempts }));
}

/// What a child holds.
enum Held {
    Lock(quorumlock::Lock),
    Permit(quorumlock::Permit),
}
