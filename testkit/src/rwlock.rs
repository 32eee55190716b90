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
use std::time::Duration;

use futures::future::FutureExt;
use quorumlock::{Lock, Redlock};
use rand::rngs::StdRng;

use super::admission::writer_overlaps;
use super::checker::{Grant, Overlap, PlainStore, Store};
use super::safety::{Client, SafetyOutcome, SafetyRun};
use super::turns::{Release, Taking, Turn, Turns};
use super::workload::resource_name;

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
        format!(
            "rwlock-safety: {} writer_one_in={} reads={} writes={} writer_overlaps={} {}",
            run.head(outcome),
            self.writer_one_in,
            p.reads,
            p.writes,
            p.overlaps,
            outcome.figures.calls(),
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

impl Turns for ReadWrite {
    type Held = Lock;
    const ACQUIRE: &'static str = "acquire a side";

    fn store(&self, resources: usize) -> Arc<dyn Store> {
        PlainStore::shared(resources)
    }

    fn keys(&self, prefix: &str) -> String {
        // The resources, the readers' entries and the intent marks.
        format!("*{prefix}:*")
    }

    /// The write side for a writer ([`ReadWrite::writes`]), else the read side.
    fn take(&self, c: &Client, turn: &Turn, _: &mut StdRng) -> Taking<Self> {
        let name = resource_name(&c.prefix, turn.resource);
        let mut request = match self.writes(c.id) {
            true => c.redlock.write(name, turn.ttl),
            false => c.redlock.read(name, turn.ttl),
        };
        if turn.fair {
            request = request.fair();
        }
        request.acquire().boxed()
    }

    /// The write side: nobody else holds it.
    fn probe(&self, redlock: &Redlock, name: &str, ttl: Duration, wait: Duration) -> Taking<Self> {
        let request = redlock
            .write(name, ttl)
            .retry(quorumlock::Retry::Until(wait));
        request.acquire().boxed()
    }

    fn lock(lock: &Lock) -> &Lock {
        lock
    }

    fn fence(_: &Lock) -> Option<u64> {
        None
    }

    fn let_go(lock: Lock) -> Release {
        Some(lock.release().boxed())
    }
}
