//! Restart quarantine: a node killed and restarted empty at once does not
//! vote, so a second client cannot win a majority through it.

use quorumlock_testkit as support;

use std::time::Duration;

use quorumlock::Redlock;
use support::{unique, Cluster, Fault, OneAttempt};

const TTL: Duration = Duration::from_secs(20);
const QUARANTINE: Duration = Duration::from_secs(30);

/// Nodes have been up since the test started; wait until they are older
/// than `age` by their own account (uptime has one-second resolution).
async fn wait_uptime(cluster: &Cluster, age: Duration) {
    for node in 0..cluster.len() {
        cluster.wait_uptime(node, age).await;
    }
}

/// True when some node stayed out of the vote because it restarted recently.
fn quarantined(err: &quorumlock::Error) -> bool {
    err.node_failures()
        .iter()
        .any(|f| matches!(f.kind, quorumlock::NodeFailureKind::Quarantined { .. }))
}

#[tokio::test]
async fn a_node_restarted_empty_does_not_vote_until_its_quarantine_ends() {
    let mut cluster = Cluster::local(5);
    let young = Duration::from_secs(2);
    wait_uptime(&cluster, young).await;
    // Nodes up for 2 s or more vote when the quarantine is 2 s.
    let settled = cluster
        .builder()
        .restart_quarantine(Some(young))
        .build()
        .await
        .expect("build");
    let name = unique("restart-empty");
    let a = settled
        .acquire(&name, TTL)
        .await
        .expect("all nodes old enough");

    // B is a client with the quarantine on, connected before the restart.
    let careful = cluster
        .builder()
        .restart_quarantine(Some(QUARANTINE))
        .retry(quorumlock::Retry::Times(3))
        .retry_delay(Duration::from_millis(10), Duration::from_millis(30))
        .build()
        .await
        .expect("build");
    // With a 30 s quarantine every node here is too young: use a second
    // name to show that freshly started clusters refuse to vote at all.
    let err = careful
        .try_acquire(unique("young"), TTL)
        .await
        .expect_err("all too young");
    assert!(err.is_unavailable(), "{err}");
    assert!(quarantined(&err), "{err}");
    drop(careful);

    // The out-of-model case: A holds {0,1,2}; node 2 restarts empty at once.
    for i in [3, 4] {
        let _: () = cluster.exec(i, redis::cmd("DEL").arg(&name));
    }
    cluster.restart(2);

    let careful = cluster
        .builder()
        .restart_quarantine(Some(young))
        .retry(quorumlock::Retry::Times(3))
        .retry_delay(Duration::from_millis(10), Duration::from_millis(30))
        .build()
        .await
        .expect("build");
    let err = careful
        .acquire(&name, TTL)
        .await
        .expect_err("node 2 is quarantined");
    assert!(quarantined(&err), "{err}");
    assert!(a.validity() > Duration::ZERO);

    // The same client without quarantine wins a second majority {2,3,4}:
    // the overlap the quarantine prevents.
    let careless = cluster
        .builder()
        .retry(quorumlock::Retry::Times(3))
        .build()
        .await
        .expect("build");
    let b = careless
        .acquire(&name, TTL)
        .await
        .expect("overlap without quarantine");
    assert!(a.validity() > Duration::ZERO && b.validity() > Duration::ZERO);
    drop(b);
    drop(a);
}

#[tokio::test]
async fn a_connected_client_notices_the_restart_after_a_connection_error() {
    let mut cluster = Cluster::local(3);
    let young = Duration::from_secs(2);
    wait_uptime(&cluster, young).await;
    let redlock = cluster
        .builder()
        .restart_quarantine(Some(young))
        .one_attempt()
        .build()
        .await
        .expect("build");
    let name = unique("reconnect");
    redlock
        .acquire(&name, TTL)
        .await
        .expect("acquire")
        .release()
        .await
        .expect("release");
    cluster.restart(0);
    cluster.kill(1);
    // Node 0's first command fails on the dead connection, the next reads
    // its uptime: it stays out, and with node 1 down there is no quorum.
    for _ in 0..3 {
        let err = redlock
            .try_acquire(&name, TTL)
            .await
            .expect_err("no quorum");
        assert!(err.is_unavailable(), "{err}");
    }
    let err = redlock
        .try_acquire(&name, TTL)
        .await
        .expect_err("still quarantined");
    assert!(quarantined(&err), "{err}");
    // Once the node is old enough it votes again. Uptime is read in whole
    // seconds, so the client may count up to one second more.
    cluster.wait_uptime(0, young + Duration::from_secs(1)).await;
    let lock = redlock
        .try_acquire(&name, TTL)
        .await
        .expect("node 0 votes again");
    lock.release().await.expect("release");
}

