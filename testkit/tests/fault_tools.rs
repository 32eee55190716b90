//! The fault tools themselves: the proxy's faults, AOF across kill -9, early
//! expiry, the error injections, seeded schedules and the checker's own
//! arithmetic. Only lower bounds of time are asserted (a delay cannot come
//! early); how precise the delays are is for the benches.

use quorumlock_testkit as support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use support::admission::{over_admissions, slot_overlaps};
use support::checker::{find_overlaps, Checker, FencedStore, Grant, Outcome, PlainStore};
use support::failovers;
use support::nemesis::{Action, Failover, Limits, Schedule};
use support::{unique, Cluster, Direction, Fault, NodeOptions};

fn connect(url: &str) -> redis::RedisResult<redis::Connection> {
    let c = redis::Client::open(url)?.get_connection_with_timeout(Duration::from_secs(2))?;
    c.set_read_timeout(Some(Duration::from_secs(2)))?;
    Ok(c)
}

fn ping(c: &mut redis::Connection) -> redis::RedisResult<String> {
    redis::cmd("PING").query(c)
}

#[test]
fn latency_is_added_to_each_round_trip() {
    let mut cluster = Cluster::local(1);
    let url = cluster.proxied().remove(0);
    let mut c = connect(&url).expect("through the proxy");
    assert_eq!(ping(&mut c).expect("ping"), "PONG");
    cluster
        .proxy(0)
        .set(Fault::latency(Duration::from_millis(20)));
    for _ in 0..3 {
        let t = Instant::now();
        ping(&mut c).expect("ping");
        assert!(
            t.elapsed() >= Duration::from_millis(20),
            "{:?}",
            t.elapsed()
        );
    }
    // Pipelined replies share one delay instead of queueing behind each other.
    let t = Instant::now();
    let mut pipe = redis::pipe();
    for _ in 0..50 {
        pipe.cmd("PING");
    }
    let replies: Vec<String> = pipe.query(&mut c).expect("pipeline");
    assert_eq!(replies.len(), 50);
    let pipelined = t.elapsed();
    assert!(pipelined >= Duration::from_millis(20), "{pipelined:?}");
    cluster.proxy(0).heal();
    ping(&mut c).expect("healed");
    let (up, down) = cluster.proxy(0).bytes();
    assert!(up > 0 && down > 0);
}

#[test]
fn blackhole_holds_traffic_and_heal_delivers_it() {
    let mut cluster = Cluster::local(1);
    let url = cluster.proxied().remove(0);
    let key = unique("blackhole");
    let mut c = connect(&url).expect("connect");
    c.set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    cluster.proxy(0).set(Fault::Blackhole);
    let r: redis::RedisResult<()> = redis::cmd("SET").arg(&key).arg("1").query(&mut c);
    assert!(r.is_err_and(|e| e.is_timeout()), "no answer while held");
    assert_eq!(cluster.holders(key.as_bytes()), 0, "request held too");
    cluster.proxy(0).heal();
    assert!(
        wait(|| cluster.holders(key.as_bytes()) == 1),
        "held request delivered on heal"
    );

    // One way: requests run, replies are held.
    let key2 = unique("blackhole-replies");
    let mut c = connect(&url).expect("connect");
    c.set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    cluster.proxy(0).set(Fault::BlackholeReplies);
    let r: redis::RedisResult<()> = redis::cmd("SET").arg(&key2).arg("1").query(&mut c);
    assert!(r.is_err_and(|e| e.is_timeout()));
    assert!(
        wait(|| cluster.holders(key2.as_bytes()) == 1),
        "the command ran"
    );
    cluster.proxy(0).heal();
}

