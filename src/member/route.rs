//! Where a member's commands go. A member is one vote: a single server,
//! a Sentinel group (its master, found again at every connect) or a Redis
//! Cluster (the master serving a key's hash slot). Each server a member
//! sends to is a [`Shard`]: its connection and its restart state.

use std::sync::Arc;

use redis::{ErrorKind, RedisError, ServerErrorKind};

use crate::member::cluster::ClusterMap;
use crate::member::link::{Shard, Target};

/// A shard to send to, and whether the command must be preceded by
/// `ASKING` (a slot being migrated, the key already moved).
pub(crate) struct Hop {
    pub(crate) shard: Arc<Shard>,
    pub(crate) asking: bool,
}

impl From<Arc<Shard>> for Hop {
    /// Straight to `shard` (no `ASKING`).
    fn from(shard: Arc<Shard>) -> Self {
        Hop {
            shard,
            asking: false,
        }
    }
}

/// How a member reaches its servers.
pub(crate) enum Route {
    /// A single server, or the master of a Sentinel group.
    One(Arc<Shard>),
    /// The masters of a Redis Cluster, by slot.
    Cluster(Box<ClusterMap>),
}

/// How many redirections one command follows before failing.
pub(crate) const MAX_REDIRECTS: usize = 3;

impl Route {
    /// The shard serving `slot`, when known without asking a server (a
    /// single server, a cluster whose table is read and not stale).
    pub(crate) fn known(&self, slot: u16) -> Option<Hop> {
        match self {
            Route::One(shard) => Some(Hop::from(shard.clone())),
            Route::Cluster(map) => map.known(slot).map(Hop::from),
        }
    }

    /// The shard serving `slot` now (a cluster's table read first when it
    /// is not known).
    pub(crate) async fn hop(&self, slot: u16) -> Result<Hop, RedisError> {
        match self {
            Route::One(shard) => Ok(Hop::from(shard.clone())),
            Route::Cluster(map) => map.shard(slot).await.map(Hop::from),
        }
    }

    /// Where `error` (a reply of `MOVED` or `ASK`) sends the command next:
    /// `MOVED` also updates the slot table; `None` for any other error.
    pub(crate) fn redirect(&self, error: &RedisError) -> Option<Hop> {
        let Route::Cluster(map) = self else {
            return None;
        };
        let (addr, slot) = error.redirect_node()?;
        let asking = error.kind() == ErrorKind::Server(ServerErrorKind::Ask);
        let shard = map.redirected(addr, slot, !asking);
        Some(Hop { shard, asking })
    }

    /// Every shard known now (a cluster's table read first if it is not
    /// yet).
    pub(crate) async fn all(&self) -> Result<Vec<Arc<Shard>>, RedisError> {
        match self {
            Route::One(shard) => Ok(vec![shard.clone()]),
            Route::Cluster(map) => map.masters().await,
        }
    }

    /// A command on `shard` failed with `error`: a cluster reads its
    /// table again before the next command when the shard may be gone.
    pub(crate) fn failed(&self, error: &RedisError) {
        if let Route::Cluster(map) = self {
            if error.is_io_error()
                || error.is_connection_dropped()
                || error.is_unrecoverable_error()
            {
                map.stale();
            }
        }
    }

    /// Where subscriptions and fresh connections go: the server, the
    /// group's master, or a cluster's first seed (a cluster delivers
    /// every `PUBLISH` to every node).
    pub(crate) fn target(&self) -> Target {
        match self {
            Route::One(shard) => shard.target.clone(),
            Route::Cluster(map) => map.seed(),
        }
    }
}
