//! A lease's term: until when the lock is known to be held, and the TTL
//! (with its drift allowance) it was granted or last extended with. The
//! drift is computed once, where the TTL is set — at the grant and at each
//! extension — and read from here by everything that needs the validity
//! budget. A plain value: no I/O and no clock reads.

use std::time::{Duration, Instant};

/// Until when the lock is known to be held, and the TTL renewals use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Term {
    /// The end of the validity, on the monotonic clock.
    pub(crate) deadline: Instant,
    /// The TTL the keys were set with.
    pub(crate) ttl: Duration,
    /// The drift allowance of `ttl` (`quorum::drift`).
    pub(crate) drift: Duration,
}

impl Term {
    /// The validity one grant or extension with this TTL buys: `ttl − drift`.
    pub(crate) fn budget(&self) -> Duration {
        self.ttl.saturating_sub(self.drift)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
