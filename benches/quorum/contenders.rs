//! The three clients measured side by side: quorumlock, the ideal fan-out
//! (raw commands through the redis crate, no library logic) and rslock.

use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use futures::stream::{FuturesUnordered, StreamExt};
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, Script, Value};

/// Which client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Quorumlock,
    Ideal,
    Rslock,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Quorumlock, Kind::Ideal, Kind::Rslock];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Quorumlock => "quorumlock",
            Kind::Ideal => "ideal",
            Kind::Rslock => "rslock",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == s)
    }
}

/// The canonical compare-and-delete every Redlock client sends on release.
const RELEASE: &str = r#"if redis.call("GET", KEYS[1]) == ARGV[1] then
    return redis.call("DEL", KEYS[1])
else
    return 0
end"#;

/// The practical limit of a Redlock client: `SET key token NX PX ttl` to
/// every node at once over one multiplexed connection per node, decided at
/// the quorum-th reply; release is the compare-and-delete script by
/// `EVALSHA` (hashed once, loaded at connect), also decided at quorum. No
/// timeouts, no tracing, no retries, no bookkeeping: what is left is the
/// wire.
///
/// The replies still in flight when the outcome is known are handed to a
/// detached task rather than dropped: the redis crate's multiplexed
/// connection skips a queued command whose reply future was dropped before
/// its connection task wrote it, so dropping them loses releases (and then
/// the stale keys refuse later acquires). Waiting in the background is the
/// cheapest way to keep every command on the wire.
pub struct Ideal {
    conns: Vec<MultiplexedConnection>,
    quorum: usize,
}

static RELEASE_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(RELEASE));

impl Ideal {
    pub async fn connect(urls: &[String]) -> Ideal {
        let release = &*RELEASE_SCRIPT;
        let mut conns = Vec::with_capacity(urls.len());
        for url in urls {
            let client = Client::open(url.as_str()).expect("node url");
            // No response timeout, like quorumlock's connections: a slow
            // reply never tears the connection down.
            let config = AsyncConnectionConfig::new().set_response_timeout(None);
            let mut conn = client
                .get_multiplexed_async_connection_with_config(&config)
                .await
                .expect("connect to node");
            release
                .prepare_invoke()
                .load_async(&mut conn)
                .await
                .expect("load the release script");
            conns.push(conn);
        }
        Ideal {
            quorum: urls.len() / 2 + 1,
            conns,
        }
    }

    /// One attempt: true when a quorum said OK.
    pub async fn try_acquire(&self, key: &str, token: &str, ttl: Duration) -> bool {
        let ttl_ms = ttl.as_millis() as u64;
        let mut replies: FuturesUnordered<_> = self
            .conns
            .iter()
            .map(|conn| {
                let mut conn = conn.clone();
                let mut cmd = redis::cmd("SET");
                cmd.arg(key).arg(token).arg("NX").arg("PX").arg(ttl_ms);
                async move { matches!(cmd.query_async::<Value>(&mut conn).await, Ok(Value::Okay)) }
            })
            .collect();
        let (mut yes, mut answered) = (0, 0);
        let nodes = self.conns.len();
        while let Some(ok) = replies.next().await {
            answered += 1;
            yes += usize::from(ok);
            if yes >= self.quorum || yes + (nodes - answered) < self.quorum {
                break;
            }
        }
        drain(replies);
        yes >= self.quorum
    }

    /// Compare-and-delete everywhere; returns once a quorum replied.
    pub async fn release(&self, key: &str, token: &str) {
        let mut replies: FuturesUnordered<_> = self
            .conns
            .iter()
            .map(|conn| {
                let mut conn = conn.clone();
                let mut inv = RELEASE_SCRIPT.key(key);
                inv.arg(token);
                async move { inv.invoke_async::<i64>(&mut conn).await.is_ok() }
            })
            .collect();
        let mut answered = 0;
        while replies.next().await.is_some() {
            answered += 1;
            if answered >= self.quorum {
                break;
            }
        }
        drain(replies);
    }
}

/// Keeps the unanswered requests alive until their replies come.
fn drain<F>(mut rest: FuturesUnordered<F>)
where
    F: std::future::Future + Send + 'static,
{
    if !rest.is_empty() {
        tokio::spawn(async move { while rest.next().await.is_some() {} });
    }
}

