//! One server a member sends to ([`Shard`]): its connection, a multiplexed
//! connection of the redis crate replaced by this module when it dies — so
//! every reconnect is known here, and reported to the server's
//! [`Quarantine`] before the new connection carries a command.
//!
//! A command goes straight to the multiplexed connection (no boxing, no
//! manager in between). A command that meets a dead connection fails; the
//! next one opens a new connection (commands arriving meanwhile wait for
//! the same attempt). With RESP3 (`?protocol=resp3`) the crate's
//! disconnection notice marks the connection dead as soon as the close is
//! seen. A new connection carries no command before the member's
//! [`Gate`] admitted it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures::future::{BoxFuture, FutureExt, Shared};
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{
    AsyncConnectionConfig, Client, Cmd, ErrorKind, PushInfo, PushKind, RedisError, ServerErrorKind,
    Value,
};

use crate::member::quarantine::Quarantine;
use crate::member::sentinel::Sentinels;
use crate::node::admission::Gate;

type Opening = BoxFuture<'static, Result<MultiplexedConnection, RedisError>>;

/// One server a member sends to: its connection and its restart state,
/// so a failed-over cluster shard is quarantined on its own
/// (`docs/guarantees.md`, "Members").
pub(crate) struct Shard {
    /// `host:port` of the server (the member's label for a single server
    /// or a Sentinel group).
    pub(crate) addr: Box<str>,
    /// Its restart state, told of every connection lost or replaced.
    pub(crate) restart: Quarantine,
    /// Where it connects.
    pub(crate) target: Target,
    /// What a new connection must show before it is used.
    gate: Arc<Gate>,
    connect_timeout: Duration,
    state: Mutex<State>,
    /// Connections opened so far.
    opened: AtomicU64,
}

enum State {
    /// No connection: the next command opens one.
    Down,
    /// Connection `number` is being opened; every command waits for this
    /// attempt.
    Connecting(Shared<Opening>, u64),
    /// The connection in use, and its number (so that a failure on an
    /// older connection does not take a newer one down).
    Up(MultiplexedConnection, u64),
}

/// Where a shard connects: one server, or the master a Sentinel group
/// names at each connect. Cheap to clone.
#[derive(Clone)]
pub(crate) enum Target {
    /// One server, as the client reaches it.
    Server(Box<Client>),
    /// The master of a Sentinel-managed group, asked of its sentinels
    /// before every connection (so a connection after a failover reaches
    /// the promoted replica).
    Sentinel(Arc<Sentinels>),
}

impl Target {
    /// The client of the server to connect to now. Boxed: the redis
    /// crate's lookup is a deep future, which would otherwise nest inside
    /// every future that connects.
    pub(crate) fn client(&self) -> BoxFuture<'_, Result<Client, RedisError>> {
        match self {
            Target::Server(client) => Box::pin(futures::future::ready(Ok((**client).clone()))),
            Target::Sentinel(sentinels) => Box::pin(sentinels.master()),
        }
    }

    /// `cmd`'s reply on a new connection of its own to the server to
    /// connect to now, opened and answered each within `timeout`, then
    /// closed: neither admitted nor counted (nothing votes on it).
    pub(crate) async fn ask_once(&self, cmd: &Cmd, timeout: Duration) -> Result<Value, RedisError> {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout));
        let client = self.client().await?;
        let mut conn = client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        conn.req_packed_command(cmd)
            .await
            .and_then(Value::extract_error)
    }
}

impl Shard {
    /// The server `addr` reached through `target`, its connections
    /// admitted by `gate`; the connection is prepared, not opened.
    /// Commands travel in order on one multiplexed connection that is
    /// never torn down for a slow reply (no response timeout inside it).
    pub(crate) fn new(
        addr: &str,
        target: Target,
        connect_timeout: Duration,
        gate: Arc<Gate>,
    ) -> Arc<Self> {
        Arc::new(Self {
            addr: addr.into(),
            restart: Quarantine::default(),
            target,
            gate,
            connect_timeout,
            state: Mutex::new(State::Down),
            opened: AtomicU64::new(0),
        })
    }

