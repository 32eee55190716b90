//! One Redis node: its long-lived multiplexed connection (reconnecting by
//! itself, see [`crate::link`]), the per-node timeout, and the commands the
//! lock sends to it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::{Client, RedisError, Value};
use tracing::warn;

use crate::background::Background;
use crate::classify::classify;
use crate::counters::NodeCounters;
use crate::error::{NodeFailure, NodeFailureKind};
use crate::fence::{self, Commit};
use crate::grant::Grant;
use crate::keys::Keys;
use crate::link::Link;
use crate::op::Op;
use crate::quarantine::{self, Quarantine, Standing};
use crate::quorum::{self, Vote};
use crate::scripts;
use crate::token::Token;

/// How long a background follow-up to a timed-out release may wait.
const STRAGGLER_TIMEOUT: Duration = Duration::from_secs(30);

/// A node of the cluster.
///
/// Commands travel over one multiplexed connection ([`Link`]), in order.
/// That order is what lets a release sent after a stuck `SET` remove the
/// key the `SET` creates when the node wakes up. The connection is never torn down for a
/// slow reply (no response timeout inside the connection); the per-node
/// timeout only stops *waiting*.
///
/// Cheap to clone: every fan-out clones each node into its per-node future,
/// twice per lock cycle, so every field is a shared handle (a cloned
/// `String` label and `Client` cost several allocations per node and call).
#[derive(Clone)]
pub(crate) struct Node {
    label: Arc<str>,
    client: Arc<Client>,
    conn: Link,
    restart: Arc<Quarantine>,
    counters: Arc<NodeCounters>,
    /// Whether the node has refused a release announcement (said once).
    announce_refused: Arc<AtomicBool>,
    /// The client's registry of background work.
    background: Background,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node").field("label", &self.label).finish()
    }
}

/// A node's reply, or why there was none.
pub(crate) type NodeResult<T> = Result<T, NodeFailure>;

impl Node {
    /// The node `label` (`host:port/db`) reached through `client`;
    /// prepares the connection without waiting for it.
    pub(crate) fn new(
        label: &str,
        client: Client,
        connect_timeout: Duration,
        background: Background,
    ) -> Result<Self, RedisError> {
        let restart = Arc::new(Quarantine::default());
        let conn = Link::new(client.clone(), connect_timeout, restart.clone())?;
        Ok(Self {
            label: label.into(),
            client: Arc::new(client),
            conn,
            restart,
            counters: Arc::new(NodeCounters::new(label)),
            announce_refused: Arc::default(),
            background,
        })
    }

    /// `host:port/db`.
    pub(crate) fn label(&self) -> &str {
        &self.label
    }

    /// This node's counters, shared by its clones.
    pub(crate) fn counters(&self) -> &NodeCounters {
        &self.counters
    }

    /// Counts an acquire vote and passes the grant on.
    fn granted(&self, grant: Grant) -> Grant {
        self.counters.vote(Op::Acquire, grant.vote == Vote::Yes);
        grant
    }

