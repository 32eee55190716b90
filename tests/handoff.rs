//! Fast hand-off: a waiter retries when the holder's release is announced,
//! not after its random delay.

use quorumlock_testkit as support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::announce::Announcer;
use support::{unique, Cluster};

const TTL: Duration = Duration::from_secs(10);
/// A retry delay so long that a waiter finishing well before it can only
/// have been woken by the release announcement.
const SLOW_RETRY: Duration = Duration::from_secs(4);

#[tokio::test]
async fn a_waiter_is_woken_by_the_release_not_by_its_retry_delay() {
    let cluster = Cluster::shared(5);
    let redlock = cluster
        .builder()
        .retry(quorumlock::Retry::Times(10))
        .retry_delay(SLOW_RETRY, SLOW_RETRY)
        .build()
        .await
        .expect("build");
    let name = unique("handoff");
    let holder = redlock.acquire(&name, TTL).await.expect("holder");
    let waiter = {
        let (r, n) = (redlock.clone(), name.clone());
        tokio::spawn(async move {
            let lock = r.acquire(&n, TTL).await;
            (Instant::now(), lock)
        })
    };
    // Let the waiter fail, subscribe, fail again and start waiting.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let released_at = Instant::now();
    holder.release().await.expect("release");
    let (granted_at, lock) = tokio::time::timeout(Duration::from_secs(30), waiter)
        .await
        .expect("waiter ends")
        .expect("task");
    let lock = lock.expect("waiter acquires");
    let gap = granted_at - released_at;
    assert!(
        gap < SLOW_RETRY / 2,
        "woken after {gap:?}: the announcement was missed"
    );
    lock.release().await.expect("release");
}

#[tokio::test]
async fn the_release_script_announces_on_the_resource_channel() {
    let cluster = Cluster::shared(3);
    let redlock = cluster.redlock().await;
    let name = unique("announce");
    let lock = redlock.acquire(&name, TTL).await.expect("acquire");
    let (released, seen) = announcements_during(
        &cluster,
        &[0, 1, 2],
        &channel(&name),
        Duration::from_secs(1),
        lock.release(),
    )
    .await;
    released.expect("release");
    assert_eq!(
        seen, 3,
        "every node announces on quorumlock:released:<resource>"
    );
}

/// What `during` returns, and how many release announcements the nodes
/// `nodes` sent on `channel` while it ran and within `window` after.
async fn announcements_during<T>(
    cluster: &Cluster,
    nodes: &[usize],
    channel: &[u8],
    window: Duration,
    during: impl std::future::Future<Output = T>,
) -> (T, usize) {
    use futures::StreamExt;
    let mut streams = Vec::new();
    for &i in nodes {
        let client = redis::Client::open(cluster.url(i)).expect("url");
        let mut pubsub = client.get_async_pubsub().await.expect("pubsub");
        pubsub.subscribe(channel).await.expect("subscribe");
        streams.push(pubsub.into_on_message());
    }
    let out = during.await;
    let mut all = futures::stream::select_all(streams);
    let mut seen = 0;
    let _ = tokio::time::timeout(window, async {
        while all.next().await.is_some() {
            seen += 1;
        }
    })
    .await;
    (out, seen)
}

/// Another owner's token on `nodes`, written directly (as that owner's
/// `SET`s would be).
fn foreign(cluster: &Cluster, name: &str, nodes: &[usize]) {
    for &i in nodes {
        let _: () = cluster.exec(
            i,
            redis::cmd("SET")
                .arg(name)
                .arg("other-owner")
                .arg("PX")
                .arg(10_000),
        );
    }
}

fn channel(name: &str) -> Vec<u8> {
    [quorumlock::RELEASE_CHANNEL_PREFIX, name.as_bytes()].concat()
}

/// One attempt of ours on a fresh resource while another owner's token
/// sits on the nodes `others`: the attempt's error, and how many release
/// announcements the nodes `watched` sent while it ran and cleaned up.
/// Checks that only the other owner's keys are left, then removes them.
async fn attempt_beside_another_owner(
    cluster: &Cluster,
    others: &[usize],
    watched: &[usize],
) -> (quorumlock::Error, usize) {
    let redlock = cluster.redlock().await;
    let name = unique("handoff-cleanup");
    foreign(cluster, &name, others);
    let (result, seen) = announcements_during(
        cluster,
        watched,
        &channel(&name),
        Duration::from_millis(500),
        async { redlock.try_acquire(&name, TTL).await },
    )
    .await;
    assert!(
        cluster
            .held_on(&name, others.len(), Duration::from_secs(2))
            .await,
        "our keys are gone, the other owner's stay"
    );
    for &i in others {
        let _: i64 = cluster.exec(i, redis::cmd("DEL").arg(&name));
    }
    (result.expect_err("not ours"), seen)
}

