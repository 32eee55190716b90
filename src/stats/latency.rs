//! The duration histograms of `stats`: fixed buckets, a count, a sum and a
//! maximum, recorded with relaxed atomic adds, each also reported to its
//! series. The bucket tables here are the only ones: `metrics` exports
//! them in seconds.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use crate::stats::series::Histogram;
use crate::stats::Latency;

/// Upper bounds (inclusive, in microseconds) of the buckets of replies
/// and attempts (100 µs … 5 s); one more bucket counts everything slower.
pub(crate) const LATENCY_MICROS: [u64; 15] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000,
];

/// Upper bounds (inclusive, in microseconds) of the buckets of waits for a
/// lock and of holds (1 ms … 1 h); one more bucket counts everything longer.
pub(crate) const DURATION_MICROS: [u64; 14] = [
    1_000,
    10_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    30_000_000,
    60_000_000,
    300_000_000,
    900_000_000,
    3_600_000_000,
];

/// A bucket table in seconds, as an exporter takes it.
pub(crate) const fn seconds<const N: usize>(micros: [u64; N]) -> [f64; N] {
    let mut out = [0.0; N];
    let mut i = 0;
    while i < N {
        out[i] = micros[i] as f64 / 1e6;
        i += 1;
    }
    out
}

/// Index of the bucket of `bounds` a duration falls into.
///
/// Compared in seconds as `f64`, as the `metrics` histogram compares a
/// value with its `le` bounds: a latency a fraction of a microsecond above
/// a bound falls in the next bucket in both (truncating to whole
/// microseconds here put it one bucket lower).
fn bucket_index(bounds: &[u64], elapsed: Duration) -> usize {
    let secs = elapsed.as_secs_f64();
    bounds
        .iter()
        .position(|&bound| secs <= bound as f64 / 1e6)
        .unwrap_or(bounds.len())
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// A histogram over one of the bucket tables, and its series.
#[derive(Debug)]
pub(crate) struct LatencyCounters {
    bounds: &'static [u64],
    series: Histogram,
    count: AtomicU64,
    sum_micros: AtomicU64,
    max_micros: AtomicU64,
    /// One per bound, and one for everything above the last.
    buckets: Box<[AtomicU64]>,
}

/// Over [`LATENCY_MICROS`].
impl Default for LatencyCounters {
    fn default() -> Self {
        Self::new(&LATENCY_MICROS)
    }
}

impl LatencyCounters {
    /// An empty histogram over `bounds` (increasing, in microseconds).
    pub(crate) fn new(bounds: &'static [u64]) -> Self {
        Self::reported(bounds, Histogram::noop())
    }

    /// The same, each duration also recorded in `series` (in seconds).
    pub(crate) fn reported(bounds: &'static [u64], series: Histogram) -> Self {
        Self {
            bounds,
            series,
            count: AtomicU64::new(0),
            sum_micros: AtomicU64::new(0),
            max_micros: AtomicU64::new(0),
            buckets: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// One duration.
    pub(crate) fn record(&self, elapsed: Duration) {
        let us = micros(elapsed);
        self.count.fetch_add(1, Relaxed);
        self.sum_micros.fetch_add(us, Relaxed);
        self.max_micros.fetch_max(us, Relaxed);
        if let Some(b) = self.buckets.get(bucket_index(self.bounds, elapsed)) {
            b.fetch_add(1, Relaxed);
        }
        self.series.record(elapsed.as_secs_f64());
    }

    /// The histogram of these counters taken together (all over the same
    /// bounds).
    pub(crate) fn merged<'a>(all: impl IntoIterator<Item = &'a LatencyCounters>) -> Latency {
        let mut all = all.into_iter().peekable();
        let bounds = all.peek().map_or(&LATENCY_MICROS[..], |l| l.bounds);
        let mut buckets: Vec<(Duration, u64)> = bounds
            .iter()
            .map(|&us| Duration::from_micros(us))
            .chain([Duration::MAX])
            .map(|bound| (bound, 0))
            .collect();
        let (mut count, mut sum, mut max) = (0u64, 0u64, 0u64);
        for l in all {
            count = count.wrapping_add(l.count.load(Relaxed));
            sum = sum.saturating_add(l.sum_micros.load(Relaxed));
            max = max.max(l.max_micros.load(Relaxed));
            for (b, n) in buckets.iter_mut().zip(l.buckets.iter()) {
                b.1 = b.1.wrapping_add(n.load(Relaxed));
            }
        }
        Latency {
            count,
            sum: Duration::from_micros(sum),
            max: Duration::from_micros(max),
            buckets,
        }
    }

    /// A copy of the histogram.
    pub(crate) fn snapshot(&self) -> Latency {
        Self::merged([self])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    const BUCKETS: usize = LATENCY_MICROS.len() + 1;

    fn bucket_index(elapsed: Duration) -> usize {
        super::bucket_index(&LATENCY_MICROS, elapsed)
    }

    #[test]
    fn the_tables_increase_and_read_the_same_in_seconds() {
        for table in [&LATENCY_MICROS[..], &DURATION_MICROS[..]] {
            assert!(table.windows(2).all(|w| w[0] < w[1]));
        }
        let secs = seconds(LATENCY_MICROS);
        assert_eq!((secs[0], secs[14]), (0.0001, 5.0));
        assert_eq!(secs[1], 0.00025, "the same f64 as the decimal literal");
        assert_eq!(seconds(DURATION_MICROS)[13], 3600.0);
        let waits = LatencyCounters::new(&DURATION_MICROS);
        waits.record(Duration::from_secs(20));
        waits.record(Duration::from_secs(7200));
        let s = waits.snapshot();
        assert_eq!(s.buckets.len(), DURATION_MICROS.len() + 1);
        assert_eq!(s.buckets[9], (Duration::from_secs(30), 1));
        assert_eq!(s.buckets[14], (Duration::MAX, 1));
    }

    #[test]
    fn buckets_are_inclusive_upper_bounds() {
        let us = Duration::from_micros;
        assert_eq!(bucket_index(us(0)), 0);
        assert_eq!(bucket_index(us(100)), 0);
        assert_eq!(bucket_index(us(101)), 1);
        assert_eq!(bucket_index(us(1_000)), 3);
        assert_eq!(bucket_index(us(5_000_000)), LATENCY_MICROS.len() - 1);
        assert_eq!(bucket_index(us(5_000_001)), LATENCY_MICROS.len());
        assert_eq!(bucket_index(Duration::MAX), BUCKETS - 1);
        // A fraction of a microsecond above a bound is above it, as the
        // `metrics` histogram (seconds, `le`) sees it.
        assert_eq!(bucket_index(Duration::from_nanos(250_400)), 2);
        assert_eq!(bucket_index(Duration::from_nanos(250_000)), 1);
        assert!(LATENCY_MICROS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn latency_keeps_count_sum_max_and_buckets() {
        let l = LatencyCounters::default();
        for ms in [1, 1, 2, 40, 3_000] {
            l.record(ms * MS);
        }
        let s = l.snapshot();
        assert_eq!(s.count, 5);
        assert_eq!(s.sum, 3_044 * MS);
        assert_eq!(s.max, 3_000 * MS);
        assert_eq!(s.buckets.len(), BUCKETS);
        assert_eq!(s.buckets.iter().map(|b| b.1).sum::<u64>(), 5);
        assert_eq!(s.buckets[3], (MS, 2), "two replies of exactly 1 ms");
        assert_eq!(s.buckets.last().map(|b| b.0), Some(Duration::MAX));
        assert_eq!(s.mean(), Some(Duration::from_micros(608_800)));
        assert!(l.snapshot().count == 5, "a snapshot does not reset");
    }

    #[test]
    fn quantiles_are_bucket_upper_bounds_capped_by_the_max() {
        let l = LatencyCounters::default();
        assert_eq!(l.snapshot().quantile(0.5), None);
        assert_eq!(l.snapshot().mean(), None);
        for _ in 0..98 {
            l.record(Duration::from_micros(700));
        }
        l.record(30 * MS);
        l.record(7 * Duration::from_secs(1));
        let s = l.snapshot();
        assert_eq!(s.quantile(0.5), Some(MS));
        assert_eq!(s.quantile(0.98), Some(MS));
        assert_eq!(s.quantile(0.99), Some(50 * MS));
        assert_eq!(s.quantile(1.0), Some(7 * Duration::from_secs(1)));
        assert_eq!(s.quantile(0.0), Some(MS), "the first reply's bucket");
        assert_eq!(s.quantile(f64::NAN), s.quantile(1.0));

        let one = LatencyCounters::default();
        one.record(Duration::from_micros(130));
        assert_eq!(
            one.snapshot().quantile(0.5),
            Some(Duration::from_micros(130)),
            "never above the maximum seen"
        );
    }

    #[test]
    fn histograms_merge_into_one() {
        let (a, b) = (LatencyCounters::default(), LatencyCounters::default());
        a.record(MS);
        a.record(40 * MS);
        b.record(MS);
        b.record(3_000 * MS);
        let s = LatencyCounters::merged([&a, &b]);
        assert_eq!((s.count, s.sum, s.max), (4, 3_042 * MS, 3_000 * MS));
        assert_eq!(s.buckets[3], (MS, 2));
        assert_eq!(s.buckets.iter().map(|b| b.1).sum::<u64>(), 4);
    }
}
