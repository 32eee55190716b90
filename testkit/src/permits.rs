//! The semaphore's load: clients take 1 (sometimes 2) of the `L` permits of
//! a few semaphores with short TTLs, hold them for a while, sometimes
//! extend (to a shorter or a longer TTL), and release — dropping their
//! acquire, extend and release calls at seeded random points, as the lock's
//! clients do ([`Turn`]).
//!
//! A holder records its window ([`Checker::granted`], with its slots) before
//! it acts on the permits, and reports the deadline after every poll of an
//! extend and when it stops: the same write-ahead records as the lock's
//! overlap check. [`Permits::check`] then counts the permits held at every
//! instant per semaphore against `L` ([`over_admissions`]), checks that no
//! slot had two holders at once ([`slot_overlaps`]), and, with fencing, that
//! tokens are unique per semaphore and ordered by grant.
//!
//! [`Checker::granted`]: super::checker::Checker::granted

use std::sync::Arc;
use std::time::Duration;

use futures::future::{BoxFuture, FutureExt};
use quorumlock::{Lock, Permit, Redlock};
use rand::rngs::StdRng;
use rand::Rng;

use super::admission::{over_admissions, slot_overlaps, Admission};
use super::checker::{PlainStore, Store};
use super::safety::{Client, SafetyOutcome, SafetyRun};
use super::turns::{work, Holding, Release, Taking, Turn, Turns};
use super::workload::resource_name;

/// How clients take permits.
#[derive(Debug, Clone, Copy)]
pub struct Permits {
    /// Name for reports.
    pub name: &'static str,
    /// Each semaphore's permits (`L`), as every client names it.
    pub permits: u32,
    /// One acquire in `take_two_one_in` takes 2 permits (0: always 1).
    pub take_two_one_in: u32,
    /// Whether permits carry a fencing token.
    pub fenced: bool,
}

impl Permits {
    /// `L` permits, one acquire in three taking two, without fencing.
    pub fn plain(permits: u32) -> Self {
        Self {
            name: "plain",
            permits,
            take_two_one_in: 3,
            fenced: false,
        }
    }

    /// As [`Permits::plain`], each grant with a fencing token.
    pub fn fenced(permits: u32) -> Self {
        Self {
            name: "fenced",
            fenced: true,
            ..Self::plain(permits)
        }
    }

    /// What the history shows against the semaphore's promises.
    pub fn check(&self, outcome: &SafetyOutcome) -> PermitFigures {
        let grants = outcome.checker.grants();
        let admission = over_admissions(&grants, self.permits as usize);
        let slots = slot_overlaps(&grants);
        PermitFigures {
            grants: grants.len(),
            permits_granted: grants.iter().map(|g| g.slots.len()).sum(),
            first_slot_overlaps: slots.iter().take(5).map(|o| o.describe()).collect(),
            slot_overlaps: slots.len(),
            admission,
        }
    }

    /// The one summary line of a semaphore run.
    pub fn line(&self, run: &SafetyRun, outcome: &SafetyOutcome, p: &PermitFigures) -> String {
        let f = &outcome.figures;
        format!(
            "semaphore-safety: {} strategy={} permits={} take_two_one_in={} grants={} \
             permits_granted={} max_concurrent_permits={} over_bound={} slot_overlaps={} \
             duplicate_fences={} fence_inversions={} {} {}",
            run.head(outcome),
            self.name,
            self.permits,
            self.take_two_one_in,
            p.grants,
            p.permits_granted,
            p.admission.max_concurrent,
            p.admission.violations,
            p.slot_overlaps,
            f.duplicate_fences,
            f.fence_inversions,
            f.calls(),
            f.latency(),
        )
    }
}

/// What [`Permits::check`] found.
#[derive(Debug, Clone)]
pub struct PermitFigures {
    /// Acquisitions granted.
    pub grants: usize,
    /// Permits in them (a grant of 2 counts 2).
    pub permits_granted: usize,
    /// Permits held at once against the bound.
    pub admission: Admission,
    /// Pairs of holders of one slot at once.
    pub slot_overlaps: usize,
    /// The first few of those, for reports.
    pub first_slot_overlaps: Vec<String>,
}

impl PermitFigures {
    /// The first violations found, one per line (empty when none).
    pub fn violations(&self) -> String {
        let mut lines: Vec<String> = self
            .admission
            .first
            .iter()
            .map(super::admission::Excess::describe)
            .collect();
        lines.extend(self.first_slot_overlaps.iter().cloned());
        lines.join("\n")
    }
}

impl Turns for Permits {
    type Held = (Permit, u32);
    const ACQUIRE: &'static str = "acquire permits";

    fn store(&self, resources: usize) -> Arc<dyn Store> {
        // Holders do not update a counter: up to `L` of them at once is
        // the point.
        PlainStore::shared(resources)
    }

    fn keys(&self, prefix: &str) -> String {
        // The slots and the record of the limit (`…:limit`), which expire
        // or go with the last slot; not the fencing counter (which stays).
        format!("quorumlock:semaphore:{{{prefix}:*}}:[0-9l]*")
    }

    /// 1 permit, or 2 one turn in [`Permits::take_two_one_in`].
    fn take(&self, c: &Client, turn: &Turn, rng: &mut StdRng) -> Taking<Self> {
        let two = self.permits >= 2
            && self.take_two_one_in > 0
            && rng.random_range(0..self.take_two_one_in) == 0;
        let take = if two { 2 } else { 1 };
        let name = resource_name(&c.prefix, turn.resource);
        let mut request = c.redlock.semaphore(name, self.permits, turn.ttl).take(take);
        if self.fenced {
            request = request.fenced();
        }
        if turn.fair {
            request = request.fair();
        }
        request.acquire().map(move |r| r.map(|p| (p, take))).boxed()
    }

    /// Every permit at once: no slot is left held.
    fn probe(&self, redlock: &Redlock, name: &str, ttl: Duration, wait: Duration) -> Taking<Self> {
        let all = self.permits;
        let request = redlock
            .semaphore(name, all, ttl)
            .take(all)
            .retry(quorumlock::Retry::Until(wait));
        request.acquire().map(move |r| r.map(|p| (p, all))).boxed()
    }

    fn lock((permit, _): &Self::Held) -> &Lock {
        permit
    }

    fn fence((permit, _): &Self::Held) -> Option<u64> {
        permit.fence()
    }

    /// Records the slots, checks how many were granted, then [`work`].
    fn hold<'a>(&'a self, h: Holding<'a, '_, Self::Held>) -> BoxFuture<'a, ()> {
        let (permit, take) = &*h.held;
        h.session.slots(permit.slots());
        assert_eq!(permit.permits(), *take, "permits granted");
        work(permit, h.session, h.turn, || {}).boxed()
    }

    fn let_go((permit, _): Self::Held) -> Release {
        Some(permit.release().boxed())
    }
}
