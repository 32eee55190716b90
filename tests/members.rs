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
async fn three_sentinel_groups_keep_one_holder_through_a_failover_and_quarantine_the_new_master() {
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
    let mut clients = Vec::new();
    for _ in 0..3 {
        let redlock = Builder::new(&urls)
            .restart_quarantine(Some(quarantine))
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
    // Until the quarantine ends (counted from when a client first read the
    // new master, after the failover began), member 0 grants nothing.
    let quiet_until = failover_start + quarantine - Duration::from_millis(300);
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
    assert_eq!(
        yes_in_quarantine,
        yes_at_switch,
        "the promoted master voted yes inside its quarantine\n{}",
        logs()
    );
    assert!(
        yes_after > yes_in_quarantine,
        "member 0 never voted again after its quarantine\n{}",
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
    // Too short to cover the failover on purpose: only the votes can.
    let build = || {
        Builder::new([group.url()])
            .restart_quarantine(Some(Duration::from_millis(1)))
            .durable_votes(durable.then_some(Durability::Replicas(1)))
            .node_timeout(Duration::from_millis(300))
            .build()
    };
    let (first, second) = (
        build().await.expect("first"),
        build().await.expect("second"),
    );
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
async fn a_cluster_member_follows_a_migration_and_quarantines_a_failed_over_shard() {
    let cluster = ShardedCluster::start(3, 1);
    let quarantine = Duration::from_secs(5);
    let build = || {
        Builder::new([cluster.url()])
            .restart_quarantine(Some(quarantine))
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
    assert_eq!(
        switched_grants,
        0,
        "the promoted shard granted inside its quarantine\n{}",
        cluster.logs()
    );
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
        let cluster = s.spawn(|| ShardedCluster::start(2, 0));
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
        .durable_votes(Some(Durability::Replicas(0)))
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

#[tokio::test]
async fn durable_votes_on_the_aof_need_waitaof_and_work_where_it_is() {
    // Redis 7.0 has no WAITAOF: refused at build, naming it.
    let redis = support::Cluster::local(1);
    let aof = Durability::Aof {
        local: true,
        replicas: 0,
    };
    let err = Builder::new([redis.url(0)])
        .durable_votes(Some(aof))
        .build()
        .await
        .expect_err("no WAITAOF on Redis 7.0");
    assert!(
        err.is_invalid_input() && err.to_string().contains("WAITAOF"),
        "{err}"
    );
    // Valkey 8 has it: a master with its AOF and a replica.
    let Some(mut options) = support::valkey_clock_options("durable-aof") else {
        return;
    };
    options.faketime = None;
    options.aof = true;
    options.in_memory_dir = true;
    let valkey = support::Cluster::local_custom(2, &options);
    let port = valkey.url(0).rsplit(':').next().expect("a port").to_owned();
    let _: () = valkey.exec(1, redis::cmd("REPLICAOF").arg("127.0.0.1").arg(port));
    let both = Durability::Aof {
        local: true,
        replicas: 1,
    };
    let redlock = Builder::new([valkey.url(0)])
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
async fn a_member_that_fails_over_needs_quarantine_or_durable_votes_on_a_replica() {
    for url in [
        "redis+sentinel://127.0.0.1:1/g",
        "redis+cluster://127.0.0.1:1",
    ] {
        for durable in [None, Some(Durability::Replicas(0))] {
            let err = Builder::new([url])
                .durable_votes(durable)
                .build()
                .await
                .expect_err(url);
            assert!(
                err.is_invalid_input() && err.to_string().contains("restart_quarantine"),
                "{err}"
            );
        }
        // Either safeguard builds (a member that does not answer is not an
        // error at build).
        let quarantined = Builder::new([url])
            .restart_quarantine(Some(Duration::from_secs(30)))
            .connect_timeout(Duration::from_millis(100))
            .build()
            .await;
        assert!(quarantined.is_ok(), "{url}: {quarantined:?}");
        let durable = Builder::new([url])
            .durable_votes(Some(Durability::Replicas(1)))
            .connect_timeout(Duration::from_millis(100))
            .build()
            .await;
        assert!(durable.is_ok(), "{url}: {durable:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_given_as_a_seed_is_still_quarantined_when_promoted() {
    let cluster = ShardedCluster::start(1, 1);
    let (master, replica) = (cluster.ports()[0], cluster.ports()[1]);
    // The replica listed first: the slot table is read from it.
    let url = format!("redis+cluster://127.0.0.1:{replica},127.0.0.1:{master}");
    let quarantine = Duration::from_secs(3);
    let redlock = Builder::new([url])
        .restart_quarantine(Some(quarantine))
        .build()
        .await
        .expect("cluster");
    let name = unique("seeded");
    let retry = Retry::Until(quarantine * 2);
    let lock = redlock
        .lock(&name, Duration::from_secs(1))
        .retry(retry)
        .acquire()
        .await;
    lock.expect("once the servers are old enough")
        .release()
        .await
        .expect("released");
    let promoted = tokio::task::block_in_place(|| cluster.failover_shard(master));
    assert_eq!(promoted, replica);
    let err = redlock
        .lock(&name, Duration::from_secs(1))
        .retry(Retry::Until(Duration::from_millis(500)))
        .acquire()
        .await
        .expect_err("the promoted seed voted at once");
    let quarantined = err
        .node_failures()
        .iter()
        .any(|f| matches!(f.kind, quorumlock::NodeFailureKind::Quarantined { .. }));
    assert!(quarantined, "{err}\n{}", cluster.logs());
}
