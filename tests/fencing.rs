//! Fencing tokens: strictly increasing across successive holders, through
//! faults that stay inside the model (minority restarts with AOF, early
//! expiry on one node), and a stale holder's write is rejected.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use support::{seed, unique, Cluster};

const TTL: Duration = Duration::from_secs(10);

/// A store that, like a database checking a version column, accepts a
/// write only when its fencing token is above the last one accepted.
#[derive(Default)]
struct FencedStore {
    last: Mutex<u64>,
}

impl FencedStore {
    fn write(&self, fence: u64) -> bool {
        let mut last = self.last.lock().expect("store");
        if fence > *last {
            *last = fence;
            true
        } else {
            false
        }
    }
}

#[tokio::test]
async fn fences_increase_and_the_counter_sits_beside_the_key() {
    let cluster = Cluster::shared(5);
    let redlock = cluster.redlock().await;
    let name = unique("fenced");
    let mut last = 0;
    for _ in 0..5 {
        let lock = redlock.acquire_fenced(&name, TTL).await.expect("acquire");
        let fence = lock.fence().expect("fenced");
        assert!(fence > last, "{fence} after {last}");
        last = fence;
        let counter_key = [quorumlock::FENCE_KEY_PREFIX, name.as_bytes()].concat();
        let committed = (0..5)
            .filter(|&i| {
                let v: Option<u64> = cluster.exec(i, redis::cmd("GET").arg(&counter_key));
                v == Some(fence)
            })
            .count();
        assert!(committed >= 3, "committed on {committed} nodes");
        let ttl: i64 = cluster.exec(0, redis::cmd("PTTL").arg(&counter_key));
        assert_eq!(ttl, -1, "counters never expire");
        lock.release().await.expect("release");
    }
    let plain = redlock.acquire(&name, TTL).await.expect("plain");
    assert_eq!(plain.fence(), None);
    plain.release().await.expect("release");
    for i in 0..5 {
        let _: () = cluster.exec(
            i,
            redis::cmd("DEL").arg([quorumlock::FENCE_KEY_PREFIX, name.as_bytes()].concat()),
        );
    }
}

/// The case fencing exists for: A's key expires early on the one node its
/// majority shares with B's, B wins while A still believes it holds the
/// lock — and A's late write is rejected because B's token is higher.
#[tokio::test]
async fn a_stale_holder_after_early_expiry_is_fenced_off() {
    let cluster = Cluster::local(5);
    let redlock = cluster
        .builder()
        .retry_count(0)
        .build()
        .await
        .expect("build");
    let name = unique("early-expiry");
    let store = FencedStore::default();
    // Someone else's keys on nodes 3 and 4: A's majority is {0, 1, 2}.
    for i in [3, 4] {
        let _: () = cluster.exec(
            i,
            redis::cmd("SET")
                .arg(&name)
                .arg("other")
                .arg("PX")
                .arg(60_000),
        );
    }
    let a = redlock
        .acquire_fenced(&name, TTL)
        .await
        .expect("A on 0,1,2");
    let a_fence = a.fence().expect("fenced");
    // Node 2's clock jumps: A's key expires there early. Nodes 0 and 1
    // hold A's key; the foreign keys on 3 and 4 go away.
    for i in [2, 3, 4] {
        let _: () = cluster.exec(i, redis::cmd("DEL").arg(&name));
    }
    let b = redlock
        .acquire_fenced(&name, TTL)
        .await
        .expect("B on 2,3,4");
    let b_fence = b.fence().expect("fenced");
    assert!(
        a.validity() > Duration::ZERO,
        "A still believes it holds the lock"
    );
    assert!(
        b_fence > a_fence,
        "B's token {b_fence} must exceed A's {a_fence}"
    );
    assert!(store.write(b_fence), "B writes");
    assert!(!store.write(a_fence), "A's stale write is rejected");
    drop(a);
    b.release().await.expect("release");
}

#[tokio::test]
async fn fences_stay_monotonic_through_restarts_and_early_expiry() {
    let seed = seed("fences_stay_monotonic");
    let mut rng = StdRng::seed_from_u64(seed);
    let mut cluster = Cluster::local_with(5, true);
    let redlock = cluster
        .builder()
        .retry_count(40)
        .retry_delay(Duration::from_millis(5), Duration::from_millis(40))
        .build()
        .await
        .expect("build");
    let name = unique("monotonic");
    let grants: Arc<Mutex<Vec<u64>>> = Arc::default();
    let store = Arc::new(FencedStore::default());
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut workers = Vec::new();
    for _ in 0..8 {
        let (r, n, g, st, stop) = (
            redlock.clone(),
            name.clone(),
            grants.clone(),
            store.clone(),
            stop.clone(),
        );
        workers.push(tokio::spawn(async move {
            let mut rejected = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let Ok(lock) = r.acquire_fenced(&n, Duration::from_millis(800)).await else {
                    continue;
                };
                let fence = lock.fence().expect("fenced");
                g.lock().expect("log").push(fence);
                if !st.write(fence) {
                    rejected += 1;
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
                let _ = lock.release().await;
            }
            rejected
        }));
    }
    let mut faults = 0;
    for _ in 0..12 {
        tokio::time::sleep(Duration::from_millis(rng.random_range(50..150))).await;
        let node = rng.random_range(0..5);
        if rng.random_bool(0.5) {
            // kill -9 and restart at once; AOF with fsync always keeps
            // keys and counters.
            cluster.restart(node);
        } else {
            // Early expiry on one node (its clock jumped).
            let _: () = cluster.exec(node, redis::cmd("DEL").arg(&name));
        }
        faults += 1;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut rejected = 0;
    for w in workers {
        rejected += w.await.expect("worker");
    }
    let grants = grants.lock().expect("log").clone();
    eprintln!(
        "fencing: seed={seed} grants={} faults={faults} rejected_writes={rejected}",
        grants.len()
    );
    assert!(
        grants.len() >= 20,
        "too few grants to mean anything: {}",
        grants.len()
    );
    for w in grants.windows(2) {
        assert!(
            w[1] > w[0],
            "fence went from {} to {} (seed {seed})",
            w[0],
            w[1]
        );
    }
    assert!(
        cluster
            .released(name.as_bytes(), Duration::from_secs(3))
            .await
    );
}
