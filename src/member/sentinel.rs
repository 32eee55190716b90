//! A Sentinel-managed group as a member: which server is its master,
//! asked of the group's sentinels before every connection.
//!
//! The redis crate's `sentinel` support serves here: it asks the
//! sentinels in turn (`SENTINEL GET-MASTER-ADDR-BY-NAME`) and checks with
//! `ROLE` that the server named is a master before handing out its
//! client. What it does not do — notice a failover while a connection
//! is open, and keep a promoted replica from voting at once — is the
//! link's ([`crate::member::link`]: a `READONLY` reply takes the
//! connection down) and restart quarantine's
//! ([`crate::member::quarantine`]: the new master is another server).

use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use std::time::Duration;

use redis::{
    Client, ConnectionAddr, ConnectionInfo, ErrorKind, RedisError, ServerErrorKind, TlsMode, Value,
};
use tokio::sync::Mutex;

use crate::config::Config;
use crate::member::link::Target;
use crate::node::admission;

/// The sentinels of one group, and how to reach its master.
pub(crate) struct Sentinels {
    client: Mutex<SentinelClient>,
    /// The sentinels as listed, and the group's name: for
    /// [`misconfigured`](Self::misconfigured).
    sentinels: Vec<ConnectionInfo>,
    group: String,
}

impl Sentinels {
    /// The group `group` watched by `sentinels`, asked without
    /// credentials; its servers are reached with `server`'s settings
    /// (credentials, database, protocol, TLS). Over TLS (`rediss+sentinel://`),
    /// the sentinels and the servers are checked against `config`'s
    /// certificates (`Builder::tls_root_ca`, `Builder::tls_client_auth`),
    /// else the system's roots.
    #[cfg_attr(not(feature = "tls"), allow(unused_variables))]
    pub(crate) fn new(
        sentinels: Vec<ConnectionInfo>,
        group: &str,
        server: &ConnectionInfo,
        config: &Config,
    ) -> Result<Self, RedisError> {
        let settings = server.redis_settings();
        let tls = |addr: &ConnectionAddr| match addr {
            ConnectionAddr::TcpTls { insecure: true, .. } => Some(TlsMode::Insecure),
            ConnectionAddr::TcpTls { .. } => Some(TlsMode::Secure),
            _ => None,
        };
        let addrs: Vec<ConnectionAddr> = sentinels.iter().map(|s| s.addr().clone()).collect();
        let mut builder = SentinelClientBuilder::new(addrs, group, SentinelServerType::Master)?
            .set_client_to_redis_db(settings.db())
            .set_client_to_redis_protocol(settings.protocol())
            .set_client_to_redis_tcp_settings(server.tcp_settings().clone());
        if let Some(user) = settings.username() {
            builder = builder.set_client_to_redis_username(user);
        }
        if let Some(password) = settings.password() {
            builder = builder.set_client_to_redis_password(password);
        }
        if let Some(mode) = tls(server.addr()) {
            builder = builder.set_client_to_redis_tls_mode(mode);
        }
        #[cfg(feature = "tls")]
        if let Some(certs) = &config.tls {
            // rustls needs a process-wide crypto provider; install ring
            // unless the application installed one already.
            let _ = rustls::crypto::ring::default_provider().install_default();
            if tls(server.addr()).is_some() {
                builder = builder.set_client_to_redis_certificates(certs.clone());
            }
            // Refused unless every sentinel is reached over TLS.
            if sentinels.iter().all(|s| tls(s.addr()).is_some()) {
                builder = builder.set_client_to_sentinel_certificates(certs.clone());
            }
        }
        Ok(Self {
            client: Mutex::new(builder.build()?),
            sentinels,
            group: group.to_owned(),
        })
    }

    /// What the sentinels say against the address, within `timeout`: that
    /// one of them is not a sentinel, or that none watches a group of this
    /// name (with the names they watch). `None` when one watches it, or
    /// none answers (a member down is no error at build). Sentinels over
    /// TLS are not asked.
    pub(crate) async fn misconfigured(&self, timeout: Duration) -> Option<String> {
        let ask = |info: ConnectionInfo| async move {
            let addr = info.addr().to_string();
            let masters = async {
                let sentinel = Target::Server(Box::new(Client::open(info)?));
                let masters = redis::cmd("SENTINEL").arg("MASTERS").clone();
                sentinel.ask_once(&masters, timeout).await
            };
            match tokio::time::timeout(timeout, masters).await {
                Ok(Ok(reply)) => Some(Ok(master_names(reply))),
                Ok(Err(e)) if e.kind() == ErrorKind::Server(ServerErrorKind::ResponseError) => {
                    Some(Err(format!("{addr} is not a sentinel ({e})")))
                }
                _ => None,
            }
        };
        let plain = self
            .sentinels
            .iter()
            .filter(|s| !matches!(s.addr(), ConnectionAddr::TcpTls { .. }));
        let answers = futures::future::join_all(plain.cloned().map(ask)).await;
        let mut watched: Vec<String> = Vec::new();
        for answer in answers.into_iter().flatten() {
            match answer {
                Ok(names) if names.contains(&self.group) => return None,
                Ok(names) => watched.extend(names),
                Err(not_a_sentinel) => return Some(not_a_sentinel),
            }
        }
        watched.sort();
        watched.dedup();
        let answered = !watched.is_empty() || self.sentinels.is_empty();
        let (group, watched) = (&self.group, watched.join(", "));
        answered
            .then(|| format!("no sentinel watches a group named {group:?} (they watch: {watched})"))
    }

    /// A client of the group's master, as its sentinels name it now.
    ///
    /// # Cancel safety
    ///
    /// Dropped midway, the lookup is abandoned; the next one asks again.
    pub(crate) async fn master(&self) -> Result<Client, RedisError> {
        self.client.lock().await.async_get_client().await
    }
}

/// The `name` of each master in a `SENTINEL MASTERS` reply (an array of
/// flat field arrays, or of maps with RESP3).
fn master_names(reply: Value) -> Vec<String> {
    let Value::Array(masters) = reply else {
        return Vec::new();
    };
    let name = |fields: Vec<(String, String)>| fields.into_iter().find(|(k, _)| k == "name");
    masters
        .into_iter()
        .filter_map(|master| name(admission::pairs(master)?).map(|(_, v)| v))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn master_names_are_read_from_both_protocols() {
        let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let resp2 = Value::Array(vec![
            Value::Array(vec![
                bulk("name"),
                bulk("locks"),
                bulk("ip"),
                bulk("10.0.0.1"),
            ]),
            Value::Array(vec![
                bulk("ip"),
                bulk("10.0.0.2"),
                bulk("name"),
                bulk("other"),
            ]),
        ]);
        assert_eq!(master_names(resp2), ["locks", "other"]);
        let resp3 = Value::Array(vec![Value::Map(vec![(bulk("name"), bulk("locks"))])]);
        assert_eq!(master_names(resp3), ["locks"]);
        assert!(master_names(Value::Nil).is_empty());
    }
}
