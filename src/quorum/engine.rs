//! The engine behind a [`Redlock`](crate::Redlock): the nodes, the tuning,
//! and the operations on a held lock — release, extend, the remote check —
//! plus the one read-only look at a key on the nodes (a waiter's, and
//! [`Redlock::status`](crate::Redlock::status)), each one use of
//! [`fanout::ask`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::debug;

use crate::quorum::traced::in_span;

use crate::config::Config;
use crate::error::lost::LostReason;
use crate::error::{Error, NodeFailureKind, Operation, ResourceName};
use crate::keys::Keys;
use crate::node::commands::{Announce, Command};
use crate::node::reply::Vote;
use crate::node::{Extended, Node};
use crate::quorum::background::Background;
use crate::quorum::fanout::{self, Outcome, Plan};
use crate::quorum::handoff::Handoff;
use crate::quorum::remote_check::{self, Remote};
use crate::quorum::repair::{Gate, Repairs};
use crate::quorum::rule::{self};
use crate::quorum::set_order::SetFuture;
use crate::random;
use crate::stats::counters::LeaseCounters;
use crate::stats::locks::Primitive;
use crate::stats::Stats;
use crate::status::{NodeView, Status};
use crate::token::Token;
use crate::validity::{self, Late, Term, Ttl};

/// The nodes, the tuning, and the operations that go to all of them.
#[derive(Debug)]
pub(crate) struct Engine {
    pub(crate) nodes: Arc<[Node]>,
    pub(crate) config: Config,
    /// Release announcements for waiters, when fast hand-off is on.
    pub(crate) handoff: Option<Arc<Handoff>>,
    /// Renewal and lost-signal counters of every lock taken through this engine.
    pub(crate) leases: Arc<LeaseCounters>,
    /// Work left running after a call returned, for [`Engine::settle`].
    pub(crate) background: Background,
}

impl Engine {
    /// Votes a lock needs: a majority of the nodes.
    pub(crate) fn needed(&self) -> usize {
        rule::majority(self.nodes.len())
    }

    /// A majority within the node timeout, undecided at `until`.
    pub(crate) fn majority(&self, until: Option<Instant>) -> Plan {
        Plan {
            needed: self.needed(),
            timeout: self.config.node_timeout,
            until,
        }
    }

    /// Every node's answer (a failure counts as an answer) within `timeout`.
    fn everyone(&self, timeout: Duration) -> Plan {
        Plan {
            needed: self.nodes.len(),
            timeout,
            until: None,
        }
    }

    /// Opens every connection, waiting at most the connect timeout; a node
    /// that does not answer is not an error here (it may come up later).
    pub(crate) async fn connect_all(&self) {
        let quarantine = self.config.restart_quarantine;
        let outcome = fanout::ask(
            &self.nodes,
            &self.background,
            self.everyone(self.config.connect_timeout),
            |_, node, window| {
                let node = node.clone();
                async move {
                    let mut result = node.ping(window).await;
                    if result.is_ok() {
                        result = node.load_scripts(window).await;
                    }
                    if let (Ok(()), Some(required)) = (&result, quarantine) {
                        // Reads the uptime now, so a fresh node is known
                        // before the first acquire.
                        result = node.check_standing(required, window).await;
                    }
                    Ok(result)
                }
            },
            |_, _| Vote::Yes,
        )
        .await;
        for (i, result) in outcome.replies {
            if let Err(failure) = result {
                debug!(node = %self.nodes[i].label(), %failure, "node not reachable yet");
            }
        }
    }

    /// Compare-and-delete on every node, each queued behind that node's
    /// `SET` when `sets` is given, announced to waiters as `announce` says;
    /// decided once `needed` nodes confirmed (or that became impossible),
    /// the rest goes on in the background.
    ///
    /// With `needed` = every node (the cleanup of a failed attempt), a
    /// failure is an answer too: this waits for every node's answer (within
    /// the node timeout), so that a node that failed fast does not end the
    /// wait before a healthy node's release was even sent — the caller's
    /// next attempt would then reach that node before it.
    pub(crate) async fn release_after(
        &self,
        keys: &Keys,
        token: &Token,
        sets: Vec<SetFuture>,
        needed: usize,
        announce: Announce,
    ) -> Outcome<bool> {
        self.release_among(&self.nodes, keys, token, sets, None, needed, announce)
            .await
    }

