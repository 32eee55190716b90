//! What a node must show before a new connection to it carries a lock
//! command: which server it is (`run_id` from `INFO server`), so that one
//! server listed under two addresses never votes twice; that it cannot
//! evict the lock's keys (`maxmemory` with an evicting `maxmemory-policy`);
//! and, for a master a replica can replace, that durable votes wait for
//! every one of its replicas (`INFO replication`: [`Failover`]). The link
//! runs the reads on every new connection ([`Gate::admit`]); reading and
//! judging the replies is pure.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use futures::future::OptionFuture;
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{Cmd, ErrorKind, RedisError, Value};
use tracing::warn;

use crate::error::NodeFailureKind;

/// The server identity every node's current connection reported, shared
/// by the nodes of one client.
#[derive(Debug)]
pub(crate) struct Registry {
    labels: Box<[Box<str>]>,
    ids: Mutex<Vec<Option<Arc<str>>>>,
}

impl Registry {
    /// For the nodes `labels` (`host:port/db`), in list order.
    pub(crate) fn new(labels: &[String]) -> Arc<Self> {
        Arc::new(Self {
            labels: labels.iter().map(|l| l.as_str().into()).collect(),
            ids: Mutex::new(vec![None; labels.len()]),
        })
    }

    /// Records that node `index` is the server `run_id`; `Err` with the
    /// other node's index when another node is that server (node `index`
    /// then records nothing).
    pub(crate) fn claim(&self, index: usize, run_id: &Arc<str>) -> Result<(), usize> {
        let mut ids = self.ids.lock().unwrap_or_else(PoisonError::into_inner);
        let other = ids
            .iter()
            .enumerate()
            .position(|(i, id)| i != index && id.as_deref() == Some(&**run_id));
        if let Some(id) = ids.get_mut(index) {
            *id = other.is_none().then(|| run_id.clone());
        }
        other.map_or(Ok(()), Err)
    }

    /// Node `index`'s label.
    pub(crate) fn label(&self, index: usize) -> &str {
        self.labels.get(index).map_or("?", |l| l)
    }
}

/// Whether a member's master can be replaced by one of its replicas, and
/// what its votes wait for then.
///
/// The rule (`docs/members.md`, "The rule"): a master that can fail over
/// votes only when durable votes wait for every replica it has. A
/// promoted replica then has every lock the old master granted, and a
/// deposed master still accepting writes cannot grant: the replicas that
/// follow the new master no longer acknowledge it. Restart quarantine
/// covers the first and not the second, so it is not enough alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failover {
    /// A single server: it does not fail over (a restart is quarantine's).
    Never,
    /// A Sentinel group's or a Redis Cluster's master; `durable`, the
    /// replicas a vote waits for, when durable votes are on.
    Replicas {
        /// The replicas a durable vote waits for.
        durable: Option<u32>,
    },
}

/// Why a master with `online` replicas may not vote under `failover`:
/// its votes must wait for exactly its replicas (none without durable
/// votes, which only a master without replicas may have).
pub(crate) fn replicas_refusal(failover: Failover, online: u32) -> Option<NodeFailureKind> {
    let Failover::Replicas { durable } = failover else {
        return None;
    };
    match durable {
        None if online == 0 => None,
        Some(r) if r == online => None,
        required => Some(NodeFailureKind::Replicas { online, required }),
    }
}

/// The replicas `INFO replication` lists online (`slaveN:…,state=online,…`).
pub(crate) fn online_replicas(info: &str) -> u32 {
    let online = info.lines().filter(|line| {
        let Some(rest) = line.strip_prefix("slave") else {
            return false;
        };
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        digits > 0 && rest[digits..].starts_with(':') && rest.contains("state=online")
    });
    u32::try_from(online.count()).unwrap_or(u32::MAX)
}

