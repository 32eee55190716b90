//! The counters of [`Redlock::stats`](crate::Redlock::stats), reported
//! through the [`metrics`](https://docs.rs/metrics) facade as they are
//! recorded (feature `metrics`).
//!
//! Install a recorder (e.g. `metrics-exporter-prometheus`) **before**
//! [`Builder::build`](crate::Builder::build): each node registers its
//! counters then. Without a recorder every update is a no-op. The names
//! follow Prometheus conventions: base units (seconds), `_total` on
//! counters, one label per dimension.
//!
//! | name | type | labels | what |
//! |---|---|---|---|
//! | `quorumlock_node_commands_total` | counter | `node` | commands sent |
//! | `quorumlock_node_votes_total` | counter | `node`, `op` (`acquire`/`extend`/`release`), `vote` (`yes`/`no`) | lock command replies |
//! | `quorumlock_node_timeouts_total` | counter | `node` | no reply within the per-node timeout |
//! | `quorumlock_node_connection_errors_total` | counter | `node` | refused, dropped or failed connections |
//! | `quorumlock_node_protocol_errors_total` | counter | `node` | replies this client could not interpret |
//! | `quorumlock_node_quarantined_total` | counter | `node` | acquire votes withheld after a restart |
//! | `quorumlock_node_error_replies_total` | counter | `node`, `code` (`WRONGTYPE`, `OOM`, …, `OTHER`) | error replies |
//! | `quorumlock_node_reply_duration_seconds` | histogram | `node` | time from sending to the reply |
//! | `quorumlock_lock_renewals_total` | counter | | automatic renewals that reached a quorum |
//! | `quorumlock_lock_renewal_failures_total` | counter | | automatic renewals that did not |
//! | `quorumlock_lock_signals_total` | counter | `kind` (`uncertain`/`lost`/`expired`/`limit_reached`) | lost-lock signals |
//!
//! `node` is `host:port/db`, as in [`NodeStats::node`](crate::NodeStats::node).
//! The lock counters have no client label: every [`Redlock`](crate::Redlock)
//! of the process adds to the same series. The numbers match `stats()`,
//! which keeps counting whether or not a recorder is installed.
//!
//! # Examples
//!
//! ```no_run
//! # #[cfg(feature = "metrics")]
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! // With metrics-exporter-prometheus:
//! // let handle = PrometheusBuilder::new()
//! //     .set_buckets_for_metric(
//! //         Matcher::Full(quorumlock::metrics::REPLY_SECONDS.into()),
//! //         &quorumlock::metrics::LATENCY_BUCKETS,
//! //     )?
//! //     .install_recorder()?;
//! quorumlock::metrics::describe();
//! let redlock = quorumlock::Builder::new(["redis://127.0.0.1:6379"]).build().await?;
//! // handle.render() now shows quorumlock_node_commands_total{node="127.0.0.1:6379/0"} …
//! # Ok(())
//! # }
//! ```

#[cfg(not(feature = "metrics"))]
pub(crate) use disabled::*;
#[cfg(feature = "metrics")]
pub use enabled::*;

#[cfg(feature = "metrics")]
mod enabled {
    use std::sync::Arc;
    use std::time::Duration;

    use ::metrics::{counter, describe_counter, describe_histogram, Counter, Histogram, Unit};

    use crate::error::Operation;

