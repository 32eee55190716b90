//! quorumlock beside Redlock clients it did not write, on the same nodes:
//! `redlock-py` (redis-py, synchronous) and `aioredlock` (asyncio), both
//! real releases from PyPI, run from the virtualenv `scripts/interop-venv.sh`
//! creates, through `scripts/interop/client.py` (one operation per process).
//!
//! All three clients store a lock as `SET <resource> <token> NX PX <ttl>`
//! under the bare resource name, so the same name is the same lock. Each
//! scenario runs for both clients:
//! - the other client holds → quorumlock is refused with `is_contended` and
//!   leaves nothing behind;
//! - quorumlock holds → the other client is refused, and wins after the
//!   release;
//! - the other client's release with a wrong token never frees quorumlock's
//!   lock;
//! - quorumlock's release of a lock that expired never deletes the lock the
//!   other client took since.
//!
//! Without the venv the tests fail, saying how to create it;
//! `QUORUMLOCK_SKIP_INTEROP=1` skips them instead (for a machine without
//! Python; CI never sets it).

use quorumlock_testkit as support;

use std::path::PathBuf;
use std::time::Duration;

use support::{unique, Cluster};

const TTL: Duration = Duration::from_secs(10);
/// How long one driver process may take (Python start-up included).
const DRIVER_LIMIT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy)]
enum Foreign {
    RedlockPy,
    Aioredlock,
}

impl Foreign {
    fn name(self) -> &'static str {
        match self {
            Foreign::RedlockPy => "redlock-py",
            Foreign::Aioredlock => "aioredlock",
        }
    }
}

/// The driver's one-line answer.
#[derive(Debug)]
struct Reply {
    ok: bool,
    token: Option<String>,
    error: Option<String>,
}

/// The venv's python, or `None` when skipping is allowed and it is absent.
fn python() -> Option<PathBuf> {
    let path = match std::env::var_os("QUORUMLOCK_INTEROP_PYTHON") {
        Some(p) => PathBuf::from(p),
        None => {
            let cache = std::env::var_os("QUORUMLOCK_CACHE")
                .map(PathBuf::from)
                .or_else(|| {
                    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/quorumlock"))
                })
                .expect("HOME or QUORUMLOCK_CACHE is set");
            cache.join("interop-venv/bin/python")
        }
    };
    if path.exists() {
        return Some(path);
    }
    if std::env::var("QUORUMLOCK_SKIP_INTEROP").is_ok_and(|v| v == "1") {
        eprintln!(
            "interop: {} is missing, skipped (QUORUMLOCK_SKIP_INTEROP=1)",
            path.display()
        );
        return None;
    }
    panic!(
        "interop: {} is missing: run scripts/interop-venv.sh (or set \
         QUORUMLOCK_SKIP_INTEROP=1 to skip these tests on a machine without Python)",
        path.display()
    );
}

/// Runs one operation of `client` and parses its answer.
async fn foreign(
    python: &PathBuf,
    client: Foreign,
    action: &str,
    resource: &str,
    cluster: &Cluster,
    token: Option<&str>,
) -> Reply {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/interop/client.py");
    let mut cmd = tokio::process::Command::new(python);
    cmd.arg(script)
        .args([client.name(), action, resource])
        .arg(cluster.urls().join(","))
        .arg(TTL.as_millis().to_string());
    if let Some(token) = token {
        cmd.arg(token);
    }
    cmd.kill_on_drop(true);
    let out = tokio::time::timeout(DRIVER_LIMIT, cmd.output())
        .await
        .unwrap_or_else(|_| panic!("{} {action} took over {DRIVER_LIMIT:?}", client.name()))
        .expect("run the interop driver");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{} {action} failed ({}):\n{stdout}\n{}",
        client.name(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("driver answer {stdout:?}: {e}"));
    Reply {
        ok: v["ok"].as_bool().expect("ok is a bool"),
        token: v["token"].as_str().map(str::to_owned),
        error: v["error"].as_str().map(str::to_owned),
    }
}

/// The value of `key` on every node.
fn values(cluster: &Cluster, key: &str) -> Vec<Option<String>> {
    cluster
        .values(key.as_bytes())
        .into_iter()
        .map(|v| v.map(|b| String::from_utf8_lossy(&b).into_owned()))
        .collect()
}

fn everywhere(cluster: &Cluster, value: &str) -> Vec<Option<String>> {
    vec![Some(value.to_owned()); cluster.len()]
}

/// The token quorumlock stored (the same on every node that holds it).
fn stored_token(cluster: &Cluster, key: &str) -> String {
    values(cluster, key)
        .into_iter()
        .flatten()
        .next()
        .expect("quorumlock's key is on some node")
}

async fn foreign_holder_refuses_quorumlock(client: Foreign) {
    let Some(py) = python() else { return };
    let cluster = Cluster::shared(5);
    let redlock = cluster.redlock().await;
    let name = unique(&format!("interop-{}-holds", client.name()));

    let held = foreign(&py, client, "lock", &name, &cluster, Some("foreign-token")).await;
    assert!(held.ok, "{} could not lock: {held:?}", client.name());
    let token = held.token.expect("the foreign token");
    assert_eq!(values(&cluster, &name), everywhere(&cluster, &token));

    let err = redlock
        .try_acquire(&name, TTL)
        .await
        .expect_err("quorumlock must be refused while the other client holds");
    assert!(err.is_contended(), "refused as contended, got: {err}");
    assert_eq!(
        values(&cluster, &name),
        everywhere(&cluster, &token),
        "quorumlock's refused attempt leaves the other client's keys as they were"
    );

    let released = foreign(&py, client, "unlock", &name, &cluster, Some(&token)).await;
    assert!(released.ok, "{released:?}");
    assert!(cluster.released(&name, Duration::from_secs(2)).await);
    let lock = redlock
        .try_acquire(&name, TTL)
        .await
        .expect("quorumlock wins after the other client's release");
    lock.release().await.expect("release");
    assert!(cluster.released(&name, Duration::from_secs(2)).await);
}

