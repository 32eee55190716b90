//! One node's connection and its reconnect signal.
//!
//! The redis crate's `ConnectionManager` replaces a dead connection by
//! itself: after a command meets the dead one, or, with RESP3
//! (`?protocol=resp3`), as soon as the close is noticed, before any command
//! of this crate runs. Either way the node may have restarted meanwhile, so
//! its restart standing must be read again. [`Link`] reports every such
//! event to the node's [`Quarantine`]: it watches the result of every
//! command sent through it (background ones included), and the crate's
//! disconnection notice on RESP3 connections.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::{Client, Cmd, Pipeline, PushInfo, PushKind, RedisError, RedisFuture, Value};

use crate::quarantine::Quarantine;

/// The managed connection of one node. Cheap to clone (shared handles).
#[derive(Clone)]
pub(crate) struct Link {
    conn: ConnectionManager,
    restart: Arc<Quarantine>,
}

impl Link {
    /// Prepares the connection without waiting for it. Commands travel in
    /// order on one multiplexed connection that is never torn down for a
    /// slow reply (no response timeout inside it).
    pub(crate) fn new(
        client: Client,
        connect_timeout: Duration,
        restart: Arc<Quarantine>,
    ) -> Result<Self, RedisError> {
        let mut config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(connect_timeout))
            .set_response_timeout(None)
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(10))
            .set_max_delay(Duration::from_millis(100));
        let resp3 = client
            .get_connection_info()
            .redis_settings()
            .protocol()
            .supports_resp3();
        if resp3 {
            // The crate swaps in the new connection before it passes the
            // notice on, so a reading started after the epoch moved is
            // taken on the new connection.
            let notice = restart.clone();
            config = config.set_push_sender(move |info: PushInfo| {
                if info.kind == PushKind::Disconnection {
                    notice.connection_lost();
                }
                Ok::<(), std::convert::Infallible>(())
            });
        }
        let conn = ConnectionManager::new_lazy_with_config(client, config)?;
        Ok(Self { conn, restart })
    }

    /// Reports a failure after which the crate reconnects (the same tests
    /// it applies) as a possible restart.
    fn watch<T>(&self, result: &Result<T, RedisError>) {
        if let Err(e) = result {
            if e.is_io_error() || e.is_unrecoverable_error() {
                self.restart.connection_lost();
            }
        }
    }
}

impl ConnectionLike for Link {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let result = self.conn.req_packed_command(cmd).await;
            self.watch(&result);
            result
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let result = self.conn.req_packed_commands(pipeline, offset, count).await;
            self.watch(&result);
            result
        })
    }

    fn get_db(&self) -> i64 {
        self.conn.get_db()
    }
}