/// One node's admission rules and the refusal of its last connection.
#[derive(Debug)]
pub(crate) struct Gate {
    index: usize,
    registry: Arc<Registry>,
    check_eviction: bool,
    failover: Failover,
    refused: Mutex<Option<NodeFailureKind>>,
    info_warned: AtomicBool,
    config_warned: AtomicBool,
}

/// Marks the error a refused connection fails with.
const REFUSED: &str = "quorumlock refused the node";

/// What the identity read checks, for the warning when it cannot.
const SAME: &str = "this node is not another listed node's server (one server must not vote twice)";

/// What the eviction read checks, for the warning when it cannot.
const EVICTS: &str =
    "maxmemory-policy keeps the lock's keys (an evicting policy loses locks and fencing counters)";

impl Gate {
    /// Node `index` of `registry`; with `check_eviction`, a node that can
    /// evict keys is refused; a master that can fail over is judged by its
    /// replicas as `failover` says.
    pub(crate) fn new(
        index: usize,
        registry: Arc<Registry>,
        check_eviction: bool,
        failover: Failover,
    ) -> Self {
        Self {
            index,
            registry,
            check_eviction,
            failover,
            refused: Mutex::new(None),
            info_warned: AtomicBool::new(false),
            config_warned: AtomicBool::new(false),
        }
    }

    fn label(&self) -> &str {
        self.registry.label(self.index)
    }

