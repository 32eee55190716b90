//! The command of each operation, built once per operation and shared by
//! every node's future (one `Arc` per fan-out instead of one command per
//! node): `SET NX PX` for a plain lock, `EVALSHA` of a script otherwise.

use std::sync::Arc;
use std::time::Duration;

use redis::Cmd;

use crate::keys::{hash_slot, Keys, Queue, Shape, Side, Slots};
use crate::node::lua::{self, Lua};
use crate::token::Token;
use crate::validity;

/// Whether a release wakes the resource's waiters (fast hand-off).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Announce {
    /// Announce the release: a held lock let go, or an attempt whose keys
    /// may have been all that kept a waiter out.
    Waiters,
    /// Delete without a word: the cleanup of an attempt that lost to a
    /// holder. Waking the waiters would send every one of them to that
    /// holder's keys (a thundering herd of failed attempts, each cleanup
    /// waking everyone again).
    Silently,
}

/// The lease of a waiting writer's intent mark, renewed by each of its
/// attempts: longer than the wait between two attempts of a writer (at most
/// a second while it watches for releases, or its retry delay if longer),
/// so that the mark does not lapse while the writer waits; short, so that
/// a writer that stopped waiting keeps new readers out only briefly.
pub(crate) const INTENT_LEASE: Duration = Duration::from_secs(2);

/// One operation's command.
pub(crate) struct Command {
    /// The command as sent first.
    pub(crate) cmd: Cmd,
    /// The script an `EVALSHA` calls, for the `EVAL` on `NOSCRIPT`.
    script: Option<&'static Lua>,
    /// The Redis Cluster hash slot of its first key (0 without keys),
    /// where a cluster member sends it.
    pub(crate) slot: u16,
}

impl Command {
    /// Takes the lock: `SET resource token NX PX ttl` for one resource
    /// (what every Redlock client sends), the all-or-nothing script for
    /// several (a semaphore's slots are taken by
    /// [`take_slots`](Self::take_slots), not here), the counter-reading
    /// script for a fenced lock; a read–write lock's reader or writer
    /// script (`read_acquire.lua`, `write_acquire.lua`).
    pub(crate) fn acquire(keys: &Keys, token: &Token, ttl: Duration) -> Arc<Self> {
        let ttl_ms = validity::millis(ttl);
        let args = |cmd: &mut Cmd| {
            cmd.arg(token.as_str()).arg(ttl_ms);
        };
        let first = keys.first();
        match keys.shape() {
            Shape::Lock | Shape::Slots { .. } if keys.is_multi() => {
                Self::call(&lua::ACQUIRE_MULTI, keys.slices(), args)
            }
            Shape::Lock | Shape::Slots { .. } => Arc::new(Self {
                cmd: set_nx(first, token, ttl_ms),
                script: None,
                slot: hash_slot::slot(first),
            }),
            Shape::Fenced { counter } => Self::call(&lua::ACQUIRE_FENCED, [first, counter], args),
            Shape::Read(side) => Self::call(&lua::READ_ACQUIRE, side.keys(first), args),
            Shape::Write { side, counter } => {
                let keys = side.keys(first).into_iter().chain(counter.as_deref());
                let keys: Vec<&[u8]> = keys.collect();
                Self::call(&lua::WRITE_ACQUIRE, keys, |cmd| {
                    args(cmd);
                    cmd.arg(validity::millis(INTENT_LEASE));
                })
            }
        }
    }

    /// Commits `fence` where the token is held: a lock's raises the
    /// counter from below; a permit's (with the round key) is counted once
    /// per slot and round (`fence_commit.lua`). `None` for keys without a
    /// counter.
    pub(crate) fn commit_fence(keys: &Keys, token: &Token, fence: u64) -> Option<Arc<Self>> {
        let first = keys.first();
        let listed: Vec<&[u8]> = match keys.shape() {
            Shape::Fenced { counter }
            | Shape::Write {
                counter: Some(counter),
                ..
            } => {
                vec![first, counter]
            }
            Shape::Slots { semaphore, .. } => {
                let (counter, round) = semaphore.fence.as_ref()?;
                vec![first, counter, round]
            }
            Shape::Lock | Shape::Read(_) | Shape::Write { counter: None, .. } => return None,
        };
        Some(Self::call(&lua::FENCE_COMMIT, listed, |cmd| {
            cmd.arg(token.as_str()).arg(fence);
        }))
    }

