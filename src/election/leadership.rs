//! [`Leadership`]: an election won — the leadership lock, fenced and
//! renewed, with the leader's epoch and value; a new value at quorum
//! ([`Leadership::proclaim`]), the way out ([`Leadership::resign`]), and
//! work run under it ([`Leadership::run`]).

use std::fmt;
use std::future::Future;
use std::ops::Deref;
use std::sync::Arc;

use crate::error::lost::LossKind;
use crate::error::Result;
use crate::lease::signal::LostSignal;
use crate::lock::Lock;
use crate::node::election::Record;
use crate::quorum::election;
use crate::quorum::held::Held;

/// This process leads an election; from [`Campaign::lead`](crate::Campaign::lead).
///
/// A leadership is a fenced [`Lock`] renewed in the background, with all
/// of a lock's methods (through `Deref`, as a [`Permit`](crate::Permit)):
/// it lasts while its [validity](Lock::validity) is above zero, and its
/// [lost signal](Lock::lost_signal) fires once when it ends — lost (a
/// renewal refused by a majority), no longer counted on (a renewal late),
/// expired, at a renewal cap, or [resigned](Leadership::resign). Its
/// [epoch](Leadership::epoch) is the lock's fencing token: unique among the
/// election's leaders and larger than every earlier leader's — pass it
/// with every write a leader makes, to resources that refuse a smaller one
/// (`docs/election.md`).
///
/// Dropping a `Leadership` releases it in the background (observers are
/// told at once, as by [`resign`](Leadership::resign)).
///
/// # Examples
///
/// ```no_run
/// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
/// use std::time::Duration;
///
/// let mut leadership = redlock
///     .campaign("db-primary", Duration::from_secs(10))
///     .value("10.0.0.5:5432")
///     .lead()
///     .await?;
/// println!("epoch {} for {:?}", leadership.epoch(), leadership.validity());
/// leadership.proclaim("10.0.0.5:6432").await?; // moved to another port
/// leadership.resign().await
/// # }
/// ```
#[must_use = "a dropped Leadership is released at once; keep it while this process leads"]
pub struct Leadership {
    lock: Lock,
    name: Vec<u8>,
    record: Record,
}

impl Leadership {
    /// The leadership of `lock`, whose `record` was proclaimed at quorum:
    /// from now on a repair of the lock restores that record too.
    pub(crate) fn new(lock: Lock, name: Vec<u8>, record: Record) -> Self {
        lock.held.repairs.restore(record.clone());
        Self { lock, name, record }
    }

    /// The leadership's epoch: its fencing token, committed at quorum. No
    /// other leader of this election ever had or will have it, and a
    /// leader elected after this one was gets a larger one (as long as the
    /// nodes keep their counters: `docs/fencing.md`).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(leadership: quorumlock::Leadership) {
    /// // UPDATE config SET primary = $addr, epoch = $epoch WHERE epoch <= $epoch
    /// let epoch = leadership.epoch();
    /// # }
    /// ```
    pub fn epoch(&self) -> u64 {
        self.record.epoch
    }

    /// The value observers read: the campaign's
    /// [`value`](crate::Campaign::value), or the last one
    /// [proclaimed](Leadership::proclaim).
    pub fn value(&self) -> &[u8] {
        &self.record.value
    }

    /// The election's name, as given to [`Redlock::campaign`](crate::Redlock::campaign).
    pub fn name(&self) -> &[u8] {
        &self.name
    }

