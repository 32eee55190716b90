//! The ACL lines of `docs/operations.md`, as written: a user with exactly
//! one line's rights runs its primitive — take, renew, status, a `SCRIPT
//! FLUSH`, release, fenced and not — with no denial in the ACL log. Then each
//! right is removed in turn: without a right the page calls required the
//! primitive fails, on `NOPERM` replies, and an acquire that fails so is
//! misconfigured (not retried as an outage); without one it calls optional
//! the primitive still runs. So a line that lacks a right, or lists one that
//! serves nothing, fails here — as does a page that lists a line for no
//! primitive or none for one.

use quorumlock_testkit as support;

use std::time::Duration;

use quorumlock::{Error, NodeView, Redlock};
use support::{unique, Cluster, OneAttempt};

const PASSWORD: &str = "password";

/// Rights the page calls optional: each has a fallback.
fn optional(rule: &str) -> bool {
    rule.starts_with('&')
        || [
            "resetchannels",
            "+publish",
            "+subscribe",
            "+unsubscribe",
            "+script|load",
            "+ping",
            "+config|get",
        ]
        .contains(&rule)
}

/// A right the scripts call only when two fenced permits commit their
/// tokens in one round at once (`fence_commit.lua`), a race this test does
/// not stage: without it the run here still succeeds.
const RACE_ONLY: &str = "+getbit";

/// Every `ACL SETUSER` line of the page, split into its rules (the user
/// name first).
fn documented() -> Vec<Vec<String>> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/operations.md");
    let page = std::fs::read_to_string(path).expect("docs/operations.md");
    page.lines()
        .filter_map(|line| line.strip_prefix("ACL SETUSER "))
        .map(|rules| rules.split_whitespace().map(str::to_owned).collect())
        .collect()
}

/// Where a primitive's run stopped, and how.
struct Failed {
    step: &'static str,
    text: String,
    /// Some node refused with `NOPERM`.
    noperm: bool,
    misconfigured: bool,
}

fn at(step: &'static str) -> impl FnOnce(Error) -> Failed {
    move |error| Failed {
        step,
        text: error.to_string(),
        noperm: error
            .node_failures()
            .iter()
            .any(|f| f.kind.is_redis_error("NOPERM")),
        misconfigured: error.is_misconfigured() && !error.is_unavailable(),
    }
}

/// A status read that some node failed.
fn unread(status: &quorumlock::Status, step: &'static str) -> Result<(), Failed> {
    let failed: Vec<_> = status
        .nodes
        .iter()
        .filter_map(|(_, view)| match view {
            NodeView::Failed(f) => Some(f),
            _ => None,
        })
        .collect();
    if failed.is_empty() {
        return Ok(());
    }
    Err(Failed {
        step,
        text: format!("{status}"),
        noperm: failed.iter().any(|f| f.kind.is_redis_error("NOPERM")),
        misconfigured: false,
    })
}

/// The primitive a user's line serves, run once end to end.
async fn run(user: &str, redlock: &Redlock, cluster: &Cluster) -> Result<(), Failed> {
    let ttl = Duration::from_secs(5);
    let flush = || (0..cluster.len()).for_each(|i| cluster.flush_scripts(i));
    match user {
        "locker" => {
            let name = unique("lock:acl");
            let lock = redlock
                .try_acquire(&name, ttl)
                .await
                .map_err(at("acquire"))?;
            lock.extend(ttl * 2).await.map_err(at("extend"))?;
            let status = redlock.status(&name).await;
            unread(&status, "status")?;
            flush();
            lock.release().await.map_err(at("release"))?;
            let fenced = redlock
                .lock(&name, ttl)
                .fenced()
                .acquire()
                .await
                .map_err(at("fenced acquire"))?;
            fenced.extend(ttl * 2).await.map_err(at("fenced extend"))?;
            fenced.release().await.map_err(at("fenced release"))?;
            let (a, b) = (unique("lock:acl-a"), unique("lock:acl-b"));
            let both = redlock
                .lock_all([&a, &b], ttl)
                .acquire()
                .await
                .map_err(at("acquire two"))?;
            both.release().await.map_err(at("release two"))?;
        }
        "permits" => {
            let name = unique("acl");
            let permit = redlock
                .semaphore(&name, 3, ttl)
                .take(2)
                .fenced()
                .acquire()
                .await
                .map_err(at("take 2 fenced"))?;
            permit.extend(ttl * 2).await.map_err(at("extend"))?;
            let status = redlock
                .semaphore_status(&name, 3)
                .await
                .map_err(at("status"))?;
            for slot in &status.slots {
                unread(slot, "status")?;
            }
            flush();
            permit.release().await.map_err(at("release"))?;
            let one = redlock
                .semaphore(&name, 3, ttl)
                .acquire()
                .await
                .map_err(at("take 1"))?;
            one.release().await.map_err(at("release 1"))?;
        }
        "elector" => {
            let name = unique("acl");
            let mut leadership = redlock
                .campaign(&name, ttl)
                .value("a")
                .lead()
                .await
                .map_err(at("lead"))?;
            leadership.proclaim("b").await.map_err(at("proclaim"))?;
            let leader = redlock.leader(&name).await.map_err(at("leader"))?;
            assert_eq!(leader.map(|l| l.value), Some(b"b".to_vec()));
            leadership.extend(ttl * 2).await.map_err(at("extend"))?;
            flush();
            leadership.resign().await.map_err(at("resign"))?;
        }
        "rwlock" => {
            let name = unique("doc:acl");
            let reader = redlock
                .read(&name, ttl)
                .acquire()
                .await
                .map_err(at("acquire read"))?;
            reader.extend(ttl * 2).await.map_err(at("extend read"))?;
            let status = redlock.rwlock_status(&name).await.map_err(at("status"))?;
            unread(&status.writer, "status")?;
            flush();
            reader.release().await.map_err(at("release read"))?;
            let writer = redlock
                .write(&name, ttl)
                .fenced()
                .acquire()
                .await
                .map_err(at("acquire write"))?;
            writer.extend(ttl * 2).await.map_err(at("extend write"))?;
            flush();
            writer.release().await.map_err(at("release write"))?;
        }
        other => panic!("docs/operations.md has an ACL line for {other:?}, which no test runs"),
    }
    Ok(())
}

