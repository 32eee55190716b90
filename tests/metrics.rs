//! Feature `metrics`: the counters of `stats()` reach a Prometheus recorder
//! under the documented names, and the scraped text moves with them — the
//! same numbers, node by node, including the latency histogram's buckets.
//!
//! The lock-level series (acquires by outcome, attempt, wait and hold
//! times, locks held, node up) follow `stats().locks` and `NodeStats::up`
//! through a scripted sequence; the permit series follow `stats().permits`,
//! and a permit acquire moves none of the lock series; the election series
//! follow `stats().elections`, and a campaign moves none of the lock or
//! permit series. A permit lost under renewal counts as lost as a lock
//! would, and a node that refuses the password is down.
//!
//! One test per binary: the recorder is process-global.

use quorumlock_testkit as support;

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
use quorumlock::{metrics as m, Renewal};
use support::{eventually, unique, Cluster, OneAttempt};

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
    // Every histogram with the buckets `stats()` uses, from the table.
    let mut builder = PrometheusBuilder::new();
    for metric in m::METRICS {
        if let Some(buckets) = metric.buckets {
            builder = builder
                .set_buckets_for_metric(Matcher::Full(metric.name.into()), buckets)
                .expect("buckets");
        }
    }
    let recorder = builder.build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder).expect("the only recorder of this binary");
    m::describe();

    let mut cluster = Cluster::local(3);
    // Exact counts are asserted: a node timeout far above any reply on a
    // loaded machine, so that only the paused nodes time out.
    let redlock = cluster
        .builder()
        .node_timeout(Duration::from_secs(1))
        .one_attempt()
        .build()
        .await
        .expect("build");
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
        histogram_matches(&after, m::REPLY_SECONDS, &n, &s.latency);
        assert_eq!(after.get(m::NODE_UP, &n), u64::from(s.up), "{node} up");
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
    // The lock series: this binary has one client, so the process-wide
    // series are its own.
    locks_match(&after, &stats.locks);
    let a = stats.locks.acquires;
    assert_eq!((a.granted, a.contended, a.unavailable), (2, 1, 1), "{a:?}");

    // The held-now gauge goes up with a grant and down with the release;
    // the hold is counted. Catches a gauge that a release (or a drop)
    // never brings down, and holds counted at the grant.
    let held = unique("metrics-held");
    let lock = redlock.acquire(&held, TTL).await.expect("acquire");
    let dropped = redlock
        .acquire(unique("metrics-dropped"), TTL)
        .await
        .expect("acquire");
    let stats = redlock.stats();
    let up = Scrape::parse(&handle.render());
    assert_eq!((stats.locks.held, up.get(m::LOCKS_HELD, &[])), (2, 2));
    locks_match(&up, &stats.locks);
    lock.release().await.expect("release");
    drop(dropped);
    let stats = redlock.stats();
    let down = Scrape::parse(&handle.render());
    assert_eq!((stats.locks.held, down.get(m::LOCKS_HELD, &[])), (0, 0));
    assert_eq!(stats.locks.hold.count, 4, "every lock taken, counted once");
    locks_match(&down, &stats.locks);

    // Permits: their own series, the lock series left alone. Catches
    // permits counted as locks (the lock series move) and a held gauge
    // that counts holders instead of permits (1, not 2).
    let sem = unique("metrics-sem");
    let two = redlock
        .semaphore(&sem, 3, TTL)
        .take(2)
        .acquire()
        .await
        .expect("2 of 3 permits");
    let err = redlock
        .semaphore(&sem, 3, TTL)
        .take(2)
        .acquire()
        .await
        .expect_err("1 left");
    assert!(err.is_contended(), "{err}");
    let stats = redlock.stats();
    let held = Scrape::parse(&handle.render());
    assert_eq!((stats.permits.held, held.get(m::PERMITS_HELD, &[])), (2, 2));
    assert_eq!(held.get(m::LOCKS_HELD, &[]), 0);
    family_match(&held, &PERMITS, &stats.permits);
    locks_match(&held, &stats.locks);
    for name in [m::ACQUIRES, m::LOCKS_HELD] {
        assert_eq!(held.all_of(name), down.all_of(name), "{name} moved");
    }
    for h in [m::ATTEMPT_SECONDS, m::WAIT_SECONDS, m::HOLD_SECONDS] {
        let count = format!("{h}_count");
        assert_eq!(held.get(&count, &[]), down.get(&count, &[]), "{h} moved");
    }
    let a = stats.permits.acquires;
    assert_eq!((a.granted, a.contended), (1, 1), "{a:?}");
    two.release().await.expect("release");
    let stats = redlock.stats();
    let freed = Scrape::parse(&handle.render());
    assert_eq!(
        (stats.permits.held, freed.get(m::PERMITS_HELD, &[])),
        (0, 0)
    );
    assert_eq!(stats.permits.hold.count, 1, "one hold per holder");
    family_match(&freed, &PERMITS, &stats.permits);

    // Elections: their own series, the lock and permit series left alone.
    // Catches campaigns counted as locks (the lock series move) and a held
    // gauge that a resignation never brings down.
    let election = unique("metrics-election");
    let leadership = redlock.campaign(&election, TTL).lead().await.expect("lead");
    let err = redlock
        .campaign(&election, TTL)
        .retry(quorumlock::Retry::Times(0))
        .lead()
        .await
        .expect_err("led already");
    assert!(err.is_contended(), "{err}");
    let stats = redlock.stats();
    let leading = Scrape::parse(&handle.render());
    assert_eq!(
        (stats.elections.held, leading.get(m::ELECTIONS_HELD, &[])),
        (1, 1)
    );
    family_match(&leading, &ELECTIONS, &stats.elections);
    locks_match(&leading, &stats.locks);
    family_match(&leading, &PERMITS, &stats.permits);
    for f in [&LOCKS, &PERMITS] {
        for name in [f.acquires, f.held] {
            assert_eq!(leading.all_of(name), freed.all_of(name), "{name} moved");
        }
        for h in [f.attempt, f.wait, f.hold] {
            let count = format!("{h}_count");
            assert_eq!(
                leading.get(&count, &[]),
                freed.get(&count, &[]),
                "{h} moved"
            );
        }
    }
    let a = stats.elections.acquires;
    assert_eq!((a.granted, a.contended), (1, 1), "{a:?}");
    leadership.resign().await.expect("resign");
    let stats = redlock.stats();
    let resigned = Scrape::parse(&handle.render());
    assert_eq!(
        (stats.elections.held, resigned.get(m::ELECTIONS_HELD, &[])),
        (0, 0)
    );
    assert_eq!(stats.elections.hold.count, 1, "one leadership");
    family_match(&resigned, &ELECTIONS, &stats.elections);

    // A permit lost under renewal counts as lost, as a lock or a
    // leadership would: two of three nodes stop answering, the renewal
    // cannot confirm the permit before its safety margin, and `run` ends
    // the work and returns the loss, which names the semaphore (not a
    // slot's key). Catches a loss counted only when a majority answered
    // that the keys are gone.
    let sem = unique("metrics-lost");
    let permit = redlock
        .semaphore(&sem, 2, Duration::from_secs(3))
        .acquire()
        .await
        .expect("a permit");
    cluster.pause(1);
    cluster.pause(2);
    let lost = permit.run(|_| std::future::pending::<()>()).await;
    cluster.resume(1);
    cluster.resume(2);
    let err = lost.expect_err("the renewal got no majority");
    assert!(err.is_lost(), "{err}");
    let named = format!("permit of semaphore \"{sem}\" lost: ");
    assert!(err.to_string().starts_with(&named), "{err}");
    redlock.settle(SOON).await;
    let stats = redlock.stats();
    let text = Scrape::parse(&handle.render());
    assert_eq!(stats.permits.acquires.lost, 1, "{:?}", stats.permits);
    assert_eq!(text.get(m::PERMIT_ACQUIRES, &[("outcome", "lost")]), 1);
    family_match(&text, &PERMITS, &stats.permits);
    assert_eq!(stats.permits.held, 0);

    // A stopped node's gauge drops to 0; the others stay at 1. Catches a
    // gauge set once at build, or not lowered by a connection failure.
    let all = redlock
        .acquire(unique("metrics-all"), TTL)
        .await
        .expect("acquire");
    all.release().await.expect("release");
    redlock.settle(SOON).await;
    assert!(
        redlock.stats().nodes.iter().all(|n| n.up),
        "{:?}",
        redlock.stats()
    );
    cluster.kill(2);
    let two = redlock
        .acquire(unique("metrics-two"), TTL)
        .await
        .expect("2 of 3");
    two.release().await.expect("release");
    redlock.settle(SOON).await;
    let stats = redlock.stats();
    let text = Scrape::parse(&handle.render());
    let up: Vec<bool> = stats.nodes.iter().map(|n| n.up).collect();
    assert_eq!(up, [true, true, false]);
    for (node, s) in nodes.iter().zip(&stats.nodes) {
        assert_eq!(
            text.get(m::NODE_UP, &[("node", node)]),
            u64::from(s.up),
            "{node}"
        );
    }

    // A node that refuses the password answers, but votes on nothing: it
    // is down, the others up. Catches a gauge that every error reply
    // (WRONGPASS counted meanwhile) keeps at 1.
    let locked = Cluster::local(3);
    for (i, password) in ["another-pw", "the-pw", "the-pw"].into_iter().enumerate() {
        locked.require_pass(i, password);
    }
    let redlock = quorumlock::Builder::new(locked.urls_as("default", "the-pw"))
        .node_timeout(Duration::from_secs(1))
        .one_attempt()
        .build()
        .await
        .expect("build");
    let lock = redlock
        .acquire(unique("metrics-password"), TTL)
        .await
        .expect("2 of 3");
    lock.release().await.expect("release");
    redlock.settle(SOON).await;
    let stats = redlock.stats();
    assert!(
        stats.nodes[0].redis_error_count("WRONGPASS") >= 1,
        "{:?}",
        stats.nodes[0]
    );
    let text = Scrape::parse(&handle.render());
    let up: Vec<bool> = stats.nodes.iter().map(|n| n.up).collect();
    assert_eq!(up, [false, true, true], "{:?}", stats.nodes);
    for (node, s) in redlock.node_labels().iter().zip(&stats.nodes) {
        assert_eq!(
            text.get(m::NODE_UP, &[("node", node)]),
            u64::from(s.up),
            "{node}"
        );
    }
}