    /// Compare-and-delete; where a key was deleted, the release is
    /// announced to waiters on the resource's channel when `announce` says
    /// so. A permit holder's release clears its strays too, and the
    /// semaphore's limit record last, once no slot is left.
    pub(crate) fn release(keys: &Keys, token: &Token, announce: Announce) -> Arc<Self> {
        let args = |cmd: &mut Cmd| {
            cmd.arg(token.as_str()).arg(announce == Announce::Waiters);
        };
        let first = keys.first();
        match keys.shape() {
            // A lock's keys are its resources: no list to build per release.
            Shape::Lock | Shape::Fenced { .. } => Self::call(&lua::RELEASE, keys.slices(), args),
            Shape::Slots {
                semaphore,
                strays,
                every,
            } => {
                let limit = every.then_some(&semaphore.limit.0[..]);
                let strays = strays.iter().map(Vec::as_slice);
                let listed: Vec<&[u8]> = keys.slices().chain(strays).chain(limit).collect();
                Self::call(&lua::RELEASE, listed, |cmd| {
                    args(cmd);
                    cmd.arg(&semaphore.channel);
                    if *every {
                        cmd.arg(true);
                    }
                })
            }
            Shape::Read(side) => Self::call(&lua::READ_RELEASE, [first, &side.readers], |cmd| {
                args(cmd);
                cmd.arg(&side.channel);
            }),
            Shape::Write { side, .. } => Self::call(&lua::WRITE_RELEASE, [first], |cmd| {
                args(cmd);
                cmd.arg(&side.channel);
            }),
        }
    }

    /// Takes `want` of the semaphore's slots, all or none, looking at them
    /// from slot `first` on (wrapping around); see `acquire_slots.lua`.
    pub(crate) fn take_slots(
        slots: &Slots,
        first: usize,
        want: usize,
        token: &Token,
        ttl: Duration,
    ) -> Arc<Self> {
        let n = slots.count();
        let order = (0..n).map(|k| slots.key((first + k) % n));
        let limit = [slots.limit_key()];
        let keys: Vec<&[u8]> = order.chain(limit).chain(slots.fence_key()).collect();
        Self::call(&lua::ACQUIRE_SLOTS, keys, |cmd| {
            cmd.arg(token.as_str())
                .arg(validity::millis(ttl))
                .arg(want)
                .arg(slots.fence_key().is_some());
        })
    }

    /// Compare-and-pexpire to `ttl`; a semaphore's limit record is kept
    /// alive with its slots; a reader's: its own entry (`read_extend.lua`).
    pub(crate) fn extend(keys: &Keys, token: &Token, ttl: Duration) -> Arc<Self> {
        let args = |cmd: &mut Cmd| {
            cmd.arg(token.as_str()).arg(validity::millis(ttl));
        };
        match keys.shape() {
            Shape::Slots {
                semaphore,
                every: true,
                ..
            } => {
                let (record, limit) = &semaphore.limit;
                let keys: Vec<&[u8]> = keys.slices().chain([&record[..]]).collect();
                Self::call(&lua::EXTEND, keys, |cmd| {
                    args(cmd);
                    cmd.arg(*limit);
                })
            }
            Shape::Read(side) => Self::call(&lua::READ_EXTEND, [keys.first(), &side.readers], args),
            Shape::Lock | Shape::Fenced { .. } | Shape::Slots { .. } | Shape::Write { .. } => {
                Self::call(&lua::EXTEND, keys.slices(), args)
            }
        }
    }

    /// The repair of a lock's keys on a node that found them missing:
    /// `SET key token NX PX ttl` for each key (never overwrites, never
    /// touches the fencing counter). A reader's entry is put back by
    /// `read_acquire.lua` (where no writer holds), answering as `SET NX`.
    pub(crate) fn repair(keys: &Keys, token: &Token, ttl: Duration) -> Vec<Cmd> {
        let ttl_ms = validity::millis(ttl);
        match keys.shape() {
            Shape::Read(side) => {
                let entry = Self::call(&lua::READ_ACQUIRE, side.keys(keys.first()), |cmd| {
                    cmd.arg(token.as_str()).arg(ttl_ms).arg(1);
                });
                entry.fallback().into_iter().collect()
            }
            Shape::Lock | Shape::Fenced { .. } | Shape::Slots { .. } | Shape::Write { .. } => keys
                .slices()
                .map(|key| set_nx(key, token, ttl_ms))
                .collect(),
        }
    }

