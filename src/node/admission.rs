//! What a node must show before a new connection to it carries a lock
//! command: which server it is (`run_id` from `INFO server`), so that one
//! server listed under two addresses never votes twice, and that it cannot
//! evict the lock's keys (`maxmemory` with an evicting `maxmemory-policy`).
//! The link runs the two reads on every new connection ([`Gate::admit`]);
//! reading and judging the replies is pure.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{ErrorKind, RedisError, Value};
use tracing::warn;

use crate::error::NodeFailureKind;
use crate::node::commands::Command;

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

/// One node's admission rules and the refusal of its last connection.
#[derive(Debug)]
pub(crate) struct Gate {
    index: usize,
    registry: Arc<Registry>,
    check_eviction: bool,
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
    /// evict keys is refused.
    pub(crate) fn new(index: usize, registry: Arc<Registry>, check_eviction: bool) -> Self {
        Self {
            index,
            registry,
            check_eviction,
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

    /// Reads the server's identity and eviction settings on a new
    /// connection (one round trip) and admits it, or refuses it with an
    /// error [`refusal`](Self::refusal) explains. A server that does not
    /// permit the reads (ACL, renamed commands) is admitted, with one
    /// warning per node.
    pub(crate) async fn admit(&self, conn: &mut MultiplexedConnection) -> Result<(), RedisError> {
        let info = Command::server_info();
        let mut config = redis::cmd("CONFIG");
        config.arg("GET").arg("maxmemory*");
        let mut second = conn.clone();
        let config = async {
            if self.check_eviction {
                Some(second.req_packed_command(&config).await)
            } else {
                None
            }
        };
        let (info, config) = futures::join!(conn.req_packed_command(info.cmd()), config);
        let (info, config) = (
            permitted(info?)?,
            config.transpose()?.map(permitted).transpose()?,
        );
        let verdict = self.judge(info, config.flatten());
        if let Some(kind) = &verdict {
            warn!(node = %self.label(), reason = %kind, "node refused: it does not vote");
        }
        let refused = verdict.is_some();
        *self.refused.lock().unwrap_or_else(PoisonError::into_inner) = verdict;
        if refused {
            return Err(RedisError::from((
                ErrorKind::Client,
                "node refused",
                REFUSED.to_owned(),
            )));
        }
        Ok(())
    }

    /// Why the connection must be refused, if it must; `None` for a read
    /// that was not permitted.
    fn judge(&self, info: Option<Value>, config: Option<Value>) -> Option<NodeFailureKind> {
        match info.and_then(text) {
            Some(info) => match parse_run_id(&info) {
                Some(run_id) => {
                    if let Err(other) = self.registry.claim(self.index, &Arc::from(run_id)) {
                        return Some(NodeFailureKind::SameServer {
                            other: self.registry.label(other).to_owned(),
                        });
                    }
                }
                None => self.warn_once(&self.info_warned, "INFO server has no run_id", SAME),
            },
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
fn text(value: Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => String::from_utf8(bytes).ok(),
        Value::SimpleString(s) | Value::VerbatimString { text: s, .. } => Some(s),
        _ => None,
    }
}

/// The name–value pairs of a `CONFIG GET` reply (an array, or a map with
/// RESP3); `None` for an error reply.
fn pairs(value: Value) -> Option<Vec<(String, String)>> {
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

/// Reads `run_id` from the text of `INFO server` ([`Command::server_info`]).
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
        Gate::new(1, registry, check_eviction)
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
