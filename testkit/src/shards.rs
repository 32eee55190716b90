//! [`ShardedCluster`]: a real Redis Cluster of local processes; slot
//! migrations (whole, or held half-way) and replica promotions on demand.

use std::time::Duration;

use crate::block_on_eventually;
use crate::env::server_binary;
use crate::node::{connect, replicates, role, LocalNode, Mode, NodeOptions};

/// How long the cluster may take to form, or to settle after a change.
const SETTLE_WITHIN: Duration = Duration::from_secs(30);

/// `cluster-node-timeout` of every node.
const NODE_TIMEOUT: Duration = Duration::from_millis(1000);

/// The number of hash slots.
const SLOTS: usize = 16384;

/// Keys moved per `MIGRATE` by [`ShardedCluster::finish_migration`].
const BATCH: usize = 100;

/// A Redis Cluster for one test: `shards` masters sharing the 16384 slots
/// evenly, each with its replicas, all on loopback. The processes are
/// killed and their directories removed on drop; every log is printed
/// when the test is failing.
///
/// ```no_run
/// use quorumlock_testkit::ShardedCluster;
///
/// let cluster = ShardedCluster::start(3, 1);
/// let slot = cluster.slot_of(b"lock:a");
/// let from = cluster.master_of(slot);
/// let to = cluster.masters().into_iter().find(|&m| m != from).unwrap();
/// cluster.migrate_slot(slot, to);
/// assert_eq!(cluster.master_of(slot), to);
/// ```
pub struct ShardedCluster {
    /// The masters in shard order, then the replicas (shard by shard), as
    /// started (roles change with failovers).
    nodes: Vec<LocalNode>,
    /// Each node's cluster id, in the order of `nodes`.
    ids: Vec<String>,
    shards: usize,
}

/// A slot half-way between two masters ([`ShardedCluster::begin_migration`]):
/// the source answers for the keys it still holds and sends clients on
/// (`ASK`) for the others, which the target accepts after `ASKING`.
#[derive(Debug)]
#[must_use = "finish it with ShardedCluster::finish_migration"]
pub struct SlotMigration {
    /// The slot being moved.
    pub slot: u16,
    /// The master it leaves.
    pub from: u16,
    /// The master it goes to.
    pub to: u16,
}

/// One range of `CLUSTER SLOTS`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Range {
    first: u16,
    last: u16,
    master: u16,
    /// Sorted.
    replicas: Vec<u16>,
}

impl ShardedCluster {
    /// Starts `shards` masters with `replicas` replicas each in cluster mode
    /// (`cluster-node-timeout` 1 s), gives each master an even share of
    /// the slots (`CLUSTER ADDSLOTSRANGE`), joins them (`CLUSTER MEET`) and
    /// attaches the replicas (`CLUSTER REPLICATE`). Returns once every node
    /// reports `cluster_state:ok` and the same `CLUSTER SLOTS`, and every
    /// replica's link is up.
    ///
    /// # Panics
    ///
    /// When `shards` is 0, a process cannot be started, or the cluster
    /// does not form within 30 s (every log is printed then).
    pub fn start(shards: usize, replicas: usize) -> Self {
        Self::start_with(shards, replicas, &NodeOptions::default())
    }

