//! [`RwLockRequest`]: the read or the write side of a read–write lock to
//! take, with the options of a lock, and to take it
//! ([`RwLockRequest::acquire`]) or run work under it
//! ([`RwLockRequest::run`]).
//!
//! A writer holds the resource's own key, as a lock does; readers hold an
//! entry each in a sorted set beside it (`quorumlock:rwlock:{<name>}:…`),
//! with the resource's key set to a marker while any of them holds, so
//! that plain locks of the resource are kept out by readers and writers
//! alike. One script per operation sees the writer, the writer's intent
//! mark and the readers together (`node/lua/read_*.lua`,
//! `write_acquire.lua`); each side is granted by a majority of the nodes,
//! as a lock is. The argument is in `docs/rwlock.md`.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::keys::Keys;
use crate::lock::Lock;
use crate::quorum::engine::Engine;
use crate::request::{request_methods, Options};
use crate::status::{expiry, NodeView, Status};

/// One side of a read–write lock to take, with its options; from
/// [`Redlock::read`](crate::Redlock::read) or
/// [`Redlock::write`](crate::Redlock::write).
///
/// **While a writer's validity lasts, no other writer and no reader holds
/// the resource; while a reader's validity lasts, no writer does** —
/// across every client and host, under the lock's assumptions (see the
/// README's guarantees). Readers share: any number hold at once, each on
/// its own lease (a crashed reader ends at its own TTL; renewing one
/// extends no other). A waiting writer keeps new readers out, so it waits
/// for the readers that hold, not for the readers' luck.
///
/// A writer is a lock of the resource to every Redlock client: a plain
/// [`Redlock::lock`](crate::Redlock::lock) of the same name waits for the
/// writer and for the readers alike.
///
/// | option | default |
/// |---|---|
/// | [`fenced`](RwLockRequest::fenced) | no fencing token (writers only) |
/// | [`retry`](RwLockRequest::retry) | the builder's [`retry`](crate::Builder::retry) |
/// | [`auto_renew`](RwLockRequest::auto_renew) | no renewal for `acquire`; the default [`Renewal`](crate::Renewal) for `run` |
///
/// # Examples
///
/// ```no_run
/// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
/// use std::time::Duration;
///
/// // Any number of readers at once…
/// let reader = redlock.read("catalog", Duration::from_secs(30)).acquire().await?;
/// reader.release().await?;
/// // …or one writer, fenced.
/// let writer = redlock.write("catalog", Duration::from_secs(30)).fenced().acquire().await?;
/// println!("writing as {:?}", writer.fence());
/// writer.release().await
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a read–write lock request does nothing until acquire() or run() is awaited"]
pub struct RwLockRequest {
    options: Options,
    name: Vec<u8>,
    reader: bool,
}

impl RwLockRequest {
    pub(crate) fn new(engine: Arc<Engine>, name: Vec<u8>, reader: bool, ttl: Duration) -> Self {
        Self {
            options: Options::new(engine, ttl),
            name,
            reader,
        }
    }

    /// Hands out a **fencing token** ([`Lock::fence`]) with the write
    /// side: larger than every earlier writer's (and every earlier fenced
    /// lock's of the same resource: they share its counter,
    /// `quorumlock:fence:{<name>}`). Readers write nothing to fence; a fenced
    /// read is refused. Costs one more round trip per acquire.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
    /// let writer = redlock
    ///     .write("catalog", std::time::Duration::from_secs(30))
    ///     .fenced()
    ///     .acquire()
    ///     .await?;
    /// let token = writer.fence().expect("a fenced writer carries a token");
    /// # writer.release().await
    /// # }
    /// ```
    pub fn fenced(mut self) -> Self {
        self.options.fenced = true;
        self
    }

