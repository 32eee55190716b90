//! Percentiles, spread over repeated rounds, and the process's CPU time and
//! resident memory.

use std::time::Duration;

/// Summary of one set of latency samples.
#[derive(Debug, Clone, Copy, Default)]
pub struct Summary {
    pub n: usize,
    pub min: Duration,
    pub p50: Duration,
    pub p99: Duration,
    pub max: Duration,
    pub mean: Duration,
}

impl Summary {
    pub fn of(samples: &[Duration]) -> Summary {
        if samples.is_empty() {
            return Summary::default();
        }
        let mut s = samples.to_vec();
        s.sort_unstable();
        let total: Duration = s.iter().sum();
        Summary {
            n: s.len(),
            min: s[0],
            p50: percentile(&s, 0.50),
            p99: percentile(&s, 0.99),
            max: s[s.len() - 1],
            mean: total / s.len() as u32,
        }
    }
}

/// The overlap validator: how many grants were made while the holders
/// already in place left too little for them, from every hold as
/// `(weight, granted, released)` on one clock (the grant read once the
/// acquire returned, the release before it was sent: each measured hold
/// lies inside the real one, so a measured overlap is a real one) and what
/// the primitive admits at once, `limit` (1 for a lock, the permits for a
/// semaphore, as many readers as contenders for a read–write lock whose
/// writer weighs them all). A correct primitive gives 0.
pub fn overlaps(holds: &mut [(u32, u64, u64)], limit: u32) -> usize {
    holds.sort_unstable_by_key(|&(_, granted, _)| granted);
    // The holds still in place: (released, weight).
    let mut held: Vec<(u64, u32)> = Vec::new();
    let mut overlaps = 0;
    for &(weight, granted, released) in holds.iter() {
        held.retain(|&(end, _)| end > granted);
        if held.iter().map(|&(_, w)| w).sum::<u32>() + weight > limit {
            overlaps += 1;
        }
        held.push((released, weight));
    }
    overlaps
}

/// The validator's negative control, run before any scenario: holds that
/// intersect beyond the limit are counted; back-to-back ones, and ones
/// within it, are not.
pub fn check_overlaps() {
    let mut two = [
        (1, 0, 10),
        (1, 5, 15),
        (1, 20, 30),
        (1, 30, 40),
        (1, 41, 50),
    ];
    assert_eq!(
        overlaps(&mut two, 1),
        1,
        "the overlap validator misses two holders"
    );
    // Two readers, then a writer (weighing both) while one still reads.
    let mut readers = [(1, 0, 10), (1, 2, 12), (2, 11, 20), (2, 20, 30)];
    assert_eq!(
        overlaps(&mut readers, 2),
        1,
        "the overlap validator misses a writer among readers"
    );
}

/// Nearest-rank percentile of sorted samples.
pub fn percentile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Median, min and max of per-round figures: the spread reported beside
/// every pooled percentile.
#[derive(Debug, Clone, Copy, Default)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    pub fn of(values: &[f64]) -> Spread {
        if values.is_empty() {
            return Spread::default();
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let mid = v.len() / 2;
        let median = if v.len() % 2 == 1 {
            v[mid]
        } else {
            (v[mid - 1] + v[mid]) / 2.0
        };
        Spread {
            median,
            min: v[0],
            max: v[v.len() - 1],
        }
    }
}

pub fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// User and system CPU time of this process so far.
pub fn cpu_time() -> (Duration, Duration) {
    // SAFETY: getrusage writes into the zeroed struct we own and reads
    // nothing else.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    (tv(usage.ru_utime), tv(usage.ru_stime))
}

/// Resident set size of this process in bytes (from /proc/self/statm).
pub fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf only reads a system constant.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * page.max(0) as u64
}

/// CLOCK_MONOTONIC in nanoseconds: one clock for every process on the
/// machine, so the waiter processes' grant and release times line up.
pub fn mono_ns() -> u64 {
    // SAFETY: clock_gettime writes into the zeroed struct we own.
    let ts = unsafe {
        let mut ts: libc::timespec = std::mem::zeroed();
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
        ts
    };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