    /// As [`start`](Self::start), each node started with `options`. With
    /// [`NodeOptions::tls_args`] the nodes also serve TLS, their bus is
    /// TLS (`tls-cluster yes`), and [`url`](Self::url) names their TLS
    /// ports (`rediss+cluster://`); side connections stay plain.
    ///
    /// # Panics
    ///
    /// As [`start`](Self::start); also with TLS and replicas (not
    /// supported: a replica's link reads as the master's TLS port).
    pub fn start_with(shards: usize, replicas: usize, options: &NodeOptions) -> Self {
        assert!(shards > 0, "a cluster needs at least one shard");
        assert!(
            options.tls_args.is_none() || replicas == 0,
            "a TLS cluster has no replicas here"
        );
        let mode = Mode::Cluster {
            node_timeout: NODE_TIMEOUT,
        };
        let nodes: Vec<LocalNode> = (0..shards * (1 + replicas))
            .map(|i| {
                LocalNode::start(server_binary(i), options, mode.clone())
                    .unwrap_or_else(|e| panic!("{e}"))
            })
            .collect();
        let ids = nodes
            .iter()
            .map(|n| query(n.port, redis::cmd("CLUSTER").arg("MYID")))
            .collect();
        let cluster = Self { nodes, ids, shards };
        let mut expected = Vec::with_capacity(shards);
        for shard in 0..shards {
            let master = cluster.nodes[shard].port;
            let (first, last) = (shard * SLOTS / shards, (shard + 1) * SLOTS / shards - 1);
            cluster.run(
                master,
                redis::cmd("CLUSTER")
                    .arg("ADDSLOTSRANGE")
                    .arg(first)
                    .arg(last),
            );
            let range = shards + shard * replicas..shards + (shard + 1) * replicas;
            let mut replicas: Vec<u16> = cluster.nodes[range].iter().map(|n| n.port).collect();
            replicas.sort_unstable();
            expected.push(Range {
                first: u16::try_from(first).expect("slot"),
                last: u16::try_from(last).expect("slot"),
                master,
                replicas,
            });
        }
        let first = cluster.nodes[0].port;
        for node in &cluster.nodes[1..] {
            cluster.run(
                first,
                redis::cmd("CLUSTER")
                    .arg("MEET")
                    .arg("127.0.0.1")
                    .arg(node.port),
            );
        }
        for (shard, range) in expected.iter().enumerate() {
            for &replica in &range.replicas {
                // It must have heard of its master (through gossip) first.
                cluster.settle("every replica knows its master", || {
                    redis::cmd("CLUSTER")
                        .arg("REPLICATE")
                        .arg(&cluster.ids[shard])
                        .query::<()>(&mut cluster.conn(replica))
                        .is_ok()
                });
            }
        }
        cluster.settle("every node is ok and lists the planned slots", || {
            cluster
                .nodes
                .iter()
                .all(|n| cluster_state_ok(n.port) && slot_map(n.port).as_ref() == Some(&expected))
                && expected
                    .iter()
                    .all(|r| r.replicas.iter().all(|&p| replicates(p, r.master)))
        });
        cluster
    }

