//! The counters of [`Redlock::stats`](crate::Redlock::stats), reported
//! through the [`metrics`](https://docs.rs/metrics) facade as they are
//! recorded (feature `metrics`).
//!
//! Install a recorder (e.g. `metrics-exporter-prometheus`) **before**
//! [`Builder::build`](crate::Builder::build): each node registers its
//! series then. Without a recorder every update is a no-op. The names
//! follow Prometheus conventions: base units (seconds), `_total` on
//! counters, one label per dimension, no resource names as labels.
//! [`METRICS`] lists every series; this table is checked against it:
//!
//! | name | type | labels | what |
//! |---|---|---|---|
//! | `quorumlock_node_commands_total` | counter | `node` | Commands sent to the node. |
//! | `quorumlock_node_votes_total` | counter | `node`, `op`, `vote` | Replies to lock commands by operation (acquire, extend, release) and vote (yes: done; no: held elsewhere or not ours). |
//! | `quorumlock_node_timeouts_total` | counter | `node` | Commands with no reply within the per-node timeout. |
//! | `quorumlock_node_connection_errors_total` | counter | `node` | Commands that failed because the connection was refused, dropped or could not be made. |
//! | `quorumlock_node_protocol_errors_total` | counter | `node` | Replies the client could not interpret. |
//! | `quorumlock_node_quarantined_total` | counter | `node` | Acquire votes withheld because the node restarted too recently. |
//! | `quorumlock_node_error_replies_total` | counter | `node`, `code` | Error replies by code (WRONGTYPE, OOM, NOSCRIPT, BUSY, NOAUTH, READONLY, …, OTHER). |
//! | `quorumlock_node_reply_duration_seconds` | histogram | `node` | Time from sending a command to its reply (error replies included, timeouts not). |
//! | `quorumlock_node_up` | gauge | `node` | 1 while the node's last command got a reply (an error reply included), 0 after a timeout or a connection failure and before the first reply. |
//! | `quorumlock_lock_acquires_total` | counter | `outcome` | Acquire calls by outcome (granted, contended, unavailable, misconfigured, other), and granted locks that later ended lost (lost). |
//! | `quorumlock_lock_attempt_duration_seconds` | histogram | | Time one acquire attempt took, the release of a refused attempt's keys included. |
//! | `quorumlock_lock_wait_duration_seconds` | histogram | | Time one acquire call took, every attempt and the pauses between them included. |
//! | `quorumlock_lock_hold_duration_seconds` | histogram | | Time a lock was held, from the grant to its release or drop. |
//! | `quorumlock_locks_held` | gauge | | Locks granted and not yet released or dropped. |
//! | `quorumlock_permit_acquires_total` | counter | `outcome` | Semaphore acquire calls by outcome (granted, contended, unavailable, misconfigured, other), and granted permits that later ended lost (lost). |
//! | `quorumlock_permit_attempt_duration_seconds` | histogram | | Time one semaphore acquire attempt took, the release of a refused attempt's slots included. |
//! | `quorumlock_permit_wait_duration_seconds` | histogram | | Time one semaphore acquire call took, every attempt and the pauses between them included. |
//! | `quorumlock_permit_hold_duration_seconds` | histogram | | Time permits were held, from the grant to their release or drop (one observation per holder). |
//! | `quorumlock_permits_held` | gauge | | Permits granted and not yet released or dropped (a holder of k permits counts k). |
//! | `quorumlock_election_acquires_total` | counter | `outcome` | Campaign acquire calls by outcome (granted: elected; contended, unavailable, misconfigured, other), and leaderships that later ended lost (lost). |
//! | `quorumlock_election_attempt_duration_seconds` | histogram | | Time one campaign acquire attempt took, the release of a refused attempt's keys included. |
//! | `quorumlock_election_wait_duration_seconds` | histogram | | Time one campaign acquire call took (the time to be elected), every attempt and the pauses between them included. |
//! | `quorumlock_election_hold_duration_seconds` | histogram | | Time a leadership lasted, from the election to its resignation, drop or end. |
//! | `quorumlock_elections_held` | gauge | | Elections this client leads now (leaderships granted and not yet resigned or dropped). |
//! | `quorumlock_lock_renewals_total` | counter | | Automatic renewals that reached a quorum in time. |
//! | `quorumlock_lock_renewal_failures_total` | counter | | Automatic renewal attempts that did not reach a quorum in time. |
//! | `quorumlock_lock_signals_total` | counter | `kind` | Lost-lock signals by kind (uncertain, lost, expired, limit_reached). |
//!
//! `node` is `host:port/db`, as in [`NodeStats::node`](crate::NodeStats::node).
//! The lock series have no client label: every [`Redlock`](crate::Redlock)
//! of the process adds to the same series. The permit series are the lock
//! series' counterparts for semaphores (no semaphore name as a label
//! either), and the election series their counterparts for campaigns (no
//! election name as a label); a permit acquire moves only the permit
//! series, a campaign only the election series, a lock acquire only the
//! lock series. Renewals and signals count all three. The numbers match `stats()`,
//! which keeps counting whether or not a recorder is installed.
//!
//! # Examples
//!
//! ```no_run
//! # #[cfg(feature = "metrics")]
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! // With metrics-exporter-prometheus, each histogram with its buckets:
//! // let mut builder = PrometheusBuilder::new();
//! // for m in quorumlock::metrics::METRICS {
//! //     if let Some(buckets) = m.buckets {
//! //         builder = builder.set_buckets_for_metric(Matcher::Full(m.name.into()), buckets)?;
//! //     }
//! // }
//! // let handle = builder.install_recorder()?;
//! quorumlock::metrics::describe();
//! let redlock = quorumlock::Builder::new(["redis://127.0.0.1:6379"]).build().await?;
//! // handle.render() now shows quorumlock_node_commands_total{node="127.0.0.1:6379/0"} …
//! # Ok(())
//! # }
//! ```

