//! The job service of `examples/job_service.rs`, on plain tokio: a minimal
//! HTTP/1.1 handler (one request per connection) over a `TcpListener`.
//!
//! - `POST /jobs/NAME` takes the lock `job:NAME`: `202 Accepted` once it is
//!   held, the job then runs in the background under `Lock::run` (renewed,
//!   stopped if the lock is lost, released at the end); `409 Conflict` when
//!   another holder has it; `503 Service Unavailable` when too few nodes
//!   answered; `500` when the nodes refuse this client (wrong password,
//!   ACL, a key of another type: `Error::is_misconfigured`).
//! - `GET /metrics`: the text of `redlock.stats()`.
//! - `GET /healthz`: `200` while enough nodes are ready for a quorum
//!   (`Redlock::health`), `503` otherwise; the body says which are not.
//!
//! Also compiled into `tests/job_service.rs`, which starts `serve` itself.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use quorumlock::{Error, LostSignal, Redlock};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The largest request head read; anything longer is refused.
const MAX_HEAD: usize = 8 * 1024;

/// What the service needs: the client, the TTL of a job's lock, and how
/// long a job works.
#[derive(Clone, Debug)]
pub struct Service {
    pub redlock: Redlock,
    pub ttl: Duration,
    pub work: Duration,
    /// Jobs that ran to their end.
    pub finished: Arc<AtomicU64>,
}

impl Service {
    pub fn new(redlock: Redlock, ttl: Duration, work: Duration) -> Self {
        Self {
            redlock,
            ttl,
            work,
            finished: Arc::new(AtomicU64::new(0)),
        }
    }
}

/// Serves connections on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, service: Service) -> std::io::Result<()> {
    loop {
        let (stream, _) = listener.accept().await?;
        let service = service.clone();
        tokio::spawn(async move {
            if let Err(e) = connection(stream, &service).await {
                eprintln!("connection: {e}");
            }
        });
    }
}

/// One request, one response, then the connection closes.
async fn connection(mut stream: TcpStream, service: &Service) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() > MAX_HEAD {
            return respond(&mut stream, 431, "request head too large\n").await;
        }
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = head
        .split(|&b| b == b'\r')
        .next()
        .map(String::from_utf8_lossy)
        .unwrap_or_default()
        .into_owned();
    let mut parts = line.split(' ');
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let (status, body) = route(service, method, path).await;
    respond(&mut stream, status, &body).await
}

/// The status and body for one request.
async fn route(service: &Service, method: &str, path: &str) -> (u16, String) {
    match (method, path) {
        ("GET", "/healthz") => {
            let health = service.redlock.health().await;
            let status = if health.quorum_ready() { 200 } else { 503 };
            (status, format!("{health}\n"))
        }
        ("GET", "/metrics") => (200, format!("{:#?}\n", service.redlock.stats())),
        ("POST", path) => match path.strip_prefix("/jobs/") {
            Some(name) if !name.is_empty() && name.bytes().all(|b| b.is_ascii_graphic()) => {
                start(service, name).await
            }
            Some(_) => (400, "a job needs a name: POST /jobs/NAME\n".to_owned()),
            None => (404, "not found\n".to_owned()),
        },
        _ => (404, "not found\n".to_owned()),
    }
}

/// Takes the job's lock (one attempt) and, once held, runs the job in the
/// background: the answer does not wait for it.
async fn start(service: &Service, name: &str) -> (u16, String) {
    let resource = format!("job:{name}");
    let lock = match service
        .redlock
        .lock(&resource, service.ttl)
        .retry(quorumlock::Retry::Times(0))
        .acquire()
        .await
    {
        Ok(lock) => lock,
        Err(e) => return refusal(&e),
    };
    let (work, finished, job) = (service.work, service.finished.clone(), name.to_owned());
    tokio::spawn(async move {
        match lock.run(|signal| job_body(work, signal)).await {
            Ok(()) => {
                finished.fetch_add(1, Ordering::Relaxed);
                println!("job {job}: done");
            }
            Err(e) => eprintln!("job {job}: stopped: {e}"),
        }
    });
    (202, format!("job {name} started\n"))
}

/// The status for a lock that could not be taken.
/// A misconfiguration (wrong password, ACL, a key of another type) is the
/// service's fault and no retry helps: 500, unlike an outage (503, try
/// again later).
fn refusal(e: &Error) -> (u16, String) {
    let status = if e.is_contended() {
        409
    } else if e.is_invalid_input() {
        400
    } else if e.is_misconfigured() {
        500
    } else if e.is_unavailable() {
        503
    } else {
        500
    };
    (status, format!("{e}\n"))
}

/// The job: `work` of steps, each after a look at the signal (a step must
/// not start once the lock can no longer be counted on).
async fn job_body(work: Duration, signal: LostSignal) {
    let step = Duration::from_millis(100);
    let mut done = Duration::ZERO;
    while done < work {
        if signal.is_fired() {
            return;
        }
        tokio::time::sleep(step).await;
        done += step;
    }
}

async fn respond(stream: &mut TcpStream, status: u16, body: &str) -> std::io::Result<()> {
    let reason = match status {
        200 => "OK",
        202 => "Accepted",
        400 => "Bad Request",
        404 => "Not Found",
        409 => "Conflict",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Internal Server Error",
    };
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}
