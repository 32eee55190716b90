//! The lock's contract on healthy nodes: exclusion, expiry, extension,
//! safe release. Runs on `QUORUMLOCK_TEST_NODES` when set.

use quorumlock_testkit as support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use support::{eventually, unique, Cluster};

const TTL: Duration = Duration::from_secs(10);

#[tokio::test]
async fn acquire_sets_the_token_everywhere_and_release_removes_it() {
    let cluster = Cluster::shared(5);
    let redlock = cluster.redlock().await;
    assert_eq!((redlock.nodes(), redlock.quorum()), (5, 3));
    let name = unique("basic");
    let lock = redlock.acquire(&name, TTL).await.expect("acquire");
    assert_eq!(lock.resource(), name.as_bytes());
    let v = lock.validity();
    assert!(v > Duration::from_secs(9) && v <= TTL, "validity {v:?}");

    // The key is the resource byte for byte; the value is one shared token.
    // Acquire returns at quorum; the last nodes' SETs follow within a round
    // trip.
    assert!(cluster.held_on(&name, 5, Duration::from_secs(2)).await);
    let values = cluster.values(name.as_bytes());
    let held: Vec<_> = values.iter().flatten().collect();
    assert_eq!(held.len(), 5, "held on {} nodes", held.len());
    assert!(
        held.windows(2).all(|w| w[0] == w[1]),
        "one token on every node"
    );
    assert!(held[0].starts_with(lock.token_prefix().as_bytes()));
    assert_eq!(held[0].len(), 32, "128-bit hex token");
    let pttl: i64 = cluster.exec(0, redis::cmd("PTTL").arg(&name));
    assert!(pttl > 9_000 && pttl <= 10_000, "PTTL {pttl}");

    lock.release().await.expect("release");
    // Release returns at quorum; the last nodes follow within a round trip.
    assert!(
        cluster
            .released(name.as_bytes(), Duration::from_secs(2))
            .await,
        "release removes every key"
    );
}

#[tokio::test]
async fn concurrent_contenders_get_exactly_one_winner() {
    let cluster = Cluster::shared(5);
    let redlock = cluster.redlock().await;
    let name = unique("contend");
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let (r, n) = (redlock.clone(), name.clone());
        tasks.push(tokio::spawn(async move { r.try_acquire(&n, TTL).await }));
    }
    let mut winners = Vec::new();
    let mut contended = 0;
    for t in tasks {
        match t.await.expect("task") {
            Ok(lock) => winners.push(lock),
            Err(e) if e.is_contended() || e.is_unavailable() => {
                if e.is_contended() {
                    contended += 1;
                }
            }
            Err(e) => panic!("unexpected error: {e}"),
        }
    }
    assert!(winners.len() <= 1, "{} winners", winners.len());
    assert!(contended >= 1);
    // With all contenders failed there must be nothing left behind.
    if let Some(lock) = winners.pop() {
        lock.release().await.expect("release");
    }
    assert!(
        cluster
            .released(name.as_bytes(), Duration::from_secs(2))
            .await,
        "losers cleaned up their partial keys"
    );
}

#[tokio::test]
async fn contention_error_says_how_many_nodes_refused() {
    let cluster = Cluster::shared(5);
    let redlock = cluster.redlock().await;
    let name = unique("held");
    let lock = redlock.acquire(&name, TTL).await.expect("first");
    let err = redlock
        .try_acquire(&name, TTL)
        .await
        .expect_err("second must fail");
    assert!(err.is_contended(), "{err}");
    assert!(!err.is_unavailable() && !err.is_lost() && !err.is_invalid_input());
    match &err {
        quorumlock::Error::Contended {
            held_elsewhere,
            nodes,
            attempts,
            ..
        } => {
            // Decided as soon as a quorum was impossible: at the third refusal.
            assert!((3..=5).contains(held_elsewhere), "{held_elsewhere}");
            assert_eq!((*nodes, *attempts), (5, 1));
        }
        other => panic!("{other:?}"),
    }
    let text = err.to_string();
    assert!(text.contains(&name), "{text}");
    // The holder's keys are untouched by the loser's cleanup.
    assert!(cluster.held_on(&name, 5, Duration::from_secs(2)).await);
    lock.release().await.expect("release");
}

