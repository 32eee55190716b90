//! The safety checker.
//!
//! `randomized_faults_on_a_minority_keep_mutual_exclusion`: clients take a
//! few resources with short TTLs on five nodes while a seeded nemesis pauses,
//! kills (with a delayed restart), slows, blackholes and resets a minority of
//! them, and clients drop their acquire, extend and release calls at random
//! points and extend to shorter and longer TTLs; the checker asserts no
//! overlapping grant windows, no lost updates, no stale write accepted, no
//! key left once TTLs pass, and recovery after the faults. Prints one
//! summary line.
//!
//! `randomized_clock_jumps_keep_fences_unique`: the same on five Valkey
//! nodes under libfaketime (with `appendfsync always`, so counters survive
//! kills), fenced locks, and a nemesis that also steps a minority node's
//! wall clock forward. A jump is outside the model for mutual exclusion, so
//! only overlaps no jump explains count against it; fencing must hold
//! throughout: no duplicate or inverted fence, no stale write accepted, no
//! lost update.
//!
//! `QUORUMLOCK_SAFETY_SECS` (default 12 each) and `QUORUMLOCK_SAFETY_CLIENTS`
//! (default 12) size both; `QUORUMLOCK_SEED` replays a schedule (the
//! faults and each client's choices; not the machine's timing).
//! `QUORUMLOCK_SAFETY_LONG=1` gives the long run's shape (96 clients, 48
//! resources, TTLs 150–400 ms, 100 ms node timeout) for
//! `QUORUMLOCK_SAFETY_SECS`; build it with `--release` for many grants:
//!
//! ```text
//! QUORUMLOCK_SAFETY_LONG=1 QUORUMLOCK_SAFETY_SECS=900 cargo test --release \
//!     --test safety randomized_clock_jumps_keep_fences_unique
//! ```
//!
//! The negative controls break the model on purpose — a key expiring early
//! on the node two majorities share (deleted, or a real clock jump on
//! Valkey), and a node of the holder's majority restarting empty at once —
//! and assert that the checker flags them.
//!
//! Both take a [`Strategy`]: how clients build their `Redlock`, take a lock
//! (possibly with a fencing token) and which store guards the counter. A
//! fencing or restart-quarantine strategy runs through the same code and
//! reports the same figures.

use quorumlock_testkit as support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use support::checker::{Checker, Figures, Outcome};
use support::safety::{SafetyOutcome, SafetyRun, Sizes};
use support::workload::Strategy;
use support::{report, unique, Cluster, Fault, OneAttempt};

/// The randomized run as CI sizes it, grown by the environment; with
/// `QUORUMLOCK_SAFETY_LONG=1`, the long run's shape.
fn ci_run(seed: u64) -> SafetyRun {
    SafetyRun::ci(
        seed,
        Sizes {
            secs: 12,
            resources: 3,
            long_resources: 48,
            long_clients: 96,
        },
    )
}

/// `QUORUMLOCK_SAFETY_STRATEGY`: `plain` (default), `fenced` or
/// `quarantine` (restart quarantine of the largest TTL).
fn strategy(run: &SafetyRun) -> Strategy {
    match std::env::var("QUORUMLOCK_SAFETY_STRATEGY").as_deref() {
        Ok("fenced") => Strategy::fenced(),
        Ok("quarantine") => Strategy::quarantined(run.workload.max_ttl()),
        Ok("plain") | Err(_) => Strategy::plain(),
        Ok(other) => panic!("unknown QUORUMLOCK_SAFETY_STRATEGY {other}"),
    }
}

