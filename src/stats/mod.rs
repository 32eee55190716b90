//! The counters a user reads: [`Stats`] from
//! [`Redlock::stats`](crate::Redlock::stats), per node and per client, as
//! plain values. Recording lives in `counters`.

pub(crate) mod counters;
pub(crate) mod latency;
pub(crate) mod locks;
#[cfg(feature = "metrics")]
pub mod metrics;
#[cfg(not(feature = "metrics"))]
pub(crate) mod metrics;
pub(crate) mod series;

use std::time::Duration;

/// A snapshot of a [`Redlock`](crate::Redlock)'s counters, from
/// [`Redlock::stats`](crate::Redlock::stats).
///
/// # Examples
///
/// ```no_run
/// # async fn demo(redlock: quorumlock::Redlock) {
/// let stats: quorumlock::Stats = redlock.stats();
/// let timeouts: u64 = stats.nodes.iter().map(|n| n.timeouts).sum();
/// println!("{timeouts} timeouts, {} locks lost", stats.leases.lost);
/// # }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// One entry per node, in the order the nodes were given.
    pub nodes: Vec<NodeStats>,
    /// Renewals and lost-lock signals of the locks taken through this client.
    pub leases: LeaseStats,
    /// Acquire calls, waits, holds and the locks held now, of this client
    /// (semaphore permits and elections not included).
    pub locks: LockStats,
    /// The same for the permits of semaphores taken through this client
    /// ([`Redlock::semaphore`](crate::Redlock::semaphore)), counted apart
    /// from the locks: `acquires` counts calls, `hold` one observation per
    /// holder, and `held` the permits held now (a holder of `k` permits
    /// counts `k`).
    pub permits: LockStats,
    /// The same for the campaigns of elections run through this client
    /// ([`Redlock::campaign`](crate::Redlock::campaign)), counted apart
    /// from the locks and permits: `acquires.granted` counts campaigns won,
    /// `wait` the time to be elected, `hold` the leaderships' length, and
    /// `held` the elections this client leads now (0 or 1 per election).
    pub elections: LockStats,
    /// The same for the read sides of read–write locks taken through this
    /// client ([`Redlock::read`](crate::Redlock::read)), counted apart.
    pub reads: LockStats,
    /// The same for the write sides ([`Redlock::write`](crate::Redlock::write)),
    /// counted apart: `wait` includes the wait for the readers.
    pub writes: LockStats,
}

/// The lock-level view of one client: how its acquire calls ended, how
/// long they took, how long locks were held, and how many are held now;
/// for locks ([`Stats::locks`]) and, apart, for semaphore permits
/// ([`Stats::permits`]) and for elections ([`Stats::elections`]).
///
/// # Examples
///
/// ```no_run
/// # async fn demo(redlock: quorumlock::Redlock) {
/// let locks = redlock.stats().locks;
/// println!(
///     "{} held now; {} granted, {} contended; p99 wait ≤ {:?}",
///     locks.held,
///     locks.acquires.granted,
///     locks.acquires.contended,
///     locks.wait.quantile(0.99),
/// );
/// # }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockStats {
    /// Acquire calls by outcome.
    pub acquires: Acquires,
    /// Locks granted and not yet released or dropped (for
    /// [`Stats::permits`]: permits, a holder of `k` counting `k`; for
    /// [`Stats::elections`]: the elections this client leads).
    pub held: u64,
    /// Each acquire attempt, the release of a refused attempt's keys
    /// included (buckets of 100 µs … 5 s, as [`NodeStats::latency`]).
    pub attempt_latency: Latency,
    /// Each acquire call, from the call to its outcome: every attempt and
    /// the pauses between them (buckets of 1 ms … 1 h).
    pub wait: Latency,
    /// Each lock, from the grant to its release or drop (buckets of
    /// 1 ms … 1 h).
    pub hold: Latency,
    /// For [`Stats::elections`]: campaign attempts that found too few
    /// nodes answering for a quorum, after which the campaign waited on
    /// (a campaign waits without limit by default). Always 0 for locks and
    /// permits: their calls end [`unavailable`](Acquires::unavailable)
    /// once their retries are spent.
    pub unreachable: u64,
}

