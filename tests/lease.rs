//! The lease lifecycle on real nodes: automatic renewal, the lost-lock
//! signal on every path, renewal caps, node restarts, scoped locking on
//! every way out, and the counters. Runs on local nodes (process control).
//!
//! The tests run on a multi-threaded runtime because the harness' side
//! connections block; waits are bounded with `eventually` or a timeout,
//! and nothing asserts how long an operation took.

use quorumlock_testkit as support;

use std::future::pending;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use quorumlock::{Error, LossKind, LostReason, Redlock, Renewal};
use support::{eventually, unique, Cluster, Direction, NodeOptions};

const MS: Duration = Duration::from_millis(1);
/// Short enough that several renewals happen in a test, long against the
/// 100 ms node timeout of the harness.
const TTL: Duration = Duration::from_millis(1500);
/// Upper bound for anything that should happen "soon".
const SOON: Duration = Duration::from_secs(5);
/// The extension scripts, as another client's `EVAL` loads them.
const EXTEND_LUA: &str = include_str!("../src/node/lua/extend.lua");

/// Every command the client sent to any node so far.
fn commands(redlock: &Redlock) -> u64 {
    redlock.stats().nodes.iter().map(|n| n.commands).sum()
}

/// Waits for the signal, failing the test instead of hanging.
async fn fired(signal: &quorumlock::LostSignal) -> LossKind {
    tokio::time::timeout(SOON * 2, signal.lost())
        .await
        .expect("the signal fired in time")
}

/// Asserts that, once the keys are gone, the client sends nothing more
/// for this lock: no renewal outlives release or drop.
async fn assert_renewal_stopped(cluster: &Cluster, redlock: &Redlock, name: &str) {
    assert!(
        cluster.released(name.as_bytes(), SOON).await,
        "keys released: {:?}",
        cluster.values(name.as_bytes())
    );
    // Let the background release reach the last node.
    tokio::time::sleep(200 * MS).await;
    let before = commands(redlock);
    // Several renewal intervals (TTL / 3) and more than a TTL.
    tokio::time::sleep(TTL + TTL / 2).await;
    assert_eq!(
        commands(redlock),
        before,
        "a command was sent after the end"
    );
    assert_eq!(
        cluster.holders(name.as_bytes()),
        0,
        "keys stay gone: {:?}",
        cluster.values(name.as_bytes())
    );
}

struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