    /// The URL of the cluster for clients, naming the masters it started
    /// with: `redis+cluster://127.0.0.1:<p1>,127.0.0.1:<p2>,…`
    /// (`rediss+cluster://` and the TLS ports when the nodes serve TLS).
    pub fn url(&self) -> String {
        let nodes = &self.nodes[..self.shards];
        let hosts: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.tls_port.unwrap_or(n.port)))
            .collect();
        let tls = if nodes[0].tls_port.is_some() { "s" } else { "" };
        format!("redis{tls}+cluster://{}", hosts.join(","))
    }

    /// Every node's port: the masters it started with in shard order, then
    /// the replicas.
    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|n| n.port).collect()
    }

    /// The ports of the masters serving slots now, in slot order.
    pub fn masters(&self) -> Vec<u16> {
        let mut masters: Vec<u16> = Vec::new();
        for range in self.current_map() {
            if !masters.contains(&range.master) {
                masters.push(range.master);
            }
        }
        masters
    }

    /// The hash slot of `key` (`CLUSTER KEYSLOT`).
    pub fn slot_of(&self, key: &[u8]) -> u16 {
        query(
            self.nodes[0].port,
            redis::cmd("CLUSTER").arg("KEYSLOT").arg(key),
        )
    }

    /// The port of the master serving `slot` now, as `CLUSTER SLOTS` of a
    /// node that answers says.
    ///
    /// # Panics
    ///
    /// When no master serves it.
    pub fn master_of(&self, slot: u16) -> u16 {
        owner(&self.current_map(), slot).unwrap_or_else(|| panic!("no master serves slot {slot}"))
    }

    /// Moves `slot` and its keys (TTLs kept) to the master on `to`:
    /// [`begin_migration`](Self::begin_migration), then
    /// [`finish_migration`](Self::finish_migration).
    pub fn migrate_slot(&self, slot: u16, to: u16) {
        let migration = self.begin_migration(slot, to);
        self.finish_migration(migration);
    }

    /// Starts moving `slot` to the master on `to`: `CLUSTER SETSLOT
    /// IMPORTING` on the target, `MIGRATING` on the source. No key moves
    /// yet: [`move_keys`](Self::move_keys) moves some, so that clients
    /// meet the slot half-moved (`ASK`).
    ///
    /// # Panics
    ///
    /// When `to` already serves the slot or is not a node of the cluster.
    pub fn begin_migration(&self, slot: u16, to: u16) -> SlotMigration {
        let from = self.master_of(slot);
        assert_ne!(from, to, "slot {slot} is already served by {to}");
        let setslot = |port: u16, state: &str, other: u16| {
            let id = self.id(other);
            self.run(
                port,
                redis::cmd("CLUSTER")
                    .arg("SETSLOT")
                    .arg(slot)
                    .arg(state)
                    .arg(id),
            );
        };
        setslot(to, "IMPORTING", from);
        setslot(from, "MIGRATING", to);
        SlotMigration { slot, from, to }
    }

    /// Moves up to `count` of the migrating slot's keys (`CLUSTER
    /// GETKEYSINSLOT`, then one `MIGRATE … KEYS`, TTLs kept); returns how
    /// many moved (0 once the source holds none).
    pub fn move_keys(&self, migration: &SlotMigration, count: usize) -> usize {
        let keys: Vec<Vec<u8>> = query(
            migration.from,
            redis::cmd("CLUSTER")
                .arg("GETKEYSINSLOT")
                .arg(migration.slot)
                .arg(count),
        );
        if !keys.is_empty() {
            self.run(
                migration.from,
                redis::cmd("MIGRATE")
                    .arg("127.0.0.1")
                    .arg(migration.to)
                    .arg("")
                    .arg(0)
                    .arg(5000)
                    .arg("KEYS")
                    .arg(&keys),
            );
        }
        keys.len()
    }

    /// Moves the migrating slot's remaining keys, assigns the slot to the
    /// target (`CLUSTER SETSLOT … NODE` on the target, the source and every
    /// other master) and waits until every node's `CLUSTER SLOTS` agrees.
    ///
    /// # Panics
    ///
    /// When a command fails, or the nodes do not agree within 30 s.
    pub fn finish_migration(&self, migration: SlotMigration) {
        while self.move_keys(&migration, BATCH) > 0 {}
        let SlotMigration { slot, from, to } = migration;
        let others = self.masters().into_iter().filter(|&m| m != from && m != to);
        for port in [to, from].into_iter().chain(others) {
            self.run(
                port,
                redis::cmd("CLUSTER")
                    .arg("SETSLOT")
                    .arg(slot)
                    .arg("NODE")
                    .arg(self.id(to)),
            );
        }
        self.settle("every node agrees on the migrated slot", || {
            self.agreed_map()
                .is_some_and(|map| owner(&map, slot) == Some(to))
        });
    }

    /// Promotes the replica of the master on `master` (`CLUSTER FAILOVER`
    /// on the replica). Returns the replica's port once it reports master,
    /// every node's `CLUSTER SLOTS` shows it serving the old master's slots,
    /// and the old master replicates it with the link up.
    ///
    /// # Panics
    ///
    /// When that shard has no replica, or it does not settle within 30 s.
    pub fn failover_shard(&self, master: u16) -> u16 {
        let master_id = self.id(master);
        let listing: String = query(master, redis::cmd("CLUSTER").arg("NODES"));
        let replica = listing
            .lines()
            .find_map(|line| {
                let fields: Vec<&str> = line.split(' ').collect();
                let flags = fields.get(2)?;
                let is_replica = flags.split(',').any(|f| f == "slave")
                    && !flags.contains("fail")
                    && *fields.get(3)? == master_id;
                let port = fields
                    .get(1)?
                    .split(['@', ','])
                    .next()?
                    .rsplit(':')
                    .next()?;
                is_replica.then(|| port.parse::<u16>().ok()).flatten()
            })
            .unwrap_or_else(|| panic!("the shard of master {master} has no replica"));
        let served: Vec<Range> = self
            .current_map()
            .into_iter()
            .filter(|r| r.master == master)
            .collect();
        self.run(replica, redis::cmd("CLUSTER").arg("FAILOVER"));
        self.settle("the promoted replica serves its shard everywhere", || {
            role(replica).as_deref() == Some("master")
                && self.agreed_map().is_some_and(|map| {
                    served
                        .iter()
                        .all(|r| (r.first..=r.last).all(|s| owner(&map, s) == Some(replica)))
                })
                && replicates(master, replica)
        });
        replica
    }

    /// Stops the node on `port` (`SIGSTOP`): it keeps its connections and
    /// answers nothing until [`ShardedCluster::resume`].
    ///
    /// # Panics
    ///
    /// When `port` is not a node of the cluster.
    pub fn pause(&mut self, port: u16) {
        self.node(port).signal("-STOP");
    }

    /// Lets the node on `port` run again (`SIGCONT`).
    ///
    /// # Panics
    ///
    /// When `port` is not a node of the cluster.
    pub fn resume(&mut self, port: u16) {
        self.node(port).signal("-CONT");
    }

    fn node(&mut self, port: u16) -> &mut LocalNode {
        self.nodes
            .iter_mut()
            .find(|n| n.port == port)
            .unwrap_or_else(|| panic!("no cluster node on port {port}"))
    }

    /// A side connection to the node on `port` (plain: keys of other
    /// nodes' slots answer `MOVED`).
    ///
    /// # Panics
    ///
    /// When it does not answer.
    pub fn conn(&self, port: u16) -> redis::Connection {
        connect(port).unwrap_or_else(|e| panic!("connect to cluster node {port}: {e}"))
    }

    /// `KEYS pattern` on the node on `port` (its own keys only).
    pub fn keys(&self, port: u16, pattern: &str) -> Vec<Vec<u8>> {
        query(port, redis::cmd("KEYS").arg(pattern))
    }

    /// Every node's log under a header naming it, for failure reports.
    pub fn logs(&self) -> String {
        self.nodes
            .iter()
            .zip(&self.ids)
            .map(|(n, id)| {
                let role = role(n.port).unwrap_or_else(|| "down".into());
                n.titled_log(&format!("cluster node {id} ({role})"))
            })
            .collect()
    }

    fn id(&self, port: u16) -> &str {
        self.nodes
            .iter()
            .position(|n| n.port == port)
            .map(|i| self.ids[i].as_str())
            .unwrap_or_else(|| panic!("no cluster node on port {port}"))
    }

    /// `CLUSTER SLOTS` of the first node that answers.
    fn current_map(&self) -> Vec<Range> {
        self.nodes
            .iter()
            .find_map(|n| slot_map(n.port))
            .expect("no cluster node answers CLUSTER SLOTS")
    }

    /// `CLUSTER SLOTS` when every node answers the same.
    fn agreed_map(&self) -> Option<Vec<Range>> {
        let first = slot_map(self.nodes[0].port)?;
        self.nodes[1..]
            .iter()
            .all(|n| slot_map(n.port).as_ref() == Some(&first))
            .then_some(first)
    }

    /// Runs `cmd` on `port`; panics with the reply when it fails.
    fn run(&self, port: u16, cmd: &redis::Cmd) {
        let _: redis::Value = query(port, cmd);
    }

    /// Waits (bounded) until `check` holds; panics naming `what` otherwise.
    fn settle(&self, what: &str, check: impl FnMut() -> bool) {
        assert!(
            block_on_eventually(SETTLE_WITHIN, check),
            "Redis Cluster: not within {SETTLE_WITHIN:?}: {what}"
        );
    }
}

