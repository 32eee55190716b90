//! Release after `SET`: a release sent to a node is queued behind that
//! node's `SET` of the same attempt, on the same connection, so it can
//! never overtake it — a hung node that wakes up runs the `SET` and then
//! the release, and no orphan key is left.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

/// A node's `SET NX` of one attempt, as a later release on that node sees
/// it: the release waits until the `SET` is over. Cheap to clone; the
/// clones of one attempt share one allocation. (A shared future per node
/// did the same job for about twenty allocations per attempt.)
#[derive(Clone)]
pub(crate) struct SetFuture {
    sets: Arc<SetsOver>,
    node: usize,
}

/// Which nodes' `SET`s of one attempt are over.
struct SetsOver {
    over: Box<[AtomicBool]>,
    changed: Notify,
    /// Whether a release has waited for a `SET` of this attempt: until one
    /// has, a `SET` that ends (as they all do, long before a lock is
    /// released) has nobody to wake and skips the `Notify`'s lock.
    awaited: AtomicBool,
}

impl SetFuture {
    /// One handle per node for an attempt over `nodes` nodes.
    pub(crate) fn for_attempt(nodes: usize) -> Vec<SetFuture> {
        let sets = Arc::new(SetsOver {
            over: (0..nodes).map(|_| AtomicBool::new(false)).collect(),
            changed: Notify::new(),
            awaited: AtomicBool::new(false),
        });
        (0..nodes)
            .map(|node| SetFuture {
                sets: sets.clone(),
                node,
            })
            .collect()
    }

    /// Resolves once this node's `SET` has finished, failed, timed out or
    /// was dropped.
    pub(crate) async fn over(&self) {
        // Over already (the common case): nothing to wait for.
        if self.sets.over[self.node].load(Ordering::SeqCst) {
            return;
        }
        loop {
            // Created before the check: `notify_waiters` reaches it even
            // before it is first polled.
            let changed = self.sets.changed.notified();
            // SeqCst with the store and load in `MarkOver::drop`: either
            // this sees the flag, or that sees `awaited` and wakes
            // `changed`, created before.
            self.sets.awaited.store(true, Ordering::SeqCst);
            if self.sets.over[self.node].load(Ordering::SeqCst) {
                return;
            }
            changed.await;
        }
    }

    /// Marks this node's `SET` over when dropped: held by the `SET`'s future,
    /// so that a release never waits for a `SET` that will not finish.
    pub(crate) fn mark_over_on_drop(&self) -> MarkOver {
        MarkOver(self.clone())
    }
}

/// See [`SetFuture::mark_over_on_drop`].
pub(crate) struct MarkOver(SetFuture);

impl Drop for MarkOver {
    fn drop(&mut self) {
        let SetFuture { sets, node } = &self.0;
        sets.over[*node].store(true, Ordering::SeqCst);
        if sets.awaited.load(Ordering::SeqCst) {
            sets.changed.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_release_waits_for_its_node_only() {
        let sets = SetFuture::for_attempt(2);
        let first = sets[0].mark_over_on_drop();
        let waiting = tokio::spawn({
            let set = sets[0].clone();
            async move { set.over().await }
        });
        drop(sets[1].mark_over_on_drop());
        tokio::time::timeout(Duration::from_secs(5), sets[1].over())
            .await
            .expect("node 1's SET is over");
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "node 0's SET is still running");
        drop(first);
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("woken when node 0's SET is over")
            .expect("task");
    }
}
