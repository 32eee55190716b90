//! Work that outlives the call that started it — releases still on their
//! way to slow nodes, cleanups of cancelled attempts — counted per client,
//! so a short-lived process can wait for its own client's work before
//! exiting ([`Redlock::settle`](crate::Redlock::settle)).

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

/// One client's registry of background work. Cheap to clone; clones count
/// into the same registry.
#[derive(Debug, Clone, Default)]
pub(crate) struct Background(Arc<Registry>);

#[derive(Debug, Default)]
struct Registry {
    in_flight: AtomicUsize,
    settled: Notify,
}

/// Counts one piece of work until dropped.
struct Count(Arc<Registry>);

impl Drop for Count {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.settled.notify_waiters();
        }
    }
}

impl Background {
    /// Spawns `work` on the current runtime (if any) and counts it until
    /// done. Without a runtime the work is dropped: what it would have
    /// released expires with its TTL.
    pub(crate) fn spawn(&self, work: impl Future<Output = ()> + Send + 'static) {
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            self.0.in_flight.fetch_add(1, Ordering::AcqRel);
            let count = Count(self.0.clone());
            handle.spawn(async move {
                work.await;
                drop(count);
            });
        }
    }

    /// Work spawned and not finished yet.
    pub(crate) fn in_flight(&self) -> usize {
        self.0.in_flight.load(Ordering::Acquire)
    }

    /// Waits until none of this registry's work is left, or `limit` passed.
    /// True when everything finished. A `limit` too large to add to the
    /// current instant waits without limit.
    pub(crate) async fn settle(&self, limit: Duration) -> bool {
        let wait = async {
            loop {
                let notified = self.0.settled.notified();
                if self.in_flight() == 0 {
                    return;
                }
                notified.await;
            }
        };
        // A `limit` past what an instant holds sets no timer at all.
        tokio::time::timeout(limit, wait).await.is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn settle_waits_for_spawned_work() {
        let background = Background::default();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        background.spawn(async move {
            let _ = rx.await;
        });
        assert!(
            !background.settle(Duration::from_millis(20)).await,
            "still running"
        );
        let _ = tx.send(());
        assert!(background.settle(Duration::from_secs(5)).await);
        assert!(
            background.settle(Duration::MAX).await,
            "no limit, nothing left"
        );
    }

    #[tokio::test]
    async fn each_client_waits_only_for_its_own_work() {
        let (mine, theirs) = (Background::default(), Background::default());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        theirs.spawn(async move {
            let _ = rx.await;
        });
        mine.spawn(async {});
        assert!(
            mine.settle(Duration::from_secs(5)).await,
            "not held up by the other client"
        );
        assert_eq!(theirs.in_flight(), 1);
        let _ = tx.send(());
        assert!(theirs.settle(Duration::from_secs(5)).await);
    }
}
