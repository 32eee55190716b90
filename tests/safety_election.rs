//! The safety checker on leader election.
//!
//! `randomized_faults_on_a_minority_keep_one_leader_at_a_time`: clients
//! campaign for three elections with short TTLs on five nodes, under the
//! nemesis of `tests/safety.rs` (pauses, kills with a delayed restart,
//! slowdowns, blackholes, resets, single links held or delayed); a leader
//! holds for a random time, renewed, reading and writing its election's
//! counter, sometimes proclaiming, then resigns or drops its leadership
//! without resigning; campaigns, proclamations and resignations are
//! dropped at random points. Each leader records its window and epoch
//! before it acts. The checker asserts that no two leaders' windows
//! overlap in one election, no lost update, epochs unique and strictly
//! increasing in the order leaders were granted, no leadership key left
//! once TTLs pass, and recovery after the faults.
//!
//! `randomized_clock_jumps_keep_epochs_unique_and_increasing`: the same on
//! five Valkey nodes under libfaketime (AOF, `appendfsync always`, so epoch
//! counters survive kills) with a nemesis that also steps a minority
//! node's wall clock forward, the store refusing an older epoch. A jump is
//! outside the model for one leader at a time, so only overlaps no jump
//! explains count; epochs must hold throughout: unique, increasing, no
//! stale write accepted, no lost update.
//!
//! `QUORUMLOCK_SAFETY_SECS` (default 10 each), `QUORUMLOCK_SAFETY_CLIENTS`
//! (default 12) and `QUORUMLOCK_SEED` as in `tests/safety.rs`;
//! `QUORUMLOCK_SAFETY_LONG=1` gives the long run's shape (48 clients, 16
//! elections, TTLs 150–400 ms, holds up to 300 ms); build it with
//! `--release`:
//!
//! ```text
//! QUORUMLOCK_SAFETY_LONG=1 QUORUMLOCK_SAFETY_SECS=300 cargo test --release \
//!     --test safety_election randomized_faults_on_a_minority_keep_one_leader_at_a_time
//! ```

use quorumlock_testkit as support;

use std::time::Duration;

use support::leaders::{epoch_inversions, Leaders};
use support::safety::{long_shape, SafetyOutcome, SafetyRun, Sizes};
use support::{report, NodeOptions};

/// The randomized run as CI sizes it, grown by the environment.
fn ci_run(seed: u64) -> SafetyRun {
    let mut run = SafetyRun::ci(
        seed,
        Sizes {
            secs: 10,
            resources: 3,
            long_resources: 16,
            long_clients: 48,
        },
    );
    // Leaderships renew themselves; they are not extended by hand. Here
    // `cancel_extend_one_in` is how often a proclamation is dropped.
    run.workload.extend_one_in = 0;
    run
}

/// How long leaders hold at most: past the largest TTL, so renewals run.
fn hold() -> Duration {
    Duration::from_millis(if long_shape() { 300 } else { 800 })
}

