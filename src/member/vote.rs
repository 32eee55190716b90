//! What a member is asked — an acquire, an extension, a release, a repair,
//! a yes-or-no script, a read — and how one vote travels: to the server
//! serving its slot ([`routed`](Node::routed), redirections followed),
//! with restart quarantine's probe behind it, then, for a yes, the wait of
//! a durable vote ([`vote`](Node::vote)); sent on the server's link and
//! counted ([`counted`](Node::counted)), a failure counted once.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures::future::{BoxFuture, OptionFuture};
use redis::{Cmd, ErrorKind, FromRedisValue, RedisError, ServerErrorKind, Value};
use tracing::{debug, warn};

use super::{Extended, Node, NodeResult};
use crate::error::classify::classify;
use crate::error::{Error, NodeFailure, NodeFailureKind, Operation};
use crate::keys::Keys;
use crate::member::route::{Hop, Route, MAX_REDIRECTS};
use crate::node::commands::Command;
use crate::node::election::Reading;
use crate::node::grant::{Grant, Shape};
use crate::node::reply::{self, Kind};
use crate::node::{durable, Window};
use crate::status::NodeView;
use crate::token::Token;

impl Node {
    /// Whether this member can take `keys` at once: a Redis Cluster runs
    /// each lock's script on one hash slot, so the keys must share one.
    pub(crate) fn check_slot(&self, keys: &Keys) -> Result<(), Error> {
        if !matches!(self.route, Route::Cluster(_)) || keys.slot().is_some() {
            return Ok(());
        }
        Err(Error::invalid(format!(
            "the keys of {} span several hash slots, and member {} is a Redis Cluster, \
             which takes a lock's keys in one slot: give the resources one hash tag \
             (\"{{order:7}}:items\" and \"{{order:7}}:payment\" share the slot of \"order:7\"), \
             and no '}}' in a name without one",
            keys.name(),
            self.label
        )))
    }

    /// Takes what `command` asks for on this node (see
    /// [`Command::acquire`], [`Command::take_slots`]), its reply read as
    /// `shape` says ([`Shape::read`]). With restart quarantine, the vote
    /// counts only when the server that cast it is the one whose uptime
    /// let the node vote; with durable votes, once its write is durable.
    pub(crate) async fn acquire(
        &self,
        command: &Command,
        shape: Shape,
        window: Window,
    ) -> NodeResult<Grant> {
        let yes = |reply: &Value| shape.read(reply).is_ok_and(|g| g.granted());
        let reply = self.vote(command, window, true, yes).await?;
        let grant = shape.read(&reply).map_err(|what| self.protocol(what))?;
        debug!(node = %self.label, vote = ?grant.vote, "node answered");
        self.counters.vote(Operation::Acquire, grant.granted());
        Ok(grant)
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
        Ok(self.script(command, kind, window).await?.0)
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
        let (yes, deleted) = self.script(command, Kind::Release, window).await?;
        // The node refused the release announcement (`PUBLISH`): the user
        // has no rights on the channel, as new ACL users of Redis 7 by
        // default. Said once per node (naming the resource of the release
        // that found it); waiters then rely on their retry delay here.
        if deleted < 0 && !self.announce_refused.swap(true, Ordering::Relaxed) {
            warn!(
                node = %self.label,
                resource = %keys.name(),
                "release announcements refused by this node (no PUBLISH rights on \
                 quorumlock:released:*): releases still succeed, fast hand-off falls back \
                 to the retry delay here"
            );
        }
        Ok(self.counters.vote(Operation::Release, yes))
    }

