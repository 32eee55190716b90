//! The read–write lock on real nodes: what a user relies on — readers
//! share and a writer excludes everyone, plain locks of the resource are
//! kept out by readers and writers alike, each reader on its own lease
//! (a crashed reader ends at its TTL, renewing one extends no other), a
//! writer under continuous reading waits a bounded time, typed errors for
//! bad input, and nothing left behind.

use quorumlock_testkit as support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use quorumlock::{Redlock, Retry};
use support::announce::Announcer;
use support::{eventually, unique, Cluster};

const TTL: Duration = Duration::from_secs(10);
/// Upper bound for anything that should happen "soon".
const SOON: Duration = Duration::from_secs(5);

fn readers_key(name: &str) -> String {
    format!("quorumlock:rwlock:{{{name}}}:readers")
}

fn intent_key(name: &str) -> String {
    format!("quorumlock:rwlock:{{{name}}}:intent")
}

/// How many nodes have `key` (of any type).
fn nodes_with(cluster: &Cluster, key: &str) -> usize {
    (0..cluster.len())
        .filter(|&i| cluster.exec::<i64>(i, redis::cmd("EXISTS").arg(key)) == 1)
        .count()
}

/// Waits (bounded) until no node has any key of the read–write lock `name`.
async fn nothing_left(cluster: &Cluster, name: &str) -> bool {
    let keys = [name.to_owned(), readers_key(name), intent_key(name)];
    eventually(SOON, || keys.iter().all(|k| nodes_with(cluster, k) == 0)).await
}

/// One attempt, no retry.
fn once(redlock: &Redlock, name: &str, reader: bool, ttl: Duration) -> quorumlock::RwLockRequest {
    let request = match reader {
        true => redlock.read(name, ttl),
        false => redlock.write(name, ttl),
    };
    request.retry(Retry::Times(0))
}

/// One attempt at `name`'s side, which another holder keeps out: the
/// error, asserted contended (not an outage).
async fn refused(redlock: &Redlock, name: &str, reader: bool, what: &str) -> quorumlock::Error {
    let err = once(redlock, name, reader, TTL)
        .acquire()
        .await
        .expect_err(what);
    assert!(err.is_contended(), "{what}: {err}");
    err
}

#[tokio::test]
async fn readers_share_and_a_writer_excludes_everyone() {
    let cluster = Cluster::shared(5);
    let redlock = cluster.redlock().await;
    let name = unique("rw");
    let a = once(&redlock, &name, true, TTL).acquire().await.expect("a");
    let b = once(&redlock, &name, true, TTL).acquire().await.expect("b");
    refused(&redlock, &name, false, "writer").await;
    a.release().await.unwrap();
    b.release().await.unwrap();
    // The refused writer's intent mark keeps new readers out until a
    // writer is in.
    refused(&redlock, &name, true, "intent").await;
    let w = redlock
        .write(&name, TTL)
        .fenced()
        .acquire()
        .await
        .expect("w");
    for reader in [true, false] {
        refused(&redlock, &name, reader, "held").await;
    }
    let first = w.fence().expect("fenced");
    w.release().await.unwrap();
    let r = once(&redlock, &name, true, TTL)
        .acquire()
        .await
        .expect("reader after writer");
    r.release().await.unwrap();
    let w = once(&redlock, &name, false, TTL)
        .fenced()
        .acquire()
        .await
        .expect("w2");
    assert!(
        w.fence().expect("fenced") > first,
        "writers are ordered by token"
    );
    w.release().await.unwrap();
    assert!(nothing_left(&cluster, &name).await);
}

#[tokio::test]
async fn a_plain_lock_is_kept_out_by_readers_and_by_a_writer() {
    let cluster = Cluster::shared(5);
    let redlock = cluster.redlock().await;
    let name = unique("rw-plain");
    let plain = || redlock.lock(&name, TTL).retry(Retry::Times(0)).acquire();
    let reader = once(&redlock, &name, true, TTL)
        .acquire()
        .await
        .expect("reader");
    let err = plain().await.expect_err("plain lock beside a reader");
    assert!(err.is_contended(), "{err}");
    // What any Redlock client sends: SET NX fails on every node.
    assert!(cluster.held_on(&name, 5, SOON).await);
    for i in 0..cluster.len() {
        let set: Option<String> = cluster.exec(i, redis::cmd("SET").arg(&name).arg("x").arg("NX"));
        assert_eq!(set, None, "node {i}");
    }
    reader.release().await.unwrap();
    let writer = once(&redlock, &name, false, TTL)
        .acquire()
        .await
        .expect("writer");
    let err = plain().await.expect_err("plain lock beside a writer");
    assert!(err.is_contended(), "{err}");
    writer.release().await.unwrap();
    // And a plain lock keeps both sides out.
    let lock = plain().await.expect("plain lock");
    for reader in [true, false] {
        refused(&redlock, &name, reader, "held").await;
    }
    lock.release().await.unwrap();
    assert!(nothing_left(&cluster, &name).await);
}

