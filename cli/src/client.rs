//! The client the subcommands share: the Redlock built from the global
//! options (`--nodes` or `QUORUMLOCK_NODES`, the timeouts, the restart
//! quarantine, durable votes), and the exit status a library error maps to.

use std::time::Duration;

use crate::args::Common;
use crate::exit;
use crate::output::stderr_line;

/// Builds the client from the common options; with `read_only`, one that
/// only reads (`Builder::read_only`).
pub async fn redlock(
    common: &Common,
    read_only: bool,
) -> Result<quorumlock::Redlock, quorumlock::Error> {
    // One list as written (--nodes or QUORUMLOCK_NODES): empty entries
    // ignored, a bad one named by its position.
    quorumlock::Builder::from_list(&common.nodes.join(","))
        .node_timeout(common.node_timeout)
        .connect_timeout(common.connect_timeout)
        .retry_delay(Duration::ZERO, common.retry_delay)
        .allow_eviction(common.allow_eviction)
        .read_only(read_only)
        .restart_quarantine(common.restart_quarantine)
        .durable_votes(common.durable_replicas.map(|replicas| {
            if common.durable_aof {
                quorumlock::Durability::Aof {
                    local: true,
                    replicas,
                }
            } else {
                quorumlock::Durability::Replicas(replicas)
            }
        }))
        .build()
        .await
}

/// Builds the client, or says why not on stderr and returns the exit
/// status.
pub async fn connect(common: &Common) -> Result<quorumlock::Redlock, u8> {
    connect_with(common, false).await
}

/// [`connect`], read-only or not.
async fn connect_with(common: &Common, read_only: bool) -> Result<quorumlock::Redlock, u8> {
    redlock(common, read_only).await.map_err(|e| {
        stderr_line(&e.to_string());
        status_of(&e)
    })
}

/// [`connect`] for the commands that only read (`status`, `leader`): a
/// read-only client (`Builder::read_only`), so that a member that fails
/// over (a Sentinel group, a cluster) needs neither `--durable-replicas`
/// nor `--restart-quarantine`: a read takes no vote.
pub async fn connect_reader(common: &Common) -> Result<quorumlock::Redlock, u8> {
    connect_with(common, true).await
}

/// The exit status for a library error.
pub fn status_of(err: &quorumlock::Error) -> u8 {
    if err.is_contended() {
        exit::BUSY
    } else if err.is_invalid_input() {
        exit::USAGE
    } else if err.is_lost() {
        exit::LOST
    } else if err.is_misconfigured() {
        exit::CONFIG
    } else {
        exit::UNAVAILABLE
    }
}
