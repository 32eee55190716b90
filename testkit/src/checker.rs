//! The safety checker: a history of lock grants on one monotonic clock, and
//! a protected resource outside Redis that every holder updates with a
//! read–sleep–write. From them it computes the figures that say whether
//! mutual exclusion held:
//!
//! - **overlaps**: two grants of the same resource whose windows
//!   `[granted_at, end)` intersect, where `end` is the lock's deadline or
//!   the moment its holder stopped (began releasing), whichever came first;
//! - **lost updates**: accepted writes minus the counter's final value (each
//!   holder writes `read + 1`, so a write based on a stale read loses one);
//! - **stale writes accepted**: writes the store accepted although a holder
//!   granted later had already read the resource — judged from the access
//!   log alone, whatever the store does;
//! - **duplicate fences**: two grants of a resource with the same fencing
//!   token; **fence inversions**: a grant whose acquire began after another
//!   grant of the resource had returned, with a token not above that one's
//!   (the order a quorum of counters must give, persistence assumed).
//!
//! A grant's window ends where its holder could last have believed it held
//! the lock: the holder reports the lock's deadline after every poll of an
//! `extend` (the deadline only moves while one runs) and when it stops, and
//! the window is the union of `[observed at, min(deadline, next
//! observation))`. A shorter extend thus shortens the window; a cancelled
//! one leaves whatever deadline the lock reports after the drop.
//!
//! The resource is a [`Store`]. [`PlainStore`] accepts everything (what most
//! users have); [`FencedStore`] checks fencing tokens and refuses a reader or
//! writer whose token is below the highest it has seen. A lock
//! implementation with fencing tokens passes them through [`Session::read`]
//! and [`Session::write`]; nothing else in the checker changes.
//!
//! Each access runs under a per-resource mutex *together with* the holder's
//! validity check, so a holder that is preempted between the check and the
//! write still cannot interleave with another holder's access: a lost update
//! needs a real overlap of validity windows.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The protected resource: one counter per lock resource.
///
/// Calls for one resource never run concurrently (the checker serialises
/// them), so an implementation needs no ordering of its own.
pub trait Store: Send + Sync {
    /// Short name for reports, e.g. `plain` or `fenced`.
    fn name(&self) -> &'static str;
    /// The counter of `resource`, or `None` when the store refuses the
    /// reader (a stale fencing token).
    fn read(&self, resource: usize, fence: Option<u64>) -> Option<u64>;
    /// Sets the counter; false when the store refuses the writer.
    fn write(&self, resource: usize, fence: Option<u64>, value: u64) -> bool;
    /// The counter as it is now.
    fn value(&self, resource: usize) -> u64;
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A store with no protection: every read and write is accepted.
#[derive(Debug)]
pub struct PlainStore {
    values: Mutex<Vec<u64>>,
}

impl PlainStore {
    /// A store of `resources` counters, all 0.
    pub fn new(resources: usize) -> Self {
        Self {
            values: Mutex::new(vec![0; resources]),
        }
    }

    /// As a shared [`Store`], for a workload strategy.
    pub fn shared(resources: usize) -> Arc<dyn Store> {
        Arc::new(Self::new(resources))
    }
}

impl Store for PlainStore {
    fn name(&self) -> &'static str {
        "plain"
    }
    fn read(&self, resource: usize, _fence: Option<u64>) -> Option<u64> {
        Some(lock(&self.values)[resource])
    }
    fn write(&self, resource: usize, _fence: Option<u64>, value: u64) -> bool {
        lock(&self.values)[resource] = value;
        true
    }
    fn value(&self, resource: usize) -> u64 {
        lock(&self.values)[resource]
    }
}

/// A store that checks fencing tokens: it remembers the highest token seen
/// (on a read or a write) and refuses any access with a lower one, or with
/// none. The holder of the highest token may read and then write; anyone
/// older is turned away, so a read–modify–write by a superseded holder can
/// never land.
#[derive(Debug)]
pub struct FencedStore {
    cells: Mutex<Vec<(u64, Option<u64>)>>,
}

