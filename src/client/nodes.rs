//! A client's nodes: what [`Builder::new`](crate::Builder::new) accepts as
//! a node — an address (`&str`, `String`), a `redis::ConnectionInfo`, or a
//! ready `redis::Client` ([`IntoNode`]), each turned into a [`NodeSource`];
//! every address as the user wrote it — one server's, a Sentinel group's
//! (`redis+sentinel://host:port,…/group`, [`NodeSource::sentinel`]) or a
//! Redis Cluster's (`redis+cluster://host:port,…`,
//! [`NodeSource::cluster`]) — parsed into the redis crate's
//! `ConnectionInfo` or the reason it does not parse (scheme, host, port,
//! database, protocol); a node as it may be shown (`host:port/db`, never
//! with a password); and the checks of the list. Pure: no I/O.

use std::collections::HashSet;
use std::fmt;

use redis::IntoConnectionInfo;

use crate::config::{Durability, MAX_NODES};
use crate::error::{Error, Result};
use crate::node::admission::Failover;

/// One node as given to the [`Builder`](crate::Builder): an address, or a
/// client configured by the caller. Made by [`IntoNode::into_node`];
/// an address that does not parse is kept, and reported by
/// [`build`](crate::Builder::build) with its position in the list.
///
/// Shown (`Debug`) as `host:port/db`, never with a password.
///
/// # Examples
///
/// ```
/// use quorumlock::IntoNode;
/// // A list of nodes of different kinds.
/// let client = redis::Client::open("redis://10.0.0.2:6379")?;
/// let nodes = vec!["redis://10.0.0.1:6379".into_node(), client.into_node()];
/// let builder = quorumlock::Builder::new(nodes);
/// # Ok::<(), redis::RedisError>(())
/// ```
#[derive(Clone)]
pub struct NodeSource(pub(crate) Source);

/// The kinds of node a builder holds.
#[derive(Clone)]
pub(crate) enum Source {
    /// An address, connected the way the builder's settings say.
    Address(redis::ConnectionInfo),
    /// A client configured by the caller (TLS, auth, protocol), used as is.
    Client(redis::Client),
    /// A Sentinel-managed group: its sentinels, its name, and the
    /// settings its servers are reached with (credentials, database, TLS).
    Sentinel {
        sentinels: Vec<redis::ConnectionInfo>,
        group: String,
        server: redis::ConnectionInfo,
    },
    /// A Redis Cluster, reached through these seed addresses.
    Cluster(Vec<redis::ConnectionInfo>),
    /// An address that did not parse: reported by `build`.
    Invalid(BadAddress),
}

impl Source {
    /// `host:port/db`, `sentinel://host:port,…/group`,
    /// `cluster://host:port,…`, or the redacted text of an address that
    /// did not parse.
    pub(crate) fn shown(&self) -> String {
        let hosts = |infos: &[redis::ConnectionInfo]| infos.iter().map(address).collect::<Vec<_>>();
        match self {
            Source::Address(info) => label(info),
            Source::Client(client) => label(client.get_connection_info()),
            Source::Sentinel {
                sentinels, group, ..
            } => format!("sentinel://{}/{group}", hosts(sentinels).join(",")),
            Source::Cluster(seeds) => format!("cluster://{}", hosts(seeds).join(",")),
            Source::Invalid(bad) => bad.shown.clone(),
        }
    }
}

impl fmt::Debug for NodeSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.shown())
    }
}