#[tokio::test]
async fn acquire_retries_until_the_holder_releases() {
    let cluster = Cluster::shared(5);
    let redlock = cluster
        .builder()
        .retry(quorumlock::Retry::Times(50))
        .retry_delay(Duration::from_millis(10), Duration::from_millis(30))
        .build()
        .await
        .expect("build");
    let name = unique("wait");
    let lock = redlock.acquire(&name, TTL).await.expect("first");
    let waiter = {
        let (r, n) = (redlock.clone(), name.clone());
        tokio::spawn(async move { r.acquire(&n, TTL).await })
    };
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(
        !waiter.is_finished(),
        "waiter must wait while the lock is held"
    );
    lock.release().await.expect("release");
    let second = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("waiter finishes")
        .expect("task")
        .expect("second acquire after release");
    second.release().await.expect("release");
}

#[tokio::test]
async fn acquire_gives_up_after_the_retry_deadline() {
    let cluster = Cluster::shared(3);
    let redlock = cluster
        .builder()
        .retry_delay(Duration::from_millis(10), Duration::from_millis(20))
        .retry(quorumlock::Retry::Until(Duration::from_millis(300)))
        .build()
        .await
        .expect("build");
    let name = unique("deadline");
    let lock = redlock.acquire(&name, TTL).await.expect("first");
    let start = Instant::now();
    let err = redlock.acquire(&name, TTL).await.expect_err("held");
    let took = start.elapsed();
    assert!(err.is_contended(), "{err}");
    assert!(
        took < Duration::from_secs(3),
        "bounded by the deadline, took {took:?}"
    );
    match err {
        quorumlock::Error::Contended { attempts, .. } => assert!(attempts > 1),
        other => panic!("{other:?}"),
    }
    let err = redlock
        .lock(&name, TTL)
        .retry(quorumlock::Retry::Until(Duration::from_millis(200)))
        .acquire()
        .await
        .expect_err("held");
    assert!(err.is_contended());
    lock.release().await.expect("release");
}

#[tokio::test]
async fn ttl_expiry_frees_the_lock() {
    let cluster = Cluster::shared(5);
    let redlock = cluster.redlock().await;
    let name = unique("expiry");
    let ttl = Duration::from_millis(300);
    let lock = redlock.try_acquire(&name, ttl).await.expect("first");
    assert!(lock.validity() <= ttl - Duration::from_millis(5));
    assert!(redlock.try_acquire(&name, ttl).await.is_err());
    let freed = eventually(Duration::from_secs(3), || {
        cluster.holders(name.as_bytes()) == 0
    })
    .await;
    assert!(freed, "keys expire with the TTL");
    assert_eq!(
        lock.validity(),
        Duration::ZERO,
        "validity reads zero once expired"
    );
    assert!(lock.is_lost());
    let second = redlock.try_acquire(&name, TTL).await.expect("free again");
    // Releasing the expired first lock is not an error and spares the second.
    lock.release()
        .await
        .expect("release of an expired lock is Ok");
    assert_eq!(
        cluster.holders(name.as_bytes()),
        5,
        "the new holder's keys stay"
    );
    second.release().await.expect("release");
}

