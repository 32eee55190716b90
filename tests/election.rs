//! Leader election on real nodes: one leader at a time; epochs strictly
//! increase across leaders, whether the last one resigned or crashed; a
//! read names a leader only where its lock backs its record (a crashed
//! leader's record is left behind, and a reader that trusted it would name
//! that leader); observers follow each change within a TTL, and a
//! resignation at once through the release announcement; a proclamation
//! changes the value in the same epoch; a leadership deleted on a majority
//! fires its lost signal; bad input leaves nothing on the nodes
//! (docs/election.md); `stats()` counts campaigns as elections, apart from
//! locks and permits.

use quorumlock_testkit as support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use quorumlock::{Leader, LossKind, Observed, Observer, Renewal, Retry};
use support::{unique, Cluster, Direction};

const TTL: Duration = Duration::from_secs(1);

/// The three keys of election `name`.
fn keys(name: &str) -> [Vec<u8>; 3] {
    let lock = format!("quorumlock:election:{{{name}}}");
    [
        lock.clone().into_bytes(),
        format!("{lock}:epoch").into_bytes(),
        format!("{lock}:leader").into_bytes(),
    ]
}

/// The next item of `observer`, waiting at most `limit`.
async fn observed(observer: &mut Observer, limit: Duration) -> Observed {
    tokio::time::timeout(limit, observer.next())
        .await
        .expect("the observer reported nothing in time")
        .expect("an observer never ends")
}

/// The next item of `observer`, waiting at most `limit`: who leads
/// (`None`: nobody), never unknown.
async fn next(observer: &mut Observer, limit: Duration) -> Option<Leader> {
    match observed(observer, limit).await {
        Observed::Leader(leader) => Some(leader),
        Observed::NoLeader => None,
        other => panic!("the observer reported {other:?}"),
    }
}

/// Campaigns for `name` in a runtime of its own, then "crashes": the
/// runtime stops (renewal with it) and the leadership is never released,
/// as when the process is killed. Returns the epoch it led in.
fn crash_after_leading(builder: quorumlock::Builder, name: String, value: &'static str) -> u64 {
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let leadership = rt.block_on(async move {
            let redlock = builder.build().await.expect("build");
            redlock
                .campaign(&name, TTL)
                .value(value)
                .lead()
                .await
                .expect("lead")
        });
        let epoch = leadership.epoch();
        rt.shutdown_background();
        // No release, ever: the process is gone.
        std::mem::forget(leadership);
        epoch
    })
    .join()
    .expect("crashing leader")
}

/// The record a reader that trusted it without its lock would report: the
/// newest `…:leader` record on any node, as (epoch, value).
fn trusting_read(cluster: &Cluster, name: &str) -> Option<(u64, Vec<u8>)> {
    cluster
        .values(&keys(name)[2])
        .into_iter()
        .flatten()
        .filter_map(|raw| {
            let mut fields = raw.splitn(5, |&b| b == b' ');
            let epoch = std::str::from_utf8(fields.next()?).ok()?.parse().ok()?;
            Some((epoch, fields.nth(3)?.to_vec()))
        })
        .max_by_key(|(epoch, _)| *epoch)
}

