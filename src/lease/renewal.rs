//! Automatic renewal: its public settings ([`Renewal`]), and the
//! background task that renews a held lock on their schedule and fires the
//! lost-lock signal when renewal cannot keep up ([`keep_renewing`]). What
//! the settings resolve to for one TTL (and the defaults) is the
//! schedule's business (`schedule`).
//!
//! The task holds the lease and the one extension path of the lock (a
//! closure that starts one renewal), never the lock itself, and stops on a
//! token that release and drop cancel, so it never outlives the lock. Every
//! wait re-arms when the lease's term changes (a manual extension, or its
//! renewal), so the schedule always follows the current term.

use std::future::Future;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use super::schedule::{self, Limits, Progress, Step, Timing};
use super::state::Lease;
use crate::error::lost::{LossKind, LostReason};
use crate::error::NodeFailure;
use crate::validity::{self, Term};

/// Settings of automatic renewal, for [`Lock::auto_renew`](crate::Lock::auto_renew)
/// and [`LockRequest::auto_renew`](crate::LockRequest::auto_renew).
///
/// Every renewal is the same compare-and-pexpire fan-out as
/// [`Lock::extend`](crate::Lock::extend), with the lock's current TTL: it
/// counts only with a majority inside the current validity, and never
/// re-creates an expired lock. Once a renewal is confirmed, the nodes that
/// answered that the key is missing get it back (`SET NX`, until the new
/// validity ends; never where another token holds it): a lock that lost a
/// key to a node restart regains its full coverage.
///
/// | setting | default |
/// |---|---|
/// | [`interval`](Renewal::interval) | `TTL / 3` (shortened if it would reach the safety margin) |
/// | [`margin`](Renewal::margin) | `max(TTL / 10, 2 × node timeout)`, at most half the validity budget `TTL − drift` |
/// | [`max_renewals`](Renewal::max_renewals) | unlimited |
/// | [`max_hold`](Renewal::max_hold) | unlimited |
///
/// After a failed attempt that leaves the lock uncertain (timeouts,
/// connection or error replies, but no majority saying the key is gone),
/// the next attempt follows after a tenth of the interval (at least the
/// node timeout) until the lock is renewed or its validity runs out.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use quorumlock::Renewal;
///
/// // Every 5 s; tell me when less than 4 s are left without a renewal;
/// // never hold for more than an hour.
/// let renewal = Renewal::every(Duration::from_secs(5))
///     .margin(Duration::from_secs(4))
///     .max_hold(Duration::from_secs(3600));
/// assert_ne!(renewal, Renewal::default());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[must_use = "settings do nothing until passed to auto_renew or LockRequest::auto_renew"]
pub struct Renewal {
    pub(super) interval: Option<Duration>,
    pub(super) margin: Option<Duration>,
    pub(super) max_renewals: Option<u32>,
    pub(super) max_hold: Option<Duration>,
}

impl Renewal {
    /// The defaults: renew every third of the TTL, no caps.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(quorumlock::Renewal::new(), quorumlock::Renewal::default());
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// The defaults, renewing every `interval`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let renewal = quorumlock::Renewal::every(Duration::from_secs(10));
    /// # let _ = renewal;
    /// ```
    pub fn every(interval: Duration) -> Self {
        Self::default().interval(interval)
    }

    /// Time from one successful renewal (or the acquisition) to the next
    /// attempt. Must be above zero and, with the margin, below the validity
    /// budget `TTL − drift`; [`Lock::auto_renew`](crate::Lock::auto_renew)
    /// checks this against the lock's TTL.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let renewal = quorumlock::Renewal::new().interval(Duration::from_millis(500));
    /// # let _ = renewal;
    /// ```
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = Some(interval);
        self
    }

    /// The safety margin: when the validity left drops below it and no
    /// renewal has confirmed the lock, the signal fires
    /// [`LossKind::Uncertain`] — before the
    /// validity reaches zero, so the holder can stop in time. Must be below
    /// the validity budget `TTL − drift`; zero turns the early warning off
    /// (the signal then fires only at expiry).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let renewal = quorumlock::Renewal::new().margin(Duration::from_secs(2));
    /// # let _ = renewal;
    /// ```
    pub fn margin(mut self, margin: Duration) -> Self {
        self.margin = Some(margin);
        self
    }

    /// Renew at most `count` times. After the last renewal the signal fires
    /// [`LossKind::LimitReached`], renewal
    /// ends, and the lock runs out the validity that renewal gave it.
    ///
    /// # Examples
    ///
    /// ```
    /// let renewal = quorumlock::Renewal::new().max_renewals(100);
    /// # let _ = renewal;
    /// ```
    pub fn max_renewals(mut self, count: u32) -> Self {
        self.max_renewals = Some(count);
        self
    }

    /// Renew only until `limit` has passed since the lock was granted. Then
    /// the signal fires [`LossKind::LimitReached`],
    /// renewal ends, and the lock runs out the validity it has left (at
    /// most one TTL more).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let renewal = quorumlock::Renewal::new().max_hold(Duration::from_secs(15 * 60));
    /// # let _ = renewal;
    /// ```
    pub fn max_hold(mut self, limit: Duration) -> Self {
        self.max_hold = Some(limit);
        self
    }
}