/// The scripted faults: each direction of one link held and released step
/// by step, a second client's link untouched, a delay per direction.
#[test]
fn scripted_holds_are_per_direction_and_per_link() {
    let mut cluster = Cluster::local(1);
    let url = cluster.proxied().remove(0);
    let other = cluster.links();
    let link = cluster.proxy(0);

    // Requests held: the command waits at the proxy, counted as queued.
    let key = unique("held-request");
    let mut c = connect(&url).expect("connect");
    c.set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    link.hold(Direction::Requests);
    assert!(link.is_held(Direction::Requests) && !link.is_held(Direction::Both));
    let r: redis::RedisResult<()> = redis::cmd("SET").arg(&key).arg("1").query(&mut c);
    assert!(r.is_err_and(|e| e.is_timeout()), "no answer while held");
    assert_eq!(cluster.holders(key.as_bytes()), 0, "request held");
    assert!(
        link.queued(Direction::Requests) > 0,
        "the SET waits at the proxy"
    );
    // The other client's link to the same node is not held.
    let mut c2 = connect(&other.urls()[0]).expect("connect");
    let key2 = unique("other-link");
    let _: () = redis::cmd("SET")
        .arg(&key2)
        .arg("1")
        .query(&mut c2)
        .expect("other link flows");
    link.release(Direction::Requests);
    assert!(
        wait(|| cluster.holders(key.as_bytes()) == 1),
        "released request delivered"
    );
    assert!(
        wait(|| link.queued(Direction::Both) == 0),
        "nothing left queued"
    );

    // Replies held: the command runs, its reply waits until released.
    let key3 = unique("held-reply");
    let mut c = connect(&url).expect("connect");
    link.hold(Direction::Replies);
    c.set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let r: redis::RedisResult<()> = redis::cmd("SET").arg(&key3).arg("1").query(&mut c);
    assert!(r.is_err_and(|e| e.is_timeout()), "no answer while held");
    assert!(
        wait(|| cluster.holders(key3.as_bytes()) == 1),
        "the command ran"
    );
    assert!(link.queued(Direction::Replies) > 0, "its reply waits");
    link.release(Direction::Replies);
    assert!(
        wait(|| link.queued(Direction::Replies) == 0),
        "reply delivered"
    );

    // A delay on one direction only; heal ends every scripted fault.
    link.delay(Direction::Requests, Duration::from_millis(150));
    let mut c = connect(&url).expect("connect");
    let t = Instant::now();
    ping(&mut c).expect("delayed ping");
    assert!(
        t.elapsed() >= Duration::from_millis(150),
        "{:?}",
        t.elapsed()
    );
    link.hold(Direction::Both);
    link.heal();
    assert!(!link.is_held(Direction::Requests) && !link.is_held(Direction::Replies));
    ping(&mut c).expect("healed");
    let _: () = cluster.exec(0, redis::cmd("DEL").arg(&key).arg(&key2).arg(&key3));
}

#[test]
fn reset_breaks_connections_until_healed() {
    let mut cluster = Cluster::local(1);
    let url = cluster.proxied().remove(0);
    let mut c = connect(&url).expect("connect");
    ping(&mut c).expect("ping");
    cluster.proxy(0).set(Fault::Reset);
    assert!(wait(|| ping(&mut c).is_err()), "open connection reset");
    assert!(
        connect(&url).and_then(|mut c| ping(&mut c)).is_err(),
        "new connections reset while the fault stands"
    );
    assert!(cluster.proxy(0).refused() >= 1);
    cluster.proxy(0).heal();
    let mut c = connect(&url).expect("connect after heal");
    assert_eq!(ping(&mut c).expect("ping"), "PONG");
}

#[test]
fn slow_replies_trickle() {
    let mut cluster = Cluster::local(1);
    let url = cluster.proxied().remove(0);
    let key = unique("slow");
    let _: () = cluster.exec(0, redis::cmd("SET").arg(&key).arg(vec![b'x'; 4000]));
    let mut c = connect(&url).expect("connect");
    cluster.proxy(0).set(Fault::SlowReplies {
        bytes: 1000,
        every: Duration::from_millis(20),
    });
    let t = Instant::now();
    let v: Vec<u8> = redis::cmd("GET").arg(&key).query(&mut c).expect("get");
    assert_eq!(v.len(), 4000);
    assert!(
        t.elapsed() >= Duration::from_millis(60),
        "{:?}",
        t.elapsed()
    );
}

#[test]
fn a_killed_node_keeps_its_keys_with_aof_and_loses_them_without() {
    for aof in [true, false] {
        let mut cluster = Cluster::local_custom(
            1,
            &NodeOptions {
                aof,
                ..NodeOptions::default()
            },
        );
        let key = unique("aof");
        let _: () = cluster.exec(
            0,
            redis::cmd("SET").arg(&key).arg("v").arg("PX").arg(60_000),
        );
        cluster.kill(0);
        cluster.restart(0);
        let kept = cluster.values(key.as_bytes())[0].is_some();
        assert_eq!(kept, aof, "aof={aof}");
        if aof {
            let pttl: i64 = cluster.exec(0, redis::cmd("PTTL").arg(&key));
            assert!(pttl > 0, "the TTL survives too: {pttl}");
        }
    }
}

