//! Work that outlives the call that started it — releases still on their
//! way to slow nodes, cleanups of cancelled attempts — counted, so a
//! short-lived process can wait for it before exiting.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);
static SETTLED: Notify = Notify::const_new();

struct Count;

impl Count {
    fn start() -> Self {
        IN_FLIGHT.fetch_add(1, Ordering::AcqRel);
        Count
    }
}

impl Drop for Count {
    fn drop(&mut self) {
        if IN_FLIGHT.fetch_sub(1, Ordering::AcqRel) == 1 {
            SETTLED.notify_waiters();
        }
    }
}

/// Spawns `work` on the current runtime (if any) and counts it until done.
pub(crate) fn spawn(work: impl Future<Output = ()> + Send + 'static) {
    if let Ok(handle) = tokio::runtime::Handle::try_current() {
        let count = Count::start();
        handle.spawn(async move {
            work.await;
            drop(count);
        });
    }
}

/// Waits until no counted background work is left, or `limit` passed.
/// True when everything finished.
pub(crate) async fn settle(limit: Duration) -> bool {
    let wait = async {
        loop {
            let notified = SETTLED.notified();
            if IN_FLIGHT.load(Ordering::Acquire) == 0 {
                return;
            }
            notified.await;
        }
    };
    tokio::time::timeout(limit, wait).await.is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn settle_waits_for_spawned_work() {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        spawn(async move {
            let _ = rx.await;
        });
        assert!(!settle(Duration::from_millis(20)).await, "still running");
        let _ = tx.send(());
        assert!(settle(Duration::from_secs(5)).await);
    }
}