#![cfg_attr(not(feature = "metrics"), allow(dead_code, unreachable_pub))]

use crate::stats::latency::{seconds, DURATION_MICROS, LATENCY_MICROS};

/// What kind of series a metric is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kind {
    /// Only goes up.
    Counter,
    /// Goes up and down.
    Gauge,
    /// Observed durations in buckets.
    Histogram,
}

impl Kind {
    /// `counter`, `gauge` or `histogram`.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[cfg(feature = "metrics")]
    /// assert_eq!(quorumlock::metrics::Kind::Gauge.as_str(), "gauge");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// One series of [`METRICS`].
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Metric {
    /// The series' name.
    pub name: &'static str,
    /// Counter, gauge or histogram.
    pub kind: Kind,
    /// Its label names.
    pub labels: &'static [&'static str],
    /// The help text [`describe`] registers.
    pub help: &'static str,
    /// For a histogram, the upper bounds of its buckets in seconds, those
    /// `stats()` uses.
    pub buckets: Option<&'static [f64]>,
}

const fn metric(
    name: &'static str,
    kind: Kind,
    labels: &'static [&'static str],
    help: &'static str,
) -> Metric {
    Metric {
        name,
        kind,
        labels,
        help,
        buckets: None,
    }
}

const fn histogram(
    name: &'static str,
    labels: &'static [&'static str],
    help: &'static str,
    buckets: &'static [f64],
) -> Metric {
    Metric {
        name,
        kind: Kind::Histogram,
        labels,
        help,
        buckets: Some(buckets),
    }
}

pub use crate::stats::names::*;

/// The upper bounds, in seconds, of the reply and attempt histograms'
/// buckets (100 µs … 5 s), those [`Latency`](crate::Latency) uses, for an
/// exporter that takes explicit buckets, so both views agree.
///
/// # Examples
///
/// ```
/// # #[cfg(feature = "metrics")] {
/// let b = quorumlock::metrics::LATENCY_BUCKETS;
/// assert_eq!((b[0], b[b.len() - 1]), (0.0001, 5.0));
/// # }
/// ```
pub const LATENCY_BUCKETS: [f64; LATENCY_MICROS.len()] = seconds(LATENCY_MICROS);

/// The upper bounds, in seconds, of the wait and hold histograms' buckets
/// (1 ms … 1 h).
///
/// # Examples
///
/// ```
/// # #[cfg(feature = "metrics")] {
/// let b = quorumlock::metrics::DURATION_BUCKETS;
/// assert_eq!((b[0], b[b.len() - 1]), (0.001, 3600.0));
/// # }
/// ```
pub const DURATION_BUCKETS: [f64; DURATION_MICROS.len()] = seconds(DURATION_MICROS);

