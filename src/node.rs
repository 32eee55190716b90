//! One Redis node: its long-lived multiplexed connection (reconnecting by
//! itself), the per-node timeout, and the commands the lock sends to it.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionManager;
use redis::{Client, ErrorKind, RedisError, Value};

use crate::config::NodeSpec;
use crate::error::{NodeFailure, NodeFailureKind};
use crate::quorum::{self, Vote};
use crate::scripts;
use crate::token::Token;

/// How long a background follow-up to a timed-out release may wait.
const STRAGGLER_TIMEOUT: Duration = Duration::from_secs(30);

/// A node of the cluster.
///
/// Commands travel over one multiplexed connection, in order. That order is
/// what lets a release sent after a stuck `SET` remove the key the `SET`
/// creates when the node wakes up. The connection is never torn down for a
/// slow reply (no response timeout inside the connection); the per-node
/// timeout only stops *waiting*.
#[derive(Clone)]
pub(crate) struct Node {
    label: String,
    conn: ConnectionManager,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node").field("label", &self.label).finish()
    }
}

/// A node's reply, or why there was none.
pub(crate) type NodeResult<T> = Result<T, NodeFailure>;

impl Node {
    /// Prepares the connection without waiting for it.
    pub(crate) fn new(spec: &NodeSpec, connect_timeout: Duration) -> Result<Self, RedisError> {
        let client = client(spec)?;
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(connect_timeout))
            .set_response_timeout(None)
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(10))
            .set_max_delay(Duration::from_millis(100));
        let conn = ConnectionManager::new_lazy_with_config(client, config)?;
        Ok(Self {
            label: spec.label.clone(),
            conn,
        })
    }

    /// `host:port/db`.
    pub(crate) fn label(&self) -> &str {
        &self.label
    }

    /// Sends `PING`, used to open the connection early.
    pub(crate) async fn ping(&self, timeout: Duration) -> NodeResult<()> {
        let mut conn = self.conn.clone();
        let cmd = redis::cmd("PING");
        self.timed(
            timeout,
            async move { cmd.query_async::<Value>(&mut conn).await },
        )
        .await
        .map(|_| ())
    }

    /// `SET resource token NX PX ttl` → Yes when set, No when the key exists.
    pub(crate) async fn set_nx(
        &self,
        resource: &[u8],
        token: &str,
        ttl: Duration,
        timeout: Duration,
    ) -> NodeResult<Vote> {
        let mut conn = self.conn.clone();
        let mut cmd = redis::cmd("SET");
        cmd.arg(resource)
            .arg(token)
            .arg("NX")
            .arg("PX")
            .arg(quorum::millis(ttl));
        let reply = self
            .timed(
                timeout,
                async move { cmd.query_async::<Value>(&mut conn).await },
            )
            .await?;
        match reply {
            Value::Okay => Ok(Vote::Yes),
            Value::Nil => Ok(Vote::No),
            other => Err(self.protocol(&other)),
        }
    }

    /// Compare-and-delete → true when our key was deleted, false when the
    /// key is absent or holds another token.
    ///
    /// When the node does not answer in time, a plain `EVAL` of the same
    /// script follows on the same connection in the background: if the
    /// timed-out `EVALSHA` meets `NOSCRIPT` when the node wakes up (it
    /// restarted, or its scripts were flushed), nobody would be left waiting
    /// to fall back, and a key set by a `SET` queued before it would stay.
    pub(crate) async fn release(
        &self,
        resource: &Arc<[u8]>,
        token: &Token,
        timeout: Duration,
    ) -> NodeResult<bool> {
        let mut conn = self.conn.clone();
        let mut invocation = scripts::RELEASE.prepare_invoke();
        invocation.key(&**resource).arg(token.as_str());
        let result = self
            .timed(timeout, async move {
                invocation.invoke_async::<i64>(&mut conn).await
            })
            .await;
        if matches!(&result, Err(f) if f.kind.is_timeout()) {
            let mut conn = self.conn.clone();
            let mut cmd = redis::cmd("EVAL");
            cmd.arg(scripts::RELEASE_SOURCE)
                .arg(1)
                .arg(&**resource)
                .arg(token.as_str());
            if let Ok(handle) = tokio::runtime::Handle::try_current() {
                handle.spawn(async move {
                    let _ = tokio::time::timeout(
                        STRAGGLER_TIMEOUT,
                        cmd.query_async::<Value>(&mut conn),
                    )
                    .await;
                });
            }
        }
        result.map(|n| n == 1)
    }

    /// Loads the scripts, so the first release does not meet `NOSCRIPT`.
    pub(crate) async fn load_scripts(&self, timeout: Duration) -> NodeResult<()> {
        let mut conn = self.conn.clone();
        self.timed(timeout, async move {
            scripts::RELEASE.load_async(&mut conn).await?;
            scripts::EXTEND.load_async(&mut conn).await
        })
        .await
        .map(|_| ())
    }

    /// Compare-and-pexpire → true when our key got the new TTL.
    pub(crate) async fn extend(
        &self,
        resource: &[u8],
        token: &str,
        ttl: Duration,
        timeout: Duration,
    ) -> NodeResult<bool> {
        let mut conn = self.conn.clone();
        let mut invocation = scripts::EXTEND.prepare_invoke();
        invocation.key(resource).arg(token).arg(quorum::millis(ttl));
        self.timed(timeout, async move {
            invocation.invoke_async::<i64>(&mut conn).await
        })
        .await
        .map(|n| n == 1)
    }

    async fn timed<T>(
        &self,
        timeout: Duration,
        fut: impl std::future::Future<Output = redis::RedisResult<T>>,
    ) -> NodeResult<T> {
        match tokio::time::timeout(timeout, fut).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(self.failure(classify(&e))),
            Err(_) => Err(self.failure(NodeFailureKind::Timeout(timeout))),
        }
    }

    fn protocol(&self, value: &Value) -> NodeFailure {
        self.failure(NodeFailureKind::Protocol(format!("{value:?}")))
    }

    pub(crate) fn failure(&self, kind: NodeFailureKind) -> NodeFailure {
        NodeFailure {
            node: self.label.clone(),
            kind,
        }
    }
}

