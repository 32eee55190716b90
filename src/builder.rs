//! [`Builder`]: the nodes (addresses or ready clients) and the settings of
//! a [`Redlock`], checked and connected by [`Builder::build`].

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use redis::IntoConnectionInfo;

use crate::config::{self, Config};
use crate::error::{Error, Result};
use crate::node::admission::{self, Gate, Registry};
use crate::node::Node;
use crate::quorum::background::Background;
use crate::quorum::engine::Engine;
use crate::quorum::handoff::{self, Handoff};
use crate::redlock::Redlock;

/// Configures a [`Redlock`]. Every setting has a documented default.
///
/// Nodes are given to [`Builder::new`] as anything the redis crate turns
/// into a connection (`"redis://host:port"` URLs, `ConnectionInfo`), or to
/// [`Builder::from_clients`] as ready `redis::Client`s.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// # async fn demo() -> Result<(), quorumlock::Error> {
/// let redlock = quorumlock::Builder::new(["redis://127.0.0.1:7001"])
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
    nodes: Vec<NodeSource>,
    config: Config,
}

impl Builder {
    /// Starts configuring a client for these nodes: anything the redis
    /// crate turns into a connection — URLs
    /// (`redis://[user[:password]@]host[:port][/db]`, `rediss://` with the
    /// `tls` feature, `unix:///path`), `redis::ConnectionInfo`. An address
    /// that does not parse is reported by [`build`](Builder::build).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), quorumlock::Error> {
    /// let urls: Vec<String> = (7001..=7005).map(|p| format!("redis://127.0.0.1:{p}")).collect();
    /// let redlock = quorumlock::Builder::new(urls).build().await?;
    /// assert_eq!(redlock.quorum(), 3);
    /// # Ok(())
    /// # }
    /// ```
    pub fn new<I, T>(nodes: I) -> Self
    where
        I: IntoIterator<Item = T>,
        T: IntoConnectionInfo,
    {
        let nodes = nodes
            .into_iter()
            .enumerate()
            .map(|(i, node)| match node.into_connection_info() {
                Ok(info) => NodeSource::Address(info),
                Err(e) => NodeSource::Invalid(format!("cannot parse node address #{}: {e}", i + 1)),
            })
            .collect();
        Self {
            nodes,
            config: Config::default(),
        }
    }

