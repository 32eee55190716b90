//! The ways in that are not about faults: a remote check of a held lock,
//! clients built the redis crate's way, per-client background work, and
//! lock options that compose in any order.

use quorumlock_testkit as support;

use std::time::Duration;

use quorumlock::{Builder, Error, NodeView, Operation};
use support::{unique, Cluster};

const TTL: Duration = Duration::from_secs(10);

#[tokio::test]
async fn a_held_lock_is_checked_on_the_nodes() {
    let mut cluster = Cluster::local(5);
    let redlock = cluster.redlock().await;
    let name = unique("remote-check");
    let lock = redlock.acquire(&name, TTL).await.expect("acquire");
    assert!(lock.is_held_remotely().await.expect("answered"));

    // Two nodes lose the key: a majority still carries the token.
    for i in [0, 1] {
        let _: i64 = cluster.exec(i, redis::cmd("DEL").arg(&name));
    }
    assert!(lock.is_held_remotely().await.expect("answered"));

    // A third one: no majority can carry it any more. The local validity
    // is untouched (the check only reads).
    let _: i64 = cluster.exec(2, redis::cmd("DEL").arg(&name));
    assert!(!lock.is_held_remotely().await.expect("answered"));
    assert!(lock.validity() > Duration::from_secs(5), "{lock:?}");

    // Another token on the nodes is not ours either.
    for i in 0..5 {
        let _: () = cluster.exec(i, redis::cmd("SET").arg(&name).arg("someone-else"));
    }
    assert!(!lock.is_held_remotely().await.expect("answered"));

    // Too few nodes answering to tell: an error, quickly.
    let other = unique("remote-check-outage");
    let held = redlock.acquire(&other, TTL).await.expect("acquire");
    for i in [2, 3, 4] {
        cluster.pause(i);
    }
    let err = held
        .is_held_remotely()
        .await
        .expect_err("no quorum answered");
    assert!(
        matches!(
            err,
            Error::Unavailable {
                operation: Operation::Check,
                ..
            }
        ),
        "{err}"
    );
    for i in [2, 3, 4] {
        cluster.resume(i);
    }
    assert!(held.is_held_remotely().await.expect("answered again"));
    held.release().await.expect("release");
    drop(lock);
    assert!(cluster.released(&other, Duration::from_secs(5)).await);
}

/// A node that does not answer within the node timeout is not one where
/// the resource is free: `status` shows it failed (a timeout), and the
/// resource unknown while too few nodes answered. Catches a status that
/// leaves unanswered nodes `Free`: it called the resource free with two of
/// three nodes silent.
#[tokio::test]
async fn status_shows_a_silent_node_as_failed_not_free() {
    let mut cluster = Cluster::local(3);
    let redlock = cluster
        .builder()
        .node_timeout(Duration::from_millis(200))
        .build()
        .await
        .expect("build");
    let name = unique("status-silent");
    for i in [1, 2] {
        cluster.pause(i);
    }
    let status = redlock.status(&name).await;
    for i in [1, 2] {
        cluster.resume(i);
    }
    assert_eq!(status.free(), 1, "{status}");
    for (label, view) in &status.nodes[1..] {
        assert!(
            matches!(view, NodeView::Failed(failure) if failure.kind.is_timeout()),
            "{label}: {view:?}"
        );
    }
    assert!(status.to_string().contains("is unknown"), "{status}");
    let answered = redlock.status(&name).await;
    assert_eq!(answered.free(), 3, "{answered}");
}

#[tokio::test]
async fn a_remote_check_that_cannot_tell_says_so() {
    // Five nodes, quorum three: `false` only when no majority can carry
    // the token (three or more said no), `true` at three yes, an error in
    // between. The first case is the one that answered `Ok(false)`: the
    // key deleted on one node, two silent, two yes — four nodes may still
    // carry it.
    let mut cluster = Cluster::local(5);
    let redlock = cluster.redlock().await;
    let cases: [(&[usize], &[usize], Option<bool>); 5] = [
        // (key deleted on, nodes paused, answer)
        (&[0], &[3, 4], None),
        (&[0, 1], &[4], None),
        (&[], &[0, 1], Some(true)),
        (&[0, 1, 2], &[4], Some(false)),
        (&[0, 1, 2], &[3, 4], Some(false)),
    ];
    for (deleted, paused, want) in cases {
        let name = unique("remote-check-split");
        let lock = redlock.acquire(&name, TTL).await.expect("acquire");
        for &i in deleted {
            let _: i64 = cluster.exec(i, redis::cmd("DEL").arg(&name));
        }
        for &i in paused {
            cluster.pause(i);
        }
        let got = lock.is_held_remotely().await;
        for &i in paused {
            cluster.resume(i);
        }
        let case = format!("deleted on {deleted:?}, paused {paused:?}: {got:?}");
        match want {
            Some(held) => assert_eq!(got.expect("answered"), held, "{case}"),
            None => {
                let err = got.expect_err(&case);
                assert!(
                    matches!(
                        err,
                        Error::Unavailable {
                            operation: Operation::Check,
                            ..
                        }
                    ),
                    "{case}"
                );
            }
        }
        lock.release().await.expect("release");
    }
    // A node that fails fast (killed: refused at once) does not end the
    // check before the three no that answer it.
    cluster.kill(4);
    let name = unique("remote-check-dead");
    let lock = redlock.acquire(&name, TTL).await.expect("acquire");
    for i in [0, 1, 2] {
        let _: i64 = cluster.exec(i, redis::cmd("DEL").arg(&name));
    }
    assert!(!lock.is_held_remotely().await.expect("three said no"));
    drop(lock);
}

