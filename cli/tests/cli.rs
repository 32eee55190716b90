//! The `quorumlock` binary against real nodes: exit statuses, environment,
//! a lost lock killing the command, no overlap between concurrent runs,
//! signal forwarding, usage errors.

use quorumlock_testkit as support;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use support::{unique, Cluster};

const BIN: &str = env!("CARGO_BIN_EXE_quorumlock");

fn quorumlock(cluster: &Cluster) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.env("QUORUMLOCK_NODES", cluster.urls().join(","))
        .args(["--node-timeout", "100ms"]);
    cmd
}

fn output(mut cmd: Command) -> Output {
    cmd.stdin(Stdio::null()).output().expect("run quorumlock")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn run_passes_the_commands_status_and_environment() {
    let cluster = Cluster::shared(5);
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("env");
    let name = unique("cli-env");
    let mut cmd = quorumlock(&cluster);
    cmd.args(["run", "--fenced", &name, "--", "sh", "-c"])
        .arg(format!(
            "echo \"$QUORUMLOCK_RESOURCE $QUORUMLOCK_FENCE $QUORUMLOCK_DEADLINE\" > {}; exit 7",
            file.display()
        ));
    let out = output(cmd);
    assert_eq!(out.status.code(), Some(7), "{}", text(&out.stderr));
    let env = std::fs::read_to_string(&file).expect("child wrote its environment");
    let fields: Vec<&str> = env.split_whitespace().collect();
    assert_eq!(fields[0], name);
    assert!(fields[1].parse::<u64>().expect("fence") >= 1);
    assert!(fields[2].parse::<u128>().expect("deadline in ms") > 1_600_000_000_000);
    assert!(
        support::block_on_eventually(Duration::from_secs(2), || cluster.holders(name.as_bytes())
            == 0),
        "released after the command"
    );
}

#[test]
fn no_wait_on_a_busy_lock_exits_75_and_status_shows_the_holder() {
    let cluster = Cluster::shared(5);
    let name = unique("cli-busy");
    let mut holder = quorumlock(&cluster);
    holder.args(["run", &name, "--", "sleep", "30"]);
    let mut holder = holder.stdin(Stdio::null()).spawn().expect("holder");
    assert!(
        support::block_on_eventually(Duration::from_secs(5), || cluster.holders(name.as_bytes())
            == 5),
        "holder took the lock"
    );

    let start = Instant::now();
    let mut busy = quorumlock(&cluster);
    busy.args(["run", "--no-wait", &name, "--", "true"]);
    let out = output(busy);
    assert_eq!(out.status.code(), Some(75), "{}", text(&out.stderr));
    assert!(start.elapsed() < Duration::from_secs(5));
    assert!(
        text(&out.stderr).contains("lock busy"),
        "{}",
        text(&out.stderr)
    );

    let mut status = quorumlock(&cluster);
    status.args(["status", &name]);
    let out = output(status);
    assert_eq!(out.status.code(), Some(0), "held by a quorum");
    let shown = text(&out.stdout);
    assert_eq!(shown.matches("held by").count(), 6, "{shown}");
    assert!(shown.contains("on 5 of 5 nodes"), "{shown}");

    let mut wait = quorumlock(&cluster);
    wait.args(["run", "--wait", "1500ms", &name, "--", "true"]);
    let out = output(wait);
    assert_eq!(out.status.code(), Some(75), "--wait ran out");
    assert!(
        text(&out.stderr).contains("waiting for the lock"),
        "{}",
        text(&out.stderr)
    );

    nix_kill(holder.id(), "-TERM");
    let status = holder.wait().expect("holder exits");
    assert_eq!(
        status.code(),
        Some(128 + 15),
        "sleep was killed by the forwarded SIGTERM"
    );
    assert!(support::block_on_eventually(Duration::from_secs(2), || {
        output(quorumlock_status(&cluster, &name)).status.code() == Some(1)
    }));
}

fn quorumlock_status(cluster: &Cluster, name: &str) -> Command {
    let mut cmd = quorumlock(cluster);
    cmd.args(["status", name]);
    cmd
}

fn nix_kill(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("kill")
        .success();
    assert!(ok);
}

#[test]
fn a_lost_lock_terminates_the_command_with_status_79() {
    let cluster = Cluster::local(5);
    let dir = tempfile::tempdir().expect("dir");
    let marker = dir.path().join("terminated");
    let name = unique("cli-lost");
    let mut cmd = quorumlock(&cluster);
    cmd.args([
        "run", "--ttl", "900ms", "--grace", "5s", &name, "--", "sh", "-c",
    ])
    .arg(format!(
        "trap 'echo term > {}; kill $!; exit 0' TERM; sleep 30 & wait",
        marker.display()
    ));
    let child = cmd
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    assert!(support::block_on_eventually(Duration::from_secs(5), || {
        cluster.holders(name.as_bytes()) == 5
    }));
    // Force the loss: the keys vanish on a majority (as after a clock jump).
    for i in 0..3 {
        let _: () = cluster.exec(i, redis::cmd("DEL").arg(&name));
    }
    let out = child.wait_with_output().expect("quorumlock exits");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(79), "{stderr}");
    assert!(stderr.contains("LOCK LOST"), "{stderr}");
    assert!(Path::new(&marker).exists(), "the command got SIGTERM");
}

