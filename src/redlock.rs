//! The public handle: a client over a fixed set of nodes, and the common
//! ways in — [`Redlock::acquire`], [`Redlock::try_acquire`], and
//! [`Redlock::lock`] for every option.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::Retry;
use crate::election::{Campaign, Leader, Observer};
use crate::error::{ResourceName, Result};
use crate::health::{Health, NodeHealth};
use crate::keys::{Keys, Slots};
use crate::lock::Lock;
use crate::node::Window;
use crate::quorum::election;
use crate::quorum::engine::Engine;
use crate::request::LockRequest;
use crate::rwlock::{RwLockRequest, RwLockStatus};
use crate::semaphore::{SemaphoreRequest, SemaphoreStatus};
use crate::stats::Stats;
use crate::status::Status;

/// A Redlock client over a fixed set of independent Redis nodes; built by
/// a [`Builder`](crate::Builder).
///
/// Cheap to clone (an `Arc` inside) and `Send + Sync`: build one and share
/// it across tasks. Each node gets one long-lived multiplexed connection
/// that is replaced (at the next command) after the node restarts.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
///
/// # async fn demo() -> Result<(), quorumlock::Error> {
/// let redlock = quorumlock::Builder::new([
///     "redis://127.0.0.1:7001",
///     "redis://127.0.0.1:7002",
///     "redis://127.0.0.1:7003",
///     "redis://127.0.0.1:7004",
///     "redis://127.0.0.1:7005",
/// ])
/// .build()
/// .await?;
///
/// match redlock.try_acquire("invoice:nightly", Duration::from_secs(600)).await {
///     Ok(lock) => {
///         // run the job within lock.validity()
///         lock.release().await?;
///     }
///     Err(e) if e.is_contended() => println!("another server runs it tonight"),
///     Err(e) => return Err(e),
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct Redlock {
    pub(crate) engine: Arc<Engine>,
}

impl Redlock {
    /// Number of nodes.
    pub fn nodes(&self) -> usize {
        self.engine.nodes.len()
    }

    /// Votes needed for a lock: `nodes / 2 + 1`.
    pub fn quorum(&self) -> usize {
        self.engine.needed()
    }

    /// The nodes as `host:port/db`, in the order given.
    pub fn node_labels(&self) -> Vec<String> {
        let nodes = self.engine.nodes.iter();
        nodes.map(|n| n.label().to_owned()).collect()
    }

    /// Takes the lock, retrying per the builder's policy (by default 3
    /// retries after random delays of 0–200 ms).
    ///
    /// The lock is granted when a majority of nodes accepted it and validity
    /// (`ttl − elapsed − drift`) is left. Each attempt uses a fresh token,
    /// and a failed attempt releases whatever it set on every node before
    /// the next one. For more options (several resources, a fencing token,
    /// a wait limit, renewal, scoped work) see [`lock`](Redlock::lock).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`](crate::Error::InvalidInput) (nothing sent)
    /// for an empty resource or a TTL that is zero, not above the drift, or
    /// above [`MAX_TTL`](crate::MAX_TTL). After the last attempt:
    /// [`Error::Contended`](crate::Error::Contended) when another owner
    /// holds it, [`Error::Unavailable`](crate::Error::Unavailable) /
    /// [`Error::ValidityExhausted`](crate::Error::ValidityExhausted) when
    /// too few nodes answered in time.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future (e.g. under `tokio::time::timeout`) spawns the
    /// release of whatever the current attempt had set, so no partial keys
    /// stay behind until their TTL.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
    /// let lock = redlock.acquire("invoice:nightly", std::time::Duration::from_secs(30)).await?;
    /// lock.release().await
    /// # }
    /// ```
    pub async fn acquire(&self, resource: impl AsRef<[u8]>, ttl: Duration) -> Result<Lock> {
        self.lock(resource, ttl).acquire().await
    }