    /// Replaces the value observers read, in the same epoch: written on
    /// every node where the leadership lock still holds this leader's
    /// token, and returns once a majority has it, inside the validity.
    /// Every [`Redlock::leader`](crate::Redlock::leader) read that begins
    /// after it returned sees the new value (or a later one); observers
    /// see it within a third of the TTL.
    ///
    /// Proclamations of one leader are numbered: one that reaches a node
    /// after a later one (a retry on a new connection) leaves the later
    /// one in place.
    ///
    /// It takes `&mut self` because it changes the leadership: afterwards
    /// [`value`](Leadership::value) returns the new value (by reference,
    /// with no lock to take), and one leadership's proclamations run one at
    /// a time, so that the value it reports is the last one a majority
    /// confirmed, never one overtaken by a proclamation still in flight.
    /// To proclaim from several tasks, keep the leadership in one task and
    /// send it the values (or share an `Arc<tokio::sync::Mutex<Leadership>>`);
    /// the methods that only read it ([`epoch`](Leadership::epoch),
    /// [`validity`](crate::Lock::validity), the lost signal) take `&self`.
    ///
    /// # Errors
    ///
    /// [`Error::Lost`](crate::Error::Lost) when no majority took it in time:
    /// with [`LostReason::Refused`](crate::LostReason::Refused) when so many
    /// nodes no longer hold the leadership that it is certainly gone (the
    /// leadership then counts as lost and its signal fires),
    /// [`Unconfirmed`](crate::LostReason::Unconfirmed) when nodes failed,
    /// [`Expired`](crate::LostReason::Expired) when the validity ran out.
    /// The value kept is then the previous one; some nodes may carry the
    /// new one.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may leave the new value on some nodes and not
    /// others; [`value`](Leadership::value) keeps the previous one, and the
    /// next proclamation overwrites both.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(mut leadership: quorumlock::Leadership) -> Result<(), quorumlock::Error> {
    /// leadership.proclaim("10.0.0.5:6432").await?;
    /// assert_eq!(leadership.value(), b"10.0.0.5:6432");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn proclaim(&mut self, value: impl Into<Vec<u8>>) -> Result<()> {
        let held = &self.lock.held;
        let next = Record {
            seq: self.record.seq.saturating_add(1),
            value: value.into(),
            ..self.record.clone()
        };
        // Numbered before it is sent: a dropped proclamation still used up
        // its number, so a later one is never mistaken for an earlier one.
        self.record.seq = next.seq;
        if let Err(reason) = election::proclaim(held, &next).await {
            if reason.kind() == LossKind::Lost {
                held.lease.fail(reason.clone());
            }
            return Err(held.lost(reason));
        }
        held.repairs.restore(next.clone());
        self.record = next;
        Ok(())
    }

    /// Steps down: releases the leadership (compare-and-delete; the
    /// release is announced, so observers and waiting campaigns learn of it
    /// at once), then deletes the leader's record where it is still this
    /// leader's, in the background. Returns once a majority confirmed the
    /// release, as [`Lock::release`].
    ///
    /// # Errors
    ///
    /// [`Error::Unavailable`](crate::Error::Unavailable) when fewer than a
    /// majority of nodes answered; the leadership then ends with its TTL.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future still delivers the release to every node.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(leadership: quorumlock::Leadership) -> Result<(), quorumlock::Error> {
    /// leadership.resign().await?; // the next campaign in line leads now
    /// # Ok(())
    /// # }
    /// ```
    pub async fn resign(self) -> Result<()> {
        retiring(self.lock.held.clone(), self.lock.release()).await
    }

    /// Runs `work` while this process leads and returns what it returned:
    /// [`Lock::run`] on the leadership (renewed meanwhile, the work dropped
    /// when the leadership is lost, resigned on every way out).
    ///
    /// # Errors
    ///
    /// [`Error::Lost`](crate::Error::Lost) when the leadership was lost
    /// while the work ran; as for [`Lock::run`] otherwise.
    ///
    /// # Panics
    ///
    /// A panic inside `work` is not caught (see [`Lock::run`]).
    ///
    /// # Cancel safety
    ///
    /// Dropping the returned future drops the work and releases the
    /// leadership in the background.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
    /// use std::time::Duration;
    ///
    /// let leadership = redlock.campaign("scheduler", Duration::from_secs(10)).lead().await?;
    /// let epoch = leadership.epoch();
    /// let jobs = leadership
    ///     .run(|signal| async move {
    ///         // hand out jobs, each tagged with `epoch`, until done or lost
    ///         assert!(!signal.is_fired());
    ///         12
    ///     })
    ///     .await?;
    /// # let _ = (epoch, jobs);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn run<F, Fut, T>(self, work: F) -> Result<T>
    where
        F: FnOnce(LostSignal) -> Fut,
        Fut: Future<Output = T>,
    {
        retiring(self.lock.held.clone(), self.lock.run(work)).await
    }
}

/// Waits for `step_down` (the leadership's release, alone or after the
/// work run under it), then deletes this leader's record where it is still
/// this leader's: spawned as background work of the client (see
/// [`Redlock::settle`](crate::Redlock::settle)).
async fn retiring<T>(held: Arc<Held>, step_down: impl Future<Output = T>) -> T {
    let output = step_down.await;
    let engine = held.engine.clone();
    engine.background.spawn(async move {
        election::retire(&held).await;
    });
    output
}

impl Deref for Leadership {
    type Target = Lock;

    fn deref(&self) -> &Lock {
        &self.lock
    }
}

impl fmt::Debug for Leadership {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Leadership")
            .field("name", &self.name.escape_ascii().to_string())
            .field("epoch", &self.record.epoch)
            .field("value", &self.record.value.escape_ascii().to_string())
            .field("validity", &self.validity())
            .finish()
    }
}
