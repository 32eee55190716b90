//! Clients of a [`Cluster`]: builders with test-friendly timeouts, and the
//! single-attempt set-up the fault suites share.

use std::time::Duration;

use quorumlock::Redlock;

use crate::Cluster;

/// The node timeout [`Cluster::builder`] gives external nodes (those of
/// `QUORUMLOCK_TEST_NODES`, e.g. the compose containers behind Docker's
/// port proxy). Through that proxy on a loaded 2-core machine (load
/// average 6 to 15, other builds running) a `PING` round trip measured
/// p50 0.4 ms, p99 31 to 36 ms, p99.9 93 to 125 ms and at most 312 ms: the
/// local nodes' 100 ms is inside that tail, and a stall of the test process
/// times out every node at once, failing a release or an extend. One
/// second is three times the worst round trip seen and still far below
/// the TTLs the suites rely on.
pub const EXTERNAL_NODE_TIMEOUT: Duration = Duration::from_secs(1);

impl Cluster {
    /// Like [`Cluster::builder`], through the proxies.
    pub fn proxied_builder(&mut self) -> quorumlock::Builder {
        let urls = self.proxied();
        self.builder_for(urls)
    }

    /// A builder with test-friendly settings: 100 ms node timeout on local
    /// nodes (generous on a loaded 2-core machine, small against the TTLs
    /// tests use), [`EXTERNAL_NODE_TIMEOUT`] on external ones.
    pub fn builder(&self) -> quorumlock::Builder {
        self.builder_for(self.urls())
    }

    fn builder_for(&self, urls: Vec<String>) -> quorumlock::Builder {
        let (node, connect) = if self.is_external() {
            (EXTERNAL_NODE_TIMEOUT, EXTERNAL_NODE_TIMEOUT * 2)
        } else {
            (Duration::from_millis(100), Duration::from_millis(500))
        };
        quorumlock::Builder::new(urls)
            .node_timeout(node)
            .connect_timeout(connect)
    }

    /// A client built from [`Cluster::builder`].
    pub async fn redlock(&self) -> Redlock {
        self.builder().build().await.expect("build redlock")
    }

    /// A client built from [`Cluster::builder`] making [one
    /// attempt](OneAttempt) per acquisition.
    pub async fn one_attempt_redlock(&self) -> Redlock {
        self.builder()
            .one_attempt()
            .build()
            .await
            .expect("build redlock")
    }
}

/// One attempt per acquisition: a contended or failed attempt returns its
/// error at once instead of retrying. The suites that assert what one
/// attempt does (which nodes voted, what a fault costs, which error comes
/// back) build their clients with it, so that the setting is named in one
/// place.
pub trait OneAttempt {
    /// This builder, set to make a single attempt per acquisition.
    fn one_attempt(self) -> Self;
}

impl OneAttempt for quorumlock::Builder {
    fn one_attempt(self) -> Self {
        self.retry_count(0)
    }
}