    /// Makes one attempt, without retries.
    ///
    /// # Errors
    ///
    /// As for [`acquire`](Redlock::acquire).
    ///
    /// # Cancel safety
    ///
    /// As for [`acquire`](Redlock::acquire).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
    /// match redlock.try_acquire("invoice:nightly", std::time::Duration::from_secs(30)).await {
    ///     Ok(lock) => lock.release().await?,
    ///     Err(e) if e.is_contended() => { /* skip this run */ }
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn try_acquire(&self, resource: impl AsRef<[u8]>, ttl: Duration) -> Result<Lock> {
        let once = self.lock(resource, ttl).retry(Retry::Times(0));
        once.acquire().await
    }

    /// Describes a lock on `resource` for `ttl`, with every option: more
    /// resources taken all or nothing ([`and`](LockRequest::and), or
    /// [`lock_all`](Redlock::lock_all)), a
    /// fencing token ([`fenced`](LockRequest::fenced)), how long and how
    /// often to try ([`retry`](LockRequest::retry)), automatic renewal
    /// ([`auto_renew`](LockRequest::auto_renew)); then
    /// [`acquire`](LockRequest::acquire) it, or [`run`](LockRequest::run)
    /// work under it. The options are independent of each other and of
    /// their order.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
    /// use std::time::Duration;
    /// let lock = redlock
    ///     .lock("ledger", Duration::from_secs(10))
    ///     .fenced()
    ///     .retry(quorumlock::Retry::Until(Duration::from_secs(30)))
    ///     .acquire()
    ///     .await?;
    /// let fence = lock.fence();
    /// # lock.release().await
    /// # }
    /// ```
    pub fn lock(&self, resource: impl AsRef<[u8]>, ttl: Duration) -> LockRequest {
        self.lock_all([resource], ttl)
    }

    /// Describes one lock over several resources, taken all or nothing;
    /// the same options as [`lock`](Redlock::lock) apply (a fencing token
    /// excepted). An empty list or a resource listed twice is refused by
    /// [`acquire`](LockRequest::acquire).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
    /// let accounts = ["account:17", "account:42"];
    /// let lock = redlock
    ///     .lock_all(accounts, std::time::Duration::from_secs(5))
    ///     .acquire()
    ///     .await?;
    /// // transfer between the two accounts
    /// # lock.release().await
    /// # }
    /// ```
    pub fn lock_all<I, R>(&self, resources: I, ttl: Duration) -> LockRequest
    where
        I: IntoIterator<Item = R>,
        R: AsRef<[u8]>,
    {
        let resources = resources.into_iter().map(|r| r.as_ref().to_vec()).collect();
        LockRequest::new(self.engine.clone(), resources, ttl)
    }

