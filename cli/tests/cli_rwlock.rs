//! `quorumlock run --shared` and `quorumlock status --shared` against real
//! nodes: two shared commands run at once, a plain `run` of the resource
//! (the writer) is kept out meanwhile and keeps them out in turn, `status
//! --shared` shows the readers and the writer, and `--shared` with
//! `--permits` or `--fenced` is refused before anything is sent.

use quorumlock_testkit as support;

mod common;

use std::process::Child;
use std::time::Duration;

use common::{json, output, quorumlock, text, wait_within};
use support::{unique, Cluster};

/// What the resource holds while readers do (`read_write.lua`).
const MARKER: &[u8] = b"quorumlock:rwlock:readers";

/// `run --shared` of `name`: writes its mark, waits (at most 10 s) until
/// `peers` marks are there, then holds `hold` seconds more.
fn shared(
    cluster: &Cluster,
    name: &str,
    marks: &std::path::Path,
    peers: usize,
    hold: &str,
) -> Child {
    let script = format!(
        "mkdir {marks}/$$; i=0; while [ $(ls {marks} | wc -l) -lt {peers} ] && [ $i -lt 100 ]; \
         do sleep 0.1; i=$((i+1)); done; sleep {hold}",
        marks = marks.display()
    );
    let mut cmd = quorumlock(cluster);
    cmd.args([
        "run", "--shared", "--wait", "60s", "--quiet", name, "--", "sh", "-c", &script,
    ]);
    cmd.spawn().expect("spawn")
}

#[test]
fn shared_commands_run_together_and_a_plain_run_waits_for_them() {
    let cluster = Cluster::shared(3);
    let dir = tempfile::tempdir().expect("dir");
    let name = unique("cli-rw");
    let readers: Vec<Child> = (0..2)
        .map(|_| shared(&cluster, &name, dir.path(), 2, "2"))
        .collect();
    // Both readers in: each saw the other's mark.
    assert!(support::block_on_eventually(
        Duration::from_secs(30),
        || {
            std::fs::read_dir(dir.path())
                .map(|d| d.count())
                .unwrap_or(0)
                == 2
        }
    ));
    let mut status = quorumlock(&cluster);
    status.args(["status", "--shared", &name]);
    let out = output(status);
    let shown = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(shown.contains("read by 2 readers"), "{shown}");
    assert!(!shown.contains("quorumlock:"), "{shown}");
    let mut status = quorumlock(&cluster);
    status.args(["status", "--shared", "--json", &name]);
    let value = json(&output(status));
    assert_eq!(
        (value["readers"].as_u64(), value["state"].as_str()),
        (Some(2), Some("read"))
    );

    // The writer (a plain run) is kept out while they read...
    let mut writer = quorumlock(&cluster);
    writer.args(["run", "--no-wait", "--quiet", &name, "--", "true"]);
    assert_eq!(output(writer).status.code(), Some(75), "busy while read");
    // ...and gets in once they are done.
    for mut reader in readers {
        let status = wait_within(&mut reader, Duration::from_secs(60));
        assert_eq!(status.and_then(|s| s.code()), Some(0), "{status:?}");
    }
    let mut writer = quorumlock(&cluster);
    writer.args(["run", "--wait", "10s", "--quiet", &name, "--", "sleep", "3"]);
    let mut writer = writer.spawn().expect("spawn");
    // While it writes (its token on every node), a shared run is kept out.
    let written = || {
        let values = cluster.values(name.as_bytes());
        values
            .iter()
            .all(|v| v.as_deref().is_some_and(|v| v != MARKER))
    };
    assert!(support::block_on_eventually(
        Duration::from_secs(10),
        written
    ));
    let mut reader = quorumlock(&cluster);
    reader.args([
        "run",
        "--shared",
        "--no-wait",
        "--quiet",
        &name,
        "--",
        "true",
    ]);
    assert_eq!(output(reader).status.code(), Some(75), "busy while written");
    let status = wait_within(&mut writer, Duration::from_secs(30));
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{status:?}");
    let mut status = quorumlock(&cluster);
    status.args(["status", "--shared", &name]);
    let out = output(status);
    assert_eq!(out.status.code(), Some(1), "free: {}", text(&out.stdout));
}

#[test]
fn shared_with_permits_or_fenced_is_a_usage_error() {
    let cluster = Cluster::shared(3);
    for flags in [
        &["--shared", "--permits", "2"][..],
        &["--shared", "--fenced"],
    ] {
        let mut cmd = quorumlock(&cluster);
        cmd.arg("run").args(flags).args(["r", "--", "true"]);
        assert_eq!(output(cmd).status.code(), Some(2), "{flags:?}");
    }
    let mut cmd = quorumlock(&cluster);
    cmd.args(["status", "--shared", "--permits", "2", "r"]);
    assert_eq!(output(cmd).status.code(), Some(2));
}
