//! The repair on renewal (docs/repair.md): after a renewal that a majority
//! confirmed in time, the key comes back with `SET NX` on the nodes that
//! answered that it is missing there — a node restarted empty regains the
//! holder's key — and never on a node where another token holds it, nor
//! on a node that the restart quarantine keeps out of the vote.

use quorumlock_testkit as support;

use std::time::Duration;

use quorumlock::Renewal;
use support::{eventually, unique, Cluster, Direction, OneAttempt};

const TTL: Duration = Duration::from_secs(3);
/// Generous against a loaded machine: every wait below is bounded by it.
const LIMIT: Duration = Duration::from_secs(10);

/// The token on every node (`None` where absent).
fn tokens(cluster: &Cluster, key: &str) -> Vec<Option<String>> {
    cluster
        .values(key.as_bytes())
        .into_iter()
        .map(|v| v.map(|b| String::from_utf8_lossy(&b).into_owned()))
        .collect()
}

/// The holder's token, read where the lock was granted, once every node
/// holds it.
async fn token_everywhere(cluster: &Cluster, key: &str) -> String {
    assert!(
        cluster.held_on(key, cluster.len(), LIMIT).await,
        "the acquire's SETs never reached every node: {:?}",
        tokens(cluster, key)
    );
    tokens(cluster, key)[0].clone().expect("held on node 0")
}

/// A node restarted without persistence loses the key; the holder's
/// renewals put it back there, with the holder's token, within the
/// validity. Negative control: without the repair (an extend that leaves a
/// missing key missing, as before) node 2 stays empty for the whole hold
/// and this fails.
#[tokio::test]
async fn renewal_puts_the_key_back_on_a_restarted_node() {
    let mut cluster = Cluster::local(5);
    let redlock = cluster.redlock().await;
    let name = unique("repair-restart");
    let lock = redlock.acquire(&name, TTL).await.expect("acquire");
    let token = token_everywhere(&cluster, &name).await;
    let _signal = lock
        .auto_renew(Renewal::every(Duration::from_millis(200)))
        .expect("renew");

    cluster.restart(2);
    assert_eq!(tokens(&cluster, &name)[2], None, "restarted empty");
    // The first renewal may meet the dead connection (a failure, not a
    // "missing"); a later one reaches the new server and repairs.
    let all = vec![Some(token.clone()); 5];
    assert!(
        eventually(LIMIT, || tokens(&cluster, &name) == all).await,
        "the key never came back on node 2: {:?}",
        tokens(&cluster, &name)
    );
    let ttl: i64 = cluster.exec(2, redis::cmd("PTTL").arg(&name));
    assert!(
        ttl > 0 && ttl <= i64::try_from(TTL.as_millis()).expect("small"),
        "the repaired key outlives no renewal: PTTL {ttl}"
    );
    assert!(lock.validity() > Duration::ZERO);
    lock.release().await.expect("release");
    assert!(cluster.released(&name, LIMIT).await);
}

/// A key held by another token is never overwritten: the node answered
/// "another token", not "missing", and gets no repair, while a node where
/// the key is missing is repaired in the same extension.
#[tokio::test]
async fn a_node_holding_another_token_is_never_repaired() {
    let cluster = Cluster::local(5);
    let redlock = cluster.redlock().await;
    let name = unique("repair-theirs");
    let lock = redlock.acquire(&name, TTL).await.expect("acquire");
    let token = token_everywhere(&cluster, &name).await;

    let _: () = cluster.exec(3, redis::cmd("DEL").arg(&name));
    let _: () = cluster.exec(
        4,
        redis::cmd("SET")
            .arg(&name)
            .arg("intruder")
            .arg("PX")
            .arg(60_000),
    );
    lock.extend(TTL).await.expect("extend on a majority");
    let repaired = eventually(LIMIT, || {
        tokens(&cluster, &name)[3].as_deref() == Some(token.as_str())
    })
    .await;
    assert!(
        repaired,
        "node 3 not repaired: {:?}",
        tokens(&cluster, &name)
    );
    // Another extension: node 4 still answers "another token".
    lock.extend(TTL).await.expect("extend on a majority");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(tokens(&cluster, &name)[4].as_deref(), Some("intruder"));
    lock.release().await.expect("release");
}