    /// Describes the read side of the read–write lock `name`, held for
    /// `ttl`: shared with every other reader, never with a writer (see
    /// [`RwLockRequest`] for the guarantee and its options); then
    /// [`acquire`](RwLockRequest::acquire) it or
    /// [`run`](RwLockRequest::run) work under it.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
    /// let rows = redlock
    ///     .read("catalog", std::time::Duration::from_secs(30))
    ///     .run(|_signal| async move { /* no writer meanwhile */ 42 })
    ///     .await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn read(&self, name: impl AsRef<[u8]>, ttl: Duration) -> RwLockRequest {
        RwLockRequest::new(self.engine.clone(), name.as_ref().to_vec(), true, ttl)
    }

    /// Describes the write side of the read–write lock `name`, held for
    /// `ttl`: exclusive of every reader and every other writer, and a lock
    /// of `name` to every other Redlock client (see [`RwLockRequest`]).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
    /// redlock
    ///     .write("catalog", std::time::Duration::from_secs(30))
    ///     .run(|_signal| async move { /* nobody else reads or writes */ })
    ///     .await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn write(&self, name: impl AsRef<[u8]>, ttl: Duration) -> RwLockRequest {
        RwLockRequest::new(self.engine.clone(), name.as_ref().to_vec(), false, ttl)
    }

    /// Reads who holds the read–write lock `name` on every node, without
    /// taking anything: per node, the writer (or a plain lock of `name`)
    /// and how many readers hold, in one read-only script per node.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`](crate::Error::InvalidInput) (nothing read)
    /// for an empty name or one with a reserved prefix.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
    /// let status = redlock.rwlock_status("catalog").await?;
    /// println!("{status}"); // "catalog" is read by 2 readers (on 3 of 5 nodes or more), expires in 29.1s
    /// # Ok(())
    /// # }
    /// ```
    pub async fn rwlock_status(&self, name: impl AsRef<[u8]>) -> Result<RwLockStatus> {
        RwLockStatus::read(&self.engine, name.as_ref()).await
    }

    /// Describes permits of the counting semaphore `name`, which has
    /// `permits` of them, each held for `ttl`: at most `permits` are held
    /// at once across every client and host (see [`SemaphoreRequest`] for
    /// the guarantee and its options: how many to take, a fencing token,
    /// retries, renewal); then [`acquire`](SemaphoreRequest::acquire) them
    /// or [`run`](SemaphoreRequest::run) work under them.
    ///
    /// Every client of one semaphore must name the same number of permits;
    /// the nodes record the one its holders named and refuse another
    /// ([`Error::LimitMismatch`](crate::Error::LimitMismatch)).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
    /// let done = redlock
    ///     .semaphore("exports", 4, std::time::Duration::from_secs(30))
    ///     .run(|_signal| async move { /* at most 4 of these at once */ })
    ///     .await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn semaphore(
        &self,
        name: impl AsRef<[u8]>,
        permits: u32,
        ttl: Duration,
    ) -> SemaphoreRequest {
        SemaphoreRequest::new(self.engine.clone(), name.as_ref().to_vec(), permits, ttl)
    }

    /// Reads who holds the permits of the semaphore `name` of `permits`
    /// permits, on every node, without taking anything: per slot, what
    /// each node holds. One script per node reads every slot and answers
    /// for the held ones only: one round trip, whose reply grows with the
    /// permits held, and the limit its holders named as the nodes record
    /// it ([`SemaphoreStatus::limit`]). Each node has the
    /// [node timeout](crate::Builder::node_timeout) plus `permits / 1024`
    /// of it to answer (twice the node timeout at
    /// [`MAX_PERMITS`](crate::MAX_PERMITS)).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`](crate::Error::InvalidInput) (nothing read)
    /// for an empty name, no permits or more than
    /// [`MAX_PERMITS`](crate::MAX_PERMITS).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
    /// let status = redlock.semaphore_status("exports", 4).await?;
    /// println!("{status}"); // "exports": 1 of 4 permits held (3f9a0c1e… slot 2, expires in 29.1s), 3 free
    /// # Ok(())
    /// # }
    /// ```
    pub async fn semaphore_status(
        &self,
        name: impl AsRef<[u8]>,
        permits: u32,
    ) -> Result<SemaphoreStatus> {
        let name = name.as_ref();
        let slots = Slots::new(name, permits, false)?;
        let mut keys: Vec<Vec<u8>> = (0..slots.count()).map(|i| slots.key(i).to_vec()).collect();
        keys.push(slots.limit_key().to_vec());
        let statuses = self.engine.statuses(keys.into()).await;
        Ok(SemaphoreStatus::new(ResourceName::new(name), statuses))
    }

    /// Describes a campaign for the leadership of the election `name`,
    /// held for `ttl` at a time and renewed: [`lead`](Campaign::lead)
    /// resolves once this process leads, with a
    /// [`Leadership`](crate::Leadership) that carries its **epoch** (a
    /// fencing token: unique, and larger for each later leader) and the
    /// value observers read. See `docs/election.md` for what an epoch
    /// protects.
    ///
    /// An election's keys are `quorumlock:election:{<name>}` (the
    /// leadership lock), `…:epoch` (its fencing counter, never expires) and
    /// `…:leader` (the leader's record).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
    /// use std::time::Duration;
    ///
    /// let leadership = redlock
    ///     .campaign("scheduler", Duration::from_secs(10))
    ///     .value("worker-3:8080")
    ///     .lead()
    ///     .await?;
    /// let epoch = leadership.epoch();
    /// leadership
    ///     .run(|_signal| async move { /* lead, tagging writes with `epoch` */ })
    ///     .await?;
    /// # let _ = epoch;
    /// # Ok(())
    /// # }
    /// ```
    pub fn campaign(&self, name: impl AsRef<[u8]>, ttl: Duration) -> Campaign {
        Campaign::new(self.engine.clone(), name.as_ref().to_vec(), ttl)
    }

    /// Who leads the election `name` now: one read on every node,
    /// decided at quorum. `Some` when a majority of nodes carry a leader's
    /// record and still hold its leadership lock (the value of its latest
    /// proclamation among them); `None` when no leader can have a majority.
    /// A record whose lock expired (a leader that crashed) counts nowhere.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`](crate::Error::InvalidInput) for an empty
    /// name; [`Error::Unavailable`](crate::Error::Unavailable) (operation
    /// `check`) when the nodes that did not answer could have tipped it.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
    /// match redlock.leader("db-primary").await? {
    ///     Some(leader) => println!("epoch {}: {:?}", leader.epoch, leader.value),
    ///     None => println!("no leader now"),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn leader(&self, name: impl AsRef<[u8]>) -> Result<Option<Leader>> {
        let keys = Keys::election(name.as_ref())?;
        let found = election::read(&self.engine, &keys).await?;
        Ok(found.leader.map(Leader::from))
    }

    /// Follows who leads the election `name`: an [`Observer`], a stream
    /// of the current state first, then of each change (a new leader, a
    /// new value, nobody leading, or unknown while too few nodes answer:
    /// [`Observed`](crate::Observed)); reported within a third of the
    /// leader's TTL after the nodes show it, and at once after a
    /// resignation when fast hand-off is on. See [`Observer`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) {
    /// use futures::StreamExt;
    ///
    /// let mut leaders = redlock.observe("db-primary");
    /// while let Some(observed) = leaders.next().await {
    ///     println!("{observed:?}");
    /// }
    /// # }
    /// ```
    pub fn observe(&self, name: impl AsRef<[u8]>) -> Observer {
        Observer::new(self.engine.clone(), name.as_ref())
    }

    /// Waits until the work this client left running in the background has
    /// finished — releases still travelling to slow nodes, cleanups of
    /// cancelled attempts, releases spawned by dropped locks — or `limit`
    /// has passed. Returns true when everything finished. Other clients'
    /// work in the same process is not waited for; clones of this
    /// `Redlock` share its work.
    ///
    /// [`Lock::release`] returns once a majority confirmed; a process that
    /// exits right after it (a CLI, a cron job) should call this first, or
    /// the slowest nodes may keep the key until its TTL.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock, lock: quorumlock::Lock) {
    /// let _ = lock.release().await;
    /// redlock.settle(std::time::Duration::from_millis(500)).await;
    /// # }
    /// ```
    pub async fn settle(&self, limit: Duration) -> bool {
        self.engine.background.settle(limit).await
    }

    /// Reads who holds `resource` on every node, without taking anything:
    /// per node, whether the key exists, a prefix of its value and its TTL.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) {
    /// let status = redlock.status("invoice:nightly").await;
    /// println!("{status}"); // "invoice:nightly" is held by 3f9a0c1e… on 5 of 5 nodes, expires in 29.1s
    /// # }
    /// ```
    pub async fn status(&self, resource: impl AsRef<[u8]>) -> Status {
        self.engine.status(resource.as_ref()).await
    }

    /// Probes every node now: per node, whether it is reachable, accepts
    /// this client's credentials and is admitted to vote (not refused, not
    /// in restart quarantine), its `PING` latency and its error; and
    /// whether that makes a quorum ([`Health::quorum_ready`], and
    /// [`Health::state`]: ready, degraded, unavailable). For readiness
    /// probes of a service. Each node is given at most the connect
    /// timeout, all at once.
    ///
    /// It reports what a **new** connection would meet: besides a `PING`
    /// on the connection in use (opening it when there is none; counted in
    /// [`stats`](Redlock::stats) as a command), each node gets a new
    /// connection of its own, authenticated as configured, for a `PING`
    /// (not counted). A password changed on a server leaves the connections
    /// already open authenticated: the node keeps voting through this
    /// client, but a restarted replica, or this one after a reconnect,
    /// would be refused, and it shows here as not authenticated. The cost is
    /// a connection per node and call (about a millisecond on a local
    /// network).
    ///
    /// A member that fails over (a Sentinel group, a cluster) is ready only
    /// when each of its masters has every replica durable votes wait for
    /// online (`INFO replication`, read on each call): short of one, no
    /// vote of it can count. A cluster member is as ready as its least
    /// ready master: a lock whose slot another master serves may still be
    /// taken meanwhile.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) {
    /// let health = redlock.health().await;
    /// println!("{health}"); // "4 of 5 nodes ready (3 needed); 10.0.0.5:6379/0: connection failed: …"
    /// for node in &health.nodes {
    ///     println!("{}: ready {} latency {:?}", node.node, node.is_ready(), node.latency);
    /// }
    /// # }
    /// ```
    pub async fn health(&self) -> Health {
        let engine = &self.engine;
        let timeout = engine.config.connect_timeout;
        // Per node: a `PING` (opening the connection, and so authenticating
        // and admitting it, when there is none) and, with restart
        // quarantine, its standing; for a member that fails over, its
        // masters' replicas; all at once, each within the timeout.
        // A new connection's `PING` beside, for what a reconnect meets.
        let nodes = futures::future::join_all(engine.nodes.iter().map(|node| async move {
            let window = Window::from_now(timeout);
            let checks = async {
                let start = Instant::now();
                node.ping(window).await?;
                let latency = start.elapsed();
                node.check_standing(window).await?;
                node.check_replicas(window).await?;
                Ok(latency)
            };
            let new = node.ping_new_connection(window);
            let (live, new) = futures::join!(node.within(window, checks), new);
            NodeHealth::from_probe(node.label(), live.and_then(|latency| new.map(|()| latency)))
        }))
        .await;
        Health {
            nodes,
            needed: engine.needed(),
        }
    }

    /// A snapshot of this client's counters: per node (commands, votes,
    /// timeouts, errors by kind, reply latency) and for its locks'
    /// renewals and lost-lock signals. Clones of a `Redlock` share the
    /// counters; they start at zero when [`build`](crate::Builder::build) runs
    /// and only grow.
    ///
    /// Recording costs a few relaxed atomic adds per command and never
    /// allocates; this snapshot allocates. Counters are read one by one, so
    /// while operations run the snapshot is not a consistent cut.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) {
    /// let stats = redlock.stats();
    /// for node in &stats.nodes {
    ///     println!(
    ///         "{}: {} commands, {} timeouts, p99 {:?}, granted {} / refused {}",
    ///         node.node,
    ///         node.commands,
    ///         node.timeouts,
    ///         node.latency.quantile(0.99),
    ///         node.acquire.yes,
    ///         node.acquire.no,
    ///     );
    /// }
    /// println!("renewals failed: {}", stats.leases.renewal_failures);
    /// # }
    /// ```
    pub fn stats(&self) -> Stats {
        self.engine.stats()
    }
}
