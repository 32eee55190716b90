//! Security: a Redis ACL user limited to the lock's commands and keys is
//! enough, and wrong or missing credentials are typed per-node failures that
//! never echo the password. Tokens in logs: `tests/token_logs.rs`; TLS:
//! `tests/tls.rs` (feature `tls`).

use quorumlock_testkit as support;

use std::time::Duration;

use support::logs::LogCapture;
use support::{unique, Cluster, OneAttempt};

/// The ACL of a user that can take, extend and release locks on `lock:*`
/// and nothing else: the commands the client sends and those its scripts
/// call. (redis-rs also sends `CLIENT SETINFO` on connect and
/// ignores its failure; Redis 7.0 does not know it, so it is not listed.)
const LOCKER_ACL: &[&str] = &[
    "locker",
    "reset",
    "on",
    ">locker-pw",
    // The locks, and their fencing counters.
    "~lock:*",
    "~quorumlock:fence:{lock:*",
    // Release announcements for fast hand-off.
    "resetchannels",
    "&quorumlock:released:lock:*",
    // A queued waiter's own channel, on which it is named the next head.
    "&quorumlock:next:*",
    "-@all",
    "+set",
    "+eval",
    "+evalsha",
    "+script|load",
    "+ping",
    // Called by the scripts.
    "+get",
    "+del",
    "+pexpire",
    "+exists",
    // A fencing counter missing on a node starts from the server's time.
    "+time",
    // A waiter's look at the holder's key; the extension scripts.
    "+pttl",
    "+publish",
    // Waiters' hand-off subscriptions.
    "+subscribe",
    "+unsubscribe",
    // The waiter queue (docs/queue.md), which a waiter refused by a
    // holder joins: its keys and the commands its scripts call.
    "~quorumlock:queue:*",
    "+zadd",
    "+zrem",
    "+zscore",
    "+zrange",
    "+zrangebyscore",
    "+zremrangebyscore",
    "+zcard",
    // Restart quarantine reads the uptime; every connection reads the
    // server's run_id.
    "+info",
    // The eviction check reads maxmemory and maxmemory-policy.
    "+config|get",
];

