//! The names of the series of [`crate::stats::metrics`], one constant
//! each (re-exported there), and the [`Family`] of lock-level series each
//! primitive reports under.

#![cfg_attr(not(feature = "metrics"), allow(dead_code, unreachable_pub))]

/// Commands sent to a node; label `node`.
///
/// # Examples
///
/// ```
/// # #[cfg(feature = "metrics")]
/// assert_eq!(quorumlock::metrics::COMMANDS, "quorumlock_node_commands_total");
/// ```
pub const COMMANDS: &str = "quorumlock_node_commands_total";
/// A node's replies to lock commands; labels `node`, `op`
/// (`acquire`, `extend`, `release`) and `vote` (`yes`, `no`).
///
/// # Examples
///
/// ```
/// # #[cfg(feature = "metrics")]
/// assert_eq!(quorumlock::metrics::VOTES, "quorumlock_node_votes_total");
/// ```
pub const VOTES: &str = "quorumlock_node_votes_total";
/// Commands with no reply within the per-node timeout; label `node`.
///
/// # Examples
///
/// ```
/// # #[cfg(feature = "metrics")]
/// assert_eq!(quorumlock::metrics::TIMEOUTS, "quorumlock_node_timeouts_total");
/// ```
pub const TIMEOUTS: &str = "quorumlock_node_timeouts_total";
/// Refused, dropped or failed connections; label `node`.
///
/// # Examples
///
/// ```
/// # #[cfg(feature = "metrics")]
/// assert!(quorumlock::metrics::CONNECTION_ERRORS.ends_with("_total"));
/// ```
pub const CONNECTION_ERRORS: &str = "quorumlock_node_connection_errors_total";
/// Replies this client could not interpret; label `node`.
///
/// # Examples
///
/// ```
/// # #[cfg(feature = "metrics")]
/// assert!(quorumlock::metrics::PROTOCOL_ERRORS.ends_with("_total"));
/// ```
pub const PROTOCOL_ERRORS: &str = "quorumlock_node_protocol_errors_total";
/// Acquire votes withheld because the node restarted too recently;
/// label `node`.
///
/// # Examples
///
/// ```
/// # #[cfg(feature = "metrics")]
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
/// # #[cfg(feature = "metrics")]
/// assert!(quorumlock::metrics::ERROR_REPLIES.ends_with("_total"));
/// ```
pub const ERROR_REPLIES: &str = "quorumlock_node_error_replies_total";
/// Histogram of reply latency in seconds (error replies included,
/// timeouts not); label `node`.
///
/// # Examples
///
/// ```
/// # #[cfg(feature = "metrics")]
/// assert!(quorumlock::metrics::REPLY_SECONDS.ends_with("_seconds"));
/// ```
pub const REPLY_SECONDS: &str = "quorumlock_node_reply_duration_seconds";
/// Automatic renewals that reached a quorum in time.
///
/// # Examples
///
/// ```
/// # #[cfg(feature = "metrics")]
/// assert!(quorumlock::metrics::RENEWALS.ends_with("_total"));
/// ```
pub const RENEWALS: &str = "quorumlock_lock_renewals_total";
/// Automatic renewals that did not.
///
/// # Examples
///
/// ```
/// # #[cfg(feature = "metrics")]
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
/// # #[cfg(feature = "metrics")]
/// assert!(quorumlock::metrics::SIGNALS.ends_with("_total"));
/// ```
pub const SIGNALS: &str = "quorumlock_lock_signals_total";
/// Whether a node answers; label `node`.
///
/// # Examples
///
/// ```
/// # #[cfg(feature = "metrics")]
/// assert_eq!(quorumlock::metrics::NODE_UP, "quorumlock_node_up");
/// ```
pub const NODE_UP: &str = "quorumlock_node_up";
/// Acquire calls by outcome; label `outcome`.
///
/// # Examples
///
/// ```
/// # #[cfg(feature = "metrics")]
/// assert!(quorumlock::metrics::ACQUIRES.ends_with("_total"));
/// ```
pub const ACQUIRES: &str = "quorumlock_lock_acquires_total";
/// Histogram of the time one acquire attempt took.
///
/// # Examples
///
/// ```
/// # #[cfg(feature = "metrics")]
/// assert!(quorumlock::metrics::ATTEMPT_SECONDS.ends_with("_seconds"));
/// ```
pub const ATTEMPT_SECONDS: &str = "quorumlock_lock_attempt_duration_seconds";
/// Histogram of the time one acquire call took.
///
/// # Examples
///
/// ```
/// # #[cfg(feature = "metrics")]
/// assert!(quorumlock::metrics::WAIT_SECONDS.ends_with("_seconds"));
/// ```
pub const WAIT_SECONDS: &str = "quorumlock_lock_wait_duration_seconds";
/// Histogram of the time locks were held.
///
/// # Examples
///
/// ```
/// # #[cfg(feature = "metrics")]
/// assert!(quorumlock::metrics::HOLD_SECONDS.ends_with("_seconds"));
/// ```
pub const HOLD_SECONDS: &str = "quorumlock_lock_hold_duration_seconds";
/// Locks held now.
///
/// # Examples
///
/// ```
/// # #[cfg(feature = "metrics")]
/// assert_eq!(quorumlock::metrics::LOCKS_HELD, "quorumlock_locks_held");
/// ```
pub const LOCKS_HELD: &str = "quorumlock_locks_held";
/// Permit acquire calls by outcome (as [`ACQUIRES`], for the permits of
/// semaphores); label `outcome`.
///
/// # Examples
///
/// ```
/// # #[cfg(feature = "metrics")]
/// assert_eq!(quorumlock::metrics::PERMIT_ACQUIRES, "quorumlock_permit_acquires_total");
/// ```
pub const PERMIT_ACQUIRES: &str = "quorumlock_permit_acquires_total";
/// Histogram of the time one permit acquire attempt took.
///
/// # Examples
///
/// ```
/// # #[cfg(feature = "metrics")]
/// assert!(quorumlock::metrics::PERMIT_ATTEMPT_SECONDS.ends_with("_seconds"));
/// ```
pub const PERMIT_ATTEMPT_SECONDS: &str = "quorumlock_permit_attempt_duration_seconds";
/// Histogram of the time one permit acquire call took.
///
/// # Examples
///
/// ```
/// # #[cfg(feature = "metrics")]
/// assert!(quorumlock::metrics::PERMIT_WAIT_SECONDS.ends_with("_seconds"));
/// ```
pub const PERMIT_WAIT_SECONDS: &str = "quorumlock_permit_wait_duration_seconds";
/// Histogram of the time permits were held, one observation per holder.
///
/// # Examples
///
/// ```
/// # #[cfg(feature = "metrics")]
/// assert!(quorumlock::metrics::PERMIT_HOLD_SECONDS.ends_with("_seconds"));
/// ```
pub const PERMIT_HOLD_SECONDS: &str = "quorumlock_permit_hold_duration_seconds";
/// Permits held now (a holder of `k` permits counts `k`).
///
/// # Examples
///
/// ```
/// # #[cfg(feature = "metrics")]
/// assert_eq!(quorumlock::metrics::PERMITS_HELD, "quorumlock_permits_held");
/// ```
pub const PERMITS_HELD: &str = "quorumlock_permits_held";
/// Election acquire calls by outcome (as [`ACQUIRES`], for the campaigns
/// of [`Redlock::campaign`](crate::Redlock::campaign)); label `outcome`.
///
/// # Examples
///
/// ```
/// # #[cfg(feature = "metrics")]
/// assert_eq!(quorumlock::metrics::ELECTION_ACQUIRES, "quorumlock_election_acquires_total");
/// ```
pub const ELECTION_ACQUIRES: &str = "quorumlock_election_acquires_total";
/// Histogram of the time one campaign's acquire attempt took.
///
/// # Examples
///
/// ```
/// # #[cfg(feature = "metrics")]
/// assert!(quorumlock::metrics::ELECTION_ATTEMPT_SECONDS.ends_with("_seconds"));
/// ```
pub const ELECTION_ATTEMPT_SECONDS: &str = "quorumlock_election_attempt_duration_seconds";
/// Histogram of the time a campaign's acquire call took: the time to be
/// elected.
///
/// # Examples
///
/// ```
/// # #[cfg(feature = "metrics")]
/// assert!(quorumlock::metrics::ELECTION_WAIT_SECONDS.ends_with("_seconds"));
/// ```
pub const ELECTION_WAIT_SECONDS: &str = "quorumlock_election_wait_duration_seconds";
/// Histogram of the time leaderships lasted.
///
/// # Examples
///
/// ```
/// # #[cfg(feature = "metrics")]
/// assert!(quorumlock::metrics::ELECTION_HOLD_SECONDS.ends_with("_seconds"));
/// ```
pub const ELECTION_HOLD_SECONDS: &str = "quorumlock_election_hold_duration_seconds";
/// Elections this client leads now.
///
/// # Examples
///
/// ```
/// # #[cfg(feature = "metrics")]
/// assert_eq!(quorumlock::metrics::ELECTIONS_HELD, "quorumlock_elections_held");
/// ```
pub const ELECTIONS_HELD: &str = "quorumlock_elections_held";

