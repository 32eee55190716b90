//! The waiter queue (`docs/queue.md`): a waiter's place, by a ticket
//! committed through the quorum as a fencing token is, with an entry on
//! the nodes under a short lease of its own. A majority naming its ticket
//! the lowest live one makes it the head, the one waiter that tries; the
//! others wait for their turn, woken one at a time. The queue decides who
//! may try, never who holds: the lock's own scripts still decide that.

use std::sync::Arc;
use std::time::Instant;

use crate::keys::Queue;
use crate::member::{Node, NodeResult};
use crate::node::commands::Command;
use crate::node::reply::Vote;
use crate::node::Window;
use crate::quorum::engine::Engine;
use crate::quorum::rule::{Decision, Tally};
use crate::token::Token;

/// Proposals a join makes before it gives up (each one above every
/// counter seen): more only when others keep joining at the same moment.
const JOIN_TRIES: usize = 3;

/// A waiter's entry in a queue, from [`Place::join`]; dropping it removes
/// the entry from every node in the background (naming the next head).
pub(crate) struct Place {
    engine: Arc<Engine>,
    queue: Queue,
    /// The entry's name on the nodes (a fresh random token per join).
    pub(crate) id: Token,
    ticket: u64,
    /// When the last renewal that reached a majority was sent.
    renewed: Instant,
    /// Whether a majority named this ticket the lowest live one at the
    /// last look.
    pub(crate) head: bool,
}

/// What a look at the queue found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Standing {
    /// Not the head, or too few nodes answered to tell.
    Behind,
    /// A majority names this waiter's ticket the lowest live one.
    Head,
    /// The entry is gone from a majority (its lease lapsed there, or the
    /// nodes restarted empty): the waiter joins again, at the back.
    Lapsed,
}

/// One node's reply to a queue script: `[1 when this waiter's entry (or
/// ticket) counts there, …, the lowest live ticket there]`, a join's with
/// the node's counter between.
fn reply(values: &[i64]) -> (bool, u64, u64) {
    let at = |i: usize| values.get(i).copied().unwrap_or(0).max(0) as u64;
    let last = values.len().saturating_sub(1);
    (at(0) == 1, at(1), at(last))
}

/// Runs a queue script on a node.
async fn call(_: usize, node: Node, command: Arc<Command>, window: Window) -> NodeResult<Vec<i64>> {
    node.queue(&command, window).await
}

impl Place {
    /// Joins `queue` at the back as `id`: reads the ticket counters of a
    /// majority, proposes one above the highest, and holds the ticket once
    /// a majority counted it (a node counts a ticket above its counter
    /// only, and drops the entry of `id` where it refuses). `None` when no
    /// majority answers or commits in [`JOIN_TRIES`] proposals: the waiter
    /// then tries as one outside the queue does.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future once a proposal is sent removes its entries in
    /// the background; an entry whose commit reaches a node after that
    /// removal lapses with its lease.
    pub(crate) async fn join(engine: &Arc<Engine>, queue: Queue, id: Token) -> Option<Self> {
        let lease = engine.config.waiter_lease();
        let read = Command::queue_join(&queue, &id, 0, lease);
        let any = &mut |_, _: &Vec<i64>| Vote::Yes;
        let counters = engine.ask(engine.majority(), read, call, any).await;
        if !counters.reached() {
            return None;
        }
        let mut highest = counters.replies.iter().map(|(_, r)| reply(r).1).max()?;
        let mut place = Self {
            engine: engine.clone(),
            queue,
            id,
            ticket: 0,
            renewed: Instant::now(),
            head: false,
        };
        for _ in 0..JOIN_TRIES {
            place.ticket = highest.checked_add(1)?;
            let (ticket, mut heads) = (place.ticket, 0);
            let command = Command::queue_join(&place.queue, &place.id, ticket, lease);
            let committed = &mut |_, r: &Vec<i64>| {
                let (counted, counter, head) = reply(r);
                highest = highest.max(counter);
                heads += usize::from(counted && head == ticket);
                if counted {
                    Vote::Yes
                } else {
                    Vote::No
                }
            };
            let outcome = engine
                .ask(engine.majority(), command, call, committed)
                .await;
            if outcome.reached() {
                place.head = heads >= engine.needed();
                return Some(place);
            }
        }
        None
    }

    /// Renews the entry's lease and reads whether this waiter is the head:
    /// decided at a majority naming its ticket the lowest live one;
    /// otherwise once every node answered (or timed out), for a waiter
    /// gives up its place only when a majority answered and fewer than a
    /// majority hold its entry — two answers "behind" and "missing" do not
    /// say that a third node lacks it too.
    pub(crate) async fn touch(&mut self) -> Standing {
        let engine = self.engine.clone();
        let (sent, ticket, lease) = (Instant::now(), self.ticket, engine.config.waiter_lease());
        let mut present = 0;
        let vote = |_, r: &Vec<i64>| {
            let (there, _, head) = reply(r);
            present += usize::from(there);
            match there && head == ticket {
                true => Vote::Yes,
                false => Vote::No,
            }
        };
        let decide = |t: &Tally| match (t.yes() >= t.needed(), t.pending()) {
            (true, _) => Some(Decision::Reached),
            (false, 0) => Some(Decision::Impossible),
            (false, _) => None,
        };
        let command = Command::queue_touch(&self.queue, &self.id, lease);
        let outcome = engine
            .ask(engine.majority(), command, call, &mut (vote, decide))
            .await;
        let needed = engine.needed();
        if present >= needed {
            self.renewed = sent;
        }
        self.head = outcome.reached();
        match (
            self.head,
            outcome.replies.len() >= needed && present < needed,
        ) {
            (true, _) => Standing::Head,
            (false, true) => Standing::Lapsed,
            (false, false) => Standing::Behind,
        }
    }

    /// When the entry is next renewed: a third of the lease after the last
    /// renewal, so that two renewals may fail before it lapses.
    pub(crate) fn due(&self) -> Instant {
        self.renewed + self.engine.config.waiter_lease() / 3
    }
}

/// Leaves the queue on every node, in the background.
impl Drop for Place {
    fn drop(&mut self) {
        let engine = self.engine.clone();
        let command = Command::queue_leave(&self.queue, &self.id);
        self.engine.background.spawn(async move {
            let plan = engine.everyone(engine.config.node_timeout);
            let any = &mut |_, _: &Vec<i64>| Vote::Yes;
            engine.ask(plan, command, call, any).await;
        });
    }
}

impl std::fmt::Debug for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Place")
            .field("ticket", &self.ticket)
            .field("head", &self.head)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_read_as_the_scripts_write_them() {
        // A join counted, the counter at 7, 5 the head.
        assert_eq!(reply(&[1, 7, 5]), (true, 7, 5));
        // A touch: the entry gone, nobody waits.
        assert_eq!(reply(&[0, 0]), (false, 0, 0));
        // Nothing readable counts for nothing.
        assert_eq!(reply(&[]), (false, 0, 0));
        assert_eq!(reply(&[1, -3]), (true, 0, 0));
    }
}