#[test]
fn concurrent_runs_of_one_resource_never_overlap() {
    let cluster = Cluster::shared(5);
    let dir = tempfile::tempdir().expect("dir");
    let log = dir.path().join("stamps");
    let name = unique("cli-serial");
    let script = format!(
        "echo start >> {log}; sleep 0.1; echo end >> {log}",
        log = log.display()
    );
    let runs: Vec<_> = (0..5)
        .map(|_| {
            let mut cmd = quorumlock(&cluster);
            cmd.args([
                "run", "--wait", "60s", "--quiet", &name, "--", "sh", "-c", &script,
            ]);
            cmd.stdin(Stdio::null()).spawn().expect("spawn")
        })
        .collect();
    for mut run in runs {
        assert_eq!(run.wait().expect("wait").code(), Some(0));
    }
    let stamps = std::fs::read_to_string(&log).expect("log");
    let lines: Vec<&str> = stamps.lines().collect();
    assert_eq!(lines.len(), 10, "{stamps}");
    for pair in lines.chunks(2) {
        assert_eq!(pair, ["start", "end"], "overlapping runs:\n{stamps}");
    }
}

#[test]
fn usage_errors_exit_2_and_missing_commands_127() {
    let cluster = Cluster::shared(3);
    let name = unique("cli-usage");
    for args in [
        vec!["run", &name],
        vec!["run", "--ttl", "soon", &name, "--", "true"],
        vec!["run", "--ttl", "1ms", &name, "--", "true"],
        vec!["run", "--wait", "1s", "--no-wait", &name, "--", "true"],
        vec!["frobnicate"],
    ] {
        let mut cmd = quorumlock(&cluster);
        cmd.args(&args);
        let out = output(cmd);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    let mut cmd = Command::new(BIN);
    cmd.env_remove("QUORUMLOCK_NODES")
        .args(["run", &name, "--", "true"]);
    let out = output(cmd);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("QUORUMLOCK_NODES"));

    let mut cmd = quorumlock(&cluster);
    cmd.args(["run", &name, "--", "/no/such/command"]);
    let out = output(cmd);
    assert_eq!(out.status.code(), Some(127), "{}", text(&out.stderr));
    assert!(support::block_on_eventually(Duration::from_secs(2), || {
        cluster.holders(name.as_bytes()) == 0
    }));
}