#[tokio::test]
async fn one_leader_at_a_time_among_three_contenders() {
    let cluster = Cluster::shared(3);
    let name = unique("election");
    let in_office = Arc::new(AtomicUsize::new(0));
    let epochs = Arc::new(Mutex::new(Vec::new()));
    let mut contenders = Vec::new();
    for c in 0..3 {
        let redlock = cluster.redlock().await;
        let (name, in_office, epochs) = (name.clone(), in_office.clone(), epochs.clone());
        contenders.push(tokio::spawn(async move {
            for _ in 0..3 {
                let leadership = redlock
                    .campaign(&name, TTL)
                    .value(format!("contender-{c}"))
                    .retry(Retry::Until(Duration::from_secs(30)))
                    .lead()
                    .await
                    .expect("lead");
                let others = in_office.fetch_add(1, Ordering::SeqCst);
                assert_eq!(others, 0, "two leaders at once");
                epochs.lock().unwrap().push(leadership.epoch());
                let read = redlock.leader(&name).await.expect("read");
                assert_eq!(
                    read,
                    Some(Leader {
                        epoch: leadership.epoch(),
                        value: format!("contender-{c}").into_bytes()
                    })
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
                assert!(!leadership.validity().is_zero());
                in_office.fetch_sub(1, Ordering::SeqCst);
                leadership.resign().await.expect("resign");
            }
        }));
    }
    for c in contenders {
        c.await.expect("contender");
    }
    let epochs = epochs.lock().unwrap().clone();
    assert_eq!(epochs.len(), 9);
    assert!(
        epochs.windows(2).all(|w| w[0] < w[1]),
        "epochs in the order of office: {epochs:?}"
    );
    let redlock = cluster.redlock().await;
    assert_eq!(redlock.leader(&name).await.expect("read"), None);
}

/// Every node restarts empty (no AOF: the epoch counters lost): the next
/// leader's epoch is still above the last one's, because a lost counter
/// starts again from the node's time in microseconds (docs/fencing.md, "A
/// counter that is lost"). A counter that started from 0 again gave the
/// next leader epoch 1, and a store checking epochs refused its writes.
#[tokio::test]
async fn epochs_stay_above_the_last_one_after_every_node_restarts_empty() {
    epochs_stay_above_the_last_one_after_every_node_restarts(false).await;
}

/// Every node restarts from a snapshot older than its epoch counter (no
/// AOF; a `dump.rdb` written after the first leader, as `SAVE` or a
/// replica's full sync writes one even under `save ""`): the next leader's
/// epoch is still above the last one's, because a campaign reads a counter
/// never below the node's time. Read as stored, the counters gave the next
/// leader an epoch already handed out, and a store refused its writes for
/// as long as it led.
#[tokio::test]
async fn epochs_stay_above_the_last_one_after_every_node_restarts_from_an_older_snapshot() {
    epochs_stay_above_the_last_one_after_every_node_restarts(true).await;
}

/// Three leaders one after another, a restart of every node (from a
/// snapshot taken after the first leader when `snapshot`), then one more
/// leader: its epoch is above every epoch before.
async fn epochs_stay_above_the_last_one_after_every_node_restarts(snapshot: bool) {
    let mut cluster = Cluster::local(3);
    let name = unique("election-full-restart");
    let mut last = 0;
    {
        let redlock = cluster.redlock().await;
        for value in ["a", "b", "c"] {
            let leader = redlock.campaign(&name, TTL).value(value).lead().await;
            let leader = leader.expect("lead");
            assert!(leader.epoch() > last, "{} after {last}", leader.epoch());
            last = leader.epoch();
            leader.resign().await.expect("resign");
            if snapshot && value == "a" {
                for i in 0..3 {
                    let _: () = cluster.exec(i, &redis::cmd("SAVE"));
                }
            }
        }
    }
    for i in 0..3 {
        cluster.restart(i);
    }
    if snapshot {
        for i in 0..3 {
            let kept: Option<u64> = cluster.exec(i, redis::cmd("GET").arg(&keys(&name)[1]));
            assert!(kept.is_some_and(|k| k < last), "node {i}: {kept:?}");
        }
    }
    let redlock = cluster.redlock().await;
    let leader = redlock.campaign(&name, TTL).value("d").lead().await;
    let leader = leader.expect("lead after the restart");
    assert!(
        leader.epoch() > last,
        "epoch {} after {last}",
        leader.epoch()
    );
    let read = redlock.leader(&name).await.expect("read");
    assert_eq!(read.map(|l| l.epoch), Some(leader.epoch()));
    leader.resign().await.expect("resign");
}

#[tokio::test]
async fn epochs_increase_across_a_resignation_and_a_crash() {
    let cluster = Cluster::shared(3);
    let name = unique("election");
    let redlock = cluster.redlock().await;

    let a = redlock
        .campaign(&name, TTL)
        .value("a")
        .lead()
        .await
        .expect("a");
    let epoch_a = a.epoch();
    a.resign().await.expect("resign");

    let epoch_b = crash_after_leading(cluster.builder(), name.clone(), "b");
    assert!(epoch_b > epoch_a, "{epoch_b} after {epoch_a}");
    // The crashed leader's lock lives on until its TTL: it still leads.
    let read = redlock.leader(&name).await.expect("read");
    assert_eq!(read.map(|l| l.epoch), Some(epoch_b));

    let started = Instant::now();
    let c = redlock
        .campaign(&name, TTL)
        .value("c")
        .retry(Retry::Until(Duration::from_secs(10)))
        .lead()
        .await
        .expect("c");
    assert!(c.epoch() > epoch_b, "{} after {epoch_b}", c.epoch());
    support::report(&format!(
        "election: next leader {:?} after a crash (TTL {TTL:?})",
        started.elapsed()
    ));
    c.resign().await.expect("resign");
}

/// The negative control of the read: after a crash the leader's record
/// stays on the nodes; a reader that trusts it reports the dead leader
/// forever, the read at quorum reports nobody once its lock expired.
#[tokio::test]
async fn a_crashed_leaders_record_is_not_read_once_its_lock_expired() {
    let cluster = Cluster::shared(3);
    let name = unique("election");
    let redlock = cluster.redlock().await;
    let epoch = crash_after_leading(cluster.builder(), name.clone(), "gone");
    assert!(
        cluster.released(&keys(&name)[0], 3 * TTL).await,
        "the crashed leader's lock expires"
    );
    assert_eq!(
        trusting_read(&cluster, &name),
        Some((epoch, b"gone".to_vec())),
        "the record is still there: a trusting reader names the dead leader"
    );
    assert_eq!(redlock.leader(&name).await.expect("read"), None);
}

#[tokio::test]
async fn observers_see_each_change_within_a_ttl() {
    let cluster = Cluster::shared(3);
    let name = unique("election");
    let redlock = cluster.redlock().await;
    let watcher = cluster.redlock().await;
    let mut observer = watcher.observe(&name);
    // A generous bound: one TTL for the change to show, plus slack for a
    // loaded machine.
    let limit = 3 * TTL;
    assert_eq!(next(&mut observer, limit).await, None, "nobody leads yet");

    let mut a = redlock
        .campaign(&name, TTL)
        .value("a:1")
        .lead()
        .await
        .expect("a");
    let seen = next(&mut observer, limit).await;
    assert_eq!(
        seen,
        Some(Leader {
            epoch: a.epoch(),
            value: b"a:1".to_vec()
        })
    );

    a.proclaim("a:2").await.expect("proclaim");
    let seen = next(&mut observer, limit).await;
    assert_eq!(
        seen,
        Some(Leader {
            epoch: a.epoch(),
            value: b"a:2".to_vec()
        })
    );

    a.resign().await.expect("resign");
    assert_eq!(next(&mut observer, limit).await, None);

    let epoch_b = crash_after_leading(cluster.builder(), name.clone(), "b");
    let seen = next(&mut observer, limit).await;
    assert_eq!(
        seen,
        Some(Leader {
            epoch: epoch_b,
            value: b"b".to_vec()
        })
    );
    // The crash shows once the lock expires: within a TTL of the last
    // renewal, and the observer within a third of a TTL after that.
    let started = Instant::now();
    assert_eq!(next(&mut observer, TTL + limit).await, None);
    support::report(&format!(
        "election: observer saw a crash after {:?} (TTL {TTL:?})",
        started.elapsed()
    ));
    // Dropped, the observer leaves no subscription (nor task) behind.
    let channel = [b"quorumlock:released:".as_slice(), &keys(&name)[0]].concat();
    let subscribed = |c: &Cluster| (0..3).map(|i| subscribers(c, i, &channel)).sum::<i64>();
    assert!(
        subscribed(&cluster) > 0,
        "the observer listens for releases"
    );
    drop(observer);
    assert!(watcher.settle(Duration::from_secs(2)).await);
    assert!(
        support::eventually(Duration::from_secs(3), || subscribed(&cluster) == 0).await,
        "subscriptions left after the observer was dropped"
    );
}

/// How many subscribers `channel` has on node `i`.
fn subscribers(cluster: &Cluster, i: usize, channel: &[u8]) -> i64 {
    let (_, n): (Vec<u8>, i64) = cluster.exec(i, redis::cmd("PUBSUB").arg("NUMSUB").arg(channel));
    n
}

#[tokio::test]
async fn a_campaign_without_retries_is_refused_while_another_leads() {
    let cluster = Cluster::shared(3);
    let name = unique("election");
    let redlock = cluster.redlock().await;
    let other = cluster.redlock().await;
    let leadership = redlock
        .campaign(&name, TTL)
        .value("first")
        .lead()
        .await
        .expect("lead");
    let e = other
        .campaign(&name, TTL)
        .value("second")
        .retry(Retry::Times(0))
        .lead()
        .await
        .expect_err("another process leads");
    assert!(e.is_contended(), "{e}");
    // The refusal names the election, not its key.
    let text = e.to_string();
    assert!(
        text.starts_with(&format!("election \"{name}\" is held by another owner: ")),
        "{text}"
    );
    assert!(!text.contains("quorumlock:election"), "{text}");
    let read = other.leader(&name).await.expect("read");
    assert_eq!(read.map(|l| l.value), Some(b"first".to_vec()));
    // Cancelled while waiting: nothing of the waiting campaign stays.
    let waiting = other.campaign(&name, TTL).lead();
    assert!(tokio::time::timeout(Duration::from_millis(300), waiting)
        .await
        .is_err());
    assert!(other.settle(Duration::from_secs(2)).await);
    let epoch = leadership.epoch();
    assert_eq!(
        other.leader(&name).await.expect("read").map(|l| l.epoch),
        Some(epoch)
    );
    leadership.resign().await.expect("resign");
    assert!(
        cluster
            .released(&keys(&name)[0], Duration::from_secs(2))
            .await
    );
}

/// An observer that loses the quorum says that who leads is unknown,
/// rather than naming the last leader as if it were read; when a majority
/// answers again it names the leader again. Fails on an observer that
/// skips failed reads (it keeps its last item: nothing comes while the
/// nodes are paused).
#[tokio::test]
async fn an_observer_reports_unknown_while_no_quorum_answers() {
    // A TTL long against the pause: the leader's lock outlives it, so the
    // same leader is named when the nodes come back.
    const LONG: Duration = Duration::from_secs(9);
    let mut cluster = Cluster::local(5);
    let name = unique("election-unknown");
    let redlock = cluster.redlock().await;
    let leadership = redlock.campaign(&name, LONG).lead().await.expect("lead");
    let epoch = leadership.epoch();
    let watcher = cluster.redlock().await;
    let mut observer = watcher.observe(&name);
    assert_eq!(
        next(&mut observer, LONG).await.map(|l| l.epoch),
        Some(epoch)
    );
    let paused = Instant::now();
    for i in [0, 2, 4] {
        cluster.pause(i);
    }
    match observed(&mut observer, LONG).await {
        Observed::Unknown { since } => assert!(since >= paused, "{since:?} before {paused:?}"),
        other => panic!("with 3 of 5 nodes paused: {other:?}"),
    }
    for i in [0, 2, 4] {
        cluster.resume(i);
    }
    assert_eq!(
        next(&mut observer, LONG).await.map(|l| l.epoch),
        Some(epoch),
        "the leader named again once a majority answers"
    );
    leadership.resign().await.expect("resign");
}

/// `stats()` counts campaigns as elections, apart from locks and permits:
/// a campaign won is a granted election acquire with its wait (the time to
/// be elected) and one election held; the resignation brings `held` back
/// to 0 and counts one hold (the leadership's length); a campaign refused
/// with `Retry::Times(0)` is a contended election acquire. Neither moves
/// `stats().locks` or `stats().permits`. Negative control: the campaign's
/// acquire counted as a lock's (the election keys passed to the retry loop
/// as a plain lock claim, as before elections were counted) fails the
/// first assertion on `locks`.
#[tokio::test]
async fn campaigns_are_counted_as_elections_not_locks_or_permits() {
    let cluster = Cluster::shared(3);
    let name = unique("election-stats");
    let redlock = cluster.redlock().await;
    let other = cluster.redlock().await;
    let untouched = |s: &quorumlock::LockStats| {
        (
            s.acquires,
            s.held,
            s.attempt_latency.count,
            s.wait.count,
            s.hold.count,
        )
    };
    let nothing = (quorumlock::Acquires::default(), 0, 0, 0, 0);

    let leadership = redlock.campaign(&name, TTL).lead().await.expect("lead");
    let s = redlock.stats();
    assert_eq!(
        untouched(&s.locks),
        nothing,
        "a campaign leaves the lock counters alone: {:?}",
        s.locks
    );
    assert_eq!(untouched(&s.permits), nothing, "{:?}", s.permits);
    let e = &s.elections;
    assert_eq!((e.acquires.granted, e.acquires.contended), (1, 0), "{e:?}");
    assert_eq!((e.held, e.wait.count, e.hold.count), (1, 1, 0), "{e:?}");
    assert!(e.attempt_latency.count >= 1, "{e:?}");

    let refused = other
        .campaign(&name, TTL)
        .retry(Retry::Times(0))
        .lead()
        .await
        .expect_err("another process leads");
    assert!(refused.is_contended(), "{refused}");
    let o = other.stats();
    assert_eq!(untouched(&o.locks), nothing, "{:?}", o.locks);
    assert_eq!(untouched(&o.permits), nothing, "{:?}", o.permits);
    let e = &o.elections;
    assert_eq!((e.acquires.granted, e.acquires.contended), (0, 1), "{e:?}");
    assert_eq!((e.held, e.wait.count, e.hold.count), (0, 1, 0), "{e:?}");

    leadership.resign().await.expect("resign");
    let s = redlock.stats();
    let e = &s.elections;
    assert_eq!((e.held, e.hold.count), (0, 1), "{e:?}");
    assert_eq!((e.acquires.granted, e.acquires.lost), (1, 0), "{e:?}");
    assert_eq!(untouched(&s.locks), nothing, "{:?}", s.locks);
    assert_eq!(untouched(&s.permits), nothing, "{:?}", s.permits);
}

/// With a 10 s TTL an observer reads every 3.3 s; a resignation is seen
/// in well under that through the release announcement. Negative control:
/// the same observer without announcements (fast hand-off off) has not
/// seen it after 1.5 s.
#[tokio::test]
async fn an_observer_sees_a_resignation_at_once_through_the_announcement() {
    let cluster = Cluster::shared(3);
    let long = Duration::from_secs(10);
    let redlock = cluster.redlock().await;
    for announced in [true, false] {
        let name = unique("election");
        let watcher = cluster
            .builder()
            .fast_handoff(announced)
            .build()
            .await
            .expect("build");
        let mut observer = watcher.observe(&name);
        assert_eq!(next(&mut observer, long).await, None);
        let leadership = redlock.campaign(&name, long).lead().await.expect("lead");
        let epoch = leadership.epoch();
        assert_eq!(
            next(&mut observer, long).await.map(|l| l.epoch),
            Some(epoch)
        );
        let resigned = Instant::now();
        leadership.resign().await.expect("resign");
        if announced {
            // Well inside the next read, a third of the TTL (3.3 s) after
            // the last one: only the announcement can explain it.
            assert_eq!(next(&mut observer, Duration::from_millis(1500)).await, None);
            support::report(&format!(
                "election: observer saw a resignation after {:?} (TTL {long:?})",
                resigned.elapsed()
            ));
        } else {
            let quick = tokio::time::timeout(Duration::from_millis(1500), observer.next()).await;
            assert!(
                quick.is_err(),
                "without announcements it waits for its next read"
            );
            assert_eq!(next(&mut observer, long).await, None);
        }
    }
}

/// An observer yields its first item only once its subscription to the
/// release announcements stands, so a resignation right after that item is
/// seen at once, also when the subscriber's connections are slow to open
/// (every request on the observer's links delayed 300 ms). With a 6 s TTL
/// the observer's next read comes 2 s after its last: a `None` within 1 s
/// of the resignation is the announcement's.
#[tokio::test]
async fn an_observer_sees_a_resignation_right_after_its_first_item() {
    let seen = resignation_seen(
        Duration::from_secs(6),
        |b| {
            b.node_timeout(Duration::from_secs(2))
                .connect_timeout(Duration::from_secs(5))
        },
        |link, _| link.delay(Direction::Requests, Duration::from_millis(300)),
        |_, _| {},
        Duration::from_secs(1),
    )
    .await;
    support::report(&format!(
        "election: a resignation right after the first item seen after {seen:?} (slow subscriber)"
    ));
}

/// A subscriber that comes up after the observer's first read may have
/// missed an announcement: the observer reads again once it stands. Here
/// the observer's subscribers cannot connect at first (new connections on
/// its links go to a closed port; the links already open keep working),
/// so its first item comes from a read after the wait for them; the
/// leader resigns while no subscriber stands, then the links take new
/// connections again. With a 15 s TTL the next read at the observer's
/// pace is 5 s after the first: a `None` within 2.5 s is the read made
/// when the subscribers stood. Fails on an observer that waits for its
/// pace instead.
#[tokio::test]
async fn an_observer_reads_again_when_a_late_subscriber_stands() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port");
    let seen = resignation_seen(
        Duration::from_secs(15),
        |b| b,
        |link, _| link.redirect(closed),
        |link, upstream| link.redirect(upstream),
        Duration::from_millis(2500),
    )
    .await;
    support::report(&format!(
        "election: a resignation unheard by a late subscriber read {seen:?} after it"
    ));
}