    /// Commands sent to a node; label `node`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(quorumlock::metrics::COMMANDS, "quorumlock_node_commands_total");
    /// ```
    pub const COMMANDS: &str = "quorumlock_node_commands_total";
    /// A node's replies to lock commands; labels `node`, `op`
    /// (`acquire`, `extend`, `release`) and `vote` (`yes`, `no`).
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(quorumlock::metrics::VOTES, "quorumlock_node_votes_total");
    /// ```
    pub const VOTES: &str = "quorumlock_node_votes_total";
    /// Commands with no reply within the per-node timeout; label `node`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(quorumlock::metrics::TIMEOUTS, "quorumlock_node_timeouts_total");
    /// ```
    pub const TIMEOUTS: &str = "quorumlock_node_timeouts_total";
    /// Refused, dropped or failed connections; label `node`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(quorumlock::metrics::CONNECTION_ERRORS.ends_with("_total"));
    /// ```
    pub const CONNECTION_ERRORS: &str = "quorumlock_node_connection_errors_total";
    /// Replies this client could not interpret; label `node`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(quorumlock::metrics::PROTOCOL_ERRORS.ends_with("_total"));
    /// ```
    pub const PROTOCOL_ERRORS: &str = "quorumlock_node_protocol_errors_total";
    /// Acquire votes withheld because the node restarted too recently;
    /// label `node`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(quorumlock::metrics::QUARANTINED.ends_with("_total"));
    /// ```
    pub const QUARANTINED: &str = "quorumlock_node_quarantined_total";
    /// Error replies; labels `node` and `code` (`WRONGTYPE`, `OOM`,
    /// `NOSCRIPT`, `BUSY`, `NOAUTH`, `READONLY`, …, `OTHER` for a code not
    /// counted one by one).
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(quorumlock::metrics::ERROR_REPLIES.ends_with("_total"));
    /// ```
    pub const ERROR_REPLIES: &str = "quorumlock_node_error_replies_total";
    /// Histogram of reply latency in seconds (error replies included,
    /// timeouts not); label `node`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(quorumlock::metrics::REPLY_SECONDS.ends_with("_seconds"));
    /// ```
    pub const REPLY_SECONDS: &str = "quorumlock_node_reply_duration_seconds";
    /// Automatic renewals that reached a quorum in time.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(quorumlock::metrics::RENEWALS.ends_with("_total"));
    /// ```
    pub const RENEWALS: &str = "quorumlock_lock_renewals_total";
    /// Automatic renewals that did not.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(quorumlock::metrics::RENEWAL_FAILURES.ends_with("_total"));
    /// ```
    pub const RENEWAL_FAILURES: &str = "quorumlock_lock_renewal_failures_total";
    /// Lost-lock signals; label `kind` (`uncertain`, `lost`, `expired`,
    /// `limit_reached`). One signal that went from uncertain to expired
    /// counts once in each.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(quorumlock::metrics::SIGNALS.ends_with("_total"));
    /// ```
    pub const SIGNALS: &str = "quorumlock_lock_signals_total";

    /// The upper bounds, in seconds, of the buckets
    /// [`Latency`](crate::Latency) uses (100 µs … 5 s), for an exporter
    /// that takes explicit buckets, so both views agree.
    ///
    /// # Examples
    ///
    /// ```
    /// let b = quorumlock::metrics::LATENCY_BUCKETS;
    /// assert_eq!((b[0], b[b.len() - 1]), (0.0001, 5.0));
    /// ```
    pub const LATENCY_BUCKETS: [f64; 15] = [
        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
        5.0,
    ];

    /// Registers the help text and unit of every metric with the installed
    /// recorder (Prometheus `# HELP` lines). Optional; call it once after
    /// installing the recorder.
    ///
    /// # Examples
    ///
    /// ```
    /// quorumlock::metrics::describe(); // a no-op without a recorder
    /// ```
    pub fn describe() {
        describe_counter!(COMMANDS, Unit::Count, "Commands sent to the node.");
        describe_counter!(
            VOTES,
            Unit::Count,
            "Replies to lock commands by operation and vote (yes: done, no: held elsewhere / not ours)."
        );
        describe_counter!(
            TIMEOUTS,
            Unit::Count,
            "Commands with no reply within the per-node timeout."
        );
        describe_counter!(
            CONNECTION_ERRORS,
            Unit::Count,
            "Commands that failed because the connection was refused, dropped or could not be made."
        );
        describe_counter!(
            PROTOCOL_ERRORS,
            Unit::Count,
            "Replies the client could not interpret."
        );
        describe_counter!(
            QUARANTINED,
            Unit::Count,
            "Acquire votes withheld because the node restarted too recently."
        );
        describe_counter!(ERROR_REPLIES, Unit::Count, "Error replies by code.");
        describe_histogram!(
            REPLY_SECONDS,
            Unit::Seconds,
            "Time from sending a command to its reply (error replies included, timeouts not)."
        );
        describe_counter!(
            RENEWALS,
            Unit::Count,
            "Automatic renewals that reached a quorum in time."
        );
        describe_counter!(
            RENEWAL_FAILURES,
            Unit::Count,
            "Automatic renewal attempts that did not reach a quorum in time."
        );
        describe_counter!(SIGNALS, Unit::Count, "Lost-lock signals by kind.");
    }