#[test]
fn early_expiry_hits_one_node_only() {
    let cluster = Cluster::local(3);
    let key = unique("early");
    for i in 0..3 {
        let _: () = cluster.exec(
            i,
            redis::cmd("SET").arg(&key).arg("v").arg("PX").arg(60_000),
        );
    }
    assert!(cluster.expire_early(1, key.as_bytes()));
    assert!(cluster.shorten_ttl(2, key.as_bytes(), Duration::from_millis(1)));
    assert!(wait(
        || cluster.values(key.as_bytes()) == vec![Some(b"v".to_vec()), None, None]
    ));
}

fn code<T: std::fmt::Debug>(r: redis::RedisResult<T>) -> String {
    let e = r.expect_err("an error reply");
    e.code().map(str::to_owned).unwrap_or_else(|| e.to_string())
}

#[test]
fn each_injection_gives_its_error_reply() {
    let cluster = Cluster::local(2);
    let key = unique("inject");
    let mut c = cluster.conn(0);

    cluster.plant_hash(0, key.as_bytes());
    let r: redis::RedisResult<i64> = redis::cmd("EVAL")
        .arg("return redis.call('GET', KEYS[1])")
        .arg(1)
        .arg(&key)
        .query(&mut c);
    assert!(code(r).contains("WRONGTYPE"));
    let _: () = cluster.exec(0, redis::cmd("DEL").arg(&key));

    let _: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg("return 1")
        .query(&mut c)
        .expect("load");
    cluster.flush_scripts(0);
    let r: redis::RedisResult<i64> = redis::cmd("EVALSHA")
        .arg("e0e1f9fabfc9d4800c877a703b823ac0578ff8db")
        .arg(0)
        .query(&mut c);
    assert_eq!(code(r), "NOSCRIPT");

    cluster.oom(0);
    let r: redis::RedisResult<()> = redis::cmd("SET").arg(&key).arg("v").query(&mut c);
    assert_eq!(code(r), "OOM");
    cluster.heal_oom(0);
    let _: () = redis::cmd("SET")
        .arg(&key)
        .arg("v")
        .query(&mut c)
        .expect("healed");

    let busy = cluster.busy(0);
    let r: redis::RedisResult<()> = redis::cmd("SET").arg(&key).arg("v").query(&mut c);
    assert_eq!(code(r), "BUSY");
    busy.heal();
    let _: () = redis::cmd("SET")
        .arg(&key)
        .arg("v")
        .query(&mut c)
        .expect("healed");

    cluster.require_pass(0, "sesame");
    let mut fresh = connect(&cluster.side_url(0)).expect("connect");
    assert_eq!(code(ping(&mut fresh)), "NOAUTH");
    let wrong = cluster
        .side_url(0)
        .replacen("redis://", "redis://:wrong@", 1);
    let e = connect(&wrong)
        .and_then(|mut c| ping(&mut c))
        .expect_err("wrong password");
    // The server answers WRONGPASS; redis-rs reports it as its own kind.
    assert_eq!(e.kind(), redis::ErrorKind::AuthenticationFailed, "{e}");
    cluster.heal_pass(0, "sesame");
    ping(&mut connect(&cluster.side_url(0)).expect("connect")).expect("healed");

    cluster.make_replica(0, cluster.side_addr(1));
    let r: redis::RedisResult<()> = redis::cmd("SET").arg(&key).arg("v").query(&mut c);
    assert_eq!(code(r), "READONLY");
    cluster.heal_replica(0);
    let _: () = redis::cmd("SET")
        .arg(&key)
        .arg("v")
        .query(&mut c)
        .expect("healed");
}