/// The race the repair meets: a node answers "missing", and before the
/// repair reaches it another client's key appears there. `SET NX` leaves
/// that key alone. Negative control: a repair sent as a plain `SET` (no
/// `NX`) overwrites it and this fails ("intruder" replaced by the token).
#[tokio::test]
async fn a_key_set_between_the_answer_and_the_repair_is_left_alone() {
    let mut cluster = Cluster::local(5);
    // A node timeout long enough that node 3's held reply still counts.
    let redlock = cluster
        .proxied_builder()
        .node_timeout(Duration::from_secs(3))
        .build()
        .await
        .expect("build");
    let name = unique("repair-race");
    let lock = redlock.acquire(&name, TTL * 3).await.expect("acquire");
    token_everywhere(&cluster, &name).await;

    let _: () = cluster.exec(3, redis::cmd("DEL").arg(&name));
    let link = cluster.proxy(3);
    link.hold(Direction::Replies);
    // The other four confirm; node 3 runs the extension ("missing") and
    // its reply waits at the proxy.
    lock.extend(TTL * 3).await.expect("extend on four nodes");
    assert!(
        eventually(LIMIT, || link.queued(Direction::Replies) > 0).await,
        "node 3's reply never reached the proxy"
    );
    let _: () = cluster.exec(
        3,
        redis::cmd("SET")
            .arg(&name)
            .arg("intruder")
            .arg("PX")
            .arg(60_000),
    );
    let replies = redlock.stats().nodes[3].latency.count;
    link.release(Direction::Replies);
    // Node 3 answers the held extension ("missing"), then the repair that
    // answer sends: two replies, after which the key is what the repair
    // left there.
    assert!(
        eventually(LIMIT, || redlock.stats().nodes[3].latency.count
            >= replies + 2)
        .await,
        "node 3 never answered the extension and its repair"
    );
    assert_eq!(tokens(&cluster, &name)[3].as_deref(), Some("intruder"));
    lock.release().await.expect("release");
}

/// With the restart quarantine, a restarted node is repaired only once it
/// may vote again. Negative control: a repair that ignores the quarantine
/// puts the key back while the node is still young, and the first check
/// fails.
#[tokio::test]
async fn a_quarantined_node_is_repaired_only_once_it_votes() {
    let mut cluster = Cluster::local(5);
    let young = Duration::from_secs(3);
    for node in 0..5 {
        cluster.wait_uptime(node, young).await;
    }
    let redlock = cluster
        .builder()
        .restart_quarantine(Some(young))
        .build()
        .await
        .expect("build");
    let name = unique("repair-quarantine");
    let lock = redlock.acquire(&name, TTL).await.expect("acquire");
    let token = token_everywhere(&cluster, &name).await;
    let _signal = lock
        .auto_renew(Renewal::every(Duration::from_millis(200)))
        .expect("renew");
    cluster.restart(2);
    // Well inside the quarantine: three more renewals, node 2 still empty.
    let renewed = redlock.stats().leases.renewals;
    assert!(
        eventually(LIMIT, || redlock.stats().leases.renewals >= renewed + 3).await,
        "renewal stalled"
    );
    assert_eq!(
        tokens(&cluster, &name)[2],
        None,
        "repaired during the quarantine"
    );
    // Past it (uptime has one-second resolution: up to a second more).
    let all = vec![Some(token); 5];
    assert!(
        eventually(LIMIT, || tokens(&cluster, &name) == all).await,
        "the key never came back on node 2: {:?}",
        tokens(&cluster, &name)
    );
    lock.release().await.expect("release");
}

