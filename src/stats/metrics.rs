//! The counters of [`Redlock::stats`](crate::Redlock::stats), reported
//! through the [`metrics`](https://docs.rs/metrics) facade as they are
//! recorded (feature `metrics`).
//!
//! Install a recorder (e.g. `metrics-exporter-prometheus`) **before**
//! [`Builder::build`](crate::Builder::build): each node registers its
//! series then. Without a recorder every update is a no-op. The names
//! follow Prometheus conventions: base units (seconds), `_total` on
//! counters, one label per dimension, no resource names as labels.
//! [`METRICS`] lists every series (name, kind, labels, help, buckets) and
//! shows them in a table, the one `docs/operations.md` shows too.
//!
//! `node` is `host:port/db`, as in [`NodeStats::node`](crate::NodeStats::node).
//! The lock series have no client label: every [`Redlock`](crate::Redlock)
//! of the process adds to the same series. The permit series are the lock
//! series' counterparts for semaphores (no semaphore name as a label
//! either), and the election series their counterparts for campaigns (no
//! election name as a label), the read and write series theirs for the
//! two sides of read–write locks; a permit acquire moves only the permit
//! series, a campaign only the election series, a read or a write only
//! its side's, a lock acquire only the lock series. Renewals and signals
//! count them all. The numbers match `stats()`,
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

/// Writes the series from one list: a constant for each name, [`METRICS`]
/// and its table (in its docs, and for the check of `docs/operations.md`).
/// A row: `CONSTANT = "name", kind(buckets) [labels]: "help";`.
macro_rules! table {
    ($($konst:ident = $name:literal, $kind:ident $(($buckets:expr))? [$($label:literal),*]:
        $help:literal;)*) => {
        $(
            #[doc = concat!($help, "\n\nA ", stringify!($kind), ", ", table!(@doc $($label),*), ".")]
            pub const $konst: &str = $name;
        )*

        #[doc = concat!(
            "Every series, with its kind, labels and help text: what [`describe`] registers.\n\n",
            table!(@table $($name $kind [$($label),*] $help)*),
        )]
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
        pub const METRICS: &[Metric] = &[$(Metric {
            name: $name,
            kind: table!(@kind $kind),
            labels: &[$($label),*],
            help: $help,
            buckets: table!(@buckets $($buckets)?),
        }),*];

        /// The table of [`METRICS`]'s docs, for the check of `docs/operations.md`.
        #[cfg(test)]
        const TABLE: &str = table!(@table $($name $kind [$($label),*] $help)*);
    };
    (@table $($name:literal $kind:ident [$($label:literal),*] $help:literal)*) => {
        concat!("| name | type | labels | what |\n|---|---|---|---|\n", $(
            "| `", $name, "` | ", stringify!($kind), " | ", table!(@cell $($label),*), "| ", $help,
            " |\n",
        )*)
    };
    (@list $first:literal $(, $rest:literal)*) => { concat!("`", $first, "`" $(, ", `", $rest, "`")*) };
    (@cell) => { "" };
    (@cell $($label:literal),+) => { concat!(table!(@list $($label),+), " ") };
    (@doc) => { "no labels" };
    (@doc $($label:literal),+) => { concat!("labels ", table!(@list $($label),+)) };
    (@kind counter) => { Kind::Counter };
    (@kind gauge) => { Kind::Gauge };
    (@kind histogram) => { Kind::Histogram };
    (@buckets) => { None };
    (@buckets $buckets:expr) => { Some(&$buckets) };
}

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
pub const LATENCY_BUCKETS: [f64; 15] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

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
pub const DURATION_BUCKETS: [f64; 14] = [
    0.001, 0.01, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0,
];

