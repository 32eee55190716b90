//! [`Builder`]: the nodes (addresses or ready clients, [`IntoNode`]) and
//! the settings of a [`Redlock`], checked and connected by
//! [`Builder::build`].

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::nodes::{self, IntoNode, NodeSource, Source};
use crate::config::{Config, Durability, Retry};
use crate::error::{Error, Result};
use crate::member::cluster::ClusterMap;
use crate::member::link::{Shard, Target};
use crate::member::route::Route;
use crate::member::sentinel::Sentinels;
use crate::member::Node;
use crate::node::admission::{self, Failover, Gate, Registry};
use crate::node::Window;
use crate::quorum::background::Background;
use crate::quorum::engine::Engine;
use crate::quorum::handoff::Handoff;
use crate::redlock::Redlock;

/// Configures a [`Redlock`]. Every setting has a documented default.
///
/// Nodes are given to [`Builder::new`] as anything that is [`IntoNode`]:
/// `"redis://host:port"` URLs (`&str`, `String`, in arrays, slices, vectors
/// or iterators), `redis::ConnectionInfo`, or ready `redis::Client`s; or
/// as one comma-separated string to [`Builder::from_list`] /
/// [`Builder::from_env`].
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use quorumlock::Retry;
/// # async fn demo() -> Result<(), quorumlock::Error> {
/// let redlock = quorumlock::Builder::new(["redis://127.0.0.1:7001"])
///     .node_timeout(Duration::from_millis(20))
///     .retry(Retry::Times(10))
///     .retry_delay(Duration::from_millis(50), Duration::from_millis(250))
///     .build()
///     .await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
#[must_use = "a builder does nothing until build() is awaited"]
pub struct Builder {
    nodes: Vec<Source>,
    config: Config,
    /// The first error found while the builder was made (a node that does
    /// not parse, an unset environment variable), reported by `build`.
    pending: Option<Error>,
}

impl Builder {
    /// Starts configuring a client for these nodes: any list of
    /// [`IntoNode`] — URLs (`redis://[user[:password]@]host[:port][/db]`,
    /// `rediss://` with the `tls` feature, `unix:///path`) as `&str` or
    /// `String`, `redis::ConnectionInfo`, or ready `redis::Client`s (used
    /// as they are; the builder's TLS settings do not apply to them). An
    /// address that does not parse is reported by
    /// [`build`](Builder::build), with its position and the reason.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let urls: Vec<String> = (7001..=7005).map(|p| format!("redis://127.0.0.1:{p}")).collect();
    /// let redlock = quorumlock::Builder::new(&urls).build().await?;
    /// assert_eq!(redlock.quorum(), 3);
    ///
    /// // Clients configured the redis crate's way.
    /// let clients = urls
    ///     .iter()
    ///     .map(|url| redis::Client::open(url.as_str()))
    ///     .collect::<Result<Vec<_>, _>>()?;
    /// let redlock = quorumlock::Builder::new(clients).build().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn new<I>(nodes: I) -> Self
    where
        I: IntoIterator,
        I::Item: IntoNode,
    {
        Self::with(nodes.into_iter().map(IntoNode::into_node).enumerate())
    }

    /// Starts configuring a client for the nodes of a comma-separated list
    /// of URLs, as an environment variable or a command-line option holds
    /// them. Spaces around an entry and empty entries are ignored (a
    /// trailing comma, `a,,b`); an entry that does not parse is reported by
    /// [`build`](Builder::build) with its position in the list as written.
    /// A member's own list of hosts stays together:
    /// `redis+sentinel://a:26379,b:26379/qa,redis://c:6379` is two members.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), quorumlock::Error> {
    /// let redlock = quorumlock::Builder::from_list("redis://10.0.0.1:6379, redis://10.0.0.2:6379,redis://10.0.0.3:6379,")
    ///     .build()
    ///     .await?;
    /// assert_eq!(redlock.nodes(), 3);
    /// # Ok(())
    /// # }
    /// ```
    pub fn from_list(list: &str) -> Self {
        let mut entries: Vec<(usize, String)> = Vec::new();
        let written = list.split(',').map(str::trim).enumerate();
        for (i, entry) in written.filter(|(_, e)| !e.is_empty()) {
            match entries.last_mut() {
                Some((_, open)) if !entry.contains("://") && nodes::hosts_open(open) => {
                    open.push(',');
                    open.push_str(entry);
                }
                _ => entries.push((i, entry.to_owned())),
            }
        }
        Self::with(entries.into_iter().map(|(i, entry)| (i, entry.into_node())))
    }