/// Acquire calls (`acquire`, `try_acquire`, `lock(…).acquire()`, `run`)
/// by outcome, as [`Error`](crate::Error)'s `is_*` tell them apart. A call
/// whose future is dropped before it ends is not counted.
///
/// # Examples
///
/// ```no_run
/// # async fn demo(redlock: quorumlock::Redlock) {
/// let a = redlock.stats().locks.acquires;
/// if a.misconfigured > 0 {
///     println!("check the nodes' passwords and ACLs");
/// }
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Acquires {
    /// The lock was granted.
    pub granted: u64,
    /// Another owner held it ([`Error::is_contended`](crate::Error::is_contended)).
    pub contended: u64,
    /// Too few nodes answered ([`Error::is_unavailable`](crate::Error::is_unavailable)).
    pub unavailable: u64,
    /// Misconfigured nodes kept the quorum out of reach
    /// ([`Error::is_misconfigured`](crate::Error::is_misconfigured)).
    pub misconfigured: u64,
    /// Any other error (invalid input, no fencing token left).
    pub other: u64,
    /// Grants whose holder had been told, before they were released or
    /// dropped, that they were lost or could no longer be counted on: their
    /// [`LostSignal`](crate::LostSignal) fired
    /// [`Uncertain`](crate::LossKind::Uncertain), [`Lost`](crate::LossKind::Lost)
    /// or [`Expired`](crate::LossKind::Expired) (what ends the work of
    /// [`Lock::run`](crate::Lock::run) with [`Error::Lost`](crate::Error::Lost)),
    /// or an extension failed. The same for locks, permits and leaderships;
    /// also counted in `granted`.
    pub lost: u64,
}

/// One node's counters.
///
/// `commands` counts every command sent (lock commands, and the `PING` and
/// `SCRIPT LOAD` of [`build`](crate::Builder::build)). Each command ends in
/// a reply — counted in `latency`, and for lock commands as a yes or no vote
/// — or in one of the failure counters; a command whose outcome is still
/// pending is only in `commands`.
///
/// # Examples
///
/// ```no_run
/// # async fn demo(redlock: quorumlock::Redlock) {
/// for node in redlock.stats().nodes {
///     if node.timeouts > 0 || node.connection_errors > 0 {
///         println!("{} is unhealthy: {node:?}", node.node);
///     }
/// }
/// # }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeStats {
    /// The node, as `host:port/db`.
    pub node: String,
    /// Commands sent to the node.
    pub commands: u64,
    /// `SET NX` replies: `yes` granted, `no` the key was already held.
    pub acquire: Votes,
    /// Compare-and-pexpire replies (manual extensions and automatic
    /// renewals): `yes` extended, `no` the key no longer carried the token.
    pub extend: Votes,
    /// Compare-and-delete replies: `yes` deleted, `no` the key was already
    /// gone or held another token.
    pub release: Votes,
    /// Commands with no reply within the per-node timeout.
    pub timeouts: u64,
    /// Commands that failed because the connection was refused, dropped or
    /// could not be made, or was refused by this client (the node is
    /// another node's server, or can evict keys).
    pub connection_errors: u64,
    /// Replies this client could not interpret.
    pub protocol_errors: u64,
    /// Acquire votes withheld because the node restarted too recently
    /// (see [`Builder::restart_quarantine`](crate::Builder::restart_quarantine));
    /// no command was sent for these. Also votes not counted because
    /// another server than the one read cast them
    /// ([`NodeFailureKind::ServerChanged`](crate::NodeFailureKind::ServerChanged)).
    pub quarantined: u64,
    /// Yes votes not counted because their write missed the replicas (or
    /// append-only files) durable votes require
    /// ([`NodeFailureKind::NotDurable`](crate::NodeFailureKind::NotDurable),
    /// see [`Builder::durable_votes`](crate::Builder::durable_votes)).
    pub not_durable: u64,
    /// Error replies by code (`WRONGTYPE`, `OOM`, `NOSCRIPT`, `BUSY`,
    /// `NOAUTH`, `READONLY`, … and `OTHER` for any code not listed), only
    /// codes seen at least once.
    pub redis_errors: Vec<(&'static str, u64)>,
    /// Time from sending a command to its reply (error replies included,
    /// timeouts and connection failures not), counted from the start of
    /// the operation that sent it to every node at once.
    pub latency: Latency,
    /// Whether the node's last command got an answer after which it can
    /// vote: a reply, or an error reply about one key or command
    /// (`WRONGTYPE`, `NOPERM`, `OOM`, …). False after a timeout, a
    /// connection failure, a refusal of this client's credentials
    /// (`WRONGPASS`, `NOAUTH`: the node votes on nothing until they are
    /// fixed), a refusal by this client (another node's server, an
    /// evicting policy), a vote withheld by the restart quarantine (until
    /// the node next answers), and before the first reply.
    pub up: bool,
}

impl NodeStats {
    /// Error replies with this code (case-insensitive); codes that are not
    /// counted one by one are found under `"OTHER"`.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) {
    /// let oom: u64 = redlock.stats().nodes.iter().map(|n| n.redis_error_count("OOM")).sum();
    /// # }
    /// ```
    pub fn redis_error_count(&self, code: &str) -> u64 {
        self.redis_errors
            .iter()
            .filter(|(c, _)| c.eq_ignore_ascii_case(code))
            .map(|&(_, n)| n)
            .sum()
    }

