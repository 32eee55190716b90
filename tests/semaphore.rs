//! The counting semaphore on real nodes.

use quorumlock_testkit as support;

use std::time::Duration;

use support::{unique, Cluster};

const TTL: Duration = Duration::from_secs(10);

#[tokio::test]
async fn at_most_l_holders_and_a_release_lets_the_next_in() {
    let cluster = Cluster::shared(5);
    let redlock = cluster.redlock().await;
    let name = unique("sem");
    let a = redlock.semaphore(&name, 2, TTL).acquire().await.expect("a");
    let b = redlock.semaphore(&name, 2, TTL).acquire().await.expect("b");
    let mut slots = [a.slots()[0], b.slots()[0]];
    slots.sort();
    assert_eq!(slots, [0, 1]);
    let c = redlock
        .semaphore(&name, 2, TTL)
        .retry(quorumlock::Retry::Times(0))
        .acquire()
        .await
        .expect_err("third");
    assert!(c.is_contended(), "{c}");
    let status = redlock.semaphore_status(&name, 2).await.unwrap();
    eprintln!("{status}");
    assert_eq!(status.held(), 2);
    a.release().await.unwrap();
    let c = redlock.semaphore(&name, 2, TTL).acquire().await.expect("c");
    c.release().await.unwrap();
    b.release().await.unwrap();
}

/// `stats()` counts permits apart from locks: a permit acquire (granted or
/// refused) moves `stats().permits` and never `stats().locks`, a lock
/// acquire the other way round, and `permits.held` counts permits (a holder
/// of 2 counts 2). Negative control: counting every acquire of the retry
/// loop into the lock counters, as before the split, fails the first
/// assertion on `locks`.
#[tokio::test]
async fn permits_and_locks_are_counted_apart() {
    let cluster = Cluster::shared(5);
    let redlock = cluster.redlock().await;
    let name = unique("sem-stats");
    let sem = |take: u32| redlock.semaphore(&name, 3, TTL).take(take);

    let two = sem(2).acquire().await.expect("2 of 3 permits");
    let refused = sem(2)
        .retry(quorumlock::Retry::Times(0))
        .acquire()
        .await
        .expect_err("only 1 permit left");
    assert!(refused.is_contended(), "{refused}");
    let s = redlock.stats();
    let l = &s.locks;
    assert_eq!(
        (l.acquires, l.held, l.attempt_latency.count, l.wait.count),
        (quorumlock::Acquires::default(), 0, 0, 0),
        "a permit acquire leaves the lock counters alone: {l:?}"
    );
    let p = &s.permits;
    assert_eq!((p.acquires.granted, p.acquires.contended), (1, 1), "{p:?}");
    assert_eq!((p.held, p.wait.count, p.hold.count), (2, 2, 0), "{p:?}");
    assert!(p.attempt_latency.count >= 2, "{p:?}");

    let lock = redlock
        .acquire(unique("sem-stats-lock"), TTL)
        .await
        .expect("a lock");
    let s = redlock.stats();
    assert_eq!((s.locks.acquires.granted, s.locks.held), (1, 1));
    assert_eq!(s.locks.wait.count, 1);
    assert_eq!(
        (s.permits.acquires.granted, s.permits.held),
        (1, 2),
        "a lock acquire leaves the permit counters alone"
    );

    two.release().await.expect("release the permits");
    let one = sem(1).acquire().await.expect("a permit");
    drop(one);
    lock.release().await.expect("release the lock");
    let s = redlock.stats();
    assert_eq!((s.permits.held, s.permits.hold.count), (0, 2), "{s:?}");
    assert_eq!(s.permits.acquires.granted, 2);
    assert_eq!((s.locks.held, s.locks.hold.count), (0, 1), "{s:?}");
    assert_eq!(s.locks.acquires.granted, 1);
}
