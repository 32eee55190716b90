//! A minority of nodes dead, hung or restarted; per-node error replies;
//! cancellation. Needs process control, so always runs on local nodes.

use quorumlock_testkit as support;

use std::time::{Duration, Instant};

use support::{eventually, unique, Cluster, OneAttempt};

const TTL: Duration = Duration::from_secs(30);
/// Long enough that waiting for a hung node would be unmistakable.
const PATIENT: Duration = Duration::from_secs(5);

async fn patient_redlock(cluster: &Cluster) -> quorumlock::Redlock {
    cluster
        .builder()
        .node_timeout(PATIENT)
        .one_attempt()
        .build()
        .await
        .expect("build")
}

#[tokio::test]
async fn two_of_five_down_still_acquires() {
    let mut cluster = Cluster::local(5);
    let redlock = cluster.redlock().await;
    cluster.kill(1);
    cluster.kill(3);
    let name = unique("minority-down");
    let lock = redlock.acquire(&name, TTL).await.expect("3 of 5 suffice");
    assert!(lock.validity() > TTL - Duration::from_secs(1));
    lock.release().await.expect("release on the live majority");
}

#[tokio::test]
async fn two_of_five_hung_acquire_and_release_do_not_wait_for_them() {
    let mut cluster = Cluster::local(5);
    let redlock = patient_redlock(&cluster).await;
    cluster.pause(0);
    cluster.pause(4);
    let name = unique("minority-hung");
    let start = Instant::now();
    let lock = redlock
        .try_acquire(&name, TTL)
        .await
        .expect("3 of 5 suffice");
    let release_start = Instant::now();
    lock.release().await.expect("release");
    let (acquire, release) = (release_start - start, release_start.elapsed());
    // The node timeout is 5 s: finishing far below it proves the decision
    // was taken at quorum, not after the hung nodes.
    assert!(
        acquire < PATIENT / 2,
        "acquire waited for hung nodes: {acquire:?}"
    );
    assert!(
        release < PATIENT / 2,
        "release waited for hung nodes: {release:?}"
    );
    cluster.resume(0);
    cluster.resume(4);
    // The SETs queued in the paused nodes ran on resume; the releases
    // queued behind them removed those keys: no orphan (TTL is 30 s).
    assert!(
        cluster
            .released(name.as_bytes(), Duration::from_secs(5))
            .await,
        "orphaned keys after resume: {:?}",
        cluster.values(name.as_bytes())
    );
}

#[tokio::test]
async fn three_of_five_down_fails_fast_as_unavailable_and_leaves_nothing() {
    let mut cluster = Cluster::local(5);
    let redlock = cluster
        .builder()
        .retry(quorumlock::Retry::Times(2))
        .build()
        .await
        .expect("build");
    for i in [0, 2, 4] {
        cluster.kill(i);
    }
    let name = unique("majority-down");
    let start = Instant::now();
    let err = redlock.acquire(&name, TTL).await.expect_err("no quorum");
    assert!(err.is_unavailable(), "{err}");
    assert!(!err.is_contended());
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    let failures = err.node_failures();
    assert!(failures.len() >= 2, "{failures:?}");
    assert!(failures
        .iter()
        .all(|f| matches!(f.kind, quorumlock::NodeFailureKind::Connection(_))));
    // The redis error is kept: Error → first NodeFailure → RedisError.
    let failure = std::error::Error::source(&err).expect("the first node failure");
    let redis_error = failure
        .source()
        .and_then(|e| e.downcast_ref::<redis::RedisError>())
        .expect("the redis error behind it");
    assert!(
        redis_error.is_connection_refusal() || redis_error.is_io_error(),
        "{redis_error:?}"
    );
    assert!(failures[0].redis_error().is_some());
    // The last attempt's releases to the healthy nodes may still be in
    // flight when the error returns; they are this client's background work.
    assert!(
        redlock.settle(Duration::from_secs(5)).await,
        "cleanup finished"
    );
    assert_eq!(
        cluster.holders(name.as_bytes()),
        0,
        "healthy nodes cleaned up"
    );
}

