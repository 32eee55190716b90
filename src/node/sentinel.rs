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

use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};
use redis::{Client, ConnectionInfo, RedisError};
use tokio::sync::Mutex;

/// The sentinels of one group, and how to reach its master.
pub(crate) struct Sentinels {
    client: Mutex<SentinelClient>,
}

impl Sentinels {
    /// The group `group` watched by `sentinels`; its servers are reached
    /// with `server`'s settings (credentials, database, protocol, TLS).
    pub(crate) fn new(
        sentinels: Vec<ConnectionInfo>,
        group: &str,
        server: &ConnectionInfo,
    ) -> Result<Self, RedisError> {
        let mut node = SentinelNodeConnectionInfo::default()
            .set_redis_connection_info(server.redis_settings().clone());
        if let redis::ConnectionAddr::TcpTls { insecure, .. } = server.addr() {
            node = node.set_tls_mode(if *insecure {
                redis::TlsMode::Insecure
            } else {
                redis::TlsMode::Secure
            });
        }
        let client = SentinelClient::build(
            sentinels,
            String::from(group),
            Some(node),
            SentinelServerType::Master,
        )?;
        Ok(Self {
            client: Mutex::new(client),
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
