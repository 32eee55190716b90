//! The randomized safety run with members that fail over: three Sentinel
//! groups (a master, a replica, three Sentinels each) as the members,
//! clients with durable votes on every replica (what `build()` requires of
//! a group) and restart quarantine of the largest key TTL, and a seeded
//! schedule of failovers on one group at a time — graceful (`SENTINEL
//! FAILOVER`), a crash (the master killed, restarted empty as a replica
//! once a replica was promoted), and a pause past the Sentinels'
//! down-after (the old master wakes up beside the promoted one and
//! answers as a master until it is demoted: the split-brain window).
//! Clients run the lock workload of `tests/safety.rs` (several clients, a
//! few resources, short TTLs, random holds, extensions, releases and
//! dropped calls) through the same checker: no two holders at once, no
//! stale write accepted, no lost update; acquires refused only while a
//! failover or its quarantine explains it; grants again after the last
//! failover; one of each kind per run.
//!
//! `QUORUMLOCK_SEED` replays a schedule (the failovers and each client's
//! choices; not the machine's timing); `QUORUMLOCK_SAFETY_SECS` (default
//! 12, longer when the first three failovers need it: about 18) and
//! `QUORUMLOCK_SAFETY_CLIENTS` (default 12) size the run.
//!
//! The negative control is the failover not treated as a restart: the
//! group's master behind one address (a proxy, re-pointed to the promoted
//! replica), clients without restart quarantine, as for a plain server.
//! A lock granted on the old master is missing on the new one and a second
//! client is granted it: the checker must flag it. The same failover with
//! the group as a member (its Sentinels' URL, restart quarantine) refuses
//! a second client, even one built after the failover.
//!
//! The tests of this file run one at a time: the randomized run's timing
//! is not shared with another test's processes.

use quorumlock_testkit as support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use quorumlock::{Builder, Durability, NodeFailureKind, Redlock, Retry};
use support::checker::{Checker, Figures, Outcome, PlainStore};
use support::failovers::FailoverRun;
use support::safety::{SafetyRun, Sizes};
use support::workload::Strategy;
use support::{report, unique, Cluster, Fault, GroupOptions, Proxy, SentinelGroup};

/// One test of this file at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn randomized_failovers_of_one_member_at_a_time_keep_mutual_exclusion() {
    let _serial = SERIAL.lock().await;
    let seed = support::seed("safety-members");
    // The lock workload of the other safety runs, grown by the same
    // environment.
    let base = SafetyRun::ci(
        seed,
        Sizes {
            secs: 12,
            resources: 3,
            long_resources: 48,
            long_clients: 96,
        },
    );
    let run = FailoverRun {
        seed,
        duration: base.duration,
        quiet: Duration::from_secs(3),
        // QUORUMLOCK_FAILOVER_GROUPS=1: one group as the only member.
        groups: std::env::var("QUORUMLOCK_FAILOVER_GROUPS")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(3),
        // Room for a promotion on a loaded machine: the Sentinels abort a
        // failover whose replica does not report master within this.
        group_options: GroupOptions {
            failover_timeout: Duration::from_secs(10),
            ..GroupOptions::default()
        },
        quarantine: base.workload.max_key_ttl() + Duration::from_millis(200),
        workload: base.workload,
    };
    let outcome = run.run(&Strategy::plain()).await;
    let line = run.line(&outcome);
    report(&line);
    let f = &outcome.figures;
    let overlaps: Vec<String> = outcome
        .overlaps
        .iter()
        .take(5)
        .map(support::checker::Overlap::describe)
        .collect();
    assert!(
        overlaps.is_empty(),
        "{line}\nfirst overlaps:\n{}",
        overlaps.join("\n"),
    );
    assert_eq!((f.stale_writes_accepted, f.lost_updates), (0, 0), "{line}");
    assert_eq!((f.other_errors, f.acquire_lost), (0, 0), "{line}");
    assert!(
        outcome.unexplained_outages.is_empty(),
        "refused as unavailable with no failover to explain it: {line}\n{}",
        outcome.unexplained_outages.join("\n"),
    );
    assert!(outcome.every_kind(), "a kind of failover missing: {line}");
    assert!(
        f.acquire_cancelled + f.extend_cancelled + f.release_cancelled > 0,
        "no call was cancelled: {line}"
    );
    // Grants after the last failover, or — when a promotion ran so late
    // that the failover outlasted the load — the fresh client's takes
    // after the run (`recovery`) show it.
    let load_end = outcome.started + outcome.duration;
    let outlasted = outcome.played.iter().any(|p| p.ended >= load_end);
    assert!(
        (outcome.grants_after_faults > 0 || outlasted) && outcome.recovery.is_some(),
        "not recovered after the last failover: {line}"
    );
    assert_eq!(outcome.leaked_keys, 0, "{line}");
    assert!(
        f.grants >= 50 && f.writes_accepted >= 25,
        "too little work: {line}"
    );
}