    /// Why the last connection was refused, if it was.
    pub(crate) fn refused(&self) -> Option<NodeFailureKind> {
        self.refused
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Why the last connection was refused, when `error` is that refusal.
    pub(crate) fn refusal(&self, error: &RedisError) -> Option<NodeFailureKind> {
        if error.kind() != ErrorKind::Client || error.detail() != Some(REFUSED) {
            return None;
        }
        self.refused()
    }

    /// Reads the server's identity, eviction settings and (for a master
    /// that can fail over) replicas on a new connection (one round trip)
    /// and admits it, or refuses it with an error
    /// [`refusal`](Self::refusal) explains. A server that does not permit
    /// the reads (ACL, renamed commands) is admitted, with one warning per
    /// node.
    pub(crate) async fn admit(&self, conn: &MultiplexedConnection) -> Result<(), RedisError> {
        // One round trip: the reads go out together on the connection.
        let ask = |cmd: Cmd| {
            let mut conn = conn.clone();
            async move { conn.req_packed_command(&cmd).await.and_then(permitted) }
        };
        let config = redis::cmd("CONFIG").arg("GET").arg("maxmemory*").clone();
        let config = self.check_eviction.then(|| ask(config));
        let replication = self.fails_over().then(|| ask(info("replication")));
        let (info, config, replication) = futures::join!(
            ask(info("server")),
            OptionFuture::from(config),
            OptionFuture::from(replication),
        );
        let (info, config, replication) = (info?, config.transpose()?, replication.transpose()?);
        // Replicas missing (down, or resynchronizing after a failover) do
        // not keep the connection out: a release must get through, and the
        // durable wait refuses the votes meanwhile. Said once here.
        let verdict = match self.replicas_verdict(replication.flatten()) {
            Some(kind) if !kind.is_misconfigured() => {
                warn!(node = %self.label(), reason = %kind, "node admitted, not voting yet");
                None
            }
            replicas => replicas,
        };
        self.decide(self.judge(info, config.flatten()).or(verdict))
    }

    /// Judges a master's replicas again on a connection in use (`INFO
    /// replication`'s reply `replication`): what [`admit`](Self::admit)
    /// checks, for health, where a replica lost since the connection
    /// opened must show.
    pub(crate) fn readmit(&self, replication: Value) -> Result<(), RedisError> {
        let verdict = self.replicas_verdict(permitted(replication)?);
        self.decide(verdict)
    }

    /// Records `verdict` (`None`: admitted) and fails with the refusal.
    fn decide(&self, verdict: Option<NodeFailureKind>) -> Result<(), RedisError> {
        *self.refused.lock().unwrap_or_else(PoisonError::into_inner) = verdict.clone();
        let Some(kind) = verdict else {
            return Ok(());
        };
        warn!(node = %self.label(), reason = %kind, "node refused: it does not vote");
        let refused = (ErrorKind::Client, "node refused", REFUSED.to_owned());
        Err(RedisError::from(refused))
    }

    /// Whether the member's master fails over ([`Failover::Replicas`]).
    pub(crate) fn fails_over(&self) -> bool {
        self.failover != Failover::Never
    }

    /// Why the replicas in `replication` (`INFO replication`'s text) keep
    /// the master from voting; `None` when they do not, or were not read.
    fn replicas_verdict(&self, replication: Option<Value>) -> Option<NodeFailureKind> {
        let info = replication.and_then(text)?;
        replicas_refusal(self.failover, online_replicas(&info))
    }

    /// Why the connection must be refused, if it must; `None` for a read
    /// that was not permitted.
    fn judge(&self, info: Option<Value>, config: Option<Value>) -> Option<NodeFailureKind> {
        let info = info.and_then(text);
        match info.as_deref().map(parse_run_id) {
            Some(Some(run_id)) => {
                if let Err(other) = self.registry.claim(self.index, &Arc::from(run_id)) {
                    let other = self.registry.label(other).to_owned();
                    return Some(NodeFailureKind::SameServer { other });
                }
            }
            Some(None) => self.warn_once(&self.info_warned, "INFO server has no run_id", SAME),
            None => self.warn_once(&self.info_warned, "INFO is not permitted", SAME),
        }
        if !self.check_eviction {
            return None;
        }
        match config.and_then(pairs) {
            Some(pairs) => evicting(&pairs)
                .map(|(policy, maxmemory)| NodeFailureKind::Evicts { policy, maxmemory }),
            None => {
                self.warn_once(&self.config_warned, "CONFIG GET is not permitted", EVICTS);
                None
            }
        }
    }

    /// Warns once per `flag` that `what` leaves the check of `unchecked`
    /// undone.
    fn warn_once(&self, flag: &AtomicBool, what: &str, unchecked: &str) {
        if !flag.swap(true, Ordering::Relaxed) {
            warn!(node = %self.label(), "{what}: cannot check that {unchecked}");
        }
    }
}

/// The message of [`Builder::build`](crate::Builder::build) for the
/// nodes `labels` whose connections were refused (`refused`: each node's
/// index and reason), if the list must be refused.
pub(crate) fn build_refusal(
    labels: &[String],
    refused: impl IntoIterator<Item = (usize, NodeFailureKind)>,
) -> Option<String> {
    let label = |i: usize| labels.get(i).map_or("?", String::as_str);
    refused.into_iter().find_map(|(i, kind)| match kind {
        NodeFailureKind::SameServer { other } => Some(format!(
            "nodes {other} and {} are the same server (one run_id): it would vote twice; \
             list each independent Redis server once",
            label(i)
        )),
        NodeFailureKind::Evicts { policy, maxmemory } => Some(format!(
            "node {}: maxmemory {maxmemory} with maxmemory-policy {policy} can evict the \
             lock's keys (a lock lost early, a fencing counter reset); set \
             maxmemory-policy noeviction, or accept it with Builder::allow_eviction(true) \
             (quorumlock --allow-eviction)",
            label(i)
        )),
        kind @ NodeFailureKind::Replicas { .. } if kind.is_misconfigured() => Some(format!(
            "member {}: {kind}: set Builder::durable_votes (quorumlock --durable-replicas) to \
             its number of replicas",
            label(i)
        )),
        _ => None,
    })
}

/// A reply, `None` when the command was not permitted (`NOPERM` from an
/// ACL, `ERR unknown command` when renamed away); an error for any other
/// error reply (`LOADING`, `BUSY`: the connection fails as a command would).
fn permitted(value: Value) -> Result<Option<Value>, RedisError> {
    match value {
        Value::ServerError(e) if matches!(e.code(), "NOPERM" | "ERR") => Ok(None),
        other => other.extract_error().map(Some),
    }
}

/// A bulk or simple string reply as text; `None` for an error reply.
pub(crate) fn text(value: Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => String::from_utf8(bytes).ok(),
        Value::SimpleString(s) | Value::VerbatimString { text: s, .. } => Some(s),
        _ => None,
    }
}

