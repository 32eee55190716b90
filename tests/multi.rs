//! Locks over several resources: all or nothing on each node, released and
//! extended together, overlapping sets exclude each other.

use quorumlock_testkit as support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use quorumlock::{Error, Redlock};
use support::{unique, Cluster};

const TTL: Duration = Duration::from_secs(10);

/// The resource a contended error names.
fn held_resource(err: &Error) -> &str {
    match err {
        Error::Contended { resource, .. } => resource.as_str(),
        other => panic!("not contended: {other}"),
    }
}

/// Attempts (the busiest node's acquire replies) and commands (all nodes)
/// of one client.
fn attempts_and_commands(redlock: &Redlock) -> (u64, u64) {
    let stats = redlock.stats();
    let attempts = stats
        .nodes
        .iter()
        .map(|n| n.acquire.yes + n.acquire.no)
        .max()
        .unwrap_or(0);
    (attempts, stats.nodes.iter().map(|n| n.commands).sum())
}

#[tokio::test]
async fn a_waiter_on_a_free_and_a_held_resource_waits_on_the_held_one() {
    // One resource free, the other held for the whole wait. The waiter
    // used to look at the first resource only, find it free and try again
    // at once, in a loop: about 1,000 attempts and 12,000 commands in 3 s,
    // where a waiter on the held resource alone makes a handful. Both
    // waiters now make about as few; the error names the held resource.
    let cluster = Cluster::shared(5);
    let holder = cluster.redlock().await;
    let (free, held) = (unique("multi-free"), unique("multi-held"));
    let lock = holder.acquire(&held, TTL).await.expect("holder");
    let (single, multi) = (cluster.redlock().await, cluster.redlock().await);
    let wait = Duration::from_secs(3);
    let (alone, both) = tokio::join!(
        single
            .lock(&held, TTL)
            .retry(quorumlock::Retry::Until(wait))
            .acquire(),
        multi
            .lock_all([&free, &held], TTL)
            .retry(quorumlock::Retry::Until(wait))
            .acquire(),
    );
    let alone = alone.expect_err("held for the whole wait");
    let both = both.expect_err("held for the whole wait");
    assert!(
        alone.is_contended() && both.is_contended(),
        "{alone} / {both}"
    );
    let (single_attempts, single_commands) = attempts_and_commands(&single);
    let (multi_attempts, multi_commands) = attempts_and_commands(&multi);
    println!(
        "in {wait:?}: [held] {single_attempts} attempts, {single_commands} commands; \
         [free, held] {multi_attempts} attempts, {multi_commands} commands"
    );
    // The same waiting as the single resource's (a look reads two keys).
    assert!(
        multi_attempts <= 2 * single_attempts + 2,
        "{multi_attempts} attempts on [free, held], {single_attempts} on [held]"
    );
    assert!(
        multi_commands <= 2 * single_commands + 20,
        "{multi_commands} commands on [free, held], {single_commands} on [held]"
    );
    assert_eq!(held_resource(&both), held, "{both}");
    assert_eq!(
        cluster.holders(free.as_bytes()),
        0,
        "nothing left on the free one"
    );
    lock.release().await.expect("release");
}

#[tokio::test]
async fn all_resources_are_taken_released_and_extended_together() {
    let cluster = Cluster::shared(5);
    let redlock = cluster.redlock().await;
    let (a, b, c) = (unique("acct-a"), unique("acct-b"), unique("acct-c"));
    let lock = redlock
        .lock_all([&a, &b, &c], TTL)
        .acquire()
        .await
        .expect("acquire");
    assert_eq!(lock.resources().count(), 3);
    assert_eq!(lock.resource(), a.as_bytes());
    let token = cluster.values(a.as_bytes())[0].clone().expect("set");
    for r in [&a, &b, &c] {
        assert!(cluster
            .values(r.as_bytes())
            .iter()
            .all(|v| v.as_ref() == Some(&token)));
    }
    // Each resource alone is now taken.
    assert!(redlock
        .try_acquire(&b, TTL)
        .await
        .unwrap_err()
        .is_contended());
    lock.extend(Duration::from_secs(20))
        .await
        .expect("extend all");
    let pttl: i64 = cluster.exec(2, redis::cmd("PTTL").arg(&c));
    assert!(pttl > 15_000, "{pttl}");
    lock.release().await.expect("release");
    for r in [&a, &b, &c] {
        assert!(cluster.released(r.as_bytes(), Duration::from_secs(2)).await);
    }
}

