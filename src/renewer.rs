//! The background task that renews a held lock on the schedule of
//! `renewal`, and fires the lost-lock signal when renewal cannot keep up.
//!
//! The task holds only the lock's shared state (`Arc<Held>`), never the
//! [`Lock`] itself, and stops on a cancellation token that release and drop
//! cancel, so it never outlives the lock. Each renewal is the lock's one
//! extension path (`Held::extend`), serialised with manual extensions.
//! Every wait re-arms when the lease's deadline or TTL changes (a manual
//! extension, or its renewal), so the schedule always follows the current
//! term.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use tracing::{debug, warn, Instrument};

use crate::error::{Error, LostReason, NodeFailure, Result};
use crate::lease::{LostSignal, View};
use crate::lock::{Held, Lock};
use crate::loss::{self, LossKind};
use crate::quorum;
use crate::renewal::{self, Limits, Progress, Renewal, Step, Timing};

impl Lock {
    /// The lost-lock signal of this lock: fires once when the lock is lost,
    /// expires, can no longer be counted on, reaches its renewal cap, or is
    /// released. See [`LostSignal`] for the kinds and when each fires.
    ///
    /// Without [`auto_renew`](Lock::auto_renew) it fires when an
    /// [`extend`](Lock::extend) fails, when the validity runs out, and on
    /// release or drop.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
    /// use std::time::Duration;
    ///
    /// let lock = redlock.acquire("export", Duration::from_secs(30)).await?;
    /// let signal = lock.lost_signal();
    /// if lock.extend(Duration::from_secs(30)).await.is_err() {
    ///     assert!(signal.is_fired());
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn lost_signal(&self) -> LostSignal {
        LostSignal::new(self.held.lease.clone())
    }

    /// Starts renewing this lock in the background on the schedule of
    /// `renewal` (by default every third of the TTL) and returns its
    /// [lost-lock signal](Lock::lost_signal).
    ///
    /// Each renewal extends the lock by its current TTL (the one it was
    /// acquired or last [extended](Lock::extend) with) on every node that
    /// still holds its token, and counts only with a majority inside the
    /// current validity — the same rules as [`extend`](Lock::extend). An
    /// expired key is never re-created. After an [`extend`](Lock::extend)
    /// the schedule follows the new deadline and TTL at once: the default
    /// interval and margin become those of the new TTL (an explicit
    /// interval is kept, but renewal still comes before the margin).
    ///
    /// - A renewal refused by so many nodes that no majority can hold the
    ///   token marks the lock lost and fires [`LossKind::Lost`].
    /// - A renewal that fails on timeouts or errors is retried; when the
    ///   validity left drops below the safety margin with no renewal
    ///   through, the signal fires [`LossKind::Uncertain`] (renewal goes on
    ///   trying), and [`LossKind::Expired`] follows if the validity runs out.
    /// - Reaching [`max_renewals`](Renewal::max_renewals) or
    ///   [`max_hold`](Renewal::max_hold) fires [`LossKind::LimitReached`]
    ///   and ends renewal; the lock runs out the validity it has left.
    ///
    /// Renewal stops for good when the lock is released or dropped, and
    /// never sends a renewal after [`release`](Lock::release) has returned
    /// or the `Lock` was dropped. Calling `auto_renew` again replaces the
    /// running renewal (its count starts again; the hold-time cap still
    /// counts from the acquisition). A node that restarts is reconnected by
    /// itself and takes part in later renewals.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] when the settings cannot work for this
    /// lock's TTL (zero interval, or interval plus margin not below the
    /// validity budget `TTL − drift`), or when called outside a tokio
    /// runtime. [`Error::Lost`] when the lock is already lost.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
    /// use std::time::Duration;
    /// use quorumlock::Renewal;
    ///
    /// let lock = redlock.acquire("reindex", Duration::from_secs(30)).await?;
    /// let signal = lock.auto_renew(Renewal::default().max_hold(Duration::from_secs(3600)))?;
    /// let token = signal.cancellation_token();
    /// // ... hand `token` to the job, which stops when it is cancelled ...
    /// lock.release().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn auto_renew(&self, renewal: Renewal) -> Result<LostSignal> {
        let held = &self.held;
        let view = held.lease.view();
        if view.lost {
            return Err(held.lost(LostReason::AlreadyLost));
        }
        let config = &held.engine.config;
        let drift = quorum::drift(view.ttl, config.drift_factor);
        renewal
            .timing(view.ttl, drift, config.node_timeout)
            .map_err(Error::invalid)?;
        let handle = tokio::runtime::Handle::try_current()
            .map_err(|_| Error::invalid("auto_renew must be called inside a tokio runtime"))?;
        let stop = held.lease.start_renewal();
        let span = tracing::debug_span!(
            "renewal",
            resource = %held.keys,
            token = %held.token
        );
        handle.spawn(run(held.clone(), renewal, stop).instrument(span));
        Ok(self.lost_signal())
    }
}

