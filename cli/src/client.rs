//! The client the subcommands share: the Redlock built from the global
//! options (`--nodes` or `QUORUMLOCK_NODES`, the timeouts, the restart
//! quarantine, durable votes), and the exit status a library error maps to.

use std::time::Duration;

use crate::args::Common;
use crate::exit;
use crate::output::stderr_line;

/// Builds the client from the common options.
pub async fn redlock(common: &Common) -> Result<quorumlock::Redlock, quorumlock::Error> {
    // One list as written (--nodes or QUORUMLOCK_NODES): empty entries
    // ignored, a bad one named by its position.
    quorumlock::Builder::from_list(&common.nodes.join(","))
        .node_timeout(common.node_timeout)
        .connect_timeout(common.connect_timeout)
        .retry_delay(Duration::ZERO, common.retry_delay)
        .allow_eviction(common.allow_eviction)
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
    redlock(common).await.map_err(|e| {
        stderr_line(&e.to_string());
        status_of(&e)
    })
}

/// [`connect`] for the commands that only read (`status`, `leader`):
/// without `--restart-quarantine` or `--durable-replicas`, a restart
/// quarantine stands in for them, so that a member that fails over
/// (a Sentinel group, a cluster) is accepted. It changes nothing for a
/// read: the quarantine withholds votes only, and these commands ask for
/// none.
pub async fn connect_reader(common: &Common) -> Result<quorumlock::Redlock, u8> {
    if common.restart_quarantine.is_some() || common.durable_replicas.is_some() {
        return connect(common).await;
    }
    let common = Common {
        restart_quarantine: Some(Duration::from_secs(1)),
        ..common.clone()
    };
    connect(&common).await
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
