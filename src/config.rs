//! The settings a [`Redlock`](crate::Redlock) runs with, their defaults,
//! and the checks of settings and TTLs ([`Builder`](crate::Builder) fills
//! them in).

use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::validity::Ttl;

/// Default per-node response timeout.
pub const DEFAULT_NODE_TIMEOUT: Duration = Duration::from_millis(50);
/// Default per-node connection timeout.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
/// Default drift factor (the specification's 1 %).
pub const DEFAULT_DRIFT_FACTOR: f64 = 0.01;
/// Default retry policy of [`acquire`](crate::Redlock::acquire): three
/// retries after the first attempt.
pub const DEFAULT_RETRY: Retry = Retry::Times(3);
/// Default lower bound of the random delay between attempts.
pub const DEFAULT_RETRY_DELAY_MIN: Duration = Duration::ZERO;
/// Default upper bound of the random delay between attempts.
pub const DEFAULT_RETRY_DELAY_MAX: Duration = Duration::from_millis(200);
/// Default lease of a waiter's entry in a waiter queue
/// ([`Builder::waiter_lease`](crate::Builder::waiter_lease)): renewed
/// every third of it while the waiter waits; a waiter that crashed delays
/// those behind it by at most this much, and a third more.
pub const DEFAULT_WAITER_LEASE: Duration = Duration::from_secs(3);
/// Largest TTL accepted (one year): far beyond any sensible lease, and far
/// from the overflow of Redis' millisecond expiry times.
pub const MAX_TTL: Duration = Duration::from_secs(365 * 24 * 3600);

/// How long an acquisition keeps trying after its first attempt: a number
/// of retries, a time limit, or both. Set for every acquire with
/// [`Builder::retry`](crate::Builder::retry), for one with
/// [`LockRequest::retry`](crate::LockRequest::retry) (which replaces the
/// builder's). Between attempts the builder's
/// [`retry_delay`](crate::Builder::retry_delay) passes, or less when fast
/// hand-off announces a release.
///
/// A count of retries is spent in bounded time: each retry starts at most
/// one retry delay (as drawn, at most the builder's maximum) after the
/// attempt before it was refused. A release announced meanwhile makes it
/// sooner, never later, however many come: a waiter that hears a release
/// and finds the lock taken again goes on waiting only for what is left of
/// that delay. So `Times(n)` against a resource that stays taken ends after
/// `n + 1` attempts, within about `n × (retry delay maximum + an attempt)`.
///
/// A time limit stops new attempts: none starts after it, nor one whose
/// retry delay would end after it. A limit too large to add to the current
/// instant (`Duration::MAX`) is no limit: `Retry::Until(Duration::MAX)`
/// tries until the lock is granted.
///
/// # Examples
///
/// ```no_run
/// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
/// use std::time::Duration;
/// use quorumlock::Retry;
///
/// // One attempt only.
/// let once = redlock.lock("job", Duration::from_secs(10)).retry(Retry::Times(0));
/// // Keep trying for at most 10 s, however many attempts that takes.
/// let patient = redlock.lock("job", Duration::from_secs(10)).retry(Retry::Until(Duration::from_secs(10)));
/// // At most 20 retries, and none after 10 s.
/// let lock = redlock
///     .lock("job", Duration::from_secs(10))
///     .retry(Retry::TimesWithin(20, Duration::from_secs(10)))
///     .acquire()
///     .await?;
/// # lock.release().await
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Retry {
    /// At most this many retries after the first attempt (`Times(0)`: one
    /// attempt only), each within one retry delay of the attempt before.
    Times(u32),
    /// Retries, as many as it takes, until this much time has passed since
    /// the acquisition began. With fast hand-off a waiter of this kind does
    /// not poll a live holder: it tries again when the holder's release is
    /// announced, when the holder's keys expire, or after a second without
    /// either.
    Until(Duration),
    /// At most this many retries, and none after this much time: whichever
    /// is spent first ends the acquisition.
    TimesWithin(u32, Duration),
}

/// [`DEFAULT_RETRY`]: three retries.
impl Default for Retry {
    fn default() -> Self {
        DEFAULT_RETRY
    }
}

impl Retry {
    /// The most retries allowed; `None`: no count limit.
    pub(crate) fn count(self) -> Option<u32> {
        match self {
            Retry::Times(n) | Retry::TimesWithin(n, _) => Some(n),
            Retry::Until(_) => None,
        }
    }

    /// The end of an acquisition that begins at `start`; `None`: no time
    /// limit (none set, or too large to add to `start`).
    pub(crate) fn deadline(self, start: Instant) -> Option<Instant> {
        match self {
            Retry::Times(_) => None,
            Retry::Until(limit) | Retry::TimesWithin(_, limit) => start.checked_add(limit),
        }
    }