/// The quarantine of the reconnect tests, and the age the nodes reach first.
const FIVE_SECONDS: Duration = Duration::from_secs(5);

/// Restarts node `i` (empty) behind its proxy so that the client's
/// connection outlives the old process: the proxy holds a reply of the old
/// node and delivers it, then the close, only once the new node is up. The
/// redis crate's reconnect then reaches the young node at its first try.
/// With `requests_held`, what the client sends meanwhile (a release's
/// background follow-up) never reaches the old node and meets the close.
async fn restart_behind_the_proxy(
    cluster: &mut Cluster,
    redlock: &Redlock,
    i: usize,
    requests_held: impl std::future::Future<Output = ()>,
) {
    let proxy = cluster.proxy(i);
    proxy.set(Fault::BlackholeReplies);
    // A reply the proxy holds: node `i` times out for the client.
    let _ = redlock.status(unique("held-reply")).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    proxy.set(Fault::Blackhole);
    requests_held.await;
    cluster.restart(i);
    proxy.heal();
}

/// Someone else holds `name` on node 1, so that a majority needs node 0.
fn taken_on_node_1(cluster: &Cluster, name: &str) {
    let _: () = cluster.exec(
        1,
        redis::cmd("SET")
            .arg(name)
            .arg("someone-else")
            .arg("PX")
            .arg(60_000),
    );
}

async fn careful_client(urls: &[String]) -> Redlock {
    quorumlock::Builder::new(urls.to_vec())
        .node_timeout(Duration::from_millis(100))
        .connect_timeout(Duration::from_secs(2))
        .restart_quarantine(Some(FIVE_SECONDS))
        .one_attempt()
        .build()
        .await
        .expect("build")
}

#[tokio::test]
async fn a_reconnect_made_for_another_command_does_not_bypass_the_quarantine() {
    let mut cluster = Cluster::local(3);
    // RESP3: the redis crate reports the close at once, and a read-only
    // status request reconnects before any command of the lock meets the
    // dead connection.
    let urls: Vec<String> = cluster
        .proxied()
        .into_iter()
        .map(|u| format!("{u}/?protocol=resp3"))
        .collect();
    wait_uptime(&cluster, FIVE_SECONDS + Duration::from_secs(1)).await;
    let redlock = careful_client(&urls).await;
    let name = unique("resp3-reconnect");
    redlock
        .try_acquire(&name, TTL)
        .await
        .expect("every node old enough")
        .release()
        .await
        .expect("release");

    restart_behind_the_proxy(&mut cluster, &redlock, 0, async {}).await;
    // Another command (a status read) reconnects meanwhile.
    reconnected(&cluster, &redlock, 0).await;
    taken_on_node_1(&cluster, &name);
    let result = redlock.try_acquire(&name, TTL).await;
    let err = result.expect_err("node 0 restarted empty a second ago and must not vote");
    assert!(quarantined(&err), "{err}");
    assert_eq!(cluster.values(name.as_bytes())[0], None, "node 0 voted");
}