#[tokio::test]
async fn a_crashed_reader_ends_at_its_own_ttl_and_renewing_one_extends_no_other() {
    let cluster = Cluster::shared(5);
    let redlock = cluster.redlock().await;
    let name = unique("rw-lease");
    let short = Duration::from_secs(2);
    // `crashed` never releases nor renews (its process died).
    let crashed = once(&redlock, &name, true, short)
        .acquire()
        .await
        .expect("crashed");
    let crashed_prefix = crashed.token_prefix().to_owned();
    std::mem::forget(crashed);
    let renewed = once(&redlock, &name, true, short)
        .acquire()
        .await
        .expect("renewed");
    let prefix = renewed.token_prefix().to_owned();
    // Renewed past the crashed reader's TTL, twice.
    for _ in 0..2 {
        tokio::time::sleep(Duration::from_millis(800)).await;
        renewed
            .extend(Duration::from_secs(30))
            .await
            .expect("extend");
    }
    // The crashed reader's entry is gone at its TTL on every node; the
    // renewed one's is all that is left, and the resource's key follows it.
    // (An entry is live while its score, the server time it ends at, is
    // ahead of the server's clock.)
    let only_renewed = || {
        (0..cluster.len()).all(|i| {
            let (secs, micros): (u64, u64) = cluster.exec(i, &redis::cmd("TIME"));
            let now = secs * 1000 + micros / 1000;
            let members: Vec<String> = cluster.exec(
                i,
                redis::cmd("ZRANGEBYSCORE")
                    .arg(readers_key(&name))
                    .arg(format!("({now}"))
                    .arg("+inf"),
            );
            members.len() == 1 && members[0].starts_with(&prefix)
        })
    };
    assert!(
        eventually(SOON, only_renewed).await,
        "only the renewed reader is left"
    );
    assert!(!crashed_prefix.is_empty());
    for i in 0..cluster.len() {
        let pttl: i64 = cluster.exec(i, redis::cmd("PTTL").arg(&name));
        assert!(
            pttl > 20_000,
            "node {i}: the marker follows the renewed reader ({pttl} ms)"
        );
    }
    refused(&redlock, &name, false, "reader holds").await;
    renewed.release().await.unwrap();
    // The crashed reader keeps nobody out: the writer is in at once.
    let writer = once(&redlock, &name, false, TTL)
        .acquire()
        .await
        .expect("writer");
    writer.release().await.unwrap();
    assert!(nothing_left(&cluster, &name).await);
}

#[tokio::test]
async fn a_reader_renews_in_the_background_and_runs_work() {
    let cluster = Cluster::shared(5);
    let redlock = cluster.redlock().await;
    let name = unique("rw-run");
    let ttl = Duration::from_secs(1);
    let seen = redlock
        .read(&name, ttl)
        .run(|signal| async move {
            // Held past its TTL by renewal.
            tokio::time::sleep(Duration::from_millis(2500)).await;
            !signal.is_fired()
        })
        .await
        .expect("run");
    assert!(seen, "renewed while the work ran");
    let wrote = redlock
        .write(&name, ttl)
        .run(|_| async move { 7 })
        .await
        .expect("write run");
    assert_eq!(wrote, 7);
    assert!(nothing_left(&cluster, &name).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_under_sixteen_cycling_readers_waits_at_most_about_one_reader_ttl() {
    // 16 readers on 4 clients take and release the read side back to back.
    // A writer's wait is bounded by the readers that hold when it arrives
    // (one reader TTL at most, here each holds far less) plus the hand-off:
    // its intent mark keeps new readers out. Asserted with a generous
    // factor; without the mark the readers' entries overlap without end
    // and the writer waits out its whole retry limit.
    const READERS: usize = 16;
    let reader_ttl = Duration::from_secs(2);
    let cluster = Cluster::shared(5);
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(cluster.redlock().await);
    }
    let name = unique("rw-starve");
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for t in 0..READERS {
        let (redlock, name) = (clients[t % clients.len()].clone(), name.clone());
        let (stop, reads) = (stop.clone(), reads.clone());
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let read = redlock
                    .read(&name, reader_ttl)
                    .retry(Retry::Until(Duration::from_secs(60)));
                if let Ok(reader) = read.acquire().await {
                    reads.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    let _ = reader.release().await;
                }
            }
        }));
    }
    // Reading continuously before the writer arrives.
    assert!(eventually(SOON * 2, || reads.load(Ordering::Relaxed) >= 3 * READERS).await);
    let start = Instant::now();
    let writer = clients[0]
        .write(&name, TTL)
        .retry(Retry::Until(Duration::from_secs(60)))
        .acquire()
        .await
        .expect("the writer is not starved");
    let waited = start.elapsed();
    let reads_then = reads.load(Ordering::Relaxed);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        reads.load(Ordering::Relaxed),
        reads_then,
        "no reader while the writer holds"
    );
    writer.release().await.unwrap();
    // The readers go on after the writer.
    assert!(eventually(SOON, || reads.load(Ordering::Relaxed) > reads_then).await);
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.unwrap();
    }
    let bound = reader_ttl + Duration::from_secs(1);
    eprintln!("writer waited {waited:?} under {READERS} readers (bound {bound:?})");
    assert!(waited < bound * 3, "waited {waited:?}, bound {bound:?}");
    assert!(nothing_left(&cluster, &name).await);
}

