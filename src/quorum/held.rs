//! A held lock ([`Held`]) and the operations on it, each one fan-out: its
//! release (and a failed attempt's), its extension with the repairs behind
//! it, and the remote check.

use std::sync::Arc;
use std::time::Instant;

use tracing::{debug, Instrument};

use crate::error::lost::LostReason;
use crate::error::{Error, Operation};
use crate::keys::Keys;
use crate::lease::state::Lease;
use crate::member::{Extended, Node};
use crate::node::commands::{Announce, Command};
use crate::node::reply::{Kind, Vote};
use crate::quorum::engine::Engine;
use crate::quorum::fanout::{Outcome, Plan};
use crate::quorum::remote_check::{self, Remote};
use crate::quorum::repair::{Gate, Repairs};
use crate::quorum::set_order::SetFuture;
use crate::token::Token;
use crate::validity::{self, Term, Ttl};

/// A lock held on a quorum of nodes, as its attempt granted it: the state
/// a [`Lock`](crate::Lock) shares with whatever extends it.
pub(crate) struct Held {
    pub(crate) engine: Arc<Engine>,
    /// What the lock covers.
    pub(crate) keys: Keys,
    /// The token the keys hold.
    pub(crate) token: Token,
    /// The fencing token, when one was asked for.
    pub(crate) fence: Option<u64>,
    /// The attempt's `SET`s, which a release waits behind.
    pub(crate) sets: Vec<SetFuture>,
    /// Term, whether it ended, and the lost-lock signal.
    pub(crate) lease: Arc<Lease>,
    /// Serialises extensions, so the term recorded is the one of the
    /// extension confirmed last.
    pub(crate) extending: tokio::sync::Mutex<()>,
    /// The repairs of the lock's keys, each ordered before the release on
    /// its node.
    pub(crate) repairs: Arc<Repairs>,
}

impl Engine {
    /// Compare-and-delete on the nodes of `plan`, each queued behind that
    /// node's `SET` of `sets` (one per node of the plan), announced to
    /// waiters as `announce` says; the rest goes on in the background once
    /// the plan is decided. With a held lock's `repairs` (the plan being
    /// on all of the engine's nodes), each node's release also waits for a
    /// repair running there and stops any later one.
    ///
    /// A plan that waits for [`everyone`](Self::everyone) (the cleanup of
    /// a failed attempt) keeps a node that failed fast from ending the wait
    /// before a healthy node's release was even sent — the caller's next
    /// attempt would then reach that node before it.
    pub(crate) async fn release_among(
        &self,
        plan: Plan,
        keys: &Keys,
        token: &Token,
        sets: Vec<SetFuture>,
        repairs: Option<&Arc<Repairs>>,
        announce: Announce,
    ) -> Outcome<bool> {
        let command = Command::release(keys, token, announce);
        let mut sets = sets.into_iter();
        let call = |i, node: Node, command: Arc<Command>, window| {
            let (keys, set, repairs) = (keys.clone(), sets.next(), repairs.cloned());
            async move {
                if let Some(set) = set {
                    set.over().await;
                }
                if let Some(repairs) = repairs {
                    repairs.close(i).await;
                }
                node.release(&keys, &command, window).await
            }
        };
        // Deleted now, or already gone: either way the key no longer
        // carries the token.
        self.ask(plan, command, call, &mut |_, _: &bool| Vote::Yes)
            .await
    }

    /// Releases in the background (a dropped lock, a cancelled attempt),
    /// when a tokio runtime is present, waiting for every node; announced,
    /// since nothing tells whether a waiter needs it. With `on`, only on
    /// the nodes at those indices: the part of a semaphore's grant that it
    /// did not keep, on the nodes that may hold some. Each release is
    /// queued behind that node's `SET` of `sets` (one per node of this
    /// engine).
    pub(crate) fn spawn_release(
        self: &Arc<Self>,
        keys: Keys,
        token: Token,
        mut sets: Vec<SetFuture>,
        repairs: Option<Arc<Repairs>>,
        on: Option<&[usize]>,
    ) {
        let mut plan = self.everyone(self.config.node_timeout);
        if let Some(on) = on {
            plan.nodes = on
                .iter()
                .filter_map(|&i| self.nodes.get(i).cloned())
                .collect();
            sets = on.iter().filter_map(|&i| sets.get(i).cloned()).collect();
        }
        let engine = self.clone();
        self.background.spawn(async move {
            let repairs = repairs.as_ref();
            let release =
                engine.release_among(plan, &keys, &token, sets, repairs, Announce::Waiters);
            release.await;
        });
    }
}