/// An election led with `ttl` by a client of its own, and an observer on a
/// client built by `configure` whose links (each with its node's address)
/// are faulted by `fault` before it starts. After its first item, that
/// leader, the leader resigns, `heal` runs on each link, and the observer
/// must report that nobody leads within `limit`: how long it took from
/// the resignation.
async fn resignation_seen(
    ttl: Duration,
    configure: impl FnOnce(quorumlock::Builder) -> quorumlock::Builder,
    fault: impl Fn(&support::FaultHandle, std::net::SocketAddr),
    heal: impl Fn(&support::FaultHandle, std::net::SocketAddr),
    limit: Duration,
) -> Duration {
    let cluster = Cluster::shared(3);
    let redlock = cluster.redlock().await;
    let links = cluster.links();
    let watcher = configure(quorumlock::Builder::new(links.urls()))
        .build()
        .await
        .expect("build");
    let name = unique("election");
    let leadership = redlock.campaign(&name, ttl).lead().await.expect("lead");
    let epoch = leadership.epoch();
    let nodes: Vec<_> = (0..cluster.len()).map(|i| links.upstream(i)).collect();
    for (i, &node) in nodes.iter().enumerate() {
        fault(&links.link(i), node);
    }
    let mut observer = watcher.observe(&name);
    let first = next(&mut observer, Duration::from_secs(10)).await;
    assert_eq!(first.map(|l| l.epoch), Some(epoch));
    let resigned = Instant::now();
    leadership.resign().await.expect("resign");
    for (i, &node) in nodes.iter().enumerate() {
        heal(&links.link(i), node);
    }
    assert_eq!(
        next(&mut observer, limit).await,
        None,
        "no resignation seen in time"
    );
    resigned.elapsed()
}

