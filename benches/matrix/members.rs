//! The members of one row of the matrix, running: N plain servers (the
//! last one also behind a fault-injecting proxy), N Redis Clusters of one shard, or
//! N Sentinel groups of a master and a replica; and the two faults put on
//! the last member: +20 ms on every reply (the proxy; plain servers only)
//! and down (every data server of the member stopped with `SIGSTOP`: it
//! keeps its connections and answers nothing).

use std::time::Duration;

use quorumlock::{Builder, Durability, Redlock};
use quorumlock_testkit::{Cluster, Fault, GroupOptions, Proxy, SentinelGroup, ShardedCluster};

/// What each member is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Plain,
    Cluster,
    Sentinel,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Plain => "plain",
            Kind::Cluster => "cluster",
            Kind::Sentinel => "sentinel",
        }
    }
}

/// The state of the last member while a cell runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Condition {
    Healthy,
    /// +20 ms on every reply of the member.
    Slow,
    /// The member's servers stopped.
    Down,
}

impl Condition {
    pub fn name(self) -> &'static str {
        match self {
            Condition::Healthy => "healthy",
            Condition::Slow => "+20 ms",
            Condition::Down => "down",
        }
    }

    /// The conditions a kind of member can be put in: the proxy sits in
    /// front of a plain server only (a cluster's or a group's servers
    /// announce their own addresses, which a client then dials directly).
    pub fn of(kind: Kind) -> &'static [Condition] {
        match kind {
            Kind::Plain => &[Condition::Healthy, Condition::Slow, Condition::Down],
            Kind::Cluster | Kind::Sentinel => &[Condition::Healthy, Condition::Down],
        }
    }
}

/// N members of one kind, running.
pub struct Members {
    pub kind: Kind,
    urls: Vec<String>,
    /// Restart quarantine of the clients (members that fail over need it).
    quarantine: Option<Duration>,
    /// The last member's data servers, stopped for [`Condition::Down`].
    victim: Vec<u16>,
    /// In front of the last plain server.
    proxy: Option<Proxy>,
    _plain: Option<Cluster>,
    _clusters: Vec<ShardedCluster>,
    _groups: Vec<SentinelGroup>,
}

impl Members {
    /// Starts `n` members of `kind` and, for those that fail over, waits
    /// until every server has been up for `quarantine`.
    pub fn start(kind: Kind, n: usize, quarantine: Duration) -> Self {
        let mut members = Members {
            kind,
            urls: Vec::new(),
            quarantine: None,
            victim: Vec::new(),
            proxy: None,
            _plain: None,
            _clusters: Vec::new(),
            _groups: Vec::new(),
        };
        match kind {
            Kind::Plain => {
                let cluster = Cluster::local(n);
                members.urls = cluster.urls();
                let port = port_of(&members.urls[n - 1]);
                let proxy = Proxy::start(([127, 0, 0, 1], port).into());
                members.victim = vec![port];
                members.proxy = Some(proxy);
                members._plain = Some(cluster);
            }
            Kind::Cluster => {
                let clusters: Vec<ShardedCluster> =
                    (0..n).map(|_| ShardedCluster::start(1, 0)).collect();
                members.urls = clusters.iter().map(ShardedCluster::url).collect();
                members.victim = clusters[n - 1].ports();
                members._clusters = clusters;
            }
            Kind::Sentinel => {
                let options = GroupOptions {
                    // No failover while a member is down on purpose: its
                    // replica is stopped with it, and a cell is seconds.
                    down_after: Duration::from_secs(120),
                    ..GroupOptions::default()
                };
                let groups: Vec<SentinelGroup> = (0..n)
                    .map(|i| SentinelGroup::start(&format!("matrix{i}"), &options))
                    .collect();
                members.urls = groups.iter().map(SentinelGroup::url).collect();
                members.victim = groups[n - 1].data_ports();
                members._groups = groups;
            }
        }
        if kind != Kind::Plain {
            members.quarantine = Some(quarantine);
            let ports: Vec<u16> = members
                ._clusters
                .iter()
                .flat_map(ShardedCluster::ports)
                .chain(members._groups.iter().flat_map(SentinelGroup::data_ports))
                .collect();
            crate::servers::await_uptime(&ports, quarantine);
        }
        members
    }

    /// The members' addresses for a client that runs in `condition`: the
    /// last plain server's is the proxy's when it is to be slowed.
    pub fn urls(&self, condition: Condition) -> Vec<String> {
        let mut urls = self.urls.clone();
        if let (Condition::Slow, Some(proxy)) = (condition, &self.proxy) {
            urls[self.urls.len() - 1] = format!("redis://{}", proxy.addr());
        }
        urls
    }

    /// A client of `urls` as a user of these members would build it: the
    /// defaults, with restart quarantine and durable votes on every
    /// replica where the members fail over.
    pub async fn client(&self, urls: &[String]) -> Redlock {
        let durable = (self.kind == Kind::Sentinel).then_some(Durability::Replicas(1));
        Builder::new(urls.to_vec())
            .restart_quarantine(self.quarantine)
            .durable_votes(durable)
            .build()
            .await
            .unwrap_or_else(|e| panic!("a client of {} members: {e}", self.kind.name()))
    }

    /// Puts the last member in `condition` (from healthy) and returns what
    /// undoes it.
    pub fn apply(&self, condition: Condition) -> Undo<'_> {
        match condition {
            Condition::Healthy => Undo::Nothing,
            Condition::Slow => {
                let proxy = self.proxy.as_ref().expect("+20 ms needs the proxy");
                proxy.set(Fault::latency(Duration::from_millis(20)));
                Undo::Proxy(proxy)
            }
            Condition::Down => {
                let pids: Vec<i32> = self.victim.iter().map(|&p| process_id(p)).collect();
                signal(&pids, libc::SIGSTOP);
                Undo::Continue(pids)
            }
        }
    }
}

/// Ends a condition when dropped.
pub enum Undo<'a> {
    Nothing,
    Proxy(&'a Proxy),
    Continue(Vec<i32>),
}

impl Drop for Undo<'_> {
    fn drop(&mut self) {
        match self {
            Undo::Nothing => {}
            Undo::Proxy(proxy) => proxy.set(Fault::None),
            Undo::Continue(pids) => signal(pids, libc::SIGCONT),
        }
    }
}

fn signal(pids: &[i32], sig: libc::c_int) {
    for &pid in pids {
        // SAFETY: kill only sends a signal to a server this bench started.
        let rc = unsafe { libc::kill(pid, sig) };
        assert_eq!(rc, 0, "signal {sig} to server pid {pid}");
    }
}

/// The pid of the server on `port` (`INFO server`).
fn process_id(port: u16) -> i32 {
    let mut conn = redis::Client::open(format!("redis://127.0.0.1:{port}"))
        .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
        .unwrap_or_else(|e| panic!("side connection to {port}: {e}"));
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query(&mut conn)
        .unwrap_or_else(|e| panic!("INFO server on {port}: {e}"));
    info.lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("INFO server on {port} has no process_id"))
}

fn port_of(url: &str) -> u16 {
    url.rsplit(':')
        .next()
        .and_then(|p| p.trim_end_matches('/').parse().ok())
        .expect("port in node URL")
}
