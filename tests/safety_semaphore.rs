//! The safety checker on the counting semaphore.
//!
//! `randomized_faults_on_a_minority_keep_at_most_l_permits`: clients take 1
//! (one time in three 2) of the `L = 2` permits of two semaphores with
//! short TTLs on five nodes, while the nemesis of `tests/safety.rs` pauses,
//! kills (with a delayed restart), slows, blackholes and resets a minority
//! of them and holds or delays single clients' links, and clients drop
//! their acquire, extend and release calls at random points. Each holder
//! records its window and slots before acting on its permits; the checker
//! sweeps the windows and asserts that no instant saw more than `L`
//! permits held in a semaphore and no slot two holders, that no slot key
//! is left once TTLs pass, and recovery after the faults (a fresh client
//! takes all `L` permits). `randomized_faults_keep_fenced_permits_unique`
//! does the same with `L = 3` and fenced permits on nodes that keep their
//! counters (AOF): tokens unique per semaphore and ordered by grant. Each
//! prints one summary line.
//!
//! `QUORUMLOCK_SAFETY_SECS` (default 10 each), `QUORUMLOCK_SAFETY_CLIENTS`
//! (default 12) and `QUORUMLOCK_SEED` as in `tests/safety.rs`;
//! `QUORUMLOCK_SAFETY_LONG=1` gives the long run's shape (96 clients, 24
//! semaphores, TTLs 150–400 ms); build it with `--release`:
//!
//! ```text
//! QUORUMLOCK_SAFETY_LONG=1 QUORUMLOCK_SAFETY_SECS=600 cargo test --release \
//!     --test safety_semaphore randomized_faults_on_a_minority_keep_at_most_l_permits
//! ```
//!
//! The negative controls over-admit on purpose — a client that names one
//! permit more than the others where the record of the limit they named is
//! deleted (as before the nodes checked it), and a held slot's key deleted
//! on a majority (outside the model) — and assert that the checker flags
//! the third holder of two permits; with the record kept, that client is
//! refused.

use quorumlock_testkit as support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use support::admission::{over_admissions, slot_overlaps};
use support::checker::{Checker, PlainStore};
use support::permits::Permits;
use support::safety::{SafetyRun, Sizes};
use support::{report, unique, Cluster, NodeOptions};

/// The randomized run as CI sizes it, grown by the environment.
fn ci_run(seed: u64) -> SafetyRun {
    SafetyRun::ci(
        seed,
        Sizes {
            secs: 10,
            resources: 2,
            long_resources: 24,
            long_clients: 96,
        },
    )
}

