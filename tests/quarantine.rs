//! Restart quarantine: a node killed and restarted empty at once does not
//! vote, so a second client cannot win a majority through it.

mod support;

use std::time::Duration;

use support::{unique, Cluster};

const TTL: Duration = Duration::from_secs(20);
const QUARANTINE: Duration = Duration::from_secs(30);

/// Nodes have been up since the test started; wait until they are older
/// than `age` by their own account (uptime has one-second resolution).
async fn wait_uptime(cluster: &Cluster, age: Duration) {
    for node in 0..cluster.len() {
        wait_uptime_of(cluster, node, age).await;
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
        .retry_count(3)
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
        .retry_count(3)
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
        .retry_count(3)
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
        .retry_count(0)
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
    wait_uptime_of(&cluster, 0, young + Duration::from_secs(1)).await;
    let lock = redlock
        .try_acquire(&name, TTL)
        .await
        .expect("node 0 votes again");
    lock.release().await.expect("release");
}

async fn wait_uptime_of(cluster: &Cluster, node: usize, age: Duration) {
    for _ in 0..100 {
        let info: String = cluster.exec(node, redis::cmd("INFO").arg("server"));
        let up = info
            .lines()
            .find_map(|l| l.strip_prefix("uptime_in_seconds:"))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0);
        if Duration::from_secs(up) >= age {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("node {node} never reached an uptime of {age:?}");
}
