//! One invoice run per night, with three servers firing the job at once.
//!
//! ```text
//! cargo run --example nightly_invoice
//! ```
//!
//! Night 1: three server processes start the nightly invoice job at the
//! same moment; one takes the lock and sends the invoices, the others skip.
//! Night 2: the winner crashes mid-job without releasing. A retry while its
//! lock is still alive skips; once the lock's TTL has run out, the next
//! retry takes it and finishes the run.
//!
//! Nodes: `QUORUMLOCK_NODES` if set, else five local `redis-server`s.

mod common;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const RESOURCE: &str = "invoice:nightly";
/// Short so the demo shows expiry quickly; a real nightly job would use
/// something like 10 minutes.
const TTL: Duration = Duration::from_secs(3);
const JOB: Duration = Duration::from_millis(1500);

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--server") {
        return server(&args[2..]);
    }
    match orchestrate() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nightly_invoice: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Starts the nodes and plays the two nights with real processes.
fn orchestrate() -> Result<(), String> {
    let nodes = common::Nodes::get()?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let log = dir.path().join("invoices.log");
    println!("five Redis nodes: {}", nodes.env_value());
    println!("lock {RESOURCE:?}, TTL {TTL:?}; each server runs `SET {RESOURCE} <token> NX PX {}` on all five\n", TTL.as_millis());

    println!("== night 1: servers 1, 2 and 3 fire the job at 02:00");
    fire(&nodes, &log, "night-1", "normal")?;
    let sent = count(&log, "night-1 sent")?;
    println!("-> invoices sent {sent} time(s)\n");
    if sent != 1 {
        return Err(format!("night 1: expected exactly one run, got {sent}"));
    }

    println!("== night 2: the winner crashes mid-job (no release)");
    fire(&nodes, &log, "night-2", "crash")?;
    let started = count(&log, "night-2 started")?;
    let crashed_at = Instant::now();
    if started != 1 || count(&log, "night-2 sent")? != 0 {
        return Err("night 2: expected one started, unfinished run".into());
    }
    println!("-> one run started and crashed; its lock stays until the TTL runs out\n");

    println!("== 02:01: the retry fires while the crashed server's lock is alive");
    fire(&nodes, &log, "night-2-retry-early", "normal")?;
    let early = count(&log, "night-2-retry-early sent")?;
    println!("-> invoices sent {early} time(s): the crashed run still owns the night\n");
    if early != 0 {
        return Err("the lock was taken while the crashed holder's TTL was alive".into());
    }

    let wait = (TTL + Duration::from_millis(300)).saturating_sub(crashed_at.elapsed());
    println!("   (waiting {wait:?} for the TTL to free the lock)");
    std::thread::sleep(wait);
    println!("== 02:05: the retry fires again, after the TTL");
    fire(&nodes, &log, "night-2-retry", "normal")?;
    let late = count(&log, "night-2-retry sent")?;
    println!("-> invoices sent {late} time(s)\n");
    if late != 1 {
        return Err(format!(
            "retry after expiry: expected exactly one run, got {late}"
        ));
    }
    println!("every night ran exactly once.");
    Ok(())
}

/// Runs three server processes that start the job at the same instant.
fn fire(nodes: &common::Nodes, log: &Path, night: &str, mode: &str) -> Result<(), String> {
    let start_at = unix_ms() + 400;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let children: Vec<_> = (1..=3)
        .map(|i| {
            Command::new(&exe)
                .args(["--server", &format!("server-{i}"), night, mode])
                .arg(log)
                .arg(start_at.to_string())
                .env("QUORUMLOCK_NODES", nodes.env_value())
                .spawn()
                .map_err(|e| e.to_string())
        })
        .collect::<Result<_, _>>()?;
    for mut child in children {
        child.wait().map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn count(log: &Path, what: &str) -> Result<usize, String> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    Ok(text.lines().filter(|l| l.ends_with(what)).count())
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// One server: waits for the agreed instant, then tries the job.
fn server(args: &[String]) -> ExitCode {
    let [name, night, mode, log, start_at] = args else {
        eprintln!("usage: --server NAME NIGHT MODE LOG START_AT_MS");
        return ExitCode::FAILURE;
    };
    let start_at: u64 = start_at.parse().unwrap_or(0);
    let log = PathBuf::from(log);
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("{name}: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let redlock = match quorumlock::Builder::from_env("QUORUMLOCK_NODES")
            .build()
            .await
        {
            Ok(r) => r,
            Err(e) => {
                eprintln!("{name}: {e}");
                return ExitCode::FAILURE;
            }
        };
        let now = unix_ms();
        if start_at > now {
            tokio::time::sleep(Duration::from_millis(start_at - now)).await;
        }
        let t0 = Instant::now();
        match redlock.acquire(RESOURCE, TTL).await {
            Ok(lock) => {
                println!(
                    "  {name}: got the lock (valid {:?}), sending invoices…",
                    lock.validity()
                );
                append(&log, &format!("{name} {night} started"));
                if mode == "crash" {
                    tokio::time::sleep(JOB / 3).await;
                    println!("  {name}: CRASH in the middle of the job (the lock is not released)");
                    std::process::exit(3);
                }
                tokio::time::sleep(JOB).await;
                if lock.validity().is_zero() {
                    println!("  {name}: the lock expired before the job finished; not recording");
                    return ExitCode::FAILURE;
                }
                append(&log, &format!("{name} {night} sent"));
                match lock.release().await {
                    Ok(()) => println!(
                        "  {name}: invoices sent, lock released after {:?}",
                        t0.elapsed()
                    ),
                    Err(e) => println!("  {name}: invoices sent; release: {e}"),
                }
                ExitCode::SUCCESS
            }
            Err(e) if e.is_contended() => {
                println!("  {name}: lock held by another server, skipping tonight's run");
                ExitCode::SUCCESS
            }
            Err(e) => {
                println!("  {name}: cannot reach a quorum ({e}); skipping");
                ExitCode::FAILURE
            }
        }
    })
}

fn append(log: &Path, line: &str) {
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
    {
        let _ = writeln!(f, "{line}");
    }
}
