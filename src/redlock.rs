//! The public handle: building it, and acquiring locks with retries.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::{self, Config};
use crate::error::{Error, Result};
use crate::fanout::{Attempt, AttemptFailure, Engine};
use crate::handoff::{Handoff, Watch};
use crate::keys::Keys;
use crate::lock::Lock;
use crate::node::Node;
use crate::quorum;
use crate::status::Status;
use crate::token::Token;

/// A Redlock client over a fixed set of independent Redis nodes.
///
/// Cheap to clone (an `Arc` inside) and `Send + Sync`: build one and share
/// it across tasks. Each node gets one long-lived multiplexed connection
/// that reconnects by itself after the node restarts.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
///
/// # async fn demo() -> Result<(), quorumlock::Error> {
/// let redlock = quorumlock::Redlock::builder([
///     "redis://127.0.0.1:7001",
///     "redis://127.0.0.1:7002",
///     "redis://127.0.0.1:7003",
///     "redis://127.0.0.1:7004",
///     "redis://127.0.0.1:7005",
/// ])
/// .build()
/// .await?;
///
/// match redlock.try_acquire("invoice:nightly", Duration::from_secs(600)).await {
///     Ok(lock) => {
///         // run the job within lock.validity()
///         lock.release().await?;
///     }
///     Err(e) if e.is_contended() => println!("another server runs it tonight"),
///     Err(e) => return Err(e),
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct Redlock {
    pub(crate) engine: Arc<Engine>,
}

/// Configures a [`Redlock`]. Every setting has a documented default.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// # async fn demo() -> Result<(), quorumlock::Error> {
/// let redlock = quorumlock::Redlock::builder(["redis://127.0.0.1:7001"])
///     .node_timeout(Duration::from_millis(20))
///     .retry_count(10)
///     .retry_delay(Duration::from_millis(50), Duration::from_millis(250))
///     .build()
///     .await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
#[must_use = "a builder does nothing until build() is awaited"]
pub struct Builder {
    urls: Vec<String>,
    config: Config,
}

/// Shows the node URLs with their passwords replaced.
impl std::fmt::Debug for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let urls: Vec<String> = self.urls.iter().map(|u| config::redact(u)).collect();
        f.debug_struct("Builder")
            .field("urls", &urls)
            .field("config", &self.config)
            .finish()
    }
}