/// A histogram's series against `stats()`'s: the same count, the same
/// buckets (cumulative in the text).
fn histogram_matches(
    scrape: &Scrape,
    name: &str,
    labels: &[(&str, &str)],
    stats: &quorumlock::Latency,
) {
    let count = format!("{name}_count");
    assert_eq!(scrape.get(&count, labels), stats.count, "{name} {labels:?}");
    let bucket = format!("{name}_bucket");
    let mut cumulative = 0;
    for &(bound, n) in &stats.buckets[..stats.buckets.len() - 1] {
        cumulative += n;
        let le = bound.as_secs_f64().to_string();
        let mut labels = labels.to_vec();
        labels.push(("le", le.as_str()));
        assert_eq!(scrape.get(&bucket, &labels), cumulative, "{name} le={le}");
    }
}

/// The names of one primitive's lock-level series.
struct Family {
    acquires: &'static str,
    held: &'static str,
    attempt: &'static str,
    wait: &'static str,
    hold: &'static str,
}

const LOCKS: Family = Family {
    acquires: m::ACQUIRES,
    held: m::LOCKS_HELD,
    attempt: m::ATTEMPT_SECONDS,
    wait: m::WAIT_SECONDS,
    hold: m::HOLD_SECONDS,
};

const PERMITS: Family = Family {
    acquires: m::PERMIT_ACQUIRES,
    held: m::PERMITS_HELD,
    attempt: m::PERMIT_ATTEMPT_SECONDS,
    wait: m::PERMIT_WAIT_SECONDS,
    hold: m::PERMIT_HOLD_SECONDS,
};