impl FencedStore {
    /// A store of `resources` counters, all 0.
    pub fn new(resources: usize) -> Self {
        Self {
            cells: Mutex::new(vec![(0, None); resources]),
        }
    }

    /// As a shared [`Store`].
    pub fn shared(resources: usize) -> Arc<dyn Store> {
        Arc::new(Self::new(resources))
    }

    fn admit(highest: &mut Option<u64>, fence: Option<u64>) -> bool {
        match (fence, *highest) {
            (None, _) => false,
            (Some(f), Some(h)) if f < h => false,
            (Some(f), _) => {
                *highest = Some(f);
                true
            }
        }
    }
}

impl Store for FencedStore {
    fn name(&self) -> &'static str {
        "fenced"
    }
    fn read(&self, resource: usize, fence: Option<u64>) -> Option<u64> {
        let mut cells = lock(&self.cells);
        let (value, highest) = &mut cells[resource];
        Self::admit(highest, fence).then_some(*value)
    }
    fn write(&self, resource: usize, fence: Option<u64>, value: u64) -> bool {
        let mut cells = lock(&self.cells);
        let cell = &mut cells[resource];
        let ok = Self::admit(&mut cell.1, fence);
        if ok {
            cell.0 = value;
        }
        ok
    }
    fn value(&self, resource: usize) -> u64 {
        lock(&self.cells)[resource].0
    }
}

/// One grant as its holder saw it.
#[derive(Debug, Clone)]
pub struct Grant {
    /// The grant's number in the order grants were recorded.
    pub id: u64,
    /// The client that held it.
    pub client: usize,
    /// The resource (index of its counter in the store).
    pub resource: usize,
    /// Its fencing token, when the strategy takes one.
    pub fence: Option<u64>,
    /// When the `acquire` call began (the first request went out after).
    pub requested_at: Instant,
    /// When `acquire` returned.
    pub granted_at: Instant,
    /// The lock's deadline, or when the holder stopped, whichever is first.
    pub end: Instant,
    /// What became of an extension, for reports: `"cancelled 120ms (was
    /// 400ms) at +35ms, deadline +300ms -> +390ms"`.
    pub extend: Option<String>,
    /// The semaphore slots held, for permits (empty for a lock).
    pub slots: Vec<u32>,
}

impl Grant {
    /// What the grant counts towards its resource's bound: its slots, or 1
    /// for a lock.
    pub fn weight(&self) -> usize {
        self.slots.len().max(1)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Read,
    Write,
}

#[derive(Debug, Clone, Copy)]
struct Access {
    granted_at: Instant,
    kind: Kind,
    accepted: bool,
}

/// What happened to a holder's access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The store took it.
    Accepted,
    /// The store turned it away (stale fencing token).
    Refused,
    /// The holder's validity had run out; it did not touch the store.
    Expired,
}

#[derive(Debug, Default)]
struct Tallies {
    reads_refused: AtomicU64,
    writes_accepted: AtomicU64,
    writes_refused: AtomicU64,
    expired_before_read: AtomicU64,
    expired_before_write: AtomicU64,
    extended: AtomicU64,
    extend_shorter: AtomicU64,
    extend_lost: AtomicU64,
    acquire_cancelled: AtomicU64,
    extend_cancelled: AtomicU64,
    release_cancelled: AtomicU64,
    contended: AtomicU64,
    unavailable: AtomicU64,
    acquire_lost: AtomicU64,
    other_errors: AtomicU64,
    release_errors: AtomicU64,
    coverage_checked: AtomicU64,
    coverage_full: AtomicU64,
}

/// Collects the history of a run. Share it (`Arc`) between the holders.
pub struct Checker {
    store: Arc<dyn Store>,
    logs: Vec<Mutex<Vec<Access>>>,
    grants: Mutex<Vec<Grant>>,
    latencies: Mutex<Vec<Duration>>,
    /// When each acquire or release failed as unavailable, and the error.
    outages: Mutex<Vec<(Instant, String)>>,
    next_id: AtomicU64,
    tallies: Tallies,
    /// Direct URLs of the nodes, for [`Checker::coverage`] reads.
    nodes: std::sync::OnceLock<Vec<String>>,
}