/// Every series, with its kind, labels and help text: what [`describe`]
/// registers and what the table above shows.
///
/// # Examples
///
/// ```
/// # #[cfg(feature = "metrics")] {
/// use quorumlock::metrics::{Kind, METRICS};
/// let held = METRICS.iter().find(|m| m.name == "quorumlock_locks_held").unwrap();
/// assert_eq!(held.kind, Kind::Gauge);
/// assert!(METRICS.iter().all(|m| !m.labels.contains(&"resource")));
/// # }
/// ```
pub const METRICS: &[Metric] = &[
    metric(
        COMMANDS,
        Kind::Counter,
        &["node"],
        "Commands sent to the node.",
    ),
    metric(
        VOTES,
        Kind::Counter,
        &["node", "op", "vote"],
        "Replies to lock commands by operation (acquire, extend, release) and vote (yes: done; \
         no: held elsewhere or not ours).",
    ),
    metric(
        TIMEOUTS,
        Kind::Counter,
        &["node"],
        "Commands with no reply within the per-node timeout.",
    ),
    metric(
        CONNECTION_ERRORS,
        Kind::Counter,
        &["node"],
        "Commands that failed because the connection was refused, dropped or could not be made.",
    ),
    metric(
        PROTOCOL_ERRORS,
        Kind::Counter,
        &["node"],
        "Replies the client could not interpret.",
    ),
    metric(
        QUARANTINED,
        Kind::Counter,
        &["node"],
        "Acquire votes withheld because the node restarted too recently.",
    ),
    metric(
        ERROR_REPLIES,
        Kind::Counter,
        &["node", "code"],
        "Error replies by code (WRONGTYPE, OOM, NOSCRIPT, BUSY, NOAUTH, READONLY, …, OTHER).",
    ),
    histogram(
        REPLY_SECONDS,
        &["node"],
        "Time from sending a command to its reply (error replies included, timeouts not).",
        &LATENCY_BUCKETS,
    ),
    metric(
        NODE_UP,
        Kind::Gauge,
        &["node"],
        "1 while the node's last command got a reply (an error reply included), 0 after a \
         timeout or a connection failure and before the first reply.",
    ),
    metric(
        ACQUIRES,
        Kind::Counter,
        &["outcome"],
        "Acquire calls by outcome (granted, contended, unavailable, misconfigured, other), and \
         granted locks that later ended lost (lost).",
    ),
    histogram(
        ATTEMPT_SECONDS,
        &[],
        "Time one acquire attempt took, the release of a refused attempt's keys included.",
        &LATENCY_BUCKETS,
    ),
    histogram(
        WAIT_SECONDS,
        &[],
        "Time one acquire call took, every attempt and the pauses between them included.",
        &DURATION_BUCKETS,
    ),
    histogram(
        HOLD_SECONDS,
        &[],
        "Time a lock was held, from the grant to its release or drop.",
        &DURATION_BUCKETS,
    ),
    metric(
        LOCKS_HELD,
        Kind::Gauge,
        &[],
        "Locks granted and not yet released or dropped.",
    ),
    metric(
        PERMIT_ACQUIRES,
        Kind::Counter,
        &["outcome"],
        "Semaphore acquire calls by outcome (granted, contended, unavailable, misconfigured, \
         other), and granted permits that later ended lost (lost).",
    ),
    histogram(
        PERMIT_ATTEMPT_SECONDS,
        &[],
        "Time one semaphore acquire attempt took, the release of a refused attempt's slots \
         included.",
        &LATENCY_BUCKETS,
    ),
    histogram(
        PERMIT_WAIT_SECONDS,
        &[],
        "Time one semaphore acquire call took, every attempt and the pauses between them \
         included.",
        &DURATION_BUCKETS,
    ),
    histogram(
        PERMIT_HOLD_SECONDS,
        &[],
        "Time permits were held, from the grant to their release or drop (one observation per \
         holder).",
        &DURATION_BUCKETS,
    ),
    metric(
        PERMITS_HELD,
        Kind::Gauge,
        &[],
        "Permits granted and not yet released or dropped (a holder of k permits counts k).",
    ),
    metric(
        ELECTION_ACQUIRES,
        Kind::Counter,
        &["outcome"],
        "Campaign acquire calls by outcome (granted: elected; contended, unavailable, \
         misconfigured, other), and leaderships that later ended lost (lost).",
    ),
    histogram(
        ELECTION_ATTEMPT_SECONDS,
        &[],
        "Time one campaign acquire attempt took, the release of a refused attempt's keys \
         included.",
        &LATENCY_BUCKETS,
    ),
    histogram(
        ELECTION_WAIT_SECONDS,
        &[],
        "Time one campaign acquire call took (the time to be elected), every attempt and the \
         pauses between them included.",
        &DURATION_BUCKETS,
    ),
    histogram(
        ELECTION_HOLD_SECONDS,
        &[],
        "Time a leadership lasted, from the election to its resignation, drop or end.",
        &DURATION_BUCKETS,
    ),
    metric(
        ELECTIONS_HELD,
        Kind::Gauge,
        &[],
        "Elections this client leads now (leaderships granted and not yet resigned or dropped).",
    ),
    metric(
        RENEWALS,
        Kind::Counter,
        &[],
        "Automatic renewals that reached a quorum in time.",
    ),
    metric(
        RENEWAL_FAILURES,
        Kind::Counter,
        &[],
        "Automatic renewal attempts that did not reach a quorum in time.",
    ),
    metric(
        SIGNALS,
        Kind::Counter,
        &["kind"],
        "Lost-lock signals by kind (uncertain, lost, expired, limit_reached).",
    ),
];

