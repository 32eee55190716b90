//! A Sentinel-managed group as a member: which server is its master,
//! asked of the group's sentinels before every connection.
//!
//! The redis crate's `sentinel` support serves here: it asks the
//! sentinels in turn (`SENTINEL GET-MASTER-ADDR-BY-NAME`) and checks with
//! `ROLE` that the server named is a master before handing out its
//! client. What it does not do — notice a failover while a connection
//! is open, and keep a promoted replica from voting at once — is the
//! link's ([`crate::node::link`]: a `READONLY` reply takes the
//! connection down) and restart quarantine's
//! ([`crate::node::quarantine`]: the new master is another server).

use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{Client, ConnectionAddr, ConnectionInfo, RedisError, TlsMode};
use tokio::sync::Mutex;

use crate::config::Config;

/// The sentinels of one group, and how to reach its master.
pub(crate) struct Sentinels {
    client: Mutex<SentinelClient>,
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
        })
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
