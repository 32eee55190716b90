//! The safety checker's workload: M clients, each with its own `Redlock`
//! (its own connections, as separate processes would have), taking a few
//! resources with short TTLs. While it holds a lock a client reads the
//! checker's counter, sleeps, sometimes extends (to a shorter or a longer
//! TTL), and writes `read + 1` — each access only while validity is left.
//!
//! Clients also drop their `acquire`, `extend` and `release` futures at
//! seeded random points ([`Cancel`]): a dropped acquire is not a grant; a
//! dropped extend leaves whatever deadline the lock reports afterwards, and
//! the holder goes on acting only while `validity()` is above zero.
//!
//! How a lock is taken is a [`Strategy`]: the builder settings, the acquire
//! call (which may return a fencing token) and the store that protects the
//! counter. [`Strategy::plain`] is the library's `acquire` on a store that
//! accepts everything. A strategy with fencing tokens plugs in an acquire
//! that returns `Some(token)` and [`FencedStore::shared`]; one with restart
//! quarantine customises the builder. The checker and the figures are the
//! same for all.
//!
//! [`Cancel`]: super::cancel::Cancel
//! [`FencedStore::shared`]: super::checker::FencedStore::shared

use std::sync::Arc;
use std::time::Duration;

use futures::future::{BoxFuture, FutureExt};
use quorumlock::{Builder, Lock, LockRequest, Redlock};
use rand::rngs::StdRng;

use super::checker::{Checker, Outcome, PlainStore, Store};
use super::safety::Client;
use super::turns::{work, Holding, Release, Taking, Turn, Turns};

/// A lock and its fencing token, if the strategy has one.
type Acquired = quorumlock::Result<(Lock, Option<u64>)>;

/// Takes a lock: a request for it (the resource, the TTL, fair or not) →
/// the lock and its fencing token, if the strategy has one.
pub type AcquireFn = Arc<dyn Fn(LockRequest) -> BoxFuture<'static, Acquired> + Send + Sync>;

/// Adjusts each client's builder (e.g. a restart quarantine).
pub type Customize = Arc<dyn Fn(Builder) -> Builder + Send + Sync>;

/// Makes the store for a number of resources.
pub type MakeStore = fn(usize) -> Arc<dyn Store>;

/// How clients take locks and what protects the counter.
#[derive(Clone)]
pub struct Strategy {
    /// Name for reports.
    pub name: &'static str,
    /// How long nodes must have been up before this strategy can lock
    /// (a restart quarantine); runs wait that long after starting them.
    pub warmup: Duration,
    /// Adjusts each client's builder.
    pub customize: Customize,
    /// How a client takes a lock (and its fencing token, if any).
    pub acquire: AcquireFn,
    /// The store the holders update.
    pub store: MakeStore,
}

impl std::fmt::Debug for Strategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Strategy")
            .field("name", &self.name)
            .finish()
    }
}

impl Strategy {
    /// `Redlock::acquire`, no fencing token, a store that accepts all.
    pub fn plain() -> Self {
        Self {
            name: "plain",
            warmup: Duration::ZERO,
            customize: Arc::new(|b| b),
            acquire: Arc::new(|request| {
                async move { request.acquire().await.map(|l| (l, None)) }.boxed()
            }),
            store: PlainStore::shared,
        }
    }

    /// One attempt (`try_acquire`), otherwise as [`Strategy::plain`].
    pub fn plain_once() -> Self {
        Self {
            name: "plain-once",
            acquire: Arc::new(|request| {
                let once = request.retry(quorumlock::Retry::Times(0));
                async move { once.acquire().await.map(|l| (l, None)) }.boxed()
            }),
            ..Self::plain()
        }
    }

    /// `Redlock::acquire_fenced`, its token checked by a [`FencedStore`].
    ///
    /// [`FencedStore`]: super::checker::FencedStore
    pub fn fenced() -> Self {
        Self {
            name: "fenced",
            warmup: Duration::ZERO,
            customize: Arc::new(|b| b),
            acquire: Arc::new(|request| {
                async move {
                    let lock = request.fenced().acquire().await?;
                    let fence = lock.fence();
                    Ok((lock, fence))
                }
                .boxed()
            }),
            store: super::checker::FencedStore::shared,
        }
    }

    /// As [`Strategy::plain`], with nodes younger than `required` kept out
    /// of the vote (restart quarantine).
    pub fn quarantined(required: Duration) -> Self {
        Self {
            name: "quarantine",
            // Uptime is read in whole seconds.
            warmup: required + Duration::from_secs(1),
            customize: Arc::new(move |b| b.restart_quarantine(Some(required))),
            ..Self::plain()
        }
    }

    /// Applies [`Strategy::customize`] to `builder`.
    pub fn builder(&self, builder: Builder) -> Builder {
        (self.customize)(builder)
    }
}

/// The shape of the load.
#[derive(Debug, Clone)]
pub struct Workload {
    /// Clients running at once.
    pub clients: usize,
    /// Resources they contend for.
    pub resources: usize,
    /// Each acquisition picks one of these.
    pub ttls: Vec<Duration>,
    /// Time holding the lock between read and write: `U(0, work)`.
    pub work: Duration,
    /// One in `extend_one_in` holds extends mid-way (0: never), to a TTL
    /// drawn from `U(extend_ttls.0, extend_ttls.1)`: below the lock's TTL
    /// as well as above.
    pub extend_one_in: u32,
    /// Bounds of the TTL an extension asks for.
    pub extend_ttls: (Duration, Duration),
    /// One in `cancel_one_in` acquire and release calls, and one in
    /// `cancel_extend_one_in` extends, is dropped unfinished (0: never):
    /// after `U(0, cancel_within)` or after 1–4 polls.
    pub cancel_one_in: u32,
    /// How often an extend is dropped unfinished (see above).
    pub cancel_extend_one_in: u32,
    /// Upper bound of the delay before a drop (see above).
    pub cancel_within: Duration,
    /// Pause between a client's acquisitions: `U(0, think)`.
    pub think: Duration,
    /// One in `fair_one_in` acquisitions waits in turn (`.fair()`), the
    /// others try first (0: none is fair).
    pub fair_one_in: u32,
    /// Each client's node timeout.
    pub node_timeout: Duration,
    /// Each client's acquire retries.
    pub retry_count: u32,
    /// The largest random delay between retries.
    pub retry_delay_max: Duration,
}

