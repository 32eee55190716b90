//! [`Campaign`]: how a process runs for an election's leadership — the
//! fenced acquire of the leadership lock, then the first proclamation.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::Retry;
use crate::error::{Error, Result};
use crate::keys::Keys;
use crate::lease::renewal::Renewal;
use crate::lease::schedule::Timing;
use crate::node::election::Record;
use crate::quorum::election;
use crate::quorum::engine::Engine;
use crate::request::Options;

use super::leadership::Leadership;

/// Wait without limit until elected: the default of [`Campaign::retry`].
const UNTIL_ELECTED: Retry = Retry::Until(Duration::MAX);

/// A campaign for the leadership of an election, with its options; from
/// [`Redlock::campaign`](crate::Redlock::campaign). Nothing is sent until
/// [`lead`](Campaign::lead) is awaited.
///
/// | option | default |
/// |---|---|
/// | [`value`](Campaign::value) | empty |
/// | [`retry`](Campaign::retry) | wait without limit until elected |
/// | [`auto_renew`](Campaign::auto_renew) | [`Renewal::default()`] (every third of the TTL) |
///
/// # Examples
///
/// ```no_run
/// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
/// use std::time::Duration;
///
/// let leadership = redlock
///     .campaign("db-primary", Duration::from_secs(10))
///     .value("10.0.0.5:5432")
///     .lead()
///     .await?;
/// println!("leading in epoch {}", leadership.epoch());
/// leadership.resign().await
/// # }
/// ```
#[derive(Clone)]
#[must_use = "a campaign does nothing until lead() is awaited"]
pub struct Campaign {
    /// Always fenced, retried and renewed.
    options: Options,
    name: Vec<u8>,
    value: Vec<u8>,
}

impl Campaign {
    pub(crate) fn new(engine: Arc<Engine>, name: Vec<u8>, ttl: Duration) -> Self {
        Self {
            options: Options {
                fenced: true,
                retry: Some(UNTIL_ELECTED),
                renewal: Some(Renewal::default()),
                ..Options::new(engine, ttl)
            },
            name,
            value: Vec::new(),
        }
    }

    /// What observers read while this process leads (for instance its
    /// address); empty by default. A leader changes it with
    /// [`Leadership::proclaim`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
    /// let leadership = redlock
    ///     .campaign("scheduler", std::time::Duration::from_secs(10))
    ///     .value("worker-3")
    ///     .lead()
    ///     .await?;
    /// assert_eq!(leadership.value(), b"worker-3");
    /// # leadership.resign().await
    /// # }
    /// ```
    pub fn value(mut self, value: impl Into<Vec<u8>>) -> Self {
        self.value = value.into();
        self
    }

    /// How long to run for the leadership (see [`Retry`]). By default
    /// without limit: [`lead`](Campaign::lead) resolves once this process
    /// leads. A waiting campaign tries again when the leader's release is
    /// announced (fast hand-off), when its keys expire, or after a second
    /// without either, as any lock with a time limit does.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
    /// use std::time::Duration;
    /// use quorumlock::Retry;
    ///
    /// match redlock
    ///     .campaign("scheduler", Duration::from_secs(10))
    ///     .retry(Retry::Times(0))
    ///     .lead()
    ///     .await
    /// {
    ///     Ok(leadership) => leadership.resign().await?,
    ///     Err(e) if e.is_contended() => { /* another process leads */ }
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn retry(mut self, retry: Retry) -> Self {
        self.options.retry = Some(retry);
        self
    }

    /// Runs in turn: candidates that all ask `fair` take the leadership in
    /// the order they joined its waiter queue, as a lock's waiters do
    /// ([`LockRequest::fair`](crate::LockRequest::fair)).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
    /// use std::time::Duration;
    /// use quorumlock::Retry;
    ///
    /// let leadership = redlock
    ///     .campaign("scheduler", Duration::from_secs(10))
    ///     .fair()
    ///     .retry(Retry::Until(Duration::from_secs(60)))
    ///     .lead()
    ///     .await?;
    /// # leadership.resign().await
    /// # }
    /// ```
    pub fn fair(mut self) -> Self {
        self.options.fair = true;
        self
    }

    /// The renewal schedule of the leadership: it is always renewed, by
    /// default every third of the TTL ([`Renewal::default`]); caps such as
    /// [`max_hold`](Renewal::max_hold) end a leadership on time.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
    /// use std::time::Duration;
    /// use quorumlock::Renewal;
    ///
    /// let leadership = redlock
    ///     .campaign("scheduler", Duration::from_secs(10))
    ///     .auto_renew(Renewal::default().max_hold(Duration::from_secs(3600)))
    ///     .lead()
    ///     .await?;
    /// # leadership.resign().await
    /// # }
    /// ```
    pub fn auto_renew(mut self, renewal: Renewal) -> Self {
        self.options.renewal = Some(renewal);
        self
    }

