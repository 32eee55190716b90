//! A node's standing under restart quarantine: its uptime read, and each
//! vote checked to come from the server that was read.

use std::time::{Duration, Instant};

use redis::{ErrorKind, ServerErrorKind, Value};

use super::{parse, Node, NodeResult, Window};
use crate::error::{NodeFailure, NodeFailureKind};
use crate::node::admission;
use crate::node::commands::Command;
use crate::node::quarantine::{self, Standing};

impl Node {
    /// Sends the vote `command` with the `INFO server` `probe` right behind
    /// it on the same connection (so the probe reaches the server that cast
    /// the vote, or one that started later), and returns the vote when
    /// that server is the one whose uptime reading lets the node vote. A
    /// restart hidden from the client (a proxy that keeps its connection
    /// open) or a reconnect between the standing check and the send is
    /// caught here: the vote is not counted and the standing becomes
    /// unknown.
    pub(super) async fn vote_checked(
        &self,
        command: &Command,
        probe: &Command,
        window: Window,
    ) -> NodeResult<Value> {
        let Some(voter) = self.restart.voter(Instant::now()) else {
            return Err(self.out(self.restart.standing(Instant::now())));
        };
        let (vote, seen) = self
            .counted(window, || async {
                let (vote, seen) = futures::join!(self.send(command.cmd()), self.run(probe));
                match vote {
                    Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                        // The EVAL goes out after the probe: probe again.
                        let vote = self.run_eval(command).await?;
                        Ok((vote, parse::<String>(self.run(probe).await?)?))
                    }
                    vote => Ok((vote?, parse::<String>(seen?)?)),
                }
            })
            .await?;
        let seen = admission::parse_run_id(&seen)
            .ok_or_else(|| self.protocol("INFO server without run_id".to_owned()))?;
        if self.restart.confirm(&voter, seen) {
            return Ok(vote);
        }
        let kind = NodeFailureKind::ServerChanged;
        self.counters.failed(&kind, None);
        Err(self.failure(kind))
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

    /// With a restart quarantine of `required` (none: `Ok` at once):
    /// whether this node may vote now, reading its uptime first when it is
    /// unknown (at start and after every connection loss or reconnect).
    /// `Err` when it may not, and when the connection was replaced while
    /// the uptime was being read.
    pub(crate) async fn check_standing(
        &self,
        required: Option<Duration>,
        window: Window,
    ) -> NodeResult<()> {
        let Some(required) = required else {
            return Ok(());
        };
        let mut standing = self.restart.standing(Instant::now());
        if standing == Standing::Unknown {
            // The uptime and `run_id`, with the epoch of the connection they
            // were read on (taken once that connection is open, before the
            // command is sent).
            let info = Command::server_info();
            let (epoch, info): (u64, String) = self
                .counted(window, || async {
                    self.conn.open().await?;
                    let epoch = self.restart.epoch();
                    Ok((epoch, parse(self.conn.send(info.cmd()).await?)?))
                })
                .await?;
            let read = quarantine::parse_uptime(&info).zip(admission::parse_run_id(&info));
            let (uptime, run_id) = read.ok_or_else(|| {
                self.failure(NodeFailureKind::Protocol(
                    "INFO server without uptime_in_seconds or run_id".to_owned(),
                ))
            })?;
            standing =
                self.restart
                    .observed(epoch, uptime, run_id.into(), required, Instant::now());
        }
        match standing {
            Standing::Votes => Ok(()),
            other => Err(self.out(other)),
        }
    }
}
