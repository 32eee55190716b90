//! One member of the quorum — a server, a Sentinel group or a Redis
//! Cluster ([`crate::node::route`]) — with each server's connection
//! ([`crate::node::link`], replaced when it dies), its counters, and the
//! commands the lock sends to it, with what their replies mean.
//!
//! A node call has no timer of its own: the fan-out that sends it keeps
//! one deadline for every node ([`Window`]). A reply after that deadline
//! is not counted as a reply: it arrives as a timeout, which the fan-out
//! counts.

pub(crate) mod admission;
pub(crate) mod cluster;
pub(crate) mod commands;
pub(crate) mod durable;
pub(crate) mod election;
pub(crate) mod fence;
pub(crate) mod grant;
pub(crate) mod link;
pub(crate) mod lua;
pub(crate) mod quarantine;
pub(crate) mod reply;
pub(crate) mod route;
pub(crate) mod sentinel;

use std::future::Future;

use futures::future::BoxFuture;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::{Cmd, ErrorKind, FromRedisValue, RedisError, ServerErrorKind, Value};
use tracing::warn;

use crate::config::Durability;
use crate::error::classify::classify;
use crate::error::{NodeFailure, NodeFailureKind, Operation};
use crate::keys::Keys;
use crate::node::commands::Command;
use crate::node::link::Target;
use crate::node::route::{Hop, Route, MAX_REDIRECTS};
use crate::stats::counters::NodeCounters;
use crate::status::NodeView;
use crate::token::Token;
use reply::Kind;

mod servers;
mod standing;

/// A member of the quorum: one vote, cast by a single server, a Sentinel
/// group's master or a Redis Cluster's masters ([`Route`]).
///
/// Commands travel to each server over one multiplexed connection
/// ([`Link`](crate::node::link::Link)), in order.
/// That order is what lets a release sent after a stuck `SET` remove the
/// key the `SET` creates when the node wakes up. The connection is never
/// torn down for a slow reply (no response timeout inside it); the
/// fan-out's deadline only stops *waiting*.
///
/// Cheap to clone: one shared handle (every per-node future of a fan-out
/// holds a clone, so a clone is one reference count, not one per field).
#[derive(Clone)]
pub(crate) struct Node(Arc<Shared>);

/// What the clones of a node share.
pub(crate) struct Shared {
    label: Box<str>,
    route: Route,
    /// With restart quarantine: how long a (re)started server stays out,
    /// and the probe sent behind each vote (`INFO server`: its `run_id`).
    quarantine: Option<(Duration, Arc<Command>)>,
    /// With durable votes: what a yes must reach to count.
    durable: Option<Durability>,
    counters: NodeCounters,
    /// Whether the node has refused a release announcement (said once).
    announce_refused: AtomicBool,
}

impl std::ops::Deref for Node {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node").field("label", &self.label).finish()
    }
}

/// A node's answer to an extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Extended {
    /// The key carries the token and lives at least the new TTL.
    Yes,
    /// Another token holds the key: never repaired.
    Theirs,
    /// The key is missing: repaired if the extension is confirmed in time.
    Missing,
}

/// A node's reply, or why there was none.
pub(crate) type NodeResult<T> = Result<T, NodeFailure>;

/// Until when a node's answer counts, and the timeout that deadline
/// stands for (for the message of a late answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Window {
    pub(crate) deadline: Instant,
    pub(crate) timeout: Duration,
}

impl Window {
    /// From now until `timeout` has passed (without limit when that
    /// instant cannot be represented).
    pub(crate) fn from_now(timeout: Duration) -> Self {
        let now = Instant::now();
        Self {
            deadline: now
                .checked_add(timeout)
                .or_else(|| now.checked_add(Duration::from_secs(1 << 32)))
                .unwrap_or(now),
            timeout,
        }
    }
}

impl Node {
    /// The member `label` reached through `route`; with `quarantine`,
    /// every vote is checked to come from the server whose uptime was
    /// read, and a server up for less does not vote; with `durable`, a
    /// yes counts once its write reached what it asks.
    pub(crate) fn new(
        label: &str,
        route: Route,
        quarantine: Option<Duration>,
        durable: Option<Durability>,
    ) -> Self {
        Self(Arc::new(Shared {
            label: label.into(),
            route,
            quarantine: quarantine.map(|q| (q, Command::server_info())),
            durable,
            counters: NodeCounters::new(label),
            announce_refused: AtomicBool::new(false),
        }))
    }

    /// `host:port/db`.
    pub(crate) fn label(&self) -> &str {
        &self.label
    }