/// Registers the help text and unit of every metric of [`METRICS`]
/// with the installed recorder (Prometheus `# HELP` lines). Optional;
/// call it once after installing the recorder.
///
/// # Examples
///
/// ```
/// quorumlock::metrics::describe(); // a no-op without a recorder
/// ```
#[cfg(feature = "metrics")]
pub fn describe() {
    use ::metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    for m in METRICS {
        match m.kind {
            Kind::Counter => describe_counter!(m.name, Unit::Count, m.help),
            Kind::Gauge => describe_gauge!(m.name, Unit::Count, m.help),
            Kind::Histogram => describe_histogram!(m.name, Unit::Seconds, m.help),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table of a document's metrics: one row per metric, in order.
    fn rows(prefix: &str) -> String {
        METRICS
            .iter()
            .map(|m| {
                let labels: Vec<String> = m.labels.iter().map(|l| format!("`{l}`")).collect();
                // An empty cell is `| |`, as a table written by hand has it.
                let labels = match labels.join(", ") {
                    l if l.is_empty() => l,
                    l => l + " ",
                };
                format!(
                    "{prefix}| `{}` | {} | {labels}| {} |\n",
                    m.name,
                    m.kind.as_str(),
                    m.help
                )
            })
            .collect()
    }

    /// The rustdoc table above and the one in `docs/operations.md` list
    /// every metric of [`METRICS`], as it is, and no other (a metric added
    /// to the code but not to the docs fails here, and so does one that
    /// the docs list but the code no longer has).
    #[test]
    fn the_documented_tables_are_the_metrics_table() {
        let header = "| name | type | labels | what |\n|---|---|---|---|\n";
        let rustdoc = include_str!("metrics.rs");
        let table = format!(
            "//! {}//! {}{}",
            &header[..header.find('\n').unwrap_or(0) + 1],
            &header[header.find('\n').unwrap_or(0) + 1..],
            rows("//! ")
        );
        assert!(
            rustdoc.contains(&table),
            "the module docs' table is not:\n{table}"
        );
        let docs = include_str!("../../docs/operations.md");
        let table = format!("{header}{}", rows(""));
        assert!(
            docs.contains(&table),
            "docs/operations.md's table is not:\n{table}"
        );
        for (text, prefix) in [(rustdoc, "//! | `quorumlock_"), (docs, "| `quorumlock_")] {
            let listed = text.lines().filter(|l| l.starts_with(prefix)).count();
            assert_eq!(listed, METRICS.len(), "a row for a metric not in METRICS");
        }
    }

    #[test]
    fn names_follow_the_conventions_and_histograms_have_buckets() {
        for m in METRICS {
            assert!(m.name.starts_with("quorumlock_"), "{}", m.name);
            match m.kind {
                Kind::Counter => assert!(m.name.ends_with("_total"), "{}", m.name),
                Kind::Histogram => assert!(m.name.ends_with("_seconds"), "{}", m.name),
                Kind::Gauge => assert!(!m.name.ends_with("_total"), "{}", m.name),
            }
            assert_eq!(m.buckets.is_some(), m.kind == Kind::Histogram, "{}", m.name);
            assert!(!m.labels.contains(&"resource"), "{}", m.name);
        }
        let mut names: Vec<&str> = METRICS.iter().map(|m| m.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), METRICS.len(), "a name listed twice");
    }
}
