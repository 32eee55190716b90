//! The client the subcommands share: the Redlock built from the global
//! options (`--nodes` or `QUORUMLOCK_NODES`, the timeouts), and the exit
//! status a library error maps to.

use std::time::Duration;

use crate::args::Common;
use crate::{diagnose, exit};

/// Builds the client from the common options.
pub async fn redlock(common: &Common) -> Result<quorumlock::Redlock, quorumlock::Error> {
    quorumlock::Builder::new(common.nodes.iter().map(String::as_str))
        .node_timeout(common.node_timeout)
        .connect_timeout(common.connect_timeout)
        .retry_delay(Duration::ZERO, common.retry_delay)
        .allow_eviction(common.allow_eviction)
        .build()
        .await
}

/// The exit status for a library error.
pub fn status_of(err: &quorumlock::Error) -> u8 {
    if err.is_contended() {
        exit::BUSY
    } else if err.is_invalid_input() {
        exit::USAGE
    } else if err.is_lost() {
        exit::LOST
    } else if err
        .node_failures()
        .iter()
        .any(|f| diagnose::is_config(&f.kind))
    {
        exit::CONFIG
    } else {
        exit::UNAVAILABLE
    }
}
