//! The recording side of [`crate::stats::metrics`]: the handles each node
//! registers and the calls the counters make, each reporting one event to
//! the `metrics` facade (feature `metrics`), or doing nothing without it.

#[cfg(not(feature = "metrics"))]
pub(crate) use disabled::*;

#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
/// The `outcome` labels of the acquires series: an acquire call's
/// outcomes in the order of `locks::Outcome`, then a granted lock that
/// ended lost.
pub(crate) const OUTCOMES: [&str; 6] = [
    "granted",
    "contended",
    "unavailable",
    "misconfigured",
    "other",
    "lost",
];

/// The index of `lost` in [`OUTCOMES`].
pub(crate) const LOST: usize = 5;
#[cfg(feature = "metrics")]
pub(crate) use enabled::*;

#[cfg(feature = "metrics")]
mod enabled {
    use std::sync::Arc;
    use std::time::Duration;

    use ::metrics::{counter, gauge, histogram, Counter, Gauge, Histogram};

    use crate::error::Operation;
    use crate::stats::metrics::*;
    use crate::stats::names::Family;

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
        up: Gauge,
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
                up: Gauge::noop(),
            }
        }
    }

    impl NodeMetrics {
        pub(crate) fn new(node: &str) -> Self {
            let label = node.to_owned();
            let per_node = |name: &'static str| counter!(name, "node" => label.clone());
            let vote = |op: &'static str, vote: &'static str| counter!(VOTES, "node" => label.clone(), "op" => op, "vote" => vote);
            let up = gauge!(NODE_UP, "node" => label.clone());
            up.set(0.0);
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
                latency: histogram!(REPLY_SECONDS, "node" => label.clone()),
                up,
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

        /// The node went up (answered) or down; called on a change only.
        pub(crate) fn up(&self, up: bool) {
            self.up.set(if up { 1.0 } else { 0.0 });
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

    /// The lock-level handles of one client for one primitive, registered
    /// once (an acquire and a release only add).
    #[derive(Debug)]
    pub(crate) struct LockMetrics {
        /// By outcome, in the order of [`super::OUTCOMES`].
        acquires: [Counter; 6],
        attempt: Histogram,
        wait: Histogram,
        held: Gauge,
        hold: Histogram,
    }

    impl LockMetrics {
        /// The handles of `family`'s series, registered with the recorder
        /// installed now.
        pub(crate) fn new(family: &'static Family) -> Self {
            Self {
                acquires: super::OUTCOMES
                    .map(|outcome| counter!(family.acquires, "outcome" => outcome)),
                attempt: histogram!(family.attempt),
                wait: histogram!(family.wait),
                held: gauge!(family.held),
                hold: histogram!(family.hold),
            }
        }
    }

    impl LockMetrics {
        /// An acquire call ended in outcome `OUTCOMES[outcome]` after
        /// `waited` (a granted lock that ended lost: no duration).
        pub(crate) fn acquired(&self, outcome: usize, waited: Option<Duration>) {
            if let Some(counter) = self.acquires.get(outcome) {
                counter.increment(1);
            }
            if let Some(waited) = waited {
                self.wait.record(waited.as_secs_f64());
            }
        }

        /// One acquire attempt took `elapsed`.
        pub(crate) fn attempt(&self, elapsed: Duration) {
            self.attempt.record(elapsed.as_secs_f64());
        }

        /// `count` was granted (a lock: 1; permits: how many).
        pub(crate) fn held(&self, count: u64) {
            self.held.increment(count as f64);
        }

        /// `count` was released or dropped after `held`.
        pub(crate) fn let_go(&self, count: u64, held: Duration) {
            self.held.decrement(count as f64);
            self.hold.record(held.as_secs_f64());
        }
    }
}

/// Without the feature: the same calls, doing nothing.
#[cfg(not(feature = "metrics"))]
mod disabled {
    use std::time::Duration;

    use crate::error::Operation;
    use crate::stats::names::Family;

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
        pub(crate) fn up(&self, _up: bool) {}
        pub(crate) fn error_reply(&self, _code: &'static str) {}
    }

    pub(crate) fn renewal(_ok: bool) {}
    pub(crate) fn signal(_kind: &'static str) {}
    #[derive(Debug)]
    pub(crate) struct LockMetrics;

    impl LockMetrics {
        pub(crate) fn new(_family: &'static Family) -> Self {
            Self
        }
        pub(crate) fn acquired(&self, _outcome: usize, _waited: Option<Duration>) {}
        pub(crate) fn attempt(&self, _elapsed: Duration) {}
        pub(crate) fn held(&self, _count: u64) {}
        pub(crate) fn let_go(&self, _count: u64, _held: Duration) {}
    }
}
