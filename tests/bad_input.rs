//! Bad input is rejected before any network call with a typed error, and
//! leaves nothing behind.

use quorumlock_testkit as support;

use std::time::Duration;

use support::{unique, Cluster, OneAttempt};

async fn build_err(urls: &[&str]) -> quorumlock::Error {
    quorumlock::Builder::new(urls.iter().copied())
        .build()
        .await
        .expect_err("must be rejected")
}

#[tokio::test]
async fn node_lists_that_cannot_work_are_rejected() {
    let none: [&str; 0] = [];
    let err = build_err(&none).await;
    assert!(
        err.is_invalid_input() && err.to_string().contains("no Redis nodes"),
        "{err}"
    );

    let err = build_err(&["redis://127.0.0.1:7001", "redis://127.0.0.1:7001/0"]).await;
    assert!(
        err.is_invalid_input() && err.to_string().contains("listed twice"),
        "{err}"
    );

    let err = build_err(&["not a url"]).await;
    assert!(err.is_invalid_input(), "{err}");

    let err = build_err(&["redis://:hunter2@127.0.0.1:notaport"]).await;
    assert!(err.is_invalid_input(), "{err}");
    assert!(
        !err.to_string().contains("hunter2"),
        "password leaked: {err}"
    );

    let err = build_err(&["http://127.0.0.1:7001"]).await;
    assert!(err.is_invalid_input(), "{err}");
}

#[tokio::test]
async fn settings_out_of_range_are_rejected() {
    let urls = ["redis://127.0.0.1:1"];
    let cases = [
        quorumlock::Builder::new(urls).node_timeout(Duration::ZERO),
        quorumlock::Builder::new(urls).connect_timeout(Duration::ZERO),
        quorumlock::Builder::new(urls).drift_factor(-0.1),
        quorumlock::Builder::new(urls).drift_factor(f64::INFINITY),
        quorumlock::Builder::new(urls).retry_delay(Duration::from_secs(2), Duration::from_secs(1)),
    ];
    for builder in cases {
        let err = builder.build().await.expect_err("rejected");
        assert!(err.is_invalid_input(), "{err}");
    }
}

#[tokio::test]
async fn ttls_and_resources_that_cannot_work_are_rejected_and_leave_nothing() {
    let cluster = Cluster::shared(3);
    let redlock = cluster.redlock().await;
    let name = unique("bad");
    let bad_ttls = [
        Duration::ZERO,
        Duration::from_millis(1),
        Duration::from_millis(2),
        Duration::from_micros(2_999),
        Duration::from_millis(u64::MAX),
        Duration::MAX,
        quorumlock::MAX_TTL + Duration::from_millis(1),
    ];
    for ttl in bad_ttls {
        let err = redlock.try_acquire(&name, ttl).await.expect_err("bad TTL");
        assert!(err.is_invalid_input(), "{ttl:?}: {err}");
        let err = redlock.acquire(&name, ttl).await.expect_err("bad TTL");
        assert!(err.is_invalid_input(), "{ttl:?}: {err}");
    }
    assert_eq!(cluster.holders(name.as_bytes()), 0);

    let err = redlock
        .try_acquire("", Duration::from_secs(1))
        .await
        .expect_err("empty");
    assert!(
        err.is_invalid_input() && err.to_string().contains("empty"),
        "{err}"
    );
    assert_eq!(cluster.holders(b""), 0);

    // Extending with a bad TTL leaves the lock as it was.
    let lock = redlock
        .try_acquire(&name, Duration::from_secs(10))
        .await
        .expect("acquire");
    let err = lock.extend(Duration::ZERO).await.expect_err("bad TTL");
    assert!(err.is_invalid_input(), "{err}");
    assert!(lock.validity() > Duration::from_secs(9), "still held");
    lock.release().await.expect("release");
}

#[tokio::test]
async fn the_smallest_ttl_above_the_drift_works() {
    let cluster = Cluster::shared(3);
    let redlock = cluster.redlock().await;
    let name = unique("tiny");
    // 3 ms leaves under 1 ms of validity: granted only if the round trip is
    // that fast, never with validity ≤ 0.
    match redlock.try_acquire(&name, Duration::from_millis(3)).await {
        Ok(lock) => {
            assert!(lock.validity() < Duration::from_millis(1));
            drop(lock);
        }
        Err(e) => assert!(e.is_unavailable(), "{e}"),
    }
}