async fn quorumlock_holder_refuses_foreign_until_released(client: Foreign) {
    let Some(py) = python() else { return };
    let cluster = Cluster::shared(5);
    let redlock = cluster.redlock().await;
    let name = unique(&format!("interop-{}-refused", client.name()));

    let lock = redlock.try_acquire(&name, TTL).await.expect("acquire");
    let ours = stored_token(&cluster, &name);
    let refused = foreign(&py, client, "lock", &name, &cluster, Some("foreign-token")).await;
    assert!(
        !refused.ok,
        "{} took a lock quorumlock holds: {refused:?}",
        client.name()
    );
    assert_eq!(
        values(&cluster, &name),
        everywhere(&cluster, &ours),
        "the refused client's cleanup left quorumlock's keys alone"
    );

    lock.release().await.expect("release");
    assert!(cluster.released(&name, Duration::from_secs(2)).await);
    let won = foreign(&py, client, "lock", &name, &cluster, Some("foreign-token")).await;
    assert!(won.ok, "{} after the release: {won:?}", client.name());
    let token = won.token.expect("token");
    let released = foreign(&py, client, "unlock", &name, &cluster, Some(&token)).await;
    assert!(released.ok, "{released:?}");
    assert!(cluster.released(&name, Duration::from_secs(2)).await);
}

async fn foreign_wrong_token_release_keeps_quorumlock_lock(client: Foreign) {
    let Some(py) = python() else { return };
    let cluster = Cluster::shared(5);
    let redlock = cluster.redlock().await;
    let name = unique(&format!("interop-{}-wrong", client.name()));

    let lock = redlock.try_acquire(&name, TTL).await.expect("acquire");
    let ours = stored_token(&cluster, &name);
    // A token of the right shape but not ours (last digit changed), then
    // an unrelated one.
    let mut wrong = ours.clone();
    let last = wrong.pop();
    wrong.push(if last == Some('0') { '1' } else { '0' });
    assert_ne!(wrong, ours);
    for token in [wrong.as_str(), "x"] {
        let reply = foreign(&py, client, "unlock", &name, &cluster, Some(token)).await;
        // redlock-py reports nothing; aioredlock says it could not unset.
        if let Foreign::Aioredlock = client {
            assert!(!reply.ok, "aioredlock reports the mismatch: {reply:?}");
        }
        let _ = reply.error;
        assert_eq!(
            values(&cluster, &name),
            everywhere(&cluster, &ours),
            "{}'s release with token {token:?} freed quorumlock's lock",
            client.name()
        );
    }
    let left = lock.extend(TTL).await.expect("still ours: extend succeeds");
    assert!(left > Duration::ZERO);
    lock.release().await.expect("release");
    assert!(cluster.released(&name, Duration::from_secs(2)).await);
}

async fn quorumlock_release_never_deletes_foreign_lock(client: Foreign) {
    let Some(py) = python() else { return };
    let cluster = Cluster::shared(5);
    let redlock = cluster.redlock().await;
    let name = unique(&format!("interop-{}-stale", client.name()));

    let lock = redlock.try_acquire(&name, TTL).await.expect("acquire");
    assert!(
        cluster
            .held_on(&name, cluster.len(), Duration::from_secs(5))
            .await
    );
    // quorumlock's keys vanish as if their TTL had passed (the test cannot
    // wait for a real expiry without a long sleep); the other client takes
    // the free lock; then quorumlock's stale guard is released.
    for i in 0..cluster.len() {
        let _: i64 = cluster.exec(i, redis::cmd("DEL").arg(&name));
    }
    let won = foreign(&py, client, "lock", &name, &cluster, Some("foreign-token")).await;
    assert!(won.ok, "{} on the free lock: {won:?}", client.name());
    let theirs = won.token.expect("token");
    let _ = lock.release().await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        values(&cluster, &name),
        everywhere(&cluster, &theirs),
        "quorumlock's release deleted {}'s lock",
        client.name()
    );
    let released = foreign(&py, client, "unlock", &name, &cluster, Some(&theirs)).await;
    assert!(released.ok, "{released:?}");
    assert!(cluster.released(&name, Duration::from_secs(2)).await);
}

macro_rules! both_clients {
    ($($scenario:ident),* $(,)?) => {
        mod redlock_py {
            $(
                #[tokio::test]
                async fn $scenario() {
                    super::$scenario(super::Foreign::RedlockPy).await;
                }
            )*
        }
        mod aioredlock {
            $(
                #[tokio::test]
                async fn $scenario() {
                    super::$scenario(super::Foreign::Aioredlock).await;
                }
            )*
        }
    };
}

both_clients!(
    foreign_holder_refuses_quorumlock,
    quorumlock_holder_refuses_foreign_until_released,
    foreign_wrong_token_release_keeps_quorumlock_lock,
    quorumlock_release_never_deletes_foreign_lock,
);
