//! The command-line tool on members that are not one server:
//! `QUORUMLOCK_NODES` holding a Sentinel group, a Redis Cluster and a
//! plain server (each member's own host list kept together), a fenced
//! `run` and `status` across them, and such members refused without
//! durable votes (a usage error, saying which option) except by the
//! read-only commands, `status` and `leader`.

use quorumlock_testkit as support;

mod common;

use std::process::{Command, Stdio};

use common::{output, text, BIN};
use support::{unique, GroupOptions, SentinelGroup, ShardedCluster};

fn quorumlock(members: &str) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.env("QUORUMLOCK_NODES", members)
        .args(["--node-timeout", "300ms"])
        .stdin(Stdio::null());
    cmd
}

#[test]
fn run_and_status_on_a_sentinel_group_a_cluster_and_a_server() {
    let group = SentinelGroup::start("cli", &GroupOptions::default());
    let cluster = ShardedCluster::start(2, 1);
    let plain = support::Cluster::local(1);
    let members = format!("{},{},{}", group.url(), cluster.url(), plain.url(0));
    let name = unique("cli-members");

    let refused = output({
        let mut cmd = quorumlock(&members);
        cmd.args(["run", &name, "--", "true"]);
        cmd
    });
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused.stderr));
    let said = text(&refused.stderr);
    assert!(said.contains("--durable-replicas"), "{said}");

    let ran = output({
        let mut cmd = quorumlock(&members);
        cmd.args([
            "--durable-replicas",
            "1",
            "run",
            "--fenced",
            "--wait",
            "10s",
            &name,
        ])
        .args(["--", "sh", "-c", "echo fence=$QUORUMLOCK_FENCE"]);
        cmd
    });
    let stdout = text(&ran.stdout);
    assert!(
        ran.status.success() && stdout.contains("fence=") && !stdout.contains("fence=\n"),
        "{stdout}{}\n{}{}",
        text(&ran.stderr),
        group.logs(),
        cluster.logs()
    );
    let status = output({
        let mut cmd = quorumlock(&members);
        cmd.args(["--durable-replicas", "1", "status", &name]);
        cmd
    });
    let shown = text(&status.stdout) + &text(&status.stderr);
    assert!(
        shown.contains("sentinel://") && shown.contains("cluster://"),
        "{shown}"
    );
    // The read-only commands take no vote: no write-safety flag needed.
    for args in [vec!["status", &name], vec!["leader", &name]] {
        let read = output({
            let mut cmd = quorumlock(&members);
            cmd.args(&args);
            cmd
        });
        let said = text(&read.stdout) + &text(&read.stderr);
        assert!(
            matches!(read.status.code(), Some(0 | 1)) && !said.contains("--durable-replicas"),
            "{args:?}: {:?} {said}",
            read.status.code()
        );
    }
}