#[tokio::test]
async fn an_acl_user_limited_to_the_lock_commands_is_enough() {
    let cluster = Cluster::local(3);
    cluster.acl_setuser(LOCKER_ACL);
    let urls = cluster.urls_as("locker", "locker-pw");
    // Restart quarantine reads each node's uptime in whole seconds.
    for i in 0..cluster.len() {
        cluster.wait_uptime(i, Duration::from_secs(1)).await;
    }
    let redlock = quorumlock::Builder::new(urls.clone())
        .node_timeout(Duration::from_millis(200))
        .one_attempt()
        .restart_quarantine(Some(Duration::from_millis(500)))
        .build()
        .await
        .expect("build");

    let name = unique("lock:acl");
    let lock = redlock
        .try_acquire(&name, Duration::from_secs(10))
        .await
        .expect("acquire");
    lock.extend(Duration::from_secs(10)).await.expect("extend");
    // A waiter subscribes for the release announcement meanwhile.
    let waiter = {
        let (redlock, name) = (redlock.clone(), name.clone());
        tokio::spawn(async move {
            redlock
                .lock(&name, Duration::from_secs(10))
                .retry(quorumlock::Retry::Until(Duration::from_secs(5)))
                .acquire()
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    lock.release().await.expect("release");
    let next = waiter.await.expect("waiter").expect("the waiter takes it");
    next.release().await.expect("release");
    let fenced = redlock
        .lock(&name, Duration::from_secs(10))
        .fenced()
        .acquire()
        .await
        .expect("fenced acquire");
    assert!(fenced.fence().is_some());
    fenced.release().await.expect("release fenced");
    for i in 0..3 {
        let denied: Vec<redis::Value> = cluster.exec(i, redis::cmd("ACL").arg("LOG"));
        assert!(denied.is_empty(), "node {i} denied: {denied:?}");
    }
    assert!(
        cluster
            .released(name.as_bytes(), Duration::from_secs(2))
            .await
    );

    // The scripts load again after a flush with the same rights.
    for i in 0..3 {
        cluster.flush_scripts(i);
    }
    let lock = redlock
        .try_acquire(&name, Duration::from_secs(10))
        .await
        .expect("acquire after SCRIPT FLUSH");
    lock.release().await.expect("release after SCRIPT FLUSH");

    // Keys outside the pattern are refused per node, as NOPERM.
    let err = redlock
        .try_acquire(unique("other:acl"), Duration::from_secs(10))
        .await
        .expect_err("outside ~lock:*");
    assert!(err.is_misconfigured() && !err.is_unavailable(), "{err}");
    assert!(
        err.node_failures()
            .iter()
            .all(|f| f.kind.is_redis_error("NOPERM")),
        "{err}"
    );

    // And the user really is limited.
    let mut c = redis::Client::open(urls[0].as_str())
        .expect("url")
        .get_connection_with_timeout(Duration::from_secs(2))
        .expect("connect as locker");
    let denied: redis::RedisResult<()> = redis::cmd("FLUSHALL").query(&mut c);
    assert_eq!(denied.expect_err("denied").code(), Some("NOPERM"));
}

#[tokio::test]
async fn wrong_or_missing_credentials_are_typed_and_never_echoed() {
    let cluster = Cluster::local(3);
    cluster.acl_setuser(LOCKER_ACL);
    for i in 0..3 {
        cluster.require_pass(i, "default-pw");
    }
    let cases = [
        (None, "NOAUTH"),
        (Some(("default", "wrong-pw-1")), "WRONGPASS"),
        (Some(("locker", "wrong-pw-2")), "WRONGPASS"),
        (Some(("nobody", "wrong-pw-3")), "WRONGPASS"),
    ];
    for (credentials, code) in cases {
        let urls = match credentials {
            Some((user, pw)) => cluster.urls_as(user, pw),
            None => cluster.urls(),
        };
        // What is asserted is the classification, not the timing: a
        // connection now carries one more round trip (the server's
        // identity) before the vote, which the default 50 ms may not
        // cover on a loaded machine.
        let redlock = quorumlock::Builder::new(urls.clone())
            .one_attempt()
            .node_timeout(Duration::from_secs(2))
            .build()
            .await
            .expect("building does not need the nodes");
        let err = redlock
            .try_acquire(unique("lock:auth"), Duration::from_secs(5))
            .await
            .expect_err("refused");
        assert!(err.is_misconfigured() && !err.is_unavailable(), "{err}");
        assert!(
            err.node_failures()
                .iter()
                .all(|f| f.kind.is_redis_error(code)),
            "{code}: {err}"
        );
        let text = format!("{err} {err:?}");
        assert!(!text.contains("wrong-pw"), "password echoed: {text}");
    }
    for i in 0..3 {
        cluster.heal_pass(i, "default-pw");
    }
}

/// Commands sent to every node so far.
fn commands(redlock: &quorumlock::Redlock) -> u64 {
    redlock.stats().nodes.iter().map(|n| n.commands).sum()
}

/// Refused credentials and missing rights are misconfigurations, not an
/// outage: `acquire` stops after the first attempt instead of retrying.
/// Catches a retry loop that treats them like any unavailable quorum (it
/// makes four attempts here: the commands sent are four times one
/// attempt's, and `attempts` is 4), and an `is_misconfigured` that reads
/// only the error's variant.
#[tokio::test]
async fn misconfigured_nodes_end_an_acquire_after_one_attempt() {
    let cluster = Cluster::local(3);
    cluster.acl_setuser(LOCKER_ACL);
    for i in 0..3 {
        cluster.require_pass(i, "default-pw");
    }
    let cases = [
        (None, "lock:mis", "NOAUTH"),
        (Some(("default", "wrong-pw")), "lock:mis", "WRONGPASS"),
        // The right password; a key outside the user's `~lock:*`.
        (Some(("locker", "locker-pw")), "other:mis", "NOPERM"),
    ];
    for (credentials, prefix, code) in cases {
        let urls = match credentials {
            Some((user, pw)) => cluster.urls_as(user, pw),
            None => cluster.urls(),
        };
        let redlock = quorumlock::Builder::new(urls)
            .retry(quorumlock::Retry::Times(3))
            .retry_delay(Duration::from_millis(10), Duration::from_millis(20))
            .node_timeout(Duration::from_secs(2))
            .build()
            .await
            .expect("building does not need the nodes");
        let name = unique(prefix);
        // What one attempt sends, through the same client.
        let before = commands(&redlock);
        let one = redlock
            .try_acquire(&name, Duration::from_secs(5))
            .await
            .expect_err("refused");
        redlock.settle(Duration::from_secs(2)).await;
        let per_attempt = commands(&redlock) - before;
        assert!(one.is_misconfigured(), "{code}: {one}");
        assert!(per_attempt > 0, "{code}: nothing was sent");

        let before = commands(&redlock);
        let err = redlock
            .acquire(&name, Duration::from_secs(5))
            .await
            .expect_err("refused");
        assert!(err.is_misconfigured(), "{code}: {err}");
        assert!(!err.is_unavailable(), "{code}: {err}");
        assert!(
            err.node_failures()
                .iter()
                .all(|f| f.kind.is_redis_error(code) && f.kind.is_misconfigured()),
            "{code}: {err}"
        );
        redlock.settle(Duration::from_secs(2)).await;
        assert_eq!(
            commands(&redlock) - before,
            per_attempt,
            "{code}: more commands than one attempt's"
        );
        assert!(
            matches!(err, quorumlock::Error::Unavailable { attempts: 1, .. }),
            "{code}: retried: {err}"
        );
    }
    for i in 0..3 {
        cluster.heal_pass(i, "default-pw");
    }
}

/// What Redis 7 gives a new user by default (`acl-pubsub-default
/// resetchannels`): every command the lock needs, `PUBLISH` included, but
/// no channel to publish or subscribe on.
fn locker_without_channels() -> Vec<&'static str> {
    LOCKER_ACL
        .iter()
        .copied()
        .filter(|rule| !rule.starts_with('&'))
        .collect()
}

#[tokio::test]
async fn releases_succeed_for_a_user_that_may_not_publish() {
    let (capture, _log) = LogCapture::warnings();
    let cluster = Cluster::local(3);
    cluster.acl_setuser(&locker_without_channels());
    let urls = cluster.urls_as("locker", "locker-pw");
    let redlock = quorumlock::Builder::new(urls.clone())
        .node_timeout(Duration::from_millis(200))
        .one_attempt()
        .retry_delay(Duration::from_millis(50), Duration::from_millis(100))
        .build()
        .await
        .expect("build");

    let name = unique("lock:no-publish");
    for round in 0..3 {
        let lock = redlock
            .try_acquire(&name, Duration::from_secs(10))
            .await
            .expect("acquire");
        lock.release()
            .await
            .unwrap_or_else(|e| panic!("round {round}: release refused: {e}"));
        assert!(
            cluster
                .released(name.as_bytes(), Duration::from_secs(2))
                .await,
            "round {round}: a key was left"
        );
    }
    let (a, b) = (unique("lock:no-publish-a"), unique("lock:no-publish-b"));
    let both = redlock
        .lock_all([&a, &b], Duration::from_secs(10))
        .acquire()
        .await
        .expect("acquire both");
    both.release().await.expect("release both");
    for key in [&a, &b] {
        assert!(cluster.released(key, Duration::from_secs(2)).await);
    }

    // Fast hand-off degrades to the retry delay: a waiter still gets its turn.
    let lock = redlock
        .try_acquire(&name, Duration::from_secs(10))
        .await
        .expect("acquire");
    let waiter = {
        let (redlock, name) = (redlock.clone(), name.clone());
        tokio::spawn(async move {
            redlock
                .lock(&name, Duration::from_secs(10))
                .retry(quorumlock::Retry::Until(Duration::from_secs(10)))
                .acquire()
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    lock.release().await.expect("release");
    let next = waiter.await.expect("waiter").expect("the waiter takes it");
    next.release().await.expect("release");
    assert!(
        cluster
            .released(name.as_bytes(), Duration::from_secs(2))
            .await
    );

    // One warning per node, not one per release.
    let log = capture.text();
    let warnings = log
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("announce"))
        .count();
    assert_eq!(warnings, 3, "{log}");
    // Each says which node, and the lock whose release found it.
    for line in log
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("announce"))
    {
        assert!(
            line.contains("node=") && line.contains("resource=\""),
            "{line}"
        );
    }
}

/// `CONFIG SET requirepass new` on node `i`, logging in with `old`.
fn change_password(cluster: &Cluster, i: usize, old: &str, new: &str) {
    let url = cluster
        .side_url(i)
        .replacen("redis://", &format!("redis://:{old}@"), 1);
    let mut c = redis::Client::open(url)
        .expect("url")
        .get_connection_with_timeout(Duration::from_secs(2))
        .expect("side connection with the old password");
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg(new)
        .query(&mut c)
        .expect("requirepass");
}

/// `health()` says what a new connection would meet. The password of two
/// of five nodes changes while the client is connected: its connections
/// stay authenticated and keep voting, but a restarted replica would be
/// refused there, so those two are not ready (credentials), the state is
/// degraded and a quorum still ready; with all five changed, unavailable.
/// Negative control: a `health()` that only pings the connections in use
/// reports 5 of 5 ready and fails here.
#[tokio::test]
async fn health_reports_what_a_new_connection_meets_after_a_password_change() {
    use quorumlock::HealthState;

    let cluster = Cluster::local(5);
    for i in 0..5 {
        cluster.require_pass(i, "old-pw");
    }
    let redlock = quorumlock::Builder::new(cluster.urls_as("default", "old-pw"))
        .node_timeout(Duration::from_secs(2))
        .build()
        .await
        .expect("build");
    // What a probe costs, every node ready (reported, not asserted).
    let probes = 20;
    let start = std::time::Instant::now();
    for _ in 0..probes {
        let health = redlock.health().await;
        assert_eq!(health.state(), HealthState::Ready, "{health}");
    }
    support::report(&format!(
        "health() of 5 local nodes: {:?} per call",
        start.elapsed() / probes
    ));

    for i in [3, 4] {
        change_password(&cluster, i, "old-pw", "new-pw");
    }
    let health = redlock.health().await;
    assert_eq!(health.state(), HealthState::Degraded, "{health}");
    assert!(health.quorum_ready(), "{health}");
    assert_eq!(health.ready(), 3, "{health}");
    for node in &health.nodes[3..] {
        assert!(node.reachable && !node.authenticated, "{node:?}");
        let error = node.error.as_ref().expect("why it is not ready");
        assert!(error.kind.is_redis_error("WRONGPASS"), "{error}");
    }
    assert!(
        health
            .to_string()
            .starts_with("3 of 5 nodes ready (3 needed): degraded; "),
        "{health}"
    );
    // The connections in use still vote on all five.
    let lock = redlock
        .acquire(unique("lock:password"), Duration::from_secs(5))
        .await
        .expect("acquire");
    lock.release().await.expect("release");
    redlock.settle(Duration::from_secs(2)).await;
    assert!(
        redlock.stats().nodes.iter().all(|n| n.acquire.yes == 1),
        "{:?}",
        redlock.stats()
    );

    for i in 0..3 {
        change_password(&cluster, i, "old-pw", "new-pw");
    }
    let health = redlock.health().await;
    assert_eq!(health.state(), HealthState::Unavailable, "{health}");
    assert!(!health.quorum_ready(), "{health}");
    assert!(
        health.nodes.iter().all(|n| n.reachable && !n.authenticated),
        "{health}"
    );
    for i in 0..5 {
        cluster.heal_pass(i, "new-pw");
    }
}