/// Anything [`Builder::new`](crate::Builder::new) takes as a node: URLs as
/// `&str`, `String` or references to them
/// (`redis://[user[:password]@]host[:port][/db]`, `rediss://` with the
/// `tls` feature, `unix:///path`), `redis::ConnectionInfo`, and ready
/// `redis::Client`s (used as they are: their TLS, authentication and
/// protocol settings are the client's; the builder's TLS settings do not
/// apply to them).
///
/// # Examples
///
/// Each shape a node list commonly has:
///
/// ```
/// use quorumlock::Builder;
///
/// let strs: &[&str] = &["redis://127.0.0.1:7001", "redis://127.0.0.1:7002"];
/// let strings: Vec<String> = strs.iter().map(|s| s.to_string()).collect();
///
/// let _ = Builder::new(strs); // &[&str]
/// let _ = Builder::new(&strings[..]); // &[String]
/// let _ = Builder::new(&strings); // &Vec<String>
/// let _ = Builder::new(strings.clone()); // Vec<String>
/// let _ = Builder::new(["redis://127.0.0.1:7001"]); // [&str; N]
/// let _ = Builder::new("redis://a:6379,redis://b:6379".split(',')); // an iterator of &str
/// let _ = Builder::new(strings.iter().map(|s| s.to_uppercase())); // an iterator of String
///
/// let infos = strs
///     .iter()
///     .map(|s| redis::IntoConnectionInfo::into_connection_info(*s))
///     .collect::<Result<Vec<_>, _>>()?;
/// let _ = Builder::new(&infos); // redis::ConnectionInfo, by reference or value
/// let _ = Builder::new(infos);
///
/// let clients = strs
///     .iter()
///     .map(|s| redis::Client::open(*s))
///     .collect::<Result<Vec<_>, _>>()?;
/// let _ = Builder::new(&clients); // redis::Client, by reference or value
/// let _ = Builder::new(clients);
/// # Ok::<(), redis::RedisError>(())
/// ```
pub trait IntoNode {
    /// This node, for a [`Builder`](crate::Builder).
    fn into_node(self) -> NodeSource;
}

impl IntoNode for NodeSource {
    fn into_node(self) -> NodeSource {
        self
    }
}

impl IntoNode for &str {
    fn into_node(self) -> NodeSource {
        let address = || parse(self).map_or_else(Source::Invalid, Source::Address);
        NodeSource(parse_member(self).unwrap_or_else(address))
    }
}

impl IntoNode for String {
    fn into_node(self) -> NodeSource {
        self.as_str().into_node()
    }
}

impl IntoNode for redis::ConnectionInfo {
    fn into_node(self) -> NodeSource {
        NodeSource(Source::Address(self))
    }
}

impl IntoNode for redis::Client {
    fn into_node(self) -> NodeSource {
        NodeSource(Source::Client(self))
    }
}

/// A node by reference (`&&str`, `&String`, `&redis::ConnectionInfo`,
/// `&redis::Client`, `&NodeSource`): the node it refers to, cloned.
impl<T: IntoNode + Clone> IntoNode for &T {
    fn into_node(self) -> NodeSource {
        self.clone().into_node()
    }
}

/// An address that does not parse: as it may be shown, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BadAddress {
    /// The address with any password replaced by `***`.
    pub(crate) shown: String,
    /// What is wrong with it, in words.
    pub(crate) reason: String,
}

impl BadAddress {
    /// The address written `text`, not usable for `reason`.
    fn new(text: &str, reason: String) -> Self {
        let shown = redacted(text);
        Self { shown, reason }
    }
}

/// The schemes the redis crate connects to.
const SCHEMES: [&str; 7] = [
    "redis",
    "rediss",
    "valkey",
    "valkeys",
    "unix",
    "redis+unix",
    "valkey+unix",
];

/// Parses `text` as a node address (`redis://[user[:password]@]host[:port][/db]`,
/// `rediss://…`, `unix:///path`), or says why it cannot be one.
pub(crate) fn parse(text: &str) -> Result<redis::ConnectionInfo, BadAddress> {
    let bad = |reason| BadAddress::new(text, reason);
    let url = url::Url::parse(text.trim()).map_err(|e| bad(url_reason(e)))?;
    let scheme = url.scheme();
    if !SCHEMES.contains(&scheme) {
        return Err(bad(format!(
            "unknown scheme {scheme:?}: use redis://host:port, rediss://host:port (TLS), \
             unix:///path/to/socket, redis+sentinel://host:port,…/group or \
             redis+cluster://host:port,…"
        )));
    }
    if !scheme.ends_with("unix") {
        if url.host_str().is_none_or(str::is_empty) {
            return Err(bad("no host: write redis://host:port".to_owned()));
        }
        if url.port() == Some(0) {
            return Err(bad("port 0: a node's port is 1 to 65535".to_owned()));
        }
        let db = url.path().trim_matches('/');
        if !db.is_empty() && db.parse::<i64>().is_err() {
            return Err(bad(format!(
                "database {db:?} is not a number: write redis://host:port/0"
            )));
        }
    }
    url.into_connection_info().map_err(|e| {
        // The redis crate's reason, without its error kind's name.
        let reason = e.to_string().replace(" - InvalidClientConfig", "");
        let reason = reason.replace("- InvalidClientConfig", "");
        bad(format!("not a usable Redis address: {reason}"))
    })
}

