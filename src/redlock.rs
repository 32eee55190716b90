//! The public handle: building it, and acquiring locks with retries.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::{self, Config};
use crate::error::{Error, ResourceName, Result};
use crate::fanout::{Attempt, AttemptFailure, Engine};
use crate::lock::Lock;
use crate::node::Node;
use crate::quorum;
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
    engine: Arc<Engine>,
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
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until build() is awaited"]
pub struct Builder {
    urls: Vec<String>,
    config: Config,
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
        let cfg = &self.engine.config;
        let deadline = cfg.retry_deadline.map(|d| Instant::now() + d);
        self.acquire_with(resource.as_ref(), ttl, cfg.retry_count, deadline)
            .await
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
        self.acquire_with(resource.as_ref(), ttl, 0, None).await
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
        let deadline = Instant::now() + wait;
        self.acquire_with(resource.as_ref(), ttl, u32::MAX, Some(deadline))
            .await
    }

    async fn acquire_with(
        &self,
        resource: &[u8],
        ttl: Duration,
        retries: u32,
        deadline: Option<Instant>,
    ) -> Result<Lock> {
        let cfg = &self.engine.config;
        config::check_resource(resource)?;
        let (ttl, drift) = cfg.check_ttl(ttl)?;
        let resource: Arc<[u8]> = Arc::from(resource);
        let mut attempts: u32 = 0;
        loop {
            attempts = attempts.saturating_add(1);
            let token = Token::generate();
            match self
                .engine
                .acquire_once(&resource, &token, ttl, drift)
                .await
            {
                Attempt::Granted {
                    deadline: valid_until,
                    sets,
                } => {
                    return Ok(Lock::new(
                        self.engine.clone(),
                        resource,
                        token,
                        valid_until,
                        sets,
                    ));
                }
                Attempt::Failed(failure) => {
                    let delay = quorum::backoff(
                        cfg.retry_delay_min,
                        cfg.retry_delay_max,
                        rand::random::<f64>(),
                    );
                    let out_of_time = deadline.is_some_and(|d| Instant::now() + delay >= d);
                    if attempts > retries || out_of_time {
                        return Err(self.failure(&resource, ttl, attempts, failure));
                    }
                    tokio::time::sleep(delay).await;
                }
            }
        }
    }

    fn failure(&self, resource: &[u8], ttl: Duration, attempts: u32, f: AttemptFailure) -> Error {
        let resource = ResourceName::new(resource);
        let nodes = self.engine.nodes.len();
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
        let engine = Arc::new(Engine {
            nodes,
            config: self.config,
        });
        engine.connect_all().await;
        Ok(Redlock { engine })
    }
}