impl std::fmt::Debug for Checker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checker")
            .field("store", &self.store.name())
            .field("resources", &self.logs.len())
            .finish()
    }
}

/// A grant in progress: the holder's accesses go through it. Dropping it
/// records the grant (ending at the drop, or at [`Session::stop`]).
pub struct Session<'a> {
    checker: &'a Checker,
    grant: Grant,
    /// The deadline last observed, and when.
    deadline: Instant,
    observed_at: Instant,
    /// The latest moment so far that the holder could have believed it held
    /// the lock.
    reach: Instant,
    stopped: Option<Instant>,
}

impl Session<'_> {
    /// When `acquire` returned.
    pub fn granted_at(&self) -> Instant {
        self.grant.granted_at
    }

    /// The grant's fencing token.
    pub fn fence(&self) -> Option<u64> {
        self.grant.fence
    }

    /// Reads the counter if `still_valid()` holds at that moment (checked
    /// under the resource's mutex).
    pub fn read(&mut self, still_valid: impl FnOnce() -> bool) -> (Outcome, u64) {
        let c = self.checker;
        let mut log = lock(&c.logs[self.grant.resource]);
        if !still_valid() {
            c.tallies
                .expired_before_read
                .fetch_add(1, Ordering::Relaxed);
            return (Outcome::Expired, 0);
        }
        let got = c.store.read(self.grant.resource, self.grant.fence);
        log.push(Access {
            granted_at: self.grant.granted_at,
            kind: Kind::Read,
            accepted: got.is_some(),
        });
        match got {
            Some(v) => (Outcome::Accepted, v),
            None => {
                c.tallies.reads_refused.fetch_add(1, Ordering::Relaxed);
                (Outcome::Refused, 0)
            }
        }
    }

    /// Writes the counter if `still_valid()` holds at that moment.
    pub fn write(&mut self, value: u64, still_valid: impl FnOnce() -> bool) -> Outcome {
        let c = self.checker;
        let mut log = lock(&c.logs[self.grant.resource]);
        if !still_valid() {
            c.tallies
                .expired_before_write
                .fetch_add(1, Ordering::Relaxed);
            return Outcome::Expired;
        }
        let ok = c.store.write(self.grant.resource, self.grant.fence, value);
        log.push(Access {
            granted_at: self.grant.granted_at,
            kind: Kind::Write,
            accepted: ok,
        });
        if ok {
            c.tallies.writes_accepted.fetch_add(1, Ordering::Relaxed);
            Outcome::Accepted
        } else {
            c.tallies.writes_refused.fetch_add(1, Ordering::Relaxed);
            Outcome::Refused
        }
    }

    /// The grant is permits of a semaphore, on these slots.
    pub fn slots(&mut self, slots: &[u32]) {
        self.grant.slots = slots.to_vec();
    }

    /// When the acquire call that led to this grant began.
    pub fn requested_at(&mut self, at: Instant) {
        self.grant.requested_at = at.min(self.grant.granted_at);
    }

    /// The lock reports `deadline` now. The window covers the time since
    /// the previous observation up to the deadline then in force.
    pub fn observe(&mut self, deadline: Instant) {
        let now = Instant::now();
        self.reach = self.reach.max(self.deadline.min(now));
        self.deadline = deadline;
        self.observed_at = now;
    }

    /// Notes what became of an extension to `ttl` (from `old_ttl`) that
    /// began at `began` with the deadline then `before`, for reports.
    pub fn note_extend(
        &mut self,
        how: &str,
        ttl: Duration,
        old_ttl: Duration,
        began: Instant,
        before: Instant,
    ) {
        let g = self.grant.granted_at;
        let at = |t: Instant| ms(t.saturating_duration_since(g));
        self.grant.extend = Some(format!(
            "{how} {:.0}ms (was {:.0}ms) at +{:.0}ms, deadline +{:.0}ms -> +{:.0}ms (now +{:.0}ms)",
            ms(ttl),
            ms(old_ttl),
            at(began),
            at(before),
            at(self.deadline),
            at(Instant::now()),
        ));
    }

    /// The lock was extended and reports `deadline` now; `shorter` when the
    /// new TTL was below the one before.
    pub fn extended(&mut self, deadline: Instant, shorter: bool) {
        self.observe(deadline);
        let t = &self.checker.tallies;
        t.extended.fetch_add(1, Ordering::Relaxed);
        if shorter {
            t.extend_shorter.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// An extension was dropped unfinished; the lock reports `deadline`
    /// after the drop.
    pub fn extend_cancelled(&mut self, deadline: Instant) {
        self.observe(deadline);
        self.checker
            .tallies
            .extend_cancelled
            .fetch_add(1, Ordering::Relaxed);
    }

    /// An extension failed: the lock counts as lost.
    pub fn extend_lost(&mut self) {
        self.checker
            .tallies
            .extend_lost
            .fetch_add(1, Ordering::Relaxed);
    }

    /// The holder stops using the resource now (call right before release).
    pub fn stop(mut self) {
        self.stopped = Some(Instant::now());
    }
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        let stopped = self.stopped.unwrap_or_else(Instant::now);
        let mut grant = self.grant.clone();
        grant.end = self
            .reach
            .max(self.deadline.min(stopped))
            .min(stopped)
            .max(grant.granted_at);
        lock(&self.checker.grants).push(grant);
    }
}