/// The url crate's reason, for a node address.
fn url_reason(e: url::ParseError) -> String {
    match e {
        url::ParseError::RelativeUrlWithoutBase => {
            "no scheme: write redis://host:port (or rediss://, unix://)".to_owned()
        }
        url::ParseError::InvalidPort => "invalid port: a node's port is 1 to 65535".to_owned(),
        url::ParseError::EmptyHost => "no host: write redis://host:port".to_owned(),
        other => format!("invalid host: {other}"),
    }
}

/// `text` with the password hidden: the part of the user information after
/// the first `:` (`redis://user:***@host`), and the value of a unix URL's
/// `pass=` query pairs. Whatever stands before the last `@` is user
/// information, so a password with an unescaped `@` is hidden too.
pub(crate) fn redacted(text: &str) -> String {
    let (scheme, rest) = text.split_at(text.find("://").map_or(0, |i| i + 3));
    let hidden = rest.rsplit_once('@').and_then(|(user, host)| {
        let (name, _password) = user.split_once(':')?;
        Some(format!("{name}:***@{host}"))
    });
    let rest = hidden.unwrap_or_else(|| rest.to_owned());
    let Some((head, query)) = rest.split_once('?') else {
        return format!("{scheme}{rest}");
    };
    let pairs: Vec<&str> = query
        .split('&')
        .map(|pair| match pair.strip_prefix("pass=") {
            Some(_) => "pass=***",
            None => pair,
        })
        .collect();
    format!("{scheme}{head}?{}", pairs.join("&"))
}

/// Checks the node list: at least one node, at most [`MAX_NODES`], no node twice (the same
/// host, port and database would vote twice). `labels` are the nodes'
/// `host:port/db`.
pub(crate) fn check_nodes(labels: &[String]) -> Result<()> {
    if labels.is_empty() {
        return Err(Error::invalid("no Redis nodes given"));
    }
    if labels.len() > MAX_NODES {
        return Err(Error::invalid(format!(
            "{} nodes given; at most {MAX_NODES} are supported",
            labels.len()
        )));
    }
    let mut seen = HashSet::new();
    match labels.iter().find(|label| !seen.insert(*label)) {
        Some(label) => Err(Error::invalid(format!(
            "node {label} is listed twice; it would vote twice"
        ))),
        None => Ok(()),
    }
}

/// A node's `host:port/db` (the host lower-cased; never its password).
pub(crate) fn label(info: &redis::ConnectionInfo) -> String {
    format!("{}/{}", address(info), info.redis_settings().db())
}

/// A server's `host:port` (the host lower-cased, an IPv6 address in
/// brackets so that the port stays apart), or `unix:path`.
pub(crate) fn address(info: &redis::ConnectionInfo) -> String {
    match info.addr() {
        redis::ConnectionAddr::Tcp(host, port)
        | redis::ConnectionAddr::TcpTls { host, port, .. } => {
            let host = host.to_ascii_lowercase();
            match host.contains(':') && !host.starts_with('[') {
                true => format!("[{host}]:{port}"),
                false => format!("{host}:{port}"),
            }
        }
        redis::ConnectionAddr::Unix(path) => format!("unix:{}", path.display()),
        other => other.to_string(),
    }
}

