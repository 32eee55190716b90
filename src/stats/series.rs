//! The recording side of [`crate::stats::metrics`]: the `metrics` facade's
//! handles (feature `metrics`), or handles that do nothing without it, and
//! [`Count`], a count of `stats()` with its series beside it — so the
//! counters record each event once, for both builds.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

#[cfg(not(feature = "metrics"))]
pub(crate) use disabled::*;
#[cfg(feature = "metrics")]
pub(crate) use enabled::*;

/// The labels of one series: `(name, value)` pairs, in order.
pub(crate) type Labels<'a> = &'a [(&'static str, &'a str)];

#[cfg(feature = "metrics")]
mod enabled {
    pub(crate) use ::metrics::{Counter, Gauge, Histogram};

    use super::Labels;

    fn owned(labels: Labels<'_>) -> Vec<::metrics::Label> {
        labels
            .iter()
            .map(|&(k, v)| ::metrics::Label::new(k, v.to_owned()))
            .collect()
    }

    /// The handle of counter `name` with `labels`, registered now.
    pub(crate) fn counter(name: &'static str, labels: Labels<'_>) -> Counter {
        ::metrics::counter!(name, owned(labels))
    }

    /// The handle of gauge `name` with `labels`, registered now.
    pub(crate) fn gauge(name: &'static str, labels: Labels<'_>) -> Gauge {
        ::metrics::gauge!(name, owned(labels))
    }

    /// The handle of histogram `name` with `labels`, registered now.
    pub(crate) fn histogram(name: &'static str, labels: Labels<'_>) -> Histogram {
        ::metrics::histogram!(name, owned(labels))
    }
}

/// Without the feature: the same calls, doing nothing.
#[cfg(not(feature = "metrics"))]
mod disabled {
    use super::Labels;

    /// A handle that records nothing.
    #[derive(Debug)]
    pub(crate) struct Off;
    pub(crate) type Counter = Off;
    pub(crate) type Gauge = Off;
    pub(crate) type Histogram = Off;

    impl Off {
        #[cfg(test)]
        pub(crate) const fn noop() -> Self {
            Off
        }
        pub(crate) fn increment<T>(&self, _: T) {}
        pub(crate) fn decrement<T>(&self, _: T) {}
        pub(crate) fn set<T>(&self, _: T) {}
        pub(crate) fn record<T>(&self, _: T) {}
    }

    pub(crate) fn counter(_: &'static str, _: Labels<'_>) -> Off {
        Off
    }
    pub(crate) use counter as gauge;
    pub(crate) use counter as histogram;
}

/// A count `stats()` reads and the handle of its series, registered once
/// (the hot path only adds).
#[derive(Debug)]
pub(crate) struct Count {
    n: AtomicU64,
    series: Counter,
}

impl Count {
    /// Counts under series `name` with `labels`.
    pub(crate) fn new(name: &'static str, labels: Labels<'_>) -> Self {
        Self {
            n: AtomicU64::new(0),
            series: counter(name, labels),
        }
    }

    /// One more.
    pub(crate) fn add(&self) {
        self.n.fetch_add(1, Relaxed);
        self.series.increment(1);
    }

    /// The count so far.
    pub(crate) fn get(&self) -> u64 {
        self.n.load(Relaxed)
    }
}

/// Adds one to `count` and to series `name` with `labels`, looked up now:
/// for events rarer than commands, whose series appear when first seen.
pub(crate) fn bump(count: &AtomicU64, name: &'static str, labels: Labels<'_>) {
    count.fetch_add(1, Relaxed);
    counter(name, labels).increment(1);
}
