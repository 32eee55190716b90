//! The semaphore's vote rule. A semaphore of `L` permits is `L` slots, each
//! an ordinary quorum lock; an acquire of `k` permits asks every node for
//! `k` free slots at once. A slot is **won** when a majority of the nodes
//! set it to the acquire's token; the acquire is granted once `k` slots are
//! won, and impossible once fewer than `k` slots can still be. Pure: the
//! nodes' replies come in as the slots each one set.
//!
//! Why this never admits more than `L`: each won slot is held exactly as a
//! lock is (two tokens never both hold a majority of one key within
//! validity), a holder keeps `k` distinct slots, and there are `L` slots
//! (`docs/semaphore.md`) — every holder naming the same `L`, which the
//! nodes check: a node records the `L` its slots were taken with and
//! refuses an acquire that names another. Such a refusal is a no like
//! contention's, and a misconfiguration once the nodes recording another
//! limit alone keep the quorum out of reach ([`SlotVotes::other_limit`]).
//! Counting admissions per node instead — "a
//! majority of nodes admitted me" — over-admits: three holders on three
//! nodes can each be admitted by a different pair.

use crate::node::reply::Vote;
use crate::quorum::rule::{Decision, Tally};

/// The votes of one acquire, per slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SlotVotes {
    /// The slot the command listed first (the order wraps around).
    first: usize,
    /// Slots wanted.
    want: usize,
    /// Nodes that must set a slot for it to be won.
    needed: usize,
    /// Per position in the command's order: the nodes that set it.
    yes: Vec<usize>,
    /// The limits recorded by the nodes that refused for naming another.
    other_limits: Vec<u32>,
    /// The nodes that refused for want of free slots, and the most free
    /// slots one of them saw.
    refused: Option<(usize, usize)>,
}

impl SlotVotes {
    /// An acquire of `want` of `slots` slots, listed from slot `first`
    /// on, each needing `needed` nodes.
    pub(crate) fn new(slots: usize, first: usize, want: usize, needed: usize) -> Self {
        Self {
            first,
            want,
            needed,
            yes: vec![0; slots],
            other_limits: Vec::new(),
            refused: None,
        }
    }

    /// A node refused: it records the limit `recorded`, not this
    /// acquire's.
    pub(crate) fn record_other_limit(&mut self, recorded: u32) {
        self.other_limits.push(recorded);
    }

    /// The limit the nodes record instead of this acquire's (the one most
    /// of them record), when the nodes recording another limit alone keep
    /// the quorum of `tally` out of reach: no retry can be granted while
    /// their slots live. A minority of them (a record left by a holder
    /// named another limit before, whose slots still live there) only
    /// votes no, as a holder does.
    pub(crate) fn other_limit(&self, tally: &Tally) -> Option<u32> {
        let others = &self.other_limits;
        if !tally.out_of_reach(others.len()) {
            return None;
        }
        let most = |&l: &u32| others.iter().filter(|&&o| o == l).count();
        others.iter().copied().max_by_key(most)
    }

    /// A node set the slots at `positions` (in the command's order).
    pub(crate) fn record(&mut self, positions: &[usize]) {
        for &p in positions {
            if let Some(yes) = self.yes.get_mut(p) {
                *yes += 1;
            }
        }
    }

    /// A node refused: it saw only `free` slots free, fewer than wanted.
    pub(crate) fn refused(&mut self, free: usize) {
        let (nodes, most) = self.refused.unwrap_or_default();
        self.refused = Some((nodes + 1, most.max(free)));
    }

    /// The slots wanted, the slots, and what the refusing nodes reported:
    /// how many refused, and the most free slots one of them saw; `None`
    /// when none refused.
    pub(crate) fn refusals(&self) -> Option<[usize; 4]> {
        let (nodes, free) = self.refused?;
        Some([self.want, self.yes.len(), free, nodes])
    }