/// The seed's unsafe-release story: A's lock expires, B takes it, A
/// finishes and releases — B's key must survive on every node.
#[tokio::test]
async fn a_late_release_never_deletes_the_next_holders_key() {
    let cluster = Cluster::shared(5);
    let redlock = cluster.redlock().await;
    let name = unique("report:lock");
    let a = redlock
        .try_acquire(&name, Duration::from_millis(200))
        .await
        .expect("A");
    assert!(
        cluster
            .released(name.as_bytes(), Duration::from_secs(3))
            .await
    );
    let b = redlock.try_acquire(&name, TTL).await.expect("B");
    assert!(cluster.held_on(&name, 5, Duration::from_secs(2)).await);
    let b_values = cluster.values(name.as_bytes());
    a.release()
        .await
        .expect("A's release is a no-op, not an error");
    assert_eq!(
        cluster.values(name.as_bytes()),
        b_values,
        "B's keys untouched"
    );
    // Dropping A-like stale locks is equally harmless.
    b.release().await.expect("B releases");
    assert!(
        cluster
            .released(name.as_bytes(), Duration::from_secs(2))
            .await
    );
}

#[tokio::test]
async fn extend_keeps_the_lock_past_its_first_ttl() {
    let cluster = Cluster::shared(5);
    let redlock = cluster.redlock().await;
    let name = unique("extend");
    // A stall of the test process (a loaded machine, Docker's port proxy)
    // of up to a second between two extends leaves the lock held.
    let ttl = Duration::from_millis(1500);
    let lock = redlock.try_acquire(&name, ttl).await.expect("acquire");
    let first_ttl_ends = Instant::now() + ttl;
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let sent = Instant::now();
        let v = lock.extend(ttl).await.expect("extend");
        let took = sent.elapsed();
        // A whole new TTL, counted from when the extend was sent: less
        // only its round trip and the drift allowance (1 % + 2 ms).
        assert!(
            v <= ttl && v + took + ttl / 20 >= ttl,
            "validity {v:?} after an extend that took {took:?}"
        );
    }
    // Longer than the first TTL has passed: still held.
    assert!(Instant::now() > first_ttl_ends);
    assert!(lock.validity() > Duration::ZERO);
    assert!(redlock
        .try_acquire(&name, ttl)
        .await
        .unwrap_err()
        .is_contended());
    let pttl: i64 = cluster.exec(1, redis::cmd("PTTL").arg(&name));
    assert!(pttl > 300, "PTTL after extend {pttl}");
    lock.release().await.expect("release");
}

#[tokio::test]
async fn extend_after_expiry_fails_and_never_recreates_the_key() {
    let cluster = Cluster::shared(5);
    let redlock = cluster.redlock().await;
    let name = unique("extend-late");
    let lock = redlock
        .try_acquire(&name, Duration::from_millis(150))
        .await
        .expect("acquire");
    assert!(
        cluster
            .released(name.as_bytes(), Duration::from_secs(3))
            .await
    );
    let err = lock.extend(TTL).await.expect_err("expired");
    assert!(err.is_lost(), "{err}");
    assert_eq!(
        cluster.holders(name.as_bytes()),
        0,
        "extend must not re-create keys"
    );
    assert_eq!(lock.validity(), Duration::ZERO);
    let again = lock.extend(TTL).await.expect_err("stays lost");
    match &again {
        quorumlock::Error::Lost {
            reason: quorumlock::LostReason::AlreadyLost { earlier, .. },
            ..
        } => assert_eq!(**earlier, quorumlock::LostReason::Expired, "{again}"),
        other => panic!("{other:?}"),
    }
    drop(lock);
}