/// Follows the schedule of `settings` (for nodes answering within
/// `node_timeout`) until the lock ends, expires, is lost, or a cap is
/// reached; returns at once when `stop` is cancelled.
///
/// `renew` starts one renewal — an extension by the lock's current TTL
/// (the lease sits below the quorum that extends) — resolving to the new
/// deadline once a majority extended in time, or to why not. It leaves the
/// lease's loss to this task: a failure is only reported.
pub(crate) async fn keep_renewing<R, F>(
    lease: Arc<Lease>,
    renew: R,
    settings: Renewal,
    node_timeout: Duration,
    stop: CancellationToken,
) where
    R: Fn() -> F,
    F: Future<Output = Result<Instant, LostReason>>,
{
    let mut task = Task {
        watched: lease.watch(),
        limits: Limits::new(&settings, lease.granted),
        progress: Progress::default(),
        last_failures: Vec::new(),
        lease,
        settings,
        node_timeout,
        stop,
    };
    while task.step(&renew).await.is_continue() {}
}

/// The renewal task between its steps.
struct Task {
    lease: Arc<Lease>,
    settings: Renewal,
    node_timeout: Duration,
    stop: CancellationToken,
    watched: watch::Receiver<Term>,
    limits: Limits,
    progress: Progress,
    /// The nodes the last renewal failed on, named by the warnings.
    last_failures: Vec<NodeFailure>,
}

impl Task {
    /// One step of the schedule for the current term; `Break` ends the
    /// task.
    async fn step<R, F>(&mut self, renew: &R) -> ControlFlow<()>
    where
        R: Fn() -> F,
        F: Future<Output = Result<Instant, LostReason>>,
    {
        if self.stop.is_cancelled() {
            return ControlFlow::Break(());
        }
        // Seen before the term is read: a later change wakes every wait.
        self.watched.mark_unchanged();
        let Ok(term) = self.lease.term() else {
            return ControlFlow::Break(());
        };
        let timing = self.timing(&term);
        let now = Instant::now();
        match schedule::next_step(now, &term, &timing, &self.limits, &self.progress) {
            Step::Expired => self.expired(),
            Step::LimitReached => self.limit_reached(now),
            Step::Uncertain => {
                warn_uncertain(&self.lease, &mut self.progress, &self.last_failures);
                ControlFlow::Continue(())
            }
            Step::Sleep(until) => self.sleep(until).await,
            Step::Renew => {
                self.progress.last_attempt = Some(now);
                match self.attempt(renew()).await {
                    Some(result) => self.record(result),
                    None => ControlFlow::Break(()),
                }
            }
        }
    }

    /// What the settings resolve to for `term`'s TTL.
    fn timing(&self, term: &Term) -> Timing {
        Timing::clamped(&self.settings, term.ttl, self.node_timeout)
    }

    /// The validity ran out before a renewal got through: the lock is lost.
    fn expired(&self) -> ControlFlow<()> {
        warn!(
            resource = %self.lease.keys.name(),
            nodes = %labels(&self.last_failures),
            "lock expired: its validity ran out before a renewal got through; \
             the work on the resource must have stopped"
        );
        self.lease.fail(LostReason::Expired);
        ControlFlow::Break(())
    }

    /// The renewal cap is reached: the holder is told, renewal stops.
    fn limit_reached(&self, now: Instant) -> ControlFlow<()> {
        let renewals = self.progress.renewals;
        let held_for = now.saturating_duration_since(self.lease.granted);
        debug!(renewals, ?held_for, "renewal cap reached");
        self.lease
            .warn(LostReason::LimitReached { renewals, held_for });
        ControlFlow::Break(())
    }

    /// Waits until `until`, or the term changes; `Break` when stopped.
    async fn sleep(&mut self, until: Instant) -> ControlFlow<()> {
        tokio::select! {
            biased;
            _ = self.stop.cancelled() => return ControlFlow::Break(()),
            _ = tokio::time::sleep_until(until.into()) => {}
            // The lease owns the sender: this never ends in an error.
            Ok(()) = self.watched.changed() => {}
        }
        ControlFlow::Continue(())
    }