    /// Starts configuring a client for the nodes listed in the environment
    /// variable `name`, read now, as [`from_list`](Builder::from_list)
    /// reads them (the command-line tool's convention is
    /// `QUORUMLOCK_NODES`). A variable that is not set, or not Unicode, is
    /// reported by [`build`](Builder::build).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), quorumlock::Error> {
    /// // QUORUMLOCK_NODES=redis://10.0.0.1:6379,redis://10.0.0.2:6379,redis://10.0.0.3:6379
    /// let redlock = quorumlock::Builder::from_env("QUORUMLOCK_NODES").build().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn from_env(name: &str) -> Self {
        let why = match std::env::var(name) {
            Ok(list) => return Self::from_list(&list),
            Err(std::env::VarError::NotPresent) => "is not set",
            Err(std::env::VarError::NotUnicode(_)) => "is not valid Unicode",
        };
        let mut builder = Self::with(std::iter::empty());
        builder.pending = Some(Error::invalid(format!(
            "environment variable {name} {why}: it should hold the nodes' URLs, separated by commas"
        )));
        builder
    }

    /// A builder with the default settings for `nodes`, each with its
    /// index in the list as written.
    fn with(nodes: impl Iterator<Item = (usize, NodeSource)>) -> Self {
        let mut pending = None;
        let nodes = nodes.map(|(i, NodeSource(source))| {
            if let (Source::Invalid(bad), None) = (&source, &pending) {
                pending = Some(Error::InvalidNode {
                    position: i + 1,
                    address: bad.shown.clone(),
                    reason: bad.reason.clone(),
                });
            }
            source
        });
        Self {
            nodes: nodes.collect(),
            config: Config::default(),
            pending,
        }
    }
}

impl Builder {
    /// How long to wait for one node's reply before counting it as failed
    /// (default [`DEFAULT_NODE_TIMEOUT`](crate::DEFAULT_NODE_TIMEOUT), 50 ms).
    /// Keep it small against the TTL: a dead node must not eat the validity.
    /// It is also capped at the TTL's validity budget. A read of `k` keys
    /// ([`Redlock::semaphore_status`](crate::Redlock::semaphore_status),
    /// [`Redlock::status`](crate::Redlock::status)) gives each node this
    /// plus `k / 1024` of it.
    pub fn node_timeout(self, timeout: Duration) -> Self {
        self.set(|c| c.node_timeout = timeout)
    }

    /// How long to wait for a TCP (and TLS) connection to a node (default
    /// [`DEFAULT_CONNECT_TIMEOUT`](crate::DEFAULT_CONNECT_TIMEOUT), 500 ms).
    /// [`build`](Builder::build) waits at most this long for the first
    /// connections.
    pub fn connect_timeout(self, timeout: Duration) -> Self {
        self.set(|c| c.connect_timeout = timeout)
    }

    /// Clock-drift factor (default [`DEFAULT_DRIFT_FACTOR`](crate::DEFAULT_DRIFT_FACTOR),
    /// 0.01): drift = `ttl × factor + 2 ms`. Must be in `[0, 1)`.
    pub fn drift_factor(self, factor: f64) -> Self {
        self.set(|c| c.drift_factor = factor)
    }

    /// How long [`Redlock::acquire`] keeps trying: a number of retries,
    /// a time limit, or both (default
    /// [`DEFAULT_RETRY`](crate::DEFAULT_RETRY), [`Retry::Times(3)`](Retry::Times));
    /// a request's [`LockRequest::retry`](crate::LockRequest::retry)
    /// replaces it.
    pub fn retry(self, retry: Retry) -> Self {
        self.set(|c| c.retry = retry)
    }

    /// Bounds of the uniformly random delay between attempts (default 0–200 ms).
    pub fn retry_delay(self, min: Duration, max: Duration) -> Self {
        self.set(|c| (c.retry_delay_min, c.retry_delay_max) = (min, max))
    }

    /// Fast hand-off (default on): while [`Redlock::acquire`] waits for a
    /// held lock, it subscribes to the channel the release script publishes
    /// on (`quorumlock:released:<resource>`) on `N − quorum + 1` of the `N`
    /// nodes (every majority includes one of them) and retries as soon as a
    /// release is announced, instead of only after the random retry delay
    /// (which stays as the fallback; without a retry count, as with
    /// [`Retry::Until`], it stretches to the holder's remaining time, at
    /// most a second). Costs one
    /// subscriber connection per listened node, opened the first time a
    /// caller waits.
    ///
    /// Best effort: for a user without rights on the channel (Redis 7's
    /// default for new ACL users) releases still succeed, the node logs one
    /// warning, and waiters fall back to the retry delay there.
    pub fn fast_handoff(self, on: bool) -> Self {
        self.set(|c| c.fast_handoff = on)
    }