    /// Reads what each of `keys` holds, in one script: value and time left
    /// of the keys set (see `peek.lua`). Read-only.
    pub(crate) fn peek(keys: &[Vec<u8>]) -> Arc<Self> {
        Self::call(&lua::PEEK, keys.iter().map(Vec::as_slice), |_| {})
    }

    /// A read–write lock's writer and its readers' count, answered as
    /// [`peek`](Self::peek) answers for two keys (read-only; see
    /// `read_write_peek.lua`).
    pub(crate) fn read_write_peek(resource: &[u8], side: &Side) -> Arc<Self> {
        Self::call(&lua::READ_WRITE_PEEK, [resource, &side.readers], |_| {})
    }

    /// Whether every key still carries the token (read-only).
    pub(crate) fn holds(keys: &Keys, token: &Token) -> Arc<Self> {
        let args = |cmd: &mut Cmd| {
            cmd.arg(token.as_str());
        };
        match keys.shape() {
            Shape::Read(side) => Self::call(&lua::READ_HOLDS, [keys.first(), &side.readers], args),
            Shape::Lock | Shape::Fenced { .. } | Shape::Slots { .. } | Shape::Write { .. } => {
                Self::call(&lua::HOLDS, keys.slices(), args)
            }
        }
    }

    /// Which server a node is (`run_id` and replication id), its uptime
    /// and whether it was promoted since it started (`identity.lua`): the
    /// reading of restart quarantine's standing.
    pub(crate) fn identity() -> Arc<Self> {
        Self::call(&lua::IDENTITY, std::iter::empty::<&[u8]>(), |_| {})
    }

    /// `EVALSHA hash numkeys keys… args…`.
    pub(crate) fn call<'k>(
        script: &'static Lua,
        keys: impl IntoIterator<Item = &'k [u8], IntoIter: ExactSizeIterator>,
        args: impl FnOnce(&mut Cmd),
    ) -> Arc<Self> {
        let keys = keys.into_iter();
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(script.hash()).arg(keys.len());
        let mut slot = None;
        for key in keys {
            slot = slot.or_else(|| Some(hash_slot::slot(key)));
            cmd.arg(key);
        }
        args(&mut cmd);
        Arc::new(Self {
            cmd,
            script: Some(script),
            slot: slot.unwrap_or(0),
        })
    }

    /// A waiter's ticket proposed to the queue (`0`: the counter read),
    /// with its entry's lease (`queue_join.lua`).
    pub(crate) fn queue_join(queue: &Queue, id: &Token, ticket: u64, lease: Duration) -> Arc<Self> {
        Self::call(
            &lua::QUEUE_JOIN,
            queue.keys.iter().map(Vec::as_slice),
            |cmd| {
                cmd.arg(id.as_str())
                    .arg(ticket)
                    .arg(validity::millis(lease));
            },
        )
    }

    /// A waiter's heartbeat: its lease renewed, the head read
    /// (`queue_touch.lua`).
    pub(crate) fn queue_touch(queue: &Queue, id: &Token, lease: Duration) -> Arc<Self> {
        Self::call(
            &lua::QUEUE_TOUCH,
            queue.keys.iter().map(Vec::as_slice),
            |cmd| {
                cmd.arg(id.as_str()).arg(validity::millis(lease));
            },
        )
    }

    /// A waiter's entry removed, the next head named on its own channel
    /// (`queue_leave.lua`).
    pub(crate) fn queue_leave(queue: &Queue, id: &Token) -> Arc<Self> {
        Self::call(
            &lua::QUEUE_LEAVE,
            queue.keys.iter().map(Vec::as_slice),
            |cmd| {
                cmd.arg(id.as_str());
            },
        )
    }

    /// The `EVAL` to send when the node does not know the script.
    pub(crate) fn fallback(&self) -> Option<Cmd> {
        self.script.map(|script| script.eval_of(&self.cmd))
    }
}

/// `SET key token NX PX ttl_ms`: a plain lock's acquire, and the repair.
fn set_nx(key: &[u8], token: &Token, ttl_ms: u64) -> Cmd {
    let mut cmd = redis::cmd("SET");
    cmd.arg(key)
        .arg(token.as_str())
        .arg("NX")
        .arg("PX")
        .arg(ttl_ms);
    cmd
}