#[tokio::test]
async fn a_proclamation_changes_the_value_in_the_same_epoch() {
    let cluster = Cluster::shared(3);
    let name = unique("election");
    let redlock = cluster.redlock().await;
    let mut leadership = redlock
        .campaign(&name, TTL)
        .value("v1")
        .lead()
        .await
        .expect("lead");
    let epoch = leadership.epoch();
    leadership.proclaim("v2").await.expect("proclaim");
    assert_eq!(leadership.value(), b"v2");
    assert_eq!(leadership.epoch(), epoch);
    let read = redlock.leader(&name).await.expect("read");
    assert_eq!(
        read,
        Some(Leader {
            epoch,
            value: b"v2".to_vec()
        })
    );

    // An earlier proclamation arriving late (replayed by hand, numbered 1)
    // leaves the later one in place on every node.
    let [lock, _, record] = keys(&name);
    for i in 0..3 {
        let token: Vec<u8> = cluster.exec(i, redis::cmd("GET").arg(&lock));
        let late = [format!("{epoch} 1 1000 ").as_bytes(), &token, b" v1"].concat();
        let carried: i64 = cluster.exec(
            i,
            redis::cmd("EVAL")
                .arg(include_str!("../src/node/lua/proclaim.lua"))
                .arg(2)
                .arg(&lock)
                .arg(&record)
                .arg(&token)
                .arg(1)
                .arg(late),
        );
        assert_eq!(carried, 1, "the node carries a later proclamation");
    }
    let read = redlock.leader(&name).await.expect("read");
    assert_eq!(read.map(|l| l.value), Some(b"v2".to_vec()));
    leadership.resign().await.expect("resign");
    assert_eq!(redlock.leader(&name).await.expect("read"), None);
}

