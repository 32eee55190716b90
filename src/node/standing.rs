//! A member's votes: each server's standing under restart quarantine (its
//! identity and uptime read with `identity.lua`, each vote checked to come
//! from the server that was read) and, with durable votes, the wait behind
//! each write.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use redis::{ErrorKind, RedisError, ServerErrorKind, Value};

use super::{durable, parse, Node, NodeResult, Window};
use crate::error::{NodeFailure, NodeFailureKind};
use crate::node::admission;
use crate::node::commands::Command;
use crate::node::quarantine::{Aged, Standing};
use crate::node::route::{Hop, Shard};

impl Node {
    /// Sends the vote `command` to the server serving its slot, with —
    /// on the same connection, behind it, so that they reach the server
    /// that cast the vote or one that started later — the `INFO server`
    /// probe naming its `run_id` (with `probe` and restart quarantine) and
    /// the durability wait. The vote is returned when the server that
    /// cast it is the one whose uptime reading lets it vote, and its write
    /// is as durable as asked: with durable votes, a vote `yes` reads as a
    /// yes is followed by the wait, whose reply comes back beside the vote
    /// for the caller to check
    /// ([`durable_reached`](Self::durable_reached)). A restart hidden from the client (a proxy
    /// that keeps its connection open, a failover) or a reconnect between
    /// the standing check and the send is caught here: the vote is not
    /// counted and the standing becomes unknown.
    pub(super) async fn vote(
        &self,
        command: &Command,
        window: Window,
        probe: bool,
        yes: impl Fn(&Value) -> bool + Send + Sync,
    ) -> NodeResult<(Value, Option<Value>)> {
        let yes = &yes;
        self.routed(command.slot(), window, |hop| async move {
            let probe = match (&self.quarantine, probe) {
                (Some((required, info)), true) => {
                    let voter = self.voter(&hop.shard, *required, window).await?;
                    Some((voter, info))
                }
                _ => None,
            };
            let (vote, seen, waited) = self
                .counted(window, || async {
                    let probe = probe.as_ref().map(|(_, probe)| &***probe);
                    let (vote, seen) = futures::join!(
                        self.send(&hop, command.cmd()),
                        self.maybe_run(&hop, probe),
                    );
                    let (vote, seen) = match vote {
                        Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                            // The EVAL goes out after the probe: probe again.
                            let vote = self.run_eval(&hop, command).await?;
                            (vote, self.maybe_run(&hop, probe).await?)
                        }
                        vote => (vote?, seen?),
                    };
                    // The wait goes out once the yes is known: a no wrote
                    // nothing that must last, and a wait blocks the
                    // connection while the replicas lag (`WAITAOF`, sent
                    // with the write, would even wait for the replicas'
                    // once-a-second report).
                    let wait = self
                        .durable
                        .filter(|_| yes(&vote))
                        .map(|d| durable::wait(d, durable::budget(window)));
                    let waited = self.maybe_send(&hop, wait.as_ref()).await?;
                    Ok((vote, seen, waited))
                })
                .await?;
            if let (Some(durability), Some(waited)) = (self.durable, &waited) {
                if durable::reached(durability, waited).is_err() {
                    // Deposed, or a replica lost: ask again which server is
                    // the master, and judge its replicas, before the next
                    // vote (the sentinels name a new master within a
                    // failover, not once the old one is demoted).
                    hop.shard.conn.reconnect();
                }
            }
            if let (Some((voter, _)), Some(seen)) = (&probe, seen) {
                let seen: String = parse(seen).map_err(|e| self.protocol(e.to_string()))?;
                let seen = admission::parse_run_id(&seen)
                    .ok_or_else(|| self.protocol("INFO server without run_id".to_owned()))?;
                if !hop.shard.restart.confirm(voter, seen) {
                    let kind = NodeFailureKind::ServerChanged;
                    self.counters.failed(&kind, None);
                    return Err(self.failure(kind));
                }
            }
            Ok((vote, waited))
        })
        .await
    }

    async fn maybe_run(
        &self,
        hop: &Hop,
        command: Option<&Command>,
    ) -> Result<Option<Value>, RedisError> {
        match command {
            Some(command) => self.run(hop, command).await.map(Some),
            None => Ok(None),
        }
    }

    async fn maybe_send(
        &self,
        hop: &Hop,
        cmd: Option<&redis::Cmd>,
    ) -> Result<Option<Value>, RedisError> {
        match cmd {
            Some(cmd) => self.send(hop, cmd).await.map(Some),
            None => Ok(None),
        }
    }

    /// Whether the durability wait's reply `waited` (if one was sent)
    /// shows the write durable as asked.
    pub(super) fn durable_reached(&self, waited: Option<&Value>) -> NodeResult<()> {
        let (Some(durability), Some(waited)) = (self.durable, waited) else {
            return Ok(());
        };
        match durable::reached(durability, waited) {
            Ok(()) => Ok(()),
            Err(Ok(kind)) => {
                self.counters.failed(&kind, None);
                Err(self.failure(kind))
            }
            Err(Err(what)) => Err(self.protocol(what)),
        }
    }

    /// The server (`run_id:replid`) whose reading lets `shard` vote now,
    /// reading its uptime first when it is unknown; `Err` when it may not
    /// vote.
    async fn voter(
        &self,
        shard: &Arc<Shard>,
        required: Duration,
        window: Window,
    ) -> NodeResult<Arc<str>> {
        self.standing_on(shard, required, window).await?;
        shard
            .restart
            .voter(Instant::now())
            .ok_or_else(|| self.out(shard.restart.standing(Instant::now())))
    }

    /// The identity (`run_id:replid`), uptime and whether the server was
    /// promoted since it started, in an `identity.lua` reply.
    fn identity(&self, reply: Value) -> NodeResult<(String, Duration, bool)> {
        let read: Result<(String, i64, i64), _> = parse(reply);
        match read {
            Ok((id, uptime, promoted)) if id.len() > 1 && uptime >= 0 => Ok((
                id,
                Duration::from_secs(uptime.unsigned_abs()),
                promoted == 1,
            )),
            Ok((id, uptime, _)) => Err(self.protocol(format!(
                "INFO without run_id or uptime_in_seconds (identity {id:?}, uptime {uptime})"
            ))),
            Err(e) => Err(self.protocol(format!("identity answered {e}"))),
        }
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
        self.counters.failed(&kind, None);
        self.failure(kind)
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
        let shards = self
            .within(window, async {
                self.route
                    .all()
                    .await
                    .map_err(|e| self.failed_with(e, None))
            })
            .await?;
        let checks = shards.iter().map(|shard| -> BoxFuture<'_, NodeResult<()>> {
            Box::pin(self.standing_on(shard, *required, window))
        });
        futures::future::try_join_all(checks).await.map(|_| ())
    }

    /// [`check_standing`](Self::check_standing) for one server.
    async fn standing_on(
        &self,
        shard: &Arc<Shard>,
        required: Duration,
        window: Window,
    ) -> NodeResult<()> {
        let mut standing = shard.restart.standing(Instant::now());
        if standing == Standing::Unknown {
            if self.quarantine.is_none() {
                return Ok(());
            }
            let identity = Command::identity();
            // The identity and uptime, with the epoch of the connection
            // they were read on (taken once that connection is open,
            // before the command is sent).
            let hop = Hop {
                shard: shard.clone(),
                asking: false,
            };
            let (epoch, reply) = self
                .counted(window, || async {
                    shard.conn.open().await?;
                    let epoch = shard.restart.epoch();
                    Ok((epoch, self.run(&hop, &identity).await?))
                })
                .await?;
            let (id, uptime, promoted) = self.identity(reply)?;
            let now = Instant::now();
            // With durable votes on every replica (the rule for a member
            // that fails over), a promoted replica has every lock the old
            // master counted: its own uptime is its age, not the time since
            // this client first saw it (`docs/members.md`).
            let aged = match self.durable {
                Some(_) => Aged::ByUptime,
                None => Aged::FromFirstReading { promoted },
            };
            standing = shard
                .restart
                .observed(epoch, uptime, id.into(), aged, required, now);
        }
        match standing {
            Standing::Votes => Ok(()),
            other => Err(self.out(other)),
        }
    }
}