/// An overlap found in the history.
#[derive(Debug, Clone)]
pub struct Overlap {
    /// The grant whose window the second began inside.
    pub first: Grant,
    /// The grant that began while the first still held.
    pub second: Grant,
}

impl Overlap {
    /// How long both were held.
    pub fn length(&self) -> Duration {
        self.first.end.min(self.second.end) - self.second.granted_at
    }

    /// One line, times in ms from the first grant.
    pub fn describe(&self) -> String {
        let t0 = self.first.granted_at;
        let at = |t: Instant| {
            if t >= t0 {
                format!("+{:.1}", ms(t - t0))
            } else {
                format!("-{:.1}", ms(t0 - t))
            }
        };
        let one = |g: &Grant| {
            format!(
                "client {} fence {:?} requested {} granted {} end {}{}",
                g.client,
                g.fence,
                at(g.requested_at),
                at(g.granted_at),
                at(g.end),
                g.extend
                    .as_ref()
                    .map_or(String::new(), |e| format!(" [extend: {e}]")),
            )
        };
        format!(
            "resource {}: overlap {:.1}ms: first {}; second {}",
            self.first.resource,
            ms(self.length()),
            one(&self.first),
            one(&self.second)
        )
    }
}

/// Every figure of a run.
#[derive(Debug, Clone, Default)]
pub struct Figures {
    /// The store's name ([`Store`]).
    pub store: &'static str,
    /// Grants recorded.
    pub grants: usize,
    /// Pairs of overlapping grant windows ([`Checker::overlaps`]).
    pub overlaps: usize,
    /// The longest of those overlaps.
    pub longest_overlap: Duration,
    /// Accepted writes minus the counters' final sum.
    pub lost_updates: u64,
    /// See [`Checker::stale_writes_accepted`].
    pub stale_writes_accepted: u64,
    /// Writes the store took.
    pub writes_accepted: u64,
    /// Reads the store turned away (stale fencing token).
    pub reads_refused: u64,
    /// Writes the store turned away (stale fencing token).
    pub writes_refused: u64,
    /// Holders whose validity ran out before their read.
    pub expired_before_read: u64,
    /// Holders whose validity ran out before their write.
    pub expired_before_write: u64,
    /// Extensions that succeeded.
    pub extended: u64,
    /// Of those, extensions to a shorter TTL than before.
    pub extend_shorter: u64,
    /// Extensions that failed: the lock counted as lost.
    pub extend_lost: u64,
    /// Acquire calls dropped unfinished.
    pub acquire_cancelled: u64,
    /// Extend calls dropped unfinished.
    pub extend_cancelled: u64,
    /// Release calls dropped unfinished.
    pub release_cancelled: u64,
    /// Grants of a resource sharing a fencing token.
    pub duplicate_fences: u64,
    /// Grants requested after another was granted, with a token not above it.
    pub fence_inversions: u64,
    /// Acquires that failed because another client held the lock.
    pub contended: u64,
    /// Acquires that failed because too few nodes answered.
    pub unavailable: u64,
    /// Acquires that failed with [`quorumlock::Error::Lost`]: taken, then
    /// lost before they were handed out (a campaign whose first
    /// proclamation reached no majority in time).
    pub acquire_lost: u64,
    /// Acquires that failed otherwise.
    pub other_errors: u64,
    /// Releases that returned an error.
    pub release_errors: u64,
    /// Median latency of the successful acquires.
    pub acquire_p50: Duration,
    /// 99th percentile of that latency.
    pub acquire_p99: Duration,
    /// The slowest successful acquire.
    pub acquire_max: Duration,
    /// Extensions after which the nodes that answered a direct read were
    /// checked for a missing key ([`Checker::coverage`]).
    pub coverage_checked: u64,
    /// Of those, extensions after which no such node was missing the key.
    pub coverage_full: u64,
}