    /// This node's counters, shared by its clones.
    pub(crate) fn counters(&self) -> &NodeCounters {
        &self.counters
    }

    /// Why this client refused the node's last connection, if it did.
    pub(crate) fn refused(&self) -> Option<NodeFailureKind> {
        self.route.gate().refused()
    }

    /// Whether the member's master can be replaced by a replica (a
    /// Sentinel group, a Redis Cluster): durable votes apply to it.
    pub(crate) fn fails_over(&self) -> bool {
        self.route.gate().fails_over()
    }

    /// Whether this member is a Redis Cluster (each lock's keys in one
    /// hash slot).
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self.route, Route::Cluster(_))
    }

    /// Where connections of other kinds (subscriptions) go.
    pub(crate) fn target(&self) -> Target {
        self.route.target()
    }

    /// What this node holds for each of the `count` keys `command` reads
    /// ([`Command::peek`]): one view per key, each key's value and time
    /// left read together, every key in one script (no lock taken). A key
    /// the node cannot read (another type) is [`NodeView::Failed`] on its
    /// own.
    pub(crate) async fn peek(
        &self,
        command: &Command,
        count: usize,
        window: Window,
    ) -> NodeResult<Vec<NodeView>> {
        let reply = self.call(command, window).await?;
        let Value::Array(items) = reply else {
            return Err(self.protocol(format!("peek answered {reply:?}")));
        };
        let mut views = vec![NodeView::Free; count];
        for entry in items.chunks(3) {
            let [Value::Int(position), Value::BulkString(value), Value::Int(left)] = entry else {
                return Err(self.protocol(format!("peek answered {entry:?}")));
            };
            let Some(view) = usize::try_from(*position)
                .ok()
                .and_then(|p| views.get_mut(p.checked_sub(1)?))
            else {
                return Err(self.protocol(format!("peek answered key {position} of {count}")));
            };
            *view = match *left {
                // The key's error line (`WRONGTYPE …`), in place of its value.
                -3 => {
                    let line = String::from_utf8_lossy(value);
                    let (code, message) = line.split_once(' ').unwrap_or((&line, ""));
                    let kind = NodeFailureKind::reply(code, message);
                    self.counters.failed(&kind, None);
                    NodeView::Failed(self.failure(kind))
                }
                left => NodeView::from_peek(Some(value), left),
            };
        }
        Ok(views)
    }

    /// Runs `command`, a script that answers yes or no (the fencing
    /// token's commit, the remote check, a proclamation, a retirement):
    /// whether the node said yes, as [`reply::counts`] reads a reply of
    /// `kind`. A yes that wrote (all but the remote check) waits to be
    /// durable, with durable votes.
    pub(crate) async fn says(
        &self,
        command: &Command,
        kind: Kind,
        window: Window,
    ) -> NodeResult<bool> {
        let write = kind != Kind::Holds;
        Ok(self.script(command, kind, window, write).await?.0)
    }

    /// Compare-and-delete → true when our key(s) were deleted, false when
    /// absent or holding another token.
    ///
    /// A late answer still runs to its end in the background (the fan-out
    /// keeps the future): if the `EVALSHA` meets `NOSCRIPT` when a hung
    /// node wakes up, the `EVAL` follows, and a key set by a `SET` queued
    /// before it is removed.
    pub(crate) async fn release(
        &self,
        keys: &Keys,
        command: &Command,
        window: Window,
    ) -> NodeResult<bool> {
        // The keys deleted, negated when the announcement was refused.
        let (yes, deleted) = self.script(command, Kind::Release, window, false).await?;
        if deleted < 0 {
            self.announcement_refused(keys);
        }
        Ok(self.counters.vote(Operation::Release, yes))
    }

    /// The node refused a release announcement (`PUBLISH`) on a release
    /// that succeeded: the user has no rights on the channel, as new ACL
    /// users of Redis 7 by default. Said once per node (naming the
    /// resource of the release that found it); waiters then rely on their
    /// retry delay for this node.
    fn announcement_refused(&self, keys: &Keys) {
        if !self.announce_refused.swap(true, Ordering::Relaxed) {
            warn!(
                node = %self.label,
                resource = %keys.name(),
                "release announcements refused by this node (no PUBLISH rights on \
                 quorumlock:released:*): releases still succeed, fast hand-off falls back \
                 to the retry delay here"
            );
        }
    }

    /// Compare-and-pexpire: whether our key(s) got the new TTL, and if
    /// not, whether a key is missing (repairable) or held by another token.
    pub(crate) async fn extend(&self, command: &Command, window: Window) -> NodeResult<Extended> {
        let (yes, n) = self.script(command, Kind::Extend, window, true).await?;
        Ok(if self.counters.vote(Operation::Extend, yes) {
            Extended::Yes
        } else if reply::missing(Kind::Extend, n) {
            Extended::Missing
        } else {
            Extended::Theirs
        })
    }

    /// The repair (`docs/repair.md`): `SET key token NX PX ttl` for each of
    /// the lock's keys, in order on the connection; how many were set (a
    /// key present, ours or another's, is left as it is).
    pub(crate) async fn repair(
        &self,
        keys: &Keys,
        token: &Token,
        ttl: Duration,
        window: Window,
    ) -> NodeResult<usize> {
        let sets = Command::repair(keys, token, ttl);
        let slot = crate::keys::hash_slot::slot(keys.first());
        let (replies, waited) = self
            .routed(slot, window, |hop| {
                let sets = &sets;
                async move {
                    self.counted(window, || async {
                        let mut replies = Vec::with_capacity(sets.len());
                        for set in sets {
                            replies.push(self.send(&hop, set).await?);
                        }
                        // Durable once a key was set (a wait after none
                        // would only block the connection).
                        let set = replies.contains(&Value::Okay);
                        let wait = self.durable.filter(|_| set);
                        let wait = wait.map(|d| durable::wait(d, durable::budget(window)));
                        let waited = match wait {
                            Some(wait) => Some(self.send(&hop, &wait).await?),
                            None => None,
                        };
                        Ok((replies, waited))
                    })
                    .await
                }
            })
            .await?;
        let mut set = 0;
        for value in replies {
            let n = match value {
                Value::Okay => 1,
                Value::Nil => 0,
                other => return Err(self.protocol(format!("repair answered {other:?}"))),
            };
            set += usize::from(self.read(Kind::Repair, n)?);
        }
        if set > 0 {
            self.durable_reached(waited.as_ref())?;
        }
        Ok(set)
    }

    /// Runs `command`, a script of `kind`: whether its integer reply counts
    /// as a yes ([`read`](Self::read)), and the reply. With `write` (an
    /// extension, a commit), a yes counts only once durable, when durable
    /// votes are on.
    async fn script(
        &self,
        command: &Command,
        kind: Kind,
        window: Window,
        write: bool,
    ) -> NodeResult<(bool, i64)> {
        let (reply, waited) = if write && self.durable.is_some() {
            let yes = |reply: &Value| {
                let n = i64::from_redis_value_ref(reply).ok();
                n.and_then(|n| reply::counts(kind, n)) == Some(true)
            };
            self.vote(command, window, false, yes).await?
        } else {
            (self.call(command, window).await?, None)
        };
        let n = parse::<i64>(reply).map_err(|e| self.protocol(e.to_string()))?;
        let yes = self.read(kind, n)?;
        if yes {
            self.durable_reached(waited.as_ref())?;
        }
        Ok((yes, n))
    }

    /// Whether a script's `reply` counts as a yes ([`reply::counts`]); a
    /// reply the script never gives is a protocol error.
    fn read(&self, kind: Kind, reply: i64) -> NodeResult<bool> {
        reply::counts(kind, reply)
            .ok_or_else(|| self.protocol(format!("{kind:?} answered {reply}")))
    }

    /// `command` on the server serving its slot: its reply.
    async fn call(&self, command: &Command, window: Window) -> NodeResult<Value> {
        self.routed(command.slot(), window, |hop| async move {
            self.counted(window, || self.run(&hop, command)).await
        })
        .await
    }

    /// `work` on the server serving `slot`, following `MOVED` and `ASK`
    /// replies (at most [`MAX_REDIRECTS`]): the caller never sees one.
    ///
    /// Each try is boxed (as a `dyn Future`): a fan-out's futures would
    /// otherwise nest too deeply for the compiler's checks in the callers'
    /// crates.
    async fn routed<'a, T, Fut>(
        &'a self,
        slot: u16,
        window: Window,
        work: impl Fn(Hop) -> Fut,
    ) -> NodeResult<T>
    where
        Fut: Future<Output = NodeResult<T>> + Send + 'a,
    {
        let hop = async {
            self.route
                .hop(slot)
                .await
                .map_err(|e| self.failed_with(e, None))
        };
        let mut hop = self.within(window, hop).await?;
        let mut redirects = 0;
        loop {
            let from = hop.shard.clone();
            let attempt: BoxFuture<'a, NodeResult<T>> = Box::pin(work(hop));
            match attempt.await {
                Err(failure) if redirects < MAX_REDIRECTS => {
                    match failure.redis_error().and_then(|e| self.route.redirect(e)) {
                        Some(next) => {
                            if !next.asking {
                                // No longer the slot's master (migrated, or
                                // demoted): read again before it next votes.
                                from.restart.connection_lost();
                            }
                            hop = next;
                            redirects += 1;
                        }
                        None => return Err(failure),
                    }
                }
                other => return other,
            }
        }
    }

    /// Sends `command` on `hop`, and its `EVAL` when the server does not
    /// know the script (restarted, or `SCRIPT FLUSH`).
    async fn run(&self, hop: &Hop, command: &Command) -> Result<Value, RedisError> {
        match self.send(hop, command.cmd()).await {
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                drop(e);
                // Rare: boxed, so that the common path's future stays small
                // (every fan-out moves it a few times).
                Box::pin(self.run_eval(hop, command)).await
            }
            other => other,
        }
    }

    /// The `EVAL` of `command`'s script, after a `NOSCRIPT`.
    async fn run_eval(&self, hop: &Hop, command: &Command) -> Result<Value, RedisError> {
        match command.fallback() {
            Some(eval) => self.send(hop, &eval).await,
            None => Err(RedisError::from((
                ErrorKind::Server(ServerErrorKind::NoScript),
                "NOSCRIPT for a command without a script",
            ))),
        }
    }

    /// Sends `cmd` to `hop`'s server (after `ASKING` when the hop says so).
    async fn send(&self, hop: &Hop, cmd: &Cmd) -> Result<Value, RedisError> {
        hop.shard
            .conn
            .send(cmd, hop.asking)
            .await
            .and_then(Value::extract_error)
    }

    /// Counts the command `fut` sends: its reply (latency) or its failure,
    /// when it ends inside `window`. An end after the window is a timeout,
    /// returned uncounted: the fan-out that set the window counts it.
    ///
    /// Takes a function that makes the future rather than the future: a
    /// future passed in would be stored twice in this one's state.
    async fn counted<T, Fut>(&self, window: Window, send: impl FnOnce() -> Fut) -> NodeResult<T>
    where
        Fut: Future<Output = Result<T, RedisError>>,
    {
        self.counters.sent();
        let start = Instant::now();
        let result = send().await;
        let end = Instant::now();
        if end > window.deadline {
            return Err(self.failure(NodeFailureKind::Timeout(window.timeout)));
        }
        let latency = end - start;
        match result {
            Ok(v) => {
                self.counters.replied(latency);
                Ok(v)
            }
            Err(e) => Err(self.failed_with(e, Some(latency))),
        }
    }

    /// The failure `e` after `latency`, counted — unless it is a cluster's
    /// redirection, which [`routed`](Self::routed) follows.
    fn failed_with(&self, e: RedisError, latency: Option<Duration>) -> NodeFailure {
        // A lost connection is the link's to report: it takes the
        // connection down, and the next one starts a new epoch.
        let refusal = self.route.gate().refusal(&e);
        let kind = refusal.unwrap_or_else(|| classify(&e, latency.unwrap_or_default()));
        self.route.failed(&e);
        if e.redirect_node().is_none() {
            self.counters.failed(&kind, latency);
        }
        self.failure(kind).caused_by(e)
    }

    /// A reply this client cannot read (counted as a protocol error).
    fn protocol(&self, what: String) -> NodeFailure {
        let kind = NodeFailureKind::Protocol(what);
        self.counters.failed(&kind, None);
        self.failure(kind)
    }

    pub(crate) fn failure(&self, kind: NodeFailureKind) -> NodeFailure {
        NodeFailure::new(&*self.label, kind)
    }

    /// `work` on this node, given up at the end of `window`: a node that
    /// has not answered by then failed with a timeout. For work outside a
    /// fan-out (which bounds its nodes itself).
    pub(crate) async fn within<T>(
        &self,
        window: Window,
        work: impl Future<Output = NodeResult<T>>,
    ) -> NodeResult<T> {
        tokio::time::timeout_at(window.deadline.into(), work)
            .await
            .unwrap_or_else(|_| Err(self.failure(NodeFailureKind::Timeout(window.timeout))))
    }
}

/// A reply as `T` (an error reply as the error it is).
fn parse<T: FromRedisValue>(value: Value) -> Result<T, RedisError> {
    Ok(T::from_redis_value(value.extract_error()?)?)
}