    /// The lease of a waiter's entry in a waiter queue (default
    /// [`DEFAULT_WAITER_LEASE`](crate::DEFAULT_WAITER_LEASE), 3 s, or
    /// three node timeouts if longer; `docs/queue.md`). A waiter renews it every third of it while it
    /// waits; one that crashed keeps those behind it waiting at most this
    /// long, and a third more. At least three node timeouts, at most
    /// [`MAX_TTL`](crate::MAX_TTL): `build` refuses others (a zero lease
    /// among them) with [`Error::InvalidInput`](crate::Error::InvalidInput).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use std::time::Duration;
    /// // Checked before any connection is made.
    /// let refused = quorumlock::Builder::new(["redis://127.0.0.1:6379"])
    ///     .waiter_lease(Duration::ZERO)
    ///     .build()
    ///     .await;
    /// assert!(refused.unwrap_err().is_invalid_input());
    /// # }
    /// ```
    pub fn waiter_lease(self, lease: Duration) -> Self {
        self.set(|c| c.waiter_lease = Some(lease))
    }

    /// Restart quarantine (default off): a node that has been up for less
    /// than `required` does not vote for new locks. Its uptime is read
    /// (`INFO server`) when the client starts and again after every
    /// connection loss or reconnect, since the node may have restarted —
    /// including the reconnects the redis crate makes by itself (RESP3
    /// URLs, background commands). A `required` longer than any uptime
    /// keeps every node out.
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
    ///
    /// A failover is a restart: a member that is a Sentinel group or a
    /// Redis Cluster shard whose master is another server than the last
    /// one read (another `run_id` or replication id) stays out for
    /// `required` from when the new master is first seen, whatever its
    /// uptime, since a promoted replica may lack keys the old master
    /// granted. [`build`](Builder::build) refuses such members without
    /// restart quarantine.
    pub fn restart_quarantine(self, required: Option<Duration>) -> Self {
        self.set(|c| c.restart_quarantine = required)
    }