#[test]
fn schedules_replay_from_their_seed_and_keep_a_minority() {
    let limits = Limits {
        nodes: 5,
        span: Duration::from_secs(60),
        max_faulty: 2,
        max_ttl: Duration::from_millis(500),
        process_faults: true,
        clock_jumps: true,
        clients: 4,
    };
    let a = Schedule::generate(42, &limits);
    let b = Schedule::generate(42, &limits);
    let c = Schedule::generate(43, &limits);
    assert_eq!(format!("{:?}", a.episodes), format!("{:?}", b.episodes));
    assert_ne!(format!("{:?}", a.episodes), format!("{:?}", c.episodes));
    assert!(a.episodes.len() > 20, "{}", a.episodes.len());
    for s in [&a, &c] {
        assert!(s.max_concurrent() <= 2);
        for e in &s.episodes {
            assert!(e.end <= limits.span);
            if e.action == Action::Kill {
                assert!(e.end - e.start > limits.max_ttl, "delayed restart");
            }
            let same_node = s
                .episodes
                .iter()
                .filter(|o| o.node == e.node && o.start < e.end && e.start < o.end)
                .count();
            assert_eq!(same_node, 1, "one episode per node at a time");
        }
    }
    let kinds = a.counts();
    for k in [
        "kill",
        "pause",
        "latency",
        "blackhole",
        "reset",
        "clock_jump",
        "link_hold_requests",
        "link_hold_replies",
        "link_hold_both",
        "link_delay_",
    ] {
        assert!(kinds.contains(k), "{kinds}");
    }
}

#[test]
fn failover_schedules_replay_play_each_kind_first_and_one_at_a_time() {
    let kinds =
        |s: &Schedule| -> Vec<&str> { s.episodes.iter().map(|e| e.action.name()).collect() };
    for seed in 0..50 {
        let a = failovers::schedule(seed, 3, Duration::from_secs(5));
        let b = failovers::schedule(seed, 3, Duration::from_secs(5));
        assert_eq!(format!("{:?}", a.episodes), format!("{:?}", b.episodes));
        // A span too short for them still gets one of each kind.
        let mut first = kinds(&a);
        first.sort_unstable();
        assert_eq!(
            first,
            [
                "crash_failover",
                "failover",
                "pause_failover",
                "switch_failover"
            ]
        );
        let long = failovers::schedule(seed, 3, Duration::from_secs(60));
        assert!(long.episodes.len() > 5, "{}", long.counts());
        assert_eq!(kinds(&long)[..4], kinds(&a)[..]);
        assert_eq!(long.max_concurrent(), 1, "one member at a time");
        for pair in long.episodes.windows(2) {
            let gap = match pair[0].action {
                Action::Failover(Failover::Pause { split }) => split,
                _ => Duration::ZERO,
            };
            assert!(pair[1].start > pair[0].end + gap, "{pair:?}");
        }
        assert!(long.episodes.iter().all(|e| e.node < 3));
    }
}

fn grant(id: u64, resource: usize, from_ms: u64, to_ms: u64, t0: Instant) -> Grant {
    Grant {
        id,
        client: id as usize,
        resource,
        fence: None,
        requested_at: t0 + Duration::from_millis(from_ms),
        granted_at: t0 + Duration::from_millis(from_ms),
        end: t0 + Duration::from_millis(to_ms),
        extend: None,
        slots: Vec::new(),
    }
}

/// A holder of `slots` of semaphore `resource` from `from_ms` to `to_ms`.
fn permit(id: u64, resource: usize, slots: &[u32], from_ms: u64, to_ms: u64, t0: Instant) -> Grant {
    Grant {
        slots: slots.to_vec(),
        ..grant(id, resource, from_ms, to_ms, t0)
    }
}

#[test]
fn the_admission_sweep_counts_permits_against_the_bound() {
    let t0 = Instant::now();
    // L = 3: a holder of two and one of one, then a third that starts as
    // the first ends (half-open windows), another semaphore beside.
    let within = [
        permit(0, 0, &[0, 1], 0, 10, t0),
        permit(1, 0, &[2], 5, 20, t0),
        permit(2, 0, &[0], 10, 30, t0),
        permit(3, 0, &[1], 12, 30, t0),
        permit(4, 1, &[0, 1, 2], 0, 30, t0),
    ];
    let a = over_admissions(&within, 3);
    assert_eq!((a.max_concurrent, a.violations), (3, 0));
    assert!(slot_overlaps(&within).is_empty());
    // One more permit while three are held: flagged once, at its start,
    // with every holder of that instant.
    let mut over = within.to_vec();
    over.push(permit(5, 0, &[1], 6, 8, t0));
    let a = over_admissions(&over, 3);
    assert_eq!((a.max_concurrent, a.violations), (4, 1));
    assert_eq!(a.first[0].held, 4);
    assert_eq!(a.first[0].holders.len(), 3);
    assert_eq!(a.first[0].at, t0 + Duration::from_millis(6));
    let slots = slot_overlaps(&over);
    assert_eq!(slots.len(), 1, "slot 1 of semaphore 0, held by 0 and 5");
    assert_eq!((slots[0].first.id, slots[0].second.id), (0, 5));
    // A lock's grants (no slots) weigh one each.
    let locks = [grant(0, 0, 0, 10, t0), grant(1, 0, 5, 15, t0)];
    let a = over_admissions(&locks, 1);
    assert_eq!((a.max_concurrent, a.violations), (2, 1));
}