impl Redlock {
    /// Starts configuring a client for these nodes. URLs follow the redis
    /// crate: `redis://[user[:password]@]host[:port][/db]` (and `rediss://`
    /// when built with the `tls` feature).
    pub fn builder<I, S>(nodes: I) -> Builder
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Builder {
            urls: nodes.into_iter().map(|s| s.as_ref().to_owned()).collect(),
            config: Config::default(),
        }
    }

    /// Number of nodes.
    pub fn nodes(&self) -> usize {
        self.engine.nodes.len()
    }

    /// Votes needed for a lock: `nodes / 2 + 1`.
    pub fn quorum(&self) -> usize {
        self.engine.quorum()
    }

    /// The nodes as `host:port/db`, in the order given.
    pub fn node_labels(&self) -> Vec<String> {
        self.engine
            .nodes
            .iter()
            .map(|n| n.label().to_owned())
            .collect()
    }

    /// Takes the lock, retrying per the builder's policy (by default 3
    /// retries after random delays of 0–200 ms).
    ///
    /// The lock is granted when a majority of nodes accepted it and validity
    /// (`ttl − elapsed − drift`) is left. Each attempt uses a fresh token,
    /// and a failed attempt releases whatever it set on every node before
    /// the next one.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] (nothing sent) for an empty resource or a TTL
    /// that is zero, not above the drift, or above [`MAX_TTL`](crate::MAX_TTL).
    /// After the last attempt: [`Error::Contended`] when another owner holds
    /// it, [`Error::Unavailable`] / [`Error::ValidityExhausted`] when too few
    /// nodes answered in time.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future (e.g. under `tokio::time::timeout`) spawns the
    /// release of whatever the current attempt had set, so no partial keys
    /// stay behind until their TTL.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
    /// let lock = redlock.acquire("invoice:nightly", std::time::Duration::from_secs(30)).await?;
    /// # lock.release().await
    /// # }
    /// ```
    pub async fn acquire(&self, resource: impl AsRef<[u8]>, ttl: Duration) -> Result<Lock> {
        self.acquisition(resource, ttl).acquire().await
    }

    /// Makes one attempt, without retries.
    ///
    /// # Errors
    ///
    /// As for [`acquire`](Redlock::acquire).
    ///
    /// # Cancel safety
    ///
    /// As for [`acquire`](Redlock::acquire).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
    /// match redlock.try_acquire("invoice:nightly", std::time::Duration::from_secs(30)).await {
    ///     Ok(lock) => lock.release().await?,
    ///     Err(e) if e.is_contended() => { /* skip this run */ }
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn try_acquire(&self, resource: impl AsRef<[u8]>, ttl: Duration) -> Result<Lock> {
        self.acquisition(resource, ttl).once().acquire().await
    }

    /// Keeps trying (random delays as configured, no retry count) until the
    /// lock is taken or `wait` has passed.
    ///
    /// # Errors
    ///
    /// As for [`acquire`](Redlock::acquire), from the last attempt.
    ///
    /// # Cancel safety
    ///
    /// As for [`acquire`](Redlock::acquire).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
    /// use std::time::Duration;
    /// let lock = redlock
    ///     .acquire_within("report", Duration::from_secs(30), Duration::from_secs(10))
    ///     .await?;
    /// # lock.release().await
    /// # }
    /// ```
    pub async fn acquire_within(
        &self,
        resource: impl AsRef<[u8]>,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Lock> {
        self.acquisition(resource, ttl).wait(wait).acquire().await
    }

    /// Takes the lock and a **fencing token** ([`Lock::fence`]) that
    /// strictly increases across successive holders of the resource.
    ///
    /// The token goes through the quorum in two phases. Each node reads its
    /// counter (`quorumlock:fence:<resource>`) atomically with the
    /// `SET NX`; the client proposes `T = max + 1` over the granting nodes;
    /// then every node still holding this lock's token raises its counter to
    /// `max(counter, T)`, and `T` is handed out only after a majority
    /// committed, inside the validity window.
    ///
    /// Why it increases: let A commit `T` on a majority `C`. A later holder
    /// B's `SET NX` succeeded on a majority `M`; `C` and `M` share a node
    /// `x`. On `x`, A's commit ran while A's key was present, and B's
    /// `SET NX` could only succeed once that key was gone, so after the
    /// commit: B read a counter ≥ `T` on `x` and proposes at least `T + 1`.
    /// This survives a node's clock jumping (early expiry) — it needs no
    /// timing at all — but not the loss of counters: a node that restarts
    /// empty forgets its counter. Run nodes with `appendfsync always` where
    /// tokens must survive restarts.
    ///
    /// Cost: one more round trip per acquire, and one counter key per
    /// resource that never expires (about 80 bytes of memory per resource
    /// on each node).
    ///
    /// # Errors
    ///
    /// As for [`acquire`](Redlock::acquire); a commit that reaches no
    /// majority in time fails the attempt (it is released and retried).
    ///
    /// # Cancel safety
    ///
    /// As for [`acquire`](Redlock::acquire).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
    /// let lock = redlock.acquire_fenced("ledger", std::time::Duration::from_secs(10)).await?;
    /// let fence = lock.fence().expect("fenced locks carry a token");
    /// // UPDATE ledger SET ..., fence = $fence WHERE fence < $fence
    /// # lock.release().await
    /// # }
    /// ```
    pub async fn acquire_fenced(&self, resource: impl AsRef<[u8]>, ttl: Duration) -> Result<Lock> {
        self.acquisition(resource, ttl).fenced().acquire().await
    }

    /// Takes one lock over several resources, all or nothing on each node
    /// (one script per node sets every key or none), with retries per the
    /// builder's policy. Released and extended together; validity and
    /// quorum as for one resource.
    ///
    /// Two locks whose resource sets overlap exclude each other.
    ///
    /// # Errors
    ///
    /// As for [`acquire`](Redlock::acquire); also
    /// [`Error::InvalidInput`] for no resources or one listed twice.
    ///
    /// # Cancel safety
    ///
    /// As for [`acquire`](Redlock::acquire).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
    /// let lock = redlock
    ///     .acquire_all(["account:17", "account:42"], std::time::Duration::from_secs(5))
    ///     .await?;
    /// // transfer between the two accounts
    /// # lock.release().await
    /// # }
    /// ```
    pub async fn acquire_all<I, R>(&self, resources: I, ttl: Duration) -> Result<Lock>
    where
        I: IntoIterator<Item = R>,
        R: AsRef<[u8]>,
    {
        self.acquisition_all(resources, ttl).acquire().await
    }

    /// Waits until the work this crate left running in the background has
    /// finished — releases still travelling to slow nodes, cleanups of
    /// cancelled attempts, releases spawned by dropped locks — or `limit`
    /// has passed. Returns true when everything finished.
    ///
    /// [`Lock::release`] returns once a majority confirmed; a process that
    /// exits right after it (a CLI, a cron job) should call this first, or
    /// the slowest nodes may keep the key until its TTL.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock, lock: quorumlock::Lock) {
    /// let _ = lock.release().await;
    /// redlock.settle(std::time::Duration::from_millis(500)).await;
    /// # }
    /// ```
    pub async fn settle(&self, limit: Duration) -> bool {
        crate::background::settle(limit).await
    }

    /// Reads who holds `resource` on every node, without taking anything:
    /// per node, whether the key exists, a prefix of its value and its TTL.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) {
    /// let status = redlock.status("invoice:nightly").await;
    /// println!("{status}"); // "invoice:nightly" is held by 3f9a0c1e… on 5 of 5 nodes, expires in 29.1s
    /// # }
    /// ```
    pub async fn status(&self, resource: impl AsRef<[u8]>) -> Status {
        self.engine.status(resource.as_ref()).await
    }

    /// Starts describing an acquisition of one resource, for the options
    /// the shorthand methods do not cover (e.g. fenced *and* waiting).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
    /// use std::time::Duration;
    /// let lock = redlock
    ///     .acquisition("ledger", Duration::from_secs(10))
    ///     .fenced()
    ///     .wait(Duration::from_secs(30))
    ///     .acquire()
    ///     .await?;
    /// # lock.release().await
    /// # }
    /// ```
    pub fn acquisition(&self, resource: impl AsRef<[u8]>, ttl: Duration) -> Acquisition<'_> {
        Acquisition::new(self, Target::One(resource.as_ref().to_vec()), ttl)
    }

    /// Like [`acquisition`](Redlock::acquisition), over several resources
    /// taken all or nothing.
    pub fn acquisition_all<I, R>(&self, resources: I, ttl: Duration) -> Acquisition<'_>
    where
        I: IntoIterator<Item = R>,
        R: AsRef<[u8]>,
    {
        let keys = Keys::many(resources);
        Acquisition::new(self, Target::Many(keys), ttl)
    }

    async fn run(
        &self,
        keys: Keys,
        ttl: Duration,
        retries: u32,
        deadline: Option<Instant>,
    ) -> Result<Lock> {
        let cfg = &self.engine.config;
        let (ttl, drift) = cfg.check_ttl(ttl)?;
        let mut attempts: u32 = 0;
        let mut watch: Option<Watch> = None;
        loop {
            attempts = attempts.saturating_add(1);
            let token = Token::generate();
            match self.engine.acquire_once(&keys, &token, ttl, drift).await {
                Attempt::Granted {
                    deadline: valid_until,
                    sets,
                    fence,
                } => {
                    return Ok(Lock::new(
                        self.engine.clone(),
                        keys,
                        token,
                        valid_until,
                        ttl,
                        sets,
                        fence,
                    ));
                }
                Attempt::Failed(failure) => {
                    let delay = quorum::backoff(
                        cfg.retry_delay_min,
                        cfg.retry_delay_max,
                        rand::random::<f64>(),
                    );
                    let out_of_time = deadline.is_some_and(|d| Instant::now() + delay >= d);
                    if attempts > retries || out_of_time || failure.fence_exhausted.is_some() {
                        return Err(self.failure(&keys, ttl, attempts, failure));
                    }
                    let held = failure.tally.no() > 0;
                    match (&self.engine.handoff, &watch) {
                        (Some(handoff), None) if held => {
                            // Subscribe, then retry at once: a release that
                            // came before the subscription is not missed.
                            watch = Some(handoff.watch(&keys, cfg.node_timeout).await);
                        }
                        (_, Some(w)) if held => {
                            tokio::select! {
                                _ = w.released() => {}
                                _ = tokio::time::sleep(delay) => {}
                            }
                        }
                        _ => tokio::time::sleep(delay).await,
                    }
                }
            }
        }
    }

    fn failure(&self, keys: &Keys, ttl: Duration, attempts: u32, f: AttemptFailure) -> Error {
        let resource = keys.name();
        let nodes = self.engine.nodes.len();
        if let Some(highest) = f.fence_exhausted {
            return Error::FenceExhausted { resource, highest };
        }
        if let Some(elapsed) = f.exhausted {
            return Error::ValidityExhausted {
                resource,
                elapsed,
                ttl,
                attempts,
            };
        }
        if f.tally.outage() || f.tally.no() == 0 {
            Error::Unavailable {
                operation: "acquire",
                resource,
                granted: f.tally.yes(),
                needed: f.tally.needed(),
                nodes,
                attempts,
                failures: f.failures,
            }
        } else {
            Error::Contended {
                resource,
                held_elsewhere: f.tally.no(),
                granted: f.tally.yes(),
                needed: f.tally.needed(),
                nodes,
                attempts,
                failures: f.failures,
            }
        }
    }
}

