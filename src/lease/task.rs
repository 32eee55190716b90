//! The background task that renews a held lock on the schedule of its
//! settings, and fires the lost-lock signal when renewal cannot keep up.
//!
//! The task holds the lease and the one extension path of the lock (a
//! closure that starts one renewal), never the lock itself, and stops on a token
//! that release and drop cancel, so it never outlives the lock. Every wait
//! re-arms when the lease's term changes (a manual extension, or its
//! renewal), so the schedule always follows the current term.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use super::renewal::Renewal;
use super::schedule::{self, Progress, Step, Timing};
use super::state::Lease;
use super::term::Term;
use crate::error::lost::{LossKind, LostReason};
use crate::error::NodeFailure;
use crate::validity;

/// Follows the schedule of `settings` (for nodes answering within
/// `node_timeout`) until the lock ends, expires, is lost, or a cap is
/// reached; returns at once when `stop` is cancelled.
///
/// `renew` starts one renewal — an extension by the lock's current TTL
/// (the lease sits below the quorum that extends) — resolving to the new
/// deadline once a majority extended in time, or to why not. It leaves the
/// lease's loss to this task: a failure is only reported.
pub(crate) async fn run<R, F>(
    lease: Arc<Lease>,
    renew: R,
    settings: Renewal,
    node_timeout: Duration,
    stop: CancellationToken,
) where
    R: Fn() -> F,
    F: Future<Output = Result<Instant, LostReason>>,
{
    let mut watched = lease.watch();
    let limits = settings.limits(lease.granted());
    let mut progress = Progress::default();
    let mut last_failures: Vec<NodeFailure> = Vec::new();
    loop {
        if stop.is_cancelled() {
            return;
        }
        // Seen before the term is read: a later change wakes every wait.
        watched.mark_unchanged();
        let Ok(term) = lease.term() else {
            return;
        };
        let timing = settings.timing_clamped(&term, node_timeout);
        let now = Instant::now();
        match schedule::next_step(now, &term, &timing, &limits, &progress) {
            Step::Expired => {
                warn!(
                    resource = %lease.keys().name(),
                    nodes = %Labels(&last_failures),
                    "lock expired: its validity ran out before a renewal got through; \
                     the work on the resource must have stopped"
                );
                lease.fail(LostReason::Expired);
                return;
            }
            Step::LimitReached => {
                let held_for = now.saturating_duration_since(lease.granted());
                debug!(
                    renewals = progress.renewals,
                    ?held_for,
                    "renewal cap reached"
                );
                lease.warn(LostReason::LimitReached {
                    renewals: progress.renewals,
                    held_for,
                });
                return;
            }
            Step::Uncertain => {
                progress.uncertain = true;
                warn_uncertain(&lease, &last_failures);
            }
            Step::Sleep(until) => {
                tokio::select! {
                    biased;
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep_until(until.into()) => {}
                    // The lease owns the sender: this never ends in an error.
                    Ok(()) = watched.changed() => {}
                }
            }
            Step::Renew => {
                progress.last_attempt = Some(now);
                let mut warn_at = warn_point(&term, &timing);
                let attempt = renew();
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
                            warn_uncertain(&lease, &last_failures);
                        }
                        Ok(()) = watched.changed() => {
                            let term = *watched.borrow();
                            let timing = settings.timing_clamped(&term, node_timeout);
                            warn_at = warn_point(&term, &timing);
                        }
                    }
                };
                match result {
                    Ok(deadline) => {
                        let valid = validity::left(deadline, Instant::now());
                        lease.counters().renewed();
                        progress.renewals = progress.renewals.saturating_add(1);
                        progress.last_failed = false;
                        last_failures.clear();
                        debug!(?valid, renewals = progress.renewals, "renewed");
                    }
                    Err(reason) => {
                        lease.counters().renewal_failed();
                        if matches!(reason, LostReason::AlreadyLost { .. }) {
                            // Ended meanwhile, and reported by what ended it.
                            return;
                        }
                        if reason.kind() == LossKind::Uncertain {
                            debug!(%reason, "renewal failed, will retry");
                            progress.last_failed = true;
                            last_failures = reason.node_failures().to_vec();
                        } else {
                            warn!(
                                resource = %lease.keys().name(),
                                nodes = %Labels(reason.node_failures()),
                                kind = %reason.kind(),
                                %reason,
                                "lock lost: renewal found the lock gone; stop the work on the \
                                 resource"
                            );
                            lease.fail(reason);
                            return;
                        }
                    }
                }
            }
        }
    }
}

/// When the safety margin of `term` is crossed.
fn warn_point(term: &Term, timing: &Timing) -> Instant {
    schedule::uncertain_at(term.deadline, timing.margin)
}

fn warn_uncertain(lease: &Lease, failures: &[NodeFailure]) {
    let reason = LostReason::RenewalLate {
        validity_left: lease.validity(),
        failures: failures.to_vec(),
    };
    warn!(
        resource = %lease.keys().name(),
        nodes = %Labels(failures),
        %reason,
        "lock uncertain: no renewal got through before the safety margin; stop the work on \
         the resource (renewal keeps trying)"
    );
    lease.warn(reason);
}

/// The nodes of `failures`, comma-separated, for a log field (`-` for
/// none: the attempt was still waiting for replies).
struct Labels<'a>(&'a [NodeFailure]);

impl std::fmt::Display for Labels<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_empty() {
            return f.write_str("-");
        }
        for (i, failure) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            f.write_str(&failure.node)?;
        }
        Ok(())
    }
}