/// The name–value pairs of a `CONFIG GET` reply (an array, or a map with
/// RESP3); `None` for an error reply.
pub(crate) fn pairs(value: Value) -> Option<Vec<(String, String)>> {
    match value {
        Value::Array(items) => {
            let items: Vec<String> = items.into_iter().filter_map(text).collect();
            Some(
                items
                    .chunks_exact(2)
                    .map(|p| (p[0].clone(), p[1].clone()))
                    .collect(),
            )
        }
        Value::Map(items) => Some(
            items
                .into_iter()
                .filter_map(|(k, v)| Some((text(k)?, text(v)?)))
                .collect(),
        ),
        _ => None,
    }
}

/// `INFO section`: `server` says which server a node is (its `run_id`, a
/// new one every time a server starts), read on each new connection and
/// right behind each vote under restart quarantine, to name the server
/// that cast it ([`parse_run_id`]); `replication`, a master's replicas,
/// for [`Failover`].
pub(crate) fn info(section: &str) -> Cmd {
    redis::cmd("INFO").arg(section).clone()
}

/// Reads `run_id` from the text of `INFO server` ([`info`]).
pub(crate) fn parse_run_id(info: &str) -> Option<&str> {
    info.lines()
        .find_map(|line| line.strip_prefix("run_id:"))
        .map(str::trim)
        .filter(|id| !id.is_empty())
}