/// Follows the schedule until the lock ends, expires, is lost, or a cap is
/// reached; returns at once when `stop` is cancelled.
async fn run(held: Arc<Held>, renewal: Renewal, stop: CancellationToken) {
    let engine = &held.engine;
    let mut term = held.lease.watch();
    let nodes = engine.nodes.len();
    let limits = Limits {
        max_renewals: renewal.max_renewals_setting(),
        hold_until: renewal
            .max_hold_setting()
            .and_then(|limit| held.lease.granted().checked_add(limit)),
    };
    let mut progress = Progress::default();
    let mut last_failures: Vec<NodeFailure> = Vec::new();
    loop {
        if stop.is_cancelled() {
            return;
        }
        // Seen before the view is read: a later change wakes every wait.
        term.mark_unchanged();
        let view = held.lease.view();
        if view.lost {
            return;
        }
        let (budget, timing) = schedule_for(&held, &renewal, &view);
        let now = Instant::now();
        match renewal::next_step(now, view.deadline, budget, &timing, &limits, &progress) {
            Step::Expired => {
                warn!("validity ran out before a renewal succeeded");
                held.lease.fail(LostReason::Expired, nodes);
                return;
            }
            Step::LimitReached => {
                let held_for = now.saturating_duration_since(held.lease.granted());
                debug!(
                    renewals = progress.renewals,
                    ?held_for,
                    "renewal cap reached"
                );
                held.lease.warn(
                    LossKind::LimitReached,
                    LostReason::LimitReached {
                        renewals: progress.renewals,
                        held_for,
                    },
                );
                return;
            }
            Step::Uncertain => {
                progress.uncertain = true;
                warn_uncertain(&held, &last_failures);
            }
            Step::Sleep(until) => {
                tokio::select! {
                    biased;
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep_until(until.into()) => {}
                    // The lease owns the sender: this never ends in an error.
                    Ok(()) = term.changed() => {}
                }
            }
            Step::Renew => {
                progress.last_attempt = Some(now);
                let mut warn_at = renewal::uncertain_at(view.deadline, timing.margin);
                let attempt = held.extend(None);
                tokio::pin!(attempt);
                // Wait for the attempt, but fire `Uncertain` on time if it
                // is still waiting for replies when the margin is crossed —
                // the margin of the current term, which a manual extension
                // may change while this attempt waits for its turn.
                let result = loop {
                    tokio::select! {
                        biased;
                        _ = stop.cancelled() => return,
                        result = &mut attempt => break result,
                        _ = tokio::time::sleep_until(warn_at.into()), if !progress.uncertain => {
                            progress.uncertain = true;
                            warn_uncertain(&held, &last_failures);
                        }
                        Ok(()) = term.changed() => {
                            let view = held.lease.view();
                            let (_, timing) = schedule_for(&held, &renewal, &view);
                            warn_at = renewal::uncertain_at(view.deadline, timing.margin);
                        }
                    }
                };
                match result {
                    Ok(deadline) => {
                        let valid = deadline.saturating_duration_since(Instant::now());
                        engine.leases.renewed();
                        progress.renewals = progress.renewals.saturating_add(1);
                        progress.last_failed = false;
                        last_failures.clear();
                        debug!(?valid, renewals = progress.renewals, "renewed");
                    }
                    Err(reason) => {
                        engine.leases.renewal_failed();
                        match loss::kind_of(&reason, nodes) {
                            Some(LossKind::Uncertain) => {
                                debug!(%reason, "renewal failed, will retry");
                                progress.last_failed = true;
                                if let LostReason::NoQuorum { failures, .. } = reason {
                                    last_failures = failures;
                                }
                            }
                            Some(kind) => {
                                warn!(%kind, %reason, "renewal found the lock gone");
                                held.lease.fail(reason, nodes);
                                return;
                            }
                            None => return,
                        }
                    }
                }
            }
        }
    }
}

/// The validity budget (`ttl − drift`) and the schedule's durations for
/// the lease's current TTL.
fn schedule_for(held: &Held, renewal: &Renewal, view: &View) -> (Duration, Timing) {
    let config = &held.engine.config;
    let drift = quorum::drift(view.ttl, config.drift_factor);
    let budget = view.ttl.saturating_sub(drift);
    (
        budget,
        renewal.timing_lenient(view.ttl, drift, config.node_timeout),
    )
}

fn warn_uncertain(held: &Held, failures: &[NodeFailure]) {
    let validity_left = held.lease.validity();
    warn!(
        ?validity_left,
        failures = failures.len(),
        "no renewal got through before the safety margin"
    );
    held.lease.warn(
        LossKind::Uncertain,
        LostReason::Uncertain {
            validity_left,
            failures: failures.to_vec(),
        },
    );
}
