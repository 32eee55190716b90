//! What a member does on every one of its servers (one for a single
//! server or a Sentinel group, each master of a Redis Cluster): open the
//! connections and load the scripts, ping them (and a fresh connection,
//! for health), ask whether they know a command.

use std::future::Future;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use redis::{ErrorKind, RedisError, Value};

use super::{Node, NodeResult};
use crate::error::classify::classify;
use crate::member::link::Target;
use crate::member::route::{Hop, Route};
use crate::node::{admission, lua, Window};

impl Node {
    /// Sends `PING` to every server of the member, used to open the
    /// connections early.
    pub(crate) async fn ping(&self, window: Window) -> NodeResult<()> {
        let cmd = &redis::cmd("PING");
        self.on_every_shard(window, |hop| async move {
            self.send(&hop, cmd).await.map(|_| ())
        })
        .await
    }

    /// Whether a server of the member answered that it does not know the
    /// command `name` (`COMMAND INFO`); a server that does not answer is
    /// not counted.
    pub(crate) async fn lacks(&self, name: &str, window: Window) -> bool {
        let info = &redis::cmd("COMMAND").arg("INFO").arg(name).clone();
        let known = self
            .on_every_shard(window, |hop| async move {
                match self.send(&hop, info).await? {
                    Value::Array(entries) if entries.iter().all(|e| *e == Value::Nil) => {
                        Err(RedisError::from((ErrorKind::Client, "unknown command")))
                    }
                    _ => Ok(()),
                }
            })
            .await;
        matches!(&known, Err(f) if f.redis_error().is_some_and(|e| e.kind() == ErrorKind::Client))
    }

    /// For a member whose master can fail over: each master's replicas
    /// read again (`INFO replication`) and judged as a new connection's
    /// are ([`Gate::readmit`](crate::node::admission::Gate::readmit)), so
    /// that a replica lost since the connection opened shows now, not at
    /// the next vote.
    pub(crate) async fn check_replicas(&self, window: Window) -> NodeResult<()> {
        let gate = &self.gate;
        if !gate.fails_over() {
            return Ok(());
        }
        let info = &admission::info("replication");
        self.on_every_shard(window, |hop| async move {
            let reply = hop.shard.send(info, false).await?;
            gate.readmit(reply)
        })
        .await
    }

    /// What the member's address gets wrong, when its servers tell within
    /// `timeout`: a Sentinel group's sentinels do not watch the group (or
    /// are not sentinels); a cluster's seed is not in cluster mode. For
    /// `build()`, where these are misconfiguration, not an outage.
    pub(crate) async fn misconfigured(&self, timeout: Duration) -> Option<String> {
        let wrong = match &self.route {
            Route::One(shard) => match &shard.target {
                Target::Sentinel(sentinels) => sentinels.misconfigured(timeout).await,
                Target::Server(_) => None,
            },
            Route::Cluster(map) => match tokio::time::timeout(timeout, map.masters()).await {
                Ok(Err(e)) if e.to_string().contains("cluster support disabled") => Some(
                    "its servers are not in cluster mode (cluster support disabled): list a \
                     server that is not in a cluster as redis://"
                        .to_owned(),
                ),
                _ => None,
            },
        };
        wrong.map(|wrong| format!("member {}: {wrong}", self.label()))
    }

    /// `work` on every server of the member, at once.
    async fn on_every_shard<'a, Fut>(
        &'a self,
        window: Window,
        work: impl Fn(Hop) -> Fut + Send + Sync + 'a,
    ) -> NodeResult<()>
    where
        Fut: Future<Output = Result<(), RedisError>> + Send + 'a,
    {
        let all: BoxFuture<'a, Result<(), RedisError>> = Box::pin(async move {
            let shards = self.route.all().await?;
            let hops = shards.into_iter().map(Hop::from);
            futures::future::try_join_all(hops.map(&work))
                .await
                .map(|_| ())
        });
        self.counted(window, || all).await
    }

    /// Opens a new connection as this client would (its credentials, TLS
    /// and database as configured), sends `PING` and closes it: what a
    /// reconnect would meet now, which the connection in use may no longer
    /// show (a password changed on the server leaves the connections
    /// already open authenticated). Not counted in the stats and not
    /// admitted: nothing votes on it.
    pub(crate) async fn ping_new_connection(&self, window: Window) -> NodeResult<()> {
        let start = Instant::now();
        let target = self.route.target();
        let checked = async {
            let ping = target.ask_once(&redis::cmd("PING"), window.timeout()).await;
            ping.map(|_| ())
                .map_err(|e| self.failure(classify(&e, start.elapsed())).caused_by(e))
        };
        self.within(window, checked).await
    }

    /// Loads the scripts on every server of the member, so the first
    /// release does not meet `NOSCRIPT`.
    pub(crate) async fn load_scripts(&self, window: Window) -> NodeResult<()> {
        self.on_every_shard(window, |hop| async move {
            for script in lua::ALL {
                self.send(&hop, &script.load()).await?;
            }
            Ok(())
        })
        .await
    }
}
