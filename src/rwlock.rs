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

use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::keys::Keys;
use crate::lock::Lock;
use crate::quorum::engine::Engine;
use crate::request::{request_methods, Options};

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
    /// `quorumlock:fence:<name>`). Readers write nothing to fence; a fenced
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