    /// Whether `retries` more attempts after the first are still allowed
    /// by the count (the time limit is checked against the deadline).
    pub(crate) fn allows(self, retries: u32) -> bool {
        self.count().is_none_or(|n| retries <= n)
    }
}

/// When a member's yes to a lock counts: after what write reached
/// ([`Builder::durable_votes`](crate::Builder::durable_votes)). Each
/// vote that writes (an acquire, an extension, a repair, a fencing
/// commit) is followed on the same connection by `WAIT` or `WAITAOF`,
/// bounded by what is left of the node timeout. For members that fail
/// over (Sentinel groups, Redis Clusters), with the count equal to each
/// master's number of replicas.
///
/// # Examples
///
/// ```
/// use quorumlock::Durability;
/// // A group of a master and one replica: the replica has the write, so
/// // a failover to it keeps the lock.
/// let replicated = Durability::Replicas(1);
/// // The master's AOF and one replica have it (Redis 7.2+, Valkey).
/// let fsynced = Durability::Aof { local: true, replicas: 1 };
/// assert_ne!(replicated, fsynced);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// `WAIT replicas timeout`: the write reached this many replicas.
    Replicas(u32),
    /// `WAITAOF local replicas timeout`: the write was fsynced to the
    /// master's append-only file (with `local`) and to this many replicas'.
    /// Needs a server with `WAITAOF` (Redis 7.2 or later, Valkey 8):
    /// [`Builder::build`](crate::Builder::build) refuses a member
    /// without it.
    Aof {
        /// The master's own AOF must have it (`appendonly yes` there).
        local: bool,
        /// How many replicas' AOFs must have it.
        replicas: u32,
    },
}

/// Tuning shared by every operation of a [`Redlock`](crate::Redlock).
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) node_timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) drift_factor: f64,
    pub(crate) retry: Retry,
    pub(crate) retry_delay_min: Duration,
    pub(crate) retry_delay_max: Duration,
    pub(crate) restart_quarantine: Option<Duration>,
    pub(crate) durable: Option<Durability>,
    pub(crate) fast_handoff: bool,
    /// The lease of a waiter's entry in a waiter queue, when set
    /// (see [`Config::waiter_lease`]).
    pub(crate) waiter_lease: Option<Duration>,
    /// Whether nodes that can evict keys are accepted.
    pub(crate) allow_eviction: bool,
    /// Whether `build` fails without a ready quorum.
    pub(crate) require_quorum: bool,
    /// Whether the client only reads (`Builder::read_only`).
    pub(crate) read_only: bool,
    /// Root CA and client certificate for `rediss://` nodes.
    #[cfg(feature = "tls")]
    pub(crate) tls: Option<redis::TlsCertificates>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            node_timeout: DEFAULT_NODE_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            drift_factor: DEFAULT_DRIFT_FACTOR,
            retry: DEFAULT_RETRY,
            retry_delay_min: DEFAULT_RETRY_DELAY_MIN,
            retry_delay_max: DEFAULT_RETRY_DELAY_MAX,
            restart_quarantine: None,
            durable: None,
            fast_handoff: true,
            waiter_lease: None,
            allow_eviction: false,
            require_quorum: false,
            read_only: false,
            #[cfg(feature = "tls")]
            tls: None,
        }
    }
}

impl Config {
    pub(crate) fn validate(&self) -> Result<()> {
        if self.node_timeout.is_zero() {
            return Err(Error::invalid("node timeout must be larger than zero"));
        }
        if self.connect_timeout.is_zero() {
            return Err(Error::invalid("connect timeout must be larger than zero"));
        }
        if !self.drift_factor.is_finite() || !(0.0..1.0).contains(&self.drift_factor) {
            return Err(Error::invalid(format!(
                "drift factor must be in [0, 1), got {}",
                self.drift_factor
            )));
        }
        let least = self.node_timeout.saturating_mul(3);
        if let Some(lease) = self.waiter_lease.filter(|&l| l < least || l > MAX_TTL) {
            return Err(Error::invalid(format!(
                "waiter lease {lease:?} must be at least three node timeouts ({least:?}), so \
                 that a waiter renews it in time, and at most {MAX_TTL:?}"
            )));
        }
        if self.retry_delay_min > self.retry_delay_max {
            return Err(Error::invalid(format!(
                "retry delay minimum {:?} is larger than its maximum {:?}",
                self.retry_delay_min, self.retry_delay_max
            )));
        }
        Ok(())
    }

    /// The lease of a waiter's entry in a waiter queue: as set, or
    /// [`DEFAULT_WAITER_LEASE`] but at least three node timeouts (and at
    /// most [`MAX_TTL`]).
    pub(crate) fn waiter_lease(&self) -> Duration {
        let least = self.node_timeout.saturating_mul(3).min(MAX_TTL);
        self.waiter_lease.unwrap_or(DEFAULT_WAITER_LEASE.max(least))
    }