table! {
    COMMANDS = "quorumlock_node_commands_total", counter ["node"]:
        "Commands sent to the node.";
    VOTES = "quorumlock_node_votes_total", counter ["node", "op", "vote"]:
        "Replies to lock commands by operation (acquire, extend, release) and vote (yes: done; \
         no: held elsewhere or not ours).";
    TIMEOUTS = "quorumlock_node_timeouts_total", counter ["node"]:
        "Commands with no reply within the per-node timeout.";
    CONNECTION_ERRORS = "quorumlock_node_connection_errors_total", counter ["node"]:
        "Commands that failed because the connection was refused, dropped or could not be made.";
    PROTOCOL_ERRORS = "quorumlock_node_protocol_errors_total", counter ["node"]:
        "Replies the client could not interpret.";
    QUARANTINED = "quorumlock_node_quarantined_total", counter ["node"]:
        "Votes withheld or not counted: the node restarted or failed over too recently, or another \
         server cast the vote.";
    NOT_DURABLE = "quorumlock_node_not_durable_total", counter ["node"]:
        "Yes votes not counted: their write missed the replicas (or append-only files) durable \
         votes require.";
    ERROR_REPLIES = "quorumlock_node_error_replies_total", counter ["node", "code"]:
        "Error replies by code (WRONGTYPE, OOM, NOSCRIPT, BUSY, NOAUTH, READONLY, …, OTHER).";
    REPLY_SECONDS = "quorumlock_node_reply_duration_seconds", histogram(LATENCY_BUCKETS) ["node"]:
        "Time from sending a command to its reply (error replies included, timeouts not).";
    NODE_UP = "quorumlock_node_up", gauge ["node"]:
        "1 while the node's last command got an answer it can vote after (a reply, or an error \
         reply about one key or command: WRONGTYPE, NOPERM, OOM, …); 0 after a timeout, a \
         connection failure, refused credentials (WRONGPASS, NOAUTH), a node this client \
         refuses (another node's server, an evicting policy), a vote withheld by the restart \
         quarantine, and before the first reply.";
    // Each primitive's five series, one primitive after the other, in the
    // order of `Primitive` and of these (`stats::locks::series` reads them here).
    ACQUIRES = "quorumlock_lock_acquires_total", counter ["outcome"]:
        "Acquire calls by outcome (granted, contended, unavailable, misconfigured, other), and \
         granted locks whose holder was told before their release that they were lost, \
         uncertain or expired (lost).";
    ATTEMPT_SECONDS = "quorumlock_lock_attempt_duration_seconds", histogram(LATENCY_BUCKETS) []:
        "Time one acquire attempt took, the release of a refused attempt's keys included.";
    WAIT_SECONDS = "quorumlock_lock_wait_duration_seconds", histogram(DURATION_BUCKETS) []:
        "Time one acquire call took, every attempt and the pauses between them included.";
    HOLD_SECONDS = "quorumlock_lock_hold_duration_seconds", histogram(DURATION_BUCKETS) []:
        "Time a lock was held, from the grant to its release or drop.";
    LOCKS_HELD = "quorumlock_locks_held", gauge []:
        "Locks granted and not yet released or dropped.";
    PERMIT_ACQUIRES = "quorumlock_permit_acquires_total", counter ["outcome"]:
        "Semaphore acquire calls by outcome (granted, contended, unavailable, misconfigured, \
         other), and holders of permits told before their release that they were lost, \
         uncertain or expired (lost).";
    PERMIT_ATTEMPT_SECONDS = "quorumlock_permit_attempt_duration_seconds",
        histogram(LATENCY_BUCKETS) []:
        "Time one semaphore acquire attempt took, the release of a refused attempt's slots \
         included.";
    PERMIT_WAIT_SECONDS = "quorumlock_permit_wait_duration_seconds",
        histogram(DURATION_BUCKETS) []:
        "Time one semaphore acquire call took, every attempt and the pauses between them \
         included.";
    PERMIT_HOLD_SECONDS = "quorumlock_permit_hold_duration_seconds",
        histogram(DURATION_BUCKETS) []:
        "Time permits were held, from the grant to their release or drop (one observation per \
         holder).";
    PERMITS_HELD = "quorumlock_permits_held", gauge []:
        "Permits granted and not yet released or dropped (a holder of k permits counts k).";
    ELECTION_ACQUIRES = "quorumlock_election_acquires_total", counter ["outcome"]:
        "Campaign acquire calls by outcome (granted: elected; contended, unavailable, \
         misconfigured, other), and leaderships whose holder was told before the resignation \
         that they were lost, uncertain or expired (lost).";
    ELECTION_ATTEMPT_SECONDS = "quorumlock_election_attempt_duration_seconds",
        histogram(LATENCY_BUCKETS) []:
        "Time one campaign acquire attempt took, the release of a refused attempt's keys \
         included.";
    ELECTION_WAIT_SECONDS = "quorumlock_election_wait_duration_seconds",
        histogram(DURATION_BUCKETS) []:
        "Time one campaign acquire call took (the time to be elected), every attempt and the \
         pauses between them included.";
    ELECTION_HOLD_SECONDS = "quorumlock_election_hold_duration_seconds",
        histogram(DURATION_BUCKETS) []:
        "Time a leadership lasted, from the election to its resignation, drop or end.";
    ELECTIONS_HELD = "quorumlock_elections_held", gauge []:
        "Elections this client leads now (leaderships granted and not yet resigned or dropped).";
    READ_ACQUIRES = "quorumlock_read_acquires_total", counter ["outcome"]:
        "Read-side acquire calls of read-write locks by outcome (granted, contended, \
         unavailable, misconfigured, other), and granted reads that later ended lost (lost).";
    READ_ATTEMPT_SECONDS = "quorumlock_read_attempt_duration_seconds",
        histogram(LATENCY_BUCKETS) []:
        "Time one read-side acquire attempt took, the release of a refused attempt's entry \
         included.";
    READ_WAIT_SECONDS = "quorumlock_read_wait_duration_seconds", histogram(DURATION_BUCKETS) []:
        "Time one read-side acquire call took, every attempt and the pauses between them \
         included.";
    READ_HOLD_SECONDS = "quorumlock_read_hold_duration_seconds", histogram(DURATION_BUCKETS) []:
        "Time a read side was held, from the grant to its release or drop.";
    READS_HELD = "quorumlock_reads_held", gauge []:
        "Read sides granted and not yet released or dropped.";
    WRITE_ACQUIRES = "quorumlock_write_acquires_total", counter ["outcome"]:
        "Write-side acquire calls of read-write locks by outcome (granted, contended, \
         unavailable, misconfigured, other), and granted writes that later ended lost (lost).";
    WRITE_ATTEMPT_SECONDS = "quorumlock_write_attempt_duration_seconds",
        histogram(LATENCY_BUCKETS) []:
        "Time one write-side acquire attempt took, the release of a refused attempt's key \
         included.";
    WRITE_WAIT_SECONDS = "quorumlock_write_wait_duration_seconds",
        histogram(DURATION_BUCKETS) []:
        "Time one write-side acquire call took, every attempt and the pauses between them \
         included (the wait for the readers).";
    WRITE_HOLD_SECONDS = "quorumlock_write_hold_duration_seconds",
        histogram(DURATION_BUCKETS) []:
        "Time a write side was held, from the grant to its release or drop.";
    WRITES_HELD = "quorumlock_writes_held", gauge []:
        "Write sides granted and not yet released or dropped.";
    ELECTION_UNREACHABLE = "quorumlock_election_unreachable_total", counter []:
        "Campaign attempts that found too few nodes answering for a quorum, after which the \
         campaign waited on (it logs a warning when this begins, and when a quorum answers again).";
    RENEWALS = "quorumlock_lock_renewals_total", counter []:
        "Automatic renewals that reached a quorum in time.";
    RENEWAL_FAILURES = "quorumlock_lock_renewal_failures_total", counter []:
        "Automatic renewal attempts that did not reach a quorum in time.";
    SIGNALS = "quorumlock_lock_signals_total", counter ["kind"]:
        "Lost-lock signals by kind (uncertain, lost, expired, limit_reached).";
}

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

    /// `docs/operations.md` shows the table of [`METRICS`]' docs, as it
    /// is: a metric added, changed or removed in the code but not in the
    /// docs fails here, and so does a row for a metric the code does not
    /// have. With `QUORUMLOCK_WRITE_DOCS=1` it rewrites the docs' table.
    #[test]
    fn the_documented_table_is_the_metrics_table() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/operations.md");
        let docs = include_str!("../../docs/operations.md");
        // The table: from its header row to the next blank line.
        let header = &TABLE[..TABLE.find('\n').unwrap_or(0)];
        let start = docs.find(header).expect("a table of metrics in the docs");
        let end = docs[start..]
            .find("\n\n")
            .map_or(docs.len(), |n| start + n + 1);
        if docs[start..end] == *TABLE {
            let rows = docs.lines().filter(|l| l.starts_with("| `quorumlock_"));
            assert_eq!(rows.count(), METRICS.len(), "a row outside the table");
        } else if std::env::var_os("QUORUMLOCK_WRITE_DOCS").is_some() {
            let docs = format!("{}{TABLE}{}", &docs[..start], &docs[end..]);
            std::fs::write(path, docs).expect("write docs/operations.md");
        } else {
            panic!(
                "the table of metrics in {path} is not METRICS'. To rewrite it from METRICS, \
                 run `QUORUMLOCK_WRITE_DOCS=1 cargo test -p quorumlock --lib \
                 the_documented_table`. METRICS' table:\n{TABLE}"
            );
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
