//! Each server's standing under restart quarantine: its identity and
//! uptime read with `identity.lua`, and each vote checked to come from the
//! server that was read.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use redis::Value;

use super::{Node, NodeResult};
use crate::error::{NodeFailure, NodeFailureKind};
use crate::member::link::Shard;
use crate::member::quarantine::{Aged, Standing};
use crate::member::route::Hop;
use crate::node::commands::Command;
use crate::node::{admission, Window};

impl Node {
    /// Whether the server that answered the probe behind a vote (`seen`,
    /// its `INFO server`) is `voter`, the server whose reading let `shard`
    /// vote ([`Quarantine::confirm`](crate::member::quarantine::Quarantine::confirm));
    /// else the vote does not count and the standing becomes unknown.
    pub(super) fn confirm(&self, shard: &Shard, voter: &str, seen: Value) -> NodeResult<()> {
        let seen: String = self.parse(seen)?;
        let seen = admission::parse_run_id(&seen)
            .ok_or_else(|| self.protocol("INFO server without run_id".to_owned()))?;
        if !shard.restart.confirm(voter, seen) {
            return Err(self.fail(NodeFailureKind::ServerChanged));
        }
        Ok(())
    }

    /// The failure of a node whose `standing` does not let it vote (a
    /// standing that votes here changed as it was read: as unknown).
    fn out(&self, standing: Standing) -> NodeFailure {
        let kind = match standing {
            Standing::Quarantined { uptime } => NodeFailureKind::Quarantined { uptime },
            Standing::Votes | Standing::Unknown => NodeFailureKind::Connection(
                "the connection was replaced while the node's uptime was read".to_owned(),
            ),
        };
        self.fail(kind)
    }

    /// With restart quarantine (none: `Ok` at once): whether every server
    /// of this member may vote now, reading the uptime of those whose
    /// standing is unknown (at start and after every connection loss or
    /// reconnect). `Err` when one may not, and when a connection was
    /// replaced while the uptime was being read.
    pub(crate) async fn check_standing(&self, window: Window) -> NodeResult<()> {
        let Some((required, _)) = &self.quarantine else {
            return Ok(());
        };
        let shards = self.reach(window, self.route.all()).await?;
        let checks = shards.iter().map(|shard| -> BoxFuture<'_, NodeResult<_>> {
            Box::pin(self.voter(shard, *required, window))
        });
        futures::future::try_join_all(checks).await.map(|_| ())
    }

    /// The server (`run_id:replid`) whose reading lets `shard` vote now,
    /// reading its uptime first when its standing is unknown; `Err` when
    /// it may not vote.
    pub(super) async fn voter(
        &self,
        shard: &Arc<Shard>,
        required: Duration,
        window: Window,
    ) -> NodeResult<Arc<str>> {
        if shard.restart.standing(Instant::now()) == Standing::Unknown {
            let identity = Command::identity();
            // The identity and uptime, with the epoch of the connection
            // they were read on (taken once that connection is open,
            // before the command is sent).
            let hop = Hop::from(shard.clone());
            let (epoch, reply) = self
                .counted(window, || async {
                    shard.open().await?;
                    let epoch = shard.restart.epoch();
                    // No probe beside it, no wait behind it.
                    let read = self.exchange(&hop, &identity, None, &|_| false, window);
                    Ok((epoch, read.await?.0))
                })
                .await?;
            // The identity (`run_id:replid`), uptime and whether the
            // server was promoted since it started.
            let (id, uptime, promoted): (String, i64, i64) = self.parse(reply)?;
            let Some(uptime) = u64::try_from(uptime).ok().filter(|_| id.len() > 1) else {
                return Err(self.protocol(format!(
                    "INFO without run_id or uptime_in_seconds (identity {id:?}, uptime {uptime})"
                )));
            };
            let (uptime, promoted) = (Duration::from_secs(uptime), promoted == 1);
            // With durable votes on every replica (the rule for a member
            // that fails over), a promoted replica has every lock the old
            // master counted: its own uptime is its age, not the time since
            // this client first saw it (`docs/members.md`).
            let aged = match self.durable {
                Some(_) => Aged::ByUptime,
                None => Aged::FromFirstReading { promoted },
            };
            let now = Instant::now();
            shard
                .restart
                .observed(epoch, uptime, id.into(), aged, required, now);
        }
        let now = Instant::now();
        let voter = shard.restart.voter(now);
        voter.ok_or_else(|| self.out(shard.restart.standing(now)))
    }
}