const ELECTIONS: Family = Family {
    acquires: m::ELECTION_ACQUIRES,
    held: m::ELECTIONS_HELD,
    attempt: m::ELECTION_ATTEMPT_SECONDS,
    wait: m::ELECTION_WAIT_SECONDS,
    hold: m::ELECTION_HOLD_SECONDS,
};

impl Scrape {
    /// Every series named `name`, whatever its labels, sorted.
    fn all_of(&self, name: &str) -> Vec<(BTreeMap<String, String>, u64)> {
        let mut v: Vec<_> = self
            .0
            .iter()
            .filter(|((n, _), _)| n == name)
            .map(|((_, labels), &value)| (labels.clone(), value as u64))
            .collect();
        v.sort();
        v
    }
}

/// The lock series against `stats().locks`.
fn locks_match(scrape: &Scrape, locks: &quorumlock::LockStats) {
    family_match(scrape, &LOCKS, locks);
}

/// One primitive's series against its `stats()` figures.
fn family_match(scrape: &Scrape, f: &Family, locks: &quorumlock::LockStats) {
    let a = locks.acquires;
    for (outcome, n) in [
        ("granted", a.granted),
        ("contended", a.contended),
        ("unavailable", a.unavailable),
        ("misconfigured", a.misconfigured),
        ("other", a.other),
        ("lost", a.lost),
    ] {
        assert_eq!(
            scrape.get(f.acquires, &[("outcome", outcome)]),
            n,
            "{} {outcome}",
            f.acquires
        );
    }
    assert_eq!(scrape.get(f.held, &[]), locks.held, "{}", f.held);
    histogram_matches(scrape, f.attempt, &[], &locks.attempt_latency);
    histogram_matches(scrape, f.wait, &[], &locks.wait);
    histogram_matches(scrape, f.hold, &[], &locks.hold);
}
