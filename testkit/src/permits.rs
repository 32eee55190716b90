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
use std::time::{Duration, Instant};

use futures::future::{BoxFuture, FutureExt};
use quorumlock::Redlock;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::admission::{over_admissions, slot_overlaps, Admission};
use super::cancel;
use super::checker::{ms, PlainStore, Store};
use super::safety::{Client, Load, SafetyOutcome, SafetyRun};
use super::workload::{hold_extend, resource_name, Turn, Workload};

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
             duplicate_fences={} fence_inversions={} extended={} (shorter={}) extend_lost={} \
             cancelled=acquire:{}/extend:{}/release:{} contended={} unavailable={} \
             other_errors={} acquire_p50={:.1}ms acquire_p99={:.1}ms acquire_max={:.1}ms",
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
            f.extended,
            f.extend_shorter,
            f.extend_lost,
            f.acquire_cancelled,
            f.extend_cancelled,
            f.release_cancelled,
            f.contended,
            f.unavailable,
            f.other_errors,
            ms(f.acquire_p50),
            ms(f.acquire_p99),
            ms(f.acquire_max),
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

impl Load for Permits {
    fn name(&self) -> &'static str {
        self.name
    }

    fn store(&self, resources: usize) -> Arc<dyn Store> {
        // Holders do not update a counter: up to `L` of them at once is
        // the point.
        PlainStore::shared(resources)
    }

    fn client(&self, c: Client) -> BoxFuture<'static, ()> {
        let permits = *self;
        async move { client(c, permits).await }.boxed()
    }

    fn take_once<'a>(
        &'a self,
        redlock: &'a Redlock,
        name: &'a str,
        w: &'a Workload,
        wait: Duration,
    ) -> BoxFuture<'a, bool> {
        async move {
            // Every permit at once: no slot is left held.
            match redlock
                .semaphore(name, self.permits, w.max_ttl())
                .take(self.permits)
                .retry(quorumlock::Retry::Until(wait))
                .acquire()
                .await
            {
                Ok(permit) => {
                    let _ = permit.release().await;
                    true
                }
                Err(_) => false,
            }
        }
        .boxed()
    }

    fn keys(&self, prefix: &str) -> String {
        // The slots and the record of the limit (`…:limit`), which expire
        // or go with the last slot; not the fencing counter (which stays).
        format!("quorumlock:semaphore:{{{prefix}:*}}:[0-9l]*")
    }
}

async fn client(c: Client, p: Permits) {
    let Client {
        id,
        redlock,
        workload: ref w,
        ref checker,
        ref prefix,
        seed,
        until,
    } = c;
    let mut rng = StdRng::seed_from_u64(seed);
    while Instant::now() < until {
        let turn = Turn::draw(&mut rng, w);
        let take = if p.permits >= 2
            && p.take_two_one_in > 0
            && rng.random_range(0..p.take_two_one_in) == 0
        {
            2
        } else {
            1
        };
        let mut request = redlock
            .semaphore(resource_name(prefix, turn.resource), p.permits, turn.ttl)
            .take(take);
        if p.fenced {
            request = request.fenced();
        }
        let t0 = Instant::now();
        match cancel::run(turn.cancel_acquire, request.acquire()).await {
            None => checker.acquire_cancelled(),
            Some(Ok(permit)) => {
                let granted_at = Instant::now();
                checker.acquire_latency(granted_at - t0);
                let mut session = checker.granted(
                    id,
                    turn.resource,
                    permit.fence(),
                    granted_at,
                    permit.deadline(),
                );
                session.requested_at(t0);
                session.slots(permit.slots());
                assert_eq!(permit.permits(), take, "permits granted");
                tokio::time::sleep(turn.work / 2).await;
                match turn.extend {
                    Some((new_ttl, then)) => {
                        hold_extend(&permit, &mut session, new_ttl, turn.ttl, turn.cancel_extend)
                            .await;
                        tokio::time::sleep(permit.validity().mul_f64(then)).await;
                    }
                    None => tokio::time::sleep(turn.work / 2).await,
                }
                session.observe(permit.deadline());
                session.stop();
                match cancel::run(turn.cancel_release, permit.release()).await {
                    None => checker.release_cancelled(),
                    Some(Err(e)) => checker.release_failed(&e),
                    Some(Ok(())) => {}
                }
            }
            Some(Err(e)) => {
                assert!(!e.is_invalid_input(), "acquire permits: {e}");
                checker.acquire_failed(&e);
            }
        }
        tokio::time::sleep(turn.think).await;
    }
}