/// The lock-level series of one primitive: acquire calls by outcome,
/// attempt, wait and hold times, held now. Same kinds, labels and buckets
/// for every primitive; only the names (and the help text in `METRICS`)
/// differ.
#[derive(Debug)]
pub(crate) struct Family {
    /// Counter of acquire calls, label `outcome`.
    pub(crate) acquires: &'static str,
    /// Histogram of one attempt.
    pub(crate) attempt: &'static str,
    /// Histogram of one acquire call.
    pub(crate) wait: &'static str,
    /// Histogram of one hold.
    pub(crate) hold: &'static str,
    /// Gauge of what is held now.
    pub(crate) held: &'static str,
}

/// The series of locks.
pub(crate) const LOCK_FAMILY: Family = Family {
    acquires: ACQUIRES,
    attempt: ATTEMPT_SECONDS,
    wait: WAIT_SECONDS,
    hold: HOLD_SECONDS,
    held: LOCKS_HELD,
};

/// The series of semaphore permits.
pub(crate) const PERMIT_FAMILY: Family = Family {
    acquires: PERMIT_ACQUIRES,
    attempt: PERMIT_ATTEMPT_SECONDS,
    wait: PERMIT_WAIT_SECONDS,
    hold: PERMIT_HOLD_SECONDS,
    held: PERMITS_HELD,
};

/// The series of elections.
pub(crate) const ELECTION_FAMILY: Family = Family {
    acquires: ELECTION_ACQUIRES,
    attempt: ELECTION_ATTEMPT_SECONDS,
    wait: ELECTION_WAIT_SECONDS,
    hold: ELECTION_HOLD_SECONDS,
    held: ELECTIONS_HELD,
};
