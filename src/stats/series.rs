//! The recording side of [`crate::stats::metrics`]: the handles each node
//! registers and the calls the counters make, each reporting one event to
//! the `metrics` facade (feature `metrics`), or doing nothing without it.

#[cfg(not(feature = "metrics"))]
pub(crate) use disabled::*;
#[cfg(feature = "metrics")]
pub(crate) use enabled::*;

#[cfg(feature = "metrics")]
mod enabled {
    use std::sync::Arc;
    use std::time::Duration;

    use ::metrics::{counter, gauge, histogram, Counter, Gauge, Histogram};

    use crate::error::Operation;
    use crate::stats::metrics::*;

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

    /// An acquire call ended in `outcome` after `waited` (a granted lock
    /// that ended lost: `lost`, no duration).
    pub(crate) fn acquired(outcome: &'static str, waited: Option<Duration>) {
        counter!(ACQUIRES, "outcome" => outcome).increment(1);
        if let Some(waited) = waited {
            histogram!(WAIT_SECONDS).record(waited.as_secs_f64());
        }
    }

    /// One acquire attempt took `elapsed`.
    pub(crate) fn attempt(elapsed: Duration) {
        histogram!(ATTEMPT_SECONDS).record(elapsed.as_secs_f64());
    }

    /// A lock was granted.
    pub(crate) fn held() {
        gauge!(LOCKS_HELD).increment(1.0);
    }

    /// A lock was released or dropped after `held`.
    pub(crate) fn let_go(held: Duration) {
        gauge!(LOCKS_HELD).decrement(1.0);
        histogram!(HOLD_SECONDS).record(held.as_secs_f64());
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
        pub(crate) fn up(&self, _up: bool) {}
        pub(crate) fn error_reply(&self, _code: &'static str) {}
    }

    pub(crate) fn renewal(_ok: bool) {}
    pub(crate) fn signal(_kind: &'static str) {}
    pub(crate) fn acquired(_outcome: &'static str, _waited: Option<Duration>) {}
    pub(crate) fn attempt(_elapsed: Duration) {}
    pub(crate) fn held() {}
    pub(crate) fn let_go(_held: Duration) {}
}
