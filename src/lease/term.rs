//! A lease's term: until when the lock is known to be held, and the TTL
//! (with its drift allowance) it was granted or last extended with. The
//! drift is computed once, where the TTL is set — at the grant and at each
//! extension — and read from here by everything that needs the validity
//! budget. The rule that moves the term after an extension,
//! [`Term::extended`], lives here too. Plain values: no I/O and no clock
//! reads.

use std::time::{Duration, Instant};

use crate::validity;

/// Until when the lock is known to be held, and the TTL renewals use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Term {
    /// The end of the validity, on the monotonic clock.
    pub(crate) deadline: Instant,
    /// The TTL the keys were set with.
    pub(crate) ttl: Duration,
    /// The drift allowance of `ttl` (`validity::drift`).
    pub(crate) drift: Duration,
}

/// Why an extension that a majority confirmed still leaves the lock lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Late {
    /// The majority was counted once the deadline that held while the
    /// extension was in flight had passed.
    Expired,
    /// The extension's own validity (`ttl − drift` from its start) had run
    /// out by then.
    TooSlow,
}

impl Term {
    /// The validity one grant or extension with this TTL buys: `ttl − drift`.
    pub(crate) fn budget(&self) -> Duration {
        validity::budget(self.ttl, self.drift)
    }

    /// The term once a majority confirmed, at `now`, an extension to `ttl`
    /// (with its `drift`) whose commands were sent from `start` on, on a
    /// lock whose deadline was `held_until` when it started. The one rule
    /// by which an extension moves a lock's deadline:
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
    pub(crate) fn extended(
        held_until: Instant,
        start: Instant,
        ttl: Duration,
        drift: Duration,
        now: Instant,
    ) -> Result<Term, Late> {
        if now >= held_until {
            return Err(Late::Expired);
        }
        match validity::deadline(start, ttl, drift) {
            Some(deadline) if now < deadline => Ok(Term {
                deadline,
                ttl,
                drift,
            }),
            _ => Err(Late::TooSlow),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn the_budget_is_the_ttl_less_its_drift() {
        let term = Term {
            deadline: Instant::now(),
            ttl: Duration::from_secs(10),
            drift: Duration::from_millis(102),
        };
        assert_eq!(term.budget(), Duration::from_millis(9898));
        let tiny = Term {
            drift: Duration::from_secs(11),
            ..term
        };
        assert_eq!(tiny.budget(), Duration::ZERO);
    }

    #[test]
    fn a_confirmed_extension_moves_the_deadline_to_its_own_term_earlier_or_later() {
        let start = Instant::now();
        let held_until = start + Duration::from_secs(10);
        let now = start + 5 * MS;
        let short = Term::extended(held_until, start, 300 * MS, 5 * MS, now);
        assert_eq!(
            short,
            Ok(Term {
                deadline: start + 295 * MS,
                ttl: 300 * MS,
                drift: 5 * MS
            }),
            "shorter than before"
        );
        let long = Term::extended(held_until, start, Duration::from_secs(60), 602 * MS, now);
        assert_eq!(
            long.map(|t| t.deadline),
            Ok(start + Duration::from_millis(59_398)),
            "longer than before"
        );
    }

    #[test]
    fn a_majority_after_the_deadline_or_the_extension_s_own_validity_is_late() {
        let start = Instant::now();
        let held_until = start + Duration::from_secs(1);
        let ttl = Duration::from_secs(60);
        assert_eq!(
            Term::extended(held_until, start, ttl, 602 * MS, held_until),
            Err(Late::Expired)
        );
        assert_eq!(
            Term::extended(held_until, start, 300 * MS, 5 * MS, start + 295 * MS),
            Err(Late::TooSlow)
        );
        // A TTL the drift leaves nothing of, or too far to represent.
        assert_eq!(
            Term::extended(held_until, start, 2 * MS, 2 * MS, start),
            Err(Late::TooSlow)
        );
        assert_eq!(
            Term::extended(held_until, start, Duration::MAX, MS, start),
            Err(Late::TooSlow)
        );
    }
}
