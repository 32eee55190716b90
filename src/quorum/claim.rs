//! What an acquisition asks the nodes for — a lock's keys, an election's
//! leadership lock, permits of a semaphore — each one [`Claim`]: its
//! command, how the nodes' grants count, and what a grant keeps. The
//! attempt ([`crate::quorum::attempt`]) and the retry loop
//! ([`crate::quorum::retry`]) are the same for every claim.

use std::sync::Arc;
use std::time::Duration;

use crate::config::MAX_PERMITS;
use crate::error::{Occupancy, ResourceName};
use crate::keys::{Keys, Slots};
use crate::node::commands::Command;
use crate::node::fence;
use crate::node::grant::{Grant, Shape};
use crate::node::reply::Vote;
use crate::quorum::fanout::Count;
use crate::quorum::rule::{Decision, Tally};
use crate::quorum::slots::SlotVotes;
use crate::random;
use crate::stats::locks::{Holding, Primitive};
use crate::status::NodeView;
use crate::token::Token;

// A slot's index fits in a round of fencing tokens.
const _: () = assert!(MAX_PERMITS as u64 <= fence::ROUND);

/// What an acquisition takes. A new kind of claim is one impl of this and
/// the script its command runs.
pub(crate) trait Claim: Send + Sync {
    /// How the nodes' grants count, read back once the fan-out ended.
    type Votes: Count<Grant> + Send;

    /// What a grant counts as: the counters its hold goes to.
    fn holding(&self) -> Holding;

    /// Every key an attempt may set: what a failed attempt releases, and
    /// what a waiter watches and looks at.
    fn keys(&self) -> &Keys;

    /// The name errors give.
    fn name(&self) -> ResourceName {
        self.keys().name()
    }

    /// The resources of which a refusal names the one found held (a lock
    /// over several: the first one listed may be free).
    fn resources(&self) -> Option<&Keys> {
        None
    }

    /// An attempt's command with `token`, how a node's reply to it reads,
    /// and its votes (`needed` nodes to a key).
    fn ask(
        &self,
        token: &Token,
        ttl: Duration,
        needed: usize,
    ) -> (Arc<Command>, Shape, Self::Votes);

    /// What `votes` won, with the fan-out's `tally`.
    fn won(&self, votes: &Self::Votes, tally: Tally) -> Won;

    /// Once granted: the keys of the token besides those kept that the
    /// nodes (indices) among `replies` say they set, to release at once.
    fn beyond(&self, _: &Self::Votes, _: &[(usize, Grant)]) -> Option<(Keys, Vec<usize>)> {
        None
    }

    /// A waiter's hint from one node's views of [`keys`](Self::keys): free
    /// when what is wanted is free there; held otherwise, for as long as
    /// it takes for enough of it to expire.
    fn hint(&self, views: Vec<NodeView>) -> NodeView {
        NodeView::combined(views)
    }
}

/// What an attempt won (all of it, once granted).
pub(crate) struct Won {
    /// The keys the holder keeps.
    pub(crate) keys: Keys,
    /// The slot its fencing token names in a round of `per_round` tokens
    /// ([`fence::propose`]).
    pub(crate) slot: u64,
    pub(crate) per_round: u64,
    /// The tally an error reports.
    pub(crate) tally: Tally,
    /// A semaphore's limit asked with and the one recorded on the nodes
    /// instead, when that alone keeps the quorum out of reach
    /// ([`SlotVotes::other_limit`]): a misconfiguration, not retried.
    pub(crate) limit_mismatch: Option<(u32, u32)>,
    /// For permits, what the refusing nodes reported, for the error.
    pub(crate) permits: Option<Occupancy>,
}

/// A lock's votes: each grant as the node voted, decided at a majority.
pub(crate) type Majority = fn(usize, &Grant) -> Vote;

/// A lock over these keys; an election's leadership lock
/// ([`Keys::election`]) is taken as a lock and counted as an election, a
/// side of a read–write lock ([`Keys::read_write`]) as a lock and counted
/// as its side.
impl Claim for Keys {
    type Votes = Majority;

    fn holding(&self) -> Holding {
        Holding::one(self.primitive())
    }

    fn keys(&self) -> &Keys {
        self
    }

