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

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tracing::debug;

use crate::keys::Keys;
use crate::node::{Node, Window};
use crate::quorum::background::Background;
use crate::token::Token;
use crate::validity;

/// The time a repaired key may live, sent at `now` for an extension
/// confirmed until `deadline`: what is left of that validity, which the
/// confirming majority's keys outlive; `None` once less than a millisecond
/// is left (a `PX` of 0 is an error, and the lock is about over).
pub(crate) fn ttl_left(deadline: Instant, now: Instant) -> Option<Duration> {
    Some(validity::left(deadline, now)).filter(|left| *left >= Duration::from_millis(1))
}

/// The decision an extension's repairs wait for: the validity it
/// confirmed, or nothing (not confirmed: dropped without an opening).
#[derive(Debug)]
pub(crate) struct Gate(watch::Sender<Option<Instant>>);

impl Gate {
    /// A closed gate for one extension of `keys` held with `token`, and
    /// the repairs behind it (one per node that answers "missing").
    /// With `quarantine`, a node is repaired only while it may vote (a
    /// restarted node stays out until its quarantine ends).
    pub(crate) fn new(
        keys: &Keys,
        token: &Token,
        background: &Background,
        node_timeout: Duration,
        quarantine: Option<Duration>,
    ) -> (Self, Arc<Pending>) {
        let (open, wait) = watch::channel(None);
        let pending = Pending {
            keys: keys.clone(),
            token: token.clone(),
            background: background.clone(),
            node_timeout,
            quarantine,
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
    keys: Keys,
    token: Token,
    background: Background,
    node_timeout: Duration,
    quarantine: Option<Duration>,
    wait: watch::Receiver<Option<Instant>>,
}

impl Pending {
    /// `node` answered "missing": in the background, once the extension is
    /// confirmed (at once if it already is), `SET NX PX` the keys there
    /// for what is left of the validity; nothing if it is not confirmed.
    pub(crate) fn repair(self: Arc<Self>, node: Node) {
        let background = self.background.clone();
        background.spawn(async move {
            let mut wait = self.wait.clone();
            // Not confirmed: the gate was dropped closed, and `wait_for` fails.
            let Ok(opened) = wait.wait_for(Option::is_some).await.map(|d| *d) else {
                return;
            };
            let Some(ttl) = opened.and_then(|deadline| ttl_left(deadline, Instant::now())) else {
                return;
            };
            let window = Window::from_now(self.node_timeout.min(ttl));
            let admitted = async {
                if let Some(required) = self.quarantine {
                    node.check_standing(required, window).await?;
                }
                node.repair(&self.keys, &self.token, ttl, window).await
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
