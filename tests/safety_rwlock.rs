//! The safety checker on the read–write lock.
//!
//! `randomized_faults_on_a_minority_never_let_a_writer_hold_beside_anyone`:
//! clients read (one in four writes) two resources with short TTLs on five
//! nodes, while the nemesis of `tests/safety.rs` pauses, kills (with a
//! delayed restart), slows, blackholes and resets a minority of them and
//! holds or delays single clients' links, and clients drop their acquire,
//! extend and release calls at random points. Each holder records its
//! window before acting on the lock; the checker flags any writer's window
//! that overlaps another holder's (reader–writer and writer–writer), and
//! the run asserts that no key is left once TTLs pass and recovery after
//! the faults (a fresh client takes the write side). It prints one summary
//! line.
//!
//! `QUORUMLOCK_SAFETY_SECS` (default 10), `QUORUMLOCK_SAFETY_CLIENTS`
//! (default 12) and `QUORUMLOCK_SEED` as in `tests/safety.rs`;
//! `QUORUMLOCK_SAFETY_LONG=1` gives the long run's shape (96 clients, 24
//! resources, TTLs 150–400 ms); build it with `--release`:
//!
//! ```text
//! QUORUMLOCK_SAFETY_LONG=1 QUORUMLOCK_SAFETY_SECS=600 cargo test --release \
//!     --test safety_rwlock randomized_faults_on_a_minority_never_let_a_writer_hold_beside_anyone
//! ```
//!
//! The negative control lets a writer in beside a reader on purpose — the
//! reader's entry and the resource's marker deleted on a majority (outside
//! the model) — and asserts that the checker flags the pair.

use quorumlock_testkit as support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use support::checker::{Checker, PlainStore};
use support::rwlock::ReadWrite;
use support::safety::{SafetyRun, Sizes};
use support::{report, unique, Cluster};

/// One client in four writes.
const LOAD: ReadWrite = ReadWrite { writer_one_in: 4 };

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn randomized_faults_on_a_minority_never_let_a_writer_hold_beside_anyone() {
    let seed = support::seed("safety-rwlock");
    let sizes = Sizes {
        secs: 10,
        resources: 2,
        long_resources: 24,
        long_clients: 96,
    };
    let run = SafetyRun::ci(seed, sizes);
    let outcome = run.run(&LOAD).await;
    let p = LOAD.check(&outcome);
    let line = LOAD.line(&run, &outcome, &p);
    report(&line);
    assert_eq!(
        p.overlaps,
        0,
        "{line}\nfirst overlaps:\n{}",
        p.first.join("\n")
    );
    let f = &outcome.figures;
    assert_eq!(outcome.leaked_keys, 0, "{line}");
    assert_eq!((f.other_errors, f.acquire_lost), (0, 0), "{line}");
    assert!(outcome.recovery.is_some(), "not recovered: {line}");
    assert!(outcome.faults > 0, "{line}");
    assert!(p.reads >= 20 && p.writes >= 5, "too little work: {line}");
}

const TTL: Duration = Duration::from_secs(10);

/// A reader holds; then, with `break_it`, its entry and the resource's
/// marker are deleted on a majority of the nodes; then a writer tries.
/// Both grants are recorded as the randomized run records them; returns
/// the checker's figures and whether the writer was granted.
async fn control(break_it: bool) -> (support::rwlock::ReadWriteFigures, bool) {
    let cluster = Cluster::local(5);
    let redlock = cluster.redlock().await;
    let name = unique("rw-control");
    let checker = Checker::new(1, Arc::new(PlainStore::new(1)));
    // Client 1 reads, client 0 writes (`LOAD.writes`).
    let reader = redlock.read(&name, TTL).acquire().await.expect("reader");
    let r = checker.granted(1, 0, None, Instant::now(), reader.deadline());
    if break_it {
        let entries = format!("quorumlock:rwlock:{{{name}}}:readers");
        for i in 0..3 {
            assert!(cluster.expire_early(i, entries.as_bytes()), "node {i}");
            assert!(cluster.expire_early(i, name.as_bytes()), "node {i}");
        }
    }
    let writer = redlock
        .write(&name, TTL)
        .retry(quorumlock::Retry::Times(0))
        .acquire()
        .await;
    let mut sessions = vec![r];
    let granted = match writer {
        Ok(writer) => {
            sessions.push(checker.granted(0, 0, None, Instant::now(), writer.deadline()));
            writer.release().await.expect("release");
            true
        }
        Err(e) => {
            assert!(e.is_contended(), "{e}");
            false
        }
    };
    drop(sessions);
    reader.release().await.expect("release");
    let figures = LOAD.judge(&checker.grants());
    report(&format!(
        "rwlock negative-control break={break_it}: reads={} writes={} writer_overlaps={}",
        figures.reads, figures.writes, figures.overlaps
    ));
    (figures, granted)
}

#[tokio::test]
async fn negative_control_a_reader_lost_on_a_majority_is_flagged() {
    let (figures, granted) = control(true).await;
    assert!(granted, "the writer takes the resource the reader lost");
    assert_eq!((figures.reads, figures.writes, figures.overlaps), (1, 1, 1));
}

/// The control's arrangement without the break: the writer is refused and
/// nothing is flagged — so the flag above comes from the break.
#[tokio::test]
async fn negative_control_setup_without_the_break_is_clean() {
    let (figures, granted) = control(false).await;
    assert!(!granted);
    assert_eq!((figures.reads, figures.writes, figures.overlaps), (1, 0, 0));
}
