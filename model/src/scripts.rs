//! What a node answers to each lock command given what it holds
//! (`answer`; with a round key, `commit_permit`): the rule the Lua
//! scripts (`src/node/lua/`) apply, stated once more so that the model
//! explores the very rule the nodes run.
//!
//! `tests/conformance.rs` in the library runs every script on a real
//! server over the model's inputs (held by this token, by another, not
//! held; counter below, at and above the fence; short and long TTLs) and
//! compares each reply and what the node holds after it with this rule; the
//! client reads each reply with the library's `reply::counts`
//! (`src/node/reply.rs`).
//!
//! Nothing from the rest of the crate: `tests/conformance.rs` includes this
//! file by path.

/// What a node holds for one resource: the lock's key, if any, and the
/// resource's fencing counter as the scripts read it (a missing one reads
/// as the node's time, and an acquire reads none below it: [`answer_at`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub(crate) struct Held<T, L> {
    /// The lock's key.
    pub(crate) key: Option<Key<T, L>>,
    /// The fencing counter.
    pub(crate) counter: u64,
}

/// A lock's key on a node: the token it carries and how long it lasts (a
/// TTL, or whatever stands for it: the model names the command that set
/// it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Key<T, L> {
    /// The token of the lock that set it.
    pub(crate) token: T,
    /// How long it lasts, from the command that last set its TTL.
    pub(crate) life: L,
}

/// How long a key lasts: an extension keeps the later of its key's expiry
/// and its own (`extend.lua` never shortens a key).
pub(crate) trait Later: Copy {
    /// The later of the two.
    fn later(self, other: Self) -> Self;
}

/// A TTL from the same moment.
impl Later for u64 {
    fn later(self, other: Self) -> Self {
        self.max(other)
    }
}

/// A lock command, as one node runs it on one resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Command<T, L> {
    /// `acquire_fenced.lua`: `SET NX PX` that reads the counter.
    Acquire {
        /// The lock's token.
        token: T,
        /// The TTL.
        life: L,
    },
    /// `fence_commit.lua`: raise the counter to `fence` where the token is
    /// held, from strictly below only.
    Commit {
        /// The lock's token.
        token: T,
        /// The fencing token proposed.
        fence: u64,
    },
    /// `release.lua`: compare-and-delete.
    Release {
        /// The lock's token.
        token: T,
    },
    /// `extend.lua`: compare-and-pexpire that never shortens the key; an
    /// absent key stays absent, and is told apart from one held by another
    /// token (−1, not 0) so that the client can repair it.
    Extend {
        /// The lock's token.
        token: T,
        /// The new TTL (shorter or longer than the current one).
        life: L,
    },
    /// `holds.lua`: whether the key carries the token (read-only; run by
    /// `tests/conformance.rs`, no model sends it).
    #[allow(dead_code)]
    Holds {
        /// The lock's token.
        token: T,
    },
    /// The repair after an extension that reached a quorum in time:
    /// `SET key token NX PX life`, sent only where the extension found the
    /// key missing. Sets an absent key; never touches a present one (ours
    /// or another's), nor the fencing counter (docs/repair.md).
    Repair {
        /// The lock's token.
        token: T,
        /// What is left of the validity the extension established.
        life: L,
    },
}

/// The integer a node answers to `command` on one resource, and what it
/// holds afterwards (for a release that announces nothing). Every script
/// answers so, except `acquire_multi.lua` (1 or 0, see `reply::Kind`). A
/// repair's `SET NX PX` answers as the client reads it: `OK` 1, nil 0.
pub(crate) fn answer<T: PartialEq + Copy, L: Later>(
    held: Held<T, L>,
    command: Command<T, L>,
) -> (i64, Held<T, L>) {
    let carries = |token: T| held.key.is_some_and(|key| key.token == token);
    match command {
        Command::Acquire { token, life } => match held.key {
            Some(_) => (-1, held),
            None => (
                i64::try_from(held.counter).unwrap_or(i64::MAX),
                Held {
                    key: Some(Key { token, life }),
                    ..held
                },
            ),
        },
        Command::Commit { token, fence } => {
            if !carries(token) {
                (0, held)
            } else if held.counter < fence {
                (
                    1,
                    Held {
                        counter: fence,
                        ..held
                    },
                )
            } else {
                (-1, held)
            }
        }
        Command::Release { token } => {
            if carries(token) {
                (1, Held { key: None, ..held })
            } else {
                (0, held)
            }
        }
        Command::Extend { token, life } => match held.key {
            Some(key) if key.token == token => (
                1,
                Held {
                    key: Some(Key {
                        token,
                        life: key.life.later(life),
                    }),
                    ..held
                },
            ),
            Some(_) => (0, held),
            None => (-1, held),
        },
        Command::Holds { token } => (i64::from(carries(token)), held),
        Command::Repair { token, life } => match held.key {
            Some(_) => (0, held),
            None => (
                1,
                Held {
                    key: Some(Key { token, life }),
                    ..held
                },
            ),
        },
    }
}