/// How member 0 (a Sentinel group) is given to the clients in a control,
/// and when the second client is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    /// One address (a proxy) in front of the master, re-pointed to the
    /// promoted replica after the failover; no restart quarantine, as for
    /// a plain server: the failover is not noticed.
    BehindOneAddress,
    /// The group itself (its Sentinels' URL), with durable votes on its
    /// replica and restart quarantine; the second client built after the
    /// failover (one built before it is `tests/members.rs`'s three-groups
    /// test).
    GroupFreshClient,
}

/// What a control saw.
struct Control {
    figures: Figures,
    second_granted: bool,
    /// B was refused with a member in restart quarantine.
    second_quarantined: bool,
}

/// The lock's TTL in a control: longer than a failover takes (about
/// 4 s: the Sentinels' down-after, their election, the switch).
const TTL: Duration = Duration::from_secs(8);

/// Member 0 is a Sentinel group, members 1 and 2 plain servers behind
/// proxies. The group's replica is stopped and its link cut, client A
/// takes the lock on members 0 and 1 (2 resets meanwhile) and reads the
/// counter; the master is killed and the replica (without A's key)
/// promoted; client B asks for the lock, and writes before A does.
async fn failover_under_a_held_lock(case: Case) -> Control {
    let node_timeout = Duration::from_millis(200);
    let started = Instant::now();
    let (mut group, mut plain) = tokio::task::block_in_place(|| {
        std::thread::scope(|s| {
            let group = s.spawn(|| SentinelGroup::start("control", &GroupOptions::default()));
            let plain = Cluster::local(2);
            (group.join().expect("the group starts"), plain)
        })
    });
    let addr = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
    let front = Proxy::start(addr(group.master_port()));
    let quarantine = (case != Case::BehindOneAddress).then_some(TTL);
    let mut urls = vec![match case {
        Case::BehindOneAddress => format!("redis://{}", front.addr()),
        Case::GroupFreshClient => group.url(),
    }];
    urls.extend(plain.proxied());
    // The group as a member needs durable votes on its replica.
    let durable = (case == Case::GroupFreshClient).then_some(Durability::Replicas(1));
    let build = || async {
        Builder::new(&urls)
            .restart_quarantine(quarantine)
            .durable_votes(durable)
            .node_timeout(node_timeout)
            .retry(Retry::Times(3))
            .retry_delay(Duration::from_millis(10), Duration::from_millis(50))
            .build()
            .await
            .expect("a client")
    };
    if let Some(q) = quarantine {
        // Uptime is read in whole seconds.
        let warmup = q + Duration::from_secs(1);
        tokio::time::sleep(warmup.saturating_sub(started.elapsed())).await;
    }
    let a = build().await;
    let early_b = match case {
        Case::GroupFreshClient => None,
        _ => {
            // B takes another lock: it has read the old master.
            let b = build().await;
            let warm = b.acquire(unique("warm"), TTL).await.expect("B warms up");
            warm.release().await.expect("B lets go");
            Some(b)
        }
    };

    let name = unique("failover-control");
    let checker = Checker::new(1, PlainStore::shared(1));
    // Behind one address, the master's writes stay on the master; the
    // group waits for its replica.
    let replicas = match case {
        Case::BehindOneAddress => tokio::task::block_in_place(|| group.cut_replicas()),
        Case::GroupFreshClient => Vec::new(),
    };
    plain.proxy(1).set(Fault::Reset);
    let lock_a = a
        .acquire(&name, TTL)
        .await
        .expect("A takes members 0 and 1");
    // A's SET to member 2 waits for a connection until its node timeout;
    // healing before that would deliver it.
    tokio::time::sleep(node_timeout * 2).await;
    plain.heal_proxies();
    let on_master: Option<String> = redis::cmd("GET")
        .arg(&name)
        .query(&mut group.conn(group.master_port()))
        .expect("GET on the master");
    let values = plain.values(name.as_bytes());
    assert!(
        on_master.is_some() && values[0].is_some() && values[1].is_none(),
        "A holds the master and member 1 only: {on_master:?} {values:?}"
    );
    let mut held_a = checker.granted(0, 0, None, Instant::now(), lock_a.deadline());
    let (read, value_a) = held_a.read(|| !lock_a.validity().is_zero());
    assert_eq!(read, Outcome::Accepted);

    let failover_start = Instant::now();
    let promoted = tokio::task::block_in_place(|| {
        let old = group.kill_master();
        for port in replicas {
            group.resume_data(port);
        }
        group.await_promotion(old)
    });
    front.handle().redirect(addr(promoted));
    let failover = failover_start.elapsed();
    let b: Redlock = match early_b {
        Some(b) => b,
        None => build().await,
    };
    let mut second_quarantined = false;
    let second_granted = match b.acquire(&name, TTL).await {
        Ok(lock_b) => {
            support::safety::second_holder(&checker, lock_b, None).await;
            true
        }
        Err(e) => {
            assert!(e.is_contended() || e.is_unavailable(), "B: {e}");
            second_quarantined = e
                .node_failures()
                .iter()
                .any(|f| matches!(f.kind, NodeFailureKind::Quarantined { .. }));
            false
        }
    };
    held_a.write(value_a + 1, || !lock_a.validity().is_zero());
    held_a.stop();
    let _ = lock_a.release().await;
    let control = Control {
        figures: checker.figures(),
        second_granted,
        second_quarantined,
    };
    let f = &control.figures;
    report(&format!(
        "negative-control failover {case:?}: failover={:.0}ms second_granted={} second_quarantined={} overlaps={} \
         lost_updates={} stale_writes_accepted={} longest_overlap={:.0}ms flagged={}",
        failover.as_secs_f64() * 1e3,
        control.second_granted,
        control.second_quarantined,
        f.overlaps,
        f.lost_updates,
        f.stale_writes_accepted,
        f.longest_overlap.as_secs_f64() * 1e3,
        f.overlaps > 0,
    ));
    control
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn negative_control_a_failover_not_treated_as_a_restart_is_flagged() {
    let _serial = SERIAL.lock().await;
    let control = failover_under_a_held_lock(Case::BehindOneAddress).await;
    assert!(control.second_granted, "B must win members 0 and 2");
    let f = &control.figures;
    assert_eq!(f.grants, 2);
    assert_eq!(f.overlaps, 1, "the checker flags the double grant");
    assert_eq!(f.lost_updates, 1, "and the lost update");
    assert_eq!(f.stale_writes_accepted, 1, "and A's stale write");
}

/// A client that starts after the failover has never read the old master:
/// the promoted server has been up for long, but it was promoted since it
/// started, so its age counts from the client's first reading and it does
/// not vote while A's lock, granted on the old master, is still valid.
/// (Before that rule, it voted at once and C was granted A's lock.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_built_after_a_failover_keeps_the_promoted_master_out() {
    let _serial = SERIAL.lock().await;
    let control = failover_under_a_held_lock(Case::GroupFreshClient).await;
    assert!(
        !control.second_granted,
        "two holders: {:?}",
        control.figures
    );
}
