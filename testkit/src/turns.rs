//! One client's turns, the driver every load shares: a [`Turn`] drawn from
//! the client's seed, the acquire (dropped at a seeded point, as a caller's
//! `select!` would), the window recorded before the holder acts, the hold,
//! and the release (dropped too). A load says only what differs — how it
//! takes, what it does while it holds, how it lets go — as [`Turns`]; every
//! [`Turns`] is a [`Load`] a safety run can play.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::{BoxFuture, FutureExt};
use quorumlock::{Builder, Lock, Redlock};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::cancel::{self, Cancel};
use super::checker::{Session, Store};
use super::safety::{Client, Load};
use super::workload::Workload;

/// What a load's clients take, do while they hold it and how they let go;
/// [`drive`] plays the rest of each turn.
pub trait Turns: Clone + Send + Sync + 'static {
    /// What a grant hands the holder, with whatever the turn drew for it.
    type Held: Send + Sync;

    /// Names the acquire call in the assertion that it never fails on bad
    /// input.
    const ACQUIRE: &'static str;

    /// How long nodes must have been up before the load can start (a
    /// restart quarantine).
    fn warmup(&self) -> Duration {
        Duration::ZERO
    }

    /// Adjusts each client's builder.
    fn builder(&self, builder: Builder) -> Builder {
        builder
    }

    /// The store the holders update, for `resources` resources.
    fn store(&self, resources: usize) -> Arc<dyn Store>;

    /// The glob of the run's keys that must be gone once every TTL passed.
    fn keys(&self, prefix: &str) -> String;

    /// Draws what `turn` adds for this load from `rng` (right after the
    /// turn itself) and returns the acquire of client `c`.
    fn take(&self, c: &Client, turn: &Turn, rng: &mut StdRng) -> Taking<Self>;

    /// After the faults: takes resource `name` whole for `ttl` with
    /// `redlock` (a fresh client), retrying for up to `wait`.
    fn probe(&self, redlock: &Redlock, name: &str, ttl: Duration, wait: Duration) -> Taking<Self>;

    /// The lock under what is held: its deadline, validity and extend.
    fn lock(held: &Self::Held) -> &Lock;

    /// The grant's fencing token (or epoch), if it has one.
    fn fence(held: &Self::Held) -> Option<u64>;

    /// What the holder does once its window is recorded: by default,
    /// [`work`] on [`Turns::lock`].
    fn hold<'a>(&'a self, h: Holding<'a, '_, Self::Held>) -> BoxFuture<'a, ()> {
        work(Self::lock(h.held), h.session, h.turn, || {}).boxed()
    }

    /// The release, or `None` when the holder drops what it holds
    /// without one (a crash).
    fn let_go(held: Self::Held) -> Release;
}

/// The acquire [`Turns::take`] and [`Turns::probe`] return.
pub type Taking<T> = BoxFuture<'static, quorumlock::Result<<T as Turns>::Held>>;

/// The release [`Turns::let_go`] returns, if any.
pub type Release = Option<BoxFuture<'static, quorumlock::Result<()>>>;

/// What [`Turns::hold`] acts with.
pub struct Holding<'a, 's, H> {
    /// The holder's client.
    pub client: &'a Client,
    /// The turn it drew.
    pub turn: &'a Turn,
    /// What it holds.
    pub held: &'a mut H,
    /// Where its accesses go.
    pub session: &'a mut Session<'s>,
}

impl<T: Turns> Load for T {
    fn warmup(&self) -> Duration {
        Turns::warmup(self)
    }

    fn builder(&self, builder: Builder) -> Builder {
        Turns::builder(self, builder)
    }

    fn store(&self, resources: usize) -> Arc<dyn Store> {
        Turns::store(self, resources)
    }

    fn client(&self, c: Client) -> BoxFuture<'static, ()> {
        let load = self.clone();
        async move { drive(&load, c).await }.boxed()
    }

    fn take_once<'a>(
        &'a self,
        redlock: &'a Redlock,
        name: &'a str,
        w: &'a Workload,
        wait: Duration,
    ) -> BoxFuture<'a, bool> {
        async move {
            match self.probe(redlock, name, w.max_ttl(), wait).await {
                Ok(held) => {
                    if let Some(release) = T::let_go(held) {
                        let _ = release.await;
                    }
                    true
                }
                Err(_) => false,
            }
        }
        .boxed()
    }

    fn keys(&self, prefix: &str) -> String {
        Turns::keys(self, prefix)
    }
}

/// One turn of a client, drawn from its seed: what it takes, for how
/// long, whether it extends and which calls it drops.
#[derive(Debug, Clone, Copy)]
pub struct Turn {
    /// The resource, `0..resources`.
    pub resource: usize,
    /// The TTL asked for.
    pub ttl: Duration,
    /// Time holding: `U(0, work)`.
    pub work: Duration,
    /// An extension mid-way: the TTL asked for, and how much of the
    /// validity reported afterwards the holder then works on (up to 1.2:
    /// its last access lands near, or past, its deadline).
    pub extend: Option<(Duration, f64)>,
    /// The pause after the turn.
    pub think: Duration,
    /// Whether the acquire waits in turn (`.fair()`).
    pub fair: bool,
    /// How the acquire call is dropped, if it is.
    pub cancel_acquire: Cancel,
    /// How the release call is dropped, if it is.
    pub cancel_release: Cancel,
    /// How the extend call is dropped, if it is.
    pub cancel_extend: Cancel,
}

