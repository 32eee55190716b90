//! Fast hand-off: waiters subscribe to the channel the release script
//! publishes on, and retry as soon as a release is announced instead of
//! sleeping out a random 0–200 ms delay. The random delay stays as the
//! fallback: a missed message costs latency, never correctness.
//!
//! A client listens on `N − quorum + 1` of the `N` nodes (see
//! [`listened`]), not on all of them: every majority includes one of those,
//! so a release that deleted the keys of a granted lock is announced on at
//! least one listened node, and each release wakes each waiting process
//! fewer times (with 64 processes waiting on five nodes, every release was
//! 320 messages to deliver and read, where 192 now do).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};
use redis::aio::PubSubSink;
use tokio::sync::{watch, Notify};
use tokio_util::sync::CancellationToken;
use tracing::debug;

use crate::keys::{Keys, NEXT_CHANNEL_PREFIX, RELEASE_CHANNEL_PREFIX, RWLOCK_KEY_PREFIX};
use crate::member::link::Target;
use crate::member::Node;
use crate::token::Token;

/// Subscriptions shared by every waiter of one [`Redlock`](crate::Redlock)
/// (and one set of them per election observer, whose wake-ups must not be
/// taken from a waiter's: `election/observe.rs`).
pub(crate) struct Handoff {
    clients: Vec<(String, Target)>,
    connect_timeout: Duration,
    state: Mutex<State>,
    stop: CancellationToken,
    /// How many nodes' subscribers are connected and subscribed to every
    /// channel watched when they connected (see [`Handoff::subscribed`]).
    ready: watch::Sender<usize>,
}

#[derive(Default)]
struct State {
    channels: HashMap<Vec<u8>, Channel>,
    /// Each connected subscriber's sink, by its index in `clients`.
    sinks: HashMap<usize, PubSubSink>,
    started: bool,
}

#[derive(Default)]
struct Channel {
    notify: Arc<Notify>,
    watchers: usize,
    /// The last release announced (its token): every node announces each
    /// release, and a waiter is woken once per release, not once per node.
    last: Vec<u8>,
}

impl std::fmt::Debug for Handoff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handoff")
            .field("nodes", &self.clients.len())
            .finish()
    }
}

