//! Refuses a node list in which two entries are the same server: `localhost`
//! and `127.0.0.1`, or one server under two database indexes, would each
//! vote, so one process could make a majority on its own.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use redis::{ConnectionAddr, IntoConnectionInfo};

/// Where a node listens, as far as can be found out.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Place {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

/// `host:port/db` without credentials, IPv6 hosts in brackets.
fn label(addr: &ConnectionAddr, db: i64) -> String {
    match addr {
        ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
            if host.contains(':') {
                format!("[{host}]:{port}/{db}")
            } else {
                format!("{host}:{port}/{db}")
            }
        }
        ConnectionAddr::Unix(path) => format!("unix:{}/{db}", path.display()),
        other => format!("{other}/{db}"),
    }
}

/// Resolves every node (bounded by `limit` per name) and returns a message
/// naming two entries that are the same server, if any. Names that do not
/// resolve are left to the client, which reports them as unreachable.
pub async fn same_server(urls: &[String], limit: Duration) -> Option<String> {
    let mut seen: HashMap<Place, String> = HashMap::new();
    for url in urls {
        let Ok(info) = url.as_str().into_connection_info() else {
            continue;
        };
        let name = label(info.addr(), info.redis_settings().db());
        let places: Vec<Place> = match info.addr() {
            ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
                let host = host.trim_start_matches('[').trim_end_matches(']');
                match tokio::time::timeout(limit, tokio::net::lookup_host((host, *port))).await {
                    Ok(Ok(addrs)) => addrs.map(Place::Tcp).collect(),
                    _ => Vec::new(),
                }
            }
            ConnectionAddr::Unix(path) => {
                vec![Place::Unix(
                    std::fs::canonicalize(path).unwrap_or_else(|_| path.clone()),
                )]
            }
            _ => Vec::new(),
        };
        for place in places {
            if let Some(first) = seen.get(&place) {
                if *first != name {
                    let at = match &place {
                        Place::Tcp(addr) => addr.to_string(),
                        Place::Unix(path) => path.display().to_string(),
                    };
                    return Some(format!(
                        "nodes {first} and {name} are the same server ({at}): it would \
                         vote twice; list each independent Redis server once"
                    ));
                }
            }
            seen.entry(place).or_insert_with(|| name.clone());
        }
    }
    None
}