    /// Compare-and-pexpire: whether our key(s) got the new TTL, and if
    /// not, whether a key is missing (repairable) or held by another token.
    pub(crate) async fn extend(&self, command: &Command, window: Window) -> NodeResult<Extended> {
        let (yes, n) = self.script(command, Kind::Extend, window).await?;
        Ok(if self.counters.vote(Operation::Extend, yes) {
            Extended::Yes
        } else if reply::missing(Kind::Extend, n) {
            Extended::Missing
        } else {
            Extended::Theirs
        })
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
                    NodeView::Failed(self.fail(NodeFailureKind::reply(code, message)))
                }
                left => NodeView::from_peek(Some(value), left),
            };
        }
        Ok(views)
    }

    /// Runs a waiter queue's script ([`Command::queue_join`],
    /// [`Command::queue_touch`]): its integers (no probe, no wait: the
    /// queue orders who may try, and the lock's own votes decide).
    pub(crate) async fn queue(&self, command: &Command, window: Window) -> NodeResult<Vec<i64>> {
        let reply = self.call(command, window).await;
        // The user has no rights on the queue's keys (ACL): said once per
        // node; waiters then wait outside the queue.
        if let Err(failure) = &reply {
            let noperm = failure.kind.is_redis_error("NOPERM");
            if noperm && !self.queue_refused.swap(true, Ordering::Relaxed) {
                warn!(
                    node = %self.label,
                    "waiter queue refused by this node (no rights on quorumlock:queue:*): \
                     waiters wait outside the queue, unordered"
                );
            }
        }
        self.parse(reply?)
    }

    /// Reads an election ([`Command::read_leader`]).
    pub(crate) async fn read_leader(
        &self,
        command: &Command,
        window: Window,
    ) -> NodeResult<Reading> {
        let reply = self.call(command, window).await?;
        let (lock, record): (Option<Vec<u8>>, Option<Vec<u8>>) = self.parse(reply)?;
        Ok(Reading::new(lock.as_deref(), record.as_deref()))
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
        let sets = &Command::repair(keys, token, ttl);
        let slot = crate::keys::hash_slot::slot(keys.first());
        let (replies, durable) = self
            .routed(slot, window, |hop| async move {
                self.counted(window, || async {
                    let mut replies = Vec::with_capacity(sets.len());
                    for cmd in sets {
                        replies.push(self.send(&hop, cmd).await?);
                    }
                    // Durable once a key was set (a wait after none would
                    // only block the connection).
                    let set = replies.contains(&Value::Okay);
                    Ok((replies, self.wait(&hop, set, window).await?))
                })
                .await
            })
            .await?;
        let mut set = 0;
        for value in replies {
            let n = match value {
                Value::Okay => 1,
                Value::Nil => 0,
                other => return Err(self.protocol(format!("repair answered {other:?}"))),
            };
            set += usize::from(reply::counts(Kind::Repair, n) == Some(true));
        }
        durable.map_err(|kind| self.fail(kind))?;
        Ok(set)
    }

    /// Runs `command`, a script of `kind`: whether its integer reply counts
    /// as a yes ([`reply::counts`]; a reply the script never gives is a
    /// protocol error), and the reply. With durable votes, a yes counts
    /// only once durable, but for the remote check (which reads) and a
    /// release.
    async fn script(
        &self,
        command: &Command,
        kind: Kind,
        window: Window,
    ) -> NodeResult<(bool, i64)> {
        let write = !matches!(kind, Kind::Holds | Kind::Release);
        let yes = |reply: &Value| {
            let n = i64::from_redis_value_ref(reply).ok();
            write && n.and_then(|n| reply::counts(kind, n)) == Some(true)
        };
        let reply = self.vote(command, window, false, yes).await?;
        let n = self.parse::<i64>(reply)?;
        let yes = reply::counts(kind, n)
            .ok_or_else(|| self.protocol(format!("{kind:?} answered {n}")))?;
        Ok((yes, n))
    }

    /// `command` on the server serving its slot: its reply (no probe, no
    /// wait).
    async fn call(&self, command: &Command, window: Window) -> NodeResult<Value> {
        self.vote(command, window, false, |_| false).await
    }

    /// Sends the vote `command` to the server serving its slot, with —
    /// on the same connection, behind it, so that they reach the server
    /// that cast the vote or one that started later — the `INFO server`
    /// probe naming its `run_id` (with `probe` and restart quarantine) and,
    /// once the reply reads as a yes (`yes`), the durability wait. The
    /// reply is returned when the server that cast it is the one whose
    /// uptime reading lets it vote, and a yes is as durable as asked. A
    /// restart hidden from the client (a proxy that keeps its connection
    /// open, a failover) or a reconnect between the standing check and the
    /// send is caught here: the vote is not counted and the standing
    /// becomes unknown.
    async fn vote(
        &self,
        command: &Command,
        window: Window,
        probe: bool,
        yes: impl Fn(&Value) -> bool + Send + Sync,
    ) -> NodeResult<Value> {
        let yes = &yes;
        self.routed(command.slot, window, |hop| async move {
            // With restart quarantine: the server allowed to vote now, and
            // the probe that names the server that does.
            let (voter, probe) = match (&self.quarantine, probe) {
                (Some((required, info)), true) => {
                    let voter = self.voter(&hop.shard, *required, window).await?;
                    (Some(voter), Some(info))
                }
                _ => (None, None),
            };
            let exchange = || self.exchange(&hop, command, probe, yes, window);
            let (reply, seen, durable) = self.counted(window, exchange).await?;
            if durable.is_err() {
                // Deposed, or a replica lost: ask again which server is
                // the master, and judge its replicas, before the next vote
                // (the sentinels name a new master within a failover, not
                // once the old one is demoted).
                hop.shard.reconnect();
            }
            if let (Some(voter), Some(seen)) = (voter, seen) {
                self.confirm(&hop.shard, &voter, seen)?;
            }
            durable.map_err(|kind| self.fail(kind))?;
            Ok(reply)
        })
        .await
    }

    /// One vote's round trip on `hop`, all on its connection: `command`
    /// with the `probe` beside it (both again, in that order, after a
    /// `NOSCRIPT`: the `EVAL` of its script), then the durable wait once
    /// the reply reads as a yes: the reply, the probe's, and whether the
    /// wait reached what durable votes ask.
    pub(super) async fn exchange(
        &self,
        hop: &Hop,
        command: &Command,
        probe: Option<&Cmd>,
        yes: &(impl Fn(&Value) -> bool + Send + Sync),
        window: Window,
    ) -> Result<(Value, Option<Value>, Result<(), NodeFailureKind>), RedisError> {
        let probed = || OptionFuture::from(probe.map(|p| self.send(hop, p)));
        let (reply, seen) = match probe {
            Some(_) => futures::join!(self.send(hop, &command.cmd), probed()),
            None => (self.send(hop, &command.cmd).await, None),
        };
        let (reply, seen) = match reply {
            // The server does not know the script (restarted, or `SCRIPT
            // FLUSH`). The EVAL goes out after the probe: probe again.
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                let eval = command.fallback().ok_or(e)?;
                (self.send(hop, &eval).await?, probed().await)
            }
            reply => (reply?, seen),
        };
        // The wait goes out once the yes is known: a no wrote nothing that
        // must last, and a wait blocks the connection while the replicas
        // lag (`WAITAOF`, sent with the write, would even wait for the
        // replicas' once-a-second report).
        let durable = self.wait(hop, yes(&reply), window).await?;
        Ok((reply, seen.transpose()?, durable))
    }

    /// With durable votes and `wrote`: the wait on `hop` behind the write,
    /// and whether it reached what they ask (`Ok` when there was no wait).
    async fn wait(
        &self,
        hop: &Hop,
        wrote: bool,
        window: Window,
    ) -> Result<Result<(), NodeFailureKind>, RedisError> {
        let Some(durability) = self.durable.filter(|_| wrote) else {
            return Ok(Ok(()));
        };
        let wait = durable::wait(durability, durable::budget(window));
        let waited = self.send(hop, &wait).await?;
        Ok(durable::reached(durability, &waited))
    }

    /// `work` on the server serving `slot`, following `MOVED` and `ASK`
    /// replies (at most [`MAX_REDIRECTS`]): the caller never sees one.
    ///
    /// One box for the whole call, made before anything runs: the
    /// fan-out moves each node's future into its set (and a straggler's
    /// into the background), so that future stays a pointer's size however
    /// deep the work nests; the box also keeps the callers' crates clear of
    /// that nesting.
    pub(super) fn routed<'a, T, Fut>(
        &'a self,
        slot: u16,
        window: Window,
        work: impl Fn(Hop) -> Fut + Send + 'a,
    ) -> BoxFuture<'a, NodeResult<T>>
    where
        Fut: Future<Output = NodeResult<T>> + Send + 'a,
        T: Send + 'a,
    {
        Box::pin(async move {
            let mut hop = match self.route.known(slot) {
                Some(hop) => hop,
                None => self.reach(window, self.route.hop(slot)).await?,
            };
            for _ in 0..MAX_REDIRECTS {
                let from = hop.shard.clone();
                let failure = match work(hop).await {
                    Err(failure) => failure,
                    done => return done,
                };
                let Some(next) = failure.redis_error().and_then(|e| self.route.redirect(e)) else {
                    return Err(failure);
                };
                if !next.asking {
                    // No longer the slot's master (migrated, or demoted):
                    // read again before it next votes.
                    from.restart.connection_lost();
                }
                hop = next;
            }
            work(hop).await
        })
    }

    /// Sends `cmd` to `hop`'s server (after `ASKING` when the hop says so).
    pub(super) async fn send(&self, hop: &Hop, cmd: &Cmd) -> Result<Value, RedisError> {
        hop.shard
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
    pub(super) async fn counted<T, Fut>(
        &self,
        window: Window,
        send: impl FnOnce() -> Fut,
    ) -> NodeResult<T>
    where
        Fut: Future<Output = Result<T, RedisError>>,
    {
        self.counters.sent();
        let result = send().await;
        // One clock read per reply: its latency counts from the window's
        // start, when the fan-out sent to every node at once.
        let end = Instant::now();
        if end > window.deadline {
            return Err(self.failure(NodeFailureKind::Timeout(window.timeout())));
        }
        let latency = end.saturating_duration_since(window.start);
        if result.is_ok() {
            self.counters.replied(latency);
        }
        result.map_err(|e| self.failed_with(e, Some(latency)))
    }

    /// The failure `e` after `latency`, counted — unless it is a cluster's
    /// redirection, which [`routed`](Self::routed) follows.
    pub(super) fn failed_with(&self, e: RedisError, latency: Option<Duration>) -> NodeFailure {
        // A lost connection is the link's to report: it takes the
        // connection down, and the next one starts a new epoch.
        let refusal = self.gate.refusal(&e);
        let kind = refusal.unwrap_or_else(|| classify(&e, latency.unwrap_or_default()));
        self.route.failed(&e);
        if e.redirect_node().is_none() {
            self.counters.failed(&kind, latency);
        }
        self.failure(kind).caused_by(e)
    }

    /// A reply this client cannot read (counted as a protocol error).
    pub(super) fn protocol(&self, what: String) -> NodeFailure {
        self.fail(NodeFailureKind::Protocol(what))
    }

    /// The failure `kind`, counted (without a latency).
    pub(super) fn fail(&self, kind: NodeFailureKind) -> NodeFailure {
        self.counters.failed(&kind, None);
        self.failure(kind)
    }

    /// A reply as `T` (an error reply as the error it is; anything else
    /// that does not read as `T`, a protocol error).
    pub(super) fn parse<T: FromRedisValue>(&self, value: Value) -> NodeResult<T> {
        let read = value
            .extract_error()
            .and_then(|v| Ok(T::from_redis_value(v)?));
        read.map_err(|e| self.protocol(e.to_string()))
    }

    pub(crate) fn failure(&self, kind: NodeFailureKind) -> NodeFailure {
        NodeFailure::new(&*self.label, kind)
    }

    /// Where the member's commands go (`find`: a server, a cluster's
    /// masters), found within `window`; a failure counted.
    pub(super) async fn reach<T>(
        &self,
        window: Window,
        find: impl Future<Output = Result<T, RedisError>>,
    ) -> NodeResult<T> {
        let found = async { find.await.map_err(|e| self.failed_with(e, None)) };
        self.within(window, found).await
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
            .unwrap_or_else(|_| Err(self.failure(NodeFailureKind::Timeout(window.timeout()))))
    }
}
