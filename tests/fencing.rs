//! Fencing tokens: unique, and larger for a holder whose acquire began
//! after an earlier holder was granted, through faults that stay inside the
//! model (minority restarts with AOF, early expiry on one node, messages of
//! one client held against another's); a stale holder's write is rejected;
//! the counter range Lua can hold exactly is enforced (docs/fencing.md).

use quorumlock_testkit as support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use quorumlock::MAX_FENCE;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use support::{seed, unique, Cluster, Direction, NodeOptions, OneAttempt};

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
        let lock = redlock
            .lock(&name, TTL)
            .fenced()
            .acquire()
            .await
            .expect("acquire");
        let fence = lock.fence().expect("fenced");
        assert!(fence > last, "{fence} after {last}");
        last = fence;
        let counter_key = [quorumlock::FENCE_KEY_PREFIX, b"{", name.as_bytes(), b"}"].concat();
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
            redis::cmd("DEL")
                .arg([quorumlock::FENCE_KEY_PREFIX, b"{", name.as_bytes(), b"}"].concat()),
        );
    }
}

/// The case fencing exists for: A's key expires early on the one node its
/// majority shares with B's, B wins while A still believes it holds the
/// lock — and A's late write is rejected because B's token is higher.
#[tokio::test]
async fn a_stale_holder_after_early_expiry_is_fenced_off() {
    let cluster = Cluster::local(5);
    let redlock = cluster.one_attempt_redlock().await;
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
        .lock(&name, TTL)
        .fenced()
        .acquire()
        .await
        .expect("A on 0,1,2");
    // A's last SET may land after the acquire returned: wait for it.
    assert!(cluster.held_on(&name, 5, Duration::from_secs(5)).await);
    let a_fence = a.fence().expect("fenced");
    // Node 2's clock jumps: A's key expires there early. Nodes 0 and 1
    // hold A's key; the foreign keys on 3 and 4 go away.
    for i in [2, 3, 4] {
        let _: () = cluster.exec(i, redis::cmd("DEL").arg(&name));
    }
    let b = redlock
        .lock(&name, TTL)
        .fenced()
        .acquire()
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
    let mut cluster = Cluster::local_custom(
        5,
        &NodeOptions {
            aof: true,
            ..NodeOptions::default()
        },
    );
    let redlock = cluster
        .builder()
        .retry(quorumlock::Retry::Times(40))
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
                let Ok(lock) = r
                    .lock(&n, Duration::from_millis(800))
                    .fenced()
                    .acquire()
                    .await
                else {
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

/// Every node restarts empty (no AOF: counters lost): the next lock's token
/// and the next permit's are still above every token before the restart,
/// because a lost counter starts again from the node's time in
/// microseconds (docs/fencing.md, "A counter that is lost"). Counters that
/// started from 0 again handed out 1 (and 1024 for a permit), and a store
/// then refused every write until the counters were raised by hand.
#[tokio::test]
async fn tokens_stay_above_the_last_one_after_every_node_restarts_empty() {
    tokens_stay_above_the_last_one_after_every_node_restarts(false).await;
}

/// Every node restarts from a snapshot older than its counter (no AOF; a
/// `dump.rdb` written after the first holder, as `SAVE` or a replica's full
/// sync writes one even under `save ""`): the counters come back older,
/// and the next lock's token and the next permit's are still above every
/// token before the restart, because an acquire reads a counter never
/// below the node's time (docs/fencing.md, "A counter that comes back
/// older"). Read as stored, the counters gave the next holder the first
/// holder's token plus one, and a store refused its writes.
#[tokio::test]
async fn tokens_stay_above_the_last_one_after_every_node_restarts_from_an_older_snapshot() {
    tokens_stay_above_the_last_one_after_every_node_restarts(true).await;
}

/// Three holders of a lock and of a permit, a restart of every node
/// (from a snapshot taken after the first holders when `snapshot`), then
/// one more of each: its token is above every token before.
async fn tokens_stay_above_the_last_one_after_every_node_restarts(snapshot: bool) {
    let mut cluster = Cluster::local(3);
    let (lock, permits) = (unique("full-restart"), unique("full-restart-sem"));
    let mut last = (0, 0);
    {
        let redlock = cluster.redlock().await;
        for round in 0..3 {
            let held = redlock.lock(&lock, TTL).fenced().acquire().await;
            let held = held.expect("lock");
            let permit = redlock.semaphore(&permits, 2, TTL).fenced().acquire();
            let permit = permit.await.expect("permit");
            let fences = (
                held.fence().expect("fenced"),
                permit.fence().expect("fenced"),
            );
            assert!(
                fences.0 > last.0 && fences.1 > last.1,
                "{fences:?} after {last:?}"
            );
            last = fences;
            held.release().await.expect("release");
            permit.release().await.expect("release");
            if snapshot && round == 0 {
                for i in 0..3 {
                    let _: () = cluster.exec(i, &redis::cmd("SAVE"));
                }
            }
        }
    }
    for i in 0..3 {
        cluster.restart(i);
    }
    for i in 0..3 {
        let kept: Option<u64> = cluster.exec(i, redis::cmd("GET").arg(counter_key(&lock)));
        match snapshot {
            true => assert!(
                kept.is_some_and(|k| k < last.0),
                "node {i} came back older: {kept:?}"
            ),
            false => assert_eq!(kept, None, "node {i} restarted without its counter"),
        }
    }
    let redlock = cluster.redlock().await;
    let held = redlock.lock(&lock, TTL).fenced().acquire().await;
    let held = held.expect("lock after the restart");
    let store = FencedStore::default();
    assert!(store.write(last.0));
    let fence = held.fence().expect("fenced");
    assert!(
        fence > last.0,
        "token {fence} after {} before the restart",
        last.0
    );
    assert!(store.write(fence), "the store takes the new holder's write");
    if snapshot {
        // A semaphore's counter is lifted once it is more than 2^20 us
        // (about a second) behind the node's time.
        tokio::time::sleep(Duration::from_millis(1200)).await;
    }
    let permit = redlock.semaphore(&permits, 2, TTL).fenced().acquire();
    let permit = permit.await.expect("permit after the restart");
    let fence = permit.fence().expect("fenced");
    assert!(
        fence > last.1,
        "permit {fence} after {} before the restart",
        last.1
    );
    held.release().await.expect("release");
    permit.release().await.expect("release");
}

/// A token far ahead of the client's clock (a fenced semaphore granting
/// faster than its counter's clock, a node clock ahead, a counter raised
/// by hand) would let a lost counter start below it: the client warns, once
/// for that counter, and never for a counter that started from the time.
#[tokio::test]
async fn a_token_ahead_of_the_clients_clock_is_warned_about_once() {
    let (capture, _guard) = support::logs::LogCapture::warnings();
    let cluster = Cluster::shared(3);
    let redlock = cluster.redlock().await;
    let (fresh, ahead) = (unique("fresh-counter"), unique("counter-ahead"));
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    let hour_ahead = now.expect("clock").as_micros() as u64 + 3_600_000_000;
    for i in 0..3 {
        let _: () = cluster.exec(
            i,
            redis::cmd("SET").arg(counter_key(&ahead)).arg(hour_ahead),
        );
    }
    for name in [&fresh, &ahead, &fresh, &ahead] {
        let lock = redlock
            .lock(name, TTL)
            .fenced()
            .acquire()
            .await
            .expect("acquire");
        lock.release().await.expect("release");
    }
    let warned: Vec<String> = capture
        .text()
        .lines()
        .filter(|l| l.contains("ahead of this client's clock"))
        .map(str::to_owned)
        .collect();
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(
        warned[0].contains(&ahead),
        "names the counter: {}",
        warned[0]
    );
    for i in 0..3 {
        let _: () = cluster.exec(i, redis::cmd("DEL").arg(counter_key(&ahead)));
    }
}

fn counter_key(name: &str) -> Vec<u8> {
    [quorumlock::FENCE_KEY_PREFIX, b"{", name.as_bytes(), b"}"].concat()
}

/// Waits (bounded) for a condition the test script needs before its next
/// step; panics with `what` when it does not come.
async fn step(what: &str, check: impl FnMut() -> bool) {
    assert!(
        support::eventually(Duration::from_secs(10), check).await,
        "timed out waiting until {what}"
    );
}

/// Issue 10, defect 1: two clients granted the same fence. Nodes x, y, z.
/// B's acquire reaches x and z, but z's reply to B is held and B's request
/// to y is held. B's key expires early on x (a clock jump, done here with a
/// DEL). A takes x and y, commits its fence there and releases. Then z's
/// reply reaches B, which proposes the same token A got, and its held
/// `SET` and commit land on y, whose counter is already at that token. The
/// old commit rule (counter >= T counts as a yes) granted B A's fence; now
/// y answers no, and B either fails or gets a larger token.
#[tokio::test]
async fn a_delayed_client_is_never_granted_an_earlier_holders_fence() {
    let cluster = Cluster::local(3);
    let (x, y, z) = (0, 1, 2);
    let name = unique("dup-fence");
    let b_links = cluster.links();
    let b = quorumlock::Builder::new(b_links.urls())
        .node_timeout(Duration::from_secs(30))
        .connect_timeout(Duration::from_secs(2))
        .one_attempt()
        .build()
        .await
        .expect("build B");
    let a = cluster
        .builder()
        .one_attempt()
        .build()
        .await
        .expect("build A");
    let ttl = Duration::from_secs(60);

    b_links.link(y).hold(Direction::Requests);
    b_links.link(z).hold(Direction::Replies);
    let b_acquire = tokio::spawn({
        let (b, name) = (b.clone(), name.clone());
        async move { b.lock(&name, ttl).fenced().acquire().await }
    });
    step("B's SET ran on x and z and waits at y", || {
        let values = cluster.values(name.as_bytes());
        values[x].is_some()
            && values[z].is_some()
            && b_links.link(y).queued(Direction::Requests) > 0
            && b_links.link(z).queued(Direction::Replies) > 0
    })
    .await;
    let set_bytes = b_links.link(y).queued(Direction::Requests);

    // x's clock jumps: B's key expires there early.
    let _: () = cluster.exec(x, redis::cmd("DEL").arg(&name));

    let a_lock = a
        .lock(&name, ttl)
        .fenced()
        .acquire()
        .await
        .expect("A takes x and y");
    let a_fence = a_lock.fence().expect("fenced");
    a_lock.release().await.expect("A releases");

    // z's reply reaches B: B has x and z, proposes a token and commits; its
    // commit to y queues behind its held SET.
    b_links.link(z).release(Direction::Replies);
    step("B's commit waits behind its SET at y", || {
        b_links.link(y).queued(Direction::Requests) > set_bytes
    })
    .await;
    b_links.link(y).release(Direction::Requests);

    let b_result = tokio::time::timeout(Duration::from_secs(30), b_acquire)
        .await
        .expect("B's acquire ends")
        .expect("B's task");
    match b_result {
        Ok(lock) => {
            let b_fence = lock.fence().expect("fenced");
            assert!(
                b_fence > a_fence,
                "B was granted fence {b_fence}, A had {a_fence}: fences must never repeat"
            );
            lock.release().await.expect("release B");
        }
        Err(e) => assert!(e.is_contended() || e.is_unavailable(), "{e}"),
    }
    assert!(
        cluster
            .released(name.as_bytes(), Duration::from_secs(5))
            .await,
        "B's keys left behind: {:?}",
        cluster.values(name.as_bytes())
    );
}

/// Counters stay where Lua's doubles are exact. At `MAX_FENCE − 1` the next
/// token is exactly `MAX_FENCE`; at `MAX_FENCE` a fenced acquire fails with
/// a typed error, releases what it set and leaves the counters alone.
#[tokio::test]
async fn fences_stop_at_two_to_the_53_with_a_typed_error() {
    let cluster = Cluster::local(3);
    let redlock = cluster.redlock().await;
    let name = unique("fence-bound");
    let counter = counter_key(&name);
    for i in 0..3 {
        let _: () = cluster.exec(i, redis::cmd("SET").arg(&counter).arg(MAX_FENCE - 1));
    }
    let lock = redlock
        .lock(&name, TTL)
        .fenced()
        .acquire()
        .await
        .expect("one token left");
    assert_eq!(lock.fence(), Some(MAX_FENCE), "exact at the bound");
    lock.release().await.expect("release");

    let err = redlock
        .lock(&name, TTL)
        .fenced()
        .acquire()
        .await
        .expect_err("no token left");
    assert!(err.is_fence_exhausted(), "{err}");
    assert!(
        cluster
            .released(name.as_bytes(), Duration::from_secs(3))
            .await,
        "the attempt's keys were released"
    );
    for i in 0..3 {
        let v: Option<u64> = cluster.exec(i, redis::cmd("GET").arg(&counter));
        assert!(v <= Some(MAX_FENCE), "counter on node {i}: {v:?}");
    }
}

/// A counter a double cannot hold exactly, or that is not a plain integer
/// at all, is refused by the node (`FENCERANGE`) before the key is set.
#[tokio::test]
async fn nodes_refuse_counters_out_of_the_exact_range() {
    let cluster = Cluster::local(3);
    let redlock = cluster.one_attempt_redlock().await;
    for bad in [
        "9007199254740992",
        "18446744073709551615",
        "1.5",
        "007",
        "-1",
        "x",
    ] {
        let name = unique("fence-range");
        for i in 0..3 {
            let _: () = cluster.exec(i, redis::cmd("SET").arg(counter_key(&name)).arg(bad));
        }
        let err = redlock
            .lock(&name, TTL)
            .fenced()
            .acquire()
            .await
            .expect_err("refused");
        // A misconfiguration, naming the counter.
        assert!(
            err.is_misconfigured() && !err.is_unavailable(),
            "{bad}: {err}"
        );
        let key = String::from_utf8_lossy(&counter_key(&name)).into_owned();
        assert!(err.to_string().contains(&key), "{bad}: {err}");
        assert!(
            err.node_failures()
                .iter()
                .all(|f| f.kind.is_redis_error("FENCERANGE")),
            "{bad}: {err}"
        );
        assert_eq!(cluster.holders(name.as_bytes()), 0, "{bad}: nothing set");
    }
}