/// One server under another loopback address or its unix socket, which no
/// name resolution reveals: the server's `run_id` does. Refused before
/// anything is taken (exit 2), for `run` as for `status`.
#[test]
fn one_server_behind_another_loopback_address_or_its_socket_is_refused() {
    let dir = tempfile::tempdir().expect("dir");
    let socket = dir.path().join("redis.sock");
    let twin = Cluster::local_custom(
        1,
        &support::NodeOptions {
            args: vec![
                "--bind".into(),
                "127.0.0.1".into(),
                "127.0.0.2".into(),
                "--unixsocket".into(),
                socket.display().to_string(),
            ],
            ..support::NodeOptions::default()
        },
    );
    let others = Cluster::shared(2);
    let port = twin.url(0).rsplit(':').next().expect("port").to_owned();
    let name = unique("cli-twin");
    for alias in [
        format!("redis://127.0.0.2:{port}"),
        format!("redis+unix://{}", socket.display()),
    ] {
        let nodes = [twin.url(0), alias.clone(), others.url(0), others.url(1)];
        for args in [vec!["run", &name, "--", "true"], vec!["status", &name]] {
            let mut cmd = Command::new(BIN);
            cmd.env("QUORUMLOCK_NODES", nodes.join(","))
                .args(["--node-timeout", "100ms"])
                .args(&args);
            let out = output(cmd);
            let stderr = text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{alias} {args:?}: {stderr}");
            assert!(stderr.contains("same server"), "{stderr}");
        }
    }
    assert_eq!(twin.holders(name.as_bytes()), 0, "nothing taken");
}

/// A node that can evict the lock's keys is refused (exit 2, the node and
/// its policy named) unless `--allow-eviction` accepts it.
#[test]
fn a_node_that_can_evict_keys_is_refused_unless_allowed() {
    let cluster = Cluster::local(1);
    for (name, value) in [
        ("maxmemory", "104857600"),
        ("maxmemory-policy", "volatile-lru"),
    ] {
        let _: () = cluster.exec(0, redis::cmd("CONFIG").arg("SET").arg(name).arg(value));
    }
    let name = unique("cli-evicting");
    let mut cmd = quorumlock(&cluster);
    cmd.args(["run", &name, "--", "true"]);
    let out = output(cmd);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("volatile-lru"), "{stderr}");
    let mut cmd = quorumlock(&cluster);
    cmd.args(["--allow-eviction", "run", &name, "--", "true"]);
    let out = output(cmd);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

/// `--restart-quarantine` reaches the client: with a quarantine longer
/// than any node's uptime no node votes (69, said as such, nothing taken);
/// with a short one the command runs.
#[test]
fn restart_quarantine_keeps_young_nodes_from_voting() {
    let cluster = Cluster::shared(3);
    let name = unique("cli-quarantine");
    let mut cmd = quorumlock(&cluster);
    cmd.args([
        "--restart-quarantine",
        "100y",
        "run",
        "--no-wait",
        &name,
        "--",
        "true",
    ]);
    let out = output(cmd);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(69), "{stderr}");
    assert!(
        stderr.contains("restarted too recently to vote"),
        "{stderr}"
    );
    assert_eq!(cluster.holders(name.as_bytes()), 0, "nothing taken");
    let mut cmd = quorumlock(&cluster);
    cmd.args(["run", "--restart-quarantine", "1ms", &name, "--", "true"]);
    let out = output(cmd);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

/// A `run` that waits out the restart quarantine of freshly started nodes
/// says why it waits, not that the lock "is free" (which it is, every
/// second), and runs once the nodes vote.
#[test]
fn run_waiting_out_a_quarantine_says_so() {
    let cluster = Cluster::local(3);
    let name = unique("cli-quarantine");
    let mut run = quorumlock(&cluster);
    run.args([
        "--restart-quarantine",
        "3s",
        "run",
        "--wait",
        "20s",
        &name,
        "--",
        "true",
    ]);
    let out = output(run);
    let said = text(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(!said.contains("is free"), "{said}");
    assert!(said.contains("restarted too recently to vote"), "{said}");
}