impl Turn {
    /// Draws the next turn of a client of `w`.
    pub fn draw(rng: &mut StdRng, w: &Workload) -> Self {
        let resource = rng.random_range(0..w.resources);
        let ttl = w.ttls[rng.random_range(0..w.ttls.len())];
        let work = w.work.mul_f64(rng.random::<f64>());
        let extend =
            (w.extend_one_in > 0 && rng.random_range(0..w.extend_one_in) == 0).then(|| {
                let (lo, hi) = w.extend_ttls;
                let new_ttl = lo + hi.saturating_sub(lo).mul_f64(rng.random::<f64>());
                (new_ttl, 1.2 * rng.random::<f64>())
            });
        let think = w.think.mul_f64(rng.random::<f64>());
        let mut cancel = || Cancel::draw(rng, w.cancel_one_in, w.cancel_within);
        let (cancel_acquire, cancel_release) = (cancel(), cancel());
        let cancel_extend = Cancel::draw(rng, w.cancel_extend_one_in, w.cancel_within);
        let fair = w.fair_one_in > 0 && rng.random_range(0..w.fair_one_in) == 0;
        Self {
            resource,
            ttl,
            work,
            extend,
            think,
            fair,
            cancel_acquire,
            cancel_release,
            cancel_extend,
        }
    }
}

/// Client `c`'s turns of `load`, until [`Client::until`].
pub async fn drive<T: Turns>(load: &T, c: Client) {
    let checker = &c.checker;
    let mut rng = StdRng::seed_from_u64(c.seed);
    while Instant::now() < c.until {
        let turn = Turn::draw(&mut rng, &c.workload);
        let take = load.take(&c, &turn, &mut rng);
        let t0 = Instant::now();
        match cancel::run(turn.cancel_acquire, take).await {
            None => checker.acquire_cancelled(),
            Some(Ok(mut held)) => {
                let granted_at = Instant::now();
                checker.acquire_latency(granted_at - t0);
                let deadline = T::lock(&held).deadline();
                let mut session =
                    checker.granted(c.id, turn.resource, T::fence(&held), granted_at, deadline);
                session.requested_at(t0);
                let h = Holding {
                    client: &c,
                    turn: &turn,
                    held: &mut held,
                    session: &mut session,
                };
                load.hold(h).await;
                // Where nothing but an extend moves the deadline, reading it
                // once more keeps the window sound if that ever changes.
                session.observe(T::lock(&held).deadline());
                session.stop();
                if let Some(release) = T::let_go(held) {
                    match cancel::run(turn.cancel_release, release).await {
                        None => checker.release_cancelled(),
                        Some(Err(e)) => checker.release_failed(&e),
                        Some(Ok(())) => {}
                    }
                }
            }
            Some(Err(e)) => {
                assert!(!e.is_invalid_input(), "{}: {e}", T::ACQUIRE);
                checker.acquire_failed(&e);
            }
        }
        tokio::time::sleep(turn.think).await;
    }
}

/// The hold of a lock, permits or a side: half the turn's work, then the
/// turn's extension (`extended` runs once it succeeded) and the share of
/// the validity it leaves, or the other half.
pub async fn work(lock: &Lock, session: &mut Session<'_>, turn: &Turn, extended: impl FnOnce()) {
    tokio::time::sleep(turn.work / 2).await;
    match turn.extend {
        Some((new_ttl, then)) => {
            if hold_extend(lock, session, new_ttl, turn.ttl, turn.cancel_extend).await {
                extended();
            }
            tokio::time::sleep(lock.validity().mul_f64(then)).await;
        }
        None => tokio::time::sleep(turn.work / 2).await,
    }
}

/// Extends `lock` to `ttl` under `cancel`, reporting the lock's deadline to
/// the session after every poll (the only time it can change); true when
/// it was extended.
pub async fn hold_extend(
    lock: &Lock,
    session: &mut Session<'_>,
    ttl: Duration,
    old_ttl: Duration,
    cancel: Cancel,
) -> bool {
    let (began, before) = (Instant::now(), lock.deadline());
    let out = cancel::observed(cancel, lock.extend(ttl), || {
        session.observe(lock.deadline());
    })
    .await;
    let how = match out {
        None => {
            session.extend_cancelled(lock.deadline());
            "cancelled"
        }
        Some(Ok(_)) => {
            session.extended(lock.deadline(), ttl < old_ttl);
            "extended"
        }
        Some(Err(e)) => {
            assert!(e.is_lost(), "extend: {e}");
            session.observe(lock.deadline());
            session.extend_lost();
            "lost"
        }
    };
    session.note_extend(how, ttl, old_ttl, began, before);
    how == "extended"
}