    /// The decision, with `pending` nodes yet to answer: reached at `want`
    /// won slots; impossible once fewer than `want` slots could still
    /// reach a majority, whatever the pending nodes say.
    pub(crate) fn decide(&self, pending: usize) -> Option<Decision> {
        let won = self.yes.iter().filter(|&&y| y >= self.needed).count();
        let possible = self
            .yes
            .iter()
            .filter(|&&y| y + pending >= self.needed)
            .count();
        if won >= self.want {
            Some(Decision::Reached)
        } else if possible < self.want {
            Some(Decision::Impossible)
        } else {
            None
        }
    }

    /// The slots kept: the first `want` won in the command's order (fewer
    /// when not that many were won), by index: the holder's first slot,
    /// which its fencing token names, comes first.
    pub(crate) fn kept(&self) -> Vec<usize> {
        let slots = self.yes.len();
        let mut kept: Vec<usize> = self
            .yes
            .iter()
            .enumerate()
            .filter(|&(_, &y)| y >= self.needed)
            .map(|(p, _)| (self.first + p) % slots)
            .take(self.want)
            .collect();
        kept.sort_unstable();
        kept
    }

    /// The nodes that answered having set a slot besides `kept`
    /// (`replies`: the answers counted, as node index and the positions
    /// each node set): they hold a slot of the token that the holder does
    /// not keep. (A node that answered late may hold one too; the holder's
    /// release clears those, see [`crate::keys::Slots::held`].)
    pub(crate) fn beyond<'r>(
        &self,
        kept: &[usize],
        replies: impl IntoIterator<Item = (usize, &'r [usize])>,
    ) -> Vec<usize> {
        let slots = self.yes.len();
        replies
            .into_iter()
            .filter(|(_, positions)| {
                positions
                    .iter()
                    .any(|p| !kept.contains(&((self.first + p) % slots)))
            })
            .map(|(node, _)| node)
            .collect()
    }

