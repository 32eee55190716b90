//! The Lua scripts that run on the nodes, each built (and hashed) once.
//! `redis::Script` sends `EVALSHA` and falls back to `EVAL` on `NOSCRIPT`,
//! so a `SCRIPT FLUSH` or a restarted node costs one extra round trip.

use std::sync::LazyLock;

use redis::Script;

/// Source of the compare-and-delete script, for a plain `EVAL`.
pub(crate) const RELEASE_SOURCE: &str = include_str!("scripts/release.lua");
/// Source of the multi-resource compare-and-delete script.
pub(crate) const RELEASE_MULTI_SOURCE: &str = include_str!("scripts/release_multi.lua");

/// Compare-and-delete (and publish the release).
pub(crate) static RELEASE: LazyLock<Script> = LazyLock::new(|| Script::new(RELEASE_SOURCE));

/// Compare-and-delete over several keys.
pub(crate) static RELEASE_MULTI: LazyLock<Script> =
    LazyLock::new(|| Script::new(RELEASE_MULTI_SOURCE));

/// Compare-and-pexpire; never re-creates an expired key.
pub(crate) static EXTEND: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/extend.lua")));

/// Compare-and-pexpire over several keys, all or nothing.
pub(crate) static EXTEND_MULTI: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/extend_multi.lua")));

/// All-or-nothing `SET NX PX` over several keys.
pub(crate) static ACQUIRE_MULTI: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/acquire_multi.lua")));

/// `SET NX PX` that returns the fencing counter atomically.
pub(crate) static ACQUIRE_FENCED: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/acquire_fenced.lua")));

/// Raises the fencing counter where the token is still held.
pub(crate) static FENCE_COMMIT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/fence_commit.lua")));

/// Whether every key still carries the token (read-only).
pub(crate) static HOLDS: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/holds.lua")));

/// Every script, for preloading on connect.
pub(crate) fn all() -> [&'static Script; 8] {
    [
        &RELEASE,
        &RELEASE_MULTI,
        &EXTEND,
        &EXTEND_MULTI,
        &ACQUIRE_MULTI,
        &ACQUIRE_FENCED,
        &FENCE_COMMIT,
        &HOLDS,
    ]
}