    /// Sends one command and reads its reply; with `asking`, right after
    /// `ASKING` (a cluster slot being migrated), in one write.
    ///
    /// The redis crate's command future is large (over a kilobyte) and
    /// every layer above would carry and move it (the fan-out, the node's
    /// accounting, the reply's meaning): it goes through the crate's
    /// `ConnectionLike` entry, which builds it in a box of its own.
    pub(crate) async fn send(
        self: &Arc<Self>,
        cmd: &Cmd,
        asking: bool,
    ) -> Result<Value, RedisError> {
        let (mut conn, number) = self.connection().await?;
        let result = if asking {
            let mut pipe = redis::pipe();
            pipe.cmd("ASKING").add_command(cmd.clone());
            let replies = conn.req_packed_commands(&pipe, 0, 2).await;
            replies.map(|mut replies| {
                let reply = replies.pop().unwrap_or(Value::Nil);
                match replies.pop() {
                    // `ASKING` refused (an ACL without `+asking`): that is
                    // the answer, not the `MOVED` the command then meets.
                    Some(refused @ Value::ServerError(_)) => refused,
                    _ => reply,
                }
            })
        } else {
            conn.req_packed_command(cmd).await
        };
        // A failure the connection does not survive takes it down (a newer
        // one stays) and reports the loss; so does a server that turned
        // replica (`READONLY`): the next connection asks again which server
        // is the master.
        let lost = match &result {
            Err(e) => {
                e.is_io_error()
                    || e.is_unrecoverable_error()
                    || e.is_connection_dropped()
                    || e.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly)
            }
            Ok(Value::ServerError(e)) => e.code() == "READONLY",
            Ok(_) => false,
        };
        if lost {
            self.down(number);
        }
        result
    }

    /// Takes the connection in use down: the next command connects again
    /// (to the master a Sentinel group's sentinels name then) and is
    /// admitted again. For a master whose durable wait fell short: it may
    /// have been deposed (its replicas follow another master now) or have
    /// lost a replica, which the new connection's admission tells apart.
    pub(crate) fn reconnect(&self) {
        let number = match &*self.state() {
            State::Up(_, number) => *number,
            _ => return,
        };
        self.down(number);
    }

    /// Opens the connection if there is none (a new connection starts a
    /// new restart epoch before this returns).
    pub(crate) async fn open(self: &Arc<Self>) -> Result<(), RedisError> {
        self.connection().await.map(|_| ())
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes connection `number` down, if it is still the one in use.
    fn down(&self, number: u64) {
        let mut state = self.state();
        if matches!(&*state, State::Up(_, n) if *n == number) {
            // The standing is unknown before the connection is gone: no
            // command sees the node down with its old standing.
            self.restart.connection_lost();
            *state = State::Down;
        }
    }

    /// The connection in use, opening one if there is none.
    async fn connection(self: &Arc<Self>) -> Result<(MultiplexedConnection, u64), RedisError> {
        let (attempt, number) = {
            let mut state = self.state();
            match &*state {
                State::Up(conn, number) => return Ok((conn.clone(), *number)),
                State::Connecting(attempt, number) => (attempt.clone(), *number),
                State::Down => {
                    let number = self.opened.fetch_add(1, Ordering::Relaxed) + 1;
                    let attempt = connect(self, number).shared();
                    *state = State::Connecting(attempt.clone(), number);
                    (attempt, number)
                }
            }
        };
        let result = attempt.clone().await;
        let mut state = self.state();
        let ours = matches!(&*state, State::Connecting(current, _) if current.ptr_eq(&attempt));
        match (result, ours) {
            (Ok(conn), true) => {
                // A new connection: the node may have restarted since the
                // last one. Known before the connection carries a command.
                self.restart.connection_lost();
                *state = State::Up(conn.clone(), number);
                Ok((conn, number))
            }
            (Err(e), true) => {
                *state = State::Down;
                Err(e)
            }
            // Another caller installed this attempt's outcome already.
            (result, false) => match &*state {
                State::Up(conn, number) => Ok((conn.clone(), *number)),
                _ => result.map(|conn| (conn, u64::MAX)),
            },
        }
    }
}

/// Opens `shard`'s connection `number` (to the master its sentinels name
/// now, for a Sentinel group) and has the member's [`Gate`] admit it
/// (which server it is, whether it can evict keys, that it is a master),
/// all within the connect timeout; with RESP3, the crate's disconnection
/// notice takes it down as soon as the close is seen.
fn connect(shard: &Arc<Shard>, number: u64) -> Opening {
    let (target, gate) = (shard.target.clone(), shard.gate.clone());
    let (timeout, shard) = (shard.connect_timeout, Arc::downgrade(shard));
    let open = async move {
        let client = target.client().await?;
        let mut config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(None);
        let resp3 = client
            .get_connection_info()
            .redis_settings()
            .protocol()
            .supports_resp3();
        if resp3 {
            config = config.set_push_sender(move |info: PushInfo| {
                if info.kind == PushKind::Disconnection {
                    if let Some(shard) = shard.upgrade() {
                        shard.down(number);
                    }
                }
                Ok::<(), std::convert::Infallible>(())
            });
        }
        let conn = client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        gate.admit(&conn).await?;
        Ok(conn)
    };
    Box::pin(async move {
        match tokio::time::timeout(timeout, open).await {
            Ok(result) => result,
            Err(_) => Err(RedisError::from(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the node did not answer its first commands within the connect timeout",
            ))),
        }
    })
}
