//! [`SentinelGroup`]: one master, its replicas and the Sentinels that
//! watch them, as local processes; failovers on demand.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::block_on_eventually;
use crate::env::server_binary;
use crate::node::{connect, info_field, replicates, role, LocalNode, Mode, NodeOptions};

/// How long a group may take to start, or to settle after a failover.
const SETTLE_WITHIN: Duration = Duration::from_secs(30);

/// How [`SentinelGroup::start`] builds the group.
#[derive(Debug, Clone)]
pub struct GroupOptions {
    /// Replicas of the master. Default 1.
    pub replicas: usize,
    /// Sentinels watching it; their quorum is a majority of them. Default 3.
    pub sentinels: usize,
    /// Data servers with `appendonly yes` and `appendfsync always`, their
    /// directories on `/dev/shm` when there is one (as
    /// [`NodeOptions::in_memory_dir`]). Default false: no persistence.
    pub aof: bool,
    /// `sentinel down-after-milliseconds`. Default 1 s.
    pub down_after: Duration,
    /// `sentinel failover-timeout`. Default 3 s.
    pub failover_timeout: Duration,
    /// The binary every process of the group runs, data servers and
    /// Sentinels (e.g. [`valkey_binary`](crate::valkey_binary)). Default
    /// `None`: [`server_binary`].
    pub server: Option<PathBuf>,
    /// When set, every process also serves TLS with these arguments
    /// ([`NodeOptions::tls_args`]), replication and the Sentinels' links
    /// run over TLS (`tls-replication yes`), and [`SentinelGroup::url`]
    /// names the Sentinels' TLS ports (`rediss+sentinel://`). Side
    /// connections stay plain; the helpers that name a master by port
    /// ([`SentinelGroup::failover`] and those after it) are for groups
    /// without TLS. Default `None`.
    pub tls_args: Option<Vec<String>>,
}

impl Default for GroupOptions {
    fn default() -> Self {
        Self {
            replicas: 1,
            sentinels: 3,
            aof: false,
            down_after: Duration::from_secs(1),
            failover_timeout: Duration::from_secs(3),
            server: None,
            tls_args: None,
        }
    }
}

/// A Redis Sentinel group for one test: a master, its replicas and the
/// Sentinels monitoring them under one name, all on loopback. The
/// processes are killed and their directories removed on drop; every log
/// is printed when the test is failing.
///
/// ```no_run
/// use quorumlock_testkit::{GroupOptions, SentinelGroup};
///
/// let group = SentinelGroup::start("locks", &GroupOptions::default());
/// let old = group.master_port();
/// let new = group.failover();
/// assert_ne!(old, new);
/// ```
pub struct SentinelGroup {
    name: String,
    // Declared first so that they stop first: no failover while the data
    // servers go down.
    sentinels: Vec<LocalNode>,
    /// The master first, then the replicas, as started.
    data: Vec<LocalNode>,
}

impl SentinelGroup {
    /// Starts the group and returns once every replica's link to the
    /// master is up and every Sentinel lists every replica and every other
    /// Sentinel.
    ///
    /// # Panics
    ///
    /// When `options.sentinels` is 0, a process cannot be started, or the
    /// group does not settle within 30 s (every log is printed then).
    pub fn start(name: &str, options: &GroupOptions) -> Self {
        assert!(options.sentinels > 0, "a Sentinel group needs a Sentinel");
        let tls = options
            .tls_args
            .as_ref()
            .map(|_| vec!["--tls-replication".to_owned(), "yes".to_owned()]);
        let data_options = NodeOptions {
            aof: options.aof,
            in_memory_dir: options.aof,
            tls_args: options.tls_args.clone(),
            args: tls.clone().unwrap_or_default(),
            ..NodeOptions::default()
        };
        let spawn = |i: usize, node: &NodeOptions, mode: Mode| {
            let binary = options
                .server
                .as_ref()
                .map_or_else(|| server_binary(i), |p| p.display().to_string());
            LocalNode::start(binary, node, mode).unwrap_or_else(|e| panic!("{e}"))
        };
        let mut group = Self {
            name: name.to_owned(),
            sentinels: Vec::new(),
            data: vec![spawn(0, &data_options, Mode::Data)],
        };
        // Replicas and Sentinels reach the master on its TLS port, if any.
        let master = group.data[0].tls_port.unwrap_or(group.data[0].port);
        let replica_options = NodeOptions {
            args: [replica_of(master), data_options.args.clone()].concat(),
            ..data_options.clone()
        };
        for i in 1..=options.replicas {
            group.data.push(spawn(i, &replica_options, Mode::Data));
        }
        // Sentinels find the replicas in the master's INFO, which they read
        // every 10 s after the first time: all of them must be there then.
        group.settle("every replica's link to the master is up", || {
            group.data[1..].iter().all(|r| replicates(r.port, master))
        });
        let conf = format!(
            "sentinel resolve-hostnames no\n\
             sentinel monitor {name} 127.0.0.1 {master} {quorum}\n\
             sentinel down-after-milliseconds {name} {down}\n\
             sentinel failover-timeout {name} {failover}\n",
            quorum = options.sentinels / 2 + 1,
            down = options.down_after.as_millis(),
            failover = options.failover_timeout.as_millis(),
        );
        let sentinel_options = NodeOptions {
            tls_args: options.tls_args.clone(),
            args: tls.unwrap_or_default(),
            ..NodeOptions::default()
        };
        for i in 0..options.sentinels {
            let mode = Mode::Sentinel { conf: conf.clone() };
            group.sentinels.push(spawn(i, &sentinel_options, mode));
        }
        group.settle("every Sentinel lists every replica and Sentinel", || {
            group.sentinels.iter().all(|s| {
                let listed = |what: &str, flags: &str, count: usize| {
                    group.sentinel_list(s.port, what).is_some_and(|list| {
                        list.len() == count
                            && list
                                .iter()
                                .all(|e| e.get("flags").map(String::as_str) == Some(flags))
                    })
                };
                listed("REPLICAS", "slave", options.replicas)
                    && listed("SENTINELS", "sentinel", options.sentinels - 1)
            })
        });
        group
    }

