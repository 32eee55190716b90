//! Counting holders against a bound: the semaphore's safety check.
//!
//! Each [`Grant`] is a holder's window `[granted_at, end)` (written ahead by
//! its holder, as for the lock's overlap check) weighing the permits it
//! holds ([`Grant::weight`]). [`over_admissions`] sweeps the window
//! endpoints of each resource in time order — an end before a start at the
//! same instant, the windows being half-open — keeping the permits held at
//! every instant; a start that takes the total above the bound is an
//! over-admission. [`slot_overlaps`] checks the finer promise that no two
//! holders hold the same slot at once. The read–write lock's check,
//! [`writer_overlaps`], takes the same sweep.

use std::collections::BTreeMap;
use std::time::Instant;

use super::checker::{find_overlaps, ms, Grant, Overlap};

/// Slots per resource in the index space of [`slot_overlaps`]: above any
/// semaphore's number of permits.
const SLOT_STRIDE: usize = quorumlock::MAX_PERMITS as usize + 1;

/// An instant at which more permits were held than the bound.
#[derive(Debug, Clone)]
pub struct Excess {
    /// The resource (semaphore) over its bound.
    pub resource: usize,
    /// When the holder that took it over the bound was granted.
    pub at: Instant,
    /// Permits held right after that grant.
    pub held: usize,
    /// Every holder at that instant, the latest last.
    pub holders: Vec<Grant>,
}

impl Excess {
    /// One line, times in ms from the earliest holder's grant.
    pub fn describe(&self) -> String {
        let t0 = self
            .holders
            .iter()
            .map(|g| g.granted_at)
            .min()
            .unwrap_or(self.at);
        let holders: Vec<String> = self
            .holders
            .iter()
            .map(|g| {
                format!(
                    "client {} slots {:?} fence {:?} granted +{:.1} end +{:.1}",
                    g.client,
                    g.slots,
                    g.fence,
                    ms(g.granted_at - t0),
                    ms(g.end.saturating_duration_since(t0)),
                )
            })
            .collect();
        format!(
            "resource {}: {} permits held at +{:.1}ms: {}",
            self.resource,
            self.held,
            ms(self.at - t0),
            holders.join("; ")
        )
    }
}

/// What [`over_admissions`] found.
#[derive(Debug, Clone, Default)]
pub struct Admission {
    /// The most permits held at one instant, over all resources.
    pub max_concurrent: usize,
    /// Grants that took their resource above the bound.
    pub violations: usize,
    /// The first few of those, for reports.
    pub first: Vec<Excess>,
}

/// How many of the violations [`Admission::first`] keeps.
const KEPT: usize = 5;

/// Sweeps the windows of `grants` per resource in time order, an end
/// before a start at one instant (half-open windows), and calls `start`
/// at each window's start with its instant and every grant of the
/// resource holding then, the starting one included, by [`Grant::id`].
fn sweep<'g>(grants: &'g [Grant], mut start: impl FnMut(&'g Grant, Instant, &Holding<'g>)) {
    let mut events: Vec<(usize, Instant, bool, &Grant)> = Vec::with_capacity(grants.len() * 2);
    for g in grants.iter().filter(|g| g.end > g.granted_at) {
        events.push((g.resource, g.granted_at, true, g));
        events.push((g.resource, g.end, false, g));
    }
    // Ends sort before starts at one instant (false < true).
    events.sort_by_key(|&(r, t, starts, g)| (r, t, starts, g.id));
    let mut resource = None;
    let mut holding = Holding::new();
    for (r, t, starts, g) in events {
        if resource != Some(r) {
            resource = Some(r);
            holding.clear();
        }
        if starts {
            holding.insert(g.id, g);
            start(g, t, &holding);
        } else {
            holding.remove(&g.id);
        }
    }
}

/// The grants of one resource holding at an instant, by [`Grant::id`].
type Holding<'g> = BTreeMap<u64, &'g Grant>;

/// Flags every grant at whose start more than `bound` permits were held.
pub fn over_admissions(grants: &[Grant], bound: usize) -> Admission {
    let mut found = Admission::default();
    sweep(grants, |g, at, holding| {
        let held = holding.values().map(|h| h.weight()).sum();
        found.max_concurrent = found.max_concurrent.max(held);
        if held > bound {
            found.violations += 1;
            if found.first.len() < KEPT {
                found.first.push(Excess {
                    resource: g.resource,
                    at,
                    held,
                    holders: holding.values().map(|&h| h.clone()).collect(),
                });
            }
        }
    });
    found
}

/// Pairs of holders whose windows overlap on one slot of one resource
/// (grants without slots are skipped); each [`Overlap`]'s grants carry
/// the resource and the slot in [`Grant::resource`] as
/// `resource * (MAX_PERMITS + 1) + slot`.
pub fn slot_overlaps(grants: &[Grant]) -> Vec<Overlap> {
    let per_slot: Vec<Grant> = grants
        .iter()
        .flat_map(|g| {
            g.slots.iter().map(move |&s| Grant {
                resource: g.resource * SLOT_STRIDE + s as usize,
                ..g.clone()
            })
        })
        .collect();
    find_overlaps(&per_slot)
}

/// A read–write lock's promise against its holders' windows: the pairs of
/// one resource that overlap where one of them is a writer (`writer`
/// tells which grants are); readers beside readers are not flagged. Each
/// holder starting is paired with the first (by id) other holder then —
/// the first other writer, when it reads.
pub fn writer_overlaps(grants: &[Grant], writer: impl Fn(&Grant) -> bool) -> Vec<Overlap> {
    let mut found = Vec::new();
    sweep(grants, |g, _, holding| {
        let writes = writer(g);
        let beside = holding
            .values()
            .find(|h| h.id != g.id && (writes || writer(h)));
        if let Some(&first) = beside {
            found.push(Overlap {
                first: first.clone(),
                second: g.clone(),
            });
        }
    });
    found
}