/// [`answer`] on a node whose counter is `stored` (`None`: missing — never
/// set, or lost in a restart without persistence), at the node's time
/// `now` (in microseconds, rounded down to a multiple of 1024). An acquire
/// reads the counter never below `now` (`fence_check.lua`'s
/// `read_counter`): a missing counter, or one below the time (brought back
/// older by a restart from a snapshot), reads as `now`; an acquire that
/// sets the key stores what it read (`keep_counter`), so that its commit
/// reads the value the client was given. A commit reads the counter as
/// stored (`now` only when missing), and stores a counter only with a yes.
/// Returns the reply, the key and the counter stored afterwards.
pub(crate) fn answer_at<T: PartialEq + Copy, L: Later>(
    key: Option<Key<T, L>>,
    stored: Option<u64>,
    now: u64,
    command: Command<T, L>,
) -> (i64, Option<Key<T, L>>, Option<u64>) {
    let counter = match command {
        Command::Acquire { .. } => stored.map_or(now, |c| c.max(now)),
        _ => stored.unwrap_or(now),
    };
    let (reply, after) = answer(Held { key, counter }, command);
    let writes = match command {
        Command::Acquire { .. } => reply >= 0,
        Command::Commit { .. } => reply == 1,
        _ => false,
    };
    (
        reply,
        after.key,
        if writes { Some(after.counter) } else { stored },
    )
}

/// A fenced semaphore's fencing state on a node: its counter and its round
/// key, the slots committed in the counter's round (bit `s` for slot `s`;
/// here slots below 64, the script's bitmap has room for every slot).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub(crate) struct Round {
    /// The fencing counter (0 when unset).
    pub(crate) counter: u64,
    /// The round key's bits; `None` when the key is absent.
    pub(crate) committed: Option<u64>,
}

