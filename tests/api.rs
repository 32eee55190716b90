//! The ways in that are not about faults: a remote check of a held lock,
//! clients built the redis crate's way, the shapes a node list comes in,
//! readiness (`health`, `require_quorum`), per-client background work, and
//! lock options that compose in any order.

use quorumlock_testkit as support;

use std::time::{Duration, Instant};

use quorumlock::{Builder, Error, NodeFailureKind, NodeView, Operation, Retry};
use support::{unique, Cluster};

const TTL: Duration = Duration::from_secs(10);
/// How long the last nodes' `SET`s may take to land after an acquire.
const SETTLE: Duration = Duration::from_secs(5);

#[tokio::test]
async fn a_held_lock_is_checked_on_the_nodes() {
    let mut cluster = Cluster::local(5);
    let redlock = cluster.redlock().await;
    let name = unique("remote-check");
    let lock = redlock.acquire(&name, TTL).await.expect("acquire");
    assert!(cluster.held_on(&name, 5, SETTLE).await);
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
        // The acquire returned at the third yes: the last SETs may still
        // be on their way, and one landing after the DEL would undo it.
        assert!(cluster.held_on(&name, 5, SETTLE).await);
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
    assert!(cluster.held_on(&name, 4, SETTLE).await);
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
    let redlock = Builder::new(clients.clone()).build().await.expect("build");
    assert_eq!(redlock.nodes(), 5);
    let name = unique("from-clients");
    let lock = redlock.acquire(&name, TTL).await.expect("acquire");
    assert!(cluster.held_on(&name, 5, Duration::from_secs(2)).await);
    lock.release().await.expect("release");
    assert!(cluster.released(&name, Duration::from_secs(5)).await);

    // The same node twice would vote twice.
    let twice = vec![clients[0].clone(), clients[0].clone()];
    let err = Builder::new(twice).build().await.expect_err("refused");
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
        .retry(quorumlock::Retry::TimesWithin(1, wait))
        .acquire()
        .await;
    let b = redlock
        .lock(&name, TTL)
        .retry(quorumlock::Retry::TimesWithin(1, wait))
        .acquire()
        .await;
    assert_eq!(attempts(a.expect_err("held")), 2);
    assert_eq!(attempts(b.expect_err("held")), 2);

    // A wait alone has no count limit: it tries until the time is spent.
    let c = redlock
        .lock(&name, TTL)
        .retry(quorumlock::Retry::Until(wait))
        .acquire()
        .await;
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

/// Compile-time: every shape a node list commonly has goes to
/// `Builder::new` as it is (before, `Builder::new(&urls)` with a
/// `Vec<String>` did not compile), and the builder keeps the nodes in
/// order.
#[test]
fn builder_new_takes_the_shapes_node_lists_come_in() {
    let strs: &[&str] = &["redis://127.0.0.1:7001", "redis://127.0.0.1:7002"];
    let strings: Vec<String> = strs.iter().map(|s| (*s).to_owned()).collect();
    let infos = strs
        .iter()
        .map(|s| redis::IntoConnectionInfo::into_connection_info(*s).expect("info"))
        .collect::<Vec<_>>();
    let clients = strs
        .iter()
        .map(|s| redis::Client::open(*s).expect("client"))
        .collect::<Vec<_>>();
    let array: [&str; 2] = ["redis://127.0.0.1:7001", "redis://127.0.0.1:7002"];
    let builders = [
        Builder::new(strs),
        Builder::new(&strings[..]),
        Builder::new(&strings),
        Builder::new(strings.clone()),
        Builder::new(array),
        Builder::new(strs.iter().copied()),
        Builder::new(strings.iter().cloned()),
        Builder::new("redis://127.0.0.1:7001,redis://127.0.0.1:7002".split(',')),
        Builder::new(&infos),
        Builder::new(infos.clone()),
        Builder::new(&clients),
        Builder::new(clients.clone()),
        Builder::from_list("redis://127.0.0.1:7001,redis://127.0.0.1:7002"),
    ];
    for builder in builders {
        let shown = format!("{builder:?}");
        assert!(
            shown.contains(r#"nodes: ["127.0.0.1:7001/0", "127.0.0.1:7002/0"]"#),
            "{shown}"
        );
    }
}

#[tokio::test]
async fn retry_on_a_request_replaces_the_builders() {
    let cluster = Cluster::shared(3);
    let redlock = cluster
        .builder()
        .retry(Retry::Times(5))
        .retry_delay(Duration::ZERO, Duration::from_millis(5))
        .build()
        .await
        .expect("build");
    let name = unique("retry-replaces");
    let held = redlock.acquire(&name, TTL).await.expect("acquire");
    let attempts = |err: Error| match err {
        Error::Contended { attempts, .. } => attempts,
        other => panic!("expected contention, got {other}"),
    };
    let err = redlock.acquire(&name, TTL).await.expect_err("held");
    assert_eq!(attempts(err), 6, "the builder's five retries");
    let err = redlock
        .lock(&name, TTL)
        .retry(Retry::Times(1))
        .acquire()
        .await
        .expect_err("held");
    assert_eq!(attempts(err), 2, "the request's one retry");
    held.release().await.expect("release");
}

/// Sets `requirepass` on every node of `cluster` (which then needs it).
fn require_password(cluster: &Cluster, password: &str) {
    for i in 0..cluster.len() {
        let _: () = cluster.exec(
            i,
            redis::cmd("CONFIG")
                .arg("SET")
                .arg("requirepass")
                .arg(password),
        );
    }
}

/// What a case expects of each failing node.
type Expected = fn(&NodeFailureKind) -> bool;

/// A local port nothing listens on.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

/// With `require_quorum`, a cluster of which only one node of three is
/// usable fails `build` at once, naming each unusable node and its problem.
/// Negative controls: without the option `build` succeeds on every one of
/// these lists (so the check is what fails it); and a readiness that
/// counts every reachable node as ready (a `WRONGPASS` node included) finds
/// three of three ready and lets the wrong-password build through.
#[tokio::test]
async fn a_strict_build_fails_fast_naming_each_node_that_is_not_ready() {
    let cluster = Cluster::local(3);
    require_password(&cluster, "s3cret-pw");
    let with = |i: usize, pw: &str| {
        cluster
            .url(i)
            .replacen("redis://", &format!("redis://:{pw}@"), 1)
    };
    let label = |url: &str| {
        let info = redis::IntoConnectionInfo::into_connection_info(url).expect("info");
        match info.addr() {
            redis::ConnectionAddr::Tcp(host, port) => format!("{host}:{port}/0"),
            other => panic!("{other:?}"),
        }
    };
    let good = with(0, "s3cret-pw");
    let (p1, p2) = (closed_port(), closed_port());
    let cases: [(&str, [String; 2], Expected); 3] = [
        (
            "wrong password",
            [with(1, "wrong-pw"), with(2, "wrong-pw")],
            |k| k.is_redis_error("WRONGPASS"),
        ),
        (
            "nothing listening",
            [
                format!("redis://:s3cret-pw@127.0.0.1:{p1}"),
                format!("redis://:s3cret-pw@127.0.0.1:{p2}"),
            ],
            |k| {
                matches!(
                    k,
                    NodeFailureKind::Connection(_) | NodeFailureKind::Timeout(_)
                )
            },
        ),
        (
            "unresolvable host",
            [
                "redis://:s3cret-pw@quorumlock-node-1.invalid:6379".to_owned(),
                "redis://:s3cret-pw@quorumlock-node-2.invalid:6379".to_owned(),
            ],
            |k| {
                matches!(
                    k,
                    NodeFailureKind::Connection(_) | NodeFailureKind::Timeout(_)
                )
            },
        ),
    ];
    let connect = Duration::from_millis(500);
    for (case, bad, expected) in cases {
        let nodes = vec![good.clone(), bad[0].clone(), bad[1].clone()];
        let lenient = Builder::new(&nodes).connect_timeout(connect).build().await;
        assert!(lenient.is_ok(), "{case}: {lenient:?}");
        let start = Instant::now();
        let err = Builder::new(&nodes)
            .connect_timeout(connect)
            .require_quorum(true)
            .build()
            .await
            .expect_err(case);
        let took = start.elapsed();
        support::report(&format!("strict build, {case}: failed in {took:?}"));
        // Connecting and probing, each bounded by the connect timeout.
        assert!(took < Duration::from_secs(10), "{case}: took {took:?}");
        let text = err.to_string();
        // Refused credentials are a misconfiguration (no retry helps);
        // nodes out of reach are an outage.
        if case == "wrong password" {
            assert!(
                err.is_misconfigured() && !err.is_unavailable(),
                "{case}: {text}"
            );
        } else {
            assert!(
                err.is_unavailable() && !err.is_misconfigured(),
                "{case}: {text}"
            );
        }
        assert!(
            !text.contains("s3cret") && !text.contains("wrong-pw"),
            "{text}"
        );
        let Error::NotReady {
            ready,
            needed,
            nodes: count,
            failures,
            ..
        } = err
        else {
            panic!("{case}: {text}");
        };
        assert_eq!((ready, needed, count), (1, 2, 3), "{case}: {text}");
        let named: Vec<&str> = failures.iter().map(|f| f.node.as_str()).collect();
        assert_eq!(named, [label(&bad[0]), label(&bad[1])], "{case}: {text}");
        for failure in &failures {
            assert!(expected(&failure.kind), "{case}: {failure}");
        }
    }

    // Two of three ready is a quorum: a strict build goes through.
    let nodes = [good.clone(), with(1, "s3cret-pw"), with(2, "wrong-pw")];
    let redlock = Builder::new(nodes)
        .require_quorum(true)
        .build()
        .await
        .expect("a quorum is ready");
    let health = redlock.health().await;
    assert!(health.quorum_ready(), "{health}");
    let wrong = &health.nodes[2];
    assert!(
        wrong.reachable && !wrong.authenticated && !wrong.admitted,
        "{wrong:?}"
    );
}

/// `health()` probes the nodes now: after a node is stopped, it reports
/// that node unreachable with its error and the others ready; a second
/// stop leaves no quorum. Negative control: a `health()` that sends
/// nothing (the `PING` left out, reporting the last known connection state)
/// shows the stopped node ready and fails here.
#[tokio::test]
async fn health_reports_each_node_and_whether_a_quorum_is_ready() {
    let mut cluster = Cluster::local(3);
    let redlock = cluster.redlock().await;
    let health = redlock.health().await;
    assert!(health.quorum_ready(), "{health}");
    assert_eq!((health.ready(), health.needed), (3, 2), "{health}");
    for (node, label) in health.nodes.iter().zip(redlock.node_labels()) {
        assert_eq!(node.node, label);
        assert!(node.is_ready() && node.reachable && node.authenticated && node.admitted);
        assert!(node.latency.is_some() && node.error.is_none(), "{node:?}");
    }

    cluster.kill(2);
    let start = Instant::now();
    let health = redlock.health().await;
    support::report(&format!(
        "health with a stopped node: {:?}",
        start.elapsed()
    ));
    assert!(health.quorum_ready(), "{health}");
    assert_eq!(health.ready(), 2, "{health}");
    let stopped = &health.nodes[2];
    assert!(!stopped.reachable && !stopped.is_ready(), "{stopped:?}");
    assert_eq!(stopped.latency, None);
    let error = stopped.error.as_ref().expect("why it is not ready");
    assert_eq!(error.node, redlock.node_labels()[2]);
    assert!(health.nodes[..2].iter().all(|n| n.is_ready()), "{health}");
    assert!(
        health
            .to_string()
            .starts_with("2 of 3 nodes ready (2 needed)"),
        "{health}"
    );

    cluster.kill(1);
    let health = redlock.health().await;
    assert!(!health.quorum_ready(), "{health}");
    assert_eq!(health.ready(), 1, "{health}");
}
