//! The repair on extension (`docs/repair.md`): after an extension that a
//! majority confirmed inside the validity, the lock's key is re-created
//! with `SET NX` on the nodes that answered that it is *missing* there —
//! never where another token holds it — so that a lock that lost a key (a
//! node restarted, a race left it on fewer nodes) regains its full
//! coverage and survives as many node failures as a fresh one.
//!
//! Safe because the extension holds a majority of keys that outlive its
//! validity, so nobody else can be granted the lock meanwhile, and `NX`
//! never displaces a key: the repair only adds keys carrying this lock's
//! token, each set to expire when the validity ends (no later than the
//! majority's keys). The fencing counter is not touched.
//!
//! With the restart quarantine, a node is repaired only once it may vote
//! again: the quarantine keeps a restarted node out of every grant, and the
//! repair keeps to that rule rather than argue an exception.
//!
//! A node's "missing" may arrive after the extension was decided: each such
//! node's repair waits in the background for the decision ([`Gate`]) and
//! is sent only if the extension was confirmed, and only while its
//! validity lasts.
//!
//! Every repair is ordered before the lock's release on its node
//! ([`Repairs`]): the release of a node waits for a repair running there
//! to finish, and no repair starts on a node once its release is on its
//! way — so a release never leaves a repaired key behind it. An
//! election's repair restores the leader's record with the lock's key, so
//! that a leader stays visible to every read while it holds a majority.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::{watch, RwLock};
use tracing::debug;

use crate::keys::Keys;
use crate::member::Node;
use crate::node::commands::Command;
use crate::node::election::Record;
use crate::node::reply::Kind;
use crate::node::Window;
use crate::quorum::engine::Engine;
use crate::token::Token;
use crate::validity;

/// The time a repaired key may live, sent at `now` for an extension
/// confirmed until `deadline`: what is left of that validity, which the
/// confirming majority's keys outlive; `None` once less than a millisecond
/// is left (a `PX` of 0 is an error, and the lock is about over).
pub(crate) fn ttl_left(deadline: Instant, now: Instant) -> Option<Duration> {
    Some(validity::left(deadline, now)).filter(|left| *left >= Duration::from_millis(1))
}

/// One held lock's repairs, per node, and what they restore beside the
/// lock's keys. A repair holds its node's entry (shared) while it runs;
/// the release of that node takes it (exclusive) and closes it, so it
/// waits for a running repair and no repair starts after it.
#[derive(Debug)]
pub(crate) struct Repairs {
    /// Per node (the engine's order): `true` once the release is on its way.
    closed: Box<[RwLock<bool>]>,
    /// An election's leader record, written with the lock's key by a
    /// repair (`None` for every other lock, and before the first
    /// proclamation).
    record: Mutex<Option<Record>>,
    /// Per node: a record of this leader is known to be there (a
    /// proclamation or a repair carried it). Where it is not — the node
    /// missed the proclamation but kept the lock — the next confirmed
    /// renewal writes it.
    recorded: Box<[AtomicBool]>,
}

impl Repairs {
    /// Open repairs for a lock held on `nodes` nodes.
    pub(crate) fn new(nodes: usize) -> Self {
        Self {
            closed: (0..nodes).map(|_| RwLock::new(false)).collect(),
            record: Mutex::new(None),
            recorded: (0..nodes).map(|_| AtomicBool::new(false)).collect(),
        }
    }

    /// Node `i` carries a record of this leader, or (`false`) may not.
    pub(crate) fn recorded(&self, i: usize, carried: bool) {
        if let Some(flag) = self.recorded.get(i) {
            flag.store(carried, Ordering::Release);
        }
    }

    /// Whether node `i`, where the lock holds, needs the leader's record.
    pub(crate) fn lacks_record(&self, i: usize) -> bool {
        self.recorded
            .get(i)
            .is_some_and(|flag| !flag.load(Ordering::Acquire))
            && self.record().is_some()
    }

    /// The record a repair restores from now on: the leader's latest
    /// proclamation (a record never overwrites a later one of the same
    /// leader on a node, so an older one arriving late does no harm).
    pub(crate) fn restore(&self, record: Record) {
        *self.record.lock().unwrap_or_else(PoisonError::into_inner) = Some(record);
    }