impl Drop for Handoff {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// The nodes a client listens on for release announcements: `nodes −
/// quorum + 1` consecutive ones (wrapping around) from `seed % nodes`. The
/// others, `quorum − 1` of them, cannot hold a lock on their own: every
/// granted lock has a key on a listened node, and its release is announced
/// there. Clients start at different nodes, which spreads the
/// subscriptions over the cluster.
pub(crate) fn listened(nodes: usize, seed: usize) -> impl Iterator<Item = usize> {
    let count = nodes.saturating_sub(crate::quorum::rule::majority(nodes)) + 1;
    let first = seed.checked_rem(nodes).unwrap_or(0);
    (0..count.min(nodes)).map(move |k| (first + k) % nodes)
}

/// The channel the release script publishes on for `resource`.
pub(crate) fn channel(resource: &[u8]) -> Vec<u8> {
    [RELEASE_CHANNEL_PREFIX, resource].concat()
}

/// The channel of the queued waiter `id`, on which a leaving head names it
/// the next (`queue_leave.lua`): only its own client hears it, not every
/// waiting process.
pub(crate) fn next_channel(id: &Token) -> Vec<u8> {
    [NEXT_CHANNEL_PREFIX, id.as_str().as_bytes()].concat()
}

impl Handoff {
    /// Subscriptions on the [`listened`] nodes of `nodes`, from a node
    /// picked at random; nothing is connected before the first watch.
    pub(crate) fn listening(nodes: &[Node], connect_timeout: Duration) -> Self {
        let clients: Vec<_> = listened(nodes.len(), crate::random::below(nodes.len()))
            .map(|i| (nodes[i].label().to_owned(), nodes[i].target()))
            .collect();
        Self {
            clients,
            connect_timeout,
            state: Mutex::default(),
            stop: CancellationToken::new(),
            ready: watch::Sender::new(0),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers interest in the release of `keys` and subscribes on the
    /// nodes already connected (waiting at most `timeout` for them).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the registration is undone (and the channels
    /// unsubscribed when no other waiter needs them) wherever this future is
    /// dropped, including while its `SUBSCRIBE`s are in flight.
    pub(crate) async fn watch(self: &Arc<Self>, keys: &Keys, timeout: Duration) -> Watch {
        let names = keys.channels().into_iter().map(channel).collect();
        self.listen(names, timeout).await
    }

    /// Registers interest in the queued waiter `id` being named the head,
    /// on its own channel ([`next_channel`]), as [`watch`](Self::watch)
    /// does for releases.
    ///
    /// # Cancel safety
    ///
    /// As for [`watch`](Self::watch).
    pub(crate) async fn named(self: &Arc<Self>, id: &Token, timeout: Duration) -> Watch {
        self.listen(vec![next_channel(id)], timeout).await
    }

    /// Registers interest in the channels `names` (full names) and
    /// subscribes to those new to this client on the connected nodes.
    async fn listen(self: &Arc<Self>, names: Vec<Vec<u8>>, timeout: Duration) -> Watch {
        let mut fresh = Vec::new();
        // The guard exists before anything awaits: dropping this future at
        // any point lowers the watcher counts it raised.
        let mut watch = Watch {
            handoff: self.clone(),
            channels: Vec::new(),
        };
        let sinks = {
            let mut state = self.state();
            if !state.started {
                state.started = true;
                for i in 0..self.clients.len() {
                    tokio::spawn(run_node(Arc::downgrade(self), i, self.stop.clone()));
                }
            }
            for name in names {
                let entry = state.channels.entry(name.clone()).or_insert_with(|| {
                    fresh.push(name.clone());
                    Channel::default()
                });
                entry.watchers += 1;
                watch.channels.push((name, entry.notify.clone()));
            }
            state.sinks.values().cloned().collect::<Vec<_>>()
        };
        if !fresh.is_empty() {
            let subscribing = sinks.into_iter().map(|mut sink| {
                let fresh = fresh.clone();
                async move {
                    let _ = tokio::time::timeout(timeout, sink.subscribe(fresh)).await;
                }
            });
            futures::future::join_all(subscribing).await;
        }
        watch
    }

    /// Waits, at most `limit`, until the subscriber of every listened node
    /// is connected and subscribed to the channels watched so far; true
    /// when they all are in time. After the first [`watch`](Self::watch),
    /// whose channels each subscriber subscribes to as it connects.
    pub(crate) async fn subscribed(&self, limit: Duration) -> bool {
        let all = self.clients.len();
        let mut ready = self.ready.subscribe();
        tokio::time::timeout(limit, ready.wait_for(|&n| n >= all))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// How many listened nodes' subscribers stand, watched: it changes
    /// when one connects and subscribes (or reconnects) and when one is
    /// lost. A release announced while a subscriber was not up is not
    /// heard, so a follower reads again when this changes.
    pub(crate) fn readiness(&self) -> watch::Receiver<usize> {
        self.ready.subscribe()
    }

    fn announce(&self, channel: &[u8], release: &[u8]) {
        if let Some(entry) = self.state().channels.get_mut(channel) {
            if entry.last == release {
                return; // the same release, announced by another node
            }
            entry.last.clear();
            entry.last.extend_from_slice(release);
            // One waiter per announcement: the others keep waiting for the
            // next release instead of stampeding at once. A read–write
            // lock's readers all wake: they may all enter together.
            match channel.starts_with(RWLOCK_KEY_PREFIX) {
                true => entry.notify.notify_waiters(),
                false => entry.notify.notify_one(),
            }
        }
    }
}

/// A waiter's registration; dropping it ends the subscription when no
/// other waiter of this client needs it.
#[derive(Debug)]
pub(crate) struct Watch {
    handoff: Arc<Handoff>,
    channels: Vec<(Vec<u8>, Arc<Notify>)>,
}

impl Watch {
    /// Resolves when a release of one of the watched resources is
    /// announced (or, for a queued waiter's own channel, when it is named
    /// the head).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a dropped wait does not consume an announcement.
    pub(crate) async fn released(&self) {
        let mut waits: FuturesUnordered<_> =
            self.channels.iter().map(|(_, n)| n.notified()).collect();
        let _ = waits.next().await;
    }
}

/// Ends the subscription to each channel no other waiter watches.
impl Drop for Watch {
    fn drop(&mut self) {
        let mut gone = Vec::new();
        let sinks = {
            let mut state = self.handoff.state();
            for (name, _) in &self.channels {
                if let Some(entry) = state.channels.get_mut(name) {
                    entry.watchers = entry.watchers.saturating_sub(1);
                    if entry.watchers == 0 {
                        state.channels.remove(name);
                        gone.push(name.clone());
                    }
                }
            }
            state.sinks.values().cloned().collect::<Vec<_>>()
        };
        if gone.is_empty() {
            return;
        }
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            let timeout = self.handoff.connect_timeout;
            for mut sink in sinks {
                let gone = gone.clone();
                handle.spawn(async move {
                    let _ = tokio::time::timeout(timeout, sink.unsubscribe(gone)).await;
                });
            }
        }
    }
}

/// Keeps one node's subscriber connection up until `stop`: connects,
/// subscribes to every channel in use, forwards announcements, reconnects
/// after errors.
async fn run_node(handoff: Weak<Handoff>, i: usize, stop: CancellationToken) {
    let Some(((label, target), connect_timeout)) = handoff
        .upgrade()
        .map(|h| (h.clients[i].clone(), h.connect_timeout))
    else {
        return;
    };
    let mut backoff = Duration::from_millis(50);
    let subscriber = async move {
        loop {
            // A Sentinel group's master as its sentinels name it now.
            let connect = async { target.client().await?.get_async_pubsub().await };
            let connected = tokio::time::timeout(connect_timeout, connect).await;
            let connected = connected.map_err(|_| "timed out".to_owned());
            let (mut sink, mut stream) = match connected.and_then(|r| r.map_err(|e| e.to_string()))
            {
                Ok(pubsub) => pubsub.split(),
                Err(error) => {
                    debug!(node = %label, %error, "hand-off subscriber cannot connect");
                    pause(&mut backoff).await;
                    continue;
                }
            };
            let mut subscribed = true;
            let current: Vec<Vec<u8>> = {
                let Some(h) = handoff.upgrade() else { return };
                let mut state = h.state();
                state.sinks.insert(i, sink.clone());
                state.channels.keys().cloned().collect()
            };
            if !current.is_empty() {
                let done =
                    tokio::time::timeout(connect_timeout, sink.subscribe(current.clone())).await;
                subscribed = matches!(done, Ok(Ok(())));
                // A waiter that left while this SUBSCRIBE was in flight may
                // have sent its UNSUBSCRIBE first: drop what nobody watches
                // any more.
                let stale: Vec<Vec<u8>> = {
                    let Some(h) = handoff.upgrade() else { return };
                    let state = h.state();
                    current
                        .into_iter()
                        .filter(|c| !state.channels.contains_key(c))
                        .collect()
                };
                if !stale.is_empty() {
                    let _ = tokio::time::timeout(connect_timeout, sink.unsubscribe(stale)).await;
                }
            }
            backoff = Duration::from_millis(50);
            if let (true, Some(h)) = (subscribed, handoff.upgrade()) {
                h.ready.send_modify(|n| *n += 1);
            }
            while let Some(msg) = stream.next().await {
                let Some(h) = handoff.upgrade() else { return };
                if let Ok(name) = msg.get_channel::<Vec<u8>>() {
                    h.announce(&name, msg.get_payload_bytes());
                }
            }
            if let Some(h) = handoff.upgrade() {
                h.state().sinks.remove(&i);
                if subscribed {
                    h.ready.send_modify(|n| *n = n.saturating_sub(1));
                }
            }
            debug!(node = %label, "hand-off subscriber disconnected");
            pause(&mut backoff).await;
        }
    };
    tokio::select! {
        () = stop.cancelled() => {}
        () = subscriber => {}
    }
}

/// Sleeps out `backoff`, then doubles it (up to two seconds).
async fn pause(backoff: &mut Duration) {
    tokio::time::sleep(*backoff).await;
    *backoff = (*backoff * 2).min(Duration::from_secs(2));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_majority_includes_a_listened_node() {
        for nodes in 1..=9 {
            let majority = crate::quorum::rule::majority(nodes);
            for seed in 0..2 * nodes {
                let listened: Vec<usize> = listened(nodes, seed).collect();
                assert_eq!(listened.len(), nodes - majority + 1, "n={nodes}");
                let mut unique = listened.clone();
                unique.sort_unstable();
                unique.dedup();
                assert_eq!(unique, {
                    let mut l = listened.clone();
                    l.sort_unstable();
                    l
                });
                // Every set of `majority` nodes meets the listened ones.
                for set in 0u32..(1 << nodes) {
                    if set.count_ones() as usize == majority {
                        assert!(
                            listened.iter().any(|&i| set & (1 << i) != 0),
                            "n={nodes} seed={seed} majority {set:b} missed by {listened:?}"
                        );
                    }
                }
            }
        }
        assert_eq!(listened(5, 3).collect::<Vec<_>>(), vec![3, 4, 0]);
        assert_eq!(listened(0, 7).count(), 0);
    }

    #[test]
    fn channels_are_prefixed_resource_bytes() {
        assert_eq!(channel(b"job\x00"), b"quorumlock:released:job\x00".to_vec());
    }
}
