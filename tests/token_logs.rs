//! A lock's token never appears in full in any log line or error message:
//! every token the nodes saw (read with `MONITOR`) is looked for in the
//! debug and trace output of acquire, extend, release, contention, expiry,
//! per-node errors and an outage, and in every error's text. Its own test
//! binary, so its global subscriber sees every thread.

use quorumlock_testkit as support;

use std::io::{Read as _, Write as _};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use support::logs::LogCapture;
use support::{unique, Cluster, Fault};

/// Reads `MONITOR` from one node on a thread until stopped.
struct Monitor {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<String>>,
}

impl Monitor {
    fn start(addr: std::net::SocketAddr) -> Self {
        let mut s = std::net::TcpStream::connect(addr).expect("connect for MONITOR");
        s.write_all(b"MONITOR\r\n").expect("MONITOR");
        s.set_read_timeout(Some(Duration::from_millis(50)))
            .expect("timeout");
        let mut ok = [0u8; 5];
        s.read_exact(&mut ok).expect("+OK");
        assert_eq!(&ok, b"+OK\r\n");
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut seen = Vec::new();
            let mut buf = [0u8; 16 * 1024];
            while !flag.load(Ordering::Relaxed) {
                match s.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => seen.extend_from_slice(&buf[..n]),
                    Err(_) => {}
                }
            }
            String::from_utf8_lossy(&seen).into_owned()
        });
        Self {
            stop,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> String {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .expect("once")
            .join()
            .expect("monitor thread")
    }
}

/// Every quoted 32-hex-digit argument in `MONITOR` output: the tokens.
fn tokens_in(monitor: &str) -> Vec<String> {
    let mut out: Vec<String> = monitor
        .split('"')
        .filter(|s| s.len() == 32 && s.bytes().all(|b| b.is_ascii_hexdigit()))
        .map(str::to_owned)
        .collect();
    out.sort();
    out.dedup();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_never_appear_in_full_in_logs_or_errors() {
    let capture = LogCapture::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(capture.clone())
        .finish();
    tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");

    let mut cluster = Cluster::local(5);
    let urls = cluster.proxied();
    let monitors: Vec<Monitor> = (0..5)
        .map(|i| Monitor::start(cluster.side_addr(i)))
        .collect();
    let redlock = quorumlock::Builder::new(urls.clone())
        .node_timeout(Duration::from_millis(100))
        .retry(quorumlock::Retry::Times(1))
        .retry_delay(Duration::ZERO, Duration::from_millis(20))
        .build()
        .await
        .expect("build");
    let mut errors = String::new();
    let ttl = Duration::from_secs(5);

    // The happy path, with a slow node and one that hangs.
    cluster
        .proxy(1)
        .set(Fault::latency(Duration::from_millis(20)));
    cluster.proxy(4).set(Fault::Blackhole);
    let name = unique("lock:tokens");
    let lock = redlock.acquire(&name, ttl).await.expect("acquire");
    errors.push_str(&format!("{lock:?}\n"));
    lock.extend(ttl).await.expect("extend");

    // Contention with partial grants on two nodes, then the holder's key on
    // a majority replaced by a hash: extend and release fail per node.
    for i in [2, 3] {
        cluster.expire_early(i, name.as_bytes());
    }
    let err = redlock.acquire(&name, ttl).await.expect_err("contended");
    errors.push_str(&format!("{err}\n{err:?}\n"));
    for i in 0..3 {
        cluster.plant_hash(i, name.as_bytes());
    }
    let err = lock.extend(ttl).await.expect_err("lost");
    errors.push_str(&format!("{err}\n{err:?}\n{lock:?}\n"));
    let err = lock.release().await.expect_err("release refused");
    errors.push_str(&format!("{err}\n{err:?}\n"));
    for i in 0..5 {
        let _: () = cluster.exec(i, redis::cmd("DEL").arg(&name));
    }

    // Expiry, a dropped lock and an outage.
    let short = redlock
        .acquire(unique("lock:tokens"), Duration::from_millis(200))
        .await
        .expect("acquire short");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let err = short.extend(ttl).await.expect_err("expired");
    errors.push_str(&format!("{err}\n{err:?}\n"));
    drop(short);
    drop(
        redlock
            .acquire(unique("lock:tokens"), ttl)
            .await
            .expect("acquire then drop"),
    );
    for i in 0..3 {
        cluster.proxy(i).set(Fault::Reset);
    }
    let err = redlock
        .acquire(unique("lock:tokens"), ttl)
        .await
        .expect_err("outage");
    errors.push_str(&format!("{err}\n{err:?}\n"));
    cluster.heal_proxies();
    tokio::time::sleep(Duration::from_millis(300)).await;

    let seen: String = monitors.into_iter().map(Monitor::finish).collect();
    let tokens = tokens_in(&seen);
    let logs = capture.text();
    assert!(
        tokens.len() >= 5,
        "tokens seen by the nodes: {}",
        tokens.len()
    );
    assert!(
        logs.lines().count() > 20,
        "debug logs were captured:\n{logs}"
    );
    assert!(
        tokens.iter().any(|t| logs.contains(&t[..8])),
        "token prefixes are logged (so the check below is meaningful)"
    );
    for t in &tokens {
        assert!(!logs.contains(t.as_str()), "full token {t} in the logs");
        assert!(!errors.contains(t.as_str()), "full token {t} in an error");
        // Not even most of it.
        assert!(!logs.contains(&t[..16]) && !errors.contains(&t[..16]));
    }
    support::report(&format!(
        "tokens: {} seen by the nodes, none in {} log lines or {} error lines",
        tokens.len(),
        logs.lines().count(),
        errors.lines().count()
    ));
}