#[tokio::test]
async fn three_of_five_hung_fails_and_nothing_is_left_after_they_resume() {
    let mut cluster = Cluster::local(5);
    let redlock = cluster
        .builder()
        .node_timeout(Duration::from_millis(200))
        .one_attempt()
        .build()
        .await
        .expect("build");
    for i in [1, 2, 3] {
        cluster.pause(i);
    }
    let name = unique("majority-hung");
    let err = redlock
        .try_acquire(&name, TTL)
        .await
        .expect_err("no quorum");
    assert!(err.is_unavailable(), "{err}");
    assert!(
        err.node_failures().iter().any(|f| f.kind.is_timeout()),
        "{err}"
    );
    assert!(
        cluster
            .released(name.as_bytes(), Duration::from_secs(2))
            .await,
        "answering nodes released at once"
    );
    for i in [1, 2, 3] {
        cluster.resume(i);
    }
    assert!(
        cluster
            .released(name.as_bytes(), Duration::from_secs(5))
            .await,
        "queued SETs were followed by releases: {:?}",
        cluster.values(name.as_bytes())
    );
}

#[tokio::test]
async fn a_restarted_node_is_used_again() {
    let mut cluster = Cluster::local(5);
    let redlock = cluster.redlock().await;
    let name = unique("restart");
    let lock = redlock.acquire(&name, TTL).await.expect("acquire");
    lock.release().await.expect("release");
    cluster.restart(2);
    // The first command after the restart may meet the dead connection;
    // the client opens a new connection and the node votes again.
    let mut voted = false;
    for _ in 0..20 {
        let lock = redlock
            .acquire(&name, TTL)
            .await
            .expect("acquire after restart");
        voted = cluster.values(name.as_bytes())[2].is_some();
        lock.release().await.expect("release");
        if voted {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(voted, "restarted node never took part again");
}

#[tokio::test]
async fn extend_with_a_hung_minority_does_not_wait_for_it() {
    let mut cluster = Cluster::local(5);
    let redlock = patient_redlock(&cluster).await;
    let name = unique("extend-hung");
    let lock = redlock.try_acquire(&name, TTL).await.expect("acquire");
    cluster.pause(3);
    let start = Instant::now();
    let v = lock.extend(TTL).await.expect("extend on 4 of 5");
    assert!(start.elapsed() < PATIENT / 2, "{:?}", start.elapsed());
    assert!(v > TTL - Duration::from_secs(1));
    lock.release().await.expect("release");
    cluster.resume(3);
}

#[tokio::test]
async fn release_survives_a_script_flush() {
    let cluster = Cluster::local(5);
    let redlock = cluster.redlock().await;
    let name = unique("noscript");
    // Load the scripts, then flush them everywhere.
    let warm = redlock.acquire(&name, TTL).await.expect("acquire");
    warm.extend(TTL).await.expect("extend loads the script");
    warm.release().await.expect("release loads the script");
    let lock = redlock.acquire(&name, TTL).await.expect("acquire");
    for i in 0..5 {
        let _: () = cluster.exec(i, redis::cmd("SCRIPT").arg("FLUSH"));
    }
    lock.extend(TTL).await.expect("extend falls back to EVAL");
    for i in 0..5 {
        let _: () = cluster.exec(i, redis::cmd("SCRIPT").arg("FLUSH"));
    }
    lock.release().await.expect("release falls back to EVAL");
    assert!(
        cluster
            .released(name.as_bytes(), Duration::from_secs(2))
            .await
    );
}

#[tokio::test]
async fn a_resource_holding_a_hash_is_a_refusal_on_that_node_not_a_crash() {
    let cluster = Cluster::local(5);
    let redlock = cluster.redlock().await;
    let name = unique("wrongtype");
    let _: () = cluster.exec(0, redis::cmd("HSET").arg(&name).arg("f").arg("v"));
    let lock = redlock.try_acquire(&name, TTL).await.expect("4 of 5 grant");
    // The acquire returned at the third yes: its fourth SET may be on its
    // way still.
    assert!(cluster.held_on(&name, 4, Duration::from_secs(5)).await);
    // Extend and release hit WRONGTYPE on node 0: a failed vote there.
    lock.extend(TTL).await.expect("extend on the other four");
    lock.release().await.expect("release on the other four");
    // The release returned at the third yes too: the fourth delete is
    // awaited before the keys are changed by hand.
    assert!(
        cluster
            .released(name.as_bytes(), Duration::from_secs(5))
            .await
    );
    let kind: String = cluster.exec(0, redis::cmd("TYPE").arg(&name));
    assert_eq!(kind, "hash", "the foreign hash is untouched");

    for i in 1..3 {
        let _: () = cluster.exec(i, redis::cmd("HSET").arg(&name).arg("f").arg("v"));
    }
    let err = redlock
        .try_acquire(&name, TTL)
        .await
        .expect_err("3 nodes refuse");
    assert!(err.is_contended(), "{err}");
    assert!(
        cluster
            .released(name.as_bytes(), Duration::from_secs(2))
            .await
    );
}

#[tokio::test]
async fn error_replies_are_failed_votes() {
    let cluster = Cluster::local(5);
    let redlock = cluster.one_attempt_redlock().await;
    // OOM on three nodes: SET is refused with an error reply.
    for i in 0..3 {
        let _: () = cluster.exec(i, redis::cmd("CONFIG").arg("SET").arg("maxmemory").arg("1"));
        let _: () = cluster.exec(
            i,
            redis::cmd("CONFIG")
                .arg("SET")
                .arg("maxmemory-policy")
                .arg("noeviction"),
        );
    }
    let name = unique("oom");
    let err = redlock
        .try_acquire(&name, TTL)
        .await
        .expect_err("no quorum");
    assert!(err.is_unavailable(), "{err}");
    assert!(
        err.node_failures()
            .iter()
            .any(|f| f.kind.is_redis_error("OOM")),
        "{err}"
    );
    assert!(
        cluster
            .released(name.as_bytes(), Duration::from_secs(2))
            .await
    );
}

#[tokio::test]
async fn cancelling_acquire_mid_flight_cleans_up_at_once() {
    let mut cluster = Cluster::local(5);
    let redlock = patient_redlock(&cluster).await;
    for i in [0, 1, 2] {
        cluster.pause(i);
    }
    let name = unique("cancel");
    // Two nodes grant at once; the other three hang for up to 5 s.
    let attempt = tokio::time::timeout(Duration::from_millis(300), redlock.try_acquire(&name, TTL));
    assert!(attempt.await.is_err(), "still waiting on the hung majority");
    assert!(
        eventually(Duration::from_secs(2), || {
            let v = cluster.values(name.as_bytes());
            v[3].is_none() && v[4].is_none()
        })
        .await,
        "partial keys removed after cancellation, not left for the 30 s TTL"
    );
    for i in [0, 1, 2] {
        cluster.resume(i);
    }
    assert!(
        cluster
            .released(name.as_bytes(), Duration::from_secs(5))
            .await,
        "keys set by the queued SETs were released too: {:?}",
        cluster.values(name.as_bytes())
    );
}

#[tokio::test]
async fn a_quorum_slower_than_the_ttl_is_never_a_grant() {
    let mut cluster = Cluster::local(3);
    let redlock = cluster
        .builder()
        .node_timeout(Duration::from_secs(2))
        .one_attempt()
        .build()
        .await
        .expect("build");
    let name = unique("too-slow");
    // Two of three nodes hang for longer than the whole TTL: the per-node
    // wait is capped by the validity budget, and no grant comes back with
    // validity ≤ 0.
    cluster.pause(0);
    cluster.pause(1);
    let ttl = Duration::from_millis(300);
    let start = Instant::now();
    let err = redlock
        .try_acquire(&name, ttl)
        .await
        .expect_err("the pause eats the TTL");
    assert!(err.is_unavailable(), "{err}");
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "wait capped by the TTL budget"
    );
    cluster.resume(0);
    cluster.resume(1);
    assert!(
        cluster
            .released(name.as_bytes(), Duration::from_secs(5))
            .await
    );
}
