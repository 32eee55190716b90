//! The read–write lock's load: clients take the read side of a few
//! resources with short TTLs — one client in [`ReadWrite::writer_one_in`]
//! the write side instead — hold it for a while, sometimes extend (to a
//! shorter or a longer TTL), and release, dropping their acquire, extend
//! and release calls at seeded random points, as the lock's clients do
//! ([`Turn`]).
//!
//! A holder records its window ([`Checker::granted`]) before it acts on the
//! lock and reports the deadline after every poll of an extend and when it
//! stops: the same write-ahead records as the lock's overlap check.
//! [`ReadWrite::check`] then flags every window of a writer that overlaps
//! another holder's of the same resource, reader or writer
//! ([`writer_overlaps`]).
//!
//! [`Checker::granted`]: super::checker::Checker::granted

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::{BoxFuture, FutureExt};
use quorumlock::Redlock;
use rand::rngs::StdRng;
use rand::SeedableRng;

use super::admission::writer_overlaps;
use super::cancel;
use super::checker::{Grant, Overlap, PlainStore, Store};
use super::safety::{Client, Load, SafetyOutcome, SafetyRun};
use super::workload::{hold_extend, resource_name, Turn, Workload};

/// How clients take the two sides.
#[derive(Debug, Clone, Copy)]
pub struct ReadWrite {
    /// Client `c` writes when `c % writer_one_in == 0`; the others read.
    pub writer_one_in: usize,
}

impl ReadWrite {
    /// Whether client `client` takes the write side.
    pub fn writes(&self, client: usize) -> bool {
        client % self.writer_one_in.max(1) == 0
    }

    /// What the history shows against the lock's promises.
    pub fn check(&self, outcome: &SafetyOutcome) -> ReadWriteFigures {
        let grants = outcome.checker.grants();
        self.judge(&grants)
    }

    /// The figures of `grants`.
    pub fn judge(&self, grants: &[Grant]) -> ReadWriteFigures {
        let overlaps = writer_overlaps(grants, |g| self.writes(g.client));
        let writes = grants.iter().filter(|g| self.writes(g.client)).count();
        ReadWriteFigures {
            reads: grants.len() - writes,
            writes,
            first: overlaps.iter().take(5).map(Overlap::describe).collect(),
            overlaps: overlaps.len(),
        }
    }

    /// The one summary line of a read–write run.
    pub fn line(&self, run: &SafetyRun, outcome: &SafetyOutcome, p: &ReadWriteFigures) -> String {
        let f = &outcome.figures;
        format!(
            "rwlock-safety: {} writer_one_in={} reads={} writes={} writer_overlaps={} \
             extended={} (shorter={}) extend_lost={} cancelled=acquire:{}/extend:{}/release:{} \
             contended={} unavailable={} other_errors={}",
            run.head(outcome),
            self.writer_one_in,
            p.reads,
            p.writes,
            p.overlaps,
            f.extended,
            f.extend_shorter,
            f.extend_lost,
            f.acquire_cancelled,
            f.extend_cancelled,
            f.release_cancelled,
            f.contended,
            f.unavailable,
            f.other_errors,
        )
    }
}

/// What [`ReadWrite::check`] found.
#[derive(Debug, Clone)]
pub struct ReadWriteFigures {
    /// Grants of the read side.
    pub reads: usize,
    /// Grants of the write side.
    pub writes: usize,
    /// Pairs where a writer's window overlaps another holder's.
    pub overlaps: usize,
    /// The first few of those, for reports.
    pub first: Vec<String>,
}

impl Load for ReadWrite {
    fn name(&self) -> &'static str {
        "rwlock"
    }

    fn store(&self, resources: usize) -> Arc<dyn Store> {
        PlainStore::shared(resources)
    }

    fn client(&self, c: Client) -> BoxFuture<'static, ()> {
        let writes = self.writes(c.id);
        async move { client(c, writes).await }.boxed()
    }

    fn take_once<'a>(
        &'a self,
        redlock: &'a Redlock,
        name: &'a str,
        w: &'a Workload,
        wait: Duration,
    ) -> BoxFuture<'a, bool> {
        async move {
            // The write side: nobody else holds it.
            match redlock
                .write(name, w.max_ttl())
                .retry(quorumlock::Retry::Until(wait))
                .acquire()
                .await
            {
                Ok(lock) => {
                    let _ = lock.release().await;
                    true
                }
                Err(_) => false,
            }
        }
        .boxed()
    }

    fn keys(&self, prefix: &str) -> String {
        // The resources, the readers' entries and the intent marks.
        format!("*{prefix}:*")
    }
}

async fn client(c: Client, writes: bool) {
    let Client {
        id,
        redlock,
        workload: ref w,
        ref checker,
        ref prefix,
        seed,
        until,
    } = c;
    let mut rng = StdRng::seed_from_u64(seed);
    while Instant::now() < until {
        let turn = Turn::draw(&mut rng, w);
        let name = resource_name(prefix, turn.resource);
        let request = match writes {
            true => redlock.write(name, turn.ttl),
            false => redlock.read(name, turn.ttl),
        };
        let t0 = Instant::now();
        match cancel::run(turn.cancel_acquire, request.acquire()).await {
            None => checker.acquire_cancelled(),
            Some(Ok(lock)) => {
                let granted_at = Instant::now();
                checker.acquire_latency(granted_at - t0);
                let mut session =
                    checker.granted(id, turn.resource, None, granted_at, lock.deadline());
                session.requested_at(t0);
                tokio::time::sleep(turn.work / 2).await;
                match turn.extend {
                    Some((new_ttl, then)) => {
                        hold_extend(&lock, &mut session, new_ttl, turn.ttl, turn.cancel_extend)
                            .await;
                        tokio::time::sleep(lock.validity().mul_f64(then)).await;
                    }
                    None => tokio::time::sleep(turn.work / 2).await,
                }
                session.observe(lock.deadline());
                session.stop();
                match cancel::run(turn.cancel_release, lock.release()).await {
                    None => checker.release_cancelled(),
                    Some(Err(e)) => checker.release_failed(&e),
                    Some(Ok(())) => {}
                }
            }
            Some(Err(e)) => {
                assert!(!e.is_invalid_input(), "acquire a side: {e}");
                checker.acquire_failed(&e);
            }
        }
        tokio::time::sleep(turn.think).await;
    }
}