#[tokio::test]
async fn unreachable_nodes_are_an_outage_not_a_crash() {
    // Ports that refuse connections.
    let urls: Vec<String> = (0..3)
        .map(|_| {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            format!("redis://127.0.0.1:{}", l.local_addr().expect("addr").port())
        })
        .collect();
    let redlock = quorumlock::Builder::new(urls.clone())
        .retry_count(1)
        .retry_delay(Duration::ZERO, Duration::from_millis(10))
        .build()
        .await
        .expect("building never needs the nodes up");
    let err = redlock
        .acquire("r", Duration::from_secs(1))
        .await
        .expect_err("down");
    assert!(err.is_unavailable(), "{err}");
    assert_eq!(
        err.node_failures().len(),
        2,
        "decided at the second failure: {err}"
    );
    let text = err.to_string();
    assert!(text.contains("connection failed"), "{text}");
    assert!(text.contains("after 2 attempt(s)"), "{text}");
}

/// Durations too large to add to an `Instant` never panic ("overflow when
/// adding duration to instant"): a wait or deadline that large means "no
/// limit", a TTL that large is refused as invalid input, and nothing is
/// left behind on the nodes.
#[tokio::test]
async fn huge_durations_never_panic_and_leave_nothing() {
    let cluster = Cluster::shared(3);
    let ttl = Duration::from_secs(10);
    let huge = [
        Duration::MAX,
        Duration::from_secs(u64::MAX),
        Duration::from_secs(1 << 40),
    ];
    for big in huge {
        let name = unique("huge");
        // Waiting at most "forever" for a free lock takes it at once.
        let redlock = cluster.builder().retry_deadline(Some(big)).build().await;
        let redlock = redlock.expect("a huge retry deadline is no limit");
        redlock
            .acquire(&name, ttl)
            .await
            .expect("free lock")
            .release()
            .await
            .expect("release");
        redlock
            .lock(&name, ttl)
            .wait(big)
            .acquire()
            .await
            .expect("free lock")
            .release()
            .await
            .expect("release");

        // Timeouts that large are no limit either.
        let patient = cluster
            .builder()
            .node_timeout(big)
            .connect_timeout(big)
            .build()
            .await
            .expect("huge timeouts");
        let lock = patient.try_acquire(&name, ttl).await.expect("free lock");
        for bad in [big, Duration::MAX] {
            let err = lock.extend(bad).await.expect_err("TTL too large");
            assert!(err.is_invalid_input(), "{bad:?}: {err}");
        }
        let err = lock
            .auto_renew(quorumlock::Renewal::every(big))
            .expect_err("interval beyond the TTL");
        assert!(err.is_invalid_input(), "{err}");
        lock.release().await.expect("release");

        // A held lock with a huge retry delay: the delay does not fit before
        // the deadline, so the attempt ends at once instead of panicking.
        let holder = cluster.redlock().await;
        let held = holder.try_acquire(&name, ttl).await.expect("holder");
        let slow = cluster
            .builder()
            .retry_delay(big, big)
            .retry_count(5)
            .retry_deadline(Some(Duration::from_secs(5)))
            .build()
            .await
            .expect("huge retry delay");
        let err = tokio::time::timeout(Duration::from_secs(20), slow.acquire(&name, ttl))
            .await
            .expect("ends before its deadline")
            .expect_err("held elsewhere");
        assert!(err.is_contended(), "{err}");
        // And waiting "forever" for a held lock waits, without panicking.
        let waiting = tokio::time::timeout(
            Duration::from_millis(300),
            holder.lock(&name, ttl).wait(big).acquire(),
        )
        .await;
        assert!(waiting.is_err(), "still waiting: {waiting:?}");
        held.release().await.expect("release");

        // A quarantine longer than any uptime keeps every node out.
        let careful = cluster
            .builder()
            .restart_quarantine(Some(big))
            .one_attempt()
            .build()
            .await
            .expect("a huge quarantine");
        let err = careful
            .try_acquire(&name, ttl)
            .await
            .expect_err("every node too young");
        assert!(err.is_unavailable(), "{err}");
        assert!(
            cluster
                .released(name.as_bytes(), Duration::from_secs(2))
                .await,
            "{big:?}: a key was left behind"
        );
    }
}