impl Figures {
    /// `key=value` pairs of the safety figures, for one summary line.
    pub fn line(&self) -> String {
        format!(
            "store={} grants={} overlaps={} lost_updates={} stale_writes_accepted={} \
             duplicate_fences={} fence_inversions={} writes={} refused_writes={} \
             expired_before_write={} {} {} coverage={}/{}",
            self.store,
            self.grants,
            self.overlaps,
            self.lost_updates,
            self.stale_writes_accepted,
            self.duplicate_fences,
            self.fence_inversions,
            self.writes_accepted,
            self.writes_refused,
            self.expired_before_write,
            self.calls(),
            self.latency(),
            self.coverage_full,
            self.coverage_checked,
        )
    }

    /// What became of the clients' calls, for a summary line: extensions,
    /// cancellations and acquire errors.
    pub fn calls(&self) -> String {
        format!(
            "extended={} (shorter={}) extend_lost={} \
             cancelled=acquire:{}/extend:{}/release:{} \
             contended={} unavailable={} other_errors={}",
            self.extended,
            self.extend_shorter,
            self.extend_lost,
            self.acquire_cancelled,
            self.extend_cancelled,
            self.release_cancelled,
            self.contended,
            self.unavailable,
            self.other_errors,
        )
    }

    /// The acquire latency, for a summary line.
    pub fn latency(&self) -> String {
        format!(
            "acquire_p50={:.1}ms acquire_p99={:.1}ms acquire_max={:.1}ms",
            ms(self.acquire_p50),
            ms(self.acquire_p99),
            ms(self.acquire_max),
        )
    }
}

/// Milliseconds as a float, for reports.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The `q` quantile (0..=1) of `sorted`, nearest rank.
pub fn quantile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((sorted.len() - 1) as f64 * q.clamp(0.0, 1.0)).round() as usize;
    sorted[rank]
}

impl Checker {
    /// A checker for `resources` counters kept in `store`.
    pub fn new(resources: usize, store: Arc<dyn Store>) -> Self {
        Self {
            store,
            logs: (0..resources).map(|_| Mutex::new(Vec::new())).collect(),
            grants: Mutex::new(Vec::new()),
            latencies: Mutex::new(Vec::new()),
            outages: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(0),
            tallies: Tallies::default(),
            nodes: std::sync::OnceLock::new(),
        }
    }

    /// Measures coverage after each extension, reading the nodes at these
    /// direct URLs (see [`Figures::coverage_full`]).
    pub fn watch_nodes(&self, urls: Vec<String>) {
        let _ = self.nodes.set(urls);
    }

    /// The nodes' direct URLs, when coverage is measured.
    pub fn nodes(&self) -> Option<Vec<String>> {
        self.nodes.get().cloned()
    }

    /// Resources checked.
    pub fn resources(&self) -> usize {
        self.logs.len()
    }

