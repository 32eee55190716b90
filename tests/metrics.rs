//! Feature `metrics`: the counters of `stats()` reach a Prometheus recorder
//! under the documented names, and the scraped text moves with them — the
//! same numbers, node by node, including the latency histogram's buckets.
//!
//! One test per binary: the recorder is process-global.

use quorumlock_testkit as support;

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
use quorumlock::{metrics as m, Renewal};
use support::{eventually, unique, Cluster};

const TTL: Duration = Duration::from_secs(10);
const SOON: Duration = Duration::from_secs(5);

/// One scrape: `(name, labels) → value`.
#[derive(Debug)]
struct Scrape(HashMap<(String, BTreeMap<String, String>), f64>);

impl Scrape {
    fn parse(text: &str) -> Self {
        let mut map = HashMap::new();
        for line in text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
        {
            let (series, value) = line.rsplit_once(' ').expect("`series value`");
            let (name, labels) = match series.split_once('{') {
                Some((name, rest)) => (name, rest.trim_end_matches('}')),
                None => (series, ""),
            };
            let labels = labels
                .split(',')
                .filter(|kv| !kv.is_empty())
                .map(|kv| {
                    let (k, v) = kv.split_once('=').expect("label=value");
                    (k.to_owned(), v.trim_matches('"').to_owned())
                })
                .collect();
            let value = value.parse().unwrap_or_else(|e| panic!("{line}: {e}"));
            map.insert((name.to_owned(), labels), value);
        }
        Scrape(map)
    }

    /// The value of a series (0 when absent, as Prometheus treats a
    /// counter that was never incremented).
    fn get(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        let labels = labels
            .iter()
            .map(|&(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        self.0
            .get(&(name.to_owned(), labels))
            .map_or(0, |&v| v as u64)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_text_follows_stats_node_by_node() {
    let recorder = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Full(m::REPLY_SECONDS.into()), &m::LATENCY_BUCKETS)
        .expect("buckets")
        .build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder).expect("the only recorder of this binary");
    m::describe();

    let mut cluster = Cluster::local(3);
    let redlock = cluster.one_attempt_redlock().await;
    let nodes = redlock.node_labels();
    let before = Scrape::parse(&handle.render());
    for node in &nodes {
        assert!(
            before.get(m::COMMANDS, &[("node", node)]) >= 1,
            "build() sends PING / SCRIPT LOAD, counted: {before:?}"
        );
    }

    // Granted, refused, renewed, released.
    let name = unique("metrics");
    let lock = redlock.acquire(&name, TTL).await.expect("acquire");
    let err = redlock.try_acquire(&name, TTL).await.expect_err("held");
    assert!(err.is_contended());
    let signal = lock
        .auto_renew(Renewal::every(Duration::from_millis(200)))
        .expect("auto_renew");
    assert!(eventually(SOON, || redlock.stats().leases.renewals >= 2).await);
    lock.release().await.expect("release");
    drop(signal);
    // An error reply on node 0 (a hash where the lock key goes).
    let wrong = unique("metrics-wrongtype");
    let _: () = cluster.exec(0, redis::cmd("HSET").arg(&wrong).arg("f").arg("v"));
    let lock = redlock.acquire(&wrong, TTL).await.expect("2 of 3 grant");
    lock.release().await.expect("release");
    // Timeouts on nodes 1 and 2 (SIGSTOP): an outage.
    cluster.pause(1);
    cluster.pause(2);
    let paused = unique("metrics-timeout");
    let err = redlock.try_acquire(&paused, TTL).await.expect_err("1 of 3");
    assert!(err.is_unavailable(), "{err}");
    cluster.resume(1);
    cluster.resume(2);
    assert!(
        eventually(SOON, || redlock.stats().nodes[2].timeouts >= 1).await,
        "{:?}",
        redlock.stats()
    );

    // Replies still arriving (the resumed nodes, the cleanup) move the
    // counters: compare a scrape taken between two equal snapshots.
    let mut stable = None;
    for _ in 0..50 {
        let first = redlock.stats();
        let text = handle.render();
        if redlock.stats() == first {
            stable = Some((first, text));
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (stats, text) = stable.expect("the counters settle within 5 s");
    let after = Scrape::parse(&text);
    for (node, s) in nodes.iter().zip(&stats.nodes) {
        let n = [("node", node.as_str())];
        assert_eq!(after.get(m::COMMANDS, &n), s.commands, "{node} commands");
        assert!(
            after.get(m::COMMANDS, &n) > before.get(m::COMMANDS, &n),
            "moved"
        );
        for (op, votes) in [
            ("acquire", s.acquire),
            ("extend", s.extend),
            ("release", s.release),
        ] {
            for (vote, count) in [("yes", votes.yes), ("no", votes.no)] {
                let labels = [("node", node.as_str()), ("op", op), ("vote", vote)];
                assert_eq!(after.get(m::VOTES, &labels), count, "{node} {op} {vote}");
            }
        }
        assert_eq!(after.get(m::TIMEOUTS, &n), s.timeouts, "{node} timeouts");
        assert_eq!(after.get(m::CONNECTION_ERRORS, &n), s.connection_errors);
        assert_eq!(after.get(m::PROTOCOL_ERRORS, &n), s.protocol_errors);
        for &(code, count) in &s.redis_errors {
            let labels = [("node", node.as_str()), ("code", code)];
            assert_eq!(after.get(m::ERROR_REPLIES, &labels), count, "{node} {code}");
        }
        // The histogram: same count, same buckets (cumulative in the text).
        let count = format!("{}_count", m::REPLY_SECONDS);
        assert_eq!(after.get(&count, &n), s.latency.count, "{node} replies");
        let bucket = format!("{}_bucket", m::REPLY_SECONDS);
        let mut cumulative = 0;
        for (&(_, n_in), le) in s.latency.buckets.iter().zip(m::LATENCY_BUCKETS) {
            cumulative += n_in;
            let le = le.to_string();
            let labels = [("node", node.as_str()), ("le", le.as_str())];
            assert_eq!(after.get(&bucket, &labels), cumulative, "{node} le={le}");
        }
    }
    assert!(stats.nodes[0].redis_error_count("WRONGTYPE") >= 1);
    assert!(
        after.get(
            m::ERROR_REPLIES,
            &[("node", &nodes[0]), ("code", "WRONGTYPE")]
        ) >= 1
    );
    assert!(after.get(m::TIMEOUTS, &[("node", &nodes[2])]) >= 1);
    assert_eq!(after.get(m::RENEWALS, &[]), stats.leases.renewals);
    assert!(after.get(m::RENEWALS, &[]) >= 2);
    assert_eq!(
        after.get(m::RENEWAL_FAILURES, &[]),
        stats.leases.renewal_failures
    );
}
