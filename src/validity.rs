//! Where validity is computed: the drift allowance, the validity one grant
//! or extension buys (`ttl − drift`), the deadline it gives (from the clock
//! read before the first command was sent), the time left until a deadline
//! — so `ttl − elapsed − drift` is one clock read against one deadline —
//! and the TTL in the whole milliseconds a server is told. Pure arithmetic
//! on [`Duration`] and [`Instant`], used by acquisition, extension, the
//! lease and the settings alike.

use std::time::{Duration, Instant};

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
    Duration::try_from_secs_f64(ttl.as_secs_f64() * factor)
        .unwrap_or(Duration::MAX)
        .saturating_add(DRIFT_FLOOR)
}

/// The validity one grant or extension of `ttl` buys: `ttl − drift`, zero
/// when the drift leaves nothing.
pub(crate) fn budget(ttl: Duration, drift: Duration) -> Duration {
    ttl.saturating_sub(drift)
}

/// The end of the validity bought by an operation that started at `start`
/// and set `ttl` on the nodes: `start + ttl − drift`. `None` when the drift
/// leaves nothing of the TTL, or the instant cannot be represented.
///
/// `start` must be taken before the first command is sent: every node
/// starts its TTL later, so the keys outlive this deadline.
pub(crate) fn deadline(start: Instant, ttl: Duration, drift: Duration) -> Option<Instant> {
    let budget = Some(budget(ttl, drift)).filter(|b| !b.is_zero())?;
    start.checked_add(budget)
}

/// The validity left at `now` before `deadline`: `ttl − elapsed − drift`
/// for the deadline of an operation that started `elapsed` before `now`;
/// zero once it has passed (a lock with no validity left is not held).
pub(crate) fn left(deadline: Instant, now: Instant) -> Duration {
    deadline.saturating_duration_since(now)
}

/// Truncates `ttl` to whole milliseconds, the unit of `PX`/`PEXPIRE`.
/// Validity must be computed from what the server was told, not from the
/// sub-millisecond remainder it never saw.
pub(crate) fn whole_millis(ttl: Duration) -> Duration {
    Duration::from_millis(millis(ttl))
}

/// `ttl` in whole milliseconds, saturating at `u64::MAX`.
pub(crate) fn millis(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX)
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
        assert_eq!(budget(ttl, drift(ttl, 0.01)), Duration::from_millis(9_898));
        assert_eq!(budget(2 * MS, 2 * MS), Duration::ZERO);
        assert_eq!(budget(MS, 2 * MS), Duration::ZERO, "never underflows");
    }

    #[test]
    fn validity_left_is_ttl_less_elapsed_and_drift() {
        let start = Instant::now();
        let ttl = Duration::from_secs(10);
        let d = drift(ttl, 0.01);
        let end = deadline(start, ttl, d).expect("representable");
        assert_eq!(
            left(end, start + 8 * MS),
            Duration::from_millis(10_000 - 8 - 102)
        );
        assert_eq!(left(end, end - MS), MS);
        assert_eq!(left(end, end), Duration::ZERO, "exactly zero is none");
        assert_eq!(left(end, end + MS), Duration::ZERO, "never underflows");
        let tight = deadline(start, 5 * MS, 2 * MS).expect("representable");
        assert_eq!(left(tight, start + 2 * MS), MS);
        assert_eq!(left(tight, start + 3 * MS), Duration::ZERO);
    }

    #[test]
    fn deadline_is_start_plus_ttl_minus_drift() {
        let start = Instant::now();
        let ttl = Duration::from_secs(10);
        let d = drift(ttl, 0.01);
        assert_eq!(
            deadline(start, ttl, d),
            Some(start + Duration::from_millis(9_898))
        );
        assert_eq!(deadline(start, 2 * MS, 2 * MS), None, "nothing left");
        assert_eq!(deadline(start, MS, 2 * MS), None, "never underflows");
        assert_eq!(deadline(start, Duration::MAX, MS), None, "never overflows");
    }

    #[test]
    fn ttl_is_truncated_to_what_the_server_sees() {
        assert_eq!(whole_millis(Duration::from_micros(1_999)), MS);
        assert_eq!(whole_millis(Duration::from_micros(999)), Duration::ZERO);
        assert_eq!(millis(Duration::MAX), u64::MAX);
    }
}