    /// The tally an error reports for this acquire: the most nodes any
    /// slot got as its yes votes, the other nodes that answered as
    /// refusals (they set other slots, or none), the failures as they are.
    /// So an acquire whose nodes split over different slots reads as
    /// contended, as it is.
    pub(crate) fn summary(&self, tally: &Tally) -> Tally {
        let answered = tally.yes() + tally.no();
        let yes = self.yes.iter().copied().max().unwrap_or(0).min(answered);
        let mut summary = Tally::new(answered + tally.failed() + tally.pending(), tally.needed());
        let counts = [yes, answered - yes, tally.failed()];
        for (vote, n) in [Vote::Yes, Vote::No, Vote::Failed].into_iter().zip(counts) {
            for _ in 0..n {
                summary.record(vote);
            }
        }
        summary
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn won_once_a_majority_set_enough_slots() {
        // 5 nodes, 3 needed; 2 of 4 slots wanted, listed from slot 2.
        let mut v = SlotVotes::new(4, 2, 2, 3);
        v.record(&[0, 1]);
        v.record(&[0, 1]);
        assert_eq!(v.decide(3), None);
        v.record(&[0, 1]);
        assert_eq!(v.decide(2), Some(Decision::Reached));
        // Positions 0 and 1 from slot 2: slots 2 and 3.
        assert_eq!(v.kept(), [2, 3]);
    }

    #[test]
    fn split_nodes_win_nothing() {
        // The counter design's counterexample, on slots: 3 nodes, 2
        // needed, 1 slot wanted of 2; each node set a different one.
        let mut v = SlotVotes::new(2, 0, 1, 2);
        v.record(&[0]);
        v.record(&[1]);
        assert_eq!(v.decide(1), None);
        v.record(&[]);
        assert_eq!(v.decide(0), Some(Decision::Impossible));
        assert!(v.kept().is_empty());
    }

    #[test]
    fn impossible_as_soon_as_too_few_slots_can_be_won() {
        // 5 nodes, 3 needed, 1 of 2 slots wanted: two refusals and a node
        // setting slot 1 leave slot 0 with 0 + 2 pending: impossible, and
        // slot 1 with 1 + 2: still possible.
        let mut v = SlotVotes::new(2, 0, 1, 3);
        v.record(&[]);
        v.record(&[]);
        v.record(&[1]);
        assert_eq!(v.decide(2), None);
        v.record(&[0]);
        assert_eq!(v.decide(1), Some(Decision::Impossible));
    }

    #[test]
    fn more_won_than_wanted_keeps_the_first_in_order() {
        let mut v = SlotVotes::new(3, 1, 1, 2);
        v.record(&[0]);
        v.record(&[1]);
        v.record(&[0]);
        v.record(&[1]);
        assert_eq!(v.kept(), [1]);
    }

    #[test]
    fn only_nodes_that_set_more_than_the_kept_slots_are_cleaned() {
        // 4 slots listed from slot 3, 1 wanted: position 0 is slot 3.
        let v = SlotVotes::new(4, 3, 1, 3);
        let kept = [3];
        let (same, other, refused): (&[usize], &[usize], &[usize]) = (&[0], &[1], &[]);
        // Nodes 0 and 1 set the kept slot, node 2 slot 0, node 3 refused.
        let replies = [(0, same), (1, same), (2, other), (3, refused)];
        assert_eq!(v.beyond(&kept, replies), [2]);
        // Every node answered with the kept slot: nothing to clean.
        let all = (0..5).map(|i| (i, same));
        assert!(v.beyond(&kept, all).is_empty());
        // Listed from slot 1: position 1 is slot 2, position 0 slot 1.
        let v = SlotVotes::new(4, 1, 1, 3);
        let (second, first): (&[usize], &[usize]) = (&[1], &[0]);
        assert!(v.beyond(&[2], [(0, second)]).is_empty());
        assert_eq!(v.beyond(&[2], [(0, first)]), [0]);
    }

    #[test]
    fn another_limit_is_reported_once_it_alone_keeps_the_quorum_out_of_reach() {
        // 5 nodes, 3 needed: two nodes recording 3 are a minority.
        let mut v = SlotVotes::new(2, 0, 1, 3);
        let mut t = Tally::new(5, 3);
        for _ in 0..2 {
            v.record_other_limit(3);
            t.record(Vote::No);
        }
        assert_eq!(v.other_limit(&t), None);
        // A third: the quorum is out of reach, the limit most record named.
        v.record_other_limit(4);
        t.record(Vote::No);
        assert_eq!(v.other_limit(&t), Some(3));
    }

    #[test]
    fn refusals_report_the_most_free_slots_seen() {
        let mut v = SlotVotes::new(3, 0, 2, 3);
        assert_eq!(v.refusals(), None);
        v.refused(0);
        v.refused(1);
        v.refused(0);
        // 2 wanted of 3, at most 1 free, on 3 nodes.
        assert_eq!(v.refusals(), Some([2, 3, 1, 3]));
    }

    #[test]
    fn a_split_reads_as_contended() {
        let mut v = SlotVotes::new(2, 0, 1, 2);
        let mut t = Tally::new(3, 2);
        v.record(&[0]);
        t.record(Vote::Yes);
        v.record(&[1]);
        t.record(Vote::Yes);
        t.record(Vote::Failed);
        let s = v.summary(&t);
        assert_eq!((s.yes(), s.no(), s.failed()), (1, 1, 1));
        assert!(!s.outage());
    }

    #[test]
    fn a_summary_counts_every_node_once() {
        // 5 nodes, 3 needed: slot 0, slot 1, a refusal, a failure, and a
        // node yet to answer.
        let mut v = SlotVotes::new(2, 0, 1, 3);
        let mut t = Tally::new(5, 3);
        v.record(&[0]);
        t.record(Vote::Yes);
        v.record(&[1]);
        t.record(Vote::Yes);
        v.record(&[]);
        t.record(Vote::No);
        t.record(Vote::Failed);
        let s = v.summary(&t);
        assert_eq!((s.yes(), s.no(), s.failed(), s.pending()), (1, 2, 1, 1));
    }
}
