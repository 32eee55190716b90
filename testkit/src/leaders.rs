//! The election's load: clients campaign for a few elections with short
//! TTLs; a leader holds for a random time — renewed in the background,
//! reading and writing the election's counter in the store with its epoch,
//! sometimes proclaiming a new value — then resigns, or "crashes" (drops its
//! leadership without resigning). Clients drop their campaign, proclaim and
//! resign calls at seeded random points ([`Turn`]).
//!
//! A leader records its window and epoch ([`Checker::granted`]) before it
//! acts as leader, reports its deadline before every access and acts only
//! until the deadline it reported: the lock's write-ahead records, so the
//! lock's overlap check applies unchanged — no two leaders' windows
//! overlap in one election — and its fence check sees the epochs.
//! [`epoch_inversions`] adds the election's own order: epochs strictly
//! increasing in the order leaders were granted.
//!
//! [`Checker::granted`]: super::checker::Checker::granted

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::{BoxFuture, FutureExt};
use quorumlock::{Leadership, Lock, Redlock};
use rand::rngs::StdRng;
use rand::Rng;

use super::cancel;
use super::checker::{FencedStore, Grant, Outcome, PlainStore, Store};
use super::safety::{Client, SafetyOutcome, SafetyRun};
use super::turns::{Holding, Release, Taking, Turn, Turns};
use super::workload::resource_name;

/// How clients campaign and lead.
#[derive(Debug, Clone, Copy)]
pub struct Leaders {
    /// Name for reports.
    pub name: &'static str,
    /// A leader holds for `U(0, hold)` (past its TTL: renewal keeps it).
    pub hold: Duration,
    /// One leadership in `crash_one_in` ends by a drop without resign
    /// (0: never).
    pub crash_one_in: u32,
    /// One leadership in `proclaim_one_in` proclaims a new value mid-way
    /// (0: never).
    pub proclaim_one_in: u32,
    /// Whether the store checks the epoch as a fencing token.
    pub fenced_store: bool,
}

impl Leaders {
    /// Leaders holding up to `hold`, one in four crashing, one in four
    /// proclaiming, on a store that accepts every write.
    pub fn plain(hold: Duration) -> Self {
        Self {
            name: "plain",
            hold,
            crash_one_in: 4,
            proclaim_one_in: 4,
            fenced_store: false,
        }
    }

    /// As [`Leaders::plain`], on a store that refuses an older epoch.
    pub fn fenced(hold: Duration) -> Self {
        Self {
            name: "fenced",
            fenced_store: true,
            ..Self::plain(hold)
        }
    }

    /// The one summary line of an election run.
    pub fn line(&self, run: &SafetyRun, outcome: &SafetyOutcome) -> String {
        let f = &outcome.figures;
        format!(
            "election-safety: {} strategy={} hold_ms={} changes={} overlaps={} \
             overlaps_by_clock_jump={} duplicate_epochs={} epoch_inversions={} \
             lost_updates={} stale_writes_accepted={} writes={} refused_writes={} \
             expired_before_write={} cancelled=campaign:{}/resign:{} contended={} \
             unavailable={} lost_before_proclaimed={} other_errors={} lead_p50={:.1}ms lead_p99={:.1}ms",
            run.head(outcome),
            self.name,
            self.hold.as_millis(),
            f.grants,
            f.overlaps,
            outcome.overlaps_by_jump,
            f.duplicate_fences,
            epoch_inversions(&outcome.checker.grants()),
            f.lost_updates,
            f.stale_writes_accepted,
            f.writes_accepted,
            f.writes_refused,
            f.expired_before_write,
            f.acquire_cancelled,
            f.release_cancelled,
            f.contended,
            f.unavailable,
            f.acquire_lost,
            f.other_errors,
            super::checker::ms(f.acquire_p50),
            super::checker::ms(f.acquire_p99),
        )
    }
}

/// Per election (resource), the leaders whose epoch ([`Grant::fence`]) is
/// not above that of every leader granted before them.
pub fn epoch_inversions(grants: &[Grant]) -> u64 {
    let mut sorted: Vec<(&Grant, u64)> = grants
        .iter()
        .filter_map(|g| g.fence.map(|f| (g, f)))
        .collect();
    sorted.sort_by_key(|(g, _)| (g.resource, g.granted_at, g.id));
    let mut found = 0;
    let mut highest: Option<(usize, u64)> = None;
    for (g, epoch) in sorted {
        match highest {
            Some((r, h)) if r == g.resource => {
                if epoch <= h {
                    found += 1;
                }
                highest = Some((r, h.max(epoch)));
            }
            _ => highest = Some((g.resource, epoch)),
        }
    }
    found
}