#[test]
fn the_checker_finds_overlaps_and_lost_updates() {
    let t0 = Instant::now();
    let disjoint = [
        grant(0, 0, 0, 10, t0),
        grant(1, 0, 10, 20, t0),
        grant(2, 1, 5, 15, t0),
    ];
    assert!(find_overlaps(&disjoint).is_empty());
    let nested = [
        grant(0, 0, 0, 100, t0),
        grant(1, 0, 10, 20, t0),
        grant(2, 0, 30, 40, t0),
        grant(3, 0, 100, 110, t0),
    ];
    let found = find_overlaps(&nested);
    assert_eq!(found.len(), 2, "both grants inside the long one");
    assert!(found.iter().all(|o| o.first.id == 0));

    // Two holders interleave a read–write on a plain store: one lost update,
    // one stale write accepted.
    let checker = Checker::new(1, Arc::new(PlainStore::new(1)));
    let now = Instant::now();
    let far = now + Duration::from_secs(60);
    let mut a = checker.granted(0, 0, None, now - Duration::from_millis(10), far);
    let mut b = checker.granted(1, 0, None, now - Duration::from_millis(5), far);
    let (_, va) = a.read(|| true);
    let (_, vb) = b.read(|| true);
    assert_eq!(b.write(vb + 1, || true), Outcome::Accepted);
    assert_eq!(a.write(va + 1, || true), Outcome::Accepted);
    assert_eq!(a.write(9, || false), Outcome::Expired);
    drop((a, b));
    let f = checker.figures();
    assert_eq!((f.grants, f.overlaps), (2, 1));
    assert_eq!((f.lost_updates, f.stale_writes_accepted), (1, 1));
    assert_eq!(f.expired_before_write, 1);

    // The same interleaving on a fenced store: the older token is refused.
    let checker = Checker::new(1, Arc::new(FencedStore::new(1)));
    let mut a = checker.granted(0, 0, Some(7), now - Duration::from_millis(10), far);
    let mut b = checker.granted(1, 0, Some(8), now - Duration::from_millis(5), far);
    let (_, va) = a.read(|| true);
    let (_, vb) = b.read(|| true);
    assert_eq!(b.write(vb + 1, || true), Outcome::Accepted);
    assert_eq!(a.write(va + 1, || true), Outcome::Refused);
    assert_eq!(a.read(|| true).0, Outcome::Refused);
    drop((a, b));
    let f = checker.figures();
    assert_eq!(f.overlaps, 1, "the windows still overlap");
    assert_eq!((f.lost_updates, f.stale_writes_accepted), (0, 0));
    assert_eq!(f.writes_refused, 1);
    let mut none = checker.granted(2, 0, None, Instant::now(), far);
    assert_eq!(
        none.read(|| true).0,
        Outcome::Refused,
        "no token, no access"
    );
}

/// Polls for up to 5 s.
fn wait(mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    check()
}

#[test]
fn the_checker_finds_duplicate_and_inverted_fences() {
    use support::checker::{fence_violations, FenceViolations};
    let t0 = Instant::now();
    let fenced = |id, fence, requested, granted| Grant {
        fence: Some(fence),
        requested_at: t0 + Duration::from_millis(requested),
        ..grant(id, 0, granted, granted + 5, t0)
    };
    // Increasing along grant order; a concurrent request may come back
    // with a lower token than a grant that returned meanwhile.
    let good = [fenced(0, 1, 0, 5), fenced(1, 3, 2, 20), fenced(2, 2, 4, 12)];
    assert_eq!(fence_violations(&good), FenceViolations::default());
    let duplicate = [fenced(0, 4, 0, 5), fenced(1, 4, 2, 30)];
    let found = fence_violations(&duplicate);
    assert_eq!(found.duplicates, 1);
    assert_eq!(found.inversions, 0, "B's request began before A returned");
    let inverted = [fenced(0, 4, 0, 5), fenced(1, 3, 6, 30)];
    assert_eq!(
        fence_violations(&inverted),
        FenceViolations {
            duplicates: 0,
            inversions: 1
        }
    );
    // Other resources and unfenced grants do not count.
    let mut other = fenced(1, 4, 6, 30);
    other.resource = 1;
    let mixed = [fenced(0, 4, 0, 5), other, grant(2, 0, 40, 45, t0)];
    assert_eq!(fence_violations(&mixed), FenceViolations::default());
}

