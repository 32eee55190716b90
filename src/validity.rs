//! Time, written once: the drift allowance, the validity one grant or
//! extension buys (`ttl − drift`), the deadline it gives (from the clock
//! read before the first command was sent), the time left until a deadline
//! — so `ttl − elapsed − drift` is one clock read against one deadline —
//! and the TTL in the whole milliseconds a server is told. A [`Ttl`] is a
//! TTL with its drift, computed once where the TTL is checked and carried
//! through the grant to the lock; a lock's [`Term`] is its deadline and
//! that TTL, moved after an extension by one rule, [`Term::extended`].
//! Pure arithmetic on [`Duration`] and [`Instant`], used by acquisition,
//! extension, the lease and the settings alike: no I/O and no clock reads.

use std::time::{Duration, Instant};

use crate::error::lost::LostReason;

/// The fixed part of the drift allowance the Redlock specification adds to
/// `ttl × drift_factor` (2 ms).
pub(crate) const DRIFT_FLOOR: Duration = Duration::from_millis(2);

/// Drift allowance for a lock of `ttl`: `ttl × factor + 2 ms`.
///
/// `factor` is clamped to `[0, 1]`; a non-finite factor counts as 0.
pub(crate) fn drift(ttl: Duration, factor: f64) -> Duration {
    let factor = if factor.is_finite() {
        factor.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let scaled = Duration::try_from_secs_f64(ttl.as_secs_f64() * factor);
    scaled.unwrap_or(Duration::MAX).saturating_add(DRIFT_FLOOR)
}

/// The validity left at `now` before `deadline`: `ttl − elapsed − drift`
/// for the deadline of an operation that started `elapsed` before `now`;
/// zero once it has passed (a lock with no validity left is not held).
pub(crate) fn left(deadline: Instant, now: Instant) -> Duration {
    deadline.saturating_duration_since(now)
}

/// `ttl` in whole milliseconds, saturating at `u64::MAX`.
pub(crate) fn millis(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX)
}

/// A TTL as the nodes are told it (whole milliseconds), with its drift
/// allowance: computed once, where the TTL is checked
/// (`Config::check_ttl`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ttl {
    /// The TTL the keys are set with.
    pub(crate) duration: Duration,
    /// Its drift allowance ([`drift`]).
    pub(crate) drift: Duration,
}

impl Ttl {
    /// `ttl` truncated to whole milliseconds, the unit of `PX`/`PEXPIRE`,
    /// with the drift allowance of `factor`. Validity must be computed from
    /// what the server was told, not from the sub-millisecond remainder it
    /// never saw.
    pub(crate) fn new(ttl: Duration, factor: f64) -> Self {
        let duration = Duration::from_millis(millis(ttl));
        Self {
            duration,
            drift: drift(duration, factor),
        }
    }

    /// The validity one grant or extension with this TTL buys: `ttl − drift`,
    /// zero when the drift leaves nothing.
    pub(crate) fn budget(self) -> Duration {
        self.duration.saturating_sub(self.drift)
    }

    /// The end of the validity bought by an operation that started at
    /// `start` and set this TTL on the nodes: `start + ttl − drift`. `None`
    /// when the drift leaves nothing of the TTL, or the instant cannot be
    /// represented.
    ///
    /// `start` must be taken before the first command is sent: every node
    /// starts its TTL later, so the keys outlive this deadline.
    pub(crate) fn deadline(self, start: Instant) -> Option<Instant> {
        let budget = Some(self.budget()).filter(|b| !b.is_zero())?;
        start.checked_add(budget)
    }
}

/// Until when a lock is known to be held, and the TTL renewals use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Term {
    /// The end of the validity, on the monotonic clock.
    pub(crate) deadline: Instant,
    /// The TTL the keys were set with, and its drift.
    pub(crate) ttl: Ttl,
}

