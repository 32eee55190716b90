//! [`Observer`]: who leads an election, followed — a read at quorum every
//! third of the leader's TTL, and at once when the leadership's release is
//! announced.

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::stream::{BoxStream, Stream, StreamExt};
use tokio::sync::watch;
use tracing::debug;

use crate::keys::Keys;
use crate::quorum::election;
use crate::quorum::engine::Engine;
use crate::quorum::handoff::{Handoff, Watch};

use super::Leader;

/// How often an observer reads while it knows of no record to take the
/// TTL from (an election nobody ran yet).
const PACE_UNKNOWN: Duration = Duration::from_secs(1);

/// The shortest pace, whatever the TTL.
const PACE_MIN: Duration = Duration::from_millis(10);

/// Reads after an announcement that found nothing changed yet (the
/// release may still be on its way to a majority), the first after
/// [`FOLLOW_UP`], each after twice the wait of the one before.
const FOLLOW_UPS: u32 = 5;

/// The wait before the first follow-up read.
const FOLLOW_UP: Duration = Duration::from_millis(5);

/// The leadership of an election, followed: a stream that yields who leads
/// ([`Observed::Leader`]), that nobody does ([`Observed::NoLeader`]) or that
/// it cannot be known now ([`Observed::Unknown`]) — first the current
/// state, then each change; from [`Redlock::observe`](crate::Redlock::observe).
///
/// Each item comes from a read at quorum ([`Redlock::leader`](crate::Redlock::leader)):
/// a leader is reported once a majority of nodes carry its record *and*
/// still hold its leadership lock, never from a record its lock no longer
/// backs. The observer reads every third of the leader's TTL (every second
/// while it has seen no record at all), so it reports a change within a
/// third of the TTL after the nodes show it — a new leader, a new value, or
/// a leader gone, which the nodes show at once on a resignation and when
/// the lock expires after a crash: within one TTL after the last renewal.
/// With fast hand-off on ([`Builder::fast_handoff`](crate::Builder::fast_handoff),
/// the default) the observer also subscribes to the leadership's release
/// announcements and reads at once on each: a resignation is seen in a
/// round trip or two. Its first item comes once those subscriptions stand
/// on every node it listens on, so a resignation right after that item is
/// seen at once too; the first item waits for them at most the
/// [connect timeout](crate::Builder::connect_timeout) plus the
/// [node timeout](crate::Builder::node_timeout) (550 ms by default), and a
/// node whose subscription is not up by then is followed by the reads
/// alone until it is, and read at once when it comes up (or back), since
/// what was announced before it stood was not heard. A read that fails (too few nodes answer) yields
/// [`Observed::Unknown`], once: the leader reported before may have lost
/// its leadership since, or another may lead. The reads go on at their
/// pace, and the first that succeeds yields the state again, whether it
/// changed or not.
///
/// Reads happen only while the stream is polled. It never ends (but at
/// once for an empty name, which names no election). Dropping it ends
/// everything it started: its subscriptions close with it, and no task is
/// left behind.
///
/// # Examples
///
/// ```no_run
/// # async fn demo(redlock: quorumlock::Redlock) {
/// use futures::StreamExt;
///
/// use quorumlock::Observed;
///
/// let mut leaders = redlock.observe("db-primary");
/// while let Some(observed) = leaders.next().await {
///     match observed {
///         Observed::Leader(l) => println!("epoch {}: {}", l.epoch, String::from_utf8_lossy(&l.value)),
///         Observed::NoLeader => println!("no leader"),
///         Observed::Unknown { since } => println!("no quorum answers since {since:?}"),
///         _ => {}
///     }
/// }
/// # }
/// ```
#[must_use = "an observer reads nothing until it is polled"]
pub struct Observer {
    stream: BoxStream<'static, Observed>,
}

/// What an [`Observer`] reports of an election's leadership.
///
/// # Examples
///
/// ```
/// use quorumlock::{Leader, Observed};
///
/// let seen = Observed::Leader(Leader { epoch: 7, value: b"10.0.0.5".to_vec() });
/// assert_eq!(seen.leader().map(|l| l.epoch), Some(7));
/// assert_eq!(Observed::NoLeader.leader(), None);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Observed {
    /// This leader leads: a majority of the nodes carry its record and
    /// hold its leadership lock.
    Leader(Leader),
    /// Nobody leads: no leader can have a majority.
    NoLeader,
    /// Who leads is unknown: the reads since `since` (when the first of
    /// them began) reached no quorum — too few nodes answered. Whatever
    /// was reported before may no longer hold.
    Unknown {
        /// When the first read that reached no quorum began.
        since: Instant,
    },
}

impl Observed {
    /// The leader, when one is known to lead.
    pub fn leader(&self) -> Option<&Leader> {
        match self {
            Observed::Leader(leader) => Some(leader),
            _ => None,
        }
    }

    /// Whether `self` and `other` say the same: the same leader, both no
    /// leader, or both unknown (since whenever).
    fn same(&self, other: &Observed) -> bool {
        match (self, other) {
            (Observed::Unknown { .. }, Observed::Unknown { .. }) => true,
            _ => self == other,
        }
    }
}