    /// Records a grant that `acquire` returned at `granted_at` (taken right
    /// after it returned), valid until `deadline`.
    pub fn granted(
        &self,
        client: usize,
        resource: usize,
        fence: Option<u64>,
        granted_at: Instant,
        deadline: Instant,
    ) -> Session<'_> {
        Session {
            checker: self,
            grant: Grant {
                id: self.next_id.fetch_add(1, Ordering::Relaxed),
                client,
                resource,
                fence,
                requested_at: granted_at,
                granted_at,
                end: deadline,
                extend: None,
                slots: Vec::new(),
            },
            deadline,
            observed_at: granted_at,
            reach: granted_at,
            stopped: None,
        }
    }

    /// Records how long a successful acquire took.
    pub fn acquire_latency(&self, d: Duration) {
        lock(&self.latencies).push(d);
    }

    /// Counts a failed acquire by its kind.
    pub fn acquire_failed(&self, e: &quorumlock::Error) {
        let t = &self.tallies;
        let counter = if e.is_contended() {
            &t.contended
        } else if e.is_unavailable() {
            lock(&self.outages).push((Instant::now(), format!("acquire: {e}")));
            &t.unavailable
        } else if e.is_lost() {
            &t.acquire_lost
        } else {
            &t.other_errors
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts an acquire dropped unfinished (not a grant).
    pub fn acquire_cancelled(&self) {
        self.tallies
            .acquire_cancelled
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a release dropped unfinished.
    pub fn release_cancelled(&self) {
        self.tallies
            .release_cancelled
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a failed release (an outage when it is unavailable).
    pub fn release_failed(&self, e: &quorumlock::Error) {
        if e.is_unavailable() {
            lock(&self.outages).push((Instant::now(), format!("release: {e}")));
        }
        self.tallies.release_errors.fetch_add(1, Ordering::Relaxed);
    }

    /// Every acquire and release that failed as unavailable: when it
    /// returned, and the error. A run can tell an outage its faults explain
    /// from one they do not.
    pub fn outages(&self) -> Vec<(Instant, String)> {
        lock(&self.outages).clone()
    }

    /// The grants recorded so far.
    pub fn grants(&self) -> Vec<Grant> {
        lock(&self.grants).clone()
    }

    /// Every overlap: each grant that starts inside an earlier grant's
    /// window on the same resource, paired with that earlier grant.
    pub fn overlaps(&self) -> Vec<Overlap> {
        find_overlaps(&self.grants())
    }

    /// Writes the store accepted from a holder after a holder granted later
    /// had already read: the writer's lock had been superseded and the store
    /// could have known.
    pub fn stale_writes_accepted(&self) -> u64 {
        let mut stale = 0;
        for log in &self.logs {
            let mut newest_reader: Option<Instant> = None;
            for a in lock(log).iter() {
                match a.kind {
                    Kind::Read if a.accepted => {
                        newest_reader = newest_reader.max(Some(a.granted_at));
                    }
                    Kind::Write
                        if a.accepted && newest_reader.is_some_and(|r| r > a.granted_at) =>
                    {
                        stale += 1;
                    }
                    _ => {}
                }
            }
        }
        stale
    }

    /// All figures.
    pub fn figures(&self) -> Figures {
        let overlaps = self.overlaps();
        let mut lat = lock(&self.latencies).clone();
        lat.sort();
        let t = &self.tallies;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let writes = get(&t.writes_accepted);
        let total: u64 = (0..self.resources()).map(|r| self.store.value(r)).sum();
        let grants = self.grants();
        let fences = fence_violations(&grants);
        Figures {
            store: self.store.name(),
            grants: grants.len(),
            overlaps: overlaps.len(),
            longest_overlap: overlaps
                .iter()
                .map(Overlap::length)
                .max()
                .unwrap_or_default(),
            lost_updates: writes.saturating_sub(total),
            stale_writes_accepted: self.stale_writes_accepted(),
            writes_accepted: writes,
            reads_refused: get(&t.reads_refused),
            writes_refused: get(&t.writes_refused),
            expired_before_read: get(&t.expired_before_read),
            expired_before_write: get(&t.expired_before_write),
            extended: get(&t.extended),
            extend_shorter: get(&t.extend_shorter),
            extend_lost: get(&t.extend_lost),
            acquire_cancelled: get(&t.acquire_cancelled),
            extend_cancelled: get(&t.extend_cancelled),
            release_cancelled: get(&t.release_cancelled),
            duplicate_fences: fences.duplicates,
            fence_inversions: fences.inversions,
            contended: get(&t.contended),
            unavailable: get(&t.unavailable),
            acquire_lost: get(&t.acquire_lost),
            other_errors: get(&t.other_errors),
            release_errors: get(&t.release_errors),
            acquire_p50: quantile(&lat, 0.5),
            acquire_p99: quantile(&lat, 0.99),
            acquire_max: lat.last().copied().unwrap_or_default(),
            coverage_checked: get(&t.coverage_checked),
            coverage_full: get(&t.coverage_full),
        }
    }

    /// After a successful extension: whether every node that answered a
    /// direct read held a key (`full`).
    pub fn coverage(&self, full: bool) {
        let t = &self.tallies;
        t.coverage_checked.fetch_add(1, Ordering::Relaxed);
        if full {
            t.coverage_full.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Overlapping windows among `grants`, per resource: sorted by start, each
/// grant is compared with the furthest-reaching window before it.
pub fn find_overlaps(grants: &[Grant]) -> Vec<Overlap> {
    let mut sorted: Vec<&Grant> = grants.iter().collect();
    sorted.sort_by_key(|g| (g.resource, g.granted_at, g.id));
    let mut found = Vec::new();
    let mut reach: Option<&Grant> = None;
    for g in sorted {
        match reach {
            Some(r) if r.resource == g.resource => {
                if g.granted_at < r.end {
                    found.push(Overlap {
                        first: r.clone(),
                        second: g.clone(),
                    });
                }
                if g.end > r.end {
                    reach = Some(g);
                }
            }
            _ => reach = Some(g),
        }
    }
    found
}

/// What [`fence_violations`] found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FenceViolations {
    /// Grants whose (resource, fence) an earlier grant already had.
    pub duplicates: u64,
    /// Grants whose acquire began after an earlier grant of the resource
    /// returned, with a fence not above that grant's.
    pub inversions: u64,
}

/// Checks the fencing tokens of `grants` (those without one are skipped):
/// each must be unique per resource, and a grant requested after another
/// was granted must carry a higher token.
pub fn fence_violations(grants: &[Grant]) -> FenceViolations {
    let mut fenced: Vec<(&Grant, u64)> = grants
        .iter()
        .filter_map(|g| g.fence.map(|f| (g, f)))
        .collect();
    let mut found = FenceViolations::default();
    fenced.sort_by_key(|(g, f)| (g.resource, *f, g.granted_at));
    for pair in fenced.windows(2) {
        if pair[0].0.resource == pair[1].0.resource && pair[0].1 == pair[1].1 {
            found.duplicates += 1;
        }
    }
    // Per resource, in order of grant: the highest fence among grants that
    // returned before this one's acquire began.
    fenced.sort_by_key(|(g, _)| (g.resource, g.granted_at, g.id));
    let mut start = 0;
    while start < fenced.len() {
        let resource = fenced[start].0.resource;
        let end = fenced[start..]
            .iter()
            .position(|(g, _)| g.resource != resource)
            .map_or(fenced.len(), |n| start + n);
        let run = &fenced[start..end];
        // prefix_max[i]: the highest fence among run[..=i].
        let prefix_max: Vec<u64> = run
            .iter()
            .scan(0, |m, (_, f)| {
                *m = (*m).max(*f);
                Some(*m)
            })
            .collect();
        for (g, f) in run {
            let returned_before = run.partition_point(|(o, _)| o.granted_at < g.requested_at);
            if returned_before > 0 && *f <= prefix_max[returned_before - 1] {
                found.inversions += 1;
            }
        }
        start = end;
    }
    found
}

/// Whether a forward clock jump at one of `jumps` (each the moments before
/// and after the step was written) could explain `overlap`: it fell between
/// the first holder's acquire beginning (its keys could exist) and the
/// second holder's grant. Overlaps without one are violations of mutual
/// exclusion inside the model.
pub fn explained_by_jump(overlap: &Overlap, jumps: &[(Instant, Instant)]) -> bool {
    jumps.iter().any(|(before, after)| {
        *after >= overlap.first.requested_at && *before <= overlap.second.granted_at
    })
}
