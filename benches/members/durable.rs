//! The cost of durable votes: one Sentinel group (a master and one
//! replica) as the only member, cycles of one acquire attempt and a
//! release, one client per durability, the clients taking turns cycle by
//! cycle so that each sees the same load.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use quorumlock::{Builder, Durability, Redlock, Retry};

use crate::measure::{micros, Summary};

/// Long against every measured latency.
const TTL: Duration = Duration::from_secs(10);

/// Sizes of the part.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// Measured cycles per durability.
    pub cycles: usize,
    /// Measured cycles of a durability that waits for a replica's AOF
    /// (`WAITAOF` with replicas): each may wait up to a second.
    pub aof_replica_cycles: usize,
    /// Untimed cycles per durability first.
    pub warmup: usize,
}

/// One durability's cycles on one group.
#[derive(Debug, Clone)]
pub struct Row {
    /// The group's servers, as the table names them.
    pub group: String,
    pub durability: Option<Durability>,
    pub took: Summary,
    /// Cycles that failed (left out of `took`).
    pub failed: usize,
}

/// How a durability reads in the table.
pub fn shown(durability: Option<Durability>) -> String {
    match durability {
        None => "off".to_owned(),
        Some(Durability::Replicas(r)) => format!("`Replicas({r})` (WAIT {r})"),
        Some(Durability::Aof { local, replicas }) => format!(
            "`Aof {{ local: {local}, replicas: {replicas} }}` (WAITAOF {} {replicas})",
            u8::from(local)
        ),
    }
}

/// Every durability in `modes` on the group at `url` (its `replicas`
/// replicas), `group` naming it. A durability that does not wait for every
/// replica, which `build()` refuses for a group, is measured on the
/// group's master reached as a single server (`master`): the same
/// commands.
pub async fn run(
    group: &str,
    (url, master, replicas): (&str, &str, u32),
    modes: &[Option<Durability>],
    quarantine: Duration,
    plan: Plan,
) -> Vec<Row> {
    let mut clients = Vec::new();
    for &durability in modes {
        let every = matches!(
            durability,
            Some(Durability::Replicas(r) | Durability::Aof { replicas: r, .. }) if r == replicas
        );
        let client = Builder::new([if every { url } else { master }])
            .restart_quarantine(Some(quarantine))
            .durable_votes(durability)
            // A wait may block three quarters of it, less the server's
            // 100 ms tick: past the replica's once-a-second acknowledgement.
            .node_timeout(Duration::from_secs(2))
            .build()
            .await
            .unwrap_or_else(|e| panic!("a client with durable votes {durability:?}: {e}"));
        clients.push(client);
    }
    let tag = format!("{:08x}", rand::random::<u32>());
    let names: Vec<String> = (0..modes.len())
        .map(|i| format!("bench:durable:{tag}:{i}"))
        .collect();
    // Untimed, then measured cycles of each: one untimed of the slow one.
    let cycles: Vec<(usize, usize)> = modes
        .iter()
        .map(|m| match m {
            Some(Durability::Aof { replicas, .. }) if *replicas > 0 => (1, plan.aof_replica_cycles),
            _ => (plan.warmup, plan.cycles),
        })
        .collect();
    let mut took = vec![Vec::with_capacity(plan.cycles); modes.len()];
    let mut failed = vec![0; modes.len()];
    for i in 0..plan.warmup + plan.cycles {
        // Each client first in turn, while it has cycles left.
        for k in 0..modes.len() {
            let m = (i + k) % modes.len();
            let (warmup, measured) = cycles[m];
            if i >= warmup + measured {
                continue;
            }
            match cycle(&clients[m], &names[m]).await {
                Ok(d) if i >= warmup => took[m].push(d),
                Ok(_) => {}
                Err(e) => {
                    if failed[m] == 0 {
                        eprintln!("a cycle with durable votes {:?} failed: {e}", modes[m]);
                    }
                    failed[m] += 1;
                }
            }
        }
    }
    modes
        .iter()
        .zip(took.iter().zip(failed))
        .map(|(&durability, (took, failed))| Row {
            group: group.to_owned(),
            durability,
            took: Summary::of(took),
            failed,
        })
        .collect()
}

/// One attempt and its release: how long both took.
async fn cycle(rl: &Redlock, name: &str) -> Result<Duration, quorumlock::Error> {
    let began = Instant::now();
    let lock = rl.lock(name, TTL).retry(Retry::Times(0)).acquire().await?;
    lock.release().await?;
    Ok(began.elapsed())
}

/// The part's table; the cost is against durable votes off on the same
/// group.
pub fn table(rows: &[Row], plan: Plan) -> String {
    let mut out = format!(
        "{} cycles per durability after {} untimed ({} after 1 with WAITAOF to a replica), one group member\n\n\
         | group | durable votes | p50 | p99 | max | mean | mean − off | failed |\n|---|---|---|---|---|---|---|---|\n",
        plan.cycles, plan.warmup, plan.aof_replica_cycles
    );
    for r in rows {
        let off = rows
            .iter()
            .find(|o| o.group == r.group && o.durability.is_none())
            .map_or(0.0, |o| micros(o.took.mean));
        let _ = writeln!(
            out,
            "| {} | {} | {:.0} µs | {:.0} µs | {:.0} µs | {:.0} µs | {:+.0} µs | {} |",
            r.group,
            shown(r.durability),
            micros(r.took.p50),
            micros(r.took.p99),
            micros(r.took.max),
            micros(r.took.mean),
            micros(r.took.mean) - off,
            r.failed
        );
    }
    out
}
