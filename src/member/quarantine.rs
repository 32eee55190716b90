//! Restart quarantine, the specification's "delayed restart" done by the
//! client: a node that (re)started less than a configured time ago does not
//! vote for new locks, because it may have forgotten keys that a lock
//! still valid elsewhere relies on. Pure state, no I/O.
//!
//! The node's standing is known only from an uptime reading taken on the
//! connection in use. Every connection loss or reconnect (however it is
//! noticed: a command's error, a background command's error, or the redis
//! crate's own reconnect) starts a new *epoch*; a reading counts only if
//! no epoch began between its request and its use, so a reply from before a
//! restart can never vouch for the node after it.
//!
//! A reading also names the server (`run_id`). A reading that names
//! another server than the last one counts its age from now, whatever
//! uptime it reports: a failed-over replica or a server swapped behind a
//! proxy may be old and still lack the keys. A vote is counted only when
//! the server that cast it is the one whose reading let it vote
//! ([`Quarantine::voter`], [`Quarantine::confirm`]), so a restart no
//! connection loss revealed (a proxy that keeps the client's connection
//! open) is caught by the vote itself.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// One node's restart state.
#[derive(Debug, Default)]
pub(crate) struct Quarantine {
    /// Connections lost or replaced so far.
    epoch: AtomicU64,
    last: Mutex<Reading>,
}

/// What the last counted uptime reading said.
#[derive(Debug, Default)]
struct Reading {
    /// The epoch it was taken in; `None` before the first one.
    epoch: Option<u64>,
    /// Until when the node does not vote (`None`: for ever, the
    /// quarantine too long to express as an instant), and the uptime it
    /// reported.
    out: Option<(Option<Instant>, Duration, Instant)>,
    /// The server it was read from.
    run_id: Option<Arc<str>>,
    /// When that server was first read, if it replaced another: its age
    /// counts from then, in every later reading too.
    replaced_at: Option<Instant>,
}

/// How a server that replaced another (a promoted replica, another server
/// behind the same address) is aged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Aged {
    /// From this client's first reading of it, whatever its uptime; at the
    /// first reading, so is a server `promoted` since it started.
    FromFirstReading {
        /// The server was promoted since it started.
        promoted: bool,
    },
    /// By its uptime: with durable votes on every replica, a promoted
    /// replica has every lock the old master counted.
    ByUptime,
}

/// Whether a node may vote now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Standing {
    /// It may vote.
    Votes,
    /// Its uptime must be read first.
    Unknown,
    /// It restarted (or replaced another server) `uptime` ago, as of the
    /// time asked, and stays out.
    Quarantined { uptime: Duration },
}

impl Quarantine {
    fn reading(&self) -> std::sync::MutexGuard<'_, Reading> {
        self.last.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The node's standing at `now`.
    pub(crate) fn standing(&self, now: Instant) -> Standing {
        self.standing_of(&self.reading(), now)
    }

    fn standing_of(&self, last: &Reading, now: Instant) -> Standing {
        if let Some((until, uptime, read_at)) = last.out {
            if until.is_none_or(|t| now < t) {
                // Its age now, not at the reading: a message read later
                // says how long it has really been.
                let uptime = uptime.saturating_add(now.saturating_duration_since(read_at));
                return Standing::Quarantined { uptime };
            }
        }
        if last.epoch == Some(self.epoch.load(Ordering::SeqCst)) {
            Standing::Votes
        } else {
            Standing::Unknown
        }
    }

