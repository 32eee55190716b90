//! The duration histograms of `stats`: fixed buckets, a count, a sum and a
//! maximum, recorded with relaxed atomic adds, each also reported to its
//! series. The bucket tables are those `metrics` exports
//! (`LATENCY_BUCKETS`, `DURATION_BUCKETS`, in seconds), the only ones.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use crate::stats::series::Histogram;
use crate::stats::Latency;

/// Index of the bucket of `bounds` a duration falls into.
///
/// Compared in seconds as `f64`, as the `metrics` histogram compares a
/// value with its `le` bounds: a latency a fraction of a microsecond above
/// a bound falls in the next bucket in both (truncating to whole
/// microseconds put it one bucket lower).
fn bucket_index(bounds: &[f64], elapsed: Duration) -> usize {
    let secs = elapsed.as_secs_f64();
    bounds
        .iter()
        .position(|&bound| secs <= bound)
        .unwrap_or(bounds.len())
}

/// A histogram over one of the bucket tables, and its series.
#[derive(Debug)]
pub(crate) struct LatencyCounters {
    /// Upper bounds in seconds, inclusive and increasing.
    bounds: &'static [f64],
    series: Histogram,
    sum_micros: AtomicU64,
    max_micros: AtomicU64,
    /// One per bound, and one for everything above the last: the count is
    /// their sum.
    buckets: Box<[AtomicU64]>,
}

impl LatencyCounters {
    /// An empty histogram over `bounds`, each duration also recorded in
    /// `series`.
    pub(crate) fn new(bounds: &'static [f64], series: Histogram) -> Self {
        Self {
            bounds,
            series,
            sum_micros: AtomicU64::new(0),
            max_micros: AtomicU64::new(0),
            buckets: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// One duration.
    pub(crate) fn record(&self, elapsed: Duration) {
        let us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        self.sum_micros.fetch_add(us, Relaxed);
        self.max_micros.fetch_max(us, Relaxed);
        if let Some(b) = self.buckets.get(bucket_index(self.bounds, elapsed)) {
            b.fetch_add(1, Relaxed);
        }
        self.series.record(elapsed.as_secs_f64());
    }

    /// A copy of the histogram.
    pub(crate) fn snapshot(&self) -> Latency {
        let bounds = self.bounds.iter().map(|&secs| {
            // Exact: every bound is a whole number of microseconds.
            Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX)
        });
        // Every duration is in one bucket: their counts add up to the count.
        let counts: Vec<u64> = self.buckets.iter().map(|n| n.load(Relaxed)).collect();
        Latency {
            count: counts.iter().sum(),
            sum: Duration::from_micros(self.sum_micros.load(Relaxed)),
            max: Duration::from_micros(self.max_micros.load(Relaxed)),
            buckets: bounds.chain([Duration::MAX]).zip(counts).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::metrics::{DURATION_BUCKETS, LATENCY_BUCKETS};

    impl Default for LatencyCounters {
        fn default() -> Self {
            Self::new(&LATENCY_BUCKETS, Histogram::noop())
        }
    }

    const MS: Duration = Duration::from_millis(1);

    const BUCKETS: usize = LATENCY_BUCKETS.len() + 1;

    fn bucket_index(elapsed: Duration) -> usize {
        super::bucket_index(&LATENCY_BUCKETS, elapsed)
    }

    #[test]
    fn the_tables_increase_and_read_the_same_in_seconds() {
        for table in [&LATENCY_BUCKETS[..], &DURATION_BUCKETS[..]] {
            assert!(table.windows(2).all(|w| w[0] < w[1]));
            for &secs in table {
                let us = Duration::from_micros((secs * 1e6).round() as u64);
                assert_eq!(us.as_secs_f64(), secs, "a whole number of microseconds");
            }
        }
        let latency = LatencyCounters::default().snapshot();
        let us = Duration::from_micros;
        assert_eq!(
            latency.buckets[1],
            (us(250), 0),
            "the same bound as in microseconds"
        );
        let waits = LatencyCounters::new(&DURATION_BUCKETS, Histogram::noop());
        waits.record(Duration::from_secs(20));
        waits.record(Duration::from_secs(7200));
        let s = waits.snapshot();
        assert_eq!(s.buckets.len(), DURATION_BUCKETS.len() + 1);
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
        assert_eq!(bucket_index(us(5_000_000)), LATENCY_BUCKETS.len() - 1);
        assert_eq!(bucket_index(us(5_000_001)), LATENCY_BUCKETS.len());
        assert_eq!(bucket_index(Duration::MAX), BUCKETS - 1);
        // A fraction of a microsecond above a bound is above it, as the
        // `metrics` histogram (seconds, `le`) sees it.
        assert_eq!(bucket_index(Duration::from_nanos(250_400)), 2);
        assert_eq!(bucket_index(Duration::from_nanos(250_000)), 1);
        assert!(LATENCY_BUCKETS.windows(2).all(|w| w[0] < w[1]));
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
}
