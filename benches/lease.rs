//! What automatic renewal costs, and how early the lost-lock signal warns.
//!
//! `cargo bench --bench lease` starts five local `redis-server`s through the
//! test harness and prints:
//!
//! - renewal overhead: commands per second per held lock, client CPU per
//!   renewal (all runtime threads, idle runtime subtracted), and the reply
//!   latency of the renewals;
//! - with three of five nodes hung (SIGSTOP) while renewing: how long before
//!   the end of validity the signal fired `Uncertain`, for the default
//!   margin and for a wider one.
//!
//! Under `cargo test --all-targets` it only says that it was skipped.

use quorumlock_testkit as support;

use std::time::{Duration, Instant};

use quorumlock::{LossKind, Redlock, Renewal};
use support::{unique, Cluster};

const LOCKS: usize = 200;
const WINDOW: Duration = Duration::from_secs(10);

/// CPU time used so far by every thread of this process, from the
/// scheduler's nanosecond counters.
fn cpu_time() -> Duration {
    let mut total = 0u64;
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for task in tasks.flatten() {
            let path = task.path().join("schedstat");
            if let Ok(text) = std::fs::read_to_string(path) {
                total += text
                    .split_whitespace()
                    .next()
                    .and_then(|ns| ns.parse::<u64>().ok())
                    .unwrap_or(0);
            }
        }
    }
    Duration::from_nanos(total)
}

fn total_commands(redlock: &Redlock) -> u64 {
    redlock.stats().nodes.iter().map(|n| n.commands).sum()
}

/// Replies per latency bucket, summed over the nodes.
fn buckets(redlock: &Redlock) -> Vec<(Duration, u64)> {
    let stats = redlock.stats();
    let mut sum: Vec<(Duration, u64)> = stats.nodes[0].latency.buckets.clone();
    for node in &stats.nodes[1..] {
        for (acc, b) in sum.iter_mut().zip(&node.latency.buckets) {
            acc.1 += b.1;
        }
    }
    sum
}

fn quantile(buckets: &[(Duration, u64)], q: f64) -> Duration {
    let total: u64 = buckets.iter().map(|b| b.1).sum();
    let rank = ((q * total as f64).ceil() as u64).max(1);
    let mut seen = 0;
    for &(bound, n) in buckets {
        seen += n;
        if seen >= rank {
            return bound;
        }
    }
    Duration::MAX
}

async fn overhead(cluster: &Cluster, ttl: Duration) {
    let redlock = cluster
        .builder()
        .node_timeout(Duration::from_millis(50))
        .build()
        .await
        .expect("build");
    let interval = ttl / 3;

    // Idle runtime over the same window, to subtract.
    let cpu0 = cpu_time();
    tokio::time::sleep(WINDOW).await;
    let idle = cpu_time() - cpu0;

    let mut locks = Vec::with_capacity(LOCKS);
    for i in 0..LOCKS {
        let lock = redlock
            .acquire(unique(&format!("bench-{i}")), ttl)
            .await
            .expect("acquire");
        lock.auto_renew(Renewal::default()).expect("auto_renew");
        locks.push(lock);
    }
    // Let the acquisitions' background work settle.
    tokio::time::sleep(interval).await;
    let (cmds0, renewals0, lat0, cpu0) = (
        total_commands(&redlock),
        redlock.stats().leases.renewals,
        buckets(&redlock),
        cpu_time(),
    );
    let start = Instant::now();
    tokio::time::sleep(WINDOW).await;
    let elapsed = start.elapsed();
    let cpu = (cpu_time() - cpu0).saturating_sub(idle);
    let stats = redlock.stats();
    let cmds = total_commands(&redlock) - cmds0;
    let renewals = stats.leases.renewals - renewals0;
    let lat: Vec<(Duration, u64)> = buckets(&redlock)
        .into_iter()
        .zip(lat0)
        .map(|((b, n), (_, m))| (b, n - m))
        .collect();
    for lock in locks {
        lock.release().await.expect("release");
    }

    let secs = elapsed.as_secs_f64();
    let per_lock = LOCKS as f64 * secs;
    println!("renewal overhead: {LOCKS} locks, TTL {ttl:?} (renewal every {interval:?}), 5 nodes, {secs:.1} s");
    println!(
        "  renewals: {renewals} ({:.3}/s per lock), failed: {}",
        renewals as f64 / per_lock,
        stats.leases.renewal_failures
    );
    println!(
        "  commands: {cmds} ({:.3}/s per lock; {:.2} per renewal)",
        cmds as f64 / per_lock,
        cmds as f64 / renewals.max(1) as f64
    );
    println!(
        "  client CPU: {cpu:?} above an idle runtime ({idle:?}) = {:.1} µs per renewal, \
         {:.4} % of a core per held lock",
        cpu.as_secs_f64() * 1e6 / renewals.max(1) as f64,
        cpu.as_secs_f64() * 100.0 / per_lock
    );
    println!(
        "  renewal reply latency: p50 ≤ {:?}, p99 ≤ {:?}",
        quantile(&lat, 0.5),
        quantile(&lat, 0.99)
    );
}

async fn uncertain_lead(cluster: &mut Cluster, margin: Option<Duration>, trials: usize) {
    let ttl = Duration::from_secs(2);
    let node_timeout = Duration::from_millis(50);
    let redlock = cluster
        .builder()
        .node_timeout(node_timeout)
        .build()
        .await
        .expect("build");
    let mut leads = Vec::new();
    for _ in 0..trials {
        let lock = redlock.acquire(unique("lead"), ttl).await.expect("acquire");
        let renewal = match margin {
            Some(m) => Renewal::default().margin(m),
            None => Renewal::default(),
        };
        let signal = lock.auto_renew(renewal).expect("auto_renew");
        tokio::time::sleep(Duration::from_millis(300)).await;
        for i in [0, 2, 4] {
            cluster.pause(i);
        }
        let kind = tokio::time::timeout(Duration::from_secs(10), signal.lost())
            .await
            .expect("fired");
        let fired_at = signal.fired_at().expect("fired");
        let lead = lock.deadline().saturating_duration_since(fired_at);
        assert_eq!(kind, LossKind::Uncertain, "{:?}", signal.reason());
        leads.push(lead);
        for i in [0, 2, 4] {
            cluster.resume(i);
        }
        let _ = lock.release().await;
    }
    leads.sort();
    let shown = margin.map_or_else(
        || "default (max(TTL/10, 2 × node timeout) = 200ms)".to_owned(),
        |m| format!("{m:?}"),
    );
    println!(
        "uncertain lead, 3 of 5 nodes hung, TTL {ttl:?}, node timeout {node_timeout:?}, margin {shown}: \
         min {:?}, median {:?}, max {:?} before the end of validity ({trials} trials)",
        leads[0],
        leads[leads.len() / 2],
        leads[leads.len() - 1]
    );
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("lease bench skipped (run it with `cargo bench --bench lease`)");
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let mut cluster = Cluster::local(5);
        overhead(&cluster, Duration::from_secs(3)).await;
        uncertain_lead(&mut cluster, None, 5).await;
        uncertain_lead(&mut cluster, Some(Duration::from_millis(500)), 5).await;
    });
}