impl Held {
    /// Release: `Ok` once a majority confirmed that the key no longer
    /// carries the token (deleted now, or expired before).
    pub(crate) async fn release(&self) -> Result<(), Error> {
        let (engine, keys, token) = (&self.engine, &self.keys, &self.token);
        let span = tracing::debug_span!("release", resource = %keys, token = %token);
        let (plan, sets) = (engine.majority(), self.sets.clone());
        let repairs = Some(&self.repairs);
        let release = engine.release_among(plan, keys, token, sets, repairs, Announce::Waiters);
        let outcome = release.instrument(span).await;
        if outcome.reached() {
            return Ok(());
        }
        Err(engine.unavailable(Operation::Release, keys.name(), outcome))
    }

    /// One extension — [`Lock::extend`](crate::Lock::extend) and every
    /// renewal — to a checked `ttl`, or to the lease's current TTL for
    /// `None` (read once it is this call's turn). Serialised with every
    /// other extension of the lock.
    ///
    /// Compare-and-pexpire on every node (a key's time left is never
    /// shortened), measured from this call's start. The term moves by
    /// [`Term::extended`] only: nothing changes while the extension is in
    /// flight, nor when it fails or is dropped; once a majority extended
    /// before the current deadline, the deadline is `start + ttl − drift`.
    /// Returns the new deadline, or the reason the lock is lost otherwise
    /// ([`Engine::confirm`]); the caller decides what a failure means (the
    /// lease is left as it is). [`LostReason::AlreadyLost`] when the lock
    /// ended before or during it. Once the new term is known, the nodes
    /// that answered that the key is missing get it back with `SET NX`
    /// until the new deadline ([`crate::quorum::repair`]).
    pub(crate) async fn extend(&self, ttl: Option<Ttl>) -> Result<Instant, LostReason> {
        let _serial = self.extending.lock().await;
        let current = self.lease.term()?;
        let ttl = ttl.unwrap_or(current.ttl);
        let start = Instant::now();
        let (engine, keys, token) = (&self.engine, &self.keys, &self.token);
        let span = tracing::debug_span!("extend", resource = %keys, token = %token);
        let term = async move {
            let command = Command::extend(keys, token, ttl.duration);
            let (gate, pending) = Gate::new(engine, keys, token, &self.repairs);
            let call = |i, node: Node, command: Arc<Command>, window| {
                let pending = pending.clone();
                async move {
                    let extended = node.extend(&command, window).await?;
                    match extended {
                        Extended::Missing => pending.repair(i, node, true),
                        Extended::Yes if pending.repairs.lacks_record(i) => {
                            pending.repair(i, node, false);
                        }
                        _ => {}
                    }
                    Ok(extended)
                }
            };
            let vote = |i: usize, &extended: &Extended| {
                if extended == Extended::Yes {
                    Vote::Yes
                } else {
                    debug!(node = %engine.nodes[i].label(), ?extended, "token gone on node");
                    Vote::No
                }
            };
            engine
                .confirm(current.deadline, command, call, vote)
                .await?;
            let now = Instant::now();
            let term = Term::extended(current.deadline, start, ttl, now)?;
            gate.open(term.deadline);
            let valid = validity::left(term.deadline, now);
            let elapsed = now.saturating_duration_since(start);
            debug!(?elapsed, ?valid, "extended");
            Ok(term)
        }
        .instrument(span)
        .await?;
        self.lease.extended(term)?;
        Ok(term.deadline)
    }

    /// Asks every node whether the lock's keys still carry its token
    /// (read-only), decided as [`remote_check::verdict`] says: `Ok(true)` at
    /// a quorum of yes, `Ok(false)` once so many said no that no quorum
    /// can carry it, an error when the nodes that failed or did not answer
    /// could have tipped it either way.
    pub(crate) async fn holds(&self) -> Result<bool, Error> {
        let engine = &self.engine;
        let call = |_, node: Node, command: Arc<Command>, window| async move {
            node.says(&command, Kind::Holds, window).await
        };
        let vote = |_: usize, &held: &bool| if held { Vote::Yes } else { Vote::No };
        let count = &mut (vote, remote_check::decision);
        let command = Command::holds(&self.keys, &self.token);
        let outcome = engine.ask(engine.majority(), command, call, count).await;
        match remote_check::verdict(&outcome.tally) {
            Some(Remote::Held) => Ok(true),
            Some(Remote::NotHeld) => Ok(false),
            Some(Remote::Unknown) | None => {
                Err(engine.unavailable(Operation::Check, self.keys.name(), outcome))
            }
        }
    }

    /// [`Error::Lost`], for `reason`.
    pub(crate) fn lost(&self, reason: LostReason) -> Error {
        self.keys.lost(reason)
    }
}