    /// [`release_after`](Self::release_after) on `nodes`, some of this
    /// engine's, with one of `sets` per node of `nodes`; with a held lock's
    /// `repairs` (`nodes` being all of the engine's), each node's release
    /// also waits for a repair running there and stops any later one.
    #[allow(clippy::too_many_arguments)]
    async fn release_among(
        &self,
        nodes: &Arc<[Node]>,
        keys: &Keys,
        token: &Token,
        sets: Vec<SetFuture>,
        repairs: Option<&Arc<Repairs>>,
        needed: usize,
        announce: Announce,
    ) -> Outcome<bool> {
        let command = Command::release(keys, token, announce);
        let mut sets = sets.into_iter();
        let plan = Plan {
            needed,
            timeout: self.config.node_timeout,
            until: None,
        };
        let everyone = needed >= nodes.len();
        fanout::ask(
            nodes,
            &self.background,
            plan,
            |i, node, window| {
                let (node, command, keys) = (node.clone(), command.clone(), keys.clone());
                let set = sets.next();
                let repairs = repairs.cloned();
                async move {
                    if let Some(set) = set {
                        set.over().await;
                    }
                    if let Some(repairs) = repairs {
                        repairs.close(i).await;
                    }
                    match node.release(&keys, &command, window).await {
                        Err(failure) if everyone && !failure.kind.is_timeout() => Ok(false),
                        result => result,
                    }
                }
            },
            // Deleted now, or already gone: either way the key no longer
            // carries the token.
            |_, _| Vote::Yes,
        )
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
        in_span(span, async move {
            let outcome = self
                .release_among(
                    &self.nodes,
                    keys,
                    token,
                    sets,
                    Some(repairs),
                    self.needed(),
                    Announce::Waiters,
                )
                .await;
            if outcome.reached() {
                return Ok(());
            }
            Err(self.unavailable(Operation::Release, keys.name(), outcome))
        })
        .await
    }

    /// Releases in the background (a dropped lock, a cancelled attempt),
    /// when a tokio runtime is present; announced, since nothing tells
    /// whether a waiter needs it.
    pub(crate) fn spawn_release(
        self: &Arc<Self>,
        keys: Keys,
        token: Token,
        sets: Vec<SetFuture>,
        repairs: Option<Arc<Repairs>>,
    ) {
        let engine = self.clone();
        self.background.spawn(async move {
            let all = engine.nodes.len();
            engine
                .release_among(
                    &engine.nodes,
                    &keys,
                    &token,
                    sets,
                    repairs.as_ref(),
                    all,
                    Announce::Waiters,
                )
                .await;
        });
    }

    /// Releases `keys` in the background on the nodes at the indices `on`
    /// only, each queued behind its `SET` of `sets` (one per node of this
    /// engine), announced: the part of a semaphore's grant that it did not
    /// keep, on the nodes that may hold some.
    pub(crate) fn spawn_release_on(
        self: &Arc<Self>,
        keys: Keys,
        token: Token,
        sets: &[SetFuture],
        on: &[usize],
    ) {
        let nodes: Arc<[Node]> = on
            .iter()
            .filter_map(|&i| self.nodes.get(i).cloned())
            .collect();
        let sets: Vec<SetFuture> = on.iter().filter_map(|&i| sets.get(i).cloned()).collect();
        if nodes.is_empty() || nodes.len() != sets.len() {
            return;
        }
        let engine = self.clone();
        self.background.spawn(async move {
            let all = nodes.len();
            engine
                .release_among(&nodes, &keys, &token, sets, None, all, Announce::Waiters)
                .await;
        });
    }