impl Builder {
    /// How long to wait for one node's reply before counting it as failed
    /// (default [`DEFAULT_NODE_TIMEOUT`](crate::DEFAULT_NODE_TIMEOUT), 50 ms).
    /// Keep it small against the TTL: a dead node must not eat the validity.
    /// It is also capped at the TTL's validity budget.
    pub fn node_timeout(mut self, timeout: Duration) -> Self {
        self.config.node_timeout = timeout;
        self
    }

    /// How long to wait for a TCP (and TLS) connection to a node (default
    /// [`DEFAULT_CONNECT_TIMEOUT`](crate::DEFAULT_CONNECT_TIMEOUT), 500 ms).
    /// [`build`](Builder::build) waits at most this long for the first
    /// connections.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.config.connect_timeout = timeout;
        self
    }

    /// Clock-drift factor (default [`DEFAULT_DRIFT_FACTOR`](crate::DEFAULT_DRIFT_FACTOR),
    /// 0.01): drift = `ttl × factor + 2 ms`. Must be in `[0, 1)`.
    pub fn drift_factor(mut self, factor: f64) -> Self {
        self.config.drift_factor = factor;
        self
    }

    /// Retries after the first attempt of [`Redlock::acquire`] (default
    /// [`DEFAULT_RETRY_COUNT`](crate::DEFAULT_RETRY_COUNT), 3).
    pub fn retry_count(mut self, retries: u32) -> Self {
        self.config.retry_count = retries;
        self
    }

    /// Bounds of the uniformly random delay between attempts (default 0–200 ms).
    pub fn retry_delay(mut self, min: Duration, max: Duration) -> Self {
        self.config.retry_delay_min = min;
        self.config.retry_delay_max = max;
        self
    }

    /// Overall time limit of [`Redlock::acquire`] across retries (default
    /// none: only the retry count limits it). No attempt starts after it.
    pub fn retry_deadline(mut self, limit: Option<Duration>) -> Self {
        self.config.retry_deadline = limit;
        self
    }

    /// Fast hand-off (default on): while [`Redlock::acquire`] waits for a
    /// held lock, it subscribes on every node to the channel the release
    /// script publishes on (`quorumlock:released:<resource>`) and retries as
    /// soon as a release is announced, instead of only after the random
    /// retry delay (which stays as the fallback). Costs one subscriber
    /// connection per node, opened the first time a caller waits.
    pub fn fast_handoff(mut self, on: bool) -> Self {
        self.config.fast_handoff = on;
        self
    }

    /// Restart quarantine (default off): a node that has been up for less
    /// than `required` does not vote for new locks. Its uptime is read
    /// (`INFO server`) when the client starts and again after every
    /// connection error, since the node may have restarted.
    ///
    /// Why: a node that restarts without persistence has forgotten every
    /// key. If it votes at once, a second client can win a majority with it
    /// while the first client's lock is still valid on the other nodes — two
    /// holders. The Redlock specification's cure is a "delayed restart":
    /// keep a restarted node out for longer than the largest TTL in use.
    /// This does it in the client, whatever restarts the server. Set
    /// `required` to at least your largest TTL; it is not needed when every
    /// node runs with `appendonly yes` and `appendfsync always`.
    ///
    /// Release and extend still go to a quarantined node (they only remove
    /// or keep this client's own keys).
    pub fn restart_quarantine(mut self, required: Option<Duration>) -> Self {
        self.config.restart_quarantine = required;
        self
    }

    /// Trusts `pem` (one or more PEM certificates) as the root CA of
    /// `rediss://` nodes, instead of the system's roots. Needs the `tls`
    /// feature.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), quorumlock::Error> {
    /// let ca = std::fs::read("ca.pem").expect("CA certificate");
    /// let redlock = quorumlock::Redlock::builder(["rediss://redis-1.internal:6380"])
    ///     .tls_root_ca(ca)
    ///     .build()
    ///     .await?;
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "tls")]
    pub fn tls_root_ca(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls_certificates().root_cert = Some(pem.into());
        self
    }

    /// Presents this client certificate and key (PEM) to `rediss://` nodes
    /// that require one (`tls-auth-clients yes`). Needs the `tls` feature.
    #[cfg(feature = "tls")]
    pub fn tls_client_auth(
        mut self,
        cert_pem: impl Into<Vec<u8>>,
        key_pem: impl Into<Vec<u8>>,
    ) -> Self {
        self.tls_certificates().client_tls = Some(redis::ClientTlsConfig {
            client_cert: cert_pem.into(),
            client_key: key_pem.into(),
        });
        self
    }

    #[cfg(feature = "tls")]
    fn tls_certificates(&mut self) -> &mut redis::TlsCertificates {
        self.config.tls.get_or_insert(redis::TlsCertificates {
            client_tls: None,
            root_cert: None,
        })
    }

    /// Checks the configuration, parses the node URLs and opens the
    /// connections, waiting at most the connect timeout for them. Nodes that
    /// are down are not an error: they are retried on every operation, and
    /// the lock works while a majority answers.
    ///
    /// Must run inside a tokio runtime.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`]: no nodes, an unparsable URL, the same node
    /// (host, port, database) twice, or a setting out of range.
    pub async fn build(self) -> Result<Redlock> {
        self.config.validate()?;
        #[cfg_attr(not(feature = "tls"), allow(unused_mut))]
        let mut specs = config::parse_nodes(&self.urls)?;
        #[cfg(feature = "tls")]
        for spec in &mut specs {
            spec.tls = self.config.tls.clone();
        }
        let nodes = specs
            .iter()
            .map(|spec| {
                Node::new(spec, self.config.connect_timeout)
                    .map_err(|e| Error::invalid(format!("cannot use node {}: {e}", spec.label)))
            })
            .collect::<Result<Vec<_>>>()?;
        let handoff = self.config.fast_handoff.then(|| {
            let clients = nodes
                .iter()
                .map(|n| (n.label().to_owned(), n.client().clone()))
                .collect();
            Arc::new(Handoff::new(clients, self.config.connect_timeout))
        });
        let engine = Arc::new(Engine {
            nodes,
            config: self.config,
            handoff,
            leases: Arc::default(),
        });
        engine.connect_all().await;
        Ok(Redlock { engine })
    }
}