// ---------------------------------------------------------------- renewal

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewal_keeps_the_lock_held_for_several_ttls_then_release_ends_it() {
    let cluster = Cluster::local(5);
    let redlock = cluster.redlock().await;
    let name = unique("renew");
    let lock = redlock.acquire(&name, TTL).await.expect("acquire");
    let signal = lock.auto_renew(Renewal::default()).expect("auto_renew");
    let first_deadline = lock.deadline();

    // Three TTLs: without renewal the keys would be gone twice over.
    let until = Instant::now() + 3 * TTL;
    while Instant::now() < until {
        tokio::time::sleep(200 * MS).await;
        assert!(!signal.is_fired(), "{:?}", signal.reason());
        assert!(lock.validity() > Duration::ZERO);
    }
    assert!(lock.deadline() > first_deadline + TTL, "deadline moved on");
    assert_eq!(cluster.holders(name.as_bytes()), 5);
    let pttl: i64 = cluster.exec(0, redis::cmd("PTTL").arg(&name));
    assert!(pttl > 0, "PTTL {pttl}");
    let other = redlock.try_acquire(&name, TTL).await.expect_err("held");
    assert!(other.is_contended(), "{other}");
    let leases = redlock.stats().leases;
    assert!(leases.renewals >= 3, "{leases:?}");

    lock.release().await.expect("release");
    assert_eq!(signal.kind(), Some(LossKind::Released));
    assert_eq!(fired(&signal).await, LossKind::Released);
    assert_renewal_stopped(&cluster, &redlock, &name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewal_stops_when_the_lock_is_dropped() {
    let cluster = Cluster::local(5);
    let redlock = cluster.redlock().await;
    let name = unique("renew-drop");
    let lock = redlock.acquire(&name, TTL).await.expect("acquire");
    let signal = lock.auto_renew(Renewal::default()).expect("auto_renew");
    let waiter = tokio::spawn({
        let signal = signal.clone();
        async move { signal.lost().await }
    });
    tokio::time::sleep(TTL).await;
    assert!(!signal.is_fired());
    drop(lock);
    let kind = tokio::time::timeout(SOON, waiter)
        .await
        .expect("a waiter is woken by the drop")
        .expect("task");
    assert_eq!(kind, LossKind::Released);
    assert_renewal_stopped(&cluster, &redlock, &name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_majority_refusing_a_renewal_fires_lost_and_nothing_is_recreated() {
    let cluster = Cluster::local(5);
    let redlock = cluster.redlock().await;
    let name = unique("renew-lost");
    let lock = redlock.acquire(&name, TTL).await.expect("acquire");
    assert!(cluster.held_on(&name, 5, SOON).await);
    let signal = lock
        .auto_renew(Renewal::every(200 * MS))
        .expect("auto_renew");
    let token = signal.cancellation_token();
    // The keys vanish on three nodes (as after an early expiry there).
    for i in 0..3 {
        let _: () = cluster.exec(i, redis::cmd("DEL").arg(&name));
    }
    assert_eq!(fired(&signal).await, LossKind::Lost);
    assert!(token.is_cancelled());
    assert!(lock.is_lost());
    assert_eq!(lock.validity(), Duration::ZERO);
    match signal.reason() {
        Some(LostReason::Refused {
            refused, needed, ..
        }) => {
            assert_eq!((refused, needed), (3, 3));
        }
        other => panic!("{other:?}"),
    }
    let err = lock.extend(TTL).await.expect_err("stays lost");
    match &err {
        Error::Lost {
            reason: LostReason::AlreadyLost { earlier, .. },
            ..
        } => assert_eq!(earlier.kind(), LossKind::Lost, "{err}"),
        other => panic!("{other:?}"),
    }
    let values = cluster.values(name.as_bytes());
    assert!(
        values[..3].iter().all(Option::is_none),
        "renewal never re-creates a key: {values:?}"
    );
    assert_eq!(redlock.stats().leases.lost, 1);
    lock.release().await.expect("release");
    assert_eq!(signal.kind(), Some(LossKind::Lost), "a final kind stays");
    assert!(cluster.released(name.as_bytes(), SOON).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_majority_fires_uncertain_before_the_validity_ends_then_expired() {
    let mut cluster = Cluster::local(5);
    let redlock = cluster.redlock().await;
    let name = unique("renew-hung");
    let ttl = Duration::from_secs(2);
    let margin = 500 * MS;
    let lock = redlock.acquire(&name, ttl).await.expect("acquire");
    let signal = lock
        .auto_renew(Renewal::every(300 * MS).margin(margin))
        .expect("auto_renew");
    // One renewal gets through first.
    assert!(eventually(SOON, || redlock.stats().leases.renewals >= 1).await);
    for i in [0, 2, 4] {
        cluster.pause(i);
    }
    assert_eq!(fired(&signal).await, LossKind::Uncertain);
    let fired_at = signal.fired_at().expect("fired");
    // No renewal got through since the pause, so this is the deadline the
    // holder was working against when the signal fired.
    let deadline = lock.deadline();
    assert!(
        fired_at < deadline,
        "Uncertain must come before the validity ends"
    );
    eprintln!(
        "uncertain fired {:?} before the end of validity (margin {margin:?})",
        deadline - fired_at
    );
    match signal.reason() {
        Some(LostReason::RenewalLate { failures, .. }) => {
            assert!(failures.iter().all(|f| f.kind.is_timeout()), "{failures:?}");
        }
        other => panic!("{other:?}"),
    }
    // Renewal keeps trying; the validity runs out; the kind becomes final.
    assert!(
        eventually(SOON, || signal.kind() == Some(LossKind::Expired)).await,
        "{:?}",
        signal.kind()
    );
    assert_eq!(fired(&signal).await, LossKind::Uncertain, "first kind kept");
    assert!(lock.is_lost());
    let stats = redlock.stats();
    assert!(stats.leases.renewal_failures >= 1, "{:?}", stats.leases);
    assert_eq!((stats.leases.uncertain, stats.leases.expired), (1, 1));
    for i in [0, 2] {
        assert!(stats.nodes[i].timeouts >= 1, "{:?}", stats.nodes[i]);
    }
    for i in [0, 2, 4] {
        cluster.resume(i);
    }
    lock.release().await.expect("release");
    assert!(cluster.released(name.as_bytes(), SOON).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewal_survives_a_minority_outage() {
    let mut cluster = Cluster::local(5);
    let redlock = cluster.redlock().await;
    let name = unique("renew-minority");
    let lock = redlock.acquire(&name, TTL).await.expect("acquire");
    let signal = lock.auto_renew(Renewal::default()).expect("auto_renew");
    cluster.pause(1);
    cluster.kill(3);
    tokio::time::sleep(2 * TTL).await;
    assert!(!signal.is_fired(), "{:?}", signal.reason());
    assert!(lock.validity() > Duration::ZERO);
    cluster.resume(1);
    lock.release().await.expect("release");
}

// -------------------------------------------------------- node restarts

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewal_goes_on_through_a_node_restart_and_reaches_the_new_process() {
    let mut cluster = Cluster::local(5);
    let redlock = cluster.redlock().await;
    let name = unique("renew-restart");
    let lock = redlock.acquire(&name, TTL).await.expect("acquire");
    let signal = lock.auto_renew(Renewal::default()).expect("auto_renew");
    tokio::time::sleep(TTL / 2).await;
    tokio::task::block_in_place(|| cluster.restart(2));
    let answered = |r: &Redlock| {
        let n = &r.stats().nodes[2];
        n.extend.yes + n.extend.no
    };
    let before = answered(&redlock);
    tokio::time::sleep(2 * TTL).await;
    assert!(!signal.is_fired(), "{:?}", signal.reason());
    // The restarted node came back empty; a renewal confirmed on the
    // others repairs it with the holder's token (docs/repair.md).
    let holder = cluster.values(name.as_bytes())[0].clone();
    assert!(holder.is_some(), "held on node 0");
    assert!(
        eventually(SOON, || cluster.values(name.as_bytes())[2] == holder).await,
        "renewal repairs the restarted node: {:?}",
        cluster.values(name.as_bytes())
    );
    assert!(
        eventually(SOON, || answered(&redlock) >= before + 2).await,
        "later renewals reach the restarted node: {:?}",
        redlock.stats().nodes[2]
    );
    // Its first answer to the new process was "missing" (a no), then the
    // repair put the key back: held on all five.
    assert!(redlock.stats().nodes[2].extend.no >= 1);
    assert_eq!(cluster.holders(name.as_bytes()), 5);
    lock.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewal_keeps_the_key_fresh_on_a_restarted_persistent_node() {
    let mut cluster = Cluster::local_custom(
        5,
        &NodeOptions {
            aof: true,
            ..NodeOptions::default()
        },
    );
    let redlock = cluster.redlock().await;
    let name = unique("renew-aof");
    let lock = redlock.acquire(&name, TTL).await.expect("acquire");
    let signal = lock.auto_renew(Renewal::default()).expect("auto_renew");
    tokio::task::block_in_place(|| cluster.restart(2));
    // The key survived the restart (appendfsync always). Two TTLs later it
    // is still there only because renewals reached the new process.
    tokio::time::sleep(2 * TTL).await;
    assert!(!signal.is_fired(), "{:?}", signal.reason());
    let values = cluster.values(name.as_bytes());
    assert!(values[2].is_some(), "{values:?}");
    assert_eq!(values[2], values[0], "the same token");
    lock.release().await.expect("release");
    assert!(cluster.released(name.as_bytes(), SOON).await);
}

// ----------------------------------------------------------------- caps

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_renewal_count_cap_fires_limit_reached_and_the_lock_runs_out() {
    let cluster = Cluster::local(5);
    let redlock = cluster.redlock().await;
    let name = unique("cap-count");
    let lock = redlock.acquire(&name, TTL).await.expect("acquire");
    let signal = lock
        .auto_renew(Renewal::every(200 * MS).max_renewals(2))
        .expect("auto_renew");
    assert_eq!(fired(&signal).await, LossKind::LimitReached);
    assert!(
        matches!(
            signal.reason(),
            Some(LostReason::LimitReached { renewals: 2, .. })
        ),
        "{:?}",
        signal.reason()
    );
    assert!(
        lock.validity() > Duration::ZERO,
        "the last renewal's validity is still there"
    );
    assert_eq!(redlock.stats().leases.renewals, 2);
    // No more renewals: the keys expire with their TTL.
    assert!(
        cluster.released(name.as_bytes(), SOON).await,
        "{:?}",
        cluster.values(name.as_bytes())
    );
    assert!(eventually(SOON, || signal.kind() == Some(LossKind::Expired)).await);
    assert_eq!(redlock.stats().leases.renewals, 2);
    drop(lock);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hold_time_cap_fires_limit_reached() {
    let cluster = Cluster::local(5);
    let redlock = cluster.redlock().await;
    let name = unique("cap-time");
    let lock = redlock.acquire(&name, TTL).await.expect("acquire");
    let cap = 700 * MS;
    let signal = lock
        .auto_renew(Renewal::every(200 * MS).max_hold(cap))
        .expect("auto_renew");
    assert_eq!(fired(&signal).await, LossKind::LimitReached);
    match signal.reason() {
        Some(LostReason::LimitReached {
            held_for, renewals, ..
        }) => {
            assert!(held_for >= cap, "{held_for:?}");
            assert!(renewals >= 1, "{renewals}");
        }
        other => panic!("{other:?}"),
    }
    assert!(lock.validity() > Duration::ZERO);
    lock.release().await.expect("release");
    assert_eq!(signal.kind(), Some(LossKind::Released));
    assert!(cluster.released(name.as_bytes(), SOON).await);
}

#[tokio::test]
async fn settings_that_cannot_work_are_refused_before_anything_runs() {
    let cluster = Cluster::shared(3);
    let redlock = cluster.redlock().await;
    let name = unique("renew-bad");
    let lock = redlock.acquire(&name, TTL).await.expect("acquire");
    for bad in [
        Renewal::every(Duration::ZERO),
        Renewal::new().margin(TTL),
        Renewal::every(TTL),
    ] {
        let err = lock.auto_renew(bad.clone()).expect_err("refused");
        assert!(err.is_invalid_input(), "{bad:?}: {err}");
    }
    assert!(!lock.lost_signal().is_fired());
    let err: Result<(), Error> = redlock
        .lock(&name, TTL)
        .auto_renew(Renewal::every(Duration::ZERO))
        .run(|_| async { unreachable!("the work never runs") })
        .await;
    assert!(err.is_err(), "contended or invalid");
    lock.release().await.expect("release");

    let result: Result<(), Error> = redlock
        .lock(&name, TTL)
        .auto_renew(Renewal::every(Duration::ZERO))
        .run(|_| async { unreachable!("the work never runs") })
        .await;
    let err = result.expect_err("invalid");
    assert!(err.is_invalid_input(), "{err}");
    assert!(
        cluster.released(name.as_bytes(), SOON).await,
        "the lock taken for it was released"
    );
}

// --------------------------------------------- the signal without renewal

#[tokio::test]
async fn without_renewal_the_signal_fires_expired_when_validity_runs_out() {
    let cluster = Cluster::shared(5);
    let redlock = cluster.redlock().await;
    let name = unique("signal-expiry");
    let lock = redlock.acquire(&name, 400 * MS).await.expect("acquire");
    let signal = lock.lost_signal();
    let token = signal.cancellation_token();
    assert!(!signal.is_fired());
    tokio::time::timeout(SOON, token.cancelled())
        .await
        .expect("token cancelled at expiry");
    assert_eq!(fired(&signal).await, LossKind::Expired);
    let fired_at = signal.fired_at().expect("fired");
    assert!(
        fired_at >= lock.deadline(),
        "never before the validity ends"
    );
    assert!(lock.is_lost());
    drop(lock);
}

#[tokio::test]
async fn a_refused_extend_fires_lost() {
    let cluster = Cluster::shared(5);
    let redlock = cluster.redlock().await;
    let name = unique("signal-extend");
    let lock = redlock.acquire(&name, TTL).await.expect("acquire");
    let signal = lock.lost_signal();
    let token = signal.cancellation_token();
    for i in 0..3 {
        let _: () = cluster.exec(i, redis::cmd("SET").arg(&name).arg("someone-else"));
    }
    let err = lock.extend(TTL).await.expect_err("no quorum");
    assert!(err.is_lost(), "{err}");
    assert_eq!(signal.kind(), Some(LossKind::Lost));
    assert!(token.is_cancelled());
    let shown = signal.to_error().expect("fired").to_string();
    assert!(shown.contains("no longer held the token"), "{shown}");
    lock.release().await.expect("release");
    for i in 0..3 {
        let _: () = cluster.exec(i, redis::cmd("DEL").arg(&name));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extend_that_times_out_fires_uncertain() {
    let mut cluster = Cluster::local(5);
    let redlock = cluster.redlock().await;
    let name = unique("signal-extend-hung");
    let lock = redlock
        .acquire(&name, Duration::from_secs(10))
        .await
        .expect("acquire");
    let signal = lock.lost_signal();
    for i in [1, 2, 3] {
        cluster.pause(i);
    }
    let err = lock
        .extend(Duration::from_secs(10))
        .await
        .expect_err("no quorum");
    assert!(err.is_lost(), "{err}");
    assert_eq!(
        signal.kind(),
        Some(LossKind::Uncertain),
        "timeouts do not prove the keys gone"
    );
    assert!(lock.is_lost(), "but the lock is not counted on any more");
    for i in [1, 2, 3] {
        cluster.resume(i);
    }
    lock.release().await.expect("release");
    assert_eq!(signal.kind(), Some(LossKind::Released));
    assert!(cluster.released(name.as_bytes(), SOON).await);
}

// ------------------------------------------- the deadline after extend

/// Polls `fut` once, then drops it: a caller that gave up right after the
/// commands were handed to the connections. True when it was already done.
async fn poll_once_then_drop<F: std::future::Future>(fut: F) -> bool {
    let mut fut = std::pin::pin!(fut);
    futures::poll!(fut.as_mut()).is_ready()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_shortening_extend_never_reports_validity_beyond_the_keys() {
    let cluster = Cluster::shared(5);
    let redlock = cluster.redlock().await;
    let other = cluster.redlock().await;
    let name = unique("extend-drop-short");
    let lock = redlock
        .acquire(&name, Duration::from_secs(10))
        .await
        .expect("acquire");
    let deadline = lock.deadline();
    let short = 300 * MS;
    let ready = poll_once_then_drop(lock.extend(short)).await;
    eprintln!("extend({short:?}) done after one poll: {ready}");
    if !ready {
        assert_eq!(
            lock.deadline(),
            deadline,
            "an extension nobody confirmed moves nothing"
        );
    }
    // The dropped extend still reaches every node, and shortens no key
    // there: the keys outlive the validity the lock reports.
    assert!(redlock.settle(SOON).await, "the dropped extend landed");
    let left = lock.validity();
    for i in 0..cluster.len() {
        let pttl: i64 = cluster.exec(i, redis::cmd("PTTL").arg(&name));
        assert!(
            u128::try_from(pttl).unwrap_or(0) >= left.as_millis(),
            "node {i}: the key has {pttl} ms left, the lock reports {left:?}"
        );
    }
    let err = other.try_acquire(&name, TTL).await.expect_err("still ours");
    assert!(err.is_contended(), "{err}");
    assert!(!lock.is_lost());
    lock.release().await.expect("release");
    assert!(cluster.released(name.as_bytes(), SOON).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_lengthening_extend_keeps_the_old_deadline() {
    let mut cluster = Cluster::local(5);
    let redlock = cluster.proxied_builder().build().await.expect("build");
    let name = unique("extend-drop-long");
    let lock = redlock.acquire(&name, TTL).await.expect("acquire");
    let signal = lock.lost_signal();
    let deadline = lock.deadline();
    // Replies 5 ms late: the extension cannot be confirmed in one poll (a
    // local node may otherwise answer while the poll still runs).
    for p in cluster.proxies() {
        p.set(support::Fault::latency(5 * MS));
    }
    let ready = poll_once_then_drop(lock.extend(Duration::from_secs(30))).await;
    assert!(!ready, "one poll cannot have the replies of the nodes");
    assert_eq!(
        lock.deadline(),
        deadline,
        "an extension nobody confirmed never lengthens the validity"
    );
    assert!(lock.validity() <= TTL);
    // The longer PEXPIREs land, but the holder's lock still ends on time.
    assert_eq!(fired(&signal).await, LossKind::Expired);
    let fired_at = signal.fired_at().expect("fired");
    assert!(fired_at >= deadline, "never before the validity ends");
    assert_eq!(lock.deadline(), deadline);
    assert!(lock.is_lost());
    let pttl: i64 = cluster.exec(0, redis::cmd("PTTL").arg(&name));
    assert!(
        pttl > TTL.as_millis() as i64,
        "the key outlives the validity we reported (PTTL {pttl})"
    );
    lock.release().await.expect("release");
    assert!(cluster.released(name.as_bytes(), SOON).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewal_follows_a_shorter_ttl_set_by_extend() {
    let cluster = Cluster::shared(5);
    let redlock = cluster.redlock().await;
    let other = cluster.redlock().await;
    let name = unique("renew-after-extend");
    // Renewal is set up for a third of 6 s; the extend cuts the TTL to 1.5 s.
    let lock = redlock.acquire(&name, 4 * TTL).await.expect("acquire");
    let signal = lock.auto_renew(Renewal::default()).expect("auto_renew");
    lock.extend(TTL).await.expect("extend");
    let before = redlock.stats().leases.renewals;
    // Five of the new TTLs, past the 6 s the keys had before the extend
    // (which shortens no key): only renewal at the new cadence keeps the
    // lock.
    let until = Instant::now() + 5 * TTL;
    while Instant::now() < until {
        tokio::time::sleep(200 * MS).await;
        assert!(!signal.is_fired(), "{:?}", signal.reason());
        let err = other.try_acquire(&name, TTL).await.expect_err("still ours");
        assert!(err.is_contended(), "{err}");
    }
    let renewals = redlock.stats().leases.renewals - before;
    assert!(renewals >= 5, "{renewals} renewals in five TTLs");
    eprintln!("{renewals} renewals in five of the new TTLs");
    assert!(lock.validity() <= TTL, "renewed with the new TTL");
    let pttl: i64 = cluster.exec(0, redis::cmd("PTTL").arg(&name));
    assert!(
        pttl > 0 && pttl <= TTL.as_millis() as i64,
        "the nodes were renewed with the new TTL (PTTL {pttl})"
    );
    lock.release().await.expect("release");
    assert_eq!(signal.kind(), Some(LossKind::Released));
    assert!(cluster.released(name.as_bytes(), SOON).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_shortening_extend_a_refused_renewal_fires_before_the_new_deadline() {
    let cluster = Cluster::shared(5);
    let redlock = cluster.redlock().await;
    let name = unique("renew-after-extend-lost");
    let lock = redlock.acquire(&name, 4 * TTL).await.expect("acquire");
    let signal = lock.auto_renew(Renewal::default()).expect("auto_renew");
    lock.extend(TTL).await.expect("extend");
    assert!(cluster.held_on(&name, 5, SOON).await);
    let deadline = lock.deadline();
    for i in 0..3 {
        let _: () = cluster.exec(i, redis::cmd("DEL").arg(&name));
    }
    assert_eq!(
        fired(&signal).await,
        LossKind::Lost,
        "{:?}",
        signal.reason()
    );
    let fired_at = signal.fired_at().expect("fired");
    assert!(
        fired_at < deadline,
        "fired {:?} after the validity the extend left",
        fired_at - deadline
    );
    eprintln!(
        "lost fired {:?} before the new deadline",
        deadline - fired_at
    );
    lock.release().await.expect("release");
    assert!(cluster.released(name.as_bytes(), SOON).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_shortening_extend_a_hung_majority_fires_uncertain_before_the_new_deadline() {
    let mut cluster = Cluster::local(5);
    let redlock = cluster.redlock().await;
    let name = unique("renew-after-extend-hung");
    let lock = redlock.acquire(&name, 4 * TTL).await.expect("acquire");
    let signal = lock.auto_renew(Renewal::default()).expect("auto_renew");
    lock.extend(TTL).await.expect("extend");
    let deadline = lock.deadline();
    for i in [0, 2, 4] {
        cluster.pause(i);
    }
    assert_eq!(fired(&signal).await, LossKind::Uncertain);
    let fired_at = signal.fired_at().expect("fired");
    let deadline = deadline.max(lock.deadline());
    assert!(
        fired_at < deadline,
        "Uncertain fired {:?} after the validity the extend left",
        fired_at - deadline
    );
    eprintln!(
        "uncertain fired {:?} before the end of validity",
        deadline - fired_at
    );
    for i in [0, 2, 4] {
        cluster.resume(i);
    }
    lock.release().await.expect("release");
    assert!(cluster.released(name.as_bytes(), SOON).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_signal_without_renewal_follows_a_deadline_moved_by_extend() {
    let cluster = Cluster::shared(5);
    let redlock = cluster.redlock().await;
    let name = unique("signal-after-extend");
    let lock = redlock
        .acquire(&name, Duration::from_secs(10))
        .await
        .expect("acquire");
    let signal = lock.lost_signal();
    // The token's task is now waiting for the 10 s deadline.
    let token = signal.cancellation_token();
    tokio::time::sleep(50 * MS).await;
    lock.extend(400 * MS).await.expect("extend");
    let deadline = lock.deadline();
    tokio::time::timeout(SOON, token.cancelled())
        .await
        .expect("the token is cancelled at the new deadline, not the old one");
    assert_eq!(signal.kind(), Some(LossKind::Expired));
    let fired_at = signal.fired_at().expect("fired");
    assert!(fired_at >= deadline, "never before the validity ends");
    lock.release().await.expect("release");
    assert!(cluster.released(name.as_bytes(), SOON).await);
}

/// The extension that is sent after the dropped shorter one.
#[derive(Debug, Clone, Copy)]
enum Later {
    /// `extend(60 s)`.
    Extend,
    /// The first renewal (the lock's TTL), started right after the drop.
    Renewal,
}

/// Two extensions of one lock over `resources` reach every node in the
/// opposite order to the one they were sent in: a shorter one that the
/// caller dropped, retried as `EVAL` after a `NOSCRIPT`, lands after a
/// longer one (`later`) that a majority confirmed. Returns, per node, the
/// lowest time left of the lock's keys there, read after everything
/// landed, and the lock's validity, read before.
async fn late_short_extend_after_a_long_one(
    cluster: &Cluster,
    redlock: &Redlock,
    resources: &[String],
    later: Later,
) -> (Vec<Duration>, Duration) {
    let (ttl, short) = match later {
        Later::Extend => (Duration::from_secs(30), Duration::from_secs(8)),
        Later::Renewal => (Duration::from_secs(9), Duration::from_secs(3)),
    };
    let lock = redlock
        .lock_all(resources, ttl)
        .acquire()
        .await
        .expect("acquire");
    let proxies = cluster.proxies();
    let queued = || -> Vec<u64> {
        proxies
            .iter()
            .map(|p| p.queued(Direction::Replies))
            .collect()
    };
    let grew = |before: &[u64]| {
        let now = queued();
        now.iter().zip(before).all(|(n, b)| n > b)
    };
    // The nodes forget their scripts (a restart, `SCRIPT FLUSH`), and the
    // replies are held on the way back.
    for i in 0..cluster.len() {
        let _: () = cluster.exec(i, redis::cmd("SCRIPT").arg("FLUSH"));
    }
    for p in &proxies {
        p.hold(Direction::Replies);
    }
    // The shorter extension: its `EVALSHA` meets `NOSCRIPT` on every node;
    // the caller gives up before the answer comes back. The `EVAL` that
    // follows a `NOSCRIPT` still goes out, in the background, once the
    // answer arrives.
    let before = queued();
    tokio::select! {
        r = lock.extend(short) => panic!("answered while held: {r:?}"),
        seen = eventually(SOON, || grew(&before)) => assert!(seen, "NOSCRIPT never came"),
    }
    // Meanwhile another client's `EVAL` loads the script again.
    for i in 0..cluster.len() {
        let _: String = cluster.exec(i, redis::cmd("SCRIPT").arg("LOAD").arg(EXTEND_LUA));
    }
    // The longer extension: its `EVALSHA` now runs on every node, before
    // the shorter one's `EVAL`, which is only sent once its `NOSCRIPT` is
    // read.
    let before = queued();
    match later {
        Later::Extend => {
            let long = lock.extend(Duration::from_secs(60));
            tokio::pin!(long);
            tokio::select! {
                r = &mut long => panic!("answered while held: {r:?}"),
                seen = eventually(SOON, || grew(&before)) => assert!(seen, "the extend never ran"),
            }
            for p in &proxies {
                p.release(Direction::Replies);
            }
            let left = tokio::time::timeout(SOON, long)
                .await
                .expect("the long extend answered")
                .expect("the long extend was confirmed");
            eprintln!("extend(60s) confirmed with {left:?} left");
        }
        Later::Renewal => {
            let signal = lock.auto_renew(Renewal::default()).expect("auto_renew");
            assert!(
                eventually(SOON, || grew(&before)).await,
                "the renewal never ran"
            );
            for p in &proxies {
                p.release(Direction::Replies);
            }
            assert!(
                eventually(SOON, || redlock.stats().leases.renewals >= 1).await,
                "the renewal was confirmed: {:?}",
                signal.reason()
            );
        }
    }
    assert!(
        redlock.settle(SOON).await,
        "the shorter extension's EVAL never finished"
    );
    let validity = lock.validity();
    let pttls = (0..cluster.len())
        .map(|i| {
            resources
                .iter()
                .map(|r| {
                    let ms: i64 = cluster.exec(i, redis::cmd("PTTL").arg(r));
                    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
                })
                .min()
                .expect("a resource")
        })
        .collect();
    lock.release().await.expect("release");
    for r in resources {
        assert!(cluster.released(r.as_bytes(), SOON).await);
    }
    (pttls, validity)
}

/// A dropped shorter extension that reaches the nodes after a later,
/// longer one a majority confirmed — `extend` or a renewal, one resource
/// or several — must leave the lock's validity covered by a majority of
/// its keys. The reorder here is a `NOSCRIPT` retry; a command waiting
/// for a connection being opened is another.
///
/// Before extensions stopped shortening keys, every node's key was left
/// with the short TTL (8 s) while the lock reported about 60 s: `0 of 3
/// nodes`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_shortening_extend_never_cuts_a_later_confirmed_one_short() {
    let mut cluster = Cluster::local(3);
    let redlock = cluster
        .proxied_builder()
        // Room for the held replies on a loaded machine.
        .node_timeout(Duration::from_secs(2))
        .build()
        .await
        .expect("build");
    let one = || vec![unique("extend-order")];
    let two = || vec![unique("extend-order-a"), unique("extend-order-b")];
    for (resources, later) in [
        (one(), Later::Extend),
        (two(), Later::Extend),
        (one(), Later::Renewal),
    ] {
        let (pttls, validity) =
            late_short_extend_after_a_long_one(&cluster, &redlock, &resources, later).await;
        eprintln!("{later:?} {resources:?}: keys left {pttls:?}, validity {validity:?}");
        // A key read after the validity was read, with a second to spare
        // for the time between the reads: the old behaviour is 5 to 50 s
        // off.
        let covering = pttls
            .iter()
            .filter(|&&left| left + Duration::from_secs(1) >= validity)
            .count();
        assert!(
            covering >= 2,
            "{later:?} {resources:?}: the lock reports {validity:?} of validity, but only \
             {covering} of 3 nodes keep its keys that long: {pttls:?}"
        );
    }
}

// ------------------------------------------------------- scoped locking

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_lock_returns_the_output_renews_meanwhile_and_releases() {
    let cluster = Cluster::local(5);
    let redlock = cluster.redlock().await;
    let name = unique("scoped-ok");
    let (inner, inner_name) = (redlock.clone(), name.clone());
    let out = redlock
        .lock(&name, TTL)
        .run(|signal| async move {
            // Longer than the TTL: only renewal keeps the lock.
            tokio::time::sleep(2 * TTL).await;
            assert!(!signal.is_fired());
            assert!(signal.validity() > Duration::ZERO);
            let err = inner.try_acquire(&inner_name, TTL).await.expect_err("held");
            assert!(err.is_contended(), "{err}");
            42
        })
        .await
        .expect("with_lock");
    assert_eq!(out, 42);
    assert!(redlock.stats().leases.renewals >= 2);
    assert_renewal_stopped(&cluster, &redlock, &name).await;
}

#[tokio::test]
async fn with_lock_releases_when_the_work_returns_an_error() {
    let cluster = Cluster::shared(5);
    let redlock = cluster.redlock().await;
    let name = unique("scoped-err");
    let out = redlock
        .lock(&name, TTL)
        .run(|_| async { Err::<(), _>("boom") })
        .await
        .expect("the lock was held throughout");
    assert_eq!(out, Err("boom"));
    assert!(cluster.released(name.as_bytes(), SOON).await);
    // Free again at once, not after a TTL.
    let lock = redlock.try_acquire(&name, TTL).await.expect("free");
    lock.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_lock_releases_when_the_work_panics() {
    let cluster = Cluster::local(5);
    let redlock = cluster.redlock().await;

    // Inside a spawned task: the panic ends up in the JoinError.
    let name = unique("scoped-panic-task");
    let (r, n) = (redlock.clone(), name.clone());
    let joined = tokio::spawn(async move {
        r.lock(&n, TTL)
            .run(|_| async { panic!("work failed") })
            .await
    })
    .await;
    assert!(joined.expect_err("panicked").is_panic());
    assert!(
        cluster.released(name.as_bytes(), SOON).await,
        "{:?}",
        cluster.values(name.as_bytes())
    );

    // Caught in place.
    let name = unique("scoped-panic-caught");
    let caught = std::panic::AssertUnwindSafe(
        redlock
            .lock(&name, TTL)
            .run(|_| async { panic!("work failed") }),
    )
    .catch_unwind()
    .await;
    assert!(caught.is_err());
    assert_renewal_stopped(&cluster, &redlock, &name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_lock_releases_when_the_caller_drops_it() {
    let cluster = Cluster::local(5);
    let redlock = cluster.redlock().await;
    let name = unique("scoped-drop");
    let dropped = Arc::new(AtomicBool::new(false));
    let flag = dropped.clone();
    let outcome = tokio::time::timeout(
        TTL,
        redlock.lock(&name, TTL).run(|_| async move {
            let _flag = SetOnDrop(flag);
            pending::<()>().await
        }),
    )
    .await;
    assert!(outcome.is_err(), "timed out");
    assert!(dropped.load(Ordering::SeqCst), "the work was dropped");
    assert_renewal_stopped(&cluster, &redlock, &name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_lock_cancels_the_work_when_the_lock_is_lost() {
    let cluster = Cluster::local(5);
    let redlock = cluster.redlock().await;
    let name = unique("scoped-lost");
    let dropped = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicBool::new(false));
    let (flag, go) = (dropped.clone(), started.clone());
    let r = redlock.clone();
    let n = name.clone();
    let task = tokio::spawn(async move {
        r.lock(&n, TTL)
            .auto_renew(Renewal::every(200 * MS))
            .run(|_| async move {
                let _flag = SetOnDrop(flag);
                go.store(true, Ordering::SeqCst);
                pending::<()>().await
            })
            .await
    });
    assert!(eventually(SOON, || started.load(Ordering::SeqCst)).await);
    // Someone else's token replaces ours on a majority.
    for i in 0..3 {
        let _: () = cluster.exec(i, redis::cmd("SET").arg(&name).arg("someone-else"));
    }
    let err = tokio::time::timeout(SOON, task)
        .await
        .expect("with_lock returned")
        .expect("task")
        .expect_err("lost");
    assert!(err.is_lost(), "{err}");
    assert!(
        matches!(
            &err,
            Error::Lost {
                reason: LostReason::Refused { refused: 3, .. },
                ..
            }
        ),
        "{err:?}"
    );
    assert!(dropped.load(Ordering::SeqCst), "the work was cancelled");
    assert!(
        eventually(SOON, || {
            let v = cluster.values(name.as_bytes());
            v[3].is_none() && v[4].is_none()
        })
        .await,
        "our remaining keys were released"
    );
    let values = cluster.values(name.as_bytes());
    for v in &values[..3] {
        assert_eq!(v.as_deref(), Some(&b"someone-else"[..]), "untouched");
    }
    for i in 0..3 {
        let _: () = cluster.exec(i, redis::cmd("DEL").arg(&name));
    }
}

#[tokio::test]
async fn with_lock_on_a_held_resource_is_contended_and_runs_nothing() {
    let cluster = Cluster::shared(5);
    let redlock = cluster.one_attempt_redlock().await;
    let name = unique("scoped-contended");
    let lock = redlock.acquire(&name, TTL).await.expect("acquire");
    let result: Result<(), Error> = redlock
        .lock(&name, TTL)
        .run(|_| async { unreachable!("not run") })
        .await;
    let err = result.expect_err("contended");
    assert!(err.is_contended(), "{err}");
    lock.release().await.expect("release");
}

// ------------------------------------------------ work under a held lock

/// The error of a job that can fail on its own or lose its lock: what
/// `try_run` hands back through one `?`.
#[derive(Debug)]
enum JobError {
    Lock(Error),
    Work(&'static str),
}

impl From<Error> for JobError {
    fn from(e: Error) -> Self {
        JobError::Lock(e)
    }
}

/// The state a service keeps: a configured request, cloned per job.
struct Jobs {
    request: quorumlock::LockRequest,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_lock_runs_work_in_a_spawned_task_and_releases() {
    let cluster = Cluster::local(5);
    let redlock = cluster.redlock().await;
    let name = unique("lock-run-spawned");
    // A request lives in application state and moves into tasks.
    let jobs = Arc::new(Jobs {
        request: redlock.lock(&name, TTL).retry(quorumlock::Retry::Times(0)),
    });
    let lock = jobs.request.clone().acquire().await.expect("acquire");
    let task = tokio::spawn(lock.run(|signal| async move {
        // Longer than the TTL: only the default renewal keeps the lock.
        tokio::time::sleep(2 * TTL).await;
        assert!(!signal.is_fired());
        7
    }));
    let err = jobs.request.clone().acquire().await.expect_err("held");
    assert!(err.is_contended(), "{err}");
    let out = tokio::time::timeout(4 * TTL, task)
        .await
        .expect("finished")
        .expect("task")
        .expect("held throughout");
    assert_eq!(out, 7);
    assert!(redlock.stats().leases.renewals >= 2);
    // Catches a `run` that forgets the lock instead of releasing it: the
    // keys would stay until their TTL.
    assert_renewal_stopped(&cluster, &redlock, &name).await;
}

#[tokio::test]
async fn try_run_releases_on_the_work_s_error_with_one_error_type() {
    let cluster = Cluster::shared(5);
    let redlock = cluster.redlock().await;
    let name = unique("lock-try-run-err");
    async fn job(redlock: &Redlock, name: &str) -> Result<u32, JobError> {
        let lock = redlock.acquire(name, TTL).await?;
        let out = lock
            .try_run(|_| async { Err(JobError::Work("boom")) })
            .await?;
        Ok(out)
    }
    let err = job(&redlock, &name).await.expect_err("the work failed");
    assert!(matches!(err, JobError::Work("boom")), "{err:?}");
    assert!(cluster.released(name.as_bytes(), SOON).await);
    // The request's form, and the lock's errors through the same `?`.
    let held = redlock.acquire(&name, TTL).await.expect("free again");
    let contended = redlock
        .lock(&name, TTL)
        .retry(quorumlock::Retry::Times(0))
        .try_run(|_| async { Ok::<_, JobError>(()) })
        .await;
    assert!(
        matches!(&contended, Err(JobError::Lock(e)) if e.is_contended()),
        "{contended:?}"
    );
    held.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_run_releases_when_its_task_is_aborted() {
    let cluster = Cluster::local(5);
    let redlock = cluster.redlock().await;
    let name = unique("lock-run-abort");
    let lock = redlock.acquire(&name, TTL).await.expect("acquire");
    let (dropped, started) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let (flag, go) = (dropped.clone(), started.clone());
    let task = tokio::spawn(lock.run(|_| async move {
        let _flag = SetOnDrop(flag);
        go.store(true, Ordering::SeqCst);
        pending::<()>().await
    }));
    assert!(eventually(SOON, || started.load(Ordering::SeqCst)).await);
    task.abort();
    assert!(task.await.expect_err("aborted").is_cancelled());
    assert!(dropped.load(Ordering::SeqCst), "the work was dropped");
    assert_renewal_stopped(&cluster, &redlock, &name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_run_cancels_the_work_when_the_lock_is_lost() {
    let cluster = Cluster::local(5);
    let redlock = cluster.redlock().await;
    let name = unique("lock-run-lost");
    let lock = redlock.acquire(&name, TTL).await.expect("acquire");
    let (dropped, started) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let (flag, go) = (dropped.clone(), started.clone());
    let task = tokio::spawn(lock.try_run(|_| async move {
        let _flag = SetOnDrop(flag);
        go.store(true, Ordering::SeqCst);
        pending::<Result<(), JobError>>().await
    }));
    assert!(eventually(SOON, || started.load(Ordering::SeqCst)).await);
    // Another token on a majority: the next renewal is refused.
    for i in 0..3 {
        let _: () = cluster.exec(i, redis::cmd("SET").arg(&name).arg("someone-else"));
    }
    // Catches a `run` that does not watch the signal: it would wait for
    // the work forever.
    let err = tokio::time::timeout(SOON, task)
        .await
        .expect("run returned")
        .expect("task")
        .expect_err("lost");
    assert!(
        matches!(
            &err,
            JobError::Lock(Error::Lost {
                reason: LostReason::Refused { refused: 3, .. },
                ..
            })
        ),
        "{err:?}"
    );
    assert!(dropped.load(Ordering::SeqCst), "the work was cancelled");
    for i in 0..3 {
        let _: () = cluster.exec(i, redis::cmd("DEL").arg(&name));
    }
}

#[tokio::test]
async fn lock_run_keeps_the_renewal_already_running() {
    let cluster = Cluster::shared(5);
    let redlock = cluster.redlock().await;
    let name = unique("lock-run-own-renewal");
    let lock = redlock.acquire(&name, TTL).await.expect("acquire");
    let _signal = lock
        .auto_renew(Renewal::every(100 * MS).max_renewals(1))
        .expect("auto_renew");
    // The cap of the running renewal applies: the work is stopped after
    // one renewal. Catches a `run` that always starts the default renewal
    // (no cap): the work would run to its end.
    let out = tokio::time::timeout(
        SOON,
        lock.run(|_| async { tokio::time::sleep(4 * TTL).await }),
    )
    .await
    .expect("stopped before the work's end");
    let err = out.expect_err("the cap ended it");
    assert!(
        matches!(
            &err,
            Error::Lost {
                reason: LostReason::LimitReached { renewals: 1, .. },
                ..
            }
        ),
        "{err:?}"
    );
    assert!(cluster.released(name.as_bytes(), SOON).await);
}

// ------------------------------------------------------------- counters

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_count_votes_timeouts_error_replies_renewals_and_latency() {
    let mut cluster = Cluster::local(5);
    let redlock = cluster.one_attempt_redlock().await;
    let start = redlock.stats();
    assert_eq!(start.nodes.len(), 5);
    assert_eq!(start.nodes[3].node, redlock.node_labels()[3]);

    let name = unique("stats");
    let lock = redlock.acquire(&name, TTL).await.expect("acquire");
    // Every node holds the key before the second attempt: a node whose
    // connection is still opening could otherwise take the second SET
    // first (both wait for that connection) and give the holder four.
    assert!(cluster.held_on(&name, 5, SOON).await);
    let err = redlock.try_acquire(&name, TTL).await.expect_err("held");
    assert!(err.is_contended());
    assert!(
        eventually(SOON, || {
            let s = redlock.stats();
            let yes: u64 = s.nodes.iter().map(|n| n.acquire.yes).sum();
            let no: u64 = s.nodes.iter().map(|n| n.acquire.no).sum();
            yes == 5 && no == 5
        })
        .await,
        "{:?}",
        redlock.stats()
    );
    let signal = lock
        .auto_renew(Renewal::every(200 * MS))
        .expect("auto_renew");
    assert!(eventually(SOON, || redlock.stats().leases.renewals >= 2).await);
    // A renewal returns at the quorum-th reply; the last nodes' replies
    // land a little later.
    assert!(
        eventually(SOON, || redlock
            .stats()
            .nodes
            .iter()
            .all(|n| n.extend.yes >= 2))
        .await,
        "{:?}",
        redlock.stats()
    );
    lock.release().await.expect("release");
    assert_eq!(signal.kind(), Some(LossKind::Released));
    assert!(
        eventually(SOON, || redlock
            .stats()
            .nodes
            .iter()
            .map(|n| n.release.yes)
            .sum::<u64>()
            == 5)
        .await
    );

    // An error reply: a hash where the lock key should be.
    let wrong = unique("stats-wrongtype");
    let _: () = cluster.exec(0, redis::cmd("HSET").arg(&wrong).arg("f").arg("v"));
    let lock = redlock.acquire(&wrong, TTL).await.expect("4 of 5 grant");
    lock.extend(TTL).await.expect("4 of 5 extend");
    lock.release().await.expect("release");
    assert!(
        eventually(SOON, || redlock.stats().nodes[0]
            .redis_error_count("WRONGTYPE")
            >= 2)
        .await,
        "{:?}",
        redlock.stats().nodes[0]
    );

    // A timeout: node 4 hangs.
    cluster.pause(4);
    let hung = unique("stats-timeout");
    let lock = redlock.acquire(&hung, TTL).await.expect("4 of 5 grant");
    assert!(
        eventually(SOON, || redlock.stats().nodes[4].timeouts >= 1).await,
        "{:?}",
        redlock.stats().nodes[4]
    );
    lock.release().await.expect("release");
    cluster.resume(4);

    let s = redlock.stats();
    for n in &s.nodes {
        assert!(n.latency.count > 0, "{n:?}");
        assert!(n.latency.max >= n.latency.quantile(0.5).expect("replies"));
        assert!(n.latency.mean().expect("replies") <= n.latency.max);
        assert_eq!(
            n.latency.buckets.iter().map(|b| b.1).sum::<u64>(),
            n.latency.count
        );
        assert!(n.commands >= n.latency.count, "{n:?}");
    }
    assert_eq!(s.nodes[1].failures(), 0, "{:?}", s.nodes[1]);
    let shown = format!("{s:?}");
    assert!(!shown.is_empty());
}