/// Waits (at most 5 s) until the client's own connection reached node `i`
/// again: besides this check's connection, another client is connected.
/// A read-only status request (no lock command) makes the client open it
/// if it has not yet.
async fn reconnected(cluster: &Cluster, redlock: &Redlock, i: usize) {
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_secs(5) {
        let info: String = cluster.exec(i, redis::cmd("INFO").arg("clients"));
        let clients = info
            .lines()
            .find_map(|l| l.strip_prefix("connected_clients:"))
            .and_then(|n| n.trim().parse::<u32>().ok());
        if clients.is_some_and(|n| n >= 2) {
            return;
        }
        let _ = redlock.status(unique("nudge")).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_dead_connection_met_by_a_release_follow_up_does_not_bypass_the_quarantine() {
    let mut cluster = Cluster::local(3);
    let urls = cluster.proxied();
    wait_uptime(&cluster, FIVE_SECONDS + Duration::from_secs(1)).await;
    let redlock = careful_client(&urls).await;
    let name = unique("follow-up");
    let lock = redlock
        .try_acquire(&name, TTL)
        .await
        .expect("every node old enough");

    // The release times out on node 0; its part goes on in the background
    // on the held link and meets the close after the restart; a status
    // read reconnects. No lock command sees an error.
    restart_behind_the_proxy(&mut cluster, &redlock, 0, async {
        lock.release().await.expect("released on a majority");
        // Node 0's part of the release ends in the background, after the
        // node timeout; then the follow-up is sent.
        tokio::time::sleep(Duration::from_millis(500)).await;
    })
    .await;
    reconnected(&cluster, &redlock, 0).await;
    taken_on_node_1(&cluster, &name);
    let result = redlock.try_acquire(&name, TTL).await;
    let err = result.expect_err("node 0 restarted empty a second ago and must not vote");
    assert!(quarantined(&err), "{err}");
    assert_eq!(cluster.values(name.as_bytes())[0], None, "node 0 voted");
}

/// A proxy that keeps the client's connection open while the server
/// behind it restarts (Envoy, twemproxy): no connection loss tells the
/// client, so without more the node's standing stays "votes". The vote
/// carries the server's `run_id`: the new server is caught by the vote
/// itself, kept out, and votes again once its quarantine has passed.
#[tokio::test]
async fn a_restart_behind_a_proxy_that_keeps_the_connection_is_caught_by_the_vote() {
    let mut cluster = Cluster::local(3);
    let young = Duration::from_secs(2);
    let upstream = cluster
        .url(0)
        .trim_start_matches("redis://")
        .parse()
        .expect("node address");
    let sticky = support::sticky::StickyProxy::start(upstream).await;
    let mut urls = cluster.urls();
    urls[0] = sticky.url();
    wait_uptime(&cluster, young + Duration::from_secs(1)).await;
    let redlock = quorumlock::Builder::new(urls)
        .restart_quarantine(Some(young))
        .one_attempt()
        .node_timeout(Duration::from_millis(500))
        .build()
        .await
        .expect("build");
    let name = unique("sticky");
    redlock
        .try_acquire(&name, TTL)
        .await
        .expect("every node old enough")
        .release()
        .await
        .expect("release");
    // The client must be idle when the server restarts: a request the
    // proxy forwarded to the old server would never be answered. The
    // grant and the release may come from nodes 1 and 2 first.
    assert!(
        redlock.settle(Duration::from_secs(5)).await,
        "node 0 answered"
    );
    let voted = redlock.stats().nodes[0].acquire.yes;
    assert_eq!(voted, 1, "node 0 votes before the restart");

    // The client is idle: the proxy keeps its connection and opens a new
    // one to the new server at the next request.
    cluster.restart(0);
    cluster.kill(1);
    let err = redlock
        .try_acquire(&name, TTL)
        .await
        .expect_err("node 0 restarted empty a moment ago and must not vote");
    assert!(err.is_unavailable(), "{err}");
    assert!(
        err.node_failures().iter().any(|f| matches!(
            f.kind,
            quorumlock::NodeFailureKind::ServerChanged
                | quorumlock::NodeFailureKind::Quarantined { .. }
        )),
        "{err}"
    );
    let err = redlock
        .try_acquire(&name, TTL)
        .await
        .expect_err("still quarantined");
    assert!(quarantined(&err), "{err}");
    let stats = redlock.stats();
    assert_eq!(
        stats.nodes[0].acquire.yes, voted,
        "a young server's vote counted"
    );
    assert_eq!(
        stats.nodes[0].connection_errors, 0,
        "the client's connection must not have broken"
    );

    // The quarantine of a server seen for the first time counts from when
    // it was seen (here, within a second of its start).
    cluster.wait_uptime(0, young + Duration::from_secs(2)).await;
    redlock
        .try_acquire(&name, TTL)
        .await
        .expect("node 0 votes again")
        .release()
        .await
        .expect("release");
}

/// Node 0 holds every name of `pool` for someone else (a long TTL), so
/// that its server votes no for them: only a server restarted empty can
/// vote yes.
fn held_for_someone_else(cluster: &Cluster, pool: &[String]) {
    for name in pool {
        let _: () = cluster.exec(
            0,
            redis::cmd("SET")
                .arg(name)
                .arg("someone-else")
                .arg("PX")
                .arg(600_000),
        );
    }
}

/// Restarts hammered while tasks on every worker thread of a multi-thread
/// runtime take locks: the vote of a restarted server is never counted
/// before its quarantine passes, whatever a reconnect races with.
///
/// Each round restarts node 0 (old enough to vote) behind its proxy while
/// traffic is held, so the client learns of the restart only when the
/// proxy heals and closes the connection, with the new server already up:
/// commands that checked the node's standing before the close reach the
/// new server through the reconnect. Node 0 holds every name the tasks use
/// for someone else, so its old servers vote no and a yes can only come
/// from a server restarted empty: the yes votes counted in the first half
/// of each new server's quarantine must be zero. The new server is then
/// given the names too and left to age before the next round. Nodes 1 and
/// 2 grant.
///
/// Negative control: without the check that a vote comes from the server
/// whose uptime was read, and with a 5 ms pause between the standing check
/// and the send in `quorum/attempt.rs` (a preempted thread), young servers' votes
/// were counted (`[0, 0, 0, 0, 0, 2]`); with the check and the same pause,
/// none.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hammered_restarts_from_many_threads_never_count_a_young_servers_vote() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;

    const ROUNDS: usize = 6;
    let required = Duration::from_secs(2);
    let mut cluster = Cluster::local(3);
    cluster.proxied();
    let pool: Arc<Vec<String>> = Arc::new((0..64).map(|_| unique("hammer")).collect());
    held_for_someone_else(&cluster, &pool);
    wait_uptime(&cluster, required).await;
    let redlock = cluster
        .proxied_builder()
        .restart_quarantine(Some(required))
        .one_attempt()
        .node_timeout(Duration::from_millis(300))
        .build()
        .await
        .expect("build");
    let stop = Arc::new(AtomicBool::new(false));
    let granted = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..8)
        .map(|w| {
            let (redlock, stop, granted, pool) =
                (redlock.clone(), stop.clone(), granted.clone(), pool.clone());
            tokio::spawn(async move {
                let mut i = w;
                while !stop.load(Ordering::Relaxed) {
                    i = (i + 7) % pool.len();
                    if let Ok(lock) = redlock.try_acquire(&pool[i], TTL).await {
                        granted.fetch_add(1, Ordering::Relaxed);
                        let _ = lock.release().await;
                    }
                }
            })
        })
        .collect();
    let proxy = cluster.proxy(0);
    let yes = || redlock.stats().nodes[0].acquire.yes;
    let mut young_votes = Vec::new();
    for _ in 0..ROUNDS {
        tokio::time::sleep(Duration::from_millis(300)).await;
        proxy.set(Fault::Blackhole);
        tokio::time::sleep(Duration::from_millis(50)).await;
        tokio::task::block_in_place(|| cluster.restart(0));
        let before = yes();
        proxy.heal();
        tokio::time::sleep(required / 2).await;
        young_votes.push(yes() - before);
        tokio::task::block_in_place(|| held_for_someone_else(&cluster, &pool));
        cluster
            .wait_uptime(0, required + Duration::from_secs(1))
            .await;
    }
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.await.expect("worker");
    }
    let stats = redlock.stats();
    let node = &stats.nodes[0];
    support::report(&format!(
        "hammered restarts: {ROUNDS} restarts, {} grants; node 0: {} commands, {} \
         withheld by the quarantine, yes votes counted in each young window \
         {young_votes:?}",
        granted.load(Ordering::Relaxed),
        node.commands,
        node.quarantined,
    ));
    assert!(granted.load(Ordering::Relaxed) > 0, "nodes 1 and 2 grant");
    assert!(node.acquire.no > 0, "node 0 took part");
    assert!(
        young_votes.iter().all(|&n| n == 0),
        "a young server's vote was counted: {young_votes:?}"
    );
}