/// The fault run: three holders renew their locks every 200 ms while a
/// seeded sequence of restarts (no persistence, one node at a time) wipes
/// a node's keys, and a contender tries every resource all along. After
/// each restart every lock must regain its key on all five nodes, the
/// contender must never be granted, and no holder may lose its lock.
/// Prints one line with the figures. Negative control: without the repair
/// no lock regains a key a restart wiped (`regained=0/18`), and after a
/// few restarts on different nodes the holders lose their locks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarts_under_renewal_regain_full_coverage() {
    use rand::{Rng, SeedableRng};

    let seed = support::seed("repair fault run");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut cluster = Cluster::local(5);
    let redlock = cluster.redlock().await;
    let names: Vec<String> = (0..3).map(|i| unique(&format!("repair-run-{i}"))).collect();
    let mut held = Vec::new();
    for name in &names {
        let lock = redlock.acquire(name, TTL).await.expect("acquire");
        let token = token_everywhere(&cluster, name).await;
        let signal = lock
            .auto_renew(Renewal::every(Duration::from_millis(200)))
            .expect("renew");
        held.push((lock, signal, token));
    }
    let contender = cluster
        .builder()
        .one_attempt()
        .build()
        .await
        .expect("build");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let contend = {
        let (names, stop) = (names.clone(), stop.clone());
        tokio::spawn(async move {
            let (mut tries, mut grants) = (0u64, 0u64);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for name in &names {
                    tries += 1;
                    if let Ok(lock) = contender.try_acquire(name, TTL).await {
                        grants += 1;
                        let _ = lock.release().await;
                    }
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            (tries, grants)
        })
    };

    let restarts = 6;
    let (mut regained, mut slowest) = (0, Duration::ZERO);
    for _ in 0..restarts {
        let node = rng.random_range(0..5);
        tokio::task::block_in_place(|| cluster.restart(node));
        let after = std::time::Instant::now();
        for (name, (_, _, token)) in names.iter().zip(&held) {
            let back = eventually(LIMIT, || {
                tokens(&cluster, name)
                    .iter()
                    .all(|t| t.as_ref() == Some(token))
            })
            .await;
            if back {
                regained += 1;
                slowest = slowest.max(after.elapsed());
            }
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (tries, grants) = contend.await.expect("contender");
    let lost = held
        .iter()
        .filter(|(_, signal, _)| signal.is_fired())
        .count();
    support::report(&format!(
        "repair fault run: seed={seed} restarts={restarts} locks={} regained={regained}/{} \
         slowest_regain={:.0}ms contender_tries={tries} contender_grants={grants} lost={lost}",
        names.len(),
        restarts * names.len(),
        slowest.as_secs_f64() * 1e3,
    ));
    assert_eq!(
        regained,
        restarts * names.len(),
        "full coverage after each restart"
    );
    assert_eq!(grants, 0, "a second holder");
    assert_eq!(lost, 0, "a holder lost its lock");
    for (lock, _, _) in held {
        lock.release().await.expect("release");
    }
}

/// The lock's key on node 2 is deleted and node 2's replies are held, so
/// that its "missing" answer to the next extension arrives after the
/// holder's release was sent there. Returns once that answer is queued.
async fn lose_the_key_on_node_2_then_hold_its_replies(
    cluster: &Cluster,
    key: &str,
) -> support::FaultHandle {
    let _: () = cluster.exec(2, redis::cmd("DEL").arg(key));
    let link = cluster.proxy(2);
    link.hold(Direction::Replies);
    link
}

/// After the release returned and the client settled, `key` is on no
/// node: a repair answering a late "missing" never lands behind the
/// release.
async fn nothing_left_behind(cluster: &Cluster, redlock: &quorumlock::Redlock, key: &str) {
    assert!(redlock.settle(LIMIT).await, "background work never ended");
    assert_eq!(
        tokens(cluster, key),
        vec![None; 3],
        "a repair landed after the release\n{}",
        cluster.logs()
    );
}

/// A client whose node 2 may answer late and still count (its held
/// replies are released within the node timeout).
async fn three_proxied_nodes(cluster: &mut Cluster) -> quorumlock::Redlock {
    cluster
        .proxied_builder()
        .node_timeout(Duration::from_secs(3))
        .build()
        .await
        .expect("build")
}

/// Waits until node 2's answer to an extension is held at its proxy, then
/// lets every held reply through.
async fn late_missing_reply(link: &support::FaultHandle) {
    assert!(
        eventually(LIMIT, || link.queued(Direction::Replies) > 0).await,
        "node 2's reply never reached the proxy"
    );
}

/// Issue: a lock extended (confirmed by nodes 0 and 1) and released at
/// once, while node 2's "missing" is still on its way: the repair that
/// answer starts must not put the key back after the release. Negative
/// control: without the ordering (a repair that ignores the release), the
/// key is back on node 2 with the released token in every run.
#[tokio::test]
async fn a_repair_never_lands_after_the_lock_is_released() {
    let mut cluster = Cluster::local(3);
    let redlock = three_proxied_nodes(&mut cluster).await;
    let name = unique("repair-release");
    let lock = redlock.acquire(&name, TTL * 3).await.expect("acquire");
    token_everywhere(&cluster, &name).await;
    let link = lose_the_key_on_node_2_then_hold_its_replies(&cluster, &name).await;
    lock.extend(TTL * 3).await.expect("extend on two nodes");
    late_missing_reply(&link).await;
    lock.release().await.expect("release");
    link.release(Direction::Replies);
    nothing_left_behind(&cluster, &redlock, &name).await;
}

/// The same for a dropped lock (its release runs in the background).
#[tokio::test]
async fn a_repair_never_lands_after_a_dropped_lock() {
    let mut cluster = Cluster::local(3);
    let redlock = three_proxied_nodes(&mut cluster).await;
    let name = unique("repair-drop");
    let lock = redlock.acquire(&name, TTL * 3).await.expect("acquire");
    token_everywhere(&cluster, &name).await;
    let link = lose_the_key_on_node_2_then_hold_its_replies(&cluster, &name).await;
    lock.extend(TTL * 3).await.expect("extend on two nodes");
    late_missing_reply(&link).await;
    drop(lock);
    link.release(Direction::Replies);
    nothing_left_behind(&cluster, &redlock, &name).await;
}

/// The same for a semaphore's permit: its slot key.
#[tokio::test]
async fn a_repair_never_lands_after_a_permit_is_released() {
    let mut cluster = Cluster::local(3);
    let redlock = three_proxied_nodes(&mut cluster).await;
    let name = unique("repair-permit");
    let slot = format!("quorumlock:semaphore:{{{name}}}:0");
    let permit = redlock
        .semaphore(&name, 1, TTL * 3)
        .acquire()
        .await
        .expect("permit");
    token_everywhere(&cluster, &slot).await;
    let link = lose_the_key_on_node_2_then_hold_its_replies(&cluster, &slot).await;
    permit.extend(TTL * 3).await.expect("extend on two nodes");
    late_missing_reply(&link).await;
    permit.release().await.expect("release");
    link.release(Direction::Replies);
    nothing_left_behind(&cluster, &redlock, &slot).await;
}

/// The same for a leadership: a resignation right after a renewal that
/// node 2 answered "missing" (late) leaves no lock key and no record.
#[tokio::test]
async fn a_repair_never_lands_after_a_resignation() {
    let mut cluster = Cluster::local(3);
    let redlock = three_proxied_nodes(&mut cluster).await;
    let name = unique("repair-resign");
    let key = format!("quorumlock:election:{{{name}}}");
    let leadership = redlock
        .campaign(&name, TTL * 3)
        .auto_renew(Renewal::every(Duration::from_millis(200)))
        .lead()
        .await
        .expect("lead");
    token_everywhere(&cluster, &key).await;
    let renewed = redlock.stats().leases.renewals;
    let link = lose_the_key_on_node_2_then_hold_its_replies(&cluster, &key).await;
    late_missing_reply(&link).await;
    assert!(
        eventually(LIMIT, || redlock.stats().leases.renewals > renewed).await,
        "no renewal confirmed by nodes 0 and 1"
    );
    leadership.resign().await.expect("resign");
    link.release(Direction::Replies);
    nothing_left_behind(&cluster, &redlock, &key).await;
    assert_eq!(
        tokens(&cluster, &format!("{key}:leader")),
        vec![None; 3],
        "the record was restored after the resignation"
    );
}

/// Rolling restarts under a leader (three nodes, restart quarantine): node
/// 0 restarts empty and, once its quarantine passed, renewal repairs the
/// leadership there; then node 1 restarts empty. The leadership is valid
/// all along, so every `leader()` read and a new observer's first item
/// must name it — for two TTLs after the second restart. Negative
/// control: a repair that restores the lock's key but not the leader's
/// record (as before) leaves the record on node 2 alone, and every read
/// says nobody leads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_stays_visible_through_rolling_restarts() {
    use futures::StreamExt;

    let mut cluster = Cluster::local(3);
    let quarantine = Duration::from_secs(3);
    for node in 0..3 {
        cluster.wait_uptime(node, quarantine).await;
    }
    let redlock = cluster
        .builder()
        .restart_quarantine(Some(quarantine))
        .build()
        .await
        .expect("build");
    let name = unique("repair-rolling");
    let key = format!("quorumlock:election:{{{name}}}");
    let leadership = redlock
        .campaign(&name, TTL)
        .value("10.0.0.5:80")
        .lead()
        .await
        .expect("lead");
    let token = token_everywhere(&cluster, &key).await;
    let expected = Some(quorumlock::Leader {
        epoch: leadership.epoch(),
        value: b"10.0.0.5:80".to_vec(),
    });

    cluster.restart(0);
    assert!(
        eventually(LIMIT * 2, || tokens(&cluster, &key)[0].as_deref()
            == Some(token.as_str()))
        .await,
        "the leadership never came back on node 0: {:?}",
        tokens(&cluster, &key)
    );
    cluster.restart(1);
    let until = tokio::time::Instant::now() + TTL * 2;
    let mut reads = 0;
    while tokio::time::Instant::now() < until {
        let read = redlock.leader(&name).await.expect("a majority answers");
        assert_eq!(
            read,
            expected,
            "read {reads} after the second restart: lock {:?}, record {:?}",
            tokens(&cluster, &key),
            tokens(&cluster, &format!("{key}:leader"))
        );
        reads += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut observer = redlock.observe(&name);
    let first = tokio::time::timeout(LIMIT, observer.next())
        .await
        .expect("the observer reported nothing in time");
    assert_eq!(
        first,
        expected.map(quorumlock::Observed::Leader),
        "a new observer's first item"
    );
    assert!(!leadership.is_lost());
    leadership.resign().await.expect("resign");
}