impl Observer {
    pub(crate) fn new(engine: Arc<Engine>, name: &[u8]) -> Self {
        let stream = match Keys::election(name) {
            Ok(keys) => futures::stream::unfold(Follow::new(engine, keys), Follow::next).boxed(),
            Err(_) => futures::stream::empty().boxed(),
        };
        Self { stream }
    }
}

impl Stream for Observer {
    type Item = Observed;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.stream.as_mut().poll_next(cx)
    }
}

impl fmt::Debug for Observer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Observer").finish_non_exhaustive()
    }
}

/// An observer's state between items.
struct Follow {
    engine: Arc<Engine>,
    keys: Keys,
    /// The last item yielded; `None` before the first.
    last: Option<Observed>,
    /// The subscription to the leadership's release announcements (its own
    /// connections: a release wakes one waiter per subscription, and an
    /// observer must not take that wake-up from a waiting campaign).
    watch: Option<Watch>,
    /// The number of its subscribers that stand, seen as of the last read:
    /// a subscriber that comes up (late, or again) after a read may have
    /// missed an announcement, so its coming up is a reason to read.
    subscribers: Option<watch::Receiver<usize>>,
    /// The wait between reads: a third of the TTL of the last leadership
    /// read, [`PACE_UNKNOWN`] before any.
    pace: Duration,
    /// Follow-up reads left after an announcement.
    follow_ups: u32,
}

impl Follow {
    fn new(engine: Arc<Engine>, keys: Keys) -> Self {
        Self {
            engine,
            keys,
            last: None,
            watch: None,
            subscribers: None,
            pace: PACE_UNKNOWN,
            follow_ups: 0,
        }
    }

    /// Reads until the state differs from the last item, and yields it.
    async fn next(mut self) -> Option<(Observed, Self)> {
        loop {
            // Before the first item, the first read: it always yields.
            if self.last.is_some() {
                self.wait().await;
            } else {
                self.subscribe().await;
            }
            if let Some(subscribers) = &mut self.subscribers {
                subscribers.borrow_and_update();
            }
            let since = Instant::now();
            let observed = match election::read(&self.engine, &self.keys).await {
                Ok(found) => {
                    // With no record read (nobody leads), the pace of the
                    // last leadership seen stays.
                    if found.hint.is_some() {
                        self.pace = pace(found.hint);
                    }
                    found
                        .leader
                        .map_or(Observed::NoLeader, |r| Observed::Leader(r.into()))
                }
                Err(error) => {
                    debug!(%error, "observer: who leads is unknown");
                    Observed::Unknown { since }
                }
            };
            if !self.last.as_ref().is_some_and(|last| last.same(&observed)) {
                self.follow_ups = 0;
                self.last = Some(observed.clone());
                return Some((observed, self));
            }
        }
    }

    /// Subscribes to the leadership's release announcements, when fast
    /// hand-off is on, and waits for the subscriptions to stand, so that a
    /// change right after the first item is announced to this observer:
    /// at most the time to open a connection (the connect timeout) and
    /// have one command answered (the node timeout); a subscriber that
    /// cannot connect and subscribe in that time leaves the observer to its
    /// reads until it can.
    async fn subscribe(&mut self) {
        if self.engine.handoff.is_none() {
            return;
        }
        let cfg = &self.engine.config;
        let handoff = Arc::new(Handoff::listening(&self.engine.nodes, cfg.connect_timeout));
        self.watch = Some(handoff.watch(&self.keys, cfg.node_timeout).await);
        self.subscribers = Some(handoff.readiness());
        let bound = cfg.connect_timeout.saturating_add(cfg.node_timeout);
        if !handoff.subscribed(bound).await {
            debug!(
                ?bound,
                "observer not subscribed on every node in time: reading at its pace"
            );
        }
    }

    /// Until the next read: a follow-up after an announcement, or the pace,
    /// cut short by an announcement or by a subscriber coming up or going
    /// since the last read (what was announced before it stood was not
    /// heard).
    async fn wait(&mut self) {
        if self.follow_ups > 0 {
            let done = FOLLOW_UPS - self.follow_ups;
            self.follow_ups -= 1;
            tokio::time::sleep(FOLLOW_UP.saturating_mul(1 << done)).await;
            return;
        }
        let sleep = tokio::time::sleep(self.pace);
        let (Some(watch), Some(subscribers)) = (&self.watch, &mut self.subscribers) else {
            return sleep.await;
        };
        tokio::select! {
            () = sleep => {}
            () = watch.released() => self.follow_ups = FOLLOW_UPS,
            // Ends in an error only once every subscriber is gone: then
            // this branch is off.
            Ok(()) = subscribers.changed() => {}
        }
    }
}

/// The wait between reads for a leadership of TTL `hint`: a third of it.
fn pace(hint: Option<Duration>) -> Duration {
    hint.map_or(PACE_UNKNOWN, |ttl| (ttl / 3).max(PACE_MIN))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pace_is_a_third_of_the_ttl() {
        assert_eq!(pace(Some(Duration::from_secs(9))), Duration::from_secs(3));
        assert_eq!(pace(Some(Duration::from_millis(6))), PACE_MIN);
        assert_eq!(pace(None), PACE_UNKNOWN);
        // The follow-ups after an announcement stay well inside a second.
        let total: Duration = (0..FOLLOW_UPS).map(|k| FOLLOW_UP * (1 << k)).sum();
        assert!(total < Duration::from_millis(200), "{total:?}");
    }
}
