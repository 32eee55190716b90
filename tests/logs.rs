//! What the library logs when a lock's renewal goes wrong: every WARN
//! names the resource and the nodes behind it; and a campaign that waits
//! while no quorum answers says so, once, and when it recovers.
//!
//! A test binary of its own: the capture is per thread, and a `tracing`
//! call site first reached from another test's thread at the same moment
//! can be left out of it.

use quorumlock_testkit as support;

use std::time::Duration;

use quorumlock::{LossKind, LostReason, Renewal};
use support::logs::LogCapture;
use support::{eventually, unique, Cluster};

const MS: Duration = Duration::from_millis(1);
/// Several renewals per TTL, long against the harness' 100 ms node timeout.
const TTL: Duration = Duration::from_millis(1500);
/// Upper bound for anything that should happen "soon".
const SOON: Duration = Duration::from_secs(5);

/// Waits for the signal, failing the test instead of hanging.
async fn fired(signal: &quorumlock::LostSignal) -> LossKind {
    tokio::time::timeout(SOON * 2, signal.lost())
        .await
        .expect("the signal fired in time")
}

/// The WARN lines of `log`, each checked to name `resource` (as the
/// library shows resource names: quoted) and to carry a `nodes=` field.
fn warnings_naming(log: &str, resource: &str) -> Vec<String> {
    let lines: Vec<String> = log
        .lines()
        .filter(|l| l.contains("WARN"))
        .map(str::to_owned)
        .collect();
    for line in &lines {
        assert!(
            line.contains(&format!("resource=\"{resource}\"")),
            "a warning that does not say which lock: {line}"
        );
        assert!(
            line.contains("nodes="),
            "a warning without its nodes: {line}"
        );
    }
    lines
}

/// Every warning of a lock's renewal names its resource, and the nodes
/// behind it. Catches the renewal task's warnings without the resource
/// (before, they relied on a DEBUG span that a WARN-level subscriber never
/// shows, so the line did not say which lock to stop working on).
#[tokio::test]
async fn every_renewal_warning_names_the_resource_and_its_nodes() {
    let (capture, _log) = LogCapture::warnings();
    let mut cluster = Cluster::local(5);
    let redlock = cluster.redlock().await;

    // A majority of nodes fails (paused): uncertain, then expired.
    let name = unique("warn-node-failure");
    let lock = redlock.acquire(&name, TTL).await.expect("acquire");
    let signal = lock
        .auto_renew(Renewal::every(200 * MS).margin(500 * MS))
        .expect("auto_renew");
    assert!(eventually(SOON, || redlock.stats().leases.renewals >= 1).await);
    let labels = redlock.node_labels();
    for i in [0, 2, 4] {
        cluster.pause(i);
    }
    assert_eq!(fired(&signal).await, LossKind::Uncertain);
    let failed: Vec<String> = match signal.reason() {
        Some(LostReason::RenewalLate { failures, .. }) => {
            failures.into_iter().map(|f| f.node).collect()
        }
        other => panic!("{other:?}"),
    };
    assert!(eventually(SOON, || signal.kind() == Some(LossKind::Expired)).await);
    for i in [0, 2, 4] {
        cluster.resume(i);
    }
    drop(lock);
    let warnings = warnings_naming(&capture.text(), &name);
    assert!(
        warnings.iter().any(|l| l.contains("uncertain")),
        "{warnings:#?}"
    );
    let uncertain = warnings
        .iter()
        .find(|l| l.contains("uncertain"))
        .map_or("", String::as_str);
    for node in &failed {
        assert!(
            [0, 2, 4].iter().any(|&i| &labels[i] == node),
            "only paused nodes fail: {node}"
        );
        assert!(uncertain.contains(node.as_str()), "{uncertain}");
    }

    // The nodes answer that the key is someone else's: lost.
    let name = unique("warn-renewal-loss");
    let before = capture.text().len();
    let lock = redlock.acquire(&name, TTL).await.expect("acquire");
    let signal = lock
        .auto_renew(Renewal::every(200 * MS))
        .expect("auto_renew");
    for i in 0..3 {
        let _: () = cluster.exec(i, redis::cmd("SET").arg(&name).arg("someone-else"));
    }
    assert_eq!(fired(&signal).await, LossKind::Lost);
    drop(lock);
    let log = capture.text();
    let warnings = warnings_naming(&log[before..], &name);
    assert!(warnings.iter().any(|l| l.contains("lost")), "{warnings:#?}");
    for i in 0..3 {
        let _: () = cluster.exec(i, redis::cmd("DEL").arg(&name));
    }
}

