//! Pure fencing-token rules: the token a client proposes from the counters
//! it read (a lock's, and a permit holder's: a round and its slot), the
//! range counters and tokens stay in. The node side of the commit rule
//! lives in `lua/fence_commit.lua` (what its reply counts for:
//! `reply::Kind::Commit`); `scripts::answer` (a lock's) and
//! `scripts::commit_permit` (a permit's) state it once more for the model
//! check (`model/src/scripts.rs`), which includes this file. The proof that
//! the rule makes tokens unique is in `docs/fencing.md`.
//!
//! No I/O and nothing from the rest of the crate: the model check includes
//! this file by path.

/// The largest fencing token: `2^53 − 1`.
///
/// The scripts on the nodes run in Lua 5.1, whose numbers are doubles,
/// exact for integers below `2^53` only. Counters and tokens are kept below
/// that bound on both sides: a node refuses a counter or token outside
/// `[0, 2^53)` with a `FENCERANGE` error reply, and the client refuses to
/// propose a token above this one. A counter starts from the server's
/// time in microseconds since 1970 and grows more slowly than time: the
/// bound is reached around the year 2255.
///
/// # Examples
///
/// ```
/// assert_eq!(quorumlock::MAX_FENCE, (1u64 << 53) - 1);
/// ```
pub const MAX_FENCE: u64 = (1 << 53) - 1;

/// The tokens of one round of a fenced semaphore: a permit holder's token
/// is `round × ROUND + slot`, its slot below [`ROUND`] (the most permits a
/// semaphore has), so that holders of different slots never propose the
/// same token (`docs/fencing.md`, "Permits").
pub(crate) const ROUND: u64 = 1024;

/// The token to propose after a majority granted, each node having read
/// its counter atomically with its `SET NX`: `round × per_round + slot`,
/// its round one above the highest counter's (`counter / per_round`). A
/// lock proposes with `slot` 0 and `per_round` 1: the highest counter plus
/// one; a permit holder with its first slot and [`ROUND`]. `Err(highest)`
/// when the token would pass [`MAX_FENCE`] (or a counter is already out of
/// range), so that no token is proposed.
pub(crate) fn propose(
    counters: impl IntoIterator<Item = u64>,
    slot: u64,
    per_round: u64,
) -> Result<u64, u64> {
    let highest = counters.into_iter().max().unwrap_or(0);
    let round = highest
        .checked_div(per_round)
        .and_then(|r| r.checked_add(1));
    round
        .and_then(|r| r.checked_mul(per_round)?.checked_add(slot))
        .filter(|&token| token <= MAX_FENCE)
        .ok_or(highest)
}

/// How far a token may run ahead of the client's clock, in microseconds
/// (one minute), before the client warns.
///
/// A counter that a node lost, or got back older, is read as that node's
/// time in microseconds (`fence_check.lua`), which is above every token
/// granted before only while counters grow slower than time: one per
/// grant for a lock or an election, about [`ROUND`] per grant for a fenced
/// semaphore (`docs/fencing.md`, "A counter that is lost"). A token ahead
/// of the clock by more than this says that a counter outran time (a semaphore
/// granting more than about 976 fenced permits a second on average), that
/// a node's clock is ahead, or that a counter was set by hand.
pub(crate) const AHEAD: u64 = 60_000_000;

/// Whether `token` is ahead of `now_micros` (the client's time since the
/// Unix epoch, in microseconds) by more than [`AHEAD`].
pub(crate) const fn ahead_of_time(token: u64, now_micros: u64) -> bool {
    token > now_micros.saturating_add(AHEAD)
}

/// Whether a counter read from a node is in the range the scripts keep
/// (`0..=MAX_FENCE`).
pub(crate) const fn in_range(counter: u64) -> bool {
    counter <= MAX_FENCE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_ahead_of_time_only_past_the_margin() {
        let now = 1_800_000_000_000_000;
        assert!(!ahead_of_time(now, now));
        assert!(!ahead_of_time(now + AHEAD, now));
        assert!(ahead_of_time(now + AHEAD + 1, now));
        // A counter from before the tokens started from the time.
        assert!(!ahead_of_time(5, now));
    }

    #[test]
    fn a_lock_proposes_one_above_the_highest_counter() {
        let lock = |counters: &[u64]| propose(counters.iter().copied(), 0, 1);
        assert_eq!(lock(&[]), Ok(1));
        assert_eq!(lock(&[0, 0]), Ok(1));
        assert_eq!(lock(&[3, 7, 5]), Ok(8));
        assert_eq!(lock(&[MAX_FENCE - 1]), Ok(MAX_FENCE));
    }

    #[test]
    fn a_permit_proposes_its_slot_in_the_round_after_the_highest() {
        let permit = |counters: &[u64], slot| propose(counters.iter().copied(), slot, ROUND);
        assert_eq!(permit(&[], 0), Ok(1024));
        assert_eq!(permit(&[0, 5], 7), Ok(1024 + 7));
        // An older counter (no rounds): the round above it.
        assert_eq!(permit(&[2048], 3), Ok(3 * 1024 + 3));
        assert_eq!(permit(&[1024 + 1023, 1024], 0), Ok(2048));
        // The last round that fits.
        let last = MAX_FENCE / ROUND;
        let below = (last - 1) * ROUND;
        assert_eq!(permit(&[below], 0), Ok(last * ROUND));
        assert_eq!(permit(&[below], MAX_FENCE % ROUND), Ok(MAX_FENCE));
        assert_eq!(permit(&[last * ROUND], 0), Err(last * ROUND));
    }

    #[test]
    fn refuses_at_the_bound_without_overflow() {
        let lock = |counters: &[u64]| propose(counters.iter().copied(), 0, 1);
        assert_eq!(lock(&[MAX_FENCE, 2]), Err(MAX_FENCE));
        assert_eq!(lock(&[MAX_FENCE + 1]), Err(MAX_FENCE + 1));
        assert_eq!(lock(&[u64::MAX]), Err(u64::MAX));
        assert_eq!(propose([u64::MAX], 1023, ROUND), Err(u64::MAX));
        assert_eq!(propose([0], 0, 0), Err(0));
        assert!(in_range(0) && in_range(MAX_FENCE) && !in_range(MAX_FENCE + 1));
        assert!(!ahead_of_time(MAX_FENCE, u64::MAX), "no overflow");
        // The bound is where doubles stop being exact.
        assert_eq!(MAX_FENCE as f64 as u64, MAX_FENCE);
        assert_ne!((MAX_FENCE + 2) as f64 as u64, MAX_FENCE + 2);
    }
}
