//! The safety checker.
//!
//! `randomized_faults_on_a_minority_keep_mutual_exclusion`: clients take a
//! few resources with short TTLs on five nodes while a seeded nemesis pauses,
//! kills (with a delayed restart), slows, blackholes and resets a minority of
//! them; the checker asserts no overlapping grant windows, no lost updates,
//! no stale write accepted, no key left once TTLs pass, and recovery after
//! the faults. Prints one summary line. `QUORUMLOCK_SAFETY_SECS` (default
//! 20) and `QUORUMLOCK_SAFETY_CLIENTS` (default 16) size it;
//! `QUORUMLOCK_SEED` replays a schedule.
//!
//! The negative controls break the model on purpose — a key expiring early
//! on the node two majorities share, and a node of the holder's majority
//! restarting empty at once — and assert that the checker flags both.
//!
//! Both take a [`Strategy`]: how clients build their `Redlock`, take a lock
//! (possibly with a fencing token) and which store guards the counter. A
//! fencing or restart-quarantine strategy runs through the same code and
//! reports the same figures.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use quorumlock::Redlock;
use support::checker::{Checker, Figures, Outcome};
use support::workload::{SafetyRun, Strategy, Workload};
use support::{report, unique, Cluster, Fault};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The randomized run as CI sizes it, grown by the environment.
fn ci_run(seed: u64) -> SafetyRun {
    SafetyRun {
        seed,
        duration: Duration::from_secs(env_u64("QUORUMLOCK_SAFETY_SECS", 20).max(3)),
        nodes: 5,
        max_faulty: 2,
        workload: Workload {
            clients: env_u64("QUORUMLOCK_SAFETY_CLIENTS", 16).max(1) as usize,
            resources: 3,
            ttls: vec![
                Duration::from_millis(250),
                Duration::from_millis(400),
                Duration::from_millis(600),
            ],
            work: Duration::from_millis(40),
            extend_one_in: 4,
            think: Duration::from_millis(20),
            node_timeout: Duration::from_millis(50),
            retry_count: 2,
            retry_delay_max: Duration::from_millis(50),
        },
    }
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn randomized_faults_on_a_minority_keep_mutual_exclusion() {
    let seed = support::seed("safety");
    let run = ci_run(seed);
    let strategy = strategy(&run);
    let outcome = run.run(&strategy).await;
    let line = format!("{} strategy={}", run.line(&outcome), strategy.name);
    report(&line);
    let f = &outcome.figures;
    assert!(
        outcome.overlaps.is_empty(),
        "{line}\nfirst overlaps: {:#?}",
        &outcome.overlaps[..outcome.overlaps.len().min(3)]
    );
    assert_eq!(f.lost_updates, 0, "{line}");
    assert_eq!(f.stale_writes_accepted, 0, "{line}");
    assert_eq!(outcome.leaked_keys, 0, "{line}");
    assert_eq!(f.other_errors, 0, "{line}");
    assert!(outcome.recovery.is_some(), "not recovered: {line}");
    assert!(outcome.faults > 0, "{line}");
    assert!(
        f.grants >= 20 && f.writes_accepted >= 10,
        "too little work: {line}"
    );
}

/// How the model is broken in a negative control.
#[derive(Debug, Clone, Copy)]
enum Break {
    /// The key disappears from the shared node (its clock jumped forward).
    EarlyExpiry,
    /// The shared node is killed and restarted empty at once.
    ImmediateRestart,
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
    const TTL: Duration = Duration::from_secs(10);
    const NODE_TIMEOUT: Duration = Duration::from_millis(200);
    let mut cluster = Cluster::local(5);
    let urls = cluster.proxied();
    let name = unique("control");
    let client = |retries| {
        strategy.builder(
            Redlock::builder(&urls)
                .node_timeout(NODE_TIMEOUT)
                .retry_count(retries)
                .retry_delay(Duration::from_millis(10), Duration::from_millis(50)),
        )
    };
    let checker = Checker::new(1, (strategy.store)(1));
    tokio::time::sleep(strategy.warmup).await;

    for i in [3, 4] {
        cluster.proxy(i).set(Fault::Reset);
    }
    let a = client(0).build().await.expect("client A");
    let (lock_a, fence_a) = (strategy.acquire)(a, name.clone().into_bytes(), TTL)
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
    }

    let b = client(3).build().await.expect("client B");
    let second_granted = match (strategy.acquire)(b, name.clone().into_bytes(), TTL).await {
        Ok((lock_b, fence_b)) => {
            let mut held_b = checker.granted(1, 0, fence_b, Instant::now(), lock_b.deadline());
            let (read, value_b) = held_b.read(|| !lock_b.validity().is_zero());
            if read == Outcome::Accepted {
                tokio::time::sleep(Duration::from_millis(50)).await;
                held_b.write(value_b + 1, || !lock_b.validity().is_zero());
            }
            held_b.stop();
            let _ = lock_b.release().await;
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

/// The control's arrangement without the break: B is refused, nothing is
/// flagged — so the flags above come from the break, not the setup.
#[tokio::test]
async fn negative_control_setup_without_the_break_is_clean() {
    let mut cluster = Cluster::local(5);
    let urls = cluster.proxied();
    let name = unique("control-clean");
    let build = || {
        Redlock::builder(&urls)
            .node_timeout(Duration::from_millis(200))
            .retry_count(0)
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
/// forgets them, B's token equals A's, and the store cannot tell them apart
/// — the documented limit (run such nodes with `appendfsync always`).
#[tokio::test]
async fn negative_control_immediate_restart_defeats_fencing_without_persistence() {
    let control = negative_control(Break::ImmediateRestart, &Strategy::fenced()).await;
    assert!(control.second_granted);
    let f = &control.figures;
    assert_eq!(f.overlaps, 1);
    assert_eq!((f.lost_updates, f.stale_writes_accepted), (1, 1));
}