impl NodeSource {
    /// A Sentinel-managed group as one member: the group `group` watched
    /// by the sentinels at `sentinels` (`redis://host:port` each). Its
    /// master is asked of the sentinels at every connect; it needs durable
    /// votes on every replica (`docs/members.md`, "The rule"). The same as
    /// the address `redis+sentinel://host:port,host:port/group`; the
    /// servers are reached with the credentials of the first sentinel
    /// address, the sentinels without.
    ///
    /// # Examples
    ///
    /// ```
    /// use quorumlock::{Builder, IntoNode, NodeSource};
    /// let group = NodeSource::sentinel(["redis://10.0.0.1:26379", "redis://10.0.0.2:26379"], "locks");
    /// let same = "redis+sentinel://10.0.0.1:26379,10.0.0.2:26379/locks".into_node();
    /// assert_eq!(format!("{group:?}"), format!("{same:?}"));
    /// let builder = Builder::new([group]);
    /// ```
    pub fn sentinel<I, S>(sentinels: I, group: &str) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Self::several(sentinels, Some(group))
    }

    /// A Redis Cluster as one member, reached through the seed addresses
    /// `seeds` (`redis://host:port` each): each lock's keys go to the
    /// master of their hash slot; a shard's failover is treated as a
    /// restart of that shard. The same as the address
    /// `redis+cluster://host:port,host:port`.
    ///
    /// # Examples
    ///
    /// ```
    /// use quorumlock::{Builder, NodeSource};
    /// let cluster = NodeSource::cluster(["redis://10.0.0.1:7000", "redis://10.0.0.2:7000"]);
    /// assert_eq!(format!("{cluster:?}"), "cluster://10.0.0.1:7000,10.0.0.2:7000");
    /// let builder = Builder::new([cluster]);
    /// ```
    pub fn cluster<I, S>(seeds: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Self::several(seeds, None)
    }

    /// The member whose servers are at `addresses`: a Sentinel group's
    /// with its `group`, else a Redis Cluster's.
    fn several<I, S>(addresses: I, group: Option<&str>) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let list: Vec<String> = addresses.into_iter().map(|s| s.as_ref().into()).collect();
        NodeSource(member(&list, group, &list.join(",")))
    }
}

/// The member whose servers are at `addresses` (each a node address): a
/// Sentinel group's with its `group`, else a Redis Cluster's; `text` is
/// the member as written, for the message when it is not usable.
fn member(addresses: &[String], group: Option<&str>, text: &str) -> Source {
    let bad = |reason| Source::Invalid(BadAddress::new(text, reason));
    if addresses.is_empty() {
        return bad("no addresses: list at least one host:port".to_owned());
    }
    let infos = match addresses.iter().map(|a| parse(a)).collect() {
        Ok(infos) => infos,
        Err(BadAddress { shown, reason }) => return bad(format!("{shown}: {reason}")),
    };
    let Some(group) = group else {
        return Source::Cluster(infos);
    };
    if group.is_empty() {
        return bad("no group name: write redis+sentinel://host:port,…/group".to_owned());
    }
    // The sentinels by address alone: the credentials are the servers'.
    let sentinels = infos
        .iter()
        .map(|i| i.addr().clone().into_connection_info());
    match sentinels.collect() {
        Ok(sentinels) => Source::Sentinel {
            sentinels,
            group: group.to_owned(),
            server: infos[0].clone(),
        },
        Err(e) => bad(e.to_string()),
    }
}

/// Whether `entry` is a member address (`…+sentinel://`, `…+cluster://`)
/// whose list of hosts has not ended (no `/` or `?` after them yet): the
/// next comma-separated entry without a scheme is one of its hosts.
pub(crate) fn hosts_open(entry: &str) -> bool {
    let Some((scheme, rest)) = entry.split_once("://") else {
        return false;
    };
    let member = scheme.ends_with("+sentinel") || scheme.ends_with("+cluster");
    member && !rest.contains(['/', '?'])
}