    /// The URL of the group for clients:
    /// `redis+sentinel://127.0.0.1:<s1>,127.0.0.1:<s2>,…/<name>`
    /// (`rediss+sentinel://` and the TLS ports with [`GroupOptions::tls_args`]).
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .sentinels
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.tls_port.unwrap_or(s.port)))
            .collect();
        let tls = if self.data[0].tls_port.is_some() {
            "s"
        } else {
            ""
        };
        format!("redis{tls}+sentinel://{}/{}", hosts.join(","), self.name)
    }

    /// Each Sentinel's own URL (`redis://127.0.0.1:<port>`).
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels
            .iter()
            .map(|s| format!("redis://127.0.0.1:{}", s.port))
            .collect()
    }

    /// The name the Sentinels monitor the master under.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The data servers' ports: the first master, then the replicas, as
    /// started (roles change with failovers).
    pub fn data_ports(&self) -> Vec<u16> {
        self.data.iter().map(|n| n.port).collect()
    }

    /// The port of the data server that reports `ROLE` master (asked of
    /// the servers, not the Sentinels). Between a promotion and the old
    /// master's demotion two do: the one with more replicas connected.
    ///
    /// # Panics
    ///
    /// When no running data server reports master.
    pub fn master_port(&self) -> u16 {
        self.data
            .iter()
            .filter(|n| n.is_running() && role(n.port).as_deref() == Some("master"))
            .map(|n| n.port)
            .max_by_key(|&p| connected_replicas(p))
            .unwrap_or_else(|| panic!("no data server of {} reports ROLE master", self.name))
    }

    /// A failover ordered through a Sentinel (`SENTINEL FAILOVER`, asked
    /// again while it answers `NOGOODSLAVE` or `INPROG`). Returns the new
    /// master's port once it reports master, every Sentinel names it, and
    /// every other running data server (the old master included) is its
    /// replica with the link up.
    ///
    /// The Sentinels demote a still-running old master only 10 to 20 s
    /// after the switch (they wait 8 s, then read its INFO every 10 s); this
    /// sends it that same `REPLICAOF` as soon as every Sentinel names the
    /// new master, so that a failover settles in a few seconds.
    ///
    /// # Panics
    ///
    /// When the group does not settle within 30 s (every log is printed).
    pub fn failover(&self) -> u16 {
        let (old, new) = self.switch();
        self.demote(old, new);
        new
    }

    /// A forced failover (`SENTINEL FAILOVER`) that leaves the old master
    /// running, still a master with its keys, as the Sentinels do for 10
    /// to 20 s: two masters at once. Returns the old master's port and the
    /// new one's, once every Sentinel names the new one
    /// ([`SentinelGroup::demote`] ends it).
    ///
    /// # Panics
    ///
    /// When the group does not settle within 30 s (every log is printed).
    pub fn switch(&self) -> (u16, u16) {
        let old = self.master_port();
        let sentinel = self.sentinels.first().expect("a group has Sentinels").port;
        self.settle("a Sentinel accepts SENTINEL FAILOVER", || {
            let reply = connect(sentinel).and_then(|mut c| {
                redis::cmd("SENTINEL")
                    .arg("FAILOVER")
                    .arg(&self.name)
                    .query::<()>(&mut c)
            });
            match reply {
                Ok(()) => true,
                Err(e) => {
                    let text = e.to_string();
                    assert!(
                        text.contains("NOGOODSLAVE") || text.contains("INPROG"),
                        "SENTINEL FAILOVER {}: {text}",
                        self.name
                    );
                    std::thread::sleep(Duration::from_millis(100));
                    false
                }
            }
        });
        (old, self.await_promotion(old))
    }

    /// Sends `old`, still a master after `new` was promoted, the
    /// `REPLICAOF new` the Sentinels send only 10 to 20 s later, and waits
    /// until every other running data server replicates `new` with the
    /// link up. What `old` took meanwhile is lost: it resynchronizes from
    /// `new`.
    ///
    /// # Panics
    ///
    /// When the group does not settle within 30 s.
    pub fn demote(&self, old: u16, new: u16) {
        if role(old).as_deref() == Some("master") {
            let _: redis::RedisResult<()> = connect(old).and_then(|mut c| {
                redis::cmd("REPLICAOF")
                    .arg("127.0.0.1")
                    .arg(new)
                    .query(&mut c)
            });
        }
        self.settle("every other data server replicates the new master", || {
            self.data
                .iter()
                .filter(|n| n.is_running() && n.port != new)
                .all(|n| replicates(n.port, new))
        });
    }

    /// Waits until every Sentinel has read the data server on `port` report
    /// the replica role (`SENTINEL REPLICAS`, `role-reported`). A Sentinel
    /// reads a replica's role only every 10 s: one that last read `port` as
    /// a master (before [`SentinelGroup::demote`], which is quicker than the
    /// Sentinels) and sees it report master again more than 8 s later —
    /// promoted by the next failover — takes it for a stray master and
    /// turns it back into a replica, which aborts that failover. The next
    /// failover of this group waits for this first.
    ///
    /// # Panics
    ///
    /// When that does not happen within 30 s.
    pub fn await_sentinels_read_replica(&self, port: u16) {
        self.settle(
            "every Sentinel reads the demoted master as a replica",
            || {
                self.sentinels
                    .iter()
                    .all(|s| self.role_reported(s.port, port).as_deref() == Some("slave"))
            },
        );
    }

    /// The role Sentinel `sentinel` last read from the replica on `port`.
    fn role_reported(&self, sentinel: u16, port: u16) -> Option<String> {
        let port = port.to_string();
        self.sentinel_list(sentinel, "REPLICAS")?
            .into_iter()
            .find(|replica| replica.get("port") == Some(&port))?
            .remove("role-reported")
    }

    /// Waits until a running data server other than `old` reports master
    /// and every Sentinel names it — after [`SentinelGroup::kill_master`],
    /// the Sentinels' own failover — and returns its port.
    ///
    /// # Panics
    ///
    /// When that does not happen within 30 s.
    pub fn await_promotion(&self, old: u16) -> u16 {
        let mut new = old;
        self.settle("a new master that every Sentinel names", || {
            let Some(named) = self
                .sentinels
                .iter()
                .find_map(|s| self.sentinel_master(s.port))
            else {
                return false;
            };
            new = named;
            new != old
                && role(new).as_deref() == Some("master")
                && self
                    .sentinels
                    .iter()
                    .all(|s| self.sentinel_master(s.port) == Some(new))
        });
        new
    }

    /// Kills the current master (SIGKILL; it stays down) and returns its
    /// port; the Sentinels fail over after [`GroupOptions::down_after`]
    /// ([`SentinelGroup::await_promotion`] waits for it).
    ///
    /// # Panics
    ///
    /// As [`SentinelGroup::master_port`].
    pub fn kill_master(&mut self) -> u16 {
        let port = self.master_port();
        self.node(port).stop();
        port
    }

    /// Stops the data server on `port` (`SIGSTOP`): it neither answers nor
    /// replicates until [`SentinelGroup::resume_data`]. A master's writes
    /// meanwhile reach no paused replica.
    ///
    /// # Panics
    ///
    /// When `port` is not a data server of the group.
    pub fn pause_data(&mut self, port: u16) {
        self.node(port).signal("-STOP");
    }

    /// Stops every replica (`SIGSTOP`) and cuts its replication link on
    /// the master (`CLIENT KILL TYPE replica`, so nothing already sent
    /// reaches it when it resumes): the master's writes from now on are
    /// on the master alone. Returns the replicas' ports, for
    /// [`SentinelGroup::resume_data`].
    ///
    /// # Panics
    ///
    /// As [`SentinelGroup::master_port`], or when the master refuses.
    pub fn cut_replicas(&mut self) -> Vec<u16> {
        let master = self.master_port();
        let replicas: Vec<u16> = self
            .data_ports()
            .into_iter()
            .filter(|&p| p != master)
            .collect();
        for &port in &replicas {
            self.pause_data(port);
        }
        let _: () = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("replica")
            .query(&mut self.conn(master))
            .unwrap_or_else(|e| panic!("cut the replication links of {master}: {e}"));
        replicas
    }

    /// Lets the data server on `port` run again (`SIGCONT`).
    ///
    /// # Panics
    ///
    /// When `port` is not a data server of the group.
    pub fn resume_data(&mut self, port: u16) {
        self.node(port).signal("-CONT");
    }

    /// Kills (if running) and starts the data server on `port` again — with
    /// its keys only under [`GroupOptions::aof`] — as a replica of the
    /// current master when one runs (a master otherwise), and waits until
    /// its link is up.
    ///
    /// # Panics
    ///
    /// When `port` is not a data server of the group, or it does not
    /// restart or reach its master within 30 s.
    pub fn restart_data(&mut self, port: u16) {
        self.node(port).stop();
        let master = self
            .data
            .iter()
            .filter(|n| n.is_running() && role(n.port).as_deref() == Some("master"))
            .map(|n| n.port)
            .max_by_key(|&p| connected_replicas(p));
        let node = self.node(port);
        node.options.args = master.map(replica_of).unwrap_or_default();
        node.restart();
        if let Some(master) = master {
            self.settle("the restarted server replicates the master", || {
                replicates(port, master)
            });
        }
    }

    /// A side connection to the data server on `port`.
    ///
    /// # Panics
    ///
    /// When it does not answer.
    pub fn conn(&self, port: u16) -> redis::Connection {
        connect(port).unwrap_or_else(|e| panic!("connect to data server {port}: {e}"))
    }

    /// `KEYS pattern` on the data server on `port`.
    pub fn keys(&self, port: u16, pattern: &str) -> Vec<Vec<u8>> {
        redis::cmd("KEYS")
            .arg(pattern)
            .query(&mut self.conn(port))
            .unwrap_or_else(|e| panic!("KEYS on {port}: {e}"))
    }

    /// Every process's log under a header naming it, for failure reports.
    pub fn logs(&self) -> String {
        let data = self.data.iter().map(|n| {
            let role = role(n.port).unwrap_or_else(|| "down".into());
            n.titled_log(&format!("{} data server ({role})", self.name))
        });
        let sentinels = self
            .sentinels
            .iter()
            .map(|n| n.titled_log(&format!("{} sentinel", self.name)));
        data.chain(sentinels).collect()
    }

    fn node(&mut self, port: u16) -> &mut LocalNode {
        self.data
            .iter_mut()
            .find(|n| n.port == port)
            .unwrap_or_else(|| panic!("no data server on port {port}"))
    }

    /// `SENTINEL <what> <name>` (REPLICAS, SENTINELS) as field maps.
    fn sentinel_list(&self, port: u16, what: &str) -> Option<Vec<HashMap<String, String>>> {
        redis::cmd("SENTINEL")
            .arg(what)
            .arg(&self.name)
            .query(&mut connect(port).ok()?)
            .ok()
    }

    /// The master port the Sentinel on `port` names.
    fn sentinel_master(&self, port: u16) -> Option<u16> {
        let (_host, master): (String, u16) = redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(&self.name)
            .query(&mut connect(port).ok()?)
            .ok()?;
        Some(master)
    }

    /// Waits (bounded) until `check` holds; panics naming `what` otherwise.
    fn settle(&self, what: &str, check: impl FnMut() -> bool) {
        assert!(
            block_on_eventually(SETTLE_WITHIN, check),
            "Sentinel group {}: not within {SETTLE_WITHIN:?}: {what}",
            self.name
        );
    }
}

impl Drop for SentinelGroup {
    fn drop(&mut self) {
        // The processes stop when dropped, after this.
        if std::thread::panicking() {
            eprintln!("{}", self.logs());
        }
    }
}

/// `--replicaof 127.0.0.1 <master>`.
fn replica_of(master: u16) -> Vec<String> {
    vec!["--replicaof".into(), "127.0.0.1".into(), master.to_string()]
}

/// How many replicas the master on `port` has connected (0 when it does
/// not answer).
fn connected_replicas(port: u16) -> usize {
    info_field(port, "replication", "connected_slaves")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}