#[tokio::test]
async fn a_cleanup_after_losing_to_a_holder_wakes_nobody() {
    // Five nodes: another owner holds three. Our attempt sets nodes 3 and
    // 4, loses, and deletes its keys there without waking anyone: the
    // holder announces when it lets go, and a waiter woken now could only
    // run into its keys.
    let cluster = Cluster::shared(5);
    let (err, seen) = attempt_beside_another_owner(&cluster, &[0, 1, 2], &[3, 4]).await;
    assert!(err.is_contended(), "{err}");
    assert_eq!(seen, 0, "a cleanup after losing to a holder announced");
}

#[tokio::test]
async fn a_cleanup_after_a_split_wakes_the_waiters() {
    // Four nodes, quorum three: another owner on nodes 0 and 1, our
    // attempt on 2 and 3. Nobody holds the lock; our cleanup is what lets
    // a waiter in once the other side cleans up too, so it announces, on
    // each node where it deleted a key.
    let cluster = Cluster::shared(4);
    let (err, seen) = attempt_beside_another_owner(&cluster, &[0, 1], &[2, 3]).await;
    assert!(err.is_contended(), "{err}");
    assert_eq!(seen, 2, "each node announces the split attempt's cleanup");
}

#[tokio::test]
async fn a_waiter_without_a_retry_count_does_not_poll_a_live_holder() {
    // The holder keeps the lock for the whole wait. A waiter limited by
    // time alone tries again when the holder's keys would expire or once a
    // second (in case an announcement was missed), not every 0–200 ms.
    let cluster = Cluster::shared(5);
    let holder = cluster.redlock().await;
    let waiter = cluster.redlock().await;
    let name = unique("handoff-patient");
    let lock = holder.acquire(&name, TTL).await.expect("holder");
    let wait = Duration::from_secs(3);
    let err = waiter
        .lock(&name, TTL)
        .retry(quorumlock::Retry::Until(wait))
        .acquire()
        .await
        .expect_err("held for the whole wait");
    assert!(err.is_contended(), "{err}");
    let attempts = waiter
        .stats()
        .nodes
        .iter()
        .map(|n| n.acquire.yes + n.acquire.no)
        .max()
        .unwrap_or(0);
    // First attempt, the one right after subscribing, then one a second.
    assert!(
        (2..=6).contains(&attempts),
        "{attempts} attempts in {wait:?} (every 0–200 ms would be about 30)"
    );
    lock.release().await.expect("release");
}

/// A waiter with a count of retries hears a release every 20 ms, as under
/// holders taking the lock back to back, and finds the key set each time
/// (its holder keeps it; the test announces the releases). Each retry
/// still comes at most one retry delay (200 ms here) after the attempt
/// before: with 3 retries it is refused within about 3 × (200 ms + an
/// attempt), bounded here at 8 s, about ten times that. Before, each
/// release heard pushed its next retry a retry delay further out, and it
/// waited as long as releases came.
#[tokio::test]
async fn a_waiter_with_a_retry_count_spends_it_under_a_stream_of_releases() {
    const RETRIES: u32 = 3;
    let cluster = Cluster::shared(5);
    let name = unique("handoff-count");
    let holder = cluster.redlock().await;
    let lock = holder.acquire(&name, TTL).await.expect("holder");
    let releases = Announcer::start(&cluster, name.as_bytes(), Duration::from_millis(20)).await;
    let delay = Duration::from_millis(200);
    let waiter = cluster.builder().retry_delay(delay, delay).build().await;
    let request = waiter.expect("build").lock(&name, TTL);
    let acquire = request.retry(quorumlock::Retry::Times(RETRIES)).acquire();
    let outcome = tokio::time::timeout(Duration::from_secs(8), acquire).await;
    let heard = releases.stop().await;
    lock.release().await.expect("release");
    match outcome {
        Ok(Err(quorumlock::Error::Contended { attempts, .. })) => {
            assert_eq!(attempts, RETRIES + 1)
        }
        Ok(other) => panic!("{other:?}"),
        Err(_) => panic!("still waiting after 8 s with {RETRIES} retries ({heard} releases)"),
    }
}

