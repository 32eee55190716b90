//! A job that runs longer than its lock's TTL, renewed in the background —
//! and what happens when the lock is lost anyway.
//!
//! ```text
//! cargo run --example long_job
//! ```
//!
//! Part 1: a 1 s TTL lock is held for 3.5 s of work: the renewal extends it
//! every TTL/3 and the work finishes inside the lock.
//! Part 2: while the same job runs, the lock's keys vanish on a majority of
//! nodes (as after a clock jump or an operator's FLUSHALL). The next renewal
//! is refused, the lost-lock signal fires, `LockRequest::run` drops the work at
//! once and returns a lost-lock error.
//!
//! Nodes: `QUORUMLOCK_NODES` if set, else five local `redis-server`s.

mod common;

use std::process::ExitCode;
use std::time::{Duration, Instant};

const RESOURCE: &str = "report:quarterly";
const TTL: Duration = Duration::from_secs(1);

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("long_job: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Ten steps of 350 ms: 3.5 s of work under a 1 s TTL.
async fn job(t0: Instant, signal: quorumlock::LostSignal) -> u32 {
    let mut done = 0;
    for step in 1..=10 {
        tokio::time::sleep(Duration::from_millis(350)).await;
        done = step;
        println!(
            "{} step {step:>2}/10 done, lock valid for another {:?}",
            common::stamp(t0),
            signal.validity()
        );
    }
    done
}

async fn run() -> Result<(), String> {
    let nodes = common::Nodes::get()?;
    let redlock = quorumlock::Builder::new(nodes.urls.clone())
        .build()
        .await
        .map_err(|e| e.to_string())?;
    let t0 = Instant::now();

    println!("== part 1: 3.5 s of work under a {TTL:?} TTL, renewed every TTL/3");
    let steps = redlock
        .lock(RESOURCE, TTL)
        .run(|signal| job(t0, signal))
        .await
        .map_err(|e| format!("part 1 should have finished: {e}"))?;
    let renewals = redlock.stats().leases.renewals;
    println!(
        "{} finished all {steps} steps; {renewals} renewals kept the lock\n",
        common::stamp(t0)
    );
    if steps != 10 || renewals < 3 {
        return Err(format!(
            "expected 10 steps and at least 3 renewals, got {steps} and {renewals}"
        ));
    }

    println!("== part 2: the same job, but the keys vanish on 3 of 5 nodes after 1.2 s");
    let urls = nodes.urls.clone();
    let vandal = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(1200)).await;
        for url in urls.iter().take(3) {
            if let Ok(client) = redis::Client::open(url.as_str()) {
                if let Ok(mut conn) = client.get_multiplexed_async_connection().await {
                    let _: Result<i64, _> =
                        redis::cmd("DEL").arg(RESOURCE).query_async(&mut conn).await;
                }
            }
        }
        println!("{} (keys deleted on 3 of 5 nodes)", common::stamp(t0));
    });
    let t1 = Instant::now();
    let outcome = redlock
        .lock(RESOURCE, TTL)
        .run(|signal| job(t0, signal))
        .await;
    let _ = vandal.await;
    match outcome {
        Err(e) if e.is_lost() => {
            println!(
                "{} the work was stopped after {:.1}s: {e}",
                common::stamp(t0),
                t1.elapsed().as_secs_f64()
            );
            println!("the job must not touch the resource any more; a fenced write would be refused anyway.");
            Ok(())
        }
        Err(e) => Err(format!("unexpected error: {e}")),
        Ok(steps) => Err(format!("the job ran all {steps} steps without its lock")),
    }
}