    /// The client, for connections of other kinds (subscriptions).
    pub(crate) fn client(&self) -> &Client {
        &self.client
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

    /// Reads a key's value and remaining TTL (one pipeline, no lock taken).
    pub(crate) async fn peek(
        &self,
        key: &[u8],
        timeout: Duration,
    ) -> NodeResult<(Option<Vec<u8>>, i64)> {
        let mut conn = self.conn.clone();
        let mut pipe = redis::pipe();
        pipe.cmd("GET").arg(key).cmd("PTTL").arg(key);
        self.timed(timeout, async move {
            pipe.query_async::<(Option<Vec<u8>>, i64)>(&mut conn).await
        })
        .await
    }

    /// Takes the lock on this node: `SET resource token NX PX ttl` for one
    /// resource (what every Redlock client sends), the all-or-nothing
    /// script for several, the counter-reading script for a fenced lock.
    pub(crate) async fn acquire(
        &self,
        keys: &Keys,
        token: &Token,
        ttl: Duration,
        timeout: Duration,
    ) -> NodeResult<Grant> {
        let mut conn = self.conn.clone();
        let ttl_ms = quorum::millis(ttl);
        if let Some(fence_key) = keys.fence_key() {
            let mut inv = scripts::ACQUIRE_FENCED.prepare_invoke();
            inv.key(keys.first())
                .key(fence_key)
                .arg(token.as_str())
                .arg(ttl_ms);
            let n = self
                .timed(
                    timeout,
                    async move { inv.invoke_async::<i64>(&mut conn).await },
                )
                .await?;
            return match u64::try_from(n) {
                Ok(counter) if fence::in_range(counter) => Ok(self.granted(Grant::yes(counter))),
                Ok(_) => {
                    self.counters.protocol_error();
                    Err(self.failure(NodeFailureKind::Protocol(format!(
                        "fencing counter {n} beyond {}",
                        fence::MAX_FENCE
                    ))))
                }
                Err(_) => Ok(self.granted(Grant::NO)),
            };
        }
        if keys.is_multi() {
            let mut inv = scripts::ACQUIRE_MULTI.prepare_invoke();
            for r in keys.resources() {
                inv.key(r.as_slice());
            }
            inv.arg(token.as_str()).arg(ttl_ms);
            let n = self
                .timed(
                    timeout,
                    async move { inv.invoke_async::<i64>(&mut conn).await },
                )
                .await?;
            return Ok(self.granted(if n == 1 { Grant::yes(0) } else { Grant::NO }));
        }
        let mut cmd = redis::cmd("SET");
        cmd.arg(keys.first())
            .arg(token.as_str())
            .arg("NX")
            .arg("PX")
            .arg(ttl_ms);
        let reply = self
            .timed(
                timeout,
                async move { cmd.query_async::<Value>(&mut conn).await },
            )
            .await?;
        match reply {
            Value::Okay => Ok(self.granted(Grant::yes(0))),
            Value::Nil => Ok(self.granted(Grant::NO)),
            other => {
                self.counters.protocol_error();
                Err(self.failure(NodeFailureKind::Protocol(format!("{other:?}"))))
            }
        }
    }

    /// With a restart quarantine of `required`: whether this node may vote
    /// now, reading its uptime first when it is unknown (at start and after
    /// every connection loss or reconnect). `Err` when it may not, and when
    /// the connection was replaced while the uptime was being read.
    pub(crate) async fn check_standing(
        &self,
        required: Duration,
        timeout: Duration,
    ) -> NodeResult<()> {
        let standing = match self.restart.standing(Instant::now()) {
            Standing::Unknown => {
                let epoch = self.restart.epoch();
                let uptime = self.uptime(timeout).await?;
                self.restart
                    .observed(epoch, uptime, required, Instant::now())
            }
            known => known,
        };
        let kind = match standing {
            Standing::Votes => return Ok(()),
            Standing::Quarantined { uptime } => NodeFailureKind::Quarantined { uptime },
            Standing::Unknown => NodeFailureKind::Connection(
                "the connection was replaced while the node's uptime was read".to_owned(),
            ),
        };
        self.counters.failed(&kind, None);
        Err(self.failure(kind))
    }

    async fn uptime(&self, timeout: Duration) -> NodeResult<Duration> {
        let mut conn = self.conn.clone();
        let mut cmd = redis::cmd("INFO");
        cmd.arg("server");
        let info = self
            .timed(timeout, async move {
                cmd.query_async::<String>(&mut conn).await
            })
            .await?;
        quarantine::parse_uptime(&info).ok_or_else(|| {
            self.failure(NodeFailureKind::Protocol(
                "INFO server without uptime_in_seconds".to_owned(),
            ))
        })
    }

    /// Second phase of a fenced acquire: where the token is still held,
    /// raise the counter to `fence` from strictly below. Only
    /// [`Commit::Raised`] counts for the commit.
    pub(crate) async fn commit_fence(
        &self,
        keys: &Keys,
        token: &Token,
        fence: u64,
        timeout: Duration,
    ) -> NodeResult<Commit> {
        let mut conn = self.conn.clone();
        let mut inv = scripts::FENCE_COMMIT.prepare_invoke();
        inv.key(keys.first())
            .key(keys.fence_key().unwrap_or_default())
            .arg(token.as_str())
            .arg(fence);
        let n = self
            .timed(
                timeout,
                async move { inv.invoke_async::<i64>(&mut conn).await },
            )
            .await?;
        Commit::from_reply(n).ok_or_else(|| {
            self.counters.protocol_error();
            self.failure(NodeFailureKind::Protocol(format!(
                "fence commit answered {n}"
            )))
        })
    }

    /// Compare-and-delete → true when our key(s) were deleted, false when
    /// absent or holding another token.
    ///
    /// When the node does not answer in time, a plain `EVAL` of the same
    /// script follows on the same connection in the background: if the
    /// timed-out `EVALSHA` meets `NOSCRIPT` when the node wakes up (it
    /// restarted, or its scripts were flushed), nobody would be left waiting
    /// to fall back, and a key set by a `SET` queued before it would stay.
    pub(crate) async fn release(
        &self,
        keys: &Keys,
        token: &Token,
        timeout: Duration,
    ) -> NodeResult<bool> {
        let mut conn = self.conn.clone();
        let (script, source) = if keys.is_multi() {
            (&*scripts::RELEASE_MULTI, scripts::RELEASE_MULTI_SOURCE)
        } else {
            (&*scripts::RELEASE, scripts::RELEASE_SOURCE)
        };
        let mut inv = script.prepare_invoke();
        for r in keys.resources() {
            inv.key(r.as_slice());
        }
        inv.arg(token.as_str());
        let result = self
            .timed(timeout, async move {
                inv.invoke_async::<(i64, i64)>(&mut conn).await
            })
            .await;
        if matches!(&result, Err(f) if f.kind.is_timeout()) {
            let mut conn = self.conn.clone();
            let mut cmd = redis::cmd("EVAL");
            cmd.arg(source).arg(keys.resources().len());
            for r in keys.resources() {
                cmd.arg(r.as_slice());
            }
            cmd.arg(token.as_str());
            self.background.spawn(async move {
                let _ =
                    tokio::time::timeout(STRAGGLER_TIMEOUT, cmd.query_async::<Value>(&mut conn))
                        .await;
            });
        }
        result.map(|(deleted, refused)| {
            if refused != 0 {
                self.announcement_refused();
            }
            self.counters.vote(Op::Release, deleted >= 1)
        })
    }

    /// The node refused a release announcement (`PUBLISH`) on a release
    /// that succeeded: the user has no rights on the channel, as new ACL
    /// users of Redis 7 by default. Said once per node; waiters then rely
    /// on their retry delay for this node.
    fn announcement_refused(&self) {
        if !self.announce_refused.swap(true, Ordering::Relaxed) {
            warn!(
                node = %self.label,
                "release announcements refused by this node (no PUBLISH rights on \
                 quorumlock:released:*): releases still succeed, fast hand-off falls back \
                 to the retry delay here"
            );
        }
    }

    /// Loads the scripts, so the first release does not meet `NOSCRIPT`.
    pub(crate) async fn load_scripts(&self, timeout: Duration) -> NodeResult<()> {
        let mut conn = self.conn.clone();
        self.timed(timeout, async move {
            for script in scripts::all() {
                script.load_async(&mut conn).await?;
            }
            Ok(())
        })
        .await
    }

    /// Read-only: true when every key of the lock still carries the token.
    pub(crate) async fn holds(
        &self,
        keys: &Keys,
        token: &Token,
        timeout: Duration,
    ) -> NodeResult<bool> {
        let mut conn = self.conn.clone();
        let mut inv = scripts::HOLDS.prepare_invoke();
        for r in keys.resources() {
            inv.key(r.as_slice());
        }
        inv.arg(token.as_str());
        self.timed(
            timeout,
            async move { inv.invoke_async::<i64>(&mut conn).await },
        )
        .await
        .map(|n| n == 1)
    }

    /// Compare-and-pexpire → true when our key(s) got the new TTL.
    pub(crate) async fn extend(
        &self,
        keys: &Keys,
        token: &Token,
        ttl: Duration,
        timeout: Duration,
    ) -> NodeResult<bool> {
        let mut conn = self.conn.clone();
        let script = if keys.is_multi() {
            &*scripts::EXTEND_MULTI
        } else {
            &*scripts::EXTEND
        };
        let mut inv = script.prepare_invoke();
        for r in keys.resources() {
            inv.key(r.as_slice());
        }
        inv.arg(token.as_str()).arg(quorum::millis(ttl));
        self.timed(
            timeout,
            async move { inv.invoke_async::<i64>(&mut conn).await },
        )
        .await
        .map(|n| self.counters.vote(Op::Extend, n == 1))
    }

    async fn timed<T>(
        &self,
        timeout: Duration,
        fut: impl std::future::Future<Output = redis::RedisResult<T>>,
    ) -> NodeResult<T> {
        self.counters.sent();
        let start = Instant::now();
        match tokio::time::timeout(timeout, fut).await {
            Ok(Ok(v)) => {
                self.counters.replied(start.elapsed());
                Ok(v)
            }
            Ok(Err(e)) => {
                let kind = classify(&e);
                if matches!(kind, NodeFailureKind::Connection(_)) {
                    // Also reported by the link for the errors after which
                    // the connection is replaced; this covers the rest.
                    self.restart.connection_lost();
                }
                self.counters.failed(&kind, Some(start.elapsed()));
                Err(self.failure(kind).caused_by(e))
            }
            Err(_) => {
                let kind = NodeFailureKind::Timeout(timeout);
                self.counters.failed(&kind, None);
                Err(self.failure(kind))
            }
        }
    }

    pub(crate) fn failure(&self, kind: NodeFailureKind) -> NodeFailure {
        NodeFailure::new(&*self.label, kind)
    }
}