    /// Takes the side asked for: granted when a majority of the nodes
    /// admitted this attempt's token and validity (`ttl − elapsed −
    /// drift`) is left — a reader where no writer holds or waits, a writer
    /// where nobody holds. A writer refused by readers leaves its intent
    /// mark on the node, which keeps new readers out until the writer is
    /// in (or for at least its TTL, and 2 s, if it stops waiting). Each
    /// attempt uses a fresh token, and a failed attempt removes whatever
    /// it set on every node before the next one. The held side is a
    /// [`Lock`], with every method of one.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] (nothing sent) for an empty name or one
    /// with a reserved prefix, a fenced read, a TTL the lock would refuse,
    /// or renewal settings that cannot work for the TTL (the lock is
    /// released again). After the last attempt: [`Error::Contended`] when
    /// the other side holds it, [`Error::Unavailable`] /
    /// [`Error::ValidityExhausted`] when too few nodes answered in time,
    /// [`Error::FenceExhausted`] when no fencing token is left.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future spawns the release of whatever the current
    /// attempt had set.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
    /// match redlock.read("catalog", std::time::Duration::from_secs(30)).acquire().await {
    ///     Ok(reader) => reader.release().await?,
    ///     Err(e) if e.is_contended() => println!("a writer holds the catalog"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn acquire(self) -> Result<Lock> {
        if self.reader && self.options.fenced {
            return Err(Error::invalid("a reader takes no fencing token"));
        }
        let keys = Keys::read_write(&self.name, self.reader, self.options.fenced)?;
        self.options.acquire(keys).await
    }

    request_methods!(
        "the lock's side",
        r#"redlock.read("catalog", Duration::from_secs(30))"#
    );
}

/// A read–write lock as every node holds it at one moment; from
/// [`Redlock::rwlock_status`](crate::Redlock::rwlock_status).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RwLockStatus {
    /// The write side: per node, a writer's token (or a plain lock's of
    /// the resource) and its expiry; readers do not show here.
    pub writer: Status,
    /// Per node, in the order of the nodes: its label and the readers
    /// holding there (`None` where the node did not answer usably).
    pub readers: Vec<(String, Option<u32>)>,
    /// The time until the last reader's entry ends, on the node where it
    /// lives longest; `None` without readers.
    pub readers_expire_in: Option<Duration>,
}

impl RwLockStatus {
    pub(crate) async fn read(engine: &Engine, name: &[u8]) -> Result<Self> {
        let keys = Keys::read_write(name, true, false)?;
        let mut statuses = engine.read_write(&keys).await.into_iter();
        let (Some(writer), Some(readers)) = (statuses.next(), statuses.next()) else {
            return Err(Error::invalid("no status read"));
        };
        let readers_expire_in = readers.nodes.iter().filter_map(|(_, view)| match view {
            NodeView::Held { expires_in, .. } => *expires_in,
            _ => None,
        });
        let readers_expire_in = readers_expire_in.max();
        let readers = readers.nodes.into_iter().map(|(label, view)| {
            let seen = match view {
                NodeView::Free => Some(0),
                NodeView::Held { token_prefix, .. } => token_prefix.parse().ok(),
                NodeView::Failed(_) => None,
            };
            (label, seen)
        });
        Ok(Self {
            writer,
            readers: readers.collect(),
            readers_expire_in,
        })
    }

    /// Readers that a quorum of nodes each see at least (the quorum-th
    /// largest count): a reader holds only where a majority has its entry.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
    /// let status = redlock.rwlock_status("catalog").await?;
    /// println!("{} readers, written: {}", status.readers_held(), status.writer.held_by_quorum());
    /// # Ok(())
    /// # }
    /// ```
    pub fn readers_held(&self) -> u32 {
        let mut counts: Vec<u32> = self.readers.iter().filter_map(|(_, r)| *r).collect();
        counts.sort_unstable_by(|a, b| b.cmp(a));
        let quorum = self.writer.quorum.max(1);
        counts.get(quorum - 1).copied().unwrap_or(0)
    }
}

/// `"catalog" is written by 3f9a0c1e… on 3 of 5 nodes, expires in 8.1s`,
/// `"catalog" is read by 2 readers (on 3 of 5 nodes or more), expires in
/// 29.1s`, or the writer's status (free, unknown).
impl fmt::Display for RwLockStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (name, quorum) = (&self.writer.resource, self.writer.quorum);
        let nodes = self.readers.len();
        if let Some((prefix, n)) = self.writer.leading_holder().filter(|&(_, n)| n >= quorum) {
            let left = expiry(self.writer.expires_in());
            return write!(
                f,
                "{name} is written by {prefix}… on {n} of {nodes} nodes{left}"
            );
        }
        match self.readers_held() {
            0 => self.writer.fmt(f),
            k => {
                let left = expiry(self.readers_expire_in);
                write!(
                    f,
                    "{name} is read by {k} readers (on {quorum} of {nodes} nodes or more){left}"
                )
            }
        }
    }
}
