//! The members of one row of the matrix, running: N plain servers, N
//! Redis Clusters of one shard, or N Sentinel groups of a master and a
//! replica; and the two faults put on the last member: +20 ms on every
//! reply (a proxy in front of its master, which the clients of the slowed
//! cells reach it through) and down (every data server of the member
//! stopped with `SIGSTOP`: it keeps its connections and answers nothing).

use std::cell::Cell;
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

    pub const ALL: [Condition; 3] = [Condition::Healthy, Condition::Slow, Condition::Down];
}

/// N members of one kind, running.
pub struct Members {
    pub kind: Kind,
    urls: Vec<String>,
    /// Restart quarantine of the clients (members that fail over need it).
    quarantine: Option<Duration>,
    /// The last member's data servers, stopped for [`Condition::Down`];
    /// its master first.
    victim: Vec<u16>,
    /// In front of the last member's master.
    proxy: Proxy,
    /// Connections it had accepted when the clients were last pointed at
    /// it: a slowed cell must have brought more.
    routed_at: Cell<u64>,
    plain: Option<Cluster>,
    clusters: Vec<ShardedCluster>,
    groups: Vec<SentinelGroup>,
}

impl Members {
    /// Starts `n` members of `kind` and, for those that fail over, waits
    /// until every server has been up for `quarantine`.
    pub fn start(kind: Kind, n: usize, quarantine: Duration) -> Self {
        let (mut plain, mut clusters, mut groups) = (None, Vec::new(), Vec::new());
        let (urls, victim) = match kind {
            Kind::Plain => {
                let cluster = Cluster::local(n);
                let urls = cluster.urls();
                let victim = vec![port_of(&urls[n - 1])];
                plain = Some(cluster);
                (urls, victim)
            }
            Kind::Cluster => {
                clusters = (0..n).map(|_| ShardedCluster::start(1, 0)).collect();
                let urls = clusters.iter().map(ShardedCluster::url).collect();
                (urls, clusters[n - 1].ports())
            }
            Kind::Sentinel => {
                let options = GroupOptions {
                    // No failover while a member is down on purpose: its
                    // replica is stopped with it, and a cell is seconds.
                    down_after: Duration::from_secs(120),
                    ..GroupOptions::default()
                };
                groups = (0..n)
                    .map(|i| SentinelGroup::start(&format!("matrix{i}"), &options))
                    .collect();
                let urls = groups.iter().map(SentinelGroup::url).collect();
                (urls, groups[n - 1].data_ports())
            }
        };
        let quarantine = (kind != Kind::Plain).then_some(quarantine);
        if let Some(quarantine) = quarantine {
            let ports: Vec<u16> = clusters
                .iter()
                .flat_map(ShardedCluster::ports)
                .chain(groups.iter().flat_map(SentinelGroup::data_ports))
                .collect();
            crate::servers::await_uptime(&ports, quarantine);
        }
        Members {
            kind,
            urls,
            quarantine,
            proxy: Proxy::start(([127, 0, 0, 1], victim[0]).into()),
            victim,
            routed_at: Cell::new(0),
            plain,
            clusters,
            groups,
        }
    }

    /// Points the clients that connect from now on at the last member's
    /// master through the proxy (`slowed`) or directly, and returns the
    /// members' addresses for them. A plain server is named by the proxy's
    /// address; a cluster's master announces the proxy's port in its slot
    /// map (`cluster-announce-port`); a group's Sentinels are told to
    /// monitor the master at the proxy's port, which is the address they
    /// give clients.
    pub fn route(&self, slowed: bool) -> Vec<String> {
        let proxy = &self.proxy;
        let (master, port) = (self.victim[0], proxy.addr().port());
        self.routed_at.set(proxy.handle().accepted());
        let mut urls = self.urls.clone();
        match self.kind {
            Kind::Plain if slowed => {
                let last = urls.len() - 1;
                urls[last] = format!("redis://{}", proxy.addr());
            }
            Kind::Plain => {}
            Kind::Cluster => {
                let announced = if slowed { port } else { 0 };
                let mut conn = side(master);
                redis::cmd("CONFIG")
                    .arg("SET")
                    .arg("cluster-announce-port")
                    .arg(announced)
                    .exec(&mut conn)
                    .unwrap_or_else(|e| panic!("announce port {announced} on {master}: {e}"));
            }
            Kind::Sentinel => {
                let group = self.groups.last().expect("sentinel members");
                let at = if slowed { port } else { master };
                for url in group.sentinel_urls() {
                    let mut conn = side(port_of(&url));
                    let mut sentinel = |args: &[&str]| {
                        redis::cmd("SENTINEL")
                            .arg(args)
                            .exec(&mut conn)
                            .unwrap_or_else(|e| panic!("SENTINEL {args:?} at {url}: {e}"))
                    };
                    let (name, at) = (group.name(), at.to_string());
                    sentinel(&["REMOVE", name]);
                    sentinel(&["MONITOR", name, "127.0.0.1", &at, "2"]);
                    sentinel(&["SET", name, "down-after-milliseconds", "120000"]);
                }
            }
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

    /// Puts the last member in `condition` (from healthy) until the
    /// returned guard is dropped.
    pub fn apply(&mut self, condition: Condition) -> Undo<'_> {
        match condition {
            Condition::Healthy => {}
            Condition::Slow => {
                assert!(
                    self.proxy.handle().accepted() > self.routed_at.get(),
                    "the clients of a slowed {} member do not go through its proxy",
                    self.kind.name()
                );
                self.proxy.set(Fault::latency(Duration::from_millis(20)));
            }
            Condition::Down => self.stop(true),
        }
        Undo {
            members: self,
            condition,
        }
    }

    /// Stops the last member's data servers (`SIGSTOP`), or lets them run
    /// again.
    fn stop(&mut self, stopped: bool) {
        let last = self.urls.len() - 1;
        if let Some(cluster) = &mut self.plain {
            match stopped {
                true => cluster.pause(last),
                false => cluster.resume(last),
            }
        }
        for &port in &self.victim {
            if let Some(cluster) = self.clusters.last_mut() {
                match stopped {
                    true => cluster.pause(port),
                    false => cluster.resume(port),
                }
            }
            if let Some(group) = self.groups.last_mut() {
                match stopped {
                    true => group.pause_data(port),
                    false => group.resume_data(port),
                }
            }
        }
    }
}

/// Ends a condition when dropped.
pub struct Undo<'a> {
    members: &'a mut Members,
    condition: Condition,
}

impl Drop for Undo<'_> {
    fn drop(&mut self) {
        match self.condition {
            Condition::Healthy => {}
            Condition::Slow => {
                self.members.proxy.set(Fault::None);
                self.members.route(false);
            }
            Condition::Down => self.members.stop(false),
        }
    }
}

fn side(port: u16) -> redis::Connection {
    redis::Client::open(format!("redis://127.0.0.1:{port}"))
        .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
        .unwrap_or_else(|e| panic!("side connection to {port}: {e}"))
}

fn port_of(url: &str) -> u16 {
    url.rsplit(':')
        .next()
        .and_then(|p| p.trim_end_matches('/').parse().ok())
        .expect("port in node URL")
}