    /// Starts configuring a client over ready `redis::Client`s, one per
    /// node, configured the redis crate's way (TLS, authentication,
    /// protocol, timeouts): they are used as they are. The builder's TLS
    /// settings do not apply to them.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let clients = (7001..=7005)
    ///     .map(|port| redis::Client::open(format!("redis://127.0.0.1:{port}")))
    ///     .collect::<Result<Vec<_>, _>>()?;
    /// let redlock = quorumlock::Builder::from_clients(clients).build().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn from_clients(clients: impl IntoIterator<Item = redis::Client>) -> Self {
        Self {
            nodes: clients.into_iter().map(NodeSource::Client).collect(),
            config: Config::default(),
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
    /// none: only the retry count limits it). No attempt starts after it,
    /// nor one whose retry delay would end after it. A limit too large to
    /// add to the current instant (`Duration::MAX`) is no limit.
    pub fn retry_deadline(mut self, limit: Option<Duration>) -> Self {
        self.config.retry_deadline = limit;
        self
    }

    /// Fast hand-off (default on): while [`Redlock::acquire`] waits for a
    /// held lock, it subscribes to the channel the release script publishes
    /// on (`quorumlock:released:<resource>`) on `N − quorum + 1` of the `N`
    /// nodes (every majority includes one of them) and retries as soon as a
    /// release is announced, instead of only after the random retry delay
    /// (which stays as the fallback; without a retry count, as with
    /// [`LockRequest::wait`](crate::LockRequest::wait) alone, it stretches
    /// to the holder's remaining time, at most a second). Costs one
    /// subscriber connection per listened node, opened the first time a
    /// caller waits.
    ///
    /// Best effort: for a user without rights on the channel (Redis 7's
    /// default for new ACL users) releases still succeed, the node logs one
    /// warning, and waiters fall back to the retry delay there.
    pub fn fast_handoff(mut self, on: bool) -> Self {
        self.config.fast_handoff = on;
        self
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
    pub fn restart_quarantine(mut self, required: Option<Duration>) -> Self {
        self.config.restart_quarantine = required;
        self
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
    pub fn allow_eviction(mut self, allow: bool) -> Self {
        self.config.allow_eviction = allow;
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
    /// [`Error::InvalidInput`]: no nodes, an unparsable address, the same
    /// node (host, port, database) twice, or a setting out of range. Also,
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
    pub async fn build(self) -> Result<Redlock> {
        self.config.validate()?;
        let labels = self
            .nodes
            .iter()
            .map(|node| node.label())
            .collect::<Result<Vec<_>>>()?;
        config::check_nodes(&labels)?;
        let registry = Registry::new(&labels);
        let check_eviction = !self.config.allow_eviction;
        let quarantine = self.config.restart_quarantine.is_some();
        let nodes = self
            .nodes
            .into_iter()
            .zip(&labels)
            .enumerate()
            .map(|(i, (node, label))| {
                let client = node.into_client(&self.config)?;
                let gate = Arc::new(Gate::new(i, registry.clone(), check_eviction));
                let timeout = self.config.connect_timeout;
                Ok(Node::new(label, client, timeout, gate, quarantine))
            })
            .collect::<Result<Arc<[_]>>>()?;
        let handoff = self.config.fast_handoff.then(|| {
            let listened = handoff::listened(nodes.len(), crate::random::below(nodes.len()));
            let clients = listened
                .map(|i| (nodes[i].label().to_owned(), nodes[i].client().clone()))
                .collect();
            Arc::new(Handoff::new(clients, self.config.connect_timeout))
        });
        let engine = Arc::new(Engine {
            nodes,
            config: self.config,
            handoff,
            leases: Arc::default(),
            background: Background::default(),
        });
        engine.connect_all().await;
        let refused = engine.nodes.iter().enumerate();
        let refused = refused.filter_map(|(i, node)| Some((i, node.refused()?)));
        if let Some(message) = admission::build_refusal(&labels, refused) {
            return Err(Error::invalid(message));
        }
        Ok(Redlock { engine })
    }
}

/// One node as given to the builder.
#[derive(Clone)]
enum NodeSource {
    /// An address, connected the way the builder's settings say.
    Address(redis::ConnectionInfo),
    /// A client configured by the caller (TLS, auth, protocol), used as is.
    Client(redis::Client),
    /// An address that did not parse: the error is reported by `build`.
    Invalid(String),
}

impl NodeSource {
    fn label(&self) -> Result<String> {
        match self {
            NodeSource::Address(info) => Ok(config::label(info)),
            NodeSource::Client(client) => Ok(config::label(client.get_connection_info())),
            NodeSource::Invalid(message) => Err(Error::invalid(message.clone())),
        }
    }

    #[cfg_attr(not(feature = "tls"), allow(unused_variables))]
    fn into_client(self, config: &Config) -> Result<redis::Client> {
        let info = match self {
            NodeSource::Client(client) => return Ok(client),
            NodeSource::Address(info) => info,
            NodeSource::Invalid(message) => return Err(Error::invalid(message)),
        };
        let label = config::label(&info);
        #[cfg(feature = "tls")]
        if let (Some(certs), redis::ConnectionAddr::TcpTls { .. }) = (&config.tls, info.addr()) {
            // rustls needs a process-wide crypto provider; install ring
            // unless the application installed one already.
            let _ = rustls::crypto::ring::default_provider().install_default();
            return redis::Client::build_with_tls(info, certs.clone())
                .map_err(|e| Error::invalid(format!("cannot use node {label}: {e}")));
        }
        redis::Client::open(info)
            .map_err(|e| Error::invalid(format!("cannot use node {label}: {e}")))
    }
}

/// Shows each node as `host:port/db`: never a password.
impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nodes: Vec<String> = self
            .nodes
            .iter()
            .map(|n| n.label().unwrap_or_else(|e| e.to_string()))
            .collect();
        f.debug_struct("Builder")
            .field("nodes", &nodes)
            .field("config", &self.config)
            .finish()
    }
}