#[tokio::test]
async fn one_taken_resource_blocks_the_set_and_nothing_is_set() {
    let cluster = Cluster::shared(5);
    let redlock = cluster.one_attempt_redlock().await;
    let (a, b) = (unique("free"), unique("taken"));
    let holder = redlock.acquire(&b, TTL).await.expect("b");
    let err = redlock
        .lock_all([&a, &b], TTL)
        .acquire()
        .await
        .expect_err("b is held");
    assert!(err.is_contended(), "{err}");
    assert_eq!(
        held_resource(&err),
        b,
        "names the resource held, not the first"
    );
    assert_eq!(
        cluster.holders(a.as_bytes()),
        0,
        "all or nothing: a never set"
    );
    holder.release().await.expect("release");
}

#[tokio::test]
async fn extend_fails_when_one_resource_was_lost() {
    let cluster = Cluster::shared(5);
    let redlock = cluster.redlock().await;
    let (a, b) = (unique("x"), unique("y"));
    let lock = redlock
        .lock_all([&a, &b], TTL)
        .acquire()
        .await
        .expect("acquire");
    assert!(cluster.held_on(&b, 5, Duration::from_secs(5)).await);
    for i in 0..3 {
        let _: () = cluster.exec(i, redis::cmd("DEL").arg(&b));
    }
    let err = lock.extend(TTL).await.expect_err("b gone on a majority");
    assert!(err.is_lost(), "{err}");
    assert_eq!(cluster.holders(b.as_bytes()), 2, "never re-created");
    lock.release().await.expect("release");
}

#[tokio::test]
async fn bad_resource_lists_are_rejected() {
    let cluster = Cluster::shared(3);
    let redlock = cluster.redlock().await;
    let none: [&str; 0] = [];
    assert!(redlock
        .lock_all(none, TTL)
        .acquire()
        .await
        .unwrap_err()
        .is_invalid_input());
    assert!(redlock
        .lock_all(["a", "a"], TTL)
        .acquire()
        .await
        .unwrap_err()
        .is_invalid_input());
    assert!(redlock
        .lock_all(["a", ""], TTL)
        .acquire()
        .await
        .unwrap_err()
        .is_invalid_input());
    let err = redlock
        .lock_all(["a", "b"], TTL)
        .fenced()
        .acquire()
        .await
        .expect_err("fencing is per resource");
    assert!(err.is_invalid_input(), "{err}");
}

#[tokio::test]
async fn overlapping_sets_never_hold_a_resource_twice() {
    let cluster = Cluster::shared(5);
    let redlock = cluster
        .builder()
        .retry(quorumlock::Retry::Times(200))
        .retry_delay(Duration::from_millis(1), Duration::from_millis(20))
        .build()
        .await
        .expect("build");
    let names: Vec<String> = (0..4).map(|i| unique(&format!("ring-{i}"))).collect();
    // Sets around a ring: each overlaps its neighbours.
    let sets: Vec<Vec<String>> = (0..4)
        .map(|i| vec![names[i].clone(), names[(i + 1) % 4].clone()])
        .collect();
    let occupied: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let violations = Arc::new(Mutex::new(0usize));
    let mut tasks = Vec::new();
    for (who, set) in sets.into_iter().enumerate() {
        for _ in 0..2 {
            let (r, set, occ, bad) = (
                redlock.clone(),
                set.clone(),
                occupied.clone(),
                violations.clone(),
            );
            tasks.push(tokio::spawn(async move {
                let mut held = 0;
                for _ in 0..10 {
                    let lock = r
                        .lock_all(&set, TTL)
                        .acquire()
                        .await
                        .expect("eventually free");
                    {
                        let mut occ = occ.lock().expect("map");
                        for name in &set {
                            if occ.insert(name.clone(), who).is_some() {
                                *bad.lock().expect("count") += 1;
                            }
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    {
                        let mut occ = occ.lock().expect("map");
                        for name in &set {
                            occ.remove(name);
                        }
                    }
                    lock.release().await.expect("release");
                    held += 1;
                }
                held
            }));
        }
    }
    let mut total = 0;
    for t in tasks {
        total += t.await.expect("task");
    }
    assert_eq!(total, 80);
    assert_eq!(
        *violations.lock().expect("count"),
        0,
        "a resource was held twice"
    );
}
