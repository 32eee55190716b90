//! One attempt to take permits of a semaphore: the slots script on every
//! node at once (one round trip while permits are free), decided by the
//! slot rule ([`crate::quorum::slots`]); for a fenced semaphore, followed
//! by the commit of the fencing token (its round and the holder's first
//! slot) on the semaphore's one counter. The
//! deadline the holder gets is [`validity::deadline`] from the attempt's
//! start, as for a lock.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::debug;

use crate::config::MAX_PERMITS;
use crate::keys::Slots;
use crate::node::fence;
use crate::node::reply::Vote;
use crate::node::slots::SlotGrant;
use crate::quorum::attempt::{self, Attempt, AttemptFailure, Begun, Verdict};
use crate::quorum::engine::Engine;
use crate::quorum::fanout::{self, Count, Outcome};
use crate::quorum::rule::{Decision, Tally};
use crate::quorum::slots::SlotVotes;
use crate::quorum::traced::in_span;
use crate::random;
use crate::token::Token;
use crate::validity;

// A slot's index fits in a round of fencing tokens.
const _: () = assert!(MAX_PERMITS as u64 <= fence::ROUND);

/// The slot rule as a fan-out's count: a node that set slots votes yes
/// (and its slots are counted), one that refused votes no.
struct SlotCount(SlotVotes);

impl Count<SlotGrant> for SlotCount {
    fn vote(&mut self, _: usize, grant: &SlotGrant) -> Vote {
        self.0.record(&grant.positions);
        if grant.granted() {
            Vote::Yes
        } else {
            Vote::No
        }
    }

    fn decide(&self, tally: &Tally) -> Option<Decision> {
        self.0.decide(tally.pending())
    }
}

/// One attempt at `want` of the semaphore's slots with a fresh `token`.
///
/// The nodes look at the slots from one drawn at random: concurrent
/// acquires mostly ask for different free slots instead of splitting one
/// slot's votes between them. Granted, the holder keeps `want` won slots;
/// whatever else the token got is released: in the background where a
/// node said it set more, with the holder's release where a node answered
/// late. On failure every slot is
/// released on every node before this returns, as for a lock; if this
/// future is dropped mid-flight, the same cleanup is spawned.
pub(crate) async fn take_once(
    engine: &Arc<Engine>,
    slots: &Slots,
    want: usize,
    token: &Token,
    ttl: Duration,
    drift: Duration,
) -> Attempt {
    let span = tracing::debug_span!("permit_attempt", semaphore = %slots, want, token = %token);
    in_span(span, async move {
        let count = slots.count();
        let first = random::below(count);
        let every_slot = slots.every();
        let Begun {
            start,
            valid_until,
            timeout,
            plan,
            sets,
            mut guard,
        } = Begun::now(engine, every_slot, token, ttl, drift);
        let command = crate::node::commands::Command::take_slots(slots, first, want, token, ttl);
        let quarantine = engine.config.restart_quarantine;
        let mut votes = SlotCount(SlotVotes::new(count, first, want, engine.needed()));
        let set = fanout::counted(
            &engine.nodes,
            &engine.background,
            plan,
            |i, node, window| {
                let (node, command) = (node.clone(), command.clone());
                let over = sets[i].mark_over_on_drop();
                async move {
                    let _over = over;
                    if let Some(required) = quarantine {
                        node.check_standing(required, window).await?;
                    }
                    node.take_slots(&command, count, want, window).await
                }
            },
            &mut votes,
        )
        .await;
        let votes = votes.0;
        let kept = votes.kept();
        let held = slots.held(&kept);
        let reached = set.reached();
        let Outcome {
            tally: votes_tally,
            failures,
            replies,
            ..
        } = set;
        let counters = replies
            .iter()
            .filter(|(_, g)| g.granted())
            .map(|(_, g)| g.counter);
        // The token names the holder's first slot within its round.
        let first_slot = kept.first().map_or(0, |&s| s as u64);
        let proposed = fence::propose(counters, first_slot, fence::ROUND);
        let Verdict {
            granted,
            tally,
            failures,
            fence,
            fence_exhausted,
        } = Verdict::new(reached, votes.summary(&votes_tally), failures)
            .fenced(engine, &held, token, proposed, valid_until)
            .await;
        let now = Instant::now();
        let elapsed = now.saturating_duration_since(start);
        let valid = !validity::left(valid_until, now).is_zero();
        guard.sets = None;
        if granted && valid {
            debug!(?elapsed, ?kept, ?fence, "permits granted");
            // Slots this token holds besides the kept ones, on the nodes
            // that answered having set others: freed now. (Those of nodes
            // that answered late go with the holder's release, which
            // clears every slot carrying the token.) While permits are
            // free every node sets the same slots, and nothing is sent.
            let answers = replies.iter().map(|(i, g)| (*i, g.positions.as_slice()));
            let beyond = votes.beyond(&kept, answers);
            if !beyond.is_empty() {
                let others = slots.except(&kept);
                engine.spawn_release_on(others, token.clone(), &sets, &beyond);
            }
            return Attempt::Granted {
                keys: held,
                deadline: valid_until,
                sets,
                fence,
            };
        }
        debug!(?elapsed, best = tally.yes(), "permit attempt failed");
        attempt::clean_up(engine, every_slot, token, sets, &tally, timeout).await;
        Attempt::Failed(AttemptFailure {
            tally,
            failures,
            exhausted: granted.then_some(elapsed),
            fence_exhausted,
        })
    })
    .await
}