    /// Runs for the leadership and resolves once this process leads.
    ///
    /// The leadership lock (`quorumlock:election:{<name>}`) is taken as a
    /// [fenced](crate::LockRequest::fenced) lock: its fencing token,
    /// committed at quorum, is the leader's [epoch](Leadership::epoch).
    /// Renewal starts at once; then the leader's record (epoch and value)
    /// is written on a majority, where the lock still holds this leader's
    /// token. Only then does this resolve: a leader is visible to every
    /// [`Redlock::leader`](crate::Redlock::leader) read from the moment it
    /// knows it leads, and stays visible through node restarts — renewal
    /// restores the record with the lock — while a majority of nodes
    /// answer and have seen a renewal since they restarted (`docs/election.md`, (E6)).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] (nothing sent) for an empty name, a TTL that
    /// is zero, not above the drift or above [`MAX_TTL`](crate::MAX_TTL),
    /// or renewal settings that cannot work for the TTL. With a retry
    /// limit, the errors of [`LockRequest::acquire`](crate::LockRequest::acquire)
    /// once it is spent ([`Error::Contended`] while another process leads).
    /// Whatever the retry, the campaign stops at once when misconfigured
    /// nodes keep the quorum out of reach ([`Error::is_misconfigured`]),
    /// for instance an epoch counter (`…:epoch`) that is not a canonical
    /// integer in `[0, 2^53)`: the nodes refuse it with `FENCERANGE`, and
    /// the error names the key.
    /// When the first proclamation reaches no majority, the leadership is
    /// released and the campaign goes on while a time limit allows
    /// ([`Retry::Until`]); otherwise [`Error::Lost`] says why.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future releases whatever it had taken, in the
    /// background: an attempt's keys, or a leadership not yet handed out.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
    /// let leadership = redlock
    ///     .campaign("scheduler", std::time::Duration::from_secs(10))
    ///     .lead()
    ///     .await?;
    /// leadership
    ///     .run(|signal| async move {
    ///         // schedule jobs until the leadership is lost
    ///         assert!(!signal.is_fired());
    ///     })
    ///     .await
    /// # }
    /// ```
    pub async fn lead(self) -> Result<Leadership> {
        let mut options = self.options;
        let keys = Keys::election(&self.name)?;
        let cfg = &options.engine.config;
        let checked = cfg.check_ttl(options.ttl)?;
        let renewal = options.renewal.clone().unwrap_or_default();
        Timing::checked(&renewal, checked, cfg.node_timeout).map_err(Error::invalid)?;
        let start = Instant::now();
        let first = options.retry.unwrap_or(UNTIL_ELECTED);
        loop {
            let lock = options.acquire(keys.clone()).await?;
            let record = Record {
                // Always set: the election's keys are fenced.
                epoch: lock.fence().unwrap_or_default(),
                seq: 1,
                ttl: checked.duration,
                token: lock.held.token.as_str().to_owned(),
                value: self.value.clone(),
            };
            let Err(reason) = election::proclaim(&lock.held, &record).await else {
                return Ok(Leadership::new(lock, self.name, record));
            };
            let error = lock.held.lost(reason);
            let _ = lock.release().await;
            options.retry = Some(rest(first, start, Instant::now()).ok_or(error)?);
        }
    }
}

/// What is left of `retry` at `now` for a campaign that began at `start`
/// and was elected without being able to proclaim: the time left of a
/// time limit; `None` for a count of retries (it was spent on the
/// acquire) or no time left.
fn rest(retry: Retry, start: Instant, now: Instant) -> Option<Retry> {
    let Retry::Until(limit) = retry else {
        return None;
    };
    let left = limit.checked_sub(now.saturating_duration_since(start))?;
    (!left.is_zero()).then_some(Retry::Until(left))
}

impl fmt::Debug for Campaign {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Campaign")
            .field("name", &self.name.escape_ascii().to_string())
            .field("ttl", &self.options.ttl)
            .field("value", &self.value.len())
            .field("retry", &self.options.retry.unwrap_or(UNTIL_ELECTED))
            .field("renewal", &self.options.renewal.clone().unwrap_or_default())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_limit_goes_on_and_a_count_ends_the_campaign() {
        let start = Instant::now();
        let s = Duration::from_secs(1);
        let later = start + 3 * s;
        assert_eq!(
            rest(UNTIL_ELECTED, start, later),
            Some(Retry::Until(Duration::MAX - 3 * s))
        );
        assert_eq!(
            rest(Retry::Until(5 * s), start, later),
            Some(Retry::Until(2 * s))
        );
        assert_eq!(rest(Retry::Until(3 * s), start, later), None);
        assert_eq!(rest(Retry::Until(s), start, later), None);
        assert_eq!(rest(Retry::Times(5), start, later), None);
        assert_eq!(rest(Retry::TimesWithin(5, 9 * s), start, later), None);
    }
}
