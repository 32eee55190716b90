//! The example job service (`examples/job_service.rs`), served here on
//! real nodes: 202 once the lock is held with the job running on in the
//! background, 409 while it runs, 503 when a majority of nodes is down,
//! 500 when the nodes refuse the client, and the job's lock released when
//! it ends.

use quorumlock_testkit as support;

#[path = "../examples/common/jobs.rs"]
mod jobs;

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::Duration;

use support::{eventually, unique, Cluster};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const SOON: Duration = Duration::from_secs(5);
/// The TTL of a job's lock; a job works for three of them.
const TTL: Duration = Duration::from_millis(1500);

/// Sends one request and returns the status code and body.
async fn request(addr: SocketAddr, method: &str, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let head = format!("{method} {path} HTTP/1.1\r\nHost: test\r\nContent-Length: 0\r\n\r\n");
    stream.write_all(head.as_bytes()).await.expect("send");
    let mut reply = String::new();
    tokio::time::timeout(SOON, stream.read_to_string(&mut reply))
        .await
        .expect("answered in time")
        .expect("read");
    let status = reply
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP reply: {reply:?}"));
    let body = reply
        .split_once("\r\n\r\n")
        .map_or("", |(_, body)| body)
        .to_owned();
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_are_accepted_refused_while_running_and_unavailable_or_refused_by_the_nodes() {
    let mut cluster = Cluster::local(5);
    let redlock = cluster.one_attempt_redlock().await;
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    // A job outlives its lock's TTL: only renewal under `Lock::run` keeps it.
    let service = jobs::Service::new(redlock.clone(), TTL, 3 * TTL);
    let finished = service.finished.clone();
    let server = tokio::spawn(jobs::serve(listener, service));

    let (status, body) = request(addr, "GET", "/healthz").await;
    assert_eq!(status, 200, "{body}");
    assert!(body.starts_with("5 of 5 nodes ready, 3 needed"), "{body}");
    let name = unique("svc");
    let resource = format!("job:{name}");
    let (status, body) = request(addr, "POST", &format!("/jobs/{name}")).await;
    assert_eq!(status, 202, "{body}");
    // The answer came while the job runs: its lock is held now.
    assert!(cluster.held_on(&resource, 5, SOON).await);
    let (status, body) = request(addr, "POST", &format!("/jobs/{name}")).await;
    assert_eq!(status, 409, "{body}");
    // Past the TTL the job still holds its lock: `Lock::run` renews it.
    // Catches a service that keeps the lock without renewing it while the
    // job runs (a second instance would start the same job here).
    tokio::time::sleep(TTL + TTL / 4).await;
    let (status, body) = request(addr, "POST", &format!("/jobs/{name}")).await;
    assert_eq!(status, 409, "still running, still locked: {body}");
    // The exported series are the client's counters, and a running job
    // is a lock held now. Catches an export that drifts from `stats()`.
    let (status, metrics) = request(addr, "GET", "/metrics").await;
    assert_eq!(status, 200);
    for line in [
        "quorumlock_lock_acquires_total{outcome=\"granted\"} 1\n",
        "quorumlock_lock_acquires_total{outcome=\"contended\"} 2\n",
        "quorumlock_locks_held 1\n",
    ] {
        assert!(metrics.contains(line), "{line} in {metrics}");
    }
    assert!(
        !metrics.contains(&name),
        "no resource names as labels: {metrics}"
    );
    assert_eq!(request(addr, "GET", "/nothing").await.0, 404);
    assert_eq!(request(addr, "POST", "/jobs/").await.0, 400);

    // The job ends, renewed past its TTL, and its lock is released.
    assert!(eventually(3 * SOON, || finished.load(Ordering::Relaxed) == 1).await);
    assert!(redlock.stats().leases.renewals >= 1);
    assert!(cluster.released(resource.as_bytes(), SOON).await);
    let (status, body) = request(addr, "POST", &format!("/jobs/{name}")).await;
    assert_eq!(status, 202, "free again: {body}");

    // A majority of nodes down: no lock can be taken, and the service says so.
    for i in [0, 2, 4] {
        cluster.pause(i);
    }
    let (status, body) = request(addr, "POST", &format!("/jobs/{}", unique("svc-down"))).await;
    assert_eq!(status, 503, "{body}");
    // The readiness probe says so too, naming the silent nodes.
    let (status, body) = request(addr, "GET", "/healthz").await;
    assert_eq!(status, 503, "{body}");
    assert!(body.starts_with("2 of 5 nodes ready, 3 needed"), "{body}");
    for i in [0, 2, 4] {
        cluster.resume(i);
    }
    server.abort();

    // A client the nodes refuse (no right to SET): the service's own
    // fault, 500, not an outage to retry later. Catches a service that
    // answers 503 to every refusal but contention.
    cluster.acl_setuser(&["noset", "on", ">pw", "~*", "&*", "+@all", "-set"]);
    let urls = cluster.urls_as("noset", "pw");
    let refused = quorumlock::Builder::new(urls).build().await.expect("build");
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let server = tokio::spawn(jobs::serve(listener, jobs::Service::new(refused, TTL, TTL)));
    let (status, body) = request(addr, "POST", &format!("/jobs/{}", unique("svc-noperm"))).await;
    assert_eq!(status, 500, "{body}");
    server.abort();
}