/// The assertions every randomized run makes; `line` is its summary.
fn assert_run(outcome: &SafetyOutcome, line: &str) {
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
        "{line}\nfirst overlaps no clock jump explains:\n{}",
        violations.join("\n")
    );
    assert_eq!(f.stale_writes_accepted, 0, "{line}");
    assert_eq!(f.duplicate_fences, 0, "{line}");
    assert_eq!(f.fence_inversions, 0, "{line}");
    assert_eq!(outcome.leaked_keys, 0, "{line}");
    assert_eq!((f.other_errors, f.acquire_lost), (0, 0), "{line}");
    assert!(outcome.recovery.is_some(), "not recovered: {line}");
    assert!(outcome.faults > 0, "{line}");
    assert!(
        f.grants >= 20 && f.writes_accepted >= 10,
        "too little work: {line}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn randomized_faults_on_a_minority_keep_mutual_exclusion() {
    let seed = support::seed("safety");
    let mut run = ci_run(seed);
    let strategy = strategy(&run);
    if strategy.name == "fenced" {
        // Fencing counters must survive a kill (the documented assumption).
        run.node_options.aof = true;
        run.node_options.in_memory_dir = true;
    }
    let outcome = run.run(&strategy).await;
    let line = format!("{} strategy={}", run.line(&outcome), strategy.name);
    report(&line);
    assert_run(&outcome, &line);
    // No clock jumps here: every lost update is a violation too.
    assert_eq!(outcome.figures.lost_updates, 0, "{line}");
    let f = &outcome.figures;
    assert!(
        f.acquire_cancelled + f.extend_cancelled + f.release_cancelled > 0,
        "no call was cancelled: {line}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn randomized_clock_jumps_keep_fences_unique() {
    let Some(mut options) = support::valkey_clock_options("safety-clock") else {
        return;
    };
    // Fencing counters must survive a kill (the documented assumption).
    options.aof = true;
    options.in_memory_dir = true;
    let seed = support::seed("safety-clock");
    let mut run = ci_run(seed);
    run.node_options = options;
    let strategy = Strategy::fenced();
    let outcome = run.run(&strategy).await;
    let line = format!("{} strategy={}", run.line(&outcome), strategy.name);
    report(&line);
    assert_run(&outcome, &line);
    // With fencing, a clock jump may give two holders the lock, but the
    // store takes only the newer one's updates.
    assert_eq!(outcome.figures.lost_updates, 0, "{line}");
    assert!(
        outcome.fault_kinds.contains("clock_jump"),
        "no clock jump drawn: {line}"
    );
}

/// How the model is broken in a negative control.
#[derive(Debug, Clone, Copy)]
enum Break {
    /// The key disappears from the shared node (its clock jumped forward).
    EarlyExpiry,
    /// The shared node is killed and restarted empty at once.
    ImmediateRestart,
    /// The shared node's wall clock really steps forward two minutes
    /// (Valkey under libfaketime): the key expires there by itself.
    ClockJump,
}

/// What a negative control saw.
struct Control {
    figures: Figures,
    second_granted: bool,
}

impl Control {
    fn flagged(&self) -> bool {
        self.figures.overlaps > 0
    }
}

/// A holds a lock on nodes {0, 1, 2} only (3 and 4 reset while it
/// acquires); node 2 loses the key; B then takes {2, 3, 4}. Both run a
/// read–write on the counter, interleaved so B's write lands first.
async fn negative_control(how: Break, strategy: &Strategy) -> Control {
    negative_control_on(Cluster::local(5), how, strategy).await
}

/// [`negative_control`] on five given nodes.
async fn negative_control_on(mut cluster: Cluster, how: Break, strategy: &Strategy) -> Control {
    const TTL: Duration = Duration::from_secs(10);
    const NODE_TIMEOUT: Duration = Duration::from_millis(200);
    let urls = cluster.proxied();
    let name = unique("control");
    let client = |retries| {
        strategy.builder(
            quorumlock::Builder::new(urls.clone())
                .node_timeout(NODE_TIMEOUT)
                .retry(quorumlock::Retry::Times(retries))
                .retry_delay(Duration::from_millis(10), Duration::from_millis(50)),
        )
    };
    let checker = Checker::new(1, (strategy.store)(1));
    tokio::time::sleep(strategy.warmup).await;

    for i in [3, 4] {
        cluster.proxy(i).set(Fault::Reset);
    }
    let a = client(0).build().await.expect("client A");
    let (lock_a, fence_a) = (strategy.acquire)(a.lock(&name, TTL))
        .await
        .expect("A takes nodes 0-2");
    let mut held_a = checker.granted(0, 0, fence_a, Instant::now(), lock_a.deadline());
    // A's SETs to nodes 3 and 4 wait for a connection until their node
    // timeout; healing before that would deliver them.
    tokio::time::sleep(NODE_TIMEOUT * 2).await;
    cluster.heal_proxies();
    let values = cluster.values(name.as_bytes());
    assert!(
        values[..3].iter().all(Option::is_some) && values[3..].iter().all(Option::is_none),
        "A holds exactly nodes 0-2: {values:?}"
    );
    let (read, value_a) = held_a.read(|| !lock_a.validity().is_zero());
    assert_eq!(read, Outcome::Accepted);

    match how {
        Break::EarlyExpiry => assert!(cluster.expire_early(2, name.as_bytes())),
        Break::ImmediateRestart => cluster.restart(2),
        Break::ClockJump => {
            cluster.jump_clock(2, Duration::from_secs(120));
            let values = cluster.values(name.as_bytes());
            assert!(
                values[2].is_none() && values[..2].iter().all(Option::is_some),
                "the jump expired A's key on node 2 only: {values:?}"
            );
        }
    }

    let b = client(3).build().await.expect("client B");
    let second_granted = match (strategy.acquire)(b.lock(&name, TTL)).await {
        Ok((lock_b, fence_b)) => {
            support::safety::second_holder(&checker, lock_b, fence_b).await;
            true
        }
        Err(e) => {
            assert!(e.is_contended() || e.is_unavailable(), "B: {e}");
            false
        }
    };
    held_a.write(value_a + 1, || !lock_a.validity().is_zero());
    held_a.stop();
    let _ = lock_a.release().await;
    let control = Control {
        figures: checker.figures(),
        second_granted,
    };
    let f = &control.figures;
    report(&format!(
        "negative-control {how:?}: strategy={} second_granted={} overlaps={} lost_updates={} \
         stale_writes_accepted={} refused_writes={} longest_overlap={:.0}ms flagged={}",
        strategy.name,
        control.second_granted,
        f.overlaps,
        f.lost_updates,
        f.stale_writes_accepted,
        f.writes_refused,
        f.longest_overlap.as_secs_f64() * 1e3,
        control.flagged(),
    ));
    control
}

fn assert_flagged(c: &Control) {
    assert!(c.second_granted, "B must win {{2, 3, 4}}");
    let f = &c.figures;
    assert_eq!(f.grants, 2);
    assert_eq!(f.overlaps, 1, "the checker flags the double grant");
    assert_eq!(f.lost_updates, 1, "and the lost update");
    assert_eq!(f.stale_writes_accepted, 1, "and A's stale write");
    assert!(f.longest_overlap > Duration::ZERO);
}

#[tokio::test]
async fn negative_control_early_expiry_on_the_shared_node_is_flagged() {
    let control = negative_control(Break::EarlyExpiry, &Strategy::plain()).await;
    assert_flagged(&control);
}

#[tokio::test]
async fn negative_control_immediate_restart_of_a_majority_node_is_flagged() {
    let control = negative_control(Break::ImmediateRestart, &Strategy::plain()).await;
    assert_flagged(&control);
}

/// Five Valkey nodes whose clocks can jump; `None` when skipping is
/// allowed and they are missing.
fn clock_cluster(test: &str) -> Option<Cluster> {
    support::valkey_clock_options(test).map(|o| Cluster::local_custom(5, &o))
}

/// A real forward clock jump on the node two majorities share: the checker
/// must flag the double grant (mutual exclusion does not survive it).
#[tokio::test]
async fn negative_control_clock_jump_on_the_shared_node_is_flagged() {
    let Some(cluster) = clock_cluster("negative-control-clock-jump") else {
        return;
    };
    let control = negative_control_on(cluster, Break::ClockJump, &Strategy::plain()).await;
    assert_flagged(&control);
}

/// The same jump with fencing: the lock still fails, the token does not —
/// B's fence is higher and A's late write is refused.
#[tokio::test]
async fn negative_control_clock_jump_with_fencing_refuses_the_stale_writer() {
    let Some(cluster) = clock_cluster("negative-control-clock-jump-fenced") else {
        return;
    };
    let control = negative_control_on(cluster, Break::ClockJump, &Strategy::fenced()).await;
    assert!(control.second_granted);
    let f = &control.figures;
    assert_eq!(f.overlaps, 1, "the lock alone fails");
    assert_eq!(f.writes_refused, 1, "A's write with the older token");
    assert_eq!(
        (f.lost_updates, f.stale_writes_accepted, f.duplicate_fences),
        (0, 0, 0)
    );
}

/// The control's arrangement without the break: B is refused, nothing is
/// flagged — so the flags above come from the break, not the setup.
#[tokio::test]
async fn negative_control_setup_without_the_break_is_clean() {
    let mut cluster = Cluster::local(5);
    let urls = cluster.proxied();
    let name = unique("control-clean");
    let build = || {
        quorumlock::Builder::new(urls.clone())
            .node_timeout(Duration::from_millis(200))
            .one_attempt()
            .build()
    };
    for i in [3, 4] {
        cluster.proxy(i).set(Fault::Reset);
    }
    let lock_a = build()
        .await
        .expect("A")
        .acquire(&name, Duration::from_secs(10))
        .await
        .expect("A takes nodes 0-2");
    tokio::time::sleep(Duration::from_millis(400)).await;
    cluster.heal_proxies();
    let err = build()
        .await
        .expect("B")
        .acquire(&name, Duration::from_secs(10))
        .await
        .expect_err("B gets 2 of 5");
    assert!(err.is_contended(), "{err}");
    let checker = Checker::new(1, Arc::new(support::checker::PlainStore::new(1)));
    drop(checker.granted(0, 0, None, Instant::now(), lock_a.deadline()));
    assert_eq!(checker.figures().overlaps, 0);
    lock_a.release().await.expect("release");
}

#[tokio::test]
async fn negative_control_early_expiry_with_fencing_refuses_the_stale_writer() {
    let control = negative_control(Break::EarlyExpiry, &Strategy::fenced()).await;
    assert!(control.second_granted);
    let f = &control.figures;
    assert_eq!(f.overlaps, 1, "the lock alone still fails here");
    assert_eq!(f.writes_refused, 1, "A's write with the older token");
    assert_eq!((f.lost_updates, f.stale_writes_accepted), (0, 0));
}

#[tokio::test]
async fn negative_control_immediate_restart_with_quarantine_is_not_granted() {
    let control = negative_control(
        Break::ImmediateRestart,
        &Strategy::quarantined(Duration::from_secs(2)),
    )
    .await;
    assert!(!control.second_granted, "the restarted node does not vote");
    let f = &control.figures;
    assert_eq!(
        (f.overlaps, f.lost_updates, f.stale_writes_accepted),
        (0, 0, 0)
    );
}

/// Fencing counters live on the nodes: a node restarted without persistence
/// forgets them. B is granted the lock beside A (the overlap is flagged),
/// but the lost counter starts again from the node's time, so B's token is
/// above A's and the store refuses A's stale write. Counters that started
/// again from 0 gave B A's token: one lost update, one stale write accepted.
#[tokio::test]
async fn an_immediate_restart_loses_the_counter_and_fencing_still_refuses_the_stale_write() {
    let control = negative_control(Break::ImmediateRestart, &Strategy::fenced()).await;
    assert!(control.second_granted);
    let f = &control.figures;
    assert_eq!(f.overlaps, 1);
    assert_eq!((f.lost_updates, f.stale_writes_accepted), (0, 0));
}