/// Runs `leaders` under the nemesis; returns the outcome and its line.
async fn randomized(
    test: &str,
    leaders: Leaders,
    node_options: NodeOptions,
) -> (SafetyOutcome, String) {
    let seed = support::seed(test);
    let mut run = ci_run(seed);
    run.node_options = node_options;
    let outcome = run.run(&leaders).await;
    let line = leaders.line(&run, &outcome);
    report(&line);
    let f = &outcome.figures;
    let violations: Vec<String> = outcome
        .overlaps
        .iter()
        .filter(|o| !support::checker::explained_by_jump(o, &outcome.jumps))
        .take(5)
        .map(support::checker::Overlap::describe)
        .collect();
    assert!(
        violations.is_empty(),
        "{line}\nfirst overlapping leaderships no clock jump explains:\n{}",
        violations.join("\n")
    );
    assert_eq!(f.duplicate_fences, 0, "duplicate epochs: {line}");
    assert_eq!(f.fence_inversions, 0, "{line}");
    assert_eq!(
        epoch_inversions(&outcome.checker.grants()),
        0,
        "epochs out of grant order: {line}"
    );
    assert_eq!(f.lost_updates, 0, "{line}");
    assert_eq!(f.stale_writes_accepted, 0, "{line}");
    assert_eq!(outcome.leaked_keys, 0, "{line}");
    // A campaign may end lost (its first proclamation reached no majority
    // in time); nothing else.
    assert_eq!(f.other_errors, 0, "{line}");
    assert!(outcome.recovery.is_some(), "not recovered: {line}");
    assert!(outcome.faults > 0, "{line}");
    assert!(f.grants >= 20, "too few leadership changes: {line}");
    (outcome, line)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn randomized_faults_on_a_minority_keep_one_leader_at_a_time() {
    let (outcome, line) = randomized(
        "safety-election",
        Leaders::plain(hold()),
        NodeOptions::default(),
    )
    .await;
    // No clock jumps: no overlap at all.
    assert_eq!(outcome.figures.overlaps, 0, "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn randomized_clock_jumps_keep_epochs_unique_and_increasing() {
    let Some(mut options) = support::valkey_clock_options("safety-election-clock") else {
        return;
    };
    // Epoch counters must survive a kill (the documented assumption).
    options.aof = true;
    options.in_memory_dir = true;
    let (outcome, line) =
        randomized("safety-election-clock", Leaders::fenced(hold()), options).await;
    assert!(
        outcome.fault_kinds.contains("clock_jump"),
        "no clock jump drawn: {line}"
    );
}

/// A leads; with `delete`, its leadership key is then deleted on a
/// majority (outside the model); B campaigns once. Both are recorded as
/// the randomized run records leaders, held at once. Returns the checker
/// and whether B was elected.
async fn control(delete: bool) -> (support::checker::Checker, bool) {
    use std::sync::Arc;
    use std::time::Instant;
    use support::checker::{Checker, PlainStore};

    const TTL: Duration = Duration::from_secs(10);
    let cluster = support::Cluster::local(5);
    let redlock = cluster.redlock().await;
    let name = support::unique("election-control");
    let checker = Checker::new(1, Arc::new(PlainStore::new(1)));
    let a = redlock.campaign(&name, TTL).lead().await.expect("A leads");
    let session_a = checker.granted(0, 0, Some(a.epoch()), Instant::now(), a.deadline());
    if delete {
        let key = format!("quorumlock:election:{{{name}}}");
        for i in 0..3 {
            assert!(cluster.expire_early(i, key.as_bytes()), "node {i}");
        }
    }
    let b = redlock
        .campaign(&name, TTL)
        .retry(quorumlock::Retry::Times(0))
        .lead()
        .await;
    let elected = match b {
        Ok(b) => {
            drop(checker.granted(1, 0, Some(b.epoch()), Instant::now(), b.deadline()));
            b.resign().await.expect("B resigns");
            true
        }
        Err(e) => {
            assert!(e.is_contended(), "{e}");
            false
        }
    };
    drop(session_a);
    let _ = a.resign().await;
    (checker, elected)
}

/// The leadership key deleted on a majority: a second leader is elected
/// while the first still leads, and the checker flags the overlap — while
/// the epoch still orders them.
#[tokio::test]
async fn negative_control_a_leadership_deleted_on_a_majority_is_flagged() {
    let (checker, elected) = control(true).await;
    assert!(elected, "B is elected on the nodes that lost A's key");
    let f = checker.figures();
    report(&format!(
        "election negative-control: changes={} overlaps={} duplicate_epochs={} epoch_inversions={}",
        f.grants,
        f.overlaps,
        f.duplicate_fences,
        epoch_inversions(&checker.grants())
    ));
    assert_eq!(f.overlaps, 1, "the checker flags two leaders at once");
    assert_eq!(f.duplicate_fences, 0);
    assert_eq!(
        epoch_inversions(&checker.grants()),
        0,
        "B's epoch is larger"
    );
}

/// The control's arrangement without the break: B is refused, nothing is
/// flagged.
#[tokio::test]
async fn negative_control_setup_without_the_break_is_clean() {
    let (checker, elected) = control(false).await;
    assert!(!elected);
    assert_eq!(checker.figures().overlaps, 0);
}

/// Repairs racing resignations: each round a leader's lock key is lost on
/// a random node of three whose replies are slowed by 0–150 ms; the
/// leader resigns right after a renewal confirmed; once the client settled
/// neither the lock key nor the record is on any node. Negative control: a
/// repair that ignores the release leaves the lock key behind within the
/// first rounds (every run).
#[tokio::test]
async fn repairs_racing_resignations_leave_nothing_behind() {
    use quorumlock::Renewal;

    const TTL: Duration = Duration::from_secs(6);
    let test = "safety-election-repair-races";
    let mut races = support::races::Races::new(test).await;
    let name = support::unique("election-races");
    let key = format!("quorumlock:election:{{{name}}}");
    let rounds = support::safety::env_u64("QUORUMLOCK_SAFETY_ROUNDS", 20);
    for _ in 0..rounds {
        let leadership = races
            .redlock
            .campaign(&name, TTL)
            .auto_renew(Renewal::every(Duration::from_millis(100)))
            .lead()
            .await
            .expect("lead");
        let draw = races.lose(&key);
        let renewed = races.redlock.stats().leases.renewals;
        assert!(
            support::eventually(Duration::from_secs(10), || {
                races.redlock.stats().leases.renewals > renewed
            })
            .await,
            "no renewal confirmed"
        );
        leadership.resign().await.expect("resign");
        races.check(&[&key, &format!("{key}:leader")], draw).await;
    }
    races.report(test);
}

/// Rolling restarts under a leader, reads checked: three nodes with the
/// restart quarantine; a seeded sequence of restarts without persistence
/// (each node loses the lock and the record), each after the previous
/// node's quarantine and two renewals have passed plus a random delay,
/// while a reader calls `leader()` every 50 ms. Every read must name the
/// valid leader — (E6) of docs/election.md. Negative control: the repair
/// as it was (the lock's key without the record) fails at the second
/// restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_restarts_under_a_leader_keep_it_visible() {
    use rand::{Rng, SeedableRng};
    use std::time::Instant;

    const TTL: Duration = Duration::from_secs(2);
    const QUARANTINE: Duration = Duration::from_secs(2);
    let test = "safety-election-rolling-restarts";
    let seed = support::seed(test);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let restarts = support::safety::env_u64("QUORUMLOCK_SAFETY_RESTARTS", 4);
    let mut cluster = support::Cluster::local(3);
    for node in 0..3 {
        cluster.wait_uptime(node, QUARANTINE).await;
    }
    // A node timeout no loaded machine reaches: only visibility is checked.
    let redlock = cluster
        .builder()
        .restart_quarantine(Some(QUARANTINE))
        .node_timeout(Duration::from_millis(500))
        .build()
        .await
        .expect("build");
    let name = support::unique("election-rolling");
    let leadership = redlock
        .campaign(&name, TTL)
        .value("primary")
        .lead()
        .await
        .expect("lead");
    let expected = Some(quorumlock::Leader {
        epoch: leadership.epoch(),
        value: b"primary".to_vec(),
    });
    let (mut reads, mut last) = (0u64, None);
    for restart in 0..restarts {
        let node = loop {
            let node = rng.random_range(0..3);
            if Some(node) != last {
                break node;
            }
        };
        last = Some(node);
        cluster.restart(node);
        // The quarantine (uptime has one-second resolution), two renewals
        // (a third of the TTL each), and a random wait.
        let gap = QUARANTINE
            + Duration::from_secs(1)
            + TTL * 2 / 3
            + Duration::from_millis(rng.random_range(0..1000));
        let until = Instant::now() + gap;
        while Instant::now() < until {
            let read = redlock.leader(&name).await;
            assert!(
                matches!(&read, Ok(found) if *found == expected),
                "restart {restart} (node {node}), read {reads}: {read:?} while the \
                 leadership is valid (replay with QUORUMLOCK_SEED={seed})\n{}",
                cluster.logs()
            );
            reads += 1;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(!leadership.is_lost(), "the leadership was lost");
    }
    report(&format!(
        "{test}: seed={seed} restarts={restarts} reads={reads} invisible_reads=0"
    ));
    leadership.resign().await.expect("resign");
}
