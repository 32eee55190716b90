//! The operations on a held lock, each one fan-out: its release (and a
//! failed attempt's), its extension with the repairs behind it, and the
//! remote check.

use std::sync::Arc;
use std::time::Instant;

use tracing::{debug, Instrument};

use crate::error::lost::LostReason;
use crate::error::{Error, Operation};
use crate::keys::Keys;
use crate::node::commands::{Announce, Command};
use crate::node::reply::Vote;
use crate::node::{Extended, Node};
use crate::quorum::engine::Engine;
use crate::quorum::fanout::{Outcome, Plan};
use crate::quorum::remote_check::{self, Remote};
use crate::quorum::repair::{Gate, Repairs};
use crate::quorum::set_order::SetFuture;
use crate::token::Token;
use crate::validity::{self, Term, Ttl};

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

    /// Release for a held lock: `Ok` once a majority confirmed that the key
    /// no longer carries the token (deleted now, or expired before).
    pub(crate) async fn release(
        &self,
        keys: &Keys,
        token: &Token,
        sets: Vec<SetFuture>,
        repairs: &Arc<Repairs>,
    ) -> Result<(), Error> {
        let span = tracing::debug_span!("release", resource = %keys, token = %token);
        let plan = self.majority();
        let release = self.release_among(plan, keys, token, sets, Some(repairs), Announce::Waiters);
        let outcome = release.instrument(span).await;
        if outcome.reached() {
            return Ok(());
        }
        Err(self.unavailable(Operation::Release, keys.name(), outcome))
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
            if plan.nodes.is_empty() || plan.nodes.len() != sets.len() {
                return;
            }
        }
        let engine = self.clone();
        self.background.spawn(async move {
            let repairs = repairs.as_ref();
            let release =
                engine.release_among(plan, &keys, &token, sets, repairs, Announce::Waiters);
            release.await;
        });
    }

    /// Compare-and-pexpire on every node (a key's time left is never
    /// shortened), measured from `start` (taken before this is called);
    /// the new term ([`Term::extended`]) when a majority extended before
    /// `deadline` (the lock's, while the extension is in flight), the
    /// reason the lock is lost otherwise ([`Engine::confirm`]). Once the
    /// new term is known, the nodes that answered that the key is missing
    /// get it back with `SET NX` until the new deadline
    /// ([`crate::quorum::repair`]).
    pub(crate) async fn extend(
        self: &Arc<Self>,
        keys: &Keys,
        token: &Token,
        repairs: &Arc<Repairs>,
        ttl: Ttl,
        start: Instant,
        deadline: Instant,
    ) -> Result<Term, LostReason> {
        let span = tracing::debug_span!("extend", resource = %keys, token = %token);
        async move {
            let command = Command::extend(keys, token, ttl.duration);
            let (gate, pending) = Gate::new(self, keys, token, repairs);
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
                    debug!(node = %self.nodes[i].label(), ?extended, "token gone on node");
                    Vote::No
                }
            };
            self.confirm(deadline, command, call, vote).await?;
            let now = Instant::now();
            let term = Term::extended(deadline, start, ttl, now)?;
            gate.open(term.deadline);
            let valid = validity::left(term.deadline, now);
            let elapsed = now.saturating_duration_since(start);
            debug!(?elapsed, ?valid, "extended");
            Ok(term)
        }
        .instrument(span)
        .await
    }

    /// Asks every node whether the lock's keys still carry `token`
    /// (read-only), decided as [`remote_check::verdict`] says: `Ok(true)` at
    /// a quorum of yes, `Ok(false)` once so many said no that no quorum
    /// can carry it, an error when the nodes that failed or did not answer
    /// could have tipped it either way.
    pub(crate) async fn holds(&self, keys: &Keys, token: &Token) -> Result<bool, Error> {
        let call = |_, node: Node, command: Arc<Command>, window| async move {
            node.holds(&command, window).await
        };
        let vote = |_: usize, &held: &bool| if held { Vote::Yes } else { Vote::No };
        let count = &mut (vote, remote_check::decision);
        let outcome = self
            .ask(self.majority(), Command::holds(keys, token), call, count)
            .await;
        match remote_check::verdict(&outcome.tally) {
            Some(Remote::Held) => Ok(true),
            Some(Remote::NotHeld) => Ok(false),
            Some(Remote::Unknown) | None => {
                Err(self.unavailable(Operation::Check, keys.name(), outcome))
            }
        }
    }
}