#[tokio::test]
async fn thirty_two_waiters_all_get_their_turn_one_at_a_time() {
    let cluster = Cluster::shared(5);
    let redlock = cluster
        .builder()
        .retry(quorumlock::Retry::Until(Duration::MAX))
        .retry_delay(Duration::from_millis(500), Duration::from_secs(1))
        .build()
        .await
        .expect("build");
    let name = unique("herd");
    let holder = redlock.acquire(&name, TTL).await.expect("holder");
    let inside = Arc::new(AtomicUsize::new(0));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let mut waiters = Vec::new();
    for _ in 0..32 {
        let (r, n, inside, overlaps) = (
            redlock.clone(),
            name.clone(),
            inside.clone(),
            overlaps.clone(),
        );
        waiters.push(tokio::spawn(async move {
            let lock = r
                .lock(&n, TTL)
                .retry(quorumlock::Retry::Until(Duration::from_secs(60)))
                .acquire()
                .await
                .expect("every waiter gets a turn");
            if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                overlaps.fetch_add(1, Ordering::SeqCst);
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
            inside.fetch_sub(1, Ordering::SeqCst);
            lock.release().await.expect("release");
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let start = Instant::now();
    holder.release().await.expect("release");
    for w in waiters {
        tokio::time::timeout(Duration::from_secs(90), w)
            .await
            .expect("waiter ends")
            .expect("task");
    }
    eprintln!("handoff: 32 waiters served in {:?}", start.elapsed());
    assert_eq!(overlaps.load(Ordering::SeqCst), 0);
}

/// How many subscribers `channel` has on node `i`.
fn subscribers(cluster: &Cluster, i: usize, channel: &[u8]) -> i64 {
    let (_, n): (Vec<u8>, i64) = cluster.exec(i, redis::cmd("PUBSUB").arg("NUMSUB").arg(channel));
    n
}

#[tokio::test]
async fn an_acquire_dropped_at_any_point_leaves_no_subscription_behind() {
    let mut cluster = Cluster::local(3);
    // Slow replies widen the window in which the waiter's SUBSCRIBEs are in
    // flight, so some of the drops below land inside it.
    let latency = Duration::from_millis(20);
    let waiting = cluster
        .proxied_builder()
        .node_timeout(Duration::from_millis(500))
        .retry(quorumlock::Retry::Until(Duration::MAX))
        .retry_delay(SLOW_RETRY, SLOW_RETRY)
        .build()
        .await
        .expect("build");
    let holder = cluster.redlock().await;
    let name = unique("dropped-waiter");
    let channel = [quorumlock::RELEASE_CHANNEL_PREFIX, name.as_bytes()].concat();

    // Open the subscriber connections first: a waiter subscribes in line
    // only where they already exist.
    let warm = unique("warm-up");
    let held = holder.try_acquire(&warm, TTL).await.expect("holder");
    let _ = tokio::time::timeout(Duration::from_secs(2), waiting.acquire(&warm, TTL)).await;
    held.release().await.expect("release");
    for p in cluster.proxies() {
        p.set(support::Fault::latency(latency));
    }

    // Held for longer than the whole loop below takes.
    let held = holder
        .try_acquire(&name, Duration::from_secs(120))
        .await
        .expect("holder");
    let step = Duration::from_millis(2);
    for k in 0..100u32 {
        let limit = step * k;
        let r = tokio::time::timeout(limit, waiting.acquire(&name, TTL)).await;
        assert!(r.is_err(), "the lock is held: {r:?}");
    }
    cluster.heal_proxies();
    held.release().await.expect("release");

    // Unsubscribing runs in the background: wait for it, bounded.
    let gone = support::eventually(Duration::from_secs(10), || {
        (0..3).all(|i| subscribers(&cluster, i, &channel) == 0)
    })
    .await;
    let left: Vec<i64> = (0..3).map(|i| subscribers(&cluster, i, &channel)).collect();
    assert!(gone, "subscriptions left on the nodes: {left:?}");
}