/// A member address, `redis+sentinel://[user[:password]@]host[:port],…/group`
/// or `redis+cluster://[user[:password]@]host[:port],…` (`rediss+…` for
/// TLS); `None` for any other scheme.
pub(crate) fn parse_member(text: &str) -> Option<Source> {
    let (scheme, rest) = text.trim().split_once("://")?;
    let (base, kind) = scheme.split_once('+')?;
    let default_port = match kind {
        "sentinel" => ":26379",
        "cluster" => ":6379",
        _ => return None,
    };
    // The user information with its `@`, if any.
    let (user, rest) = rest.split_at(rest.rfind('@').map_or(0, |at| at + 1));
    let (hosts, path) = rest.split_at(rest.find(['/', '?']).unwrap_or(rest.len()));
    let (path, query) = path.split_at(path.find('?').unwrap_or(path.len()));
    let addresses: Vec<String> = hosts
        .split(',')
        .filter(|h| !h.is_empty())
        .map(|host| {
            let numeric = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
            let has_port =
                !host.ends_with(']') && host.rsplit_once(':').is_some_and(|(_, p)| numeric(p));
            let port = if has_port { "" } else { default_port };
            format!("{base}://{user}{host}{port}{query}")
        })
        .collect();
    let group = path.trim_matches('/');
    if kind == "cluster" && !matches!(group, "" | "0") {
        let reason = format!("a Redis Cluster has database 0 only, not {group:?}");
        return Some(Source::Invalid(BadAddress::new(text, reason)));
    }
    Some(member(
        &addresses,
        (kind == "sentinel").then_some(group),
        text,
    ))
}