/// A reader with a count of retries hears a writer's release every 20 ms,
/// as under writers taking the write side back to back, and finds a
/// writer in each time (one writer keeps it; the test announces the
/// releases on the readers' channel). Each retry still comes at most one
/// retry delay (200 ms here) after the attempt before: with 3 retries it
/// is refused within about 3 × (200 ms + an attempt), bounded here at
/// 8 s, about ten times that.
#[tokio::test]
async fn a_reader_with_a_retry_count_spends_it_under_a_stream_of_writers() {
    const RETRIES: u32 = 3;
    let cluster = Cluster::shared(5);
    let redlock = cluster.redlock().await;
    let name = unique("rw-count");
    let writer = once(&redlock, &name, false, TTL).acquire().await;
    let writer = writer.expect("writer");
    let channel = format!("quorumlock:rwlock:{{{name}}}");
    let releases = Announcer::start(&cluster, channel.as_bytes(), Duration::from_millis(20)).await;
    let delay = Duration::from_millis(200);
    let reader = cluster.builder().retry_delay(delay, delay).build().await;
    let read = reader.expect("build").read(&name, TTL);
    let acquire = read.retry(Retry::Times(RETRIES)).acquire();
    let outcome = tokio::time::timeout(Duration::from_secs(8), acquire).await;
    let heard = releases.stop().await;
    writer.release().await.expect("release");
    match outcome {
        Ok(Err(quorumlock::Error::Contended { attempts, .. })) => {
            assert_eq!(attempts, RETRIES + 1)
        }
        Ok(other) => panic!("{other:?}"),
        Err(_) => panic!("still waiting after 8 s with {RETRIES} retries ({heard} releases)"),
    }
    assert!(nothing_left(&cluster, &name).await);
}

#[tokio::test]
async fn bad_input_is_a_typed_error_and_sends_nothing() {
    let cluster = Cluster::shared(5);
    let redlock = cluster.redlock().await;
    let name = unique("rw-bad");
    let fenced_read = redlock
        .read(&name, TTL)
        .fenced()
        .acquire()
        .await
        .unwrap_err();
    assert!(fenced_read.is_invalid_input(), "{fenced_read}");
    for bad in ["", "quorumlock:rwlock:{x}:readers", "quorumlock:fence:x"] {
        for reader in [true, false] {
            let err = once(&redlock, bad, reader, TTL)
                .acquire()
                .await
                .unwrap_err();
            assert!(err.is_invalid_input(), "{bad:?}: {err}");
        }
    }
    let err = redlock
        .write(&name, Duration::ZERO)
        .acquire()
        .await
        .unwrap_err();
    assert!(err.is_invalid_input(), "{err}");
    assert!(nothing_left(&cluster, &name).await);
}