enum Target {
    One(Vec<u8>),
    Many(Result<Keys>),
}

/// One acquisition, described step by step; see [`Redlock::acquisition`].
///
/// By default it retries per the builder's policy, unfenced.
#[derive(Debug)]
#[must_use = "an acquisition does nothing until acquire() is awaited"]
pub struct Acquisition<'a> {
    redlock: &'a Redlock,
    target: Target,
    ttl: Duration,
    fenced: bool,
    retries: u32,
    wait: Option<Duration>,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::One(r) => write!(f, "{}", crate::ResourceName::new(r)),
            Target::Many(Ok(keys)) => write!(f, "{keys}"),
            Target::Many(Err(e)) => write!(f, "{e}"),
        }
    }
}

impl<'a> Acquisition<'a> {
    fn new(redlock: &'a Redlock, target: Target, ttl: Duration) -> Self {
        let cfg = &redlock.engine.config;
        Self {
            redlock,
            target,
            ttl,
            fenced: false,
            retries: cfg.retry_count,
            wait: cfg.retry_deadline,
        }
    }

    /// Hands out a fencing token; see [`Redlock::acquire_fenced`]. Only for
    /// a single resource.
    pub fn fenced(mut self) -> Self {
        self.fenced = true;
        self
    }

    /// One attempt, no retries.
    pub fn once(mut self) -> Self {
        self.retries = 0;
        self.wait = None;
        self
    }

    /// This many retries after the first attempt.
    pub fn retries(mut self, retries: u32) -> Self {
        self.retries = retries;
        self
    }

    /// Retries without a count limit until `wait` has passed.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.retries = u32::MAX;
        self.wait = Some(wait);
        self
    }

    /// Runs the acquisition.
    ///
    /// # Errors
    ///
    /// As for [`Redlock::acquire`]; [`Error::InvalidInput`] also for a
    /// fenced lock over several resources.
    ///
    /// # Cancel safety
    ///
    /// As for [`Redlock::acquire`].
    pub async fn acquire(self) -> Result<Lock> {
        let deadline = self.wait.map(|w| Instant::now() + w);
        let keys = match self.target {
            Target::One(resource) => Keys::one(&resource, self.fenced)?,
            Target::Many(keys) => {
                let keys = keys?;
                if self.fenced {
                    return Err(Error::invalid(
                        "fencing tokens are for single-resource locks",
                    ));
                }
                keys
            }
        };
        self.redlock
            .run(keys, self.ttl, self.retries, deadline)
            .await
    }
}
