//! Tokens after `fork()`: a process that drew a token (any acquire),
//! dropped its runtime and forked must not draw the same tokens as its
//! child — else the child's refused attempt cleans up with the parent's
//! token, deletes the parent's lock, and the child's next attempt is
//! granted while the parent still holds it (a pre-fork worker model).
//!
//! A real `fork()`, so that the child gets a copy of the parent's memory
//! (a re-executed binary would start with fresh state and prove nothing).
//! The binary has no test harness (`harness = false` in Cargo.toml): the
//! harness runs tests on threads, and a process should fork while it has
//! one thread only, which `main` checks before forking.
//!
//! Negative control: with `src/random.rs`'s draws replaced by rand's
//! thread-local generator (the code before the fix), all three checks
//! below fail: the first tokens after the fork are equal, the child's
//! refused attempt deletes the parent's keys on every node, and the
//! child's next attempt is granted.

use quorumlock_testkit as support;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use quorumlock::{Builder, Redlock};
use support::{unique, Cluster, OneAttempt};

const TTL: Duration = Duration::from_secs(30);
const NODES: usize = 5;
/// How long either side waits for the other.
const PATIENCE: Duration = Duration::from_secs(60);

/// The names both sides use, chosen before the fork.
struct Names {
    parent: String,
    child: String,
    shared: String,
}

fn main() {
    let cluster = Cluster::local(NODES);
    let urls = cluster.urls();
    let names = Names {
        parent: unique("fork-parent"),
        child: unique("fork-child"),
        shared: unique("fork-shared"),
    };

    // A token drawn before the fork, on this thread; then the runtime goes.
    {
        let rt = runtime();
        rt.block_on(async {
            let redlock = client(&urls).await;
            let lock = redlock
                .acquire(unique("fork-before"), TTL)
                .await
                .expect("acquire before the fork");
            lock.release().await.expect("release before the fork");
            let _ = redlock.settle(Duration::from_secs(5)).await;
        });
    }
    wait_for_one_thread();

    let (mut to_child, mut to_parent) = UnixStream::pair().expect("socket pair");
    for end in [&to_child, &to_parent] {
        end.set_read_timeout(Some(PATIENCE)).expect("timeout");
    }
    // SAFETY: the process has one thread (checked above); the child only
    // runs its own code and leaves with `_exit`, never returning here (the
    // parent's `Cluster` must not be dropped twice).
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed: {}", std::io::Error::last_os_error());
    if pid == 0 {
        drop(to_child);
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            child(&urls, &names, &mut to_parent)
        }))
        .unwrap_or(101);
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { libc::_exit(code) }
    }
    drop(to_parent);
    let problems = parent(&cluster, &urls, &names, &mut to_child);
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(waited, pid, "waitpid");
    if !problems.is_empty() || status != 0 {
        eprintln!("{}", cluster.logs());
        panic!(
            "tokens repeat across fork (child exit status {status}):\n  {}",
            problems.join("\n  ")
        );
    }
    println!("fork: parent and child drew distinct tokens; the parent's lock survived the child's attempts");
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

async fn client(urls: &[String]) -> Redlock {
    Builder::new(urls.iter().cloned())
        .node_timeout(Duration::from_millis(100))
        .connect_timeout(Duration::from_millis(500))
        .one_attempt()
        .build()
        .await
        .expect("build")
}

/// Waits (bounded) until the runtime's blocking threads are gone.
fn wait_for_one_thread() {
    let threads = || {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("Threads:"))
                    .and_then(|n| n.trim().parse::<usize>().ok())
            })
            .unwrap_or(0)
    };
    let deadline = Instant::now() + PATIENCE;
    while threads() != 1 {
        assert!(
            Instant::now() < deadline,
            "{} threads before the fork",
            threads()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The parent's side; the problems it saw.
fn parent(
    cluster: &Cluster,
    urls: &[String],
    names: &Names,
    child: &mut UnixStream,
) -> Vec<String> {
    let mut problems = Vec::new();
    let rt = runtime();
    let redlock = rt.block_on(client(urls));
    // 1. Each side takes a lock of its own: the first token after the fork.
    let own = rt
        .block_on(redlock.acquire(&names.parent, TTL))
        .expect("parent's own lock");
    expect(child, b'1');
    let ours = cluster.values(names.parent.as_bytes())[0].clone();
    let theirs = cluster.values(names.child.as_bytes())[0].clone();
    assert!(ours.is_some() && theirs.is_some(), "both locks set");
    if ours == theirs {
        problems.push("parent and child drew the same first token after the fork".into());
    }
    // 2. The parent takes the shared resource; the child tries it twice.
    let shared = rt
        .block_on(redlock.acquire(&names.shared, TTL))
        .expect("parent's shared lock");
    let token = cluster.values(names.shared.as_bytes())[0].clone();
    child.write_all(b"g").expect("tell the child");
    let verdict = read_byte(child);
    let values = cluster.values(names.shared.as_bytes());
    let kept = values.iter().filter(|v| **v == token).count();
    if kept != NODES {
        problems.push(format!(
            "the child's refused attempt deleted the parent's key on {} of {NODES} nodes",
            NODES - kept
        ));
    }
    match verdict {
        b'r' => {}
        b'g' => problems
            .push("the child's second attempt was granted while the parent held the lock".into()),
        other => problems.push(format!("the child failed: {}", other as char)),
    }
    match rt.block_on(shared.is_held_remotely()) {
        Ok(true) => {}
        other => problems.push(format!("the parent's lock is no longer held: {other:?}")),
    }
    if shared.validity().is_zero() {
        problems.push("the parent's lock has no validity left".into());
    }
    rt.block_on(async {
        let _ = shared.release().await;
        let _ = own.release().await;
        let _ = redlock.settle(Duration::from_secs(5)).await;
    });
    problems
}

/// The child's side: its exit status.
fn child(urls: &[String], names: &Names, parent: &mut UnixStream) -> i32 {
    let rt = runtime();
    let redlock = rt.block_on(client(urls));
    let own = rt
        .block_on(redlock.acquire(&names.child, TTL))
        .expect("child's own lock");
    parent.write_all(b"1").expect("tell the parent");
    expect(parent, b'g');
    // Refused: the parent holds it (this attempt's cleanup runs with the
    // token it drew).
    let first = rt.block_on(redlock.try_acquire(&names.shared, TTL));
    let first_refused = first.as_ref().is_err_and(quorumlock::Error::is_contended);
    let second = rt.block_on(redlock.try_acquire(&names.shared, TTL));
    let verdict = match (&first_refused, &second) {
        (true, Err(e)) if e.is_contended() => b'r',
        (true, Ok(_)) => b'g',
        _ => b'?',
    };
    if verdict == b'?' {
        eprintln!("child: first {first:?}, second {second:?}");
    }
    parent.write_all(&[verdict]).expect("tell the parent");
    rt.block_on(async {
        if let Ok(lock) = second {
            let _ = lock.release().await;
        }
        let _ = own.release().await;
        let _ = redlock.settle(Duration::from_secs(5)).await;
    });
    0
}

fn read_byte(from: &mut UnixStream) -> u8 {
    let mut byte = [0u8];
    from.read_exact(&mut byte).expect("the other side answered");
    byte[0]
}

fn expect(from: &mut UnixStream, want: u8) {
    assert_eq!(read_byte(from), want, "unexpected message");
}
