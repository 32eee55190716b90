//! What the CLI's test files share: the binary on a cluster's nodes, its
//! output, bounded waits for a process, and the processes of a test found
//! by a marker in their command line. Each test file uses a part of it.
#![allow(dead_code)]

use quorumlock_testkit as support;

use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::Cluster;

pub const BIN: &str = env!("CARGO_BIN_EXE_quorumlock");

pub fn quorumlock(cluster: &Cluster) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.env("QUORUMLOCK_NODES", cluster.urls().join(","))
        .args(["--node-timeout", "100ms"])
        .stdin(Stdio::null());
    cmd
}

pub fn output(mut cmd: Command) -> Output {
    cmd.output().expect("run quorumlock")
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

pub fn wait_within(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

pub fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .args([sig, "--", &pid.to_string()])
        .status();
}

/// Processes whose command line contains `marker` (zombies have none).
pub fn with_marker(marker: &str) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            String::from_utf8_lossy(&cmdline)
                .contains(marker)
                .then_some(pid)
        })
        .collect()
}

/// Waits (bounded) until no process carries `marker`; kills any left so
/// that a failing test leaves nothing behind.
pub fn none_left(marker: &str, limit: Duration) -> bool {
    let gone = support::block_on_eventually(limit, || with_marker(marker).is_empty());
    for pid in with_marker(marker) {
        signal(pid, "-KILL");
    }
    gone
}

/// A unique `sleep` duration: the marker of one test's processes.
pub fn sleep_marker() -> String {
    format!("300.{:09}", rand::random::<u32>())
}

pub fn json(out: &Output) -> Value {
    let stdout = text(&out.stdout);
    assert_eq!(stdout.lines().count(), 1, "one JSON line: {stdout:?}");
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{stdout:?}: {e}"))
}

/// Runs `delete` every 100 ms until `child` exits (at most 15 s; a
/// renewal that lands between two deletions repairs them, so they are
/// repeated until one renewal meets them all), then asserts that it ended
/// as a lost lock ends: exit 79, `banner` on stderr, and no process of
/// `marker` left.
pub fn lost_under_deletions(
    child: &mut Child,
    mut delete: impl FnMut(),
    banner: &str,
    marker: &str,
) {
    let until = Instant::now() + Duration::from_secs(15);
    while Instant::now() < until && child.try_wait().expect("try_wait").is_none() {
        delete();
        std::thread::sleep(Duration::from_millis(100));
    }
    let status = wait_within(child, Duration::from_secs(5));
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
    }
    assert_eq!(status.and_then(|s| s.code()), Some(79), "{stderr}");
    assert!(stderr.contains(banner), "{stderr}");
    assert!(
        none_left(marker, Duration::from_secs(3)),
        "the background sleeps died too"
    );
}