/// Sets `rules` (a user name first) on every node, from a clean user.
fn set_user(cluster: &Cluster, rules: &[String]) {
    let mut all: Vec<&str> = vec![&rules[0], "reset"];
    all.extend(rules[1..].iter().map(String::as_str));
    cluster.acl_setuser(&all);
    for i in 0..cluster.len() {
        let _: () = cluster.exec(i, redis::cmd("ACL").arg("LOG").arg("RESET"));
    }
}

async fn client(cluster: &Cluster, user: &str) -> Redlock {
    // With restart quarantine, as the page advises: its uptime reads need
    // `+info`.
    quorumlock::Builder::new(cluster.urls_as(user, PASSWORD))
        .node_timeout(Duration::from_secs(2))
        .one_attempt()
        .restart_quarantine(Some(Duration::from_millis(500)))
        .build()
        .await
        .expect("build")
}

#[tokio::test]
async fn each_documented_acl_line_is_enough_and_each_required_right_is_needed() {
    let cluster = Cluster::local(3);
    // Restart quarantine reads each node's uptime in whole seconds.
    for i in 0..cluster.len() {
        cluster.wait_uptime(i, Duration::from_secs(1)).await;
    }
    let lines = documented();
    let users: Vec<&str> = lines.iter().map(|l| l[0].as_str()).collect();
    assert_eq!(
        users,
        ["locker", "permits", "elector", "rwlock"],
        "the page's ACL lines"
    );
    for line in &lines {
        let user = line[0].as_str();
        assert!(line.contains(&format!(">{PASSWORD}")), "{user}: {line:?}");

        set_user(&cluster, line);
        let redlock = client(&cluster, user).await;
        if let Err(Failed { step, text, .. }) = run(user, &redlock, &cluster).await {
            panic!("{user}: the documented line fails at {step}: {text}");
        }
        for i in 0..cluster.len() {
            let denied: Vec<redis::Value> = cluster.exec(i, redis::cmd("ACL").arg("LOG"));
            assert!(denied.is_empty(), "{user}: node {i} denied: {denied:?}");
        }

        // One right less.
        let rights = line
            .iter()
            .skip(1)
            .filter(|r| !matches!(r.as_str(), "on" | "-@all") && !r.starts_with('>'));
        for right in rights {
            let less: Vec<String> = line.iter().filter(|r| *r != right).cloned().collect();
            set_user(&cluster, &less);
            let redlock = client(&cluster, user).await;
            let outcome = run(user, &redlock, &cluster).await;
            support::report(&format!(
                "{user} without {right}: {}",
                match &outcome {
                    Ok(()) => "runs".to_owned(),
                    Err(f) => format!("fails at {}: {}", f.step, f.text),
                }
            ));
            match outcome {
                Ok(()) => assert!(
                    optional(right) || right == RACE_ONLY,
                    "{user}: runs without {right}, which the page calls required"
                ),
                Err(Failed {
                    step,
                    text,
                    noperm,
                    misconfigured,
                }) => {
                    assert!(
                        !optional(right),
                        "{user}: fails without {right}, which the page calls optional: \
                         at {step}: {text}"
                    );
                    assert!(noperm, "{user} without {right}: at {step}: {text}");
                    if step.starts_with("acquire") || step.starts_with("take") || step == "lead" {
                        assert!(misconfigured, "{user} without {right}: {text}");
                    }
                }
            }
        }
    }
}