/// How one leadership goes, drawn with its turn.
#[derive(Debug, Clone, Copy, Default)]
pub struct Reign {
    /// How long it holds: `U(0, hold)`.
    hold: Duration,
    /// Whether it ends by a drop without resign.
    crash: bool,
    /// Whether it proclaims a new value mid-way.
    proclaim: bool,
}

impl Turns for Leaders {
    type Held = (Leadership, Reign);
    const ACQUIRE: &'static str = "campaign";

    fn store(&self, resources: usize) -> Arc<dyn Store> {
        if self.fenced_store {
            FencedStore::shared(resources)
        } else {
            PlainStore::shared(resources)
        }
    }

    fn keys(&self, prefix: &str) -> String {
        // The leadership locks (which expire); the epoch counter and the
        // leader's record stay by design.
        format!("quorumlock:election:{{{prefix}:*}}")
    }

    fn take(&self, c: &Client, turn: &Turn, rng: &mut StdRng) -> Taking<Self> {
        let reign = Reign {
            hold: self.hold.mul_f64(rng.random::<f64>()),
            crash: self.crash_one_in > 0 && rng.random_range(0..self.crash_one_in) == 0,
            proclaim: self.proclaim_one_in > 0 && rng.random_range(0..self.proclaim_one_in) == 0,
        };
        // A campaign waits for the leader's release (or its expiry) up to
        // twice its TTL, then the client thinks and tries again.
        let mut campaign = c
            .redlock
            .campaign(resource_name(&c.prefix, turn.resource), turn.ttl)
            .value(format!("client-{}", c.id))
            .retry(quorumlock::Retry::Until(turn.ttl * 2));
        if turn.fair {
            campaign = campaign.fair();
        }
        campaign.lead().map(move |r| r.map(|l| (l, reign))).boxed()
    }

    fn probe(&self, redlock: &Redlock, name: &str, ttl: Duration, wait: Duration) -> Taking<Self> {
        let campaign = redlock
            .campaign(name, ttl)
            .retry(quorumlock::Retry::Until(wait));
        campaign
            .lead()
            .map(|r| r.map(|l| (l, Reign::default())))
            .boxed()
    }

    fn lock((leadership, _): &Self::Held) -> &Lock {
        leadership
    }

    fn fence((leadership, _): &Self::Held) -> Option<u64> {
        Some(leadership.epoch())
    }

    /// Reads and writes the counter until the reign's end or the
    /// leadership's loss, acting only until the deadline just recorded;
    /// proclaims once after the first write, if the reign does.
    fn hold<'a>(&'a self, h: Holding<'a, '_, Self::Held>) -> BoxFuture<'a, ()> {
        let ((leadership, reign), session, turn) = (h.held, h.session, h.turn);
        async move {
            let end = session.granted_at() + reign.hold;
            let mut proclaimed = !reign.proclaim;
            while Instant::now() < end && !leadership.is_lost() {
                // Act only until the deadline just recorded.
                let d = leadership.deadline();
                session.observe(d);
                let valid = || !leadership.validity().is_zero() && Instant::now() < d;
                let (read, value) = session.read(valid);
                if read != Outcome::Accepted {
                    break;
                }
                tokio::time::sleep(turn.work / 2).await;
                let d = leadership.deadline();
                session.observe(d);
                let valid = || !leadership.validity().is_zero() && Instant::now() < d;
                if session.write(value + 1, valid) != Outcome::Accepted {
                    break;
                }
                if !proclaimed {
                    proclaimed = true;
                    let v = format!("client-{}-again", h.client.id);
                    let _ = cancel::run(turn.cancel_extend, leadership.proclaim(v)).await;
                }
                tokio::time::sleep(turn.work / 2).await;
            }
        }
        .boxed()
    }

    fn let_go((leadership, reign): Self::Held) -> Release {
        (!reign.crash).then(|| leadership.resign().boxed())
    }
}