    /// Checks a TTL and returns it truncated to whole milliseconds together
    /// with its drift allowance.
    pub(crate) fn check_ttl(&self, ttl: Duration) -> Result<Ttl> {
        if ttl > MAX_TTL {
            return Err(Error::invalid(format!(
                "TTL {ttl:?} is larger than the maximum {MAX_TTL:?}"
            )));
        }
        let checked = Ttl::new(ttl, self.drift_factor);
        if checked.budget().is_zero() {
            return Err(Error::invalid(format!(
                "TTL {ttl:?} must be larger than its clock-drift allowance {:?} \
                 (TTL × {} + 2 ms)",
                checked.drift, self.drift_factor
            )));
        }
        Ok(checked)
    }
}

/// Most nodes a client may have (a Redlock cluster has a handful).
pub const MAX_NODES: usize = 64;

/// Most permits a semaphore may have: each is one key on every node, and
/// an acquire looks through them in one script.
pub const MAX_PERMITS: u32 = 1024;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_waiter_lease_outlasts_three_node_timeouts() {
        let mut c = Config::default();
        assert_eq!(c.waiter_lease(), DEFAULT_WAITER_LEASE);
        // Slow nodes stretch the default, up to the largest TTL.
        c.node_timeout = Duration::from_secs(2);
        assert_eq!(c.waiter_lease(), Duration::from_secs(6));
        c.node_timeout = Duration::MAX;
        assert_eq!(c.waiter_lease(), MAX_TTL);
        assert!(c.validate().is_ok());
        // One set is checked as it is: zero, too short, too long.
        c.node_timeout = DEFAULT_NODE_TIMEOUT;
        for bad in [Duration::ZERO, Duration::from_millis(149), MAX_TTL * 2] {
            c.waiter_lease = Some(bad);
            assert!(c.validate().is_err(), "{bad:?}");
        }
        c.waiter_lease = Some(Duration::from_millis(150));
        assert!(c.validate().is_ok());
    }

    #[test]
    fn ttl_must_exceed_drift_and_stay_bounded() {
        let c = Config::default();
        assert!(c.check_ttl(Duration::ZERO).unwrap_err().is_invalid_input());
        assert!(c.check_ttl(Duration::from_millis(1)).is_err());
        assert!(c.check_ttl(Duration::from_millis(2)).is_err());
        let Ttl {
            duration: ttl,
            drift,
        } = c.check_ttl(Duration::from_micros(3_900)).unwrap();
        assert_eq!(ttl, Duration::from_millis(3));
        assert!(drift < ttl);
        assert!(c.check_ttl(Duration::from_millis(u64::MAX)).is_err());
        assert!(c.check_ttl(Duration::MAX).is_err());
        assert!(c.check_ttl(MAX_TTL).is_ok());
    }

    #[test]
    fn retry_policies_say_how_many_and_until_when() {
        let now = Instant::now();
        let s = Duration::from_secs(1);
        assert_eq!(Retry::Times(0).count(), Some(0));
        assert!(Retry::Times(0).allows(0) && !Retry::Times(0).allows(1));
        assert!(Retry::Times(3).allows(3) && !Retry::Times(3).allows(4));
        assert_eq!(Retry::Times(3).deadline(now), None);
        // A time limit alone has no count limit: no hidden maximum.
        assert_eq!(Retry::Until(s).count(), None);
        assert!(Retry::Until(s).allows(u32::MAX));
        assert_eq!(Retry::Until(s).deadline(now), Some(now + s));
        assert_eq!(Retry::TimesWithin(2, s).count(), Some(2));
        assert!(!Retry::TimesWithin(2, s).allows(3));
        assert_eq!(Retry::TimesWithin(2, s).deadline(now), Some(now + s));
        // Too large to add to an instant: no time limit.
        assert_eq!(Retry::Until(Duration::MAX).deadline(now), None);
        assert_eq!(Retry::default(), Retry::Times(3));
    }

    #[test]
    fn config_rejects_nonsense() {
        let bad = [
            Config {
                node_timeout: Duration::ZERO,
                ..Config::default()
            },
            Config {
                drift_factor: f64::NAN,
                ..Config::default()
            },
            Config {
                drift_factor: 1.0,
                ..Config::default()
            },
            Config {
                retry_delay_min: Duration::from_secs(1),
                ..Config::default()
            },
        ];
        for c in bad {
            assert!(c.validate().unwrap_err().is_invalid_input(), "{c:?}");
        }
        assert!(Config::default().validate().is_ok());
    }
}