impl Workload {
    /// The largest TTL in use.
    pub fn max_ttl(&self) -> Duration {
        self.ttls.iter().copied().max().unwrap_or_default()
    }

    /// The largest TTL a key of the run is given, by an acquire or an
    /// extension: what a restart quarantine must cover.
    pub fn max_key_ttl(&self) -> Duration {
        let extends = if self.extend_one_in > 0 {
            self.extend_ttls.1
        } else {
            Duration::ZERO
        };
        self.max_ttl().max(extends)
    }

    /// The builder every client starts from. Its waiter lease is the
    /// largest TTL (at least three node timeouts): a queue entry left by a
    /// client dropped mid-wait lapses as soon as the keys of its turn
    /// would, and entries lapse under the nemesis as well.
    pub fn builder(&self, urls: &[String]) -> Builder {
        quorumlock::Builder::new(urls.to_vec())
            .waiter_lease(self.max_ttl().max(self.node_timeout * 3))
            .node_timeout(self.node_timeout)
            .connect_timeout(Duration::from_millis(500))
            .retry(quorumlock::Retry::Times(self.retry_count))
            .retry_delay(Duration::ZERO, self.retry_delay_max)
    }
}

/// The Redis key of resource `r`.
pub fn resource_name(prefix: &str, r: usize) -> String {
    format!("{prefix}:{r}")
}

impl Turns for Strategy {
    type Held = (Lock, Option<u64>);
    const ACQUIRE: &'static str = "acquire";

    fn warmup(&self) -> Duration {
        self.warmup
    }

    fn builder(&self, builder: Builder) -> Builder {
        Strategy::builder(self, builder)
    }

    fn store(&self, resources: usize) -> Arc<dyn Store> {
        (self.store)(resources)
    }

    fn keys(&self, prefix: &str) -> String {
        format!("{prefix}:*")
    }

    fn take(&self, c: &Client, turn: &Turn, _: &mut StdRng) -> Taking<Self> {
        let mut request = c
            .redlock
            .lock(resource_name(&c.prefix, turn.resource), turn.ttl);
        if turn.fair {
            request = request.fair();
        }
        (self.acquire)(request)
    }

    fn probe(&self, redlock: &Redlock, name: &str, ttl: Duration, wait: Duration) -> Taking<Self> {
        let request = redlock
            .lock(name, ttl)
            .retry(quorumlock::Retry::Until(wait));
        async move { request.acquire().await.map(|lock| (lock, None)) }.boxed()
    }

    fn lock((lock, _): &Self::Held) -> &Lock {
        lock
    }

    fn fence((_, fence): &Self::Held) -> Option<u64> {
        *fence
    }

    /// Reads the counter, works (extending as the turn says), and writes
    /// it back one higher — each access only while validity is left.
    fn hold<'a>(&'a self, h: Holding<'a, '_, Self::Held>) -> BoxFuture<'a, ()> {
        let ((lock, _), session, turn, c) = (h.held, h.session, h.turn, h.client);
        async move {
            let (read, value) = session.read(|| !lock.validity().is_zero());
            if read == Outcome::Accepted {
                work(lock, session, turn, || {
                    if let Some(nodes) = c.checker.nodes() {
                        let key = resource_name(&c.prefix, turn.resource);
                        tokio::spawn(coverage(Arc::clone(&c.checker), nodes, key));
                    }
                })
                .await;
                session.write(value + 1, || !lock.validity().is_zero());
            }
        }
        .boxed()
    }

    fn let_go((lock, _): Self::Held) -> Release {
        Some(lock.release().boxed())
    }
}

/// After a successful extension of `key`: once the repairs had time to
/// land, reads the key on every node directly (`nodes`, not through the
/// proxies) and records whether every node that answered holds a key
/// (none is missing it) while a majority holds one value (the holder's
/// token). Not recorded when no majority holds one any more (the lock was
/// released meanwhile).
async fn coverage(checker: Arc<Checker>, nodes: Vec<String>, key: String) {
    tokio::time::sleep(Duration::from_millis(50)).await;
    let reads = nodes.iter().map(|url| {
        let key = key.clone();
        async move {
            let read = async {
                let client = redis::Client::open(url.as_str()).ok()?;
                let mut conn = client.get_multiplexed_async_connection().await.ok()?;
                redis::cmd("GET")
                    .arg(&key)
                    .query_async::<Option<String>>(&mut conn)
                    .await
                    .ok()
            };
            tokio::time::timeout(Duration::from_millis(300), read)
                .await
                .ok()
                .flatten()
        }
    });
    let answered: Vec<Option<String>> = futures::future::join_all(reads)
        .await
        .into_iter()
        .flatten()
        .collect();
    let majority = nodes.len() / 2 + 1;
    let holder = answered
        .iter()
        .flatten()
        .find(|v| answered.iter().filter(|w| w.as_ref() == Some(*v)).count() >= majority);
    if holder.is_some() {
        // A node holding another token (a losing attempt's key not yet
        // cleaned up) is not the repair's to fill: only an empty one counts
        // against coverage.
        checker.coverage(answered.iter().all(Option::is_some));
    }
}
