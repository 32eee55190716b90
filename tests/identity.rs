//! Which servers the nodes are: one server listed under two addresses
//! (another host name, another loopback address, its unix socket, another
//! database) is refused at build, and never votes when the duplicate is
//! found later; a node that can evict the lock's keys (`maxmemory` with an
//! evicting `maxmemory-policy`) is refused unless the builder accepts it.

use quorumlock_testkit as support;

use std::time::Duration;

use quorumlock::NodeFailureKind;
use support::logs::LogCapture;
use support::{unique, Cluster, Fault, NodeOptions, OneAttempt, Proxy};

const TTL: Duration = Duration::from_secs(10);

fn port(url: &str) -> String {
    url.rsplit(':').next().expect("port").to_owned()
}

/// One node reachable over 127.0.0.1, 127.0.0.2 and a unix socket.
fn twin_addressed_node() -> (Cluster, std::path::PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("socket dir");
    let socket = dir.path().join("redis.sock");
    let options = NodeOptions {
        args: vec![
            "--bind".into(),
            "127.0.0.1".into(),
            "127.0.0.2".into(),
            "--unixsocket".into(),
            socket.display().to_string(),
        ],
        ..NodeOptions::default()
    };
    (Cluster::local_custom(1, &options), socket, dir)
}

#[tokio::test]
async fn one_server_under_two_addresses_is_refused_at_build() {
    let (twin, socket, _dir) = twin_addressed_node();
    let other = Cluster::local(1);
    let urls = [twin.url(0), other.url(0)];
    let p = port(&urls[0]);
    // Passwords in the URLs must never reach the message.
    for cluster in [&twin, &other] {
        let _: () = cluster.exec(
            0,
            redis::cmd("CONFIG")
                .arg("SET")
                .arg("requirepass")
                .arg("s3cret-pw"),
        );
    }
    let with_pw = |u: &str| u.replacen("redis://", "redis://:s3cret-pw@", 1);
    let twins = [
        (format!("redis://localhost:{p}"), format!("localhost:{p}/0")),
        (format!("redis://127.0.0.2:{p}"), format!("127.0.0.2:{p}/0")),
        (
            format!("redis://127.0.0.1:{p}/3"),
            format!("127.0.0.1:{p}/3"),
        ),
        (
            format!("redis+unix://{}?pass=s3cret-pw", socket.display()),
            format!("unix:{}/0", socket.display()),
        ),
    ];
    for (twin, label) in twins {
        let nodes = vec![with_pw(&urls[0]), with_pw(&twin), with_pw(&urls[1])];
        let err = quorumlock::Builder::new(nodes)
            .build()
            .await
            .expect_err("one server listed twice");
        let msg = err.to_string();
        assert!(err.is_invalid_input(), "{twin}: {msg}");
        assert!(msg.contains("same server"), "{msg}");
        assert!(msg.contains(&format!("127.0.0.1:{p}/0")), "{msg}");
        assert!(msg.contains(&label), "{label}: {msg}");
        assert!(!msg.contains("s3cret"), "{msg}");
    }
    // Two servers are two servers.
    let nodes: Vec<String> = urls.iter().map(|u| with_pw(u)).collect();
    quorumlock::Builder::new(nodes)
        .build()
        .await
        .expect("distinct servers");
}

/// A duplicate that was unreachable at build is found when it connects:
/// it never votes. Without the check, one server answers twice for the
/// same key: with two of five nodes down, node 0 and its twin make two of
/// the three votes an extend (or the remote check) needs, where only two
/// servers still hold the lock.
#[tokio::test]
async fn a_duplicate_that_connects_after_build_never_votes() {
    let mut cluster = Cluster::local(4);
    let urls = cluster.urls();
    let upstream = format!("127.0.0.1:{}", port(&urls[0]))
        .parse()
        .expect("address");
    let twin = Proxy::start(upstream);
    twin.set(Fault::Reset);
    let mut nodes = urls.clone();
    nodes.push(format!("redis://{}", twin.addr()));
    let redlock = quorumlock::Builder::new(nodes)
        .one_attempt()
        .node_timeout(Duration::from_millis(500))
        .build()
        .await
        .expect("the twin is down at build");
    twin.set(Fault::None);
    let twin_label = format!("127.0.0.1:{}/0", twin.addr().port());
    let first = format!("127.0.0.1:{}/0", port(&urls[0]));
    let same_server = |failures: &[quorumlock::NodeFailure]| {
        failures.iter().any(|f| {
            f.node == twin_label
                && matches!(&f.kind, NodeFailureKind::SameServer { other } if *other == first)
        })
    };
    let name = unique("twin");
    // Nodes 0 to 3 grant; the twin connects now and is refused.
    let lock = redlock.try_acquire(&name, TTL).await.expect("four servers");
    cluster.kill(1);
    cluster.kill(2);
    let err = lock
        .extend(TTL)
        .await
        .expect_err("two servers hold the lock: no majority of five");
    assert!(same_server(err.node_failures()), "{err}");
    assert!(
        !matches!(lock.is_held_remotely().await, Ok(true)),
        "two servers of five cannot say it is held"
    );
    let other = unique("twin");
    let err = redlock
        .try_acquire(&other, TTL)
        .await
        .expect_err("node 0 must not vote twice");
    assert!(err.is_unavailable(), "{err}");
    assert!(same_server(err.node_failures()), "{err}");
    let stats = redlock.stats();
    assert_eq!(
        (stats.nodes[4].acquire.yes, stats.nodes[4].extend.yes),
        (0, 0),
        "the twin voted"
    );
    // Nothing left behind: the failed attempt released node 0's key.
    assert!(
        cluster
            .released(other.as_bytes(), Duration::from_secs(2))
            .await
    );
}

