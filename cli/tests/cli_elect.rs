//! `quorumlock elect` and `quorumlock leader` against real nodes: CMD runs
//! only while its process leads, with the epoch in `QUORUMLOCK_EPOCH`; a
//! second campaign waits its turn and gets a larger epoch; a lost
//! leadership ends CMD and everything it started as a lost lock does;
//! `leader` shows the epoch and value, `--json` with its fields, and the
//! statuses for no leader and no quorum.

use quorumlock_testkit as support;

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::{json, output, quorumlock, sleep_marker, text, wait_within, with_marker};
use support::{unique, Cluster};

/// The leadership lock of the election `name`.
fn leadership_key(name: &str) -> Vec<u8> {
    format!("quorumlock:election:{{{name}}}").into_bytes()
}

/// A shell command that writes `QUORUMLOCK_EPOCH` to `file` (which
/// appears whole: written aside, then renamed).
fn write_epoch(file: &std::path::Path) -> String {
    format!(
        "echo $QUORUMLOCK_EPOCH > {0}.tmp && mv {0}.tmp {0}",
        file.display()
    )
}

/// A shell script that writes `QUORUMLOCK_EPOCH` to `file`, then waits
/// (at most 60 s) for `go` to exist.
fn lead_until(file: &std::path::Path, go: &std::path::Path) -> String {
    format!(
        "{}; i=0; while [ ! -e {} ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done",
        write_epoch(file),
        go.display()
    )
}

fn epoch_in(file: &std::path::Path) -> u64 {
    std::fs::read_to_string(file)
        .expect("the command ran")
        .trim()
        .parse()
        .expect("QUORUMLOCK_EPOCH is a number")
}

/// The first `elect` runs CMD with its epoch and shows in `leader` (text
/// and JSON); a second `elect` of the same name waits while the first
/// leads (and `--no-wait` exits 75), runs once the first resigned, with a
/// larger epoch; then nobody leads (`leader` exits 1) and no key is held.
#[test]
fn elect_runs_the_command_while_it_leads_and_the_next_one_after_it() {
    let cluster = Cluster::shared(3);
    let name = unique("cli-elect");
    let dir = tempfile::tempdir().expect("dir");
    let (first_epoch, second_epoch, go) = (
        dir.path().join("first"),
        dir.path().join("second"),
        dir.path().join("go"),
    );
    let mut first = quorumlock(&cluster);
    first
        .args(["elect", "--value", "host-a", &name, "--", "sh", "-c"])
        .arg(lead_until(&first_epoch, &go));
    let mut first = first.stderr(Stdio::null()).spawn().expect("first");
    assert!(
        support::block_on_eventually(Duration::from_secs(20), || first_epoch.exists()),
        "the first campaign leads and runs its command"
    );
    let a = epoch_in(&first_epoch);
    assert!(a >= 1);

    let mut cmd = quorumlock(&cluster);
    cmd.args(["leader", &name]);
    let out = output(cmd);
    let shown = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(
        shown.contains(&format!("epoch {a} by \"host-a\"")),
        "{shown}"
    );
    let mut cmd = quorumlock(&cluster);
    cmd.args(["leader", "--json", &name]);
    let out = output(cmd);
    let v = json(&out);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        v,
        serde_json::json!({"version": 1, "election": name, "leader": true, "epoch": a,
                           "value": "host-a", "error": null, "exit_code": 0})
    );

    let mut busy = quorumlock(&cluster);
    busy.args(["elect", "--no-wait", &name, "--", "true"]);
    let out = output(busy);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(75), "{stderr}");
    assert!(stderr.contains("another process leads"), "{stderr}");
    // Named by the election, the leader's value and its epoch.
    assert!(
        stderr.contains(&format!(
            "election {name:?} is led by \"host-a\" (epoch {a})"
        )),
        "{stderr}"
    );

    let mut second = quorumlock(&cluster);
    second
        .args(["elect", "--value", "host-b", &name, "--", "sh", "-c"])
        .arg(format!("{}; exit 3", write_epoch(&second_epoch)));
    let mut second = second.stderr(Stdio::null()).spawn().expect("second");
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        !second_epoch.exists() && second.try_wait().expect("try_wait").is_none(),
        "the second campaign waits while the first leads"
    );
    std::fs::write(&go, b"").expect("go");
    let status = wait_within(&mut first, Duration::from_secs(20));
    assert_eq!(status.and_then(|s| s.code()), Some(0), "CMD's status");
    let status = wait_within(&mut second, Duration::from_secs(30));
    assert_eq!(status.and_then(|s| s.code()), Some(3), "the second ran");
    assert!(epoch_in(&second_epoch) > a, "epochs increase");

    let mut cmd = quorumlock(&cluster);
    cmd.args(["leader", &name]);
    let out = output(cmd);
    assert_eq!(out.status.code(), Some(1), "no leader → 1");
    assert!(text(&out.stdout).contains("has no leader"));
    let mut cmd = quorumlock(&cluster);
    cmd.args(["leader", "--json", &name]);
    let out = output(cmd);
    let v = json(&out);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        (&v["leader"], &v["epoch"], &v["value"], &v["exit_code"]),
        (
            &serde_json::json!(false),
            &serde_json::Value::Null,
            &serde_json::Value::Null,
            &serde_json::json!(1)
        ),
        "{v}"
    );
    assert!(
        support::block_on_eventually(Duration::from_secs(3), || cluster
            .holders(&leadership_key(&name))
            == 0),
        "resigned on every node"
    );
}

