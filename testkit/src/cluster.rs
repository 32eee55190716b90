//! [`Cluster`]: the nodes of one test, local processes or external URLs;
//! process control, fault proxies in front of them, side connections.

use std::fmt::Write as _;
use std::sync::OnceLock;
use std::time::Duration;

use crate::env::{server_binary, NODES_ENV};
use crate::eventually;
use crate::node::{LocalNode, Mode, NodeOptions};
use crate::proxy::{Fault, FaultHandle, Links, Proxy};

/// Where a cluster's nodes come from.
enum Nodes {
    Local(Vec<LocalNode>),
    External(Vec<String>),
}

/// A set of Redis nodes for one test.
pub struct Cluster {
    nodes: Nodes,
    /// One per node once [`Cluster::proxied`] was called.
    proxies: Vec<Proxy>,
}

impl Cluster {
    /// Starts `n` local nodes without persistence.
    pub fn local(n: usize) -> Self {
        Self::local_custom(n, &NodeOptions::default())
    }

    /// Starts `n` local nodes with these options (`NodeOptions { aof: true,
    /// ..NodeOptions::default() }` for nodes that keep their keys across
    /// a restart).
    ///
    /// # Panics
    ///
    /// When a node cannot be started (see [`Cluster::try_local`]).
    pub fn local_custom(n: usize, options: &NodeOptions) -> Self {
        Self::try_local(n, options).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Like [`Cluster::local_custom`], but says why a node could not be
    /// started (the server binary is missing, or it never answered) instead
    /// of panicking; the nodes already started are stopped then. For
    /// programs that are not tests, such as the examples.
    pub fn try_local(n: usize, options: &NodeOptions) -> Result<Self, String> {
        // The nodes already started stop when dropped on an error.
        let nodes = (0..n)
            .map(|i| {
                let binary = options
                    .server
                    .as_ref()
                    .map_or_else(|| server_binary(i), |p| p.display().to_string());
                LocalNode::start(binary, options, Mode::Data)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            nodes: Nodes::Local(nodes),
            proxies: Vec::new(),
        })
    }

    /// The first `n` nodes of `QUORUMLOCK_TEST_NODES` when it is set, else
    /// `n` local nodes. Tests using this must not need process control and
    /// must use [`unique`](crate::unique) resource names: other tests use the same nodes
    /// at the same time, and earlier runs may have left keys behind.
    ///
    /// # Panics
    ///
    /// When the variable names fewer than `n` nodes, or a node it names
    /// does not answer `PING` (checked once per test binary).
    pub fn shared(n: usize) -> Self {
        match std::env::var(NODES_ENV) {
            Ok(list) if !list.trim().is_empty() => {
                let urls: Vec<String> = list
                    .split(',')
                    .map(|s| s.trim().to_owned())
                    .filter(|s| !s.is_empty())
                    .collect();
                assert!(
                    urls.len() >= n,
                    "{NODES_ENV} names {} nodes, this test needs {n}",
                    urls.len()
                );
                static REACHABLE: OnceLock<Result<(), String>> = OnceLock::new();
                if let Err(e) = REACHABLE.get_or_init(|| ping_all(&urls)) {
                    panic!("{NODES_ENV}={list}: {e}");
                }
                Self::external(urls.into_iter().take(n).collect())
            }
            _ => Self::local(n),
        }
    }

    /// Nodes that run elsewhere (no process control), as URLs.
    pub fn external(urls: Vec<String>) -> Self {
        Self {
            nodes: Nodes::External(urls),
            proxies: Vec::new(),
        }
    }

    /// True when the nodes are external (no process control).
    pub fn is_external(&self) -> bool {
        matches!(self.nodes, Nodes::External(_))
    }

    /// The number of nodes.
    pub fn len(&self) -> usize {
        match &self.nodes {
            Nodes::Local(n) => n.len(),
            Nodes::External(u) => u.len(),
        }
    }

    /// True when the cluster has no nodes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The node URLs clients use (`rediss://` for TLS nodes).
    pub fn urls(&self) -> Vec<String> {
        match &self.nodes {
            Nodes::Local(nodes) => nodes
                .iter()
                .map(|n| match n.tls_port {
                    Some(tls) => format!("rediss://127.0.0.1:{tls}"),
                    None => format!("redis://127.0.0.1:{}", n.port),
                })
                .collect(),
            Nodes::External(urls) => urls.clone(),
        }
    }

    /// The URL of node `i` (see [`Cluster::urls`]).
    pub fn url(&self, i: usize) -> String {
        self.urls()[i].clone()
    }

    /// The plain URL of node `i` for side connections (the non-TLS port of
    /// a TLS node).
    pub fn side_url(&self, i: usize) -> String {
        match &self.nodes {
            Nodes::Local(nodes) => format!("redis://127.0.0.1:{}", nodes[i].port),
            Nodes::External(urls) => urls[i].clone(),
        }
    }

    /// The node addresses (`127.0.0.1:port`; the TLS port of a TLS node).
    fn addrs(&self) -> Vec<std::net::SocketAddr> {
        (0..self.len())
            .map(|i| {
                let info = redis::IntoConnectionInfo::into_connection_info(self.url(i).as_str())
                    .expect("node url");
                let (host, port) = match info.addr() {
                    redis::ConnectionAddr::Tcp(h, p) => (h.clone(), *p),
                    redis::ConnectionAddr::TcpTls { host, port, .. } => (host.clone(), *port),
                    other => panic!("cannot proxy {other}"),
                };
                std::net::ToSocketAddrs::to_socket_addrs(&(host.as_str(), port))
                    .expect("resolve node")
                    .next()
                    .expect("node address")
            })
            .collect()
    }

    /// Starts a fault-injecting proxy in front of every node (once) and
    /// returns the URLs that go through them, in node order. Control the
    /// faults with [`Cluster::proxy`].
    pub fn proxied(&mut self) -> Vec<String> {
        if self.proxies.is_empty() {
            self.proxies = self.addrs().into_iter().map(Proxy::start).collect();
        }
        (0..self.len())
            .map(|i| with_authority(&self.url(i), &self.proxies[i].addr().to_string()))
            .collect()
    }

    /// A new, separate proxy in front of every node: links for one more
    /// client, scripted apart from [`Cluster::proxied`]'s and from any
    /// other `links()`. Build that client with
    /// `quorumlock::Builder::new(links.urls())`; the proxies stop when the
    /// [`Links`] is dropped.
    pub fn links(&self) -> Links {
        let proxies: Vec<Proxy> = self.addrs().into_iter().map(Proxy::start).collect();
        let urls = (0..self.len())
            .map(|i| with_authority(&self.url(i), &proxies[i].addr().to_string()))
            .collect();
        Links::new(proxies, urls)
    }

    /// The fault switch of node `i`'s proxy.
    ///
    /// # Panics
    ///
    /// When [`Cluster::proxied`] was not called.
    pub fn proxy(&self, i: usize) -> FaultHandle {
        assert!(
            !self.proxies.is_empty(),
            "call Cluster::proxied() before using proxies"
        );
        self.proxies[i].handle()
    }

    /// Every proxy's fault switch, in node order.
    pub fn proxies(&self) -> Vec<FaultHandle> {
        self.proxies.iter().map(Proxy::handle).collect()
    }

    /// Heals every proxy.
    pub fn heal_proxies(&self) {
        for p in &self.proxies {
            p.set(Fault::None);
        }
    }

    fn local_nodes(&mut self) -> &mut Vec<LocalNode> {
        match &mut self.nodes {
            Nodes::Local(n) => n,
            Nodes::External(_) => panic!("this test needs process control: run it on local nodes"),
        }
    }

    /// SIGSTOP: the node keeps accepting TCP connections but answers nothing.
    pub fn pause(&mut self, i: usize) {
        let node = &mut self.local_nodes()[i];
        node.signal("-STOP");
        node.paused = true;
    }

    /// SIGCONT: queued commands run now.
    pub fn resume(&mut self, i: usize) {
        let node = &mut self.local_nodes()[i];
        node.signal("-CONT");
        node.paused = false;
    }

    /// kill -9; the port refuses connections afterwards.
    pub fn kill(&mut self, i: usize) {
        self.local_nodes()[i].stop();
    }

    /// Kills (if running) and starts the node again on the same port; empty
    /// unless it runs with AOF.
    pub fn restart(&mut self, i: usize) {
        self.local_nodes()[i].restart();
    }

    /// Steps node `i`'s wall clock forward by `by` (whole seconds): keys
    /// there whose expiry falls inside the step expire at once, as after an
    /// NTP step on that host. The node must run under libfaketime
    /// ([`crate::valkey_clock_options`]).
    pub fn jump_clock(&mut self, i: usize, by: Duration) {
        self.local_nodes()[i].jump_clock(by);
    }

    /// Whether node `i` can have its clock stepped.
    pub fn has_clock(&self, i: usize) -> bool {
        match &self.nodes {
            Nodes::Local(nodes) => nodes[i].options.faketime.is_some(),
            Nodes::External(_) => false,
        }
    }

    /// A plain synchronous side connection to node `i`, for inspecting and
    /// injecting state behind the client's back.
    pub fn conn(&self, i: usize) -> redis::Connection {
        let client = redis::Client::open(self.side_url(i)).expect("node url");
        client
            .get_connection_with_timeout(Duration::from_secs(2))
            .expect("side connection")
    }

    /// The value of `key` on every node (None where absent or unreachable).
    pub fn values(&self, key: &[u8]) -> Vec<Option<Vec<u8>>> {
        (0..self.len())
            .map(|i| {
                let client = redis::Client::open(self.side_url(i)).ok()?;
                let mut c = client
                    .get_connection_with_timeout(Duration::from_millis(300))
                    .ok()?;
                c.set_read_timeout(Some(Duration::from_millis(300))).ok()?;
                redis::cmd("GET").arg(key).query(&mut c).ok()?
            })
            .collect()
    }

    /// How many nodes hold `key` at all.
    pub fn holders(&self, key: &[u8]) -> usize {
        self.values(key).iter().filter(|v| v.is_some()).count()
    }

    /// Waits (bounded by `limit`) until exactly `count` nodes hold `key`.
    /// An acquire returns at the quorum-th yes, so the last nodes' `SET`s
    /// may still be on their way when it does: a test that checks every
    /// node waits for them rather than reading once.
    pub async fn held_on(&self, key: impl AsRef<[u8]>, count: usize, limit: Duration) -> bool {
        eventually(limit, || self.holders(key.as_ref()) == count).await
    }

    /// Waits (bounded by `limit`) until no node holds `key`: the way every
    /// test checks that nothing was left behind. True when none does.
    pub async fn released(&self, key: impl AsRef<[u8]>, limit: Duration) -> bool {
        eventually(limit, || self.holders(key.as_ref()) == 0).await
    }

    /// Runs a command on node `i` through a side connection.
    pub fn exec<T: redis::FromRedisValue>(&self, i: usize, cmd: &redis::Cmd) -> T {
        cmd.query(&mut self.conn(i)).expect("side command")
    }

    /// `ACL SETUSER` with `rules` (the user's name first) on every node.
    pub fn acl_setuser(&self, rules: &[&str]) {
        for i in 0..self.len() {
            let _: () = self.exec(i, redis::cmd("ACL").arg("SETUSER").arg(rules));
        }
    }

    /// Every node's URL, logging in as `user` with `password`.
    pub fn urls_as(&self, user: &str, password: &str) -> Vec<String> {
        self.urls()
            .iter()
            .map(|u| u.replacen("redis://", &format!("redis://{user}:{password}@"), 1))
            .collect()
    }

    /// Waits (bounded: 10 s) until node `i` reports an `uptime_in_seconds`
    /// of at least `age` — what the restart quarantine reads. Panics if it
    /// never does.
    pub async fn wait_uptime(&self, i: usize, age: Duration) {
        let reached = eventually(Duration::from_secs(10), || {
            let info: String = self.exec(i, redis::cmd("INFO").arg("server"));
            let up = info
                .lines()
                .find_map(|l| l.strip_prefix("uptime_in_seconds:"))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap_or(0);
            Duration::from_secs(up) >= age
        })
        .await;
        assert!(reached, "node {i} never reached an uptime of {age:?}");
    }

    /// Each node's log, for failure reports.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        match &self.nodes {
            Nodes::Local(nodes) => {
                for (i, n) in nodes.iter().enumerate() {
                    out.push_str(&n.titled_log(&format!("node {i}")));
                }
            }
            Nodes::External(urls) => {
                let _ = writeln!(
                    out,
                    "----- external nodes {} -----\ntheir logs are where they run \
                     (for the Docker nodes: docker/cluster.sh logs)",
                    urls.join(",")
                );
            }
        }
        out
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // The nodes stop when dropped, after this.
        if std::thread::panicking() {
            eprintln!("{}", self.logs());
        }
    }
}

/// `url` with its `host:port` replaced (user info, path and scheme kept).
fn with_authority(url: &str, authority: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("URL with a scheme");
    let (userinfo, rest) = match rest.rfind('@') {
        Some(at) => rest.split_at(at + 1),
        None => ("", rest),
    };
    let path = rest.find('/').map_or("", |p| &rest[p..]);
    format!("{scheme}://{userinfo}{authority}{path}")
}

/// Checks that every node answers `PING`, so that a test run against nodes
/// that are not up fails with one clear message instead of many timeouts.
fn ping_all(urls: &[String]) -> Result<(), String> {
    for url in urls {
        let answered = redis::Client::open(url.as_str())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
            .and_then(|mut c| {
                c.set_read_timeout(Some(Duration::from_secs(2)))?;
                redis::cmd("PING").query::<String>(&mut c)
            });
        if let Err(e) = answered {
            return Err(format!(
                "node {url} does not answer PING ({e}); are the nodes up \
                 (docker/cluster.sh up)?"
            ));
        }
    }
    Ok(())
}