    fn resources(&self) -> Option<&Keys> {
        Some(self)
    }

    fn ask(&self, token: &Token, ttl: Duration, _: usize) -> (Arc<Command>, Shape, Majority) {
        let shape = match self.fence_key() {
            Some(_) => Shape::Fenced,
            None => Shape::Lock,
        };
        (Command::acquire(self, token, ttl), shape, |_, grant| {
            grant.vote
        })
    }

    fn won(&self, _: &Majority, tally: Tally) -> Won {
        Won {
            keys: self.clone(),
            slot: 0,
            per_round: 1,
            tally,
            limit_mismatch: None,
            permits: None,
        }
    }
}

/// `want` permits of a semaphore, all or nothing (at least 1, at most the
/// slots).
pub(crate) struct Permits {
    /// The semaphore's slots.
    pub(crate) slots: Slots,
    pub(crate) want: usize,
}

/// The slot rule as a fan-out's count: a node that set slots votes yes
/// (and its slots are counted), one that refused votes no (and the limit
/// it records, when it refused for that, or the free slots it saw, is
/// kept).
impl Count<Grant> for SlotVotes {
    fn vote(&mut self, _: usize, grant: &Grant) -> Vote {
        self.record(&grant.positions);
        if let Some(recorded) = grant.other_limit {
            self.record_other_limit(recorded);
        }
        if let Some(free) = grant.free {
            self.refused(free);
        }
        grant.vote
    }

    fn decide(&self, tally: &Tally) -> Option<Decision> {
        SlotVotes::decide(self, tally.pending())
    }
}

/// Granted, the holder keeps `want` won slots; whatever else the token got
/// is released: in the background where a node said it set more, with the
/// holder's release where a node answered late.
impl Claim for Permits {
    type Votes = SlotVotes;

    fn holding(&self) -> Holding {
        Holding {
            primitive: Primitive::Permit,
            count: self.want as u64,
        }
    }

    fn keys(&self) -> &Keys {
        self.slots.every()
    }

    /// The nodes look at the slots from one drawn at random: concurrent
    /// acquires mostly ask for different free slots instead of splitting
    /// one slot's votes between them.
    fn ask(&self, token: &Token, ttl: Duration, needed: usize) -> (Arc<Command>, Shape, SlotVotes) {
        let (listed, want) = (self.slots.count(), self.want);
        let first = random::below(listed);
        let command = Command::take_slots(&self.slots, first, want, token, ttl);
        let votes = SlotVotes::new(listed, first, want, needed);
        (command, Shape::Slots { listed, want }, votes)
    }

    fn won(&self, votes: &SlotVotes, tally: Tally) -> Won {
        let kept = votes.kept();
        let listed = u32::try_from(self.slots.count()).unwrap_or(u32::MAX);
        Won {
            keys: self.slots.held(&kept),
            // The token names the holder's first slot within its round.
            slot: kept.first().map_or(0, |&s| s as u64),
            per_round: fence::ROUND,
            limit_mismatch: votes.other_limit(&tally).map(|recorded| (listed, recorded)),
            tally: votes.summary(&tally),
            permits: votes.refusals().map(|counts| {
                let [wanted, permits, free, nodes] =
                    counts.map(|n| n.try_into().unwrap_or(u32::MAX));
                Occupancy {
                    wanted,
                    permits,
                    free,
                    nodes,
                }
            }),
        }
    }

    /// Slots this token holds besides the kept ones, on the nodes that
    /// answered having set others. (Those of nodes that answered late go
    /// with the holder's release, which clears every slot carrying the
    /// token.) While permits are free every node sets the same slots, and
    /// there are none.
    fn beyond(&self, votes: &SlotVotes, replies: &[(usize, Grant)]) -> Option<(Keys, Vec<usize>)> {
        let kept = votes.kept();
        let answers = replies.iter().map(|(i, g)| (*i, g.positions.as_slice()));
        let beyond = votes.beyond(&kept, answers);
        (!beyond.is_empty()).then(|| (self.slots.except(&kept), beyond))
    }

    fn hint(&self, views: Vec<NodeView>) -> NodeView {
        NodeView::enough_free(views, self.want)
    }
}
