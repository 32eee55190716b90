//! Members that are not one server: Sentinel groups and a Redis Cluster,
//! on real processes (`redis-server` in sentinel and cluster modes,
//! started by the harness).
//!
//! - Three Sentinel groups as the members, one failed over
//!   (`SENTINEL FAILOVER`) while clients lock: no two holders at once, and
//!   the promoted master casts no yes before its quarantine ends.
//! - One Sentinel group as the only member: with durable votes, a grant
//!   survives a failover that loses the master's unreplicated writes (the
//!   replica stopped meanwhile); the negative control, without durable
//!   votes, hands the lock to a second holder.
//! - A 3-shard cluster as the only member, a slot migrated (clients meet
//!   `ASK`) and a shard failed over during load: no two holders, no
//!   `MOVED` or `ASK` reaches a caller, and keys of one lock in two slots
//!   are refused with a message naming hash tags.
//!
//! A failing test prints every process's log.

use quorumlock_testkit as support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use quorumlock::{Builder, Durability, Error, Redlock, Retry};
use support::{report, unique, GroupOptions, SentinelGroup, ShardedCluster};

/// One grant: the resource, when the holder had it, and until when it
/// could have believed so (its release, or its validity's end if sooner).
#[derive(Debug, Clone)]
struct Held {
    resource: usize,
    from: Instant,
    until: Instant,
}

/// Grants recorded by every client, and the errors callers saw.
#[derive(Default)]
struct History {
    held: Mutex<Vec<Held>>,
    errors: Mutex<Vec<String>>,
}

impl History {
    /// Pairs of grants of one resource whose windows intersect.
    fn overlaps(&self) -> Vec<(Held, Held)> {
        let mut held = self.held.lock().unwrap().clone();
        held.sort_by_key(|h| (h.resource, h.from));
        let mut found = Vec::new();
        for (i, a) in held.iter().enumerate() {
            for b in &held[i + 1..] {
                if b.resource == a.resource && b.from < a.until {
                    found.push((a.clone(), b.clone()));
                }
            }
        }
        found
    }

    fn grants(&self) -> usize {
        self.held.lock().unwrap().len()
    }
}

/// Clients that take `resources` in turn (each held a few milliseconds)
/// until `stop`, recording every grant and every error.
async fn load(
    clients: &[Redlock],
    names: Arc<Vec<String>>,
    history: Arc<History>,
    stop: Instant,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut tasks = Vec::new();
    for (c, redlock) in clients.iter().enumerate() {
        for t in 0..2 {
            let (redlock, names, history) = (redlock.clone(), names.clone(), history.clone());
            tasks.push(tokio::spawn(async move {
                let mut i = c * 2 + t;
                while Instant::now() < stop {
                    i = (i + 1) % names.len();
                    let taken = redlock
                        .lock(&names[i], Duration::from_secs(1))
                        .retry(Retry::Until(Duration::from_secs(8)))
                        .acquire()
                        .await;
                    let lock = match taken {
                        Ok(lock) => lock,
                        Err(e) => {
                            history.errors.lock().unwrap().push(e.to_string());
                            continue;
                        }
                    };
                    let from = Instant::now();
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    let until = Instant::now().min(lock.deadline());
                    history.held.lock().unwrap().push(Held {
                        resource: i,
                        from,
                        until,
                    });
                    if let Err(e) = lock.release().await {
                        history.errors.lock().unwrap().push(e.to_string());
                    }
                }
            }));
        }
    }
    tasks
}