    /// Compare-and-pexpire on every node (a key's time left is never
    /// shortened), measured from `start` (taken before this is called);
    /// the new term ([`Term::extended`]) when a majority extended before
    /// `deadline` (the lock's, while the extension is in flight), the
    /// reason the lock is lost otherwise. Once the new term is known, the
    /// nodes that answered that the key is missing get it back with `SET
    /// NX` until the new deadline ([`crate::quorum::repair`]).
    pub(crate) async fn extend(
        &self,
        keys: &Keys,
        token: &Token,
        repairs: &Arc<Repairs>,
        ttl: Ttl,
        start: Instant,
        deadline: Instant,
    ) -> Result<Term, LostReason> {
        let span = tracing::debug_span!("extend", resource = %keys, token = %token);
        in_span(span, async move {
            let remaining = validity::left(deadline, start);
            if remaining.is_zero() {
                return Err(LostReason::Expired);
            }
            let command = Command::extend(keys, token, ttl.duration);
            let (gate, pending) = Gate::new(
                keys,
                token,
                repairs,
                &self.background,
                self.config.node_timeout,
                self.config.restart_quarantine,
            );
            let plan = Plan {
                timeout: self.config.node_timeout.min(remaining),
                ..self.majority(Some(deadline))
            };
            let outcome = fanout::ask(
                &self.nodes,
                &self.background,
                plan,
                |i, node, window| {
                    let (node, command) = (node.clone(), command.clone());
                    let pending = pending.clone();
                    async move {
                        let extended = node.extend(&command, window).await?;
                        match extended {
                            Extended::Missing => pending.repair(i, node, true),
                            Extended::Yes if pending.lacks_record(i) => {
                                pending.repair(i, node, false);
                            }
                            _ => {}
                        }
                        Ok(extended)
                    }
                },
                |i, &extended| {
                    if extended == Extended::Yes {
                        Vote::Yes
                    } else {
                        debug!(node = %self.nodes[i].label(), ?extended, "token gone on node");
                        Vote::No
                    }
                },
            )
            .await;
            match outcome.decision {
                None => Err(LostReason::Expired),
                Some(_) if outcome.reached() => {
                    let now = Instant::now();
                    match Term::extended(deadline, start, ttl, now) {
                        Ok(term) => {
                            gate.open(term.deadline);
                            let valid = validity::left(term.deadline, now);
                            let elapsed = now.saturating_duration_since(start);
                            debug!(?elapsed, ?valid, "extended");
                            Ok(term)
                        }
                        Err(Late::Expired) => Err(LostReason::Expired),
                        Err(Late::TooSlow) => Err(LostReason::TooSlow),
                    }
                }
                Some(_) => {
                    let t = &outcome.tally;
                    Err(LostReason::no_quorum(
                        t.yes(),
                        t.no(),
                        t.failed() + t.pending(),
                        t.needed(),
                        outcome.failures,
                    ))
                }
            }
        })
        .await
    }

    /// Asks every node whether the lock's keys still carry `token`
    /// (read-only), decided as [`remote_check::verdict`] says: `Ok(true)` at
    /// a quorum of yes, `Ok(false)` once so many said no that no quorum
    /// can carry it, an error when the nodes that failed or did not answer
    /// could have tipped it either way.
    pub(crate) async fn holds(&self, keys: &Keys, token: &Token) -> Result<bool, Error> {
        let command = Command::holds(keys, token);
        let outcome = fanout::decided_by(
            &self.nodes,
            &self.background,
            self.majority(None),
            |_, node, window| {
                let (node, command) = (node.clone(), command.clone());
                async move { node.holds(&command, window).await }
            },
            |_, &held| if held { Vote::Yes } else { Vote::No },
            remote_check::decision,
        )
        .await;
        match remote_check::verdict(&outcome.tally) {
            Some(Remote::Held) => Ok(true),
            Some(Remote::NotHeld) => Ok(false),
            Some(Remote::Unknown) | None => {
                Err(self.unavailable(Operation::Check, keys.name(), outcome))
            }
        }
    }

    /// A hint for a waiter (see `retry::wait_for_release`): `keys` as one
    /// node picked at random sees them ([`NodeView::combined`]).
    ///
    /// A lock over several resources waits on the ones held: the first key
    /// being free says nothing when another is taken (a waiter that looked
    /// at the first key alone tried again at once, in a loop).
    pub(crate) async fn look(&self, keys: &Keys) -> NodeView {
        NodeView::combined(self.look_at_each(keys).await)
    }

    /// The resource to name when an attempt on `keys` was refused: for a
    /// lock over several resources, the first one a node picked at random
    /// sees set, not the first one listed (that one may be free); the
    /// first resource when none is seen set.
    pub(crate) async fn held_resource(&self, keys: &Keys) -> ResourceName {
        if !keys.is_multi() {
            return keys.name();
        }
        let views = self.look_at_each(keys).await;
        keys.slices()
            .zip(views)
            .find(|(_, view)| matches!(view, NodeView::Held { .. }))
            .map_or_else(|| keys.name(), |(key, _)| ResourceName::new(key))
    }