#[tokio::test]
async fn status_shows_the_readers_and_the_writer_without_internal_keys() {
    let cluster = Cluster::shared(5);
    let redlock = cluster.redlock().await;
    let name = unique("rw-status");
    let a = once(&redlock, &name, true, TTL).acquire().await.expect("a");
    let b = once(&redlock, &name, true, TTL).acquire().await.expect("b");
    let read = || async {
        let status = redlock.rwlock_status(&name).await.expect("status");
        let shown = status.to_string();
        assert!(!shown.contains("quorumlock:"), "{shown}");
        (status, shown)
    };
    // Every node's entries are in once the last SET arrived.
    assert!(cluster.held_on(&name, 5, SOON).await);
    let (status, shown) = read().await;
    assert_eq!(status.readers_held(), 2, "{shown}");
    assert!(!status.writer.held_by_quorum(), "{shown}");
    assert!(shown.contains("read by 2 readers"), "{shown}");
    a.release().await.unwrap();
    b.release().await.unwrap();
    let writer = once(&redlock, &name, false, TTL)
        .acquire()
        .await
        .expect("writer");
    let (status, shown) = read().await;
    assert_eq!(status.readers_held(), 0, "{shown}");
    assert_eq!(
        status.writer.leading_holder().map(|(p, _)| p.to_owned()),
        Some(writer.token_prefix().to_owned()),
        "{shown}"
    );
    assert!(shown.contains("written by"), "{shown}");
    writer.release().await.unwrap();
    let (_, shown) = read().await;
    assert!(shown.ends_with("is free"), "{shown}");
    let err = redlock.rwlock_status("").await.unwrap_err();
    assert!(err.is_invalid_input(), "{err}");
}

#[tokio::test]
async fn a_name_and_the_same_name_in_braces_are_two_read_write_locks() {
    // `x` has no hash tag, `{x}` has one: the same slot on a cluster, two
    // resources all the same, down to the keys beside them.
    let cluster = Cluster::shared(5);
    let redlock = cluster.redlock().await;
    let plain = unique("rw-braces");
    for (a, b) in [
        (plain.clone(), format!("{{{plain}}}")),
        (format!("{plain}}}b"), format!("{{{plain}}}b}}")),
    ] {
        let reader = once(&redlock, &a, true, TTL).acquire().await;
        let reader = reader.expect("reader");
        let status = redlock.rwlock_status(&b).await.expect("status");
        assert_eq!(status.readers_held(), 0, "{a} is read, not {b}: {status}");
        let writer = once(&redlock, &b, false, TTL).fenced().acquire().await;
        let writer = writer.unwrap_or_else(|e| panic!("a reader of {a} keeps out {b}: {e}"));
        writer.release().await.expect("release");
        reader.release().await.expect("release");
        assert!(nothing_left(&cluster, &a).await);
    }
}

/// The reader entries on node `i` whose token starts with `prefix`.
fn entries_of(cluster: &Cluster, i: usize, name: &str, prefix: &str) -> Vec<String> {
    let members: Vec<String> = cluster.exec(
        i,
        redis::cmd("ZRANGE").arg(readers_key(name)).arg(0).arg(-1),
    );
    members
        .into_iter()
        .filter(|m| m.starts_with(prefix))
        .collect()
}

#[tokio::test]
async fn renewal_puts_back_a_readers_lost_entry() {
    // A reader's entry lost on two of five nodes (a restart without
    // persistence, say) is put back by its next extension, as a lock's key
    // is (docs/repair.md): it survives two more node losses.
    let cluster = Cluster::shared(5);
    let redlock = cluster.redlock().await;
    let name = unique("rw-repair");
    let reader = once(&redlock, &name, true, TTL)
        .acquire()
        .await
        .expect("reader");
    let prefix = reader.token_prefix().to_owned();
    let on_every_node =
        || (0..cluster.len()).all(|i| entries_of(&cluster, i, &name, &prefix).len() == 1);
    assert!(eventually(SOON, on_every_node).await);
    for i in 0..2 {
        for member in entries_of(&cluster, i, &name, &prefix) {
            let _: i64 = cluster.exec(i, redis::cmd("ZREM").arg(readers_key(&name)).arg(member));
        }
    }
    assert!(!on_every_node());
    reader.extend(TTL).await.expect("extend on three nodes");
    assert!(
        eventually(SOON, on_every_node).await,
        "the entry is back on every node"
    );
    reader.release().await.unwrap();
    assert!(nothing_left(&cluster, &name).await);
}

#[tokio::test]
async fn a_writer_that_stopped_waiting_keeps_new_readers_out_only_briefly() {
    // Its intent mark has a lease of its own: readers enter again once it
    // lapses (2 s), with no writer ever granted.
    let cluster = Cluster::shared(5);
    let redlock = cluster.redlock().await;
    let name = unique("rw-intent");
    let reader = once(&redlock, &name, true, TTL)
        .acquire()
        .await
        .expect("reader");
    refused(&redlock, &name, false, "writer").await;
    reader.release().await.unwrap();
    refused(&redlock, &name, true, "intent").await;
    let start = Instant::now();
    let reader = redlock
        .read(&name, TTL)
        .retry(Retry::Until(Duration::from_secs(20)))
        .acquire()
        .await
        .expect("a reader once the mark lapsed");
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
    reader.release().await.unwrap();
    assert!(nothing_left(&cluster, &name).await);
}