#[test]
fn only_a_jump_inside_the_first_holders_time_explains_an_overlap() {
    use support::checker::{explained_by_jump, Overlap};
    let t0 = Instant::now();
    let at = |ms| t0 + Duration::from_millis(ms);
    let overlap = Overlap {
        first: Grant {
            requested_at: at(10),
            ..grant(0, 0, 20, 100, t0)
        },
        second: grant(1, 0, 60, 120, t0),
    };
    assert!(explained_by_jump(&overlap, &[(at(30), at(31))]));
    assert!(explained_by_jump(&overlap, &[(at(9), at(11))]));
    assert!(
        !explained_by_jump(&overlap, &[(at(2), at(5))]),
        "before A's keys"
    );
    assert!(
        !explained_by_jump(&overlap, &[(at(70), at(71))]),
        "after B's grant"
    );
    assert!(!explained_by_jump(&overlap, &[]));
}

#[tokio::test]
async fn a_shorter_extend_shortens_the_window_the_checker_records() {
    let checker = Checker::new(1, Arc::new(PlainStore::new(1)));
    let now = Instant::now();
    let long = now + Duration::from_secs(10);
    // A holds a 10 s lock, then moves its deadline to 50 ms from now and
    // keeps going for 150 ms before it stops.
    let mut a = checker.granted(0, 0, None, now, long);
    a.extended(Instant::now() + Duration::from_millis(50), true);
    tokio::time::sleep(Duration::from_millis(150)).await;
    a.stop();
    let end = checker.grants()[0].end;
    assert!(end < now + Duration::from_millis(120), "{:?}", end - now);
    // B, granted after A's new deadline, does not overlap it.
    drop(checker.granted(1, 0, None, Instant::now(), long));
    assert_eq!(checker.figures().overlaps, 0);
    assert_eq!(checker.figures().extend_shorter, 1);
}

#[tokio::test]
async fn cancel_plans_drop_after_their_polls_or_time() {
    use support::cancel::{self, Cancel};
    // Each poll is one await point: a future that yields ten times is
    // dropped after its third poll; the observer runs after each poll and
    // once more after the drop.
    let ticking = async {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        7
    };
    let polls = std::cell::Cell::new(0);
    let out = cancel::observed(Cancel::Polls(3), ticking, || polls.set(polls.get() + 1)).await;
    assert_eq!((out, polls.get()), (None, 4));
    let out = cancel::run(Cancel::Polls(50), async { 7 }).await;
    assert_eq!(out, Some(7));
    let slow = tokio::time::sleep(Duration::from_secs(5));
    let started = Instant::now();
    assert_eq!(
        cancel::run(Cancel::After(Duration::from_millis(20)), slow).await,
        None
    );
    assert!(started.elapsed() < Duration::from_secs(4));
    assert_eq!(cancel::run(Cancel::Never, async { 1 }).await, Some(1));
}

/// The TCP sockets this process holds open (listening ones aside) whose
/// local port is in `local` or whose remote port is in `remote`: sockets
/// are matched to the process by the inodes in `/proc/self/fd`, so a
/// socket the process has closed no longer counts, whatever state the
/// kernel keeps it in.
fn open_sockets(local: &[u16], remote: &[u16]) -> usize {
    let mut inodes = std::collections::HashSet::new();
    for entry in std::fs::read_dir("/proc/self/fd").expect("/proc/self/fd") {
        let Ok(target) = entry.and_then(|e| std::fs::read_link(e.path())) else {
            continue;
        };
        let target = target.to_string_lossy().into_owned();
        if let Some(inode) = target.strip_prefix("socket:[") {
            inodes.insert(inode.trim_end_matches(']').to_owned());
        }
    }
    let port = |addr: &str| {
        let hex = addr.rsplit(':').next().unwrap_or_default();
        u16::from_str_radix(hex, 16).unwrap_or_default()
    };
    let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
    table
        .lines()
        .skip(1)
        .map(|line| line.split_whitespace().collect::<Vec<_>>())
        .filter(|f| f.len() > 9 && f[3] != "0A" && inodes.contains(f[9]))
        .filter(|f| local.contains(&port(f[1])) || remote.contains(&port(f[2])))
        .count()
}