/// The policy and memory limit when the settings `CONFIG GET maxmemory*`
/// returned can evict a lock's keys: any policy but `noeviction` once
/// `maxmemory` is set. `allkeys-*` evicts lock keys and fencing counters,
/// `volatile-*` evicts keys with an expiry — every lock key, before its
/// TTL. `maxmemory 0` is no limit: nothing is evicted.
pub(crate) fn evicting(config: &[(String, String)]) -> Option<(String, u64)> {
    let get = |name: &str| {
        config
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    };
    let maxmemory = get("maxmemory")?.trim().parse::<u64>().ok()?;
    let policy = get("maxmemory-policy")?.trim().to_ascii_lowercase();
    (maxmemory > 0 && policy != "noeviction").then_some((policy, maxmemory))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(maxmemory: &str, policy: &str) -> Vec<(String, String)> {
        [
            ("maxmemory", maxmemory),
            ("maxmemory-samples", "5"),
            ("maxmemory-policy", policy),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
    }

    #[test]
    fn every_policy_but_noeviction_evicts_lock_keys_once_memory_is_limited() {
        for policy in [
            "allkeys-lru",
            "allkeys-lfu",
            "allkeys-random",
            "volatile-lru",
            "volatile-lfu",
            "volatile-random",
            "volatile-ttl",
        ] {
            assert_eq!(
                evicting(&config("1000000", policy)),
                Some((policy.to_owned(), 1_000_000)),
                "{policy}"
            );
            assert_eq!(
                evicting(&config("0", policy)),
                None,
                "{policy} without limit"
            );
        }
        assert_eq!(evicting(&config("1000000", "noeviction")), None);
        assert_eq!(evicting(&config("1000000", "NoEviction")), None);
        assert_eq!(evicting(&[]), None, "settings not returned");
    }

    #[test]
    fn run_id_is_parsed_from_info() {
        let info = "# Server\r\nredis_version:7.0.15\r\nrun_id:7a2f8a22\r\nuptime_in_seconds:4\r\n";
        assert_eq!(parse_run_id(info), Some("7a2f8a22"));
        assert_eq!(parse_run_id("run_id:\r\n"), None);
        assert_eq!(parse_run_id("nothing"), None);
    }

    #[test]
    fn one_server_is_claimed_by_one_node() {
        let registry = Registry::new(&["a".to_owned(), "b".to_owned(), "c".to_owned()]);
        let (x, y): (Arc<str>, Arc<str>) = ("x".into(), "y".into());
        assert_eq!(registry.claim(0, &x), Ok(()));
        assert_eq!(
            registry.claim(0, &x),
            Ok(()),
            "a reconnect to the same server"
        );
        assert_eq!(registry.claim(2, &x), Err(0));
        assert_eq!(registry.claim(1, &y), Ok(()));
        // Node 0 now reaches another server: x is free again.
        assert_eq!(registry.claim(0, &Arc::from("z")), Ok(()));
        assert_eq!(registry.claim(2, &x), Ok(()));
        assert_eq!(registry.label(2), "c");
    }

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    fn gate(check_eviction: bool) -> Gate {
        let registry = Registry::new(&["a:1/0".to_owned(), "b:1/0".to_owned()]);
        registry.claim(0, &Arc::from("x")).ok();
        Gate::new(1, registry, check_eviction, Failover::Never)
    }

    #[test]
    fn a_master_that_fails_over_votes_only_with_every_replica_waited_for() {
        let never = Failover::Never;
        let plain = |durable| Failover::Replicas { durable };
        assert_eq!(replicas_refusal(never, 3), None);
        // Nothing to fail over to: nothing to wait for.
        assert_eq!(replicas_refusal(plain(None), 0), None);
        assert_eq!(replicas_refusal(plain(Some(0)), 0), None);
        assert_eq!(replicas_refusal(plain(Some(2)), 2), None);
        let refused = |online, required| Some(NodeFailureKind::Replicas { online, required });
        // Unsafe, whatever the quarantine: a configuration error.
        assert_eq!(replicas_refusal(plain(None), 1), refused(1, None));
        assert_eq!(replicas_refusal(plain(Some(1)), 2), refused(2, Some(1)));
        // Replicas missing: no vote until they are back, not an error.
        assert_eq!(replicas_refusal(plain(Some(2)), 1), refused(1, Some(2)));
        let misconfigured =
            |online, required| NodeFailureKind::Replicas { online, required }.is_misconfigured();
        assert!(misconfigured(1, None) && misconfigured(2, Some(1)));
        assert!(!misconfigured(1, Some(2)));
        let text = NodeFailureKind::Replicas {
            online: 1,
            required: Some(2),
        }
        .to_string();
        assert!(text.contains("1 of the 2 replicas"), "{text}");
    }

    #[test]
    fn online_replicas_are_counted_from_info_replication() {
        let info = "# Replication\r\nrole:master\r\nconnected_slaves:3\r\n\
            slave0:ip=127.0.0.1,port=7001,state=online,offset=10,lag=0\r\n\
            slave1:ip=127.0.0.1,port=7002,state=wait_bgsave,offset=0,lag=0\r\n\
            slave12:ip=127.0.0.1,port=7003,state=online,offset=10,lag=1\r\n\
            slave_read_repl_offset:10\r\nmaster_repl_offset:10\r\n";
        assert_eq!(online_replicas(info), 2);
        let replica = "# Replication\r\nrole:slave\r\nslave_repl_offset:3\r\n\
            slave_priority:100\r\nslave_read_only:1\r\nconnected_slaves:0\r\n";
        assert_eq!(online_replicas(replica), 0);
    }

    #[test]
    fn a_node_is_refused_for_another_node_s_server_or_an_evicting_policy() {
        let info = |id: &str| Some(bulk(&format!("# Server\r\nrun_id:{id}\r\n")));
        let evicts = || {
            Some(Value::Array(
                ["maxmemory", "100", "maxmemory-policy", "allkeys-lru"]
                    .map(bulk)
                    .into(),
            ))
        };
        let other = "a:1/0".to_owned();
        let same = NodeFailureKind::SameServer { other };
        assert_eq!(gate(true).judge(info("x"), None), Some(same));
        let (policy, maxmemory) = ("allkeys-lru".to_owned(), 100);
        let kind = NodeFailureKind::Evicts { policy, maxmemory };
        assert_eq!(gate(true).judge(info("y"), evicts()), Some(kind.clone()));
        // Eviction allowed (Builder::allow_eviction).
        assert_eq!(gate(false).judge(info("y"), evicts()), None);
        // Reads not permitted: admitted.
        assert_eq!(gate(true).judge(None, None), None);
        // Why the connection was refused, only for the refusal's own error.
        let gate = gate(true);
        let refusal = RedisError::from((ErrorKind::Client, "node refused", REFUSED.to_owned()));
        assert_eq!(gate.refusal(&refusal), None, "nothing refused yet");
        *gate.refused.lock().unwrap_or_else(PoisonError::into_inner) = Some(kind.clone());
        assert_eq!(gate.refused(), Some(kind.clone()));
        assert_eq!(gate.refusal(&refusal), Some(kind));
        let other = RedisError::from((ErrorKind::Client, "other", "another".to_owned()));
        let io = RedisError::from((ErrorKind::Io, "io", REFUSED.to_owned()));
        assert_eq!((gate.refusal(&other), gate.refusal(&io)), (None, None));
    }

    #[test]
    fn build_names_the_refused_nodes() {
        let labels = ["a:1/0".to_owned(), "b:1/0".to_owned()];
        let other = "a:1/0".to_owned();
        let same = NodeFailureKind::SameServer { other };
        let message = build_refusal(&labels, [(1, same)]).unwrap_or_default();
        assert!(
            message.starts_with("nodes a:1/0 and b:1/0 are the same server"),
            "{message}"
        );
        let evicts = NodeFailureKind::Evicts {
            policy: "volatile-ttl".to_owned(),
            maxmemory: 9,
        };
        let message = build_refusal(&labels, [(0, evicts)]).unwrap_or_default();
        assert!(
            message.starts_with("node a:1/0: maxmemory 9 with maxmemory-policy volatile-ttl"),
            "{message}"
        );
        // A reason that is not a refusal (another server answered) does not stop the build.
        let changed = NodeFailureKind::ServerChanged;
        assert_eq!(build_refusal(&labels, [(0, changed)]), None);
    }

    #[test]
    fn replies_are_read_as_text_pairs_or_not_permitted() {
        let error = |line: &str| redis::parse_redis_value(format!("-{line}\r\n").as_bytes());
        for line in ["NOPERM no permissions", "ERR unknown command 'CONFIG'"] {
            assert_eq!(
                error(line).map(permitted).ok().map(Result::ok),
                Some(Some(None)),
                "{line}"
            );
        }
        assert!(error("LOADING loading")
            .map(permitted)
            .is_ok_and(|r| r.is_err()));
        assert_eq!(permitted(Value::Okay).ok(), Some(Some(Value::Okay)));
        assert_eq!(text(bulk("a")), Some("a".to_owned()));
        let simple = Value::SimpleString("b".to_owned());
        assert_eq!(text(simple), Some("b".to_owned()));
        assert_eq!(text(Value::Int(1)), None);
        let want = vec![("maxmemory".to_owned(), "5".to_owned())];
        let array = Value::Array(vec![bulk("maxmemory"), bulk("5")]);
        assert_eq!(pairs(array), Some(want.clone()));
        let map = Value::Map(vec![(bulk("maxmemory"), bulk("5"))]);
        assert_eq!(pairs(map), Some(want));
        assert_eq!(pairs(Value::Int(0)), None);
    }
}