    /// Waits for one renewal `attempt`, but fires `Uncertain` on time if
    /// it is still waiting for replies when the margin is crossed — the
    /// margin of the current term, which a manual extension may change
    /// while this attempt waits for its turn. `None` when stopped.
    async fn attempt<F: Future>(&mut self, attempt: F) -> Option<F::Output> {
        tokio::pin!(attempt);
        loop {
            let term = *self.watched.borrow_and_update();
            let warn_at = schedule::uncertain_at(term.deadline, self.timing(&term).margin);
            tokio::select! {
                biased;
                _ = self.stop.cancelled() => return None,
                result = &mut attempt => return Some(result),
                _ = tokio::time::sleep_until(warn_at.into()), if !self.progress.uncertain => {
                    warn_uncertain(&self.lease, &mut self.progress, &self.last_failures);
                }
                Ok(()) = self.watched.changed() => {}
            }
        }
    }

    /// Counts a finished renewal; `Break` when it found the lock gone (or
    /// ended meanwhile, and reported by what ended it), else the next
    /// renewal is due on the schedule.
    fn record(&mut self, result: Result<Instant, LostReason>) -> ControlFlow<()> {
        self.lease.counters.renewal(result.is_ok());
        let reason = match result {
            Ok(deadline) => {
                let valid = validity::left(deadline, Instant::now());
                self.progress.renewals = self.progress.renewals.saturating_add(1);
                self.progress.last_failed = false;
                self.last_failures.clear();
                debug!(?valid, renewals = self.progress.renewals, "renewed");
                return ControlFlow::Continue(());
            }
            Err(LostReason::AlreadyLost { .. }) => return ControlFlow::Break(()),
            Err(reason) => reason,
        };
        if reason.kind() == LossKind::Uncertain {
            debug!(%reason, "renewal failed, will retry");
            self.progress.last_failed = true;
            self.last_failures = reason.node_failures().to_vec();
            return ControlFlow::Continue(());
        }
        warn!(
            resource = %self.lease.keys.name(),
            nodes = %labels(reason.node_failures()),
            kind = %reason.kind(),
            %reason,
            "lock lost: renewal found the lock gone; stop the work on the resource"
        );
        self.lease.fail(reason);
        ControlFlow::Break(())
    }
}

fn warn_uncertain(lease: &Lease, progress: &mut Progress, failures: &[NodeFailure]) {
    progress.uncertain = true;
    let reason = LostReason::RenewalLate {
        validity_left: lease.validity(),
        failures: failures.to_vec(),
    };
    warn!(
        resource = %lease.keys.name(),
        nodes = %labels(failures),
        %reason,
        "lock uncertain: no renewal got through before the safety margin; stop the work on \
         the resource (renewal keeps trying)"
    );
    lease.warn(reason);
}

/// The nodes of `failures`, comma-separated, for a log field (`-` for
/// none: the attempt was still waiting for replies).
fn labels(failures: &[NodeFailure]) -> String {
    if failures.is_empty() {
        return "-".to_owned();
    }
    let nodes: Vec<&str> = failures.iter().map(|f| f.node.as_str()).collect();
    nodes.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validity::Ttl;

    #[test]
    fn settings_reach_the_schedule() {
        let granted = Instant::now();
        let hour = Duration::from_secs(3600);
        let limits = Limits::new(&Renewal::new().max_renewals(3).max_hold(hour), granted);
        assert_eq!(limits.max_renewals, Some(3));
        assert_eq!(limits.hold_until, Some(granted + hour));
        let unbounded = Limits::new(&Renewal::new().max_hold(Duration::MAX), granted);
        assert_eq!(unbounded, Limits::default(), "too far away is no cap");

        let ttl = Ttl {
            duration: Duration::from_secs(30),
            drift: Duration::from_millis(302),
        };
        let every = Renewal::every(Duration::from_secs(5)).margin(Duration::from_secs(4));
        let timing = Timing::checked(&every, ttl, Duration::from_millis(50)).unwrap();
        assert_eq!(
            (timing.interval, timing.margin),
            (Duration::from_secs(5), Duration::from_secs(4))
        );
        let too_late = Renewal::every(Duration::from_secs(29));
        assert!(Timing::checked(&too_late, ttl, Duration::from_millis(50)).is_err());
        let clamped = Timing::clamped(&too_late, ttl, Duration::from_millis(50));
        assert_eq!(clamped.interval, Duration::from_secs(29));
    }
}