/// The leadership lost (its lock deleted on a majority, with a short TTL):
/// CMD and its background children are ended and `elect` exits 79, as
/// `run` does for a lost lock; nobody leads afterwards.
#[test]
fn a_lost_leadership_stops_the_command_and_everything_it_started() {
    let cluster = Cluster::local(5);
    let name = unique("cli-elect-lost");
    let marker = sleep_marker();
    let mut cmd = quorumlock(&cluster);
    cmd.args([
        "elect", "--ttl", "1s", "--grace", "1s", &name, "--", "sh", "-c",
    ])
    .arg(format!("sleep {marker} & sleep {marker} & wait"));
    let mut child = cmd.stderr(Stdio::piped()).spawn().expect("spawn");
    let key = leadership_key(&name);
    assert!(
        support::block_on_eventually(Duration::from_secs(20), || cluster.holders(&key) == 5),
        "leading on every node"
    );
    assert!(support::block_on_eventually(Duration::from_secs(5), || {
        with_marker(&marker).len() >= 2
    }));
    let delete = || {
        for i in 0..3 {
            let _: () = cluster.exec(i, redis::cmd("DEL").arg(&key));
        }
    };
    common::lost_under_deletions(&mut child, delete, "LEADERSHIP LOST", &marker);
    let mut cmd = quorumlock(&cluster);
    cmd.args(["leader", &name]);
    assert_eq!(output(cmd).status.code(), Some(1), "nobody leads");
}

/// `leader` when no quorum answers: 69, and `--json` says so with the
/// error; an empty name is a usage error (2).
#[test]
fn leader_without_a_quorum_exits_69_and_an_empty_name_2() {
    let cluster = Cluster::shared(3);
    let mut cmd = quorumlock(&cluster);
    cmd.env("QUORUMLOCK_NODES", "redis://127.0.0.1:1")
        .args(["leader", "--json", "x"]);
    let out = output(cmd);
    let v = json(&out);
    assert_eq!(out.status.code(), Some(69), "{v}");
    assert_eq!(
        (&v["exit_code"], &v["leader"]),
        (&serde_json::json!(69), &serde_json::json!(false))
    );
    assert!(
        v["error"].as_str().is_some_and(|e| e.contains("refused")),
        "{v}"
    );
    let mut cmd = quorumlock(&cluster);
    cmd.args(["leader", "--resource", ""]);
    let out = output(cmd);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

/// Signals as for `run`: SIGTERM to a campaign still waiting ends it with
/// 143 (the leader unaffected); SIGTERM to the leader reaches its command,
/// whose status `elect` exits with, and the leadership is resigned.
#[test]
fn signals_reach_the_leaders_command_and_end_a_waiting_campaign() {
    let cluster = Cluster::shared(3);
    let name = unique("cli-elect-signal");
    let dir = tempfile::tempdir().expect("dir");
    let ready = dir.path().join("ready");
    let mut leader = quorumlock(&cluster);
    leader.args(["elect", &name, "--", "sh", "-c"]).arg(format!(
        "trap 'exit 9' TERM; touch {}; i=0; while [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done",
        ready.display()
    ));
    let mut leader = leader.stderr(Stdio::null()).spawn().expect("leader");
    assert!(support::block_on_eventually(
        Duration::from_secs(20),
        || ready.exists()
    ));
    let mut waiting = quorumlock(&cluster);
    waiting.args(["elect", &name, "--", "true"]);
    let mut waiting = waiting.stderr(Stdio::null()).spawn().expect("waiting");
    std::thread::sleep(Duration::from_millis(500));
    assert!(waiting.try_wait().expect("try_wait").is_none(), "it waits");
    common::signal(waiting.id(), "-TERM");
    let status = wait_within(&mut waiting, Duration::from_secs(10));
    assert_eq!(status.and_then(|s| s.code()), Some(128 + 15));
    let mut cmd = quorumlock(&cluster);
    cmd.args(["leader", &name]);
    assert_eq!(output(cmd).status.code(), Some(0), "the leader leads on");

    common::signal(leader.id(), "-TERM");
    let status = wait_within(&mut leader, Duration::from_secs(10));
    assert_eq!(status.and_then(|s| s.code()), Some(9), "CMD got SIGTERM");
    let mut cmd = quorumlock(&cluster);
    cmd.args(["leader", &name]);
    assert_eq!(output(cmd).status.code(), Some(1), "resigned");
    assert!(support::block_on_eventually(Duration::from_secs(3), || {
        cluster.holders(&leadership_key(&name)) == 0
    }));
}
