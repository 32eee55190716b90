//! The counting semaphore on real nodes.

use quorumlock_testkit as support;

use std::time::Duration;

use support::{unique, Cluster};

const TTL: Duration = Duration::from_secs(10);

#[tokio::test]
async fn at_most_l_holders_and_a_release_lets_the_next_in() {
    let cluster = Cluster::shared(5);
    let redlock = cluster.redlock().await;
    let name = unique("sem");
    let a = redlock.semaphore(&name, 2, TTL).acquire().await.expect("a");
    let b = redlock.semaphore(&name, 2, TTL).acquire().await.expect("b");
    let mut slots = [a.slots()[0], b.slots()[0]];
    slots.sort();
    assert_eq!(slots, [0, 1]);
    let c = redlock
        .semaphore(&name, 2, TTL)
        .retry(quorumlock::Retry::Times(0))
        .acquire()
        .await
        .expect_err("third");
    assert!(c.is_contended(), "{c}");
    let status = redlock.semaphore_status(&name, 2).await.unwrap();
    eprintln!("{status}");
    assert_eq!(status.held(), 2);
    a.release().await.unwrap();
    let c = redlock.semaphore(&name, 2, TTL).acquire().await.expect("c");
    c.release().await.unwrap();
    b.release().await.unwrap();
}