#[tokio::test]
async fn extend_fails_when_someone_else_holds_the_keys() {
    let cluster = Cluster::shared(5);
    let redlock = cluster.redlock().await;
    let name = unique("stolen");
    let lock = redlock.try_acquire(&name, TTL).await.expect("acquire");
    // Another client's token replaces ours on three nodes (as after an
    // early expiry): our extension must not count those.
    for i in 0..3 {
        let _: () = cluster.exec(i, redis::cmd("SET").arg(&name).arg("someone-else"));
    }
    let err = lock.extend(TTL).await.expect_err("no quorum");
    match &err {
        quorumlock::Error::Lost {
            reason:
                quorumlock::LostReason::Refused {
                    extended, needed, ..
                },
            ..
        } => {
            // Decided as soon as a quorum was impossible: at most the two
            // nodes still holding our token extended.
            assert!(*extended <= 2, "{extended}");
            assert_eq!(*needed, 3);
        }
        other => panic!("{other:?}"),
    }
    lock.release().await.expect("release");
    let values = cluster.values(name.as_bytes());
    for (i, v) in values.iter().enumerate().take(3) {
        assert_eq!(
            v.as_deref(),
            Some(&b"someone-else"[..]),
            "node {i} untouched"
        );
    }
    assert!(
        eventually(Duration::from_secs(2), || {
            let v = cluster.values(name.as_bytes());
            v[3].is_none() && v[4].is_none()
        })
        .await
    );
    for i in 0..3 {
        let _: () = cluster.exec(i, redis::cmd("DEL").arg(&name));
    }
}

#[tokio::test]
async fn dropping_a_lock_releases_it_in_the_background() {
    let cluster = Cluster::shared(5);
    let redlock = cluster.redlock().await;
    let name = unique("drop");
    let lock = redlock.try_acquire(&name, TTL).await.expect("acquire");
    drop(lock);
    assert!(
        cluster
            .released(name.as_bytes(), Duration::from_secs(2))
            .await,
        "drop released the keys"
    );
}

#[tokio::test]
async fn binary_and_unicode_resource_names_are_stored_byte_for_byte() {
    let cluster = Cluster::shared(5);
    // One name is 1 MiB: each command carries it, which takes longer than
    // the harness's 100 ms node timeout on a busy machine. This test is
    // about the bytes stored, not about latency.
    let redlock = cluster
        .builder()
        .node_timeout(Duration::from_secs(2))
        .build()
        .await
        .expect("build");
    let suffix = rand::random::<u32>().to_be_bytes();
    let names: Vec<Vec<u8>> = vec![
        [&b"\x00\xff\r\n bin "[..], &suffix].concat(),
        [&"zählwerk:🔒:"[..].as_bytes().to_vec()[..], &suffix].concat(),
        [&vec![b'k'; 1 << 20][..], &suffix].concat(),
    ];
    for name in names {
        let lock = redlock.try_acquire(&name, TTL).await.expect("acquire");
        assert_eq!(lock.resource(), &name[..]);
        assert!(cluster.held_on(&name, 5, Duration::from_secs(2)).await);
        let shown = format!("{lock:?}");
        assert!(
            shown.len() < 400,
            "Debug stays short: {} chars",
            shown.len()
        );
        lock.release().await.expect("release");
        assert!(cluster.released(&name, Duration::from_secs(2)).await);
    }
}

#[tokio::test]
async fn one_node_and_even_node_counts_work() {
    for n in [1usize, 2, 4] {
        let cluster = Cluster::shared(n);
        let redlock = cluster.redlock().await;
        assert_eq!(redlock.quorum(), n / 2 + 1);
        let name = unique("sizes");
        let lock = redlock.try_acquire(&name, TTL).await.expect("acquire");
        assert!(redlock
            .try_acquire(&name, TTL)
            .await
            .unwrap_err()
            .is_contended());
        lock.release().await.expect("release");
    }
}

#[tokio::test]
async fn a_redlock_is_shared_across_tasks() {
    fn assert_traits<T: Clone + Send + Sync + 'static>() {}
    assert_traits::<quorumlock::Redlock>();
    let cluster = Cluster::shared(3);
    let redlock = Arc::new(cluster.redlock().await);
    let mut tasks = Vec::new();
    for i in 0..32 {
        let r = redlock.clone();
        let name = unique(&format!("many-{i}"));
        tasks.push(tokio::spawn(async move {
            for _ in 0..5 {
                let lock = r
                    .acquire(&name, TTL)
                    .await
                    .expect("distinct resources never contend");
                lock.release().await.expect("release");
            }
        }));
    }
    for t in tasks {
        t.await.expect("task");
    }
}
