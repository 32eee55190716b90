//! quorumlock's counters on a Prometheus `/metrics` endpoint (feature
//! `metrics`, exporter `metrics-exporter-prometheus`).
//!
//! ```text
//! cargo run --features metrics --example prometheus
//! QUORUMLOCK_METRICS_SERVE_SECS=60 cargo run --features metrics --example prometheus &
//! curl -s http://127.0.0.1:9464/metrics | grep quorumlock_
//! ```
//!
//! Installs the recorder (before `build()`, so every node registers its
//! series), serves `/metrics` on `QUORUMLOCK_METRICS_ADDR` (default
//! `127.0.0.1:9464`), runs a short workload — locks taken, refused,
//! renewed, released; permits of a semaphore taken, refused, released; an
//! election won, a second campaign refused, the leadership resigned —
//! then scrapes its own endpoint over HTTP and prints the quorumlock lines
//! (the permits under their own series, `quorumlock_permit_*` and
//! `quorumlock_permits_held`, the elections under theirs,
//! `quorumlock_election_*` and `quorumlock_elections_held`). It keeps
//! serving for `QUORUMLOCK_METRICS_SERVE_SECS` (default 0) and then ends.
//!
//! Nodes: `QUORUMLOCK_NODES` if set, else five local `redis-server`s.

mod common;

use std::process::ExitCode;
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use quorumlock::Renewal;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const TTL: Duration = Duration::from_secs(2);

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("prometheus: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    // 1. The recorder first: nodes register their series in `build()`.
    //    Each histogram with the buckets `stats()` uses.
    let mut builder = PrometheusBuilder::new();
    for metric in quorumlock::metrics::METRICS {
        if let Some(buckets) = metric.buckets {
            builder = builder.set_buckets_for_metric(Matcher::Full(metric.name.into()), buckets)?;
        }
    }
    let handle = builder.install_recorder()?;
    quorumlock::metrics::describe();

    // 2. The endpoint.
    let addr = std::env::var("QUORUMLOCK_METRICS_ADDR").unwrap_or_else(|_| "127.0.0.1:9464".into());
    let listener = TcpListener::bind(&addr).await?;
    let addr = listener.local_addr()?;
    tokio::spawn(serve(listener, handle));
    println!("serving http://{addr}/metrics");

    // 3. Some work to count.
    let nodes = common::Nodes::get()?;
    let redlock = quorumlock::Builder::new(nodes.urls.clone())
        .retry(quorumlock::Retry::Times(0))
        .build()
        .await?;
    for round in 0..3 {
        let resource = format!("metrics-demo:{round}");
        let lock = redlock.acquire(&resource, TTL).await?;
        let refused = redlock.try_acquire(&resource, TTL).await;
        assert!(refused.is_err_and(|e| e.is_contended()));
        let signal = lock.auto_renew(Renewal::every(Duration::from_millis(200)))?;
        tokio::time::sleep(Duration::from_millis(500)).await;
        lock.release().await?;
        println!(
            "round {round}: acquired, refused a second holder, renewed, released ({:?})",
            signal.kind()
        );
    }

    // Permits: counted under the permit series, not the lock series.
    let permits = redlock
        .semaphore("metrics-demo:pool", 3, TTL)
        .take(2)
        .acquire()
        .await?;
    let refused = redlock
        .semaphore("metrics-demo:pool", 3, TTL)
        .take(2)
        .acquire()
        .await;
    assert!(refused.is_err_and(|e| e.is_contended()));
    println!(
        "semaphore: {} of {} permits taken, 2 more refused",
        permits.permits(),
        permits.limit()
    );
    permits.release().await?;

    // Elections: counted under the election series.
    let leadership = redlock.campaign("metrics-demo:leader", TTL).lead().await?;
    let refused = redlock
        .campaign("metrics-demo:leader", TTL)
        .retry(quorumlock::Retry::Times(0))
        .lead()
        .await;
    assert!(refused.is_err_and(|e| e.is_contended()));
    println!(
        "election: led in epoch {}, a second campaign refused",
        leadership.epoch()
    );
    leadership.resign().await?;

    // 4. A scrape, over HTTP like Prometheus does it.
    let text = scrape(addr).await?;
    println!("--- GET /metrics (quorumlock_ lines, first node) ---");
    let first = redlock.node_labels()[0].clone();
    for line in text.lines() {
        let node_line = line.contains(&format!("node=\"{first}\""));
        let client_line = [
            "quorumlock_lock",
            "quorumlock_permit",
            "quorumlock_election",
        ]
        .iter()
        .any(|p| line.starts_with(p));
        if (node_line && !line.contains("_bucket")) || client_line {
            println!("{line}");
        }
    }

    let serve_for: u64 = std::env::var("QUORUMLOCK_METRICS_SERVE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    if serve_for > 0 {
        println!("serving for {serve_for} s more");
        tokio::time::sleep(Duration::from_secs(serve_for)).await;
    }
    Ok(())
}

/// A minimal HTTP/1.0 server: every request gets the current text.
async fn serve(listener: TcpListener, handle: PrometheusHandle) {
    loop {
        let Ok((mut conn, _)) = listener.accept().await else {
            continue;
        };
        let body = handle.render();
        tokio::spawn(async move {
            // Read the request head (bounded), then answer.
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
                match tokio::time::timeout(Duration::from_secs(5), conn.read(&mut buf)).await {
                    Ok(Ok(n)) if n > 0 => head.extend_from_slice(&buf[..n]),
                    _ => return,
                }
            }
            let reply = format!(
                "HTTP/1.0 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            let _ = conn.write_all(reply.as_bytes()).await;
            let _ = conn.shutdown().await;
        });
    }
}

async fn scrape(addr: std::net::SocketAddr) -> Result<String, Box<dyn std::error::Error>> {
    let mut conn = TcpStream::connect(addr).await?;
    conn.write_all(b"GET /metrics HTTP/1.0\r\nhost: localhost\r\n\r\n")
        .await?;
    let mut reply = String::new();
    conn.read_to_string(&mut reply).await?;
    let (_, body) = reply.split_once("\r\n\r\n").ok_or("no HTTP body")?;
    Ok(body.to_owned())
}