/// Runs `permits` under the nemesis and asserts the semaphore's promises.
async fn randomized(test: &str, permits: Permits, node_options: NodeOptions) {
    let seed = support::seed(test);
    let mut run = ci_run(seed);
    run.node_options = node_options;
    let outcome = run.run(&permits).await;
    let p = permits.check(&outcome);
    let line = permits.line(&run, &outcome, &p);
    report(&line);
    assert_eq!(
        (p.admission.violations, p.slot_overlaps),
        (0, 0),
        "{line}\nfirst violations:\n{}",
        p.violations()
    );
    assert!(p.admission.max_concurrent <= permits.permits as usize);
    let f = &outcome.figures;
    assert_eq!((f.duplicate_fences, f.fence_inversions), (0, 0), "{line}");
    assert_eq!(outcome.leaked_keys, 0, "{line}");
    assert_eq!((f.other_errors, f.acquire_lost), (0, 0), "{line}");
    assert!(outcome.recovery.is_some(), "not recovered: {line}");
    assert!(outcome.faults > 0, "{line}");
    assert!(p.grants >= 20, "too little work: {line}");
    assert!(
        f.acquire_cancelled + f.extend_cancelled + f.release_cancelled > 0,
        "no call was cancelled: {line}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn randomized_faults_on_a_minority_keep_at_most_l_permits() {
    randomized(
        "safety-semaphore",
        Permits::plain(2),
        NodeOptions::default(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn randomized_faults_keep_fenced_permits_unique() {
    // Fencing counters must survive a kill (the documented assumption).
    let options = NodeOptions {
        aof: true,
        in_memory_dir: true,
        ..NodeOptions::default()
    };
    randomized("safety-semaphore-fenced", Permits::fenced(3), options).await;
}

const TTL: Duration = Duration::from_secs(10);
const PERMITS: u32 = 2;

/// How a negative control over-admits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Break {
    /// Nothing: the third client is refused.
    None,
    /// The third client names `L + 1` permits, with the record of the `L`
    /// the others named deleted on every node.
    MorePermits,
    /// The third client names `L + 1` permits, the record kept: refused.
    MorePermitsRecorded,
    /// The first holder's slot key is deleted on a majority of the nodes.
    SlotDeleted,
}

/// Two clients take one of the two permits each; then, after `how`, a
/// third tries for one. Every grant is recorded as the randomized run
/// records it, all three held at once; returns the checker's grants and
/// whether the third was granted.
async fn control(how: Break) -> (Vec<support::checker::Grant>, bool) {
    let cluster = Cluster::local(5);
    let redlock = cluster.redlock().await;
    let name = unique("sem-control");
    let checker = Checker::new(1, Arc::new(PlainStore::new(1)));
    let take = |permits: u32| {
        redlock
            .semaphore(&name, permits, TTL)
            .retry(quorumlock::Retry::Times(0))
            .acquire()
    };
    let mut held = Vec::new();
    let mut sessions = Vec::new();
    for client in 0..2 {
        let permit = take(PERMITS).await.expect("a free permit");
        let mut s = checker.granted(client, 0, None, Instant::now(), permit.deadline());
        s.slots(permit.slots());
        sessions.push(s);
        held.push(permit);
    }
    match how {
        Break::None | Break::MorePermitsRecorded => {}
        Break::MorePermits => {
            let key = format!("quorumlock:semaphore:{{{name}}}:limit");
            for i in 0..cluster.len() {
                let _: i64 = cluster.exec(i, redis::cmd("DEL").arg(&key));
            }
        }
        Break::SlotDeleted => {
            let key = format!("quorumlock:semaphore:{{{name}}}:{}", held[0].slots()[0]);
            for i in 0..3 {
                assert!(cluster.expire_early(i, key.as_bytes()), "node {i}");
            }
        }
    }
    let third = take(match how {
        Break::MorePermits | Break::MorePermitsRecorded => PERMITS + 1,
        Break::None | Break::SlotDeleted => PERMITS,
    })
    .await;
    let granted = match third {
        Ok(permit) => {
            let mut s = checker.granted(2, 0, None, Instant::now(), permit.deadline());
            s.slots(permit.slots());
            sessions.push(s);
            held.push(permit);
            true
        }
        Err(e) => {
            match how {
                Break::MorePermitsRecorded => assert!(e.is_misconfigured(), "{e}"),
                _ => assert!(e.is_contended(), "{e}"),
            }
            false
        }
    };
    drop(sessions);
    for permit in held {
        permit.release().await.expect("release");
    }
    (checker.grants(), granted)
}

/// Reports a control's figures and returns (over-bound grants, max held,
/// slot overlaps).
fn judge(how: Break, grants: &[support::checker::Grant]) -> (usize, usize, usize) {
    let admission = over_admissions(grants, PERMITS as usize);
    let slots = slot_overlaps(grants);
    report(&format!(
        "semaphore negative-control {how:?}: permits={PERMITS} grants={} \
         max_concurrent_permits={} over_bound={} slot_overlaps={}",
        grants.len(),
        admission.max_concurrent,
        admission.violations,
        slots.len()
    ));
    (admission.violations, admission.max_concurrent, slots.len())
}

#[tokio::test]
async fn negative_control_a_client_naming_more_permits_is_flagged() {
    let (grants, granted) = control(Break::MorePermits).await;
    assert!(
        granted,
        "the third client takes slot 2, which the others never use"
    );
    assert_eq!(judge(Break::MorePermits, &grants), (1, 3, 0));
}

#[tokio::test]
async fn negative_control_a_slot_deleted_on_a_majority_is_flagged() {
    let (grants, granted) = control(Break::SlotDeleted).await;
    assert!(granted, "the third client takes the deleted slot");
    assert_eq!(judge(Break::SlotDeleted, &grants), (1, 3, 1));
}

/// The controls' arrangement without a break: the third client is
/// refused and nothing is flagged — so the flags above come from the
/// break, not the setup. Naming `L + 1` with the record of the limit kept
/// is refused too (a misconfiguration).
#[tokio::test]
async fn negative_control_setup_without_the_break_is_clean() {
    for how in [Break::None, Break::MorePermitsRecorded] {
        let (grants, granted) = control(how).await;
        assert!(!granted, "{how:?}");
        assert_eq!(judge(how, &grants), (0, 2, 0), "{how:?}");
    }
}

/// Repairs racing releases, for permits: each round a permit's slot key is
/// lost on a random node of three whose replies are slowed by 0–150 ms,
/// the permit is extended and released at once; once the client settled
/// the slot is on no node. Negative control: a repair that ignores the
/// release leaves the slot behind within the first rounds (every run).
#[tokio::test]
async fn repairs_racing_releases_leave_no_slot_behind() {
    const TTL: Duration = Duration::from_secs(6);
    let test = "safety-semaphore-repair-races";
    let mut races = support::races::Races::new(test).await;
    let name = support::unique("sem-races");
    let rounds = support::safety::env_u64("QUORUMLOCK_SAFETY_ROUNDS", 20);
    for _ in 0..rounds {
        let permit = races
            .redlock
            .semaphore(&name, 2, TTL)
            .acquire()
            .await
            .expect("a free permit");
        let slot = format!("quorumlock:semaphore:{{{name}}}:{}", permit.slots()[0]);
        let draw = races.lose(&slot);
        permit.extend(TTL).await.expect("extend on two nodes");
        permit.release().await.expect("release");
        races.check(&[&slot], draw).await;
    }
    races.report(test);
}
