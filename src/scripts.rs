//! The Lua scripts that run on the nodes, each built (and hashed) once.
//! `redis::Script` sends `EVALSHA` and falls back to `EVAL` on `NOSCRIPT`,
//! so a `SCRIPT FLUSH` or a restarted node costs one extra round trip.

use std::sync::LazyLock;

use redis::Script;

/// Source of the compare-and-delete script, for a plain `EVAL`.
pub(crate) const RELEASE_SOURCE: &str = include_str!("scripts/release.lua");

/// Compare-and-delete. `KEYS[1]` resource, `ARGV[1]` token → 1 deleted, 0 not ours.
pub(crate) static RELEASE: LazyLock<Script> = LazyLock::new(|| Script::new(RELEASE_SOURCE));

/// Compare-and-pexpire. `KEYS[1]` resource, `ARGV[1]` token, `ARGV[2]` TTL ms
/// → 1 extended, 0 not ours (never re-creates an expired key).
pub(crate) static EXTEND: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/extend.lua")));