    /// Durable votes (default off): a member's yes to an acquire, an
    /// extension, a repair or a fencing commit counts only once its write
    /// reached what `durability` asks — `r` replicas (`WAIT`), or the
    /// append-only files (`WAITAOF`, refused by [`build`](Builder::build)
    /// on a server without it) — within what is left of the node timeout.
    /// A yes that did not is not counted
    /// ([`NodeFailureKind::NotDurable`](crate::NodeFailureKind::NotDurable)).
    ///
    /// For members that fail over (Sentinel groups, Redis Clusters), and
    /// only them: a single server does not wait. Such a member needs them,
    /// with `r` equal to its master's number of replicas: a failover to
    /// any replica then keeps every lock, and a deposed master still
    /// accepting writes cannot grant (its replicas follow the new master).
    /// [`build`](Builder::build) refuses a Sentinel group without durable
    /// votes, and a master whose replicas `r` does not all cover
    /// ([`NodeFailureKind::Replicas`](crate::NodeFailureKind::Replicas));
    /// restart quarantine alone is not enough (`docs/members.md`). While
    /// fewer than `r` replicas are online, the member grants nothing.
    /// Costs the replication round trip on every acquire
    /// (`BENCHMARKS.md`); the node timeout must cover it.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), quorumlock::Error> {
    /// use std::time::Duration;
    /// use quorumlock::{Builder, Durability};
    /// let redlock = Builder::new(["redis+sentinel://10.0.0.1:26379,10.0.0.2:26379/locks"])
    ///     .restart_quarantine(Some(Duration::from_secs(60)))
    ///     .durable_votes(Some(Durability::Replicas(1)))
    ///     .node_timeout(Duration::from_millis(100))
    ///     .build()
    ///     .await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn durable_votes(self, durability: Option<Durability>) -> Self {
        self.set(|c| c.durable = durability)
    }

    /// Accepts nodes that can evict keys (default off): by default a node
    /// whose `maxmemory` is set with a `maxmemory-policy` other than
    /// `noeviction` is refused by [`build`](Builder::build), and never
    /// votes if it connects later, because eviction breaks the lock:
    /// `allkeys-*` can evict a held lock's key (a second client is then
    /// granted it) and a fencing counter (tokens repeat); `volatile-*`
    /// evicts keys with an expiry, which every lock key has, before their
    /// TTL. Turn this on only if you know memory never runs out on these
    /// nodes, or accept those failures.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), quorumlock::Error> {
    /// let redlock = quorumlock::Builder::new(["redis://cache-1:6379", "redis://cache-2:6379"])
    ///     .allow_eviction(true)
    ///     .build()
    ///     .await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn allow_eviction(self, allow: bool) -> Self {
        self.set(|c| c.allow_eviction = allow)
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
    /// let redlock = quorumlock::Builder::new(["rediss://redis-1.internal:6380"])
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

    /// Makes [`build`](Builder::build) fail unless a quorum of nodes is
    /// ready — reachable, accepting the credentials, admitted — when it
    /// runs (default off: nodes that are down at build are retried on every
    /// operation, and the lock works once a majority answers). For services
    /// that should not start against a misconfigured cluster: a wrong
    /// password, port or host name is reported at start, per node, not at
    /// the first lock. [`Redlock::health`] tells the same later.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), quorumlock::Error> {
    /// let redlock = quorumlock::Builder::new(["redis://10.0.0.1:6379", "redis://10.0.0.2:6379", "redis://10.0.0.3:6379"])
    ///     .require_quorum(true)
    ///     .build()
    ///     .await;
    /// if let Err(e @ quorumlock::Error::NotReady { .. }) = &redlock {
    ///     for failure in e.node_failures() {
    ///         eprintln!("{failure}"); // e.g. "10.0.0.2:6379/0: WRONGPASS …"
    ///     }
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn require_quorum(self, required: bool) -> Self {
        self.set(|c| c.require_quorum = required)
    }

    /// A client that only reads (default off): status, semaphore and
    /// read–write lock status, the leader and its observer, health and
    /// stats. It takes no lock, permit or leadership (each is refused with
    /// [`Error::InvalidInput`] before anything
    /// is sent), so the safeguards of votes do not apply to it: a member
    /// that fails over needs no durable votes, and its replicas are not
    /// judged. For dashboards and `quorumlock status`.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), quorumlock::Error> {
    /// let reader = quorumlock::Builder::new(["redis+sentinel://10.0.0.1:26379,10.0.0.2:26379/locks"])
    ///     .read_only(true)
    ///     .build()
    ///     .await?;
    /// println!("{:?}", reader.status("nightly-invoice").await);
    /// # Ok(())
    /// # }
    /// ```
    pub fn read_only(self, read_only: bool) -> Self {
        self.set(|c| c.read_only = read_only)
    }

    /// The builder with `change` made to its settings.
    fn set(mut self, change: impl FnOnce(&mut Config)) -> Self {
        change(&mut self.config);
        self
    }

    #[cfg(feature = "tls")]
    fn tls_certificates(&mut self) -> &mut redis::TlsCertificates {
        self.config.tls.get_or_insert(redis::TlsCertificates {
            client_tls: None,
            root_cert: None,
        })
    }

    /// Checks the configuration and the node list and opens the
    /// connections, waiting at most the connect timeout for them. Nodes that
    /// are down are not an error: they are retried on every operation, and
    /// the lock works while a majority answers.
    ///
    /// Must run inside a tokio runtime.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`]: no nodes, the variable of
    /// [`from_env`](Builder::from_env) not set, the same node (host, port,
    /// database) twice, or a setting out of range. Also,
    /// among the nodes that answer: two entries that are one server (the
    /// same `run_id` in `INFO server`: `localhost` and `127.0.0.1`, a TCP
    /// address and the server's unix socket, two databases of one server),
    /// which would vote twice; and a node whose `maxmemory` is set with a
    /// `maxmemory-policy` other than `noeviction`, which can evict the
    /// lock's keys (unless [`allow_eviction`](Builder::allow_eviction)).
    /// Where `INFO` or `CONFIG` is not permitted (ACL), the check is left
    /// out with a warning. A node down at build is checked when it
    /// connects: if it is another node's server, or can evict keys, it
    /// never votes ([`NodeFailureKind::SameServer`](crate::NodeFailureKind::SameServer),
    /// [`NodeFailureKind::Evicts`](crate::NodeFailureKind::Evicts)).
    ///
    /// [`Error::InvalidNode`]: an address that does not parse, with its
    /// position in the list, the address (never its password) and the
    /// reason.
    ///
    /// [`Error::NotReady`], with [`require_quorum`](Builder::require_quorum):
    /// fewer nodes than a quorum reachable, authenticated and admitted
    /// within the connect timeout; each other node is named with its
    /// failure.
    pub async fn build(self) -> Result<Redlock> {
        if let Some(error) = self.pending {
            return Err(error);
        }
        self.config.validate()?;
        let labels: Vec<String> = self.nodes.iter().map(Source::shown).collect();
        nodes::check_nodes(&labels)?;
        let registry = Registry::new(&labels);
        let config = self.config;
        let timeout = config.connect_timeout;
        let entries = self.nodes.into_iter().zip(&labels).enumerate();
        let nodes = entries
            .map(|(i, (node, label))| {
                let failover = match config.read_only {
                    true => Failover::Never,
                    false => node.failover(label, config.durable)?,
                };
                let gate = Gate::new(i, registry.clone(), !config.allow_eviction, failover);
                let gate = Arc::new(gate);
                let route = route(node, label, &config, gate.clone())?;
                Ok(Node::new(label, route, gate, &config))
            })
            .collect::<Result<Arc<[_]>>>()?;
        let handoff = config
            .fast_handoff
            .then(|| Arc::new(Handoff::listening(&nodes, timeout)));
        let engine = Arc::new(Engine {
            nodes,
            config,
            handoff,
            leases: Arc::default(),
            background: Background::default(),
        });
        engine.connect_all().await;
        let misconfigured = engine.nodes.iter().map(|n| n.misconfigured(timeout));
        let misconfigured = futures::future::join_all(misconfigured).await;
        if let Some(wrong) = misconfigured.into_iter().flatten().next() {
            return Err(Error::invalid(wrong));
        }
        if let Some(Durability::Aof { .. }) = engine.config.durable {
            let window = Window::from_now(timeout);
            for node in engine.nodes.iter().filter(|n| n.fails_over()) {
                if node.lacks("WAITAOF", window).await {
                    return Err(Error::invalid(format!(
                        "member {} has no WAITAOF (Redis 7.2 or later, Valkey 8): durable \
                         votes on the AOF cannot be checked there; use \
                         Durability::Replicas (WAIT) or upgrade the server",
                        node.label()
                    )));
                }
            }
        }
        let refused = engine.nodes.iter().enumerate();
        let refused = refused.filter_map(|(i, node)| Some((i, node.refused()?)));
        if let Some(message) = admission::build_refusal(&labels, refused) {
            return Err(Error::invalid(message));
        }
        let redlock = Redlock { engine };
        if redlock.engine.config.require_quorum {
            if let Some(error) = redlock.health().await.not_ready() {
                return Err(error);
            }
        }
        Ok(redlock)
    }
}

