//! Members of several servers as the builder takes them: a Sentinel
//! group (`redis+sentinel://host:port,…/group`, [`NodeSource::sentinel`])
//! and a Redis Cluster (`redis+cluster://host:port,…`,
//! [`NodeSource::cluster`]), each a list of node addresses checked like
//! any other. Pure: no I/O.

use redis::IntoConnectionInfo;

use super::nodes::{parse, redacted, BadAddress, NodeSource, Source};
use crate::config::Durability;
use crate::error::{Error, Result};
use crate::node::admission::Failover;

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
        let list: Vec<String> = sentinels
            .into_iter()
            .map(|s| s.as_ref().to_owned())
            .collect();
        NodeSource(member(Kind::Sentinel, &list, Some(group), &list.join(",")))
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
        let list: Vec<String> = seeds.into_iter().map(|s| s.as_ref().to_owned()).collect();
        NodeSource(member(Kind::Cluster, &list, None, &list.join(",")))
    }
}

/// A member of several servers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Sentinel,
    Cluster,
}

/// The member of `kind` whose servers are at `addresses` (each a node
/// address), `group` for a Sentinel group; `text` is the member as
/// written, for the message when it is not usable.
fn member(kind: Kind, addresses: &[String], group: Option<&str>, text: &str) -> Source {
    let bad = |reason: String| {
        Source::Invalid(BadAddress {
            shown: redacted(text),
            reason,
        })
    };
    if addresses.is_empty() {
        return bad("no addresses: list at least one host:port".to_owned());
    }
    let mut infos = Vec::with_capacity(addresses.len());
    for address in addresses {
        match parse(address) {
            Ok(info) => infos.push(info),
            Err(e) => return bad(format!("{}: {}", e.shown, e.reason)),
        }
    }
    match (kind, group) {
        (Kind::Cluster, _) => Source::Cluster(infos),
        (Kind::Sentinel, Some(group)) if !group.is_empty() => {
            let server = infos[0].clone();
            // The sentinels by address alone: the credentials are the
            // servers'.
            let sentinels = infos
                .iter()
                .map(|i| i.addr().clone().into_connection_info());
            let sentinels = match sentinels.collect::<Result<Vec<_>, _>>() {
                Ok(sentinels) => sentinels,
                Err(e) => return bad(e.to_string()),
            };
            Source::Sentinel {
                sentinels,
                group: group.to_owned(),
                server,
            }
        }
        (Kind::Sentinel, _) => {
            bad("no group name: write redis+sentinel://host:port,…/group".to_owned())
        }
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
    let kind = match kind {
        "sentinel" => Kind::Sentinel,
        "cluster" => Kind::Cluster,
        _ => return None,
    };
    let (user, rest) = match rest.rsplit_once('@') {
        Some((user, rest)) => (format!("{user}@"), rest),
        None => (String::new(), rest),
    };
    let (hosts, path) = rest.split_at(rest.find(['/', '?']).unwrap_or(rest.len()));
    let (path, query) = path.split_once('?').map_or((path, ""), |(p, q)| (p, q));
    let query = if query.is_empty() {
        String::new()
    } else {
        format!("?{query}")
    };
    let default_port = if kind == Kind::Sentinel {
        ":26379"
    } else {
        ":6379"
    };
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
    if kind == Kind::Cluster && !matches!(group, "" | "0") {
        return Some(Source::Invalid(BadAddress {
            shown: redacted(text),
            reason: format!("a Redis Cluster has database 0 only, not {group:?}"),
        }));
    }
    Some(member(kind, &addresses, Some(group), text))
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
    use crate::client::nodes::label;
    use crate::IntoNode;

    fn shown(text: &str) -> String {
        text.into_node().0.shown()
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