#[tokio::test]
async fn a_leadership_deleted_on_a_majority_fires_its_lost_signal() {
    let cluster = Cluster::shared(3);
    let name = unique("election");
    let redlock = cluster.redlock().await;
    let leadership = redlock.campaign(&name, TTL).lead().await.expect("lead");
    let signal = leadership.lost_signal();
    let lock = &keys(&name)[0];
    assert!(cluster.held_on(lock, 3, Duration::from_secs(5)).await);
    for i in 0..2 {
        let _: i64 = cluster.exec(i, redis::cmd("DEL").arg(lock));
    }
    // The records remain, but their lock does not back them any more.
    assert_eq!(redlock.leader(&name).await.expect("read"), None);
    let kind = tokio::time::timeout(3 * TTL, signal.lost())
        .await
        .expect("the signal fires within the next renewals");
    assert_eq!(kind, LossKind::Lost);
    assert!(leadership.is_lost());
    drop(leadership);
}

/// An epoch counter that is not a canonical integer (set by hand, or by a
/// bug) is refused by the nodes (`FENCERANGE`): a misconfiguration, which
/// no retry cures. A campaign, which by default runs until elected, stops
/// at once with an error that names the counter, and leaves no key behind.
#[tokio::test]
async fn a_campaign_on_a_corrupt_epoch_counter_stops_and_names_it() {
    let cluster = Cluster::shared(3);
    let redlock = cluster.redlock().await;
    for bad in ["abc", "1.5"] {
        let name = unique("election");
        let [lock, epoch, leader] = keys(&name);
        for i in 0..3 {
            let _: () = cluster.exec(i, redis::cmd("SET").arg(&epoch).arg(bad));
        }
        let err = tokio::time::timeout(Duration::from_secs(5), redlock.campaign(&name, TTL).lead())
            .await
            .unwrap_or_else(|_| panic!("{bad}: the campaign still runs after 5 s"))
            .expect_err("refused");
        assert!(
            err.is_misconfigured() && !err.is_unavailable(),
            "{bad}: {err}"
        );
        let text = err.to_string();
        assert!(
            text.contains(&*String::from_utf8_lossy(&epoch)),
            "{bad}: {text}"
        );
        assert!(
            cluster.released(&lock, Duration::from_secs(3)).await,
            "{bad}: no leadership lock left"
        );
        assert_eq!(cluster.holders(&leader), 0, "{bad}: no record");
    }
}

#[tokio::test]
async fn bad_input_is_refused_with_nothing_left_on_the_nodes() {
    let cluster = Cluster::shared(3);
    let name = unique("election");
    let redlock = cluster.redlock().await;
    let refused = [
        redlock.campaign("", TTL).lead().await,
        redlock.campaign(&name, Duration::ZERO).lead().await,
        redlock
            .campaign(&name, Duration::from_millis(2))
            .lead()
            .await,
        redlock
            .campaign(&name, quorumlock::MAX_TTL * 2)
            .lead()
            .await,
        redlock
            .campaign(&name, TTL)
            .auto_renew(Renewal::every(TTL))
            .lead()
            .await,
    ];
    for result in refused {
        let e = result.expect_err("refused");
        assert!(e.is_invalid_input(), "{e}");
    }
    let e = redlock.leader("").await.expect_err("refused");
    assert!(e.is_invalid_input(), "{e}");
    let mut empty = redlock.observe("");
    assert!(
        empty.next().await.is_none(),
        "an observer of no election ends"
    );
    for key in keys(&name) {
        assert_eq!(cluster.holders(&key), 0, "{}", key.escape_ascii());
    }
    assert_eq!(cluster.holders(b"quorumlock:election:{}"), 0);
}