#[tokio::test]
async fn clients_built_the_redis_way_are_used_as_they_are() {
    let cluster = Cluster::shared(5);
    let clients = cluster
        .urls()
        .into_iter()
        .map(|url| redis::Client::open(url).expect("client"))
        .collect::<Vec<_>>();
    let redlock = Builder::from_clients(clients.clone())
        .build()
        .await
        .expect("build");
    assert_eq!(redlock.nodes(), 5);
    let name = unique("from-clients");
    let lock = redlock.acquire(&name, TTL).await.expect("acquire");
    assert!(cluster.held_on(&name, 5, Duration::from_secs(2)).await);
    lock.release().await.expect("release");
    assert!(cluster.released(&name, Duration::from_secs(5)).await);

    // The same node twice would vote twice.
    let twice = vec![clients[0].clone(), clients[0].clone()];
    let err = Builder::from_clients(twice)
        .build()
        .await
        .expect_err("refused");
    assert!(err.to_string().contains("listed twice"), "{err}");

    // `ConnectionInfo` works as well as URLs.
    let infos = cluster
        .urls()
        .into_iter()
        .map(|url| redis::IntoConnectionInfo::into_connection_info(url).expect("info"))
        .collect::<Vec<_>>();
    let redlock = Builder::new(infos).build().await.expect("build");
    let lock = redlock.try_acquire(&name, TTL).await.expect("acquire");
    lock.release().await.expect("release");
}

#[tokio::test]
async fn settle_waits_only_for_this_clients_work() {
    let mut stuck = Cluster::local(3);
    let quiet = Cluster::shared(3);
    let busy = stuck.redlock().await;
    let idle = quiet.redlock().await;
    let name = unique("settle-per-client");
    let lock = busy.acquire(&name, TTL).await.expect("acquire");
    // A hung node: the release returns at quorum, its command to the hung
    // node stays in flight in `busy`'s background.
    stuck.pause(2);
    lock.release().await.expect("a majority released");
    assert!(
        !busy.settle(Duration::from_millis(200)).await,
        "the release to the hung node is still running"
    );
    // With one registry for the whole process, this would wait for the
    // hung node as well, and time out.
    assert!(
        idle.settle(Duration::from_secs(2)).await,
        "another client's work is not this client's"
    );
    stuck.resume(2);
    assert!(
        busy.settle(Duration::from_secs(10)).await,
        "done once the node wakes"
    );
    assert_eq!(stuck.holders(name.as_bytes()), 0);
}

#[tokio::test]
async fn lock_options_compose_in_any_order() {
    let cluster = Cluster::shared(3);
    let redlock = cluster.redlock().await;
    let name = unique("options");
    let held = redlock.acquire(&name, TTL).await.expect("acquire");
    let attempts = |err: Error| match err {
        Error::Contended { attempts, .. } => attempts,
        other => panic!("expected contention, got {other}"),
    };
    let wait = Duration::from_millis(400);
    let a = redlock
        .lock(&name, TTL)
        .retries(1)
        .wait(wait)
        .acquire()
        .await;
    let b = redlock
        .lock(&name, TTL)
        .wait(wait)
        .retries(1)
        .acquire()
        .await;
    assert_eq!(attempts(a.expect_err("held")), 2);
    assert_eq!(attempts(b.expect_err("held")), 2);

    // A wait alone has no count limit: it tries until the time is spent.
    let c = redlock.lock(&name, TTL).wait(wait).acquire().await;
    assert!(attempts(c.expect_err("held")) > 2);

    // A fenced lock covers one resource only, whatever the order.
    let other = unique("options-other");
    for request in [
        redlock.lock(&name, TTL).fenced().and(&other),
        redlock.lock(&name, TTL).and(&other).fenced(),
    ] {
        assert!(request
            .acquire()
            .await
            .expect_err("refused")
            .is_invalid_input());
    }
    held.release().await.expect("release");
}
