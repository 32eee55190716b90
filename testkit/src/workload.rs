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
//! [`FencedStore::shared`]: super::checker::FencedStore::shared

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::{BoxFuture, FutureExt};
use quorumlock::{Builder, Lock, Redlock};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::cancel::{self, Cancel};
use super::checker::{Checker, Outcome, PlainStore, Store};
use super::safety::{Client, Load};

/// Takes a lock: `(redlock, resource, ttl)` → the lock and its fencing
/// token, if the strategy has one.
pub type AcquireFn = Arc<
    dyn Fn(
            Redlock,
            Vec<u8>,
            Duration,
        ) -> BoxFuture<'static, quorumlock::Result<(Lock, Option<u64>)>>
        + Send
        + Sync,
>;

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
            acquire: Arc::new(|redlock, resource, ttl| {
                async move { redlock.acquire(resource, ttl).await.map(|l| (l, None)) }.boxed()
            }),
            store: PlainStore::shared,
        }
    }

    /// One attempt (`try_acquire`), otherwise as [`Strategy::plain`].
    pub fn plain_once() -> Self {
        Self {
            name: "plain-once",
            acquire: Arc::new(|redlock, resource, ttl| {
                async move { redlock.try_acquire(resource, ttl).await.map(|l| (l, None)) }.boxed()
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
            acquire: Arc::new(|redlock, resource, ttl| {
                async move {
                    let lock = redlock.lock(resource, ttl).fenced().acquire().await?;
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

    /// The builder every client starts from.
    pub fn builder(&self, urls: &[String]) -> Builder {
        quorumlock::Builder::new(urls.to_vec())
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

impl Load for Strategy {
    fn name(&self) -> &'static str {
        self.name
    }

    fn warmup(&self) -> Duration {
        self.warmup
    }

    fn builder(&self, builder: Builder) -> Builder {
        Strategy::builder(self, builder)
    }

    fn store(&self, resources: usize) -> Arc<dyn Store> {
        (self.store)(resources)
    }

    fn client(&self, c: Client) -> BoxFuture<'static, ()> {
        let acquire = self.acquire.clone();
        async move { client(c, &acquire).await }.boxed()
    }

    fn take_once<'a>(
        &'a self,
        redlock: &'a Redlock,
        name: &'a str,
        w: &'a Workload,
        wait: Duration,
    ) -> BoxFuture<'a, bool> {
        async move {
            match redlock
                .lock(name, w.max_ttl())
                .retry(quorumlock::Retry::Until(wait))
                .acquire()
                .await
            {
                Ok(lock) => {
                    let _ = lock.release().await;
                    true
                }
                Err(_) => false,
            }
        }
        .boxed()
    }

    fn keys(&self, prefix: &str) -> String {
        format!("{prefix}:*")
    }
}

/// One turn of a client, drawn from its seed: what it takes, for how
/// long, whether it extends and which calls it drops.
#[derive(Debug, Clone, Copy)]
pub struct Turn {
    /// The resource, `0..resources`.
    pub resource: usize,
    /// The TTL asked for.
    pub ttl: Duration,
    /// Time holding: `U(0, work)`.
    pub work: Duration,
    /// An extension mid-way: the TTL asked for, and how much of the
    /// validity reported afterwards the holder then works on (up to 1.2:
    /// its last access lands near, or past, its deadline).
    pub extend: Option<(Duration, f64)>,
    /// The pause after the turn.
    pub think: Duration,
    /// How the acquire call is dropped, if it is.
    pub cancel_acquire: Cancel,
    /// How the release call is dropped, if it is.
    pub cancel_release: Cancel,
    /// How the extend call is dropped, if it is.
    pub cancel_extend: Cancel,
}

impl Turn {
    /// Draws the next turn of a client of `w`.
    pub fn draw(rng: &mut StdRng, w: &Workload) -> Self {
        let resource = rng.random_range(0..w.resources);
        let ttl = w.ttls[rng.random_range(0..w.ttls.len())];
        let work = w.work.mul_f64(rng.random::<f64>());
        let extend =
            (w.extend_one_in > 0 && rng.random_range(0..w.extend_one_in) == 0).then(|| {
                let (lo, hi) = w.extend_ttls;
                let new_ttl = lo + hi.saturating_sub(lo).mul_f64(rng.random::<f64>());
                (new_ttl, 1.2 * rng.random::<f64>())
            });
        let think = w.think.mul_f64(rng.random::<f64>());
        let mut cancel = || Cancel::draw(rng, w.cancel_one_in, w.cancel_within);
        let (cancel_acquire, cancel_release) = (cancel(), cancel());
        let cancel_extend = Cancel::draw(rng, w.cancel_extend_one_in, w.cancel_within);
        Self {
            resource,
            ttl,
            work,
            extend,
            think,
            cancel_acquire,
            cancel_release,
            cancel_extend,
        }
    }
}

async fn client(c: Client, acquire: &AcquireFn) {
    let Client {
        id,
        redlock,
        workload: ref w,
        ref checker,
        ref prefix,
        seed,
        until,
    } = c;
    let mut rng = StdRng::seed_from_u64(seed);
    while Instant::now() < until {
        let Turn {
            resource: r,
            ttl,
            work,
            extend,
            think,
            cancel_acquire,
            cancel_release,
            cancel_extend,
        } = Turn::draw(&mut rng, w);
        let name = resource_name(prefix, r).into_bytes();
        let t0 = Instant::now();
        match cancel::run(cancel_acquire, acquire(redlock.clone(), name, ttl)).await {
            None => checker.acquire_cancelled(),
            Some(Ok((lock, fence))) => {
                let granted_at = Instant::now();
                checker.acquire_latency(granted_at - t0);
                let mut session = checker.granted(id, r, fence, granted_at, lock.deadline());
                session.requested_at(t0);
                let (read, value) = session.read(|| !lock.validity().is_zero());
                if read == Outcome::Accepted {
                    tokio::time::sleep(work / 2).await;
                    match extend {
                        Some((new_ttl, then)) => {
                            let extended =
                                hold_extend(&lock, &mut session, new_ttl, ttl, cancel_extend).await;
                            if extended {
                                if let Some(nodes) = checker.nodes() {
                                    tokio::spawn(coverage(
                                        Arc::clone(checker),
                                        nodes,
                                        resource_name(prefix, r),
                                    ));
                                }
                            }
                            tokio::time::sleep(lock.validity().mul_f64(then)).await;
                        }
                        None => tokio::time::sleep(work / 2).await,
                    }
                    session.write(value + 1, || !lock.validity().is_zero());
                }
                // Nothing but an extend moves the deadline here (no renewal
                // runs); reading it once more keeps the window sound if
                // that ever changes.
                session.observe(lock.deadline());
                session.stop();
                match cancel::run(cancel_release, lock.release()).await {
                    None => checker.release_cancelled(),
                    Some(Err(e)) => checker.release_failed(&e),
                    Some(Ok(())) => {}
                }
            }
            Some(Err(e)) => {
                assert!(!e.is_invalid_input(), "acquire: {e}");
                checker.acquire_failed(&e);
            }
        }
        tokio::time::sleep(think).await;
    }
}

/// Extends `lock` to `ttl` under `cancel`, reporting the lock's deadline to
/// the session after every poll (the only time it can change); true when
/// it was extended.
pub(crate) async fn hold_extend(
    lock: &Lock,
    session: &mut super::checker::Session<'_>,
    ttl: Duration,
    old_ttl: Duration,
    cancel: Cancel,
) -> bool {
    let (began, before) = (Instant::now(), lock.deadline());
    let out = cancel::observed(cancel, lock.extend(ttl), || {
        session.observe(lock.deadline());
    })
    .await;
    let how = match out {
        None => {
            session.extend_cancelled(lock.deadline());
            "cancelled"
        }
        Some(Ok(_)) => {
            session.extended(lock.deadline(), ttl < old_ttl);
            "extended"
        }
        Some(Err(e)) => {
            assert!(e.is_lost(), "extend: {e}");
            session.observe(lock.deadline());
            session.extend_lost();
            "lost"
        }
    };
    session.note_extend(how, ttl, old_ttl, began, before);
    how == "extended"
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