/// A campaign that waits while too few nodes answer warns once (not at
/// every retry), naming the election and the nodes; counts each such
/// attempt (`stats().elections.unreachable`, the series
/// `quorumlock_election_unreachable_total`); and says when a quorum
/// answers again. Fails on a campaign that waits in silence: no line, no
/// count.
#[tokio::test]
async fn a_campaign_without_a_quorum_warns_once_counts_and_says_when_it_recovers() {
    let (capture, _log) = LogCapture::at(tracing::Level::INFO);
    let mut cluster = Cluster::local(5);
    let redlock = cluster.redlock().await;
    let name = unique("campaign-no-quorum");
    for i in [0, 2, 4] {
        cluster.pause(i);
    }
    let campaign = tokio::spawn(redlock.campaign(&name, TTL).lead());
    assert!(
        eventually(SOON * 2, || redlock.stats().elections.unreachable >= 3).await,
        "attempts without a quorum counted: {:?}",
        redlock.stats().elections
    );
    for i in [0, 2, 4] {
        cluster.resume(i);
    }
    let leadership = tokio::time::timeout(SOON * 2, campaign)
        .await
        .expect("elected once a majority answers")
        .expect("the campaign's task")
        .expect("lead");
    let log = capture.text();
    let waiting: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("campaign waiting"))
        .collect();
    assert_eq!(waiting.len(), 1, "one warning, not one per retry:\n{log}");
    assert!(waiting[0].contains("WARN"), "{log}");
    assert!(
        waiting[0].contains(&format!("resource=election \"{name}\""))
            && waiting[0].contains("nodes="),
        "the warning names the election and the nodes: {log}"
    );
    assert!(
        log.lines().any(|l| l.contains("INFO")
            && l.contains("a quorum answers again")
            && l.contains(&name)),
        "{log}"
    );
    assert_eq!(redlock.stats().elections.acquires.granted, 1);
    leadership.resign().await.expect("resign");
}

/// A caller that campaigns in slices (`Retry::Until`, again and again, as
/// `quorumlock elect` does) through one outage sees one warning and one
/// recovery, not one per slice; and an attempt that only one node answered
/// (another's key there, a node refusing connections, one not answering)
/// is no recovery. Three nodes: first one answers `no`, two are paused;
/// then one of those is killed (refused at once) while the other stays
/// paused; then all answer and the key is gone. Fails on a campaign that
/// warned once per acquire call, and said "answers again" when an attempt
/// failed with one `no` and one refusal.
#[tokio::test]
async fn a_campaign_in_slices_warns_once_per_outage_and_recovers_once() {
    let (capture, _log) = LogCapture::at(tracing::Level::INFO);
    let mut cluster = Cluster::local(3);
    let redlock = cluster.redlock().await;
    let name = unique("campaign-slices");
    let key = format!("quorumlock:election:{{{name}}}");
    let _: () = cluster.exec(
        0,
        redis::cmd("SET")
            .arg(&key)
            .arg("another")
            .arg("PX")
            .arg(60_000),
    );
    for i in [1, 2] {
        cluster.pause(i);
    }
    let slices = {
        let (redlock, name) = (redlock.clone(), name.clone());
        tokio::spawn(async move {
            loop {
                let slice = quorumlock::Retry::Until(600 * MS);
                match redlock.campaign(&name, TTL).retry(slice).lead().await {
                    Ok(leadership) => return leadership,
                    Err(e) => assert!(e.is_unavailable() || e.is_contended(), "{e}"),
                }
            }
        })
    };
    let calls = || {
        let a = redlock.stats().elections.acquires;
        a.unavailable + a.contended
    };
    assert!(eventually(SOON * 2, || calls() >= 3).await, "slices ended");
    cluster.kill(1);
    let before = calls();
    assert!(
        eventually(SOON * 2, || calls() >= before + 3).await,
        "slices ended"
    );
    let recovery = capture.text().len();
    cluster.restart(1);
    cluster.resume(2);
    let _: () = cluster.exec(0, redis::cmd("DEL").arg(&key));
    let leadership = tokio::time::timeout(SOON * 2, slices)
        .await
        .expect("elected once every node answers")
        .expect("the campaign's task");
    let log = capture.text();
    let lines = |text: &str| -> Vec<String> {
        log.lines()
            .filter(|l| l.contains(text) && l.contains(&name))
            .map(str::to_owned)
            .collect()
    };
    let waiting = lines("campaign waiting");
    assert_eq!(waiting.len(), 1, "one warning per outage:\n{log}");
    let recovered = lines("a quorum answers again");
    assert_eq!(recovered.len(), 1, "one recovery:\n{log}");
    assert!(
        log[recovery..].contains(&recovered[0]),
        "said when a quorum answers, not before:\n{log}"
    );
    leadership.resign().await.expect("resign");
}