/// How the member `source` (shown as `label`) is reached, its
/// connections admitted by `gate`.
fn route(source: Source, label: &str, config: &Config, gate: Arc<Gate>) -> Result<Route> {
    let timeout = config.connect_timeout;
    let unusable = |e: redis::RedisError| Error::invalid(format!("cannot use member {label}: {e}"));
    let target = match source {
        Source::Sentinel {
            sentinels,
            group,
            server,
        } => Target::Sentinel(Arc::new(
            Sentinels::new(sentinels, &group, &server, config).map_err(unusable)?,
        )),
        Source::Cluster(seeds) => {
            let seeds = seeds.into_iter().map(|info| {
                let addr = nodes::address(&info);
                // The builder's TLS settings ride in the seed's address,
                // and from it to every server the slot table names.
                Ok((addr, client(info, config)?))
            });
            let seeds = seeds.collect::<Result<_>>()?;
            let map = ClusterMap::new(seeds, timeout, gate).map_err(unusable)?;
            return Ok(Route::Cluster(Box::new(map)));
        }
        Source::Address(info) => Target::Server(Box::new(client(info, config)?)),
        Source::Client(client) => Target::Server(Box::new(client)),
        Source::Invalid(bad) => return Err(Error::invalid(bad.reason)),
    };
    Ok(Route::One(Shard::new(label, target, timeout, gate)))
}

/// The client of the server at `info`, with the builder's settings (TLS).
#[cfg_attr(not(feature = "tls"), allow(unused_variables))]
fn client(info: redis::ConnectionInfo, config: &Config) -> Result<redis::Client> {
    let label = nodes::label(&info);
    let unusable = |e| Error::invalid(format!("cannot use node {label}: {e}"));
    #[cfg(feature = "tls")]
    if let (Some(certs), redis::ConnectionAddr::TcpTls { .. }) = (&config.tls, info.addr()) {
        // rustls needs a process-wide crypto provider; install ring
        // unless the application installed one already.
        let _ = rustls::crypto::ring::default_provider().install_default();
        return redis::Client::build_with_tls(info, certs.clone()).map_err(unusable);
    }
    redis::Client::open(info).map_err(unusable)
}

/// Shows each node as `host:port/db`: never a password.
impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nodes: Vec<String> = self.nodes.iter().map(Source::shown).collect();
        f.debug_struct("Builder")
            .field("nodes", &nodes)
            .field("config", &self.config)
            .finish()
    }
}