#[cfg(not(feature = "tls"))]
fn client(spec: &NodeSpec) -> Result<Client, RedisError> {
    Client::open(spec.info.clone())
}

/// A `rediss://` node with certificates from the builder gets them; any
/// other node connects as its URL says.
#[cfg(feature = "tls")]
fn client(spec: &NodeSpec) -> Result<Client, RedisError> {
    match (&spec.tls, spec.info.addr()) {
        (Some(certs), redis::ConnectionAddr::TcpTls { .. }) => {
            // rustls needs a process-wide crypto provider; install ring
            // unless the application installed one already.
            let _ = rustls::crypto::ring::default_provider().install_default();
            Client::build_with_tls(spec.info.clone(), certs.clone())
        }
        _ => Client::open(spec.info.clone()),
    }
}

fn classify(e: &RedisError) -> NodeFailureKind {
    if e.is_timeout() {
        return NodeFailureKind::Timeout(Duration::ZERO);
    }
    if let Some(code) = e.code() {
        return NodeFailureKind::Redis {
            code: code.to_owned(),
            message: e.detail().unwrap_or_default().to_owned(),
        };
    }
    if e.kind() == ErrorKind::AuthenticationFailed {
        // The server's WRONGPASS reply to AUTH; redis-rs replaces it with its
        // own error kind while connecting, so restore the code here.
        return NodeFailureKind::Redis {
            code: "WRONGPASS".to_owned(),
            message: "authentication failed: wrong user name or password, the user is \
                      disabled, or a password was sent to a node that has none"
                .to_owned(),
        };
    }
    if e.is_io_error() || e.is_connection_refusal() || e.is_connection_dropped() {
        return NodeFailureKind::Connection(e.to_string());
    }
    match e.kind() {
        ErrorKind::Server(_) => NodeFailureKind::Redis {
            code: "ERR".to_owned(),
            message: e.to_string(),
        },
        _ => NodeFailureKind::Connection(e.to_string()),
    }
}