impl Term {
    /// The term once a majority confirmed, at `now`, an extension to `ttl`
    /// whose commands were sent from `start` on, on a lock whose deadline
    /// was `held_until` when it started. The one rule by which an
    /// extension moves a lock's deadline:
    ///
    /// - only a confirmed extension moves it (a failed or dropped one
    ///   leaves the term as it was), and only when confirmed before
    ///   `held_until` and before its own validity ran out;
    /// - it moves to `start + ttl − drift`, from this extension alone —
    ///   earlier than `held_until` for a shorter TTL, later for a longer
    ///   one — whatever any earlier extension did, confirmed, failed or
    ///   dropped, and in whatever order their commands reach the nodes.
    ///
    /// Sound because of what a node does with an extension (`extend.lua`):
    /// where the key still carries the token, it keeps the key until at
    /// least `arrival + ttl`, never earlier than it already would. Each
    /// node that confirmed thus keeps the key until `start + ttl` or later
    /// (the drift covers its clock), and no command that arrives there
    /// afterwards — a dropped extension's retry included — brings that
    /// back: a majority of the keys outlive the new deadline.
    ///
    /// Else why the lock is lost although a majority confirmed:
    /// [`Expired`](LostReason::Expired) when the majority was counted once
    /// `held_until` had passed, [`TooSlow`](LostReason::TooSlow) when the
    /// extension's own validity (`ttl − drift` from its start) had run out
    /// by then.
    pub(crate) fn extended(
        held_until: Instant,
        start: Instant,
        ttl: Ttl,
        now: Instant,
    ) -> Result<Term, LostReason> {
        if now >= held_until {
            return Err(LostReason::Expired);
        }
        match ttl.deadline(start) {
            Some(deadline) if now < deadline => Ok(Term { deadline, ttl }),
            _ => Err(LostReason::TooSlow),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn drift_is_one_percent_plus_two_ms() {
        assert_eq!(
            drift(Duration::from_secs(10), 0.01),
            Duration::from_millis(102)
        );
        assert_eq!(
            drift(Duration::from_secs(30), 0.01),
            Duration::from_millis(302)
        );
        assert_eq!(drift(Duration::ZERO, 0.01), DRIFT_FLOOR);
        assert_eq!(drift(Duration::from_secs(1), f64::NAN), DRIFT_FLOOR);
        assert_eq!(drift(Duration::from_secs(1), -3.0), DRIFT_FLOOR);
        assert_eq!(
            drift(Duration::from_secs(1), 7.0),
            Duration::from_millis(1002)
        );
        assert_eq!(
            drift(Duration::MAX, 1.0),
            Duration::MAX,
            "saturates, never panics"
        );
        assert!(drift(Duration::MAX, 0.5) > Duration::from_secs(u64::MAX / 4));
    }

    #[test]
    fn the_budget_is_the_ttl_less_its_drift() {
        let ttl = Duration::from_secs(10);
        let budget = |t, d| ttl_of(t, d).budget();
        assert_eq!(budget(ttl, drift(ttl, 0.01)), Duration::from_millis(9_898));
        assert_eq!(budget(2 * MS, 2 * MS), Duration::ZERO);
        assert_eq!(budget(MS, 2 * MS), Duration::ZERO, "never underflows");
    }

    #[test]
    fn validity_left_is_ttl_less_elapsed_and_drift() {
        let start = Instant::now();
        let ttl = Duration::from_secs(10);
        let d = drift(ttl, 0.01);
        let end = ttl_of(ttl, d).deadline(start).expect("representable");
        assert_eq!(
            left(end, start + 8 * MS),
            Duration::from_millis(10_000 - 8 - 102)
        );
        assert_eq!(left(end, end - MS), MS);
        assert_eq!(left(end, end), Duration::ZERO, "exactly zero is none");
        assert_eq!(left(end, end + MS), Duration::ZERO, "never underflows");
        let tight = ttl_of(5 * MS, 2 * MS)
            .deadline(start)
            .expect("representable");
        assert_eq!(left(tight, start + 2 * MS), MS);
        assert_eq!(left(tight, start + 3 * MS), Duration::ZERO);
    }

    #[test]
    fn deadline_is_start_plus_ttl_minus_drift() {
        let start = Instant::now();
        let ttl = Duration::from_secs(10);
        let d = drift(ttl, 0.01);
        assert_eq!(
            ttl_of(ttl, d).deadline(start),
            Some(start + Duration::from_millis(9_898))
        );
        assert_eq!(ttl_of(2 * MS, 2 * MS).deadline(start), None, "nothing left");
        assert_eq!(ttl_of(MS, 2 * MS).deadline(start), None, "never underflows");
        assert_eq!(
            ttl_of(Duration::MAX, MS).deadline(start),
            None,
            "never overflows"
        );
    }

    #[test]
    fn ttl_is_truncated_to_what_the_server_sees() {
        let whole_millis = |t| Ttl::new(t, 0.0).duration;
        assert_eq!(whole_millis(Duration::from_micros(1_999)), MS);
        assert_eq!(whole_millis(Duration::from_micros(999)), Duration::ZERO);
        assert_eq!(millis(Duration::MAX), u64::MAX);
    }

    /// A TTL of `ttl` with a drift of `drift`.
    fn ttl_of(ttl: Duration, drift: Duration) -> Ttl {
        Ttl {
            duration: ttl,
            drift,
        }
    }

    #[test]
    fn a_ttl_is_whole_milliseconds_with_its_drift() {
        let t = Ttl::new(Duration::from_micros(10_000_999), 0.01);
        assert_eq!(
            t,
            ttl_of(Duration::from_secs(10), Duration::from_millis(102))
        );
        assert_eq!(t.budget(), Duration::from_millis(9_898));
        let tiny = ttl_of(Duration::from_secs(10), Duration::from_secs(11));
        assert_eq!(tiny.budget(), Duration::ZERO);
    }

    #[test]
    fn a_confirmed_extension_moves_the_deadline_to_its_own_term_earlier_or_later() {
        let start = Instant::now();
        let held_until = start + Duration::from_secs(10);
        let now = start + 5 * MS;
        let short = ttl_of(300 * MS, 5 * MS);
        assert_eq!(
            Term::extended(held_until, start, short, now),
            Ok(Term {
                deadline: start + 295 * MS,
                ttl: short,
            }),
            "shorter than before"
        );
        let long = ttl_of(Duration::from_secs(60), 602 * MS);
        assert_eq!(
            Term::extended(held_until, start, long, now).map(|t| t.deadline),
            Ok(start + Duration::from_millis(59_398)),
            "longer than before"
        );
    }

    #[test]
    fn a_majority_after_the_deadline_or_the_extension_s_own_validity_is_late() {
        let start = Instant::now();
        let held_until = start + Duration::from_secs(1);
        let long = ttl_of(Duration::from_secs(60), 602 * MS);
        assert_eq!(
            Term::extended(held_until, start, long, held_until),
            Err(LostReason::Expired)
        );
        assert_eq!(
            Term::extended(
                held_until,
                start,
                ttl_of(300 * MS, 5 * MS),
                start + 295 * MS
            ),
            Err(LostReason::TooSlow)
        );
        // A TTL the drift leaves nothing of, or too far to represent.
        assert_eq!(
            Term::extended(held_until, start, ttl_of(2 * MS, 2 * MS), start),
            Err(LostReason::TooSlow)
        );
        assert_eq!(
            Term::extended(held_until, start, ttl_of(Duration::MAX, MS), start),
            Err(LostReason::TooSlow)
        );
    }
}