    fn record(&self) -> Option<Record> {
        self.record
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Closes node `i` to repairs before its release is sent: waits for a
    /// repair running there (each is bounded by the node timeout).
    pub(crate) async fn close(&self, i: usize) {
        if let Some(closed) = self.closed.get(i) {
            // No repair running there (the common case): closed at once.
            match closed.try_write() {
                Ok(mut closed) => *closed = true,
                Err(_) => *closed.write().await = true,
            }
        }
    }
}

/// The decision an extension's repairs wait for: the validity it
/// confirmed, or nothing (not confirmed: dropped without an opening).
#[derive(Debug)]
pub(crate) struct Gate(watch::Sender<Option<Instant>>);

impl Gate {
    /// A closed gate for one extension of `keys` held with `token`, and
    /// the repairs behind it (one per node that answers "missing"). With
    /// the `engine`'s quarantine, a node is repaired only while it may vote
    /// (a restarted node stays out until its quarantine ends).
    pub(crate) fn new(
        engine: &Arc<Engine>,
        keys: &Keys,
        token: &Token,
        repairs: &Arc<Repairs>,
    ) -> (Self, Arc<Pending>) {
        let (open, wait) = watch::channel(None);
        let pending = Pending {
            engine: engine.clone(),
            keys: keys.clone(),
            token: token.clone(),
            repairs: repairs.clone(),
            wait,
        };
        (Self(open), Arc::new(pending))
    }

    /// The extension was confirmed until `deadline`: the repairs may go.
    pub(crate) fn open(&self, deadline: Instant) {
        self.0.send_replace(Some(deadline));
    }
}

/// What a node's repair needs, shared by the nodes of one extension.
#[derive(Debug)]
pub(crate) struct Pending {
    engine: Arc<Engine>,
    keys: Keys,
    token: Token,
    pub(crate) repairs: Arc<Repairs>,
    wait: watch::Receiver<Option<Instant>>,
}

impl Pending {
    /// `node` (the `i`th) answered "missing" (`lock_missing`), or holds
    /// the lock without a record of its leader: in the background, once
    /// the extension is confirmed (at once if it already is), `SET NX PX`
    /// the keys there for what is left of the validity, then an
    /// election's record; nothing if it is not confirmed, or once the
    /// lock's release is on its way to that node.
    pub(crate) fn repair(self: Arc<Self>, i: usize, node: Node, lock_missing: bool) {
        if lock_missing {
            self.repairs.recorded(i, false);
        }
        let background = self.engine.background.clone();
        background.spawn(async move {
            let mut wait = self.wait.clone();
            // Not confirmed: the gate was dropped closed, and `wait_for` fails.
            let Ok(Some(deadline)) = wait.wait_for(Option::is_some).await.map(|d| *d) else {
                return;
            };
            let Some(closed) = self.repairs.closed.get(i) else {
                return;
            };
            // Held until the repair is done: this node's release waits.
            let closed = closed.read().await;
            if *closed {
                debug!(node = %node.label(), "released: not repaired");
                return;
            }
            let Some(ttl) = ttl_left(deadline, Instant::now()) else {
                return;
            };
            let window = Window::from_now(self.engine.config.node_timeout.min(ttl));
            let admitted = async {
                node.check_standing(window).await?;
                let set = if lock_missing {
                    node.repair(&self.keys, &self.token, ttl, window).await?
                } else {
                    0
                };
                if let Some(record) = self.repairs.record() {
                    let command = Command::proclaim(&self.keys, &record);
                    let carried = node.says(&command, Kind::Proclaim, window).await?;
                    self.repairs.recorded(i, carried);
                }
                Ok(set)
            };
            match node.within(window, admitted).await {
                Ok(set) => debug!(node = %node.label(), set, ?ttl, "repaired"),
                Err(failure) => debug!(%failure, "repair failed"),
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repaired_key_lives_what_is_left_of_the_validity() {
        let now = Instant::now();
        let ms = Duration::from_millis(1);
        assert_eq!(ttl_left(now + 700 * ms, now), Some(700 * ms));
        assert_eq!(ttl_left(now + ms, now), Some(ms));
        assert_eq!(ttl_left(now, now), None, "the validity is over");
        assert_eq!(ttl_left(now, now + ms), None, "past it");
        assert_eq!(ttl_left(now + ms / 2, now), None, "PX 0 is an error");
    }
}
