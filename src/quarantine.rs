//! Restart quarantine, the specification's "delayed restart" done by the
//! client: a node that (re)started less than a configured time ago does not
//! vote for new locks, because it may have forgotten keys that a lock
//! still valid elsewhere relies on. Pure state, no I/O.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// One node's restart state.
#[derive(Debug)]
pub(crate) struct Quarantine {
    /// The node's uptime must be (re)read before it votes: at start, and
    /// after every connection error (the node may have restarted).
    recheck: AtomicBool,
    /// Until when the node does not vote, and the uptime it reported.
    until: Mutex<Option<(Instant, Duration)>>,
}

/// Whether a node may vote now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Standing {
    /// It may vote.
    Votes,
    /// Its uptime must be read first.
    Unknown,
    /// It restarted `uptime` ago (as of the last reading) and stays out.
    Quarantined { uptime: Duration },
}

impl Default for Quarantine {
    fn default() -> Self {
        Self {
            recheck: AtomicBool::new(true),
            until: Mutex::new(None),
        }
    }
}

impl Quarantine {
    /// The node's standing at `now`.
    pub(crate) fn standing(&self, now: Instant) -> Standing {
        if let Some((until, uptime)) = *self.until.lock().unwrap_or_else(PoisonError::into_inner) {
            if now < until {
                return Standing::Quarantined { uptime };
            }
        }
        if self.recheck.load(Ordering::Acquire) {
            Standing::Unknown
        } else {
            Standing::Votes
        }
    }

    /// The connection failed: the node may have restarted.
    pub(crate) fn connection_failed(&self) {
        self.recheck.store(true, Ordering::Release);
    }

    /// Records an uptime read at `now`; the node stays out until it has been
    /// up for `required`.
    pub(crate) fn observed(&self, uptime: Duration, required: Duration, now: Instant) -> Standing {
        self.recheck.store(false, Ordering::Release);
        let mut until = self.until.lock().unwrap_or_else(PoisonError::into_inner);
        match required.checked_sub(uptime) {
            Some(left) if !left.is_zero() => {
                *until = Some((now + left, uptime));
                Standing::Quarantined { uptime }
            }
            _ => {
                *until = None;
                Standing::Votes
            }
        }
    }
}

/// Reads `uptime_in_seconds` from the text of `INFO server`.
pub(crate) fn parse_uptime(info: &str) -> Option<Duration> {
    info.lines()
        .find_map(|line| line.strip_prefix("uptime_in_seconds:"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn a_node_is_unknown_until_its_uptime_is_read() {
        let q = Quarantine::default();
        let now = Instant::now();
        assert_eq!(q.standing(now), Standing::Unknown);
        assert_eq!(q.observed(100 * S, 30 * S, now), Standing::Votes);
        assert_eq!(q.standing(now), Standing::Votes);
    }

    #[test]
    fn a_fresh_node_stays_out_for_the_rest_of_the_quarantine() {
        let q = Quarantine::default();
        let now = Instant::now();
        let s = q.observed(10 * S, 30 * S, now);
        assert_eq!(s, Standing::Quarantined { uptime: 10 * S });
        assert_eq!(
            q.standing(now + 19 * S),
            Standing::Quarantined { uptime: 10 * S }
        );
        assert_eq!(
            q.standing(now + 20 * S),
            Standing::Votes,
            "no re-read needed"
        );
    }

    #[test]
    fn a_connection_error_asks_for_a_new_reading() {
        let q = Quarantine::default();
        let now = Instant::now();
        q.observed(100 * S, 30 * S, now);
        q.connection_failed();
        assert_eq!(q.standing(now), Standing::Unknown);
        assert_eq!(
            q.observed(S, 30 * S, now),
            Standing::Quarantined { uptime: S }
        );
    }

    #[test]
    fn exactly_the_required_uptime_votes() {
        let q = Quarantine::default();
        assert_eq!(q.observed(30 * S, 30 * S, Instant::now()), Standing::Votes);
    }

    #[test]
    fn uptime_is_parsed_from_info() {
        let info =
            "# Server\r\nredis_version:7.0.15\r\nuptime_in_seconds:42\r\nuptime_in_days:0\r\n";
        assert_eq!(parse_uptime(info), Some(42 * S));
        assert_eq!(parse_uptime("nothing"), None);
        assert_eq!(parse_uptime("uptime_in_seconds:x"), None);
    }
}
