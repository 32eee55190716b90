//! The replication topologies: a Sentinel group replicates and fails over
//! on demand; a Redis Cluster forms, moves a slot with its keys (whole, and
//! held half-way so that clients meet `ASK`) and promotes a replica.

use quorumlock_testkit as support;

use std::time::{Duration, Instant};

use support::{block_on_eventually, report, GroupOptions, SentinelGroup, ShardedCluster};

fn get(conn: &mut redis::Connection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query(conn).expect("GET")
}

#[test]
fn sentinel_group_replicates_and_fails_over() {
    let started = Instant::now();
    let group = SentinelGroup::start("topo", &GroupOptions::default());
    let start_took = started.elapsed();
    let data = group.data_ports();
    assert_eq!(data.len(), 2);
    assert_eq!(group.sentinel_urls().len(), 3);
    assert_eq!(group.name(), "topo");
    let hosts: Vec<String> = group
        .sentinel_urls()
        .iter()
        .map(|u| u.trim_start_matches("redis://").to_owned())
        .collect();
    assert_eq!(
        group.url(),
        format!("redis+sentinel://{}/topo", hosts.join(","))
    );

    let old = group.master_port();
    assert_eq!(old, data[0]);
    let replica = data[1];
    let _: () = redis::cmd("SET")
        .arg("topo:k")
        .arg("v")
        .query(&mut group.conn(old))
        .expect("SET on the master");
    assert!(
        block_on_eventually(Duration::from_secs(5), || get(
            &mut group.conn(replica),
            "topo:k"
        )
        .is_some()),
        "the key never reached the replica"
    );
    assert_eq!(group.keys(replica, "topo:*"), vec![b"topo:k".to_vec()]);

    let failing_over = Instant::now();
    let new = group.failover();
    let failover_took = failing_over.elapsed();
    assert_eq!(new, replica);
    assert_eq!(group.master_port(), new);
    for url in group.sentinel_urls() {
        let mut c = redis::Client::open(url.as_str())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(1)))
            .expect("sentinel");
        let (_, port): (String, u16) = redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg("topo")
            .query(&mut c)
            .expect("GET-MASTER-ADDR-BY-NAME");
        assert_eq!(port, new, "{url}");
    }
    assert_eq!(get(&mut group.conn(new), "topo:k").as_deref(), Some("v"));
    report(&format!(
        "sentinel group: started in {start_took:?}, failed over in {failover_took:?}"
    ));
}

#[test]
fn sentinels_promote_a_replica_when_the_master_dies() {
    let options = GroupOptions {
        aof: true,
        ..GroupOptions::default()
    };
    let mut group = SentinelGroup::start("topo-kill", &options);
    let old = group.master_port();
    let _: () = redis::cmd("SET")
        .arg("topo:k")
        .arg("v")
        .query(&mut group.conn(old))
        .expect("SET on the master");
    let _: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(5000)
        .query(&mut group.conn(old))
        .expect("WAIT");
    let killed_at = Instant::now();
    assert_eq!(group.kill_master(), old);
    let new = group.await_promotion(old);
    let promotion_took = killed_at.elapsed();
    assert_ne!(new, old);
    assert_eq!(group.master_port(), new);
    group.restart_data(old);
    assert_eq!(group.master_port(), new);
    assert_eq!(get(&mut group.conn(old), "topo:k").as_deref(), Some("v"));
    report(&format!(
        "sentinel group: a killed master replaced in {promotion_took:?}"
    ));
}

#[test]
fn sharded_cluster_migrates_slots_and_promotes_a_replica() {
    let started = Instant::now();
    let cluster = ShardedCluster::start(3, 1);
    let start_took = started.elapsed();
    let masters = cluster.masters();
    assert_eq!(masters.len(), 3);
    assert_eq!(cluster.ports().len(), 6);
    assert_eq!(&cluster.ports()[..3], &masters[..]);
    let hosts: Vec<String> = masters.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    assert_eq!(
        cluster.url(),
        format!("redis+cluster://{}", hosts.join(","))
    );

    // A whole slot, its keys with their TTLs.
    let slot = cluster.slot_of(b"topo:{a}");
    let from = cluster.master_of(slot);
    let keys: Vec<String> = (0..5).map(|i| format!("topo:{{a}}:{i}")).collect();
    for key in &keys {
        let _: () = redis::cmd("SET")
            .arg(key)
            .arg("v")
            .arg("PX")
            .arg(60_000)
            .query(&mut cluster.conn(from))
            .expect("SET on the slot's master");
    }
    let to = *masters
        .iter()
        .find(|&&m| m != from)
        .expect("another master");
    let migrating = Instant::now();
    cluster.migrate_slot(slot, to);
    let migrate_took = migrating.elapsed();
    assert_eq!(cluster.master_of(slot), to);
    assert!(cluster.keys(from, "topo:{a}:*").is_empty());
    let mut target = cluster.conn(to);
    for key in &keys {
        assert_eq!(get(&mut target, key).as_deref(), Some("v"), "{key}");
        let ttl: i64 = redis::cmd("PTTL")
            .arg(key)
            .query(&mut target)
            .expect("PTTL");
        assert!(ttl > 0 && ttl <= 60_000, "{key}: PTTL {ttl}");
    }

    // A slot held half-way: the source keeps what it holds and sends the
    // rest on with ASK.
    let slot = cluster.slot_of(b"topo:{b}");
    let from = cluster.master_of(slot);
    let to = *masters
        .iter()
        .find(|&&m| m != from)
        .expect("another master");
    for i in 0..4 {
        let _: () = redis::cmd("SET")
            .arg(format!("topo:{{b}}:{i}"))
            .arg(i)
            .query(&mut cluster.conn(from))
            .expect("SET on the slot's master");
    }
    let migration = cluster.begin_migration(slot, to);
    assert_eq!(cluster.move_keys(&migration, 2), 2);
    let mut source = cluster.conn(from);
    let moved = redis::cmd("SET")
        .arg("topo:{b}:new")
        .arg("n")
        .query::<()>(&mut source)
        .expect_err("a key the source lacks is sent on");
    assert_eq!(moved.code(), Some("ASK"), "{moved}");
    let target_addr = format!("127.0.0.1:{to}");
    assert_eq!(
        moved.redirect_node(),
        Some((target_addr.as_str(), slot)),
        "{moved}"
    );
    let mut target = cluster.conn(to);
    let _: () = redis::cmd("ASKING").query(&mut target).expect("ASKING");
    let _: () = redis::cmd("SET")
        .arg("topo:{b}:new")
        .arg("n")
        .query(&mut target)
        .expect("SET after ASKING");
    assert_eq!(cluster.keys(from, "topo:{b}:*").len(), 2);
    cluster.finish_migration(migration);
    assert_eq!(cluster.master_of(slot), to);
    assert_eq!(cluster.keys(to, "topo:{b}:*").len(), 5);

    // A replica promoted.
    let failing_over = Instant::now();
    let promoted = cluster.failover_shard(to);
    let failover_took = failing_over.elapsed();
    assert_ne!(promoted, to);
    assert_eq!(cluster.master_of(slot), promoted);
    assert!(cluster.masters().contains(&promoted));
    assert!(!cluster.masters().contains(&to));
    assert_eq!(
        get(&mut cluster.conn(promoted), "topo:{b}:new").as_deref(),
        Some("n")
    );
    report(&format!(
        "redis cluster: started in {start_took:?}, moved a slot in {migrate_took:?}, \
         promoted a replica in {failover_took:?}"
    ));
}
