//! Bad input is rejected before any network call with a typed error, and
//! leaves nothing behind.

mod support;

use std::time::Duration;

use quorumlock::Redlock;
use support::{unique, Cluster};

async fn build_err(urls: &[&str]) -> quorumlock::Error {
    Redlock::builder(urls)
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
        Redlock::builder(urls).node_timeout(Duration::ZERO),
        Redlock::builder(urls).connect_timeout(Duration::ZERO),
        Redlock::builder(urls).drift_factor(-0.1),
        Redlock::builder(urls).drift_factor(f64::INFINITY),
        Redlock::builder(urls).retry_delay(Duration::from_secs(2), Duration::from_secs(1)),
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
    let redlock = Redlock::builder(&urls)
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