/// A fresh 128-bit token as 32 hex characters (what quorumlock sends).
pub fn token() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// One client of one kind, connected to one set of nodes.
#[derive(Clone)]
pub enum Contender {
    Quorumlock(quorumlock::Redlock),
    Ideal(Arc<Ideal>),
    Rslock(rslock::LockManager),
}

impl Contender {
    /// A connected client with its library's defaults.
    pub async fn connect(kind: Kind, urls: &[String]) -> Contender {
        let c = match kind {
            Kind::Quorumlock => Contender::Quorumlock(
                quorumlock::Builder::new(urls.to_vec())
                    .build()
                    .await
                    .expect("build quorumlock"),
            ),
            Kind::Ideal => Contender::Ideal(Arc::new(Ideal::connect(urls).await)),
            Kind::Rslock => Contender::Rslock(rslock::LockManager::new(urls.to_vec())),
        };
        // rslock connects on first use, and quorumlock's first call may
        // still load scripts: one untimed cycle each.
        let warmup = format!("bench:warmup:{:016x}", rand::random::<u64>());
        let _ = c.cycle(&warmup, TTL).await;
        c
    }

    pub fn kind(&self) -> Kind {
        match self {
            Contender::Quorumlock(_) => Kind::Quorumlock,
            Contender::Ideal(_) => Kind::Ideal,
            Contender::Rslock(_) => Kind::Rslock,
        }
    }

    /// One lock cycle: a single acquire attempt, then release.
    pub async fn cycle(&self, key: &str, ttl: Duration) -> Result<(), String> {
        match self {
            Contender::Quorumlock(rl) => {
                let lock = rl.try_acquire(key, ttl).await.map_err(|e| e.to_string())?;
                lock.release().await.map_err(|e| e.to_string())
            }
            Contender::Ideal(ideal) => {
                let token = token();
                let granted = ideal.try_acquire(key, &token, ttl).await;
                // Released in both cases: a failed attempt may have set keys.
                ideal.release(key, &token).await;
                if granted {
                    Ok(())
                } else {
                    Err("no quorum".to_owned())
                }
            }
            Contender::Rslock(lm) => {
                let lock = lm.lock(key, ttl).await.map_err(|e| e.to_string())?;
                lm.unlock(&lock).await;
                Ok(())
            }
        }
    }

    /// Blocks until the lock is taken (each library's own waiting: fast
    /// hand-off for quorumlock, retry loops for the others) or `until`.
    pub async fn acquire_blocking(&self, key: &str, ttl: Duration, until: Instant) -> Option<Held> {
        let wait = until.saturating_duration_since(Instant::now());
        match self {
            Contender::Quorumlock(rl) => rl
                .lock(key, ttl)
                .retry(quorumlock::Retry::Until(wait))
                .acquire()
                .await
                .ok()
                .map(Held::Quorumlock),
            Contender::Ideal(ideal) => loop {
                let token = token();
                if ideal.try_acquire(key, &token, ttl).await {
                    return Some(Held::Ideal(token));
                }
                ideal.release(key, &token).await;
                // The specification's retry: a random delay of 0–200 ms.
                let delay = Duration::from_millis(rand::random_range(0..200));
                if Instant::now() + delay >= until {
                    return None;
                }
                tokio::time::sleep(delay).await;
            },
            Contender::Rslock(lm) => {
                // `acquire` loops until it has the lock and cannot be told to
                // stop: the deadline cancels it. Keys of a cancelled attempt
                // stay until their TTL; each run uses its own resource.
                tokio::time::timeout(wait, lm.acquire(key, ttl))
                    .await
                    .ok()?
                    .ok()
                    .map(|g| Held::Rslock(g.lock))
            }
        }
    }

    pub async fn release(&self, key: &str, held: Held) {
        match (self, held) {
            (Contender::Quorumlock(_), Held::Quorumlock(lock)) => {
                let _ = lock.release().await;
            }
            (Contender::Ideal(ideal), Held::Ideal(token)) => ideal.release(key, &token).await,
            (Contender::Rslock(lm), Held::Rslock(lock)) => lm.unlock(&lock).await,
            _ => unreachable!("a lock is released by the client that took it"),
        }
    }
}

/// A lock held by one of the contenders.
pub enum Held {
    Quorumlock(quorumlock::Lock),
    Ideal(String),
    Rslock(rslock::Lock),
}

/// The TTL used everywhere: long against every measured latency.
pub const TTL: Duration = Duration::from_secs(10);