    /// Every key of `keys` on one node picked at random (from the OS:
    /// forked workers do not all look at the same node).
    pub(crate) async fn look_at_each(&self, keys: &Keys) -> Vec<NodeView> {
        let node = &self.nodes[random::below(self.nodes.len())];
        let one: Arc<[Node]> = Arc::new([node.clone()]);
        let views = self.views(&one, keys.resources().into()).await;
        views.into_iter().flatten().collect()
    }

    /// Reads the resource's key on every node, in parallel.
    pub(crate) async fn status(&self, resource: &[u8]) -> Status {
        let mut one = self.statuses(Arc::new([resource.to_vec()])).await;
        one.pop()
            .unwrap_or_else(|| Status::new(ResourceName::new(resource), Vec::new(), self.needed()))
    }

    /// Reads each of `keys` on every node, in parallel: one status per key.
    pub(crate) async fn statuses(&self, keys: Arc<[Vec<u8>]>) -> Vec<Status> {
        let views = self.views(&self.nodes, keys.clone()).await;
        let mut per_key: Vec<Vec<(String, NodeView)>> = vec![Vec::new(); keys.len()];
        for (node, node_views) in self.nodes.iter().zip(views) {
            for (k, view) in node_views.into_iter().enumerate() {
                if let Some(list) = per_key.get_mut(k) {
                    list.push((node.label().to_owned(), view));
                }
            }
        }
        keys.iter()
            .zip(per_key)
            .map(|(key, nodes)| Status::new(ResourceName::new(key), nodes, self.needed()))
            .collect()
    }

    /// What each of `nodes` holds for each of `keys` (read-only; every
    /// node in parallel, all the keys of a node in one script that answers
    /// for the keys set only, so that a semaphore of 1024 slots with few
    /// held is one short round trip), within [`rule::read_timeout`]: per node,
    /// one view per key. A node that does not answer in time, or fails, is
    /// [`NodeView::Failed`] for every key (a timeout counted once); a key
    /// a node cannot read (another type) is `Failed` on its own. The one read
    /// behind [`status`](Self::status) and [`look`](Self::look).
    async fn views(&self, nodes: &Arc<[Node]>, keys: Arc<[Vec<u8>]>) -> Vec<Vec<NodeView>> {
        let timeout = rule::read_timeout(self.config.node_timeout, keys.len());
        let (command, count) = (Command::peek(&keys), keys.len());
        let plan = Plan {
            needed: nodes.len(),
            timeout,
            until: None,
        };
        // Every node is heard (or times out): a node that fails early must
        // not end the read before the others answered.
        let outcome = fanout::decided_by(
            nodes,
            &self.background,
            plan,
            |_, node, window| {
                let (node, command) = (node.clone(), command.clone());
                async move { node.peek(&command, count, window).await }
            },
            |_, _| Vote::Yes,
            |tally| (tally.pending() == 0).then(|| tally.decision()).flatten(),
        )
        .await;
        let mut views: Vec<Vec<NodeView>> = nodes
            .iter()
            .map(|node| {
                let silent = node.failure(NodeFailureKind::Timeout(timeout));
                vec![NodeView::Failed(silent); keys.len()]
            })
            .collect();
        for failure in outcome.failures {
            if let Some(i) = nodes.iter().position(|n| n.label() == failure.node) {
                views[i] = vec![NodeView::Failed(failure); keys.len()];
            }
        }
        for (i, answered) in outcome.replies {
            views[i] = answered;
        }
        views
    }

    /// A snapshot of every counter.
    pub(crate) fn stats(&self) -> Stats {
        Stats::new(
            self.nodes
                .iter()
                .map(|n| n.counters().snapshot(n.label()))
                .collect(),
            self.leases.snapshot(),
            self.leases.held(Primitive::Lock),
            self.leases.held(Primitive::Permit),
            self.leases.held(Primitive::Election),
        )
    }

    /// Waits for this engine's background work; see [`Background::settle`].
    pub(crate) async fn settle(&self, limit: Duration) -> bool {
        self.background.settle(limit).await
    }

    /// The error for an operation on a held lock that reached no quorum.
    pub(crate) fn unavailable<T>(
        &self,
        operation: Operation,
        resource: ResourceName,
        outcome: Outcome<T>,
    ) -> Error {
        Error::Unavailable {
            operation,
            resource,
            granted: outcome.tally.yes(),
            needed: outcome.tally.needed(),
            nodes: self.nodes.len(),
            attempts: 1,
            failures: outcome.failures,
        }
    }
}
