//! Release announcements sent by the test: what a stream of holders
//! taking a lock back to back looks like to a waiter, each release heard
//! and the key found taken again, without the moments in between when a
//! waiter's look finds it free.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use tokio::task::JoinHandle;

use super::Cluster;

/// A task that announces releases on one channel, on every node.
pub struct Announcer {
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl Announcer {
    /// Publishes on `quorumlock:released:<channel>` on every node of
    /// `cluster` every `every`, each time a new token, as the release
    /// script does, until [`stop`](Self::stop).
    pub async fn start(cluster: &Cluster, channel: &[u8], every: Duration) -> Self {
        let channel = [quorumlock::RELEASE_CHANNEL_PREFIX, channel].concat();
        let mut conns: Vec<MultiplexedConnection> = Vec::new();
        for url in cluster.urls() {
            let client = redis::Client::open(url).expect("url");
            let conn = client.get_multiplexed_async_connection().await;
            conns.push(conn.expect("connect"));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicUsize::new(0));
        let task = {
            let (stop, sent) = (stop.clone(), sent.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let token = format!("announced-{:016x}", rand::random::<u64>());
                    for conn in &mut conns {
                        let publish = redis::cmd("PUBLISH").arg(&channel).arg(&token).to_owned();
                        let _: redis::RedisResult<i64> = publish.query_async(conn).await;
                    }
                    sent.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(every).await;
                }
            })
        };
        Self { stop, sent, task }
    }

    /// Stops announcing; how many releases were announced.
    pub async fn stop(self) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.task.await;
        self.sent.load(Ordering::Relaxed)
    }
}
