//! What [`Builder::new`](crate::Builder::new) accepts as a node: an
//! address (`&str`, `String`), a `redis::ConnectionInfo`, or a ready
//! `redis::Client` ([`IntoNode`]), each turned into a [`NodeSource`].

use std::fmt;

use crate::address;
use crate::config;

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
    /// An address that did not parse: reported by `build`.
    Invalid(address::BadAddress),
}

impl Source {
    /// `host:port/db`, or the redacted text of an address that did not parse.
    pub(crate) fn shown(&self) -> String {
        match self {
            Source::Address(info) => config::label(info),
            Source::Client(client) => config::label(client.get_connection_info()),
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
        NodeSource(match address::parse(self) {
            Ok(info) => Source::Address(info),
            Err(bad) => Source::Invalid(bad),
        })
    }
}

impl IntoNode for &&str {
    fn into_node(self) -> NodeSource {
        (*self).into_node()
    }
}

impl IntoNode for String {
    fn into_node(self) -> NodeSource {
        self.as_str().into_node()
    }
}

impl IntoNode for &String {
    fn into_node(self) -> NodeSource {
        self.as_str().into_node()
    }
}

impl IntoNode for redis::ConnectionInfo {
    fn into_node(self) -> NodeSource {
        NodeSource(Source::Address(self))
    }
}

impl IntoNode for &redis::ConnectionInfo {
    fn into_node(self) -> NodeSource {
        self.clone().into_node()
    }
}

impl IntoNode for redis::Client {
    fn into_node(self) -> NodeSource {
        NodeSource(Source::Client(self))
    }
}

impl IntoNode for &redis::Client {
    fn into_node(self) -> NodeSource {
        self.clone().into_node()
    }
}