impl Drop for ShardedCluster {
    fn drop(&mut self) {
        // The processes stop when dropped, after this.
        if std::thread::panicking() {
            eprintln!("{}", self.logs());
        }
    }
}

/// `cmd`'s reply from the node on `port`; panics when it fails.
fn query<T: redis::FromRedisValue>(port: u16, cmd: &redis::Cmd) -> T {
    connect(port)
        .and_then(|mut c| cmd.query(&mut c))
        .unwrap_or_else(|e| panic!("{} on cluster node {port}: {e}", command_line(cmd)))
}

/// The words of `cmd`, for messages.
fn command_line(cmd: &redis::Cmd) -> String {
    cmd.args_iter()
        .map(|a| match a {
            redis::Arg::Simple(bytes) => String::from_utf8_lossy(bytes).into_owned(),
            _ => "…".into(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// True when the node on `port` reports `cluster_state:ok`.
fn cluster_state_ok(port: u16) -> bool {
    connect(port)
        .and_then(|mut c| redis::cmd("CLUSTER").arg("INFO").query::<String>(&mut c))
        .is_ok_and(|info| info.lines().any(|l| l.trim() == "cluster_state:ok"))
}

/// `CLUSTER SLOTS` of the node on `port`, sorted by first slot; None when
/// it does not answer.
fn slot_map(port: u16) -> Option<Vec<Range>> {
    use redis::Value;
    let reply: Vec<Vec<Value>> = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query(&mut connect(port).ok()?)
        .ok()?;
    let int = |v: &Value| match v {
        Value::Int(i) => u16::try_from(*i).ok(),
        _ => None,
    };
    let node_port = |v: &Value| match v {
        Value::Array(fields) => fields.get(1).and_then(int),
        _ => None,
    };
    let mut map = reply
        .iter()
        .map(|r| {
            let ports = r
                .get(2..)?
                .iter()
                .map(node_port)
                .collect::<Option<Vec<u16>>>()?;
            let (&master, replicas) = ports.split_first()?;
            let mut replicas = replicas.to_vec();
            replicas.sort_unstable();
            Some(Range {
                first: int(r.first()?)?,
                last: int(r.get(1)?)?,
                master,
                replicas,
            })
        })
        .collect::<Option<Vec<Range>>>()?;
    map.sort_by_key(|r| r.first);
    Some(map)
}

/// The master serving `slot` in `map`.
fn owner(map: &[Range], slot: u16) -> Option<u16> {
    map.iter()
        .find(|r| (r.first..=r.last).contains(&slot))
        .map(|r| r.master)
}