/// What a node answers to `fence_commit.lua` given a round key (a permit
/// holder's commit) of `fence = r × per_round + s`, and its fencing state
/// afterwards; `holds`: whether the holder's first slot carries its token.
/// The replies are `reply::Kind::Commit`'s. Yes (1) when the counter's round is
/// below `r` (the counter set to `fence`, the round key to just `s`), or is
/// `r` with the round key present and `s` not in it (`s` added, the
/// counter raised to `fence` if below); no (−1) otherwise, with nothing
/// changed — so two commits of one `fence` never both count on a node.
pub(crate) fn commit_permit(holds: bool, at: Round, fence: u64, per_round: u64) -> (i64, Round) {
    let (round, slot) = (fence / per_round, fence % per_round);
    let bit = u32::try_from(slot)
        .ok()
        .and_then(|s| 1u64.checked_shl(s))
        .unwrap_or(0);
    let current = at.counter / per_round;
    if !holds {
        (0, at)
    } else if current < round {
        let after = Round {
            counter: fence,
            committed: Some(bit),
        };
        (1, after)
    } else if current == round && at.committed.is_some_and(|c| c & bit == 0) {
        let after = Round {
            counter: at.counter.max(fence),
            committed: at.committed.map(|c| c | bit),
        };
        (1, after)
    } else {
        (-1, at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type H = Held<u8, u64>;

    const FREE: H = Held {
        key: None,
        counter: 4,
    };
    const MINE: H = Held {
        key: Some(Key { token: 1, life: 10 }),
        counter: 4,
    };
    const THEIRS: H = Held {
        key: Some(Key { token: 2, life: 10 }),
        counter: 4,
    };

    #[test]
    fn acquire_takes_a_free_key_and_reads_the_counter() {
        let (reply, after) = answer(FREE, Command::Acquire { token: 1, life: 7 });
        assert_eq!(reply, 4);
        assert_eq!(after.key, Some(Key { token: 1, life: 7 }));
        for held in [MINE, THEIRS] {
            assert_eq!(
                answer(held, Command::Acquire { token: 1, life: 7 }),
                (-1, held)
            );
        }
    }

    #[test]
    fn a_commit_counts_only_where_held_and_raised_from_below() {
        let commit = |fence| Command::Commit { token: 1, fence };
        assert_eq!(answer(MINE, commit(5)), (1, Held { counter: 5, ..MINE }));
        assert_eq!(answer(MINE, commit(4)), (-1, MINE), "at the fence");
        assert_eq!(answer(MINE, commit(3)), (-1, MINE), "past it");
        assert_eq!(answer(THEIRS, commit(5)), (0, THEIRS));
        assert_eq!(answer(FREE, commit(5)), (0, FREE));
    }

    #[test]
    fn a_permit_commit_counts_once_per_slot_and_round() {
        let commit = |at, fence| commit_permit(true, at, fence, 8);
        let at = |counter, committed| Round { counter, committed };
        // Round 2 of 8 slots: fences 16..24.
        assert_eq!(commit(at(9, Some(1)), 19), (1, at(19, Some(1 << 3))));
        assert_eq!(commit(at(0, None), 19), (1, at(19, Some(1 << 3))));
        assert_eq!(
            commit(at(19, Some(1 << 3)), 17),
            (1, at(19, Some(0b1010))),
            "another slot of the round, below the counter"
        );
        assert_eq!(commit(at(17, Some(1 << 1)), 19), (1, at(19, Some(0b1010))));
        let same = at(19, Some(0b1010));
        assert_eq!(commit(same, 19), (-1, same), "slot 3 already committed");
        assert_eq!(commit(same, 17), (-1, same));
        let old = at(16, None);
        assert_eq!(commit(old, 19), (-1, old), "no round key: an older counter");
        let later = at(24, Some(1));
        assert_eq!(commit(later, 19), (-1, later), "the round passed");
        assert_eq!(commit_permit(false, same, 20, 8), (0, same));
    }

    #[test]
    fn a_missing_counter_reads_as_the_time_and_is_kept_by_a_grant() {
        let (free, mine) = (FREE.key, MINE.key);
        let acquire = Command::Acquire { token: 1, life: 7 };
        let set = Some(Key { token: 1, life: 7 });
        assert_eq!(answer_at(free, None, 90, acquire), (90, set, Some(90)));
        assert_eq!(answer_at(mine, None, 90, acquire), (-1, mine, None));
        assert_eq!(answer_at(free, Some(94), 90, acquire), (94, set, Some(94)));
        let commit = |fence| Command::Commit { token: 1, fence };
        assert_eq!(answer_at(mine, None, 90, commit(5)), (-1, mine, None));
        assert_eq!(answer_at(mine, None, 90, commit(91)), (1, mine, Some(91)));
        assert_eq!(answer_at(free, None, 90, commit(91)), (0, free, None));
        let release = Command::Release { token: 1 };
        assert_eq!(answer_at(mine, None, 90, release), (1, None, None));
    }

    #[test]
    fn an_acquire_lifts_a_counter_below_the_time_and_a_commit_does_not() {
        let (free, mine) = (FREE.key, MINE.key);
        let acquire = Command::Acquire { token: 1, life: 7 };
        let set = Some(Key { token: 1, life: 7 });
        assert_eq!(answer_at(free, Some(4), 90, acquire), (90, set, Some(90)));
        assert_eq!(answer_at(mine, Some(4), 90, acquire), (-1, mine, Some(4)));
        let commit = |fence| Command::Commit { token: 1, fence };
        assert_eq!(answer_at(mine, Some(4), 90, commit(5)), (1, mine, Some(5)));
        assert_eq!(answer_at(mine, Some(4), 90, commit(4)), (-1, mine, Some(4)));
    }

    #[test]
    fn release_deletes_only_its_own_key() {
        let release = Command::Release { token: 1 };
        assert_eq!(answer(MINE, release), (1, Held { key: None, ..MINE }));
        assert_eq!(answer(THEIRS, release), (0, THEIRS));
        assert_eq!(answer(FREE, release), (0, FREE));
    }

    #[test]
    fn extend_never_shortens_and_never_recreates() {
        for (life, lasts) in [(3, 10), (30, 30)] {
            let extend = Command::Extend { token: 1, life };
            let (reply, after) = answer(MINE, extend);
            let key = Some(Key {
                token: 1,
                life: lasts,
            });
            assert_eq!((reply, after.key), (1, key));
            assert_eq!(answer(THEIRS, extend), (0, THEIRS));
            assert_eq!(answer(FREE, extend), (-1, FREE), "missing, told apart");
        }
    }

    #[test]
    fn repair_sets_only_a_missing_key_and_never_the_counter() {
        let repair = Command::Repair { token: 1, life: 7 };
        let (reply, after) = answer(FREE, repair);
        assert_eq!(reply, 1);
        assert_eq!(
            after,
            Held {
                key: Some(Key { token: 1, life: 7 }),
                counter: 4
            }
        );
        assert_eq!(answer(THEIRS, repair), (0, THEIRS), "never displaces");
        assert_eq!(answer(MINE, repair), (0, MINE), "never shortens");
    }

    #[test]
    fn holds_reads_without_changing() {
        let holds = Command::Holds { token: 1 };
        assert_eq!(answer(MINE, holds), (1, MINE));
        assert_eq!(answer(THEIRS, holds), (0, THEIRS));
        assert_eq!(answer(FREE, holds), (0, FREE));
    }
}
