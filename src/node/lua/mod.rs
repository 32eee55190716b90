//! The Lua scripts that run on the nodes: each with its source and its
//! SHA-1, computed once. Commands call them by `EVALSHA` and fall back to
//! `EVAL` on `NOSCRIPT`, so a `SCRIPT FLUSH` or a restarted node costs one
//! extra round trip.

use std::sync::LazyLock;

use redis::{Cmd, Script};

/// One script: its source and its hash.
pub(crate) struct Lua {
    source: &'static str,
    script: LazyLock<Script>,
}

impl Lua {
    /// The SHA-1 that `EVALSHA` names it by.
    pub(crate) fn hash(&self) -> &str {
        self.script.get_hash()
    }

    /// `SCRIPT LOAD`, to preload it.
    pub(crate) fn load(&self) -> Cmd {
        redis::cmd("SCRIPT").arg("LOAD").arg(self.source).clone()
    }

    /// The `EVAL` of `evalsha` (an `EVALSHA` of this script): the same keys
    /// and arguments with the source in place of the hash.
    pub(crate) fn eval_of(&self, evalsha: &Cmd) -> Cmd {
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(self.source);
        for arg in evalsha.args_iter().skip(2) {
            if let redis::Arg::Simple(bytes) = arg {
                cmd.arg(bytes);
            }
        }
        cmd
    }
}

/// The scripts, each from its files joined in order (a script that reads
/// or raises a fencing counter begins with `fence_check.lua`, the
/// counter's check written once), and [`ALL`], every script.
macro_rules! scripts {
    ($($(#[$doc:meta])* $name:ident = $($file:literal),+;)+) => {
        $(
            $(#[$doc])*
            pub(crate) static $name: Lua = Lua {
                source: concat!($(include_str!($file)),+),
                script: LazyLock::new(|| Script::new($name.source)),
            };
        )+
        /// Every script, for preloading on connect.
        pub(crate) static ALL: &[&Lua] = &[$(&$name),+];
    };
}

scripts! {
    /// Which server a node is (its `run_id` and replication id) and its
    /// uptime, for restart quarantine (read-only).
    IDENTITY = "identity.lua";
    /// Compare-and-delete on every key (and publish each release).
    RELEASE = "release.lua";
    /// Compare-and-pexpire of every key, all or nothing; never re-creates
    /// an expired key, never shortens one.
    EXTEND = "extend.lua";
    /// All-or-nothing `SET NX PX` over several keys.
    ACQUIRE_MULTI = "acquire_multi.lua";
    /// `SET NX PX` that returns the fencing counter atomically.
    ACQUIRE_FENCED = "fence_check.lua", "acquire_fenced.lua";
    /// Takes k of a semaphore's slots on a node, all or none (and reads
    /// its fencing counter).
    ACQUIRE_SLOTS = "fence_check.lua", "acquire_slots.lua";
    /// Commits a fencing token where the lock (or permit) is still held.
    FENCE_COMMIT = "fence_check.lua", "fence_commit.lua";
    /// Whether every key still carries the token (read-only).
    HOLDS = "holds.lua";
    /// What each of many keys holds, the keys set only (read-only).
    PEEK = "peek.lua";
    /// A leader's record, written where the leadership is still held.
    PROCLAIM = "proclaim.lua";
    /// An election's leadership lock and leader record (read-only).
    LEADER = "leader.lua";
    /// A resigning leader's record, deleted where it is still its own.
    RETIRE = "retire.lua";
    /// A reader's entry in a read–write lock (`docs/rwlock.md`), unless a
    /// writer holds it or waits; also the repair of a reader's entry.
    READ_ACQUIRE = "read_write.lua", "read_acquire.lua";
    /// A writer's hold of a read–write lock where no reader is left, or
    /// its intent mark (and reads its fencing counter).
    WRITE_ACQUIRE = "fence_check.lua", "read_write.lua", "write_acquire.lua";
    /// A reader's entry removed, the readers' marker kept in step.
    READ_RELEASE = "read_write.lua", "read_release.lua";
    /// A writer's release: compare-and-delete, announced to the writers
    /// and to the readers.
    WRITE_RELEASE = "write_release.lua";
    /// A reader's own entry extended, the readers' marker kept in step.
    READ_EXTEND = "read_write.lua", "read_extend.lua";
    /// Whether a reader's entry is there (read-only).
    READ_HOLDS = "read_write.lua", "read_holds.lua";
    /// A read–write lock's writer and readers, as `peek.lua` answers
    /// (read-only).
    READ_WRITE_PEEK = "read_write.lua", "read_write_peek.lua";
    /// A waiter's ticket committed where the counter is below it, or the
    /// counter read (`docs/queue.md`).
    QUEUE_JOIN = "queue.lua", "queue_join.lua";
    /// A waiter's lease renewed, and the queue's head read.
    QUEUE_TOUCH = "queue.lua", "queue_touch.lua";
    /// A waiter's entry removed, the new head named when it was the head.
    QUEUE_LEAVE = "queue.lua", "queue_leave.lua";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_eval_fallback_carries_the_same_keys_and_arguments() {
        let mut evalsha = redis::cmd("EVALSHA");
        evalsha.arg(RELEASE.hash()).arg(1).arg(b"res").arg("token");
        let eval = RELEASE.eval_of(&evalsha);
        let args: Vec<Vec<u8>> = eval
            .args_iter()
            .filter_map(|a| match a {
                redis::Arg::Simple(b) => Some(b.to_vec()),
                _ => None,
            })
            .collect();
        assert_eq!(args[0], b"EVAL");
        assert_eq!(args[1], include_str!("release.lua").as_bytes());
        assert_eq!(
            &args[2..],
            [b"1".to_vec(), b"res".to_vec(), b"token".to_vec()]
        );
        assert_eq!(RELEASE.hash().len(), 40);
    }
}