    /// One node's handles, registered once (the hot path only adds).
    #[derive(Debug)]
    pub(crate) struct NodeMetrics {
        node: Arc<str>,
        commands: Counter,
        /// `[op][yes, no]`, ops in the order acquire, extend, release.
        votes: [[Counter; 2]; 3],
        timeouts: Counter,
        connection_errors: Counter,
        protocol_errors: Counter,
        quarantined: Counter,
        latency: Histogram,
    }

    impl Default for NodeMetrics {
        /// Handles that record nothing (counters made without a node).
        fn default() -> Self {
            let noop = Counter::noop;
            Self {
                node: Arc::from(""),
                commands: noop(),
                votes: std::array::from_fn(|_| [noop(), noop()]),
                timeouts: noop(),
                connection_errors: noop(),
                protocol_errors: noop(),
                quarantined: noop(),
                latency: Histogram::noop(),
            }
        }
    }

    impl NodeMetrics {
        pub(crate) fn new(node: &str) -> Self {
            let label = node.to_owned();
            let per_node = |name: &'static str| counter!(name, "node" => label.clone());
            let vote = |op: &'static str, vote: &'static str| counter!(VOTES, "node" => label.clone(), "op" => op, "vote" => vote);
            Self {
                node: Arc::from(node),
                commands: per_node(COMMANDS),
                votes: [
                    [vote("acquire", "yes"), vote("acquire", "no")],
                    [vote("extend", "yes"), vote("extend", "no")],
                    [vote("release", "yes"), vote("release", "no")],
                ],
                timeouts: per_node(TIMEOUTS),
                connection_errors: per_node(CONNECTION_ERRORS),
                protocol_errors: per_node(PROTOCOL_ERRORS),
                quarantined: per_node(QUARANTINED),
                latency: ::metrics::histogram!(REPLY_SECONDS, "node" => label.clone()),
            }
        }

        pub(crate) fn sent(&self) {
            self.commands.increment(1);
        }

        pub(crate) fn reply(&self, elapsed: Duration) {
            self.latency.record(elapsed.as_secs_f64());
        }

        pub(crate) fn vote(&self, op: Operation, yes: bool) {
            let i = match op {
                Operation::Acquire => 0,
                Operation::Extend => 1,
                Operation::Release => 2,
                Operation::Check => return,
            };
            self.votes[i][usize::from(!yes)].increment(1);
        }

        pub(crate) fn timeout(&self) {
            self.timeouts.increment(1);
        }

        pub(crate) fn connection_error(&self) {
            self.connection_errors.increment(1);
        }

        pub(crate) fn protocol_error(&self) {
            self.protocol_errors.increment(1);
        }

        pub(crate) fn quarantined(&self) {
            self.quarantined.increment(1);
        }

        /// An error reply; `code` is already one of the counted codes or
        /// `OTHER`. Looked up per call: error replies are the cold path.
        pub(crate) fn error_reply(&self, code: &'static str) {
            if self.node.is_empty() {
                return;
            }
            counter!(ERROR_REPLIES, "node" => self.node.to_string(), "code" => code).increment(1);
        }
    }

    /// An automatic renewal reached a quorum (`true`) or did not.
    pub(crate) fn renewal(ok: bool) {
        counter!(if ok { RENEWALS } else { RENEWAL_FAILURES }).increment(1);
    }

    /// A lock's signal reached `kind` (`uncertain`, `lost`, …).
    pub(crate) fn signal(kind: &'static str) {
        counter!(SIGNALS, "kind" => kind).increment(1);
    }
}

/// Without the feature: the same calls, doing nothing.
#[cfg(not(feature = "metrics"))]
mod disabled {
    use std::time::Duration;

    use crate::error::Operation;

    #[derive(Debug, Default)]
    pub(crate) struct NodeMetrics;

    impl NodeMetrics {
        pub(crate) fn new(_node: &str) -> Self {
            Self
        }
        pub(crate) fn sent(&self) {}
        pub(crate) fn reply(&self, _elapsed: Duration) {}
        pub(crate) fn vote(&self, _op: Operation, _yes: bool) {}
        pub(crate) fn timeout(&self) {}
        pub(crate) fn connection_error(&self) {}
        pub(crate) fn protocol_error(&self) {}
        pub(crate) fn quarantined(&self) {}
        pub(crate) fn error_reply(&self, _code: &'static str) {}
    }

    pub(crate) fn renewal(_ok: bool) {}
    pub(crate) fn signal(_kind: &'static str) {}
}