    /// Every failed command: timeouts, connection and protocol errors, error replies
    /// (quarantine refusals are not commands and not counted).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) {
    /// let failing = redlock.stats().nodes.iter().filter(|n| n.failures() > 0).count();
    /// # }
    /// ```
    pub fn failures(&self) -> u64 {
        let replies: u64 = self.redis_errors.iter().map(|&(_, n)| n).sum();
        self.timeouts
            .saturating_add(self.connection_errors)
            .saturating_add(self.protocol_errors)
            .saturating_add(replies)
    }
}

/// Yes and no answers to one kind of lock command.
///
/// # Examples
///
/// ```no_run
/// # async fn demo(redlock: quorumlock::Redlock) {
/// let node = &redlock.stats().nodes[0];
/// let contended = node.acquire.no as f64 / (node.acquire.yes + node.acquire.no).max(1) as f64;
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Votes {
    /// The node did what was asked.
    pub yes: u64,
    /// The node answered but refused (the key is held by another token, or
    /// no longer ours).
    pub no: u64,
}

/// A histogram of durations: count, sum, maximum, and fixed buckets
/// (reply and attempt latencies: 100 µs … 5 s; waits and holds:
/// 1 ms … 1 h; then everything slower).
///
/// # Examples
///
/// ```no_run
/// # async fn demo(redlock: quorumlock::Redlock) {
/// let latency = &redlock.stats().nodes[0].latency;
/// println!("mean {:?}, p50 ≤ {:?}, max {:?}", latency.mean(), latency.quantile(0.5), latency.max);
/// # }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Latency {
    /// Replies measured.
    pub count: u64,
    /// Sum of their latencies (microsecond resolution).
    pub sum: Duration,
    /// The slowest reply.
    pub max: Duration,
    /// `(upper bound, replies)` per bucket, bounds inclusive and
    /// increasing; the last bucket's bound is `Duration::MAX`.
    pub buckets: Vec<(Duration, u64)>,
}

impl Latency {
    /// Mean latency, or `None` before the first reply.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) {
    /// if let Some(mean) = redlock.stats().nodes[0].latency.mean() {
    ///     println!("{mean:?}");
    /// }
    /// # }
    /// ```
    pub fn mean(&self) -> Option<Duration> {
        let count = u32::try_from(self.count).unwrap_or(u32::MAX);
        (count > 0).then(|| self.sum / count)
    }

    /// An upper bound for the `q`-quantile (`q` in `[0, 1]`, clamped): the
    /// bound of the first bucket that holds it, or the maximum for the last
    /// bucket and when it is smaller. `None` before the first reply.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) {
    /// let p99 = redlock.stats().nodes[0].latency.quantile(0.99);
    /// # }
    /// ```
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        let total: u64 = self.buckets.iter().map(|&(_, n)| n).sum();
        if total == 0 {
            return None;
        }
        let q = if q.is_finite() {
            q.clamp(0.0, 1.0)
        } else {
            1.0
        };
        // The rank of the wanted reply, 1-based: at least the first one.
        let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0u64;
        for &(bound, n) in &self.buckets {
            seen = seen.saturating_add(n);
            if seen >= rank {
                return Some(bound.min(self.max));
            }
        }
        Some(self.max)
    }
}

/// Renewal and lost-lock counters of the locks taken through one client.
///
/// A signal that first fired [`Uncertain`](crate::LossKind::Uncertain) and later
/// became [`Expired`](crate::LossKind::Expired) counts in both; releases are not
/// counted here.
///
/// # Examples
///
/// ```no_run
/// # async fn demo(redlock: quorumlock::Redlock) {
/// let leases = redlock.stats().leases;
/// println!("{} renewals, {} failed, {} lost", leases.renewals, leases.renewal_failures, leases.lost);
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaseStats {
    /// Automatic renewals that reached a quorum in time.
    pub renewals: u64,
    /// Automatic renewal attempts that did not.
    pub renewal_failures: u64,
    /// Signals that reached [`LossKind::Uncertain`](crate::LossKind::Uncertain).
    pub uncertain: u64,
    /// Signals that reached [`LossKind::Lost`](crate::LossKind::Lost).
    pub lost: u64,
    /// Signals that reached [`LossKind::Expired`](crate::LossKind::Expired).
    pub expired: u64,
    /// Signals that reached [`LossKind::LimitReached`](crate::LossKind::LimitReached).
    pub limit_reached: u64,
}