fn set_config(cluster: &Cluster, i: usize, name: &str, value: &str) {
    let _: () = cluster.exec(i, redis::cmd("CONFIG").arg("SET").arg(name).arg(value));
}

#[tokio::test]
async fn a_node_that_can_evict_lock_keys_is_refused_at_build() {
    let cluster = Cluster::local(3);
    let label = format!("127.0.0.1:{}/0", port(&cluster.url(1)));
    for policy in [
        "allkeys-lru",
        "allkeys-random",
        "volatile-lru",
        "volatile-ttl",
    ] {
        set_config(&cluster, 1, "maxmemory-policy", policy);
        // No limit: nothing is ever evicted.
        set_config(&cluster, 1, "maxmemory", "0");
        cluster.builder().build().await.expect("maxmemory 0");
        set_config(&cluster, 1, "maxmemory", "104857600");
        let err = cluster.builder().build().await.expect_err(policy);
        let msg = err.to_string();
        assert!(err.is_invalid_input(), "{msg}");
        assert!(msg.contains(&label) && msg.contains(policy), "{msg}");
        // The user knowingly accepts it.
        let redlock = cluster
            .builder()
            .allow_eviction(true)
            .build()
            .await
            .expect("allowed");
        redlock
            .try_acquire(unique("evicting"), TTL)
            .await
            .expect("acquire")
            .release()
            .await
            .expect("release");
    }
    set_config(&cluster, 1, "maxmemory-policy", "noeviction");
    cluster.builder().build().await.expect("noeviction is safe");
}

/// A policy changed after build is seen at the node's next connection:
/// it stops voting.
#[tokio::test]
async fn a_node_that_turns_evicting_stops_voting_at_its_next_connection() {
    let mut cluster = Cluster::local(3);
    let redlock = cluster.one_attempt_redlock().await;
    set_config(&cluster, 0, "maxmemory", "104857600");
    set_config(&cluster, 0, "maxmemory-policy", "allkeys-lfu");
    // Drops the client's connection (not this side connection).
    let _: () = cluster.exec(
        0,
        redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("normal"),
    );
    cluster.kill(2);
    let mut evicts = false;
    for _ in 0..3 {
        let name = unique("evicting-later");
        let err = redlock
            .try_acquire(&name, TTL)
            .await
            .expect_err("node 0 must not vote, node 2 is down");
        evicts = err.node_failures().iter().any(|f| {
            matches!(&f.kind, NodeFailureKind::Evicts { policy, .. } if policy == "allkeys-lfu")
        });
        if evicts {
            break;
        }
    }
    assert!(evicts, "{:?}", redlock.stats().nodes[0]);
}

/// Where `CONFIG` is not permitted (an ACL user without it), the check is
/// left out with one warning per node, and the lock works.
#[tokio::test]
async fn without_config_rights_the_eviction_check_is_skipped_with_a_warning() {
    let (capture, _log) = LogCapture::warnings();
    let cluster = Cluster::local(3);
    cluster.acl_setuser(&["noconfig", "on", ">pw", "~*", "&*", "+@all", "-config"]);
    let urls = cluster.urls_as("noconfig", "pw");
    let redlock = quorumlock::Builder::new(urls)
        .build()
        .await
        .expect("built without the check");
    redlock
        .try_acquire(unique("noconfig"), TTL)
        .await
        .expect("acquire")
        .release()
        .await
        .expect("release");
    let log = capture.text();
    assert_eq!(
        log.matches("CONFIG GET is not permitted").count(),
        3,
        "one warning per node: {log}"
    );
    assert!(!log.contains("pw"), "{log}");
}
