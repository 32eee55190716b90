//! A job service: `POST /jobs/NAME` answers `202 Accepted` as soon as the
//! job's lock is held, and the job runs in the background under
//! `Lock::run` — renewed while it runs, stopped if the lock is lost,
//! released at its end; `409 Conflict` while another instance runs it;
//! `503 Service Unavailable` when too few nodes answer. `GET /metrics`
//! shows the client's counters, `GET /healthz` whether a quorum of nodes
//! is ready.
//!
//! ```text
//! cargo run --example job_service &
//! curl -si -X POST http://127.0.0.1:8080/jobs/reindex   # 202
//! curl -si -X POST http://127.0.0.1:8080/jobs/reindex   # 409 while it runs
//! curl -s http://127.0.0.1:8080/metrics
//! ```
//!
//! Listens on `QUORUMLOCK_JOBS_ADDR` (default `127.0.0.1:8080`) for
//! `QUORUMLOCK_JOBS_SERVE_SECS` (default 30). Nodes: `QUORUMLOCK_NODES` if
//! set, else five local `redis-server`s.

mod common;
#[path = "common/jobs.rs"]
mod jobs;

use std::process::ExitCode;
use std::time::Duration;

use tokio::net::TcpListener;

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("job_service: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), String> {
    let nodes = common::Nodes::get()?;
    let redlock = quorumlock::Builder::new(nodes.urls.clone())
        .build()
        .await
        .map_err(|e| e.to_string())?;
    let addr = std::env::var("QUORUMLOCK_JOBS_ADDR").unwrap_or_else(|_| "127.0.0.1:8080".into());
    let secs: u64 = std::env::var("QUORUMLOCK_JOBS_SERVE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(30);
    let listener = TcpListener::bind(&addr)
        .await
        .map_err(|e| format!("bind {addr}: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    println!("serving on http://{addr} for {secs} s");
    let service = jobs::Service::new(redlock, Duration::from_secs(10), Duration::from_secs(20));
    match tokio::time::timeout(Duration::from_secs(secs), jobs::serve(listener, service)).await {
        Ok(Err(e)) => Err(format!("serve: {e}")),
        _ => Ok(()),
    }
}