impl Source {
    /// Whether this member (shown as `label`) fails over, and what
    /// its votes wait for then ([`Failover`]). A Sentinel group always can: it
    /// needs durable votes, or `Err` (a cluster's masters are judged by their
    /// replicas when they are reached: one without replicas needs nothing).
    pub(super) fn failover(&self, label: &str, durable: Option<Durability>) -> Result<Failover> {
        let durable = durable.map(|d| match d {
            Durability::Replicas(r) | Durability::Aof { replicas: r, .. } => r,
        });
        match self {
            Source::Sentinel { .. } if durable.is_none() => Err(Error::invalid(format!(
                "member {label} fails over: a replica promoted may lack locks the old master \
                 granted, and a deposed master goes on granting until it is demoted (restart \
                 quarantine does not stop it); set durable votes on every replica of the group \
                 (Builder::durable_votes, quorumlock --durable-replicas): see docs/members.md"
            ))),
            Source::Sentinel { .. } | Source::Cluster(_) => Ok(Failover::Replicas { durable }),
            _ => Ok(Failover::Never),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(text: &str) -> String {
        text.into_node().0.shown()
    }

    fn reason(text: &str) -> String {
        let err = parse(text).expect_err(text);
        assert!(!err.shown.contains("hunter2"), "{err:?}");
        err.reason
    }

    #[test]
    fn addresses_that_parse() {
        for text in [
            "redis://127.0.0.1:7001",
            "redis://user:pw@localhost:7002/3",
            "redis://[::1]:7003",
            "valkey://cache",
            "unix:///run/redis.sock",
            "redis://127.0.0.1:7001/?protocol=resp3",
        ] {
            assert!(parse(text).is_ok(), "{text}");
        }
    }

    #[test]
    fn each_bad_address_says_what_is_wrong() {
        assert!(reason("not a url").starts_with("no scheme"));
        assert!(reason("localhost:7001").starts_with("unknown scheme \"localhost\""));
        assert!(reason("http://127.0.0.1:7001").starts_with("unknown scheme \"http\""));
        assert!(reason("redis://:hunter2@127.0.0.1:notaport").starts_with("invalid port"));
        assert!(reason("redis://127.0.0.1:70000").starts_with("invalid port"));
        assert!(reason("redis://127.0.0.1:0").starts_with("port 0"));
        assert!(reason("redis://").starts_with("no host"));
        assert!(reason("redis://:hunter2@").starts_with("no host"));
        assert!(reason("redis://[::1:7001").starts_with("invalid host"));
        assert!(reason("redis://h:1/zero").starts_with("database \"zero\""));
        let protocol = reason("redis://h:1/?protocol=9");
        assert!(protocol.contains("protocol"), "{protocol}");
        assert!(!protocol.contains("InvalidClientConfig"), "{protocol}");
    }

    #[test]
    fn passwords_are_never_shown() {
        let cases = [
            ("redis://:hunter2@h:1", "redis://:***@h:1"),
            ("redis://me:hunter2@h:x", "redis://me:***@h:x"),
            ("redis://me:hun@ter2@h:1", "redis://me:***@h:1"),
            ("redis://me@h:1", "redis://me@h:1"),
            (
                "unix:///s.sock?pass=hunter2&db=1",
                "unix:///s.sock?pass=***&db=1",
            ),
            ("redis://h:1", "redis://h:1"),
            ("garbage", "garbage"),
        ];
        for (text, shown) in cases {
            assert_eq!(redacted(text), shown, "{text}");
        }
    }

    fn labels(list: &[&str]) -> Result<Vec<String>> {
        let labels: Vec<String> = list
            .iter()
            .map(|url| {
                (*url)
                    .into_connection_info()
                    .map(|info| label(&info))
                    .map_err(|e| Error::invalid(e.to_string()))
            })
            .collect::<Result<_>>()?;
        check_nodes(&labels)?;
        Ok(labels)
    }

    #[test]
    fn nodes_must_be_given_parsable_and_distinct() {
        assert!(check_nodes(&[]).unwrap_err().is_invalid_input());
        let err = labels(&["redis://127.0.0.1:7001", "redis://127.0.0.1:7001/0"]).unwrap_err();
        assert!(err.to_string().contains("listed twice"), "{err}");
        let ok = labels(&[
            "redis://127.0.0.1:7001",
            "redis://127.0.0.1:7001/1",
            "redis://user:pw@LOCALHOST:7002",
            "redis://[::1]:7003",
        ])
        .unwrap();
        assert_eq!(
            ok,
            [
                "127.0.0.1:7001/0",
                "127.0.0.1:7001/1",
                "localhost:7002/0",
                "[::1]:7003/0"
            ]
        );
    }

    #[test]
    fn members_of_several_servers_parse_and_show_without_passwords() {
        assert_eq!(
            shown("redis+sentinel://:hunter2@10.0.0.1:26379,10.0.0.2/locks"),
            "sentinel://10.0.0.1:26379,10.0.0.2:26379/locks"
        );
        assert_eq!(
            shown("redis+cluster://a:7000,b:7001"),
            "cluster://a:7000,b:7001"
        );
        assert_eq!(shown("redis+cluster://a"), "cluster://a:6379");
        let Source::Sentinel {
            sentinels,
            server,
            group,
        } = "redis+sentinel://me:hunter2@h:1,[::1]:2/g?protocol=resp3"
            .into_node()
            .0
        else {
            panic!("not a sentinel group");
        };
        assert_eq!(group, "g");
        assert_eq!(server.redis_settings().password(), Some("hunter2"));
        assert!(sentinels
            .iter()
            .all(|s| s.redis_settings().password().is_none()));
        assert_eq!(label(&sentinels[1]), "[::1]:2/0");
        for (text, why) in [
            ("redis+sentinel://h:1", "no group name"),
            ("redis+sentinel://:hunter2@h:x/g", "invalid port"),
            ("redis+cluster://h:1/3", "database 0 only"),
            ("redis+cluster://", "no addresses"),
        ] {
            let Source::Invalid(bad) = text.into_node().0 else {
                panic!("{text} parsed");
            };
            assert!(bad.reason.contains(why), "{text}: {}", bad.reason);
            assert!(!bad.shown.contains("hunter2"), "{}", bad.shown);
        }
        assert!(hosts_open("redis+sentinel://a:1"));
        assert!(!hosts_open("redis+sentinel://a:1,b:2/g"));
        assert!(hosts_open("rediss+cluster://a:1,b:2"));
        assert!(!hosts_open("redis://a:1"));
    }
}