fn acquire_yes(redlock: &Redlock, member: usize) -> u64 {
    redlock.stats().nodes[member].acquire.yes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_sentinel_groups_keep_one_holder_through_a_failover_and_the_new_master_votes_at_once()
{
    let groups: Vec<SentinelGroup> = std::thread::scope(|s| {
        let started: Vec<_> = ["qa", "qb", "qc"]
            .map(|name| s.spawn(move || SentinelGroup::start(name, &GroupOptions::default())))
            .into_iter()
            .collect();
        started
            .into_iter()
            .map(|h| h.join().expect("group starts"))
            .collect()
    });
    let urls: Vec<String> = groups.iter().map(SentinelGroup::url).collect();
    let quarantine = Duration::from_secs(5);
    // Servers older than the quarantine: only a replacement's rule could
    // keep the promoted master out.
    tokio::time::sleep(quarantine + Duration::from_secs(1)).await;
    let mut clients = Vec::new();
    for _ in 0..3 {
        let redlock = Builder::new(&urls)
            .restart_quarantine(Some(quarantine))
            .durable_votes(Some(Durability::Replicas(1)))
            .node_timeout(Duration::from_millis(300))
            .build()
            .await
            .expect("three groups");
        clients.push(redlock);
    }
    let names: Arc<Vec<String>> = Arc::new((0..4).map(|i| unique(&format!("sg{i}"))).collect());
    let history = Arc::new(History::default());
    let stop = Instant::now() + Duration::from_secs(12);
    let tasks = load(&clients, names, history.clone(), stop).await;

    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = history.grants();
    let failover_start = Instant::now();
    let group = &groups[0];
    let old = group.master_port();
    let new = tokio::task::block_in_place(|| group.failover());
    let switched = Instant::now();
    let yes_at_switch: u64 = clients.iter().map(|c| acquire_yes(c, 0)).sum();
    // With durable votes on every replica the promoted master has every
    // lock: it votes once its replica is back, without sitting out a
    // quarantine from when each client first read it.
    let quiet_until = switched + quarantine - Duration::from_millis(500);
    tokio::time::sleep_until(quiet_until.into()).await;
    let yes_in_quarantine: u64 = clients.iter().map(|c| acquire_yes(c, 0)).sum();
    for task in tasks {
        task.await.expect("load task");
    }
    let yes_after: u64 = clients.iter().map(|c| acquire_yes(c, 0)).sum();

    let overlaps = history.overlaps();
    let errors = history.errors.lock().unwrap().clone();
    report(&format!(
        "members/sentinel: failover {old} -> {new} in {:?}; grants {} ({before} before); member 0 yes votes: {yes_at_switch} at the switch, {yes_in_quarantine} at the quarantine's end, {yes_after} at the end; overlaps {}; errors {}",
        switched - failover_start,
        history.grants(),
        overlaps.len(),
        errors.len()
    ));
    let logs = || groups.iter().map(SentinelGroup::logs).collect::<String>();
    assert!(
        overlaps.is_empty(),
        "two holders at once: {overlaps:?}\n{}",
        logs()
    );
    assert!(
        yes_at_switch > 0,
        "member 0 never voted before the failover\n{}",
        logs()
    );
    assert!(
        yes_in_quarantine > yes_at_switch,
        "the promoted master sat out a quarantine it does not need\n{}",
        logs()
    );
    assert!(
        history.grants() > before + 20,
        "the load stalled: {errors:?}"
    );
    assert!(
        errors.is_empty(),
        "callers saw errors: {errors:?}\n{}",
        logs()
    );
}

/// One Sentinel group as the only member: the replica is stopped, a
/// client asks for the lock, the master dies, the replica is promoted,
/// and a second client asks for the same lock. Whether the second got it
/// while the first still held it.
async fn failover_after_a_grant(durable: bool) -> bool {
    let mut group = SentinelGroup::start(&unique("solo"), &GroupOptions::default());
    // Too short to cover the failover on purpose: only the votes can. The
    // control's first client knows the master as a single server, which
    // waits for no replica (`build()` refuses a group without durable
    // votes); its second asks the group, with no replica left to wait for.
    let master = format!("redis://127.0.0.1:{}", group.master_port());
    let build = |url: String, replicas: u32| {
        Builder::new([url])
            .restart_quarantine(Some(Duration::from_millis(1)))
            .durable_votes(Some(Durability::Replicas(replicas)))
            .node_timeout(Duration::from_millis(300))
            .build()
    };
    let (first, second) = if durable {
        (build(group.url(), 1), build(group.url(), 1))
    } else {
        (build(master, 0), build(group.url(), 0))
    };
    let first = first.await.expect("first");
    let resource = unique("solo-job");
    let ttl = Duration::from_secs(30);
    let replica = group
        .data_ports()
        .into_iter()
        .find(|&p| p != group.master_port())
        .expect("a replica");
    // The replica stopped and its link cut (so that nothing already sent
    // reaches it when it resumes): the master's writes stay on the master.
    group.pause_data(replica);
    let _: () = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("replica")
        .query(&mut group.conn(group.master_port()))
        .expect("replication link cut");
    let taken = first
        .lock(&resource, ttl)
        .retry(Retry::Until(Duration::from_millis(800)))
        .acquire()
        .await;
    let held = if durable {
        // No replica can have it: not granted, so nothing to lose.
        let err = taken.expect_err("granted with no replica to keep it");
        assert!(matches!(err, Error::Unavailable { .. }), "{err}");
        group.resume_data(replica);
        let lock = first
            .lock(&resource, ttl)
            .retry(Retry::Until(Duration::from_secs(5)))
            .acquire()
            .await
            .expect("granted once the replica has it");
        Some(lock)
    } else {
        Some(taken.expect("granted without asking a replica"))
    };
    let old = tokio::task::block_in_place(|| group.kill_master());
    if !durable {
        group.resume_data(replica);
    }
    let new = tokio::task::block_in_place(|| group.await_promotion(old));
    // Built once the promoted master has no replica: the control's
    // `Replicas(0)` is then what every replica is.
    let second = second.await.expect("second");
    let second_got = second
        .lock(&resource, ttl)
        .retry(Retry::Until(Duration::from_secs(3)))
        .acquire()
        .await;
    let valid = held.as_ref().is_some_and(|l| Instant::now() < l.deadline());
    report(&format!(
        "members/durable={durable}: master {old} killed, {new} promoted; second client: {}",
        match &second_got {
            Ok(_) => "granted".to_owned(),
            Err(e) => e.to_string(),
        }
    ));
    if durable {
        // The promoted replica has the first client's grant.
        let token: Option<String> = redis::cmd("GET")
            .arg(&resource)
            .query(&mut group.conn(new))
            .expect("GET on the new master");
        let first = held.as_ref().map(|l| l.token_prefix().to_owned());
        assert!(
            token.zip(first).is_some_and(|(t, p)| t.starts_with(&p)),
            "the promoted master lost the grant\n{}",
            group.logs()
        );
        assert!(
            matches!(second_got, Err(Error::Contended { .. })),
            "{second_got:?}\n{}",
            group.logs()
        );
    }
    valid && second_got.is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_sentinel_group_with_durable_votes_loses_no_granted_lock_in_a_failover() {
    assert!(
        !failover_after_a_grant(true).await,
        "a lock granted with durable votes was lost in the failover"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn negative_control_without_durable_votes_a_failover_hands_a_held_lock_to_another() {
    assert!(
        failover_after_a_grant(false).await,
        "the failover kept the master's unreplicated grant: the control shows nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_member_follows_a_migration_and_a_failed_over_shard() {
    let cluster = ShardedCluster::start(3, 1);
    let quarantine = Duration::from_secs(5);
    let build = || {
        Builder::new([cluster.url()])
            .restart_quarantine(Some(quarantine))
            .durable_votes(Some(Durability::Replicas(1)))
            .node_timeout(Duration::from_millis(300))
            .build()
    };
    let clients = vec![
        build().await.expect("cluster"),
        build().await.expect("cluster"),
    ];

    // One lock's keys in two slots: refused, naming hash tags; under one
    // tag, taken.
    let err = clients[0]
        .lock_all(["acct:1", "acct:2"], Duration::from_secs(1))
        .acquire()
        .await
        .expect_err("keys in two slots");
    assert!(
        err.is_invalid_input() && err.to_string().contains("hash tag"),
        "{err}"
    );
    // Fresh servers stay out for the quarantine first.
    let together = clients[0]
        .lock_all(["{acct}:1", "{acct}:2"], Duration::from_secs(1))
        .retry(Retry::Until(quarantine * 2))
        .acquire()
        .await
        .expect("one hash tag");
    together.release().await.expect("released");

    let names: Arc<Vec<String>> = Arc::new((0..12).map(|i| unique(&format!("cl{i}"))).collect());
    let history = Arc::new(History::default());
    let stop = Instant::now() + Duration::from_secs(12);
    let tasks = load(&clients, names.clone(), history.clone(), stop).await;

    // A slot in use, migrated by halves while the clients lock.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let slot = cluster.slot_of(names[0].as_bytes());
    let from = cluster.master_of(slot);
    let to = cluster
        .masters()
        .into_iter()
        .find(|&m| m != from)
        .expect("another master");
    let migration = cluster.begin_migration(slot, to);
    tokio::time::sleep(Duration::from_millis(500)).await;
    tokio::task::block_in_place(|| cluster.move_keys(&migration, 1));
    tokio::time::sleep(Duration::from_millis(500)).await;
    tokio::task::block_in_place(|| cluster.finish_migration(migration));
    assert_eq!(cluster.master_of(slot), to);

    // A shard failed over: its resources wait out the quarantine.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let victim = cluster.master_of(cluster.slot_of(names[1].as_bytes()));
    let on_victim: Vec<usize> = (0..names.len())
        .filter(|&i| cluster.master_of(cluster.slot_of(names[i].as_bytes())) == victim)
        .collect();
    let failover_start = Instant::now();
    let promoted = tokio::task::block_in_place(|| cluster.failover_shard(victim));
    let quiet_until = failover_start + quarantine - Duration::from_millis(300);
    for task in tasks {
        task.await.expect("load task");
    }

    let held = history.held.lock().unwrap().clone();
    let switched_grants = held
        .iter()
        .filter(|h| on_victim.contains(&h.resource))
        .filter(|h| h.from > failover_start + Duration::from_secs(2) && h.from < quiet_until)
        .count();
    let after = held
        .iter()
        .filter(|h| on_victim.contains(&h.resource) && h.from > quiet_until)
        .count();
    let overlaps = history.overlaps();
    let errors = history.errors.lock().unwrap().clone();
    report(&format!(
        "members/cluster: slot {slot} {from} -> {to}; shard {victim} failed over to {promoted} ({} of {} resources on it); grants {}, on it inside the quarantine {switched_grants}, after {after}; overlaps {}; errors {}",
        on_victim.len(),
        names.len(),
        held.len(),
        overlaps.len(),
        errors.len()
    ));
    assert!(
        overlaps.is_empty(),
        "two holders at once: {overlaps:?}\n{}",
        cluster.logs()
    );
    let redirected = errors
        .iter()
        .filter(|e| e.contains("MOVED") || e.contains("ASK"));
    assert_eq!(
        redirected.count(),
        0,
        "a caller saw a redirection: {errors:?}"
    );
    assert!(
        errors.is_empty(),
        "callers saw errors: {errors:?}\n{}",
        cluster.logs()
    );
    // With durable votes on every replica the promoted shard has every
    // lock: it may vote at once (`switched_grants` is reported, not
    // bounded), and must vote again.
    assert!(
        after > 0,
        "the promoted shard never granted again\n{}",
        cluster.logs()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_primitive_works_on_mixed_members() {
    let (group, cluster) = std::thread::scope(|s| {
        let group = s.spawn(|| SentinelGroup::start("mixed", &GroupOptions::default()));
        let cluster = s.spawn(|| ShardedCluster::start(2, 1));
        (
            group.join().expect("group"),
            cluster.join().expect("cluster"),
        )
    });
    let plain = support::Cluster::local(1);
    let members = format!("{},{},{}", group.url(), cluster.url(), plain.url(0));
    // Fresh servers: a short quarantine, until every member votes.
    let quarantine = Duration::from_millis(1500);
    let redlock = Builder::from_list(&members)
        .restart_quarantine(Some(quarantine))
        .durable_votes(Some(Durability::Replicas(1)))
        .build()
        .await
        .expect("three members of three kinds");
    assert_eq!(redlock.nodes(), 3, "{:?}", redlock.node_labels());
    let deadline = Instant::now() + Duration::from_secs(10);
    while redlock.health().await.ready() < 3 {
        assert!(Instant::now() < deadline, "{}", redlock.health().await);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let ttl = Duration::from_secs(5);
    let retry = Retry::Until(Duration::from_secs(5));
    let logs = || format!("{}{}{}", group.logs(), cluster.logs(), plain.logs());

    // A fenced lock, renewed, its status read, released.
    let name = unique("mixed-job");
    let lock = redlock
        .lock(&name, ttl)
        .fenced()
        .retry(retry)
        .acquire()
        .await;
    let lock = lock.unwrap_or_else(|e| panic!("fenced lock: {e}\n{}", logs()));
    assert!(lock.fence().is_some());
    lock.extend(ttl).await.expect("extended on every kind");
    // The key lost on the cluster's shard comes back with renewal.
    let shard = cluster.master_of(cluster.slot_of(name.as_bytes()));
    let value = |conn: &mut redis::Connection| -> Option<String> {
        redis::cmd("GET").arg(&name).query(conn).expect("GET")
    };
    let held = value(&mut cluster.conn(shard)).expect("held on the shard");
    let _: () = redis::cmd("DEL")
        .arg(&name)
        .query(&mut cluster.conn(shard))
        .expect("DEL");
    let _renewing = lock
        .auto_renew(quorumlock::Renewal::every(Duration::from_millis(200)))
        .expect("renewal");
    let repaired = support::eventually(Duration::from_secs(5), || {
        value(&mut cluster.conn(shard)).as_deref() == Some(&held)
    })
    .await;
    assert!(repaired, "not repaired on the cluster member\n{}", logs());
    let status = redlock.status(&name).await;
    assert!(status.held_by_quorum(), "{status:?}");
    lock.release().await.expect("released");
    // Several resources under one hash tag.
    let tag = unique("order");
    let both = [format!("{{{tag}}}:items"), format!("{{{tag}}}:payment")];
    let multi = redlock
        .lock_all(&both, ttl)
        .acquire()
        .await
        .expect("one tag");
    multi.release().await.expect("released");
    // Two permits of three.
    let sem = unique("mixed-sem");
    let permits = redlock
        .semaphore(&sem, 3, ttl)
        .take(2)
        .fenced()
        .acquire()
        .await;
    let permits = permits.unwrap_or_else(|e| panic!("permits: {e}\n{}", logs()));
    let seen = redlock.semaphore_status(&sem, 3).await.expect("status");
    assert_eq!(seen.limit, Some(3), "{seen:?}");
    permits.release().await.expect("released");
    // A leader, read back.
    let election = unique("mixed-lead");
    let leadership = redlock.campaign(&election, ttl).value("me").lead().await;
    let leadership = leadership.unwrap_or_else(|e| panic!("election: {e}\n{}", logs()));
    let leader = redlock
        .leader(&election)
        .await
        .expect("read")
        .expect("a leader");
    assert_eq!(
        (leader.epoch, &leader.value[..]),
        (leadership.epoch(), &b"me"[..])
    );
    leadership.resign().await.expect("resigned");
    // Readers together, then a fenced writer, of a name with a hash tag:
    // its readers, intent mark and counter (`tagged:`) share its slot.
    let doc = format!("{{{}}}:doc", unique("mixed"));
    let r1 = redlock.read(&doc, ttl).acquire().await.expect("reader");
    let r2 = redlock
        .read(&doc, ttl)
        .acquire()
        .await
        .expect("second reader");
    assert_eq!(
        redlock
            .rwlock_status(&doc)
            .await
            .expect("status")
            .readers_held(),
        2
    );
    r1.release().await.expect("released");
    r2.release().await.expect("released");
    let w = redlock
        .write(&doc, ttl)
        .fenced()
        .retry(retry)
        .acquire()
        .await
        .expect("writer");
    w.release().await.expect("released");
    assert_eq!(redlock.health().await.ready(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durable_votes_on_the_aof_need_waitaof_and_work_where_it_is() {
    let both = Durability::Aof {
        local: true,
        replicas: 1,
    };
    // Redis 7.0 has no WAITAOF: refused at build, naming it.
    let redis = SentinelGroup::start(&unique("no-aof"), &GroupOptions::default());
    let err = Builder::new([redis.url()])
        .durable_votes(Some(both))
        .build()
        .await
        .expect_err("no WAITAOF on Redis 7.0");
    assert!(
        err.is_invalid_input() && err.to_string().contains("WAITAOF"),
        "{err}"
    );
    // Valkey 8 has it: a master with its AOF and a replica.
    let Some(server) = support::valkey_binary() else {
        assert!(
            std::env::var_os(support::ALLOW_NO_VALKEY_ENV).is_some(),
            "no Valkey: run scripts/fetch-servers.sh"
        );
        return;
    };
    let options = GroupOptions {
        aof: true,
        server: Some(server),
        ..GroupOptions::default()
    };
    let valkey = SentinelGroup::start(&unique("aof"), &options);
    let redlock = Builder::new([valkey.url()])
        .durable_votes(Some(both))
        .node_timeout(Duration::from_millis(500))
        .build()
        .await
        .expect("Valkey has WAITAOF");
    let lock = redlock
        .lock(unique("aof-job"), Duration::from_secs(5))
        .retry(Retry::Until(Duration::from_secs(10)))
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", valkey.logs()));
    lock.release().await.expect("released");
}

#[tokio::test]
async fn a_member_that_fails_over_needs_durable_votes_not_quarantine_alone() {
    // A Sentinel group: refused before anything is sent, whatever the
    // quarantine (it does not stop a deposed master from granting).
    for quarantine in [None, Some(Duration::from_secs(30))] {
        let err = Builder::new(["redis+sentinel://127.0.0.1:1/g"])
            .restart_quarantine(quarantine)
            .build()
            .await
            .expect_err("a group without durable votes");
        assert!(
            err.is_invalid_input() && err.to_string().contains("durable votes on every replica"),
            "{err}"
        );
    }
    // A client that only reads needs neither, and takes nothing.
    let reader = Builder::new(["redis+sentinel://127.0.0.1:1/g"])
        .read_only(true)
        .connect_timeout(Duration::from_millis(100))
        .build()
        .await
        .expect("a read-only client");
    let err = reader
        .lock("read-only", Duration::from_secs(1))
        .acquire()
        .await
        .expect_err("a read-only client takes no lock");
    assert!(
        err.is_invalid_input() && err.to_string().contains("read-only"),
        "{err}"
    );
    // With durable votes, both kinds build (a member that does not answer
    // is not an error at build; a cluster's masters are judged by their
    // replicas once reached).
    for url in [
        "redis+sentinel://127.0.0.1:1/g",
        "redis+cluster://127.0.0.1:1",
    ] {
        let durable = Builder::new([url])
            .durable_votes(Some(Durability::Replicas(1)))
            .connect_timeout(Duration::from_millis(100))
            .build()
            .await;
        assert!(durable.is_ok(), "{url}: {durable:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durable_votes_must_wait_for_every_replica_of_a_group_or_a_cluster() {
    let options = GroupOptions {
        replicas: 2,
        ..GroupOptions::default()
    };
    let (group, cluster, bare) = std::thread::scope(|s| {
        let group = s.spawn(|| SentinelGroup::start(&unique("every"), &options));
        let cluster = s.spawn(|| ShardedCluster::start(1, 1));
        let bare = s.spawn(|| ShardedCluster::start(1, 0));
        (
            group.join().expect("group"),
            cluster.join().expect("cluster"),
            bare.join().expect("cluster without replicas"),
        )
    });
    let logs = || group.logs() + &cluster.logs() + &bare.logs();
    let build = |url: String, replicas: Option<u32>| {
        Builder::new([url])
            .durable_votes(replicas.map(Durability::Replicas))
            .node_timeout(Duration::from_secs(1))
            .build()
    };
    // Fewer than the group's replicas: a master deposed with the others
    // would still grant.
    let err = build(group.url(), Some(1)).await.expect_err("1 of 2");
    assert!(
        err.is_invalid_input() && err.to_string().contains("wait for every replica"),
        "{err}\n{}",
        logs()
    );
    // A cluster whose master has a replica, without durable votes.
    let err = build(cluster.url(), None).await.expect_err("no durability");
    assert!(
        err.is_invalid_input() && err.to_string().contains("can fail over"),
        "{err}\n{}",
        logs()
    );
    let name = unique("every-job");
    let take = |redlock: Redlock| {
        let name = name.clone();
        async move {
            let lock = redlock
                .lock(&name, Duration::from_secs(5))
                .retry(Retry::Until(Duration::from_secs(5)))
                .acquire()
                .await?;
            lock.release().await
        }
    };
    // Addresses that cannot be what they say: misconfiguration at build,
    // not an outage retried for ever.
    let sentinels = group
        .url()
        .rsplit_once('/')
        .expect("a group name")
        .0
        .to_owned();
    let master = format!("127.0.0.1:{}", group.master_port());
    for (url, said) in [
        (
            format!("{sentinels}/nosuch"),
            "no sentinel watches a group named \"nosuch\"",
        ),
        (format!("redis+sentinel://{master}/g"), "is not a sentinel"),
        (format!("redis+cluster://{master}"), "not in cluster mode"),
    ] {
        let err = build(url.clone(), Some(2)).await.expect_err(&url);
        assert!(
            err.is_invalid_input() && err.to_string().contains(said),
            "{url}: {err}"
        );
    }
    // A cluster without replicas cannot fail over: nothing to wait for.
    let redlock = build(bare.url(), None).await.expect("no replica");
    take(redlock)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", logs()));
    // More than the group has: it builds (a replica may be down a while),
    // its master votes nothing, and the failure and health say why.
    let redlock = build(group.url(), Some(3)).await.expect("3 of 2");
    let err = redlock
        .lock(&name, Duration::from_secs(5))
        .retry(Retry::Times(1))
        .acquire()
        .await
        .expect_err("a replica short");
    assert!(
        err.is_unavailable() && err.to_string().contains("reached 2 of 3 replicas"),
        "{err}"
    );
    let health = redlock.health().await;
    assert!(
        !health.quorum_ready() && health.to_string().contains("2 of the 3 replicas"),
        "{health}"
    );
    // Every replica: granted.
    let redlock = build(group.url(), Some(2)).await.expect("2 of 2");
    take(redlock)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", logs()));
}

/// A forced failover that leaves the old master running (the Sentinels
/// demote it 10 to 20 s later): two masters, each with its keys. A client
/// connected before it and one built after it ask for one lock at once.
/// With durable votes on every replica neither master can grant: the
/// replica follows the new master, and the new master has none until the
/// old one is demoted. The control (each master known as a single server,
/// which waits for no replica) grants it twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deposed_master_still_accepting_writes_never_makes_a_second_holder() {
    let group = SentinelGroup::start(&unique("deposed"), &GroupOptions::default());
    let build = |url: String, replicas: u32| {
        Builder::new([url])
            .durable_votes(Some(Durability::Replicas(replicas)))
            .node_timeout(Duration::from_millis(300))
            .retry_delay(Duration::from_millis(10), Duration::from_millis(50))
            .build()
    };
    let before = build(group.url(), 1).await.expect("a client before");
    let name = unique("deposed-job");
    let ttl = Duration::from_secs(10);
    let take = |redlock: &Redlock, name: &str, within: Duration| {
        let lock = redlock.lock(name, ttl).retry(Retry::Until(within));
        async move { lock.acquire().await }
    };
    take(&before, &name, Duration::from_secs(5))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", group.logs()))
        .release()
        .await
        .expect("released");
    let switched = Instant::now();
    let (old, new) = tokio::task::block_in_place(|| group.switch());
    let plain = |port: u16| format!("redis://127.0.0.1:{port}");
    // The control first: it takes a few milliseconds, well inside the
    // Sentinels' 8 s before they demote the old master.
    let control = unique("deposed-control");
    let (on_old, on_new) = (
        build(plain(old), 0).await.expect("old master"),
        build(plain(new), 0).await.expect("new master"),
    );
    let (a, b) = futures::join!(
        take(&on_old, &control, Duration::from_secs(1)),
        take(&on_new, &control, Duration::from_secs(1))
    );
    assert!(
        a.is_ok() && b.is_ok(),
        "the control found one master only: {a:?} {b:?}\n{}",
        group.logs()
    );
    let after = build(group.url(), 1).await.expect("a client after");
    let (a, b) = futures::join!(
        take(&before, &name, Duration::from_secs(2)),
        take(&after, &name, Duration::from_secs(2))
    );
    report(&format!(
        "members/deposed: {old} switched to {new} {:?} ago; before: {}; after: {}",
        switched.elapsed(),
        a.as_ref()
            .map_or_else(ToString::to_string, |_| "granted".into()),
        b.as_ref()
            .map_or_else(ToString::to_string, |_| "granted".into()),
    ));
    assert!(
        a.is_err() || b.is_err(),
        "two holders of {name} on two masters\n{}",
        group.logs()
    );
    drop((a, b));
    // Once the old master is demoted, the new one has its replica back.
    tokio::task::block_in_place(|| group.demote(old, new));
    let demoted = Instant::now();
    let lock = take(&after, &name, ttl * 2)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", group.logs()));
    report(&format!(
        "members/deposed: granted {:?} after the demotion, {:?} after the switch",
        demoted.elapsed(),
        switched.elapsed()
    ));
    lock.release().await.expect("released");
}

/// A replica given as the first seed (the slot table read from it) is
/// promoted while a lock is held: the promoted shard has the lock (durable
/// votes waited for it), so a second client is refused, and the holder
/// releases it there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_given_as_a_seed_keeps_a_held_lock_when_promoted() {
    let cluster = ShardedCluster::start(1, 1);
    let (master, replica) = (cluster.ports()[0], cluster.ports()[1]);
    // The replica listed first: the slot table is read from it.
    let url = format!("redis+cluster://127.0.0.1:{replica},127.0.0.1:{master}");
    let build = || {
        Builder::new([url.clone()])
            .durable_votes(Some(Durability::Replicas(1)))
            .build()
    };
    let (first, second) = (
        build().await.expect("cluster"),
        build().await.expect("cluster"),
    );
    let name = unique("seeded");
    let held = first
        .lock(&name, Duration::from_secs(30))
        .retry(Retry::Until(Duration::from_secs(5)))
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", cluster.logs()));
    let promoted = tokio::task::block_in_place(|| cluster.failover_shard(master));
    assert_eq!(promoted, replica);
    let err = second
        .lock(&name, Duration::from_secs(1))
        .retry(Retry::Until(Duration::from_secs(2)))
        .acquire()
        .await
        .expect_err("the promoted seed lost the held lock");
    assert!(err.is_contended(), "{err}\n{}", cluster.logs());
    held.release()
        .await
        .expect("released on the promoted shard");
    let lock = second
        .lock(&name, Duration::from_secs(1))
        .retry(Retry::Until(Duration::from_secs(5)))
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", cluster.logs()));
    lock.release().await.expect("released");
}