fn port_of(url: &str) -> u16 {
    url.trim_end_matches('/')
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("a port in the URL")
}

/// A regression test for a leak that stopped long fault runs: a
/// connection whose node closed it stayed open at the proxy (both of its
/// sockets) for as long as the client kept its end, and one whose client
/// left while the node was paused stayed open (CLOSE-WAIT) until the node
/// resumed. 1,000 connections end every way a fault run ends them; after
/// each round, with the node still paused and the clients that were cut
/// off still holding their ends, the proxy holds no more sockets than at
/// the start.
#[test]
fn the_proxy_holds_no_socket_of_a_finished_connection() {
    use std::io::{Read, Write};
    use std::net::TcpStream;

    let mut cluster = Cluster::local(1);
    let url = cluster.proxied().remove(0);
    let (proxy_port, node_port) = (port_of(&url), port_of(&cluster.urls()[0]));
    // The proxy's sockets: those it accepted, and its own to the node.
    let proxy_sockets = || open_sockets(&[proxy_port], &[node_port]);
    let start = proxy_sockets();
    let link = cluster.proxy(0);
    let connect = || {
        let s = TcpStream::connect(("127.0.0.1", proxy_port)).expect("connect to the proxy");
        s.set_read_timeout(Some(Duration::from_secs(2)))
            .expect("timeout");
        s
    };
    let ping = |s: &mut TcpStream| -> std::io::Result<()> {
        s.write_all(b"PING\r\n")?;
        let mut reply = [0u8; 7];
        s.read_exact(&mut reply)
    };
    let returned = |what: &str, round: usize| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while proxy_sockets() != start && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(
            proxy_sockets(),
            start,
            "round {round}, {what}: the proxy still holds sockets of finished connections"
        );
    };
    let mut connections = 0;
    for round in 0..10 {
        // A command, then the client closes.
        for _ in 0..40 {
            ping(&mut connect()).expect("ping");
        }
        // The client closes without a word.
        for _ in 0..10 {
            drop(connect());
        }
        // The client closes while its request is held; it goes on release.
        link.hold(Direction::Requests);
        for _ in 0..10 {
            connect().write_all(b"PING\r\n").expect("send");
        }
        link.release(Direction::Requests);
        // The proxy resets them.
        let mut open: Vec<TcpStream> = (0..10).map(|_| connect()).collect();
        for s in &mut open {
            ping(s).expect("ping");
        }
        link.set(Fault::Reset);
        link.heal();
        for s in &mut open {
            assert!(ping(s).is_err(), "reset");
        }
        drop(open);
        // The node closes them; the clients keep their ends open.
        let mut cut: Vec<TcpStream> = (0..20).map(|_| connect()).collect();
        for s in &mut cut {
            ping(s).expect("ping");
        }
        let _: redis::Value = cluster.exec(
            0,
            redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("normal"),
        );
        // The clients leave while the node is paused.
        cluster.pause(0);
        for _ in 0..10 {
            connect().write_all(b"PING\r\n").expect("send");
        }
        returned("node paused, clients cut off still open", round);
        cluster.resume(0);
        drop(cut);
        returned("every client gone", round);
        connections += 100;
    }
    assert_eq!(connections, 1000);
    // Every connection that carried a command reached the node.
    assert!(link.accepted() >= 700, "{}", link.accepted());
}

#[test]
fn epochs_must_rise_in_the_order_leaders_were_granted() {
    use support::leaders::epoch_inversions;
    let t0 = Instant::now();
    let leader = |id, election, from, to, epoch| Grant {
        fence: Some(epoch),
        ..grant(id, election, from, to, t0)
    };
    let rising = [
        leader(0, 0, 0, 10, 1),
        leader(1, 0, 10, 20, 4),
        leader(2, 1, 5, 15, 2),
        leader(3, 0, 20, 30, 5),
    ];
    assert_eq!(epoch_inversions(&rising), 0);
    // A later leader with an equal or smaller epoch, whether or not its
    // acquire overlapped the other's: each counts once.
    let mut wrong = rising.to_vec();
    wrong.push(leader(4, 0, 31, 40, 5));
    wrong.push(leader(5, 0, 41, 50, 3));
    assert_eq!(epoch_inversions(&wrong), 2);
}