    /// The connection was lost or replaced: the node may have restarted.
    pub(crate) fn connection_lost(&self) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
    }

    /// The current epoch; take it before sending the uptime request and
    /// pass it to [`observed`](Self::observed).
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// The server whose reading lets the node vote at `now`; `None` when
    /// it may not vote. Take it before sending a vote, and
    /// [`confirm`](Self::confirm) the server that answered.
    pub(crate) fn voter(&self, now: Instant) -> Option<Arc<str>> {
        let last = self.reading();
        match self.standing_of(&last, now) {
            Standing::Votes => last.run_id.clone(),
            _ => None,
        }
    }

    /// Whether the vote of server `seen` (its `run_id`, read behind the
    /// vote) counts for a node that was allowed to vote as server `voter`
    /// (`run_id:replid`, its reading). When they differ, the node
    /// restarted or was replaced without a connection loss: its standing
    /// becomes unknown (the next reading names the new server, whose age
    /// counts from then). A replication id that changed under the same
    /// `run_id` (a master demoted and promoted again) comes with a
    /// connection event instead: a `READONLY` reply or a `MOVED` away
    /// ends the epoch, and the next reading sees it.
    pub(crate) fn confirm(&self, voter: &str, seen: &str) -> bool {
        if voter.split(':').next() == Some(seen) {
            return true;
        }
        self.connection_lost();
        false
    }

    /// Records an uptime requested in `epoch` and read at `now` from server
    /// `run_id`; the node stays out until it has been up for `required`
    /// (with [`Aged::FromFirstReading`], counted from `now` when `run_id`
    /// is not the server of the last reading, or — at the first reading —
    /// when the server was promoted since it started: a replica promoted
    /// before this client ever read the member may lack keys, whatever its
    /// uptime). A reading from an epoch that has ended is not counted:
    /// `Unknown`.
    pub(crate) fn observed(
        &self,
        epoch: u64,
        uptime: Duration,
        run_id: Arc<str>,
        aged: Aged,
        required: Duration,
        now: Instant,
    ) -> Standing {
        let mut last = self.reading();
        if epoch != self.epoch.load(Ordering::SeqCst) {
            return Standing::Unknown;
        }
        let replaced = match (aged, &last.run_id) {
            (Aged::ByUptime, _) => false,
            (Aged::FromFirstReading { .. }, Some(known)) => *known != run_id,
            (Aged::FromFirstReading { promoted }, None) => promoted,
        };
        if replaced {
            last.replaced_at = Some(now);
        }
        // A replacement's age is the time since it was first seen, however
        // long it has been up (and a restart since then counts too).
        let uptime = match last.replaced_at {
            Some(at) => uptime.min(now.saturating_duration_since(at)),
            None => uptime,
        };
        last.epoch = Some(epoch);
        last.run_id = Some(run_id);
        match required.checked_sub(uptime) {
            Some(left) if !left.is_zero() => {
                last.out = Some((now.checked_add(left), uptime, now));
                Standing::Quarantined { uptime }
            }
            _ => {
                last.out = None;
                Standing::Votes
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    /// A reading of `id` (up `uptime`, `promoted` or not) at `now` in the
    /// current epoch, aged from the first reading, quarantine 30 s.
    fn reading_of(
        q: &Quarantine,
        uptime: Duration,
        id: &str,
        promoted: bool,
        now: Instant,
    ) -> Standing {
        q.observed(
            q.epoch(),
            uptime,
            id.into(),
            Aged::FromFirstReading { promoted },
            30 * S,
            now,
        )
    }

    fn observe(q: &Quarantine, uptime: Duration, required: Duration, now: Instant) -> Standing {
        q.observed(
            q.epoch(),
            uptime,
            "a".into(),
            Aged::FromFirstReading { promoted: false },
            required,
            now,
        )
    }

    #[test]
    fn a_node_is_unknown_until_its_uptime_is_read() {
        let q = Quarantine::default();
        let now = Instant::now();
        assert_eq!(q.standing(now), Standing::Unknown);
        assert_eq!(observe(&q, 100 * S, 30 * S, now), Standing::Votes);
        assert_eq!(q.standing(now), Standing::Votes);
    }

    #[test]
    fn a_fresh_node_stays_out_for_the_rest_of_the_quarantine() {
        let q = Quarantine::default();
        let now = Instant::now();
        let s = observe(&q, 10 * S, 30 * S, now);
        assert_eq!(s, Standing::Quarantined { uptime: 10 * S });
        // Its age as of the time asked.
        assert_eq!(
            q.standing(now + 19 * S),
            Standing::Quarantined { uptime: 29 * S }
        );
        assert_eq!(
            q.standing(now + 20 * S),
            Standing::Votes,
            "no re-read needed"
        );
    }

    #[test]
    fn a_connection_loss_asks_for_a_new_reading() {
        let q = Quarantine::default();
        let now = Instant::now();
        observe(&q, 100 * S, 30 * S, now);
        q.connection_lost();
        assert_eq!(q.standing(now), Standing::Unknown);
        assert_eq!(
            observe(&q, S, 30 * S, now),
            Standing::Quarantined { uptime: S }
        );
    }

    #[test]
    fn a_reading_requested_before_a_connection_loss_does_not_count() {
        let q = Quarantine::default();
        let now = Instant::now();
        observe(&q, 100 * S, 30 * S, now);
        q.connection_lost();
        // INFO sent on the old connection, answered before it died, used
        // after the loss was noticed.
        let before = q.epoch();
        q.connection_lost();
        assert_eq!(
            q.observed(
                before,
                100 * S,
                "a".into(),
                Aged::FromFirstReading { promoted: false },
                30 * S,
                now
            ),
            Standing::Unknown
        );
        assert_eq!(q.standing(now), Standing::Unknown, "still unknown");
        // A loss between the reading and its use, too.
        let epoch = q.epoch();
        assert_eq!(
            q.observed(
                epoch,
                100 * S,
                "a".into(),
                Aged::FromFirstReading { promoted: false },
                30 * S,
                now
            ),
            Standing::Votes
        );
        q.connection_lost();
        assert_eq!(q.standing(now), Standing::Unknown);
    }

    #[test]
    fn another_server_counts_its_age_from_when_it_is_seen() {
        let q = Quarantine::default();
        let now = Instant::now();
        assert_eq!(observe(&q, 100 * S, 30 * S, now), Standing::Votes);
        q.connection_lost();
        // A replica promoted long ago, or another server behind a proxy.
        let s = reading_of(&q, 1000 * S, "b", false, now);
        assert_eq!(
            s,
            Standing::Quarantined {
                uptime: Duration::ZERO
            }
        );
        assert_eq!(
            q.standing(now + 29 * S),
            Standing::Quarantined { uptime: 29 * S }
        );
        assert_eq!(q.standing(now + 30 * S), Standing::Votes);
    }

    #[test]
    fn a_replacement_read_again_keeps_its_age_from_when_it_was_first_seen() {
        let q = Quarantine::default();
        let now = Instant::now();
        assert_eq!(observe(&q, 100 * S, 30 * S, now), Standing::Votes);
        q.connection_lost();
        let first = reading_of(&q, 1000 * S, "b", false, now);
        assert_eq!(
            first,
            Standing::Quarantined {
                uptime: Duration::ZERO
            }
        );
        // Read again (another caller, a reconnect): still its age since
        // first seen, not its uptime.
        q.connection_lost();
        let again = reading_of(&q, 1010 * S, "b", false, now + 10 * S);
        assert_eq!(again, Standing::Quarantined { uptime: 10 * S });
        q.connection_lost();
        let done = reading_of(&q, 1030 * S, "b", false, now + 30 * S);
        assert_eq!(done, Standing::Votes);
        // Restarted since: its own uptime is the shorter age.
        q.connection_lost();
        let restarted = reading_of(&q, 2 * S, "b", false, now + 40 * S);
        assert_eq!(restarted, Standing::Quarantined { uptime: 2 * S });
    }

    #[test]
    fn a_server_promoted_before_the_first_reading_counts_its_age_from_it() {
        let now = Instant::now();
        let q = Quarantine::default();
        let s = reading_of(&q, 1000 * S, "b", true, now);
        assert_eq!(
            s,
            Standing::Quarantined {
                uptime: Duration::ZERO
            }
        );
        assert_eq!(q.standing(now + 30 * S), Standing::Votes);
        // Read again later: known, its age from the first reading.
        q.connection_lost();
        let again = reading_of(&q, 1040 * S, "b", true, now + 40 * S);
        assert_eq!(again, Standing::Votes);
        // Never promoted: its uptime.
        let plain = Quarantine::default();
        let s = reading_of(&plain, 1000 * S, "c", false, now);
        assert_eq!(s, Standing::Votes);
    }

    #[test]
    fn a_vote_counts_only_from_the_server_that_was_read() {
        let q = Quarantine::default();
        let now = Instant::now();
        assert_eq!(q.voter(now), None, "unknown");
        observe(&q, 100 * S, 30 * S, now);
        let voter = q.voter(now).unwrap();
        assert_eq!(&*voter, "a");
        assert!(q.confirm(&voter, "a"));
        // A reading names `run_id:replid`; the probe, the `run_id`.
        let read = Quarantine::default();
        reading_of(&read, 100 * S, "a:r1", false, now);
        assert!(read.confirm(&read.voter(now).unwrap(), "a"));
        assert!(!read.confirm(&read.voter(now).unwrap(), "r1"));
        assert_eq!(q.standing(now), Standing::Votes);
        // The server behind the same connection changed.
        assert!(!q.confirm(&voter, "b"));
        assert_eq!(q.standing(now), Standing::Unknown);
        assert_eq!(q.voter(now), None);
        assert_eq!(
            reading_of(&q, 100 * S, "b", false, now),
            Standing::Quarantined {
                uptime: Duration::ZERO
            }
        );
        assert_eq!(q.voter(now), None, "quarantined");
    }

    #[test]
    fn with_durable_votes_a_replacement_is_as_old_as_its_uptime() {
        let q = Quarantine::default();
        let now = Instant::now();
        let first = q.observed(q.epoch(), 1000 * S, "a".into(), Aged::ByUptime, 30 * S, now);
        assert_eq!(
            first,
            Standing::Votes,
            "promoted long ago, every grant kept"
        );
        q.connection_lost();
        let other = q.observed(q.epoch(), 1000 * S, "b".into(), Aged::ByUptime, 30 * S, now);
        assert_eq!(other, Standing::Votes, "another server, up long");
        q.connection_lost();
        let restarted = q.observed(q.epoch(), 2 * S, "c".into(), Aged::ByUptime, 30 * S, now);
        assert_eq!(restarted, Standing::Quarantined { uptime: 2 * S });
    }

    #[test]
    fn a_quarantine_longer_than_any_instant_never_ends() {
        let q = Quarantine::default();
        let now = Instant::now();
        assert_eq!(
            observe(&q, S, Duration::MAX, now),
            Standing::Quarantined { uptime: S }
        );
        assert_eq!(
            q.standing(now + 1_000_000 * S),
            Standing::Quarantined {
                uptime: 1_000_001 * S
            }
        );
    }

    #[test]
    fn exactly_the_required_uptime_votes() {
        let q = Quarantine::default();
        assert_eq!(observe(&q, 30 * S, 30 * S, Instant::now()), Standing::Votes);
    }
}
