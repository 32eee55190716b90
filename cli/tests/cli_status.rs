//! `quorumlock status --json` (stable fields, README "status --json") and
//! `quorumlock completions SHELL`, on real nodes.

use quorumlock_testkit as support;

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;
use support::{unique, Cluster};

const BIN: &str = env!("CARGO_BIN_EXE_quorumlock");
const TTL: Duration = Duration::from_secs(10);

fn run(cluster: Option<&Cluster>, args: &[&str]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.env_remove("QUORUMLOCK_NODES");
    if let Some(cluster) = cluster {
        cmd.env("QUORUMLOCK_NODES", cluster.urls().join(","))
            .args(["--node-timeout", "200ms"]);
    }
    cmd.args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run quorumlock")
}

fn json(out: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout.lines().count(),
        1,
        "one JSON line on stdout, got {stdout:?} (stderr {})",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{stdout:?}: {e}"))
}

/// Every documented field, with its type.
fn assert_schema(v: &Value, nodes: usize) {
    assert_eq!(v["version"], 1);
    assert!(v["resource"].is_string());
    assert!(v["state"].is_string());
    assert!(v["held"].is_boolean());
    assert!(v["holder"].is_string() || v["holder"].is_null());
    assert!(v["holder_nodes"].is_u64());
    assert!(v["quorum"].is_u64());
    assert_eq!(v["nodes_total"], nodes);
    assert!(v["expires_in_ms"].is_u64() || v["expires_in_ms"].is_null());
    assert!(v["exit_code"].is_u64());
    let list = v["nodes"].as_array().expect("nodes is an array");
    assert_eq!(list.len(), nodes);
    for n in list {
        assert!(n["node"].is_string());
        assert!(["free", "held", "error"].contains(&n["state"].as_str().expect("state")));
        assert!(n["holder"].is_string() || n["holder"].is_null());
        assert!(n["expires_in_ms"].is_u64() || n["expires_in_ms"].is_null());
        assert!(n["error"].is_object() || n["error"].is_null());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_json_reports_free_then_held_with_the_holder_and_ttl() {
    let cluster = Cluster::shared(3);
    let name = unique("cli-json");

    let out = run(Some(&cluster), &["status", "--json", &name]);
    let v = json(&out);
    assert_schema(&v, 3);
    assert_eq!(out.status.code(), Some(1), "not held → 1");
    assert_eq!(v["exit_code"], 1);
    assert_eq!(v["resource"], name.as_str());
    assert_eq!(
        (v["state"].as_str(), v["held"].as_bool()),
        (Some("free"), Some(false))
    );
    assert!(v["holder"].is_null() && v["expires_in_ms"].is_null());
    assert_eq!(
        (v["quorum"].as_u64(), v["holder_nodes"].as_u64()),
        (Some(2), Some(0))
    );
    assert!(v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .all(|n| n["state"] == "free"));

    let redlock = cluster.redlock().await;
    let lock = redlock.acquire(&name, TTL).await.expect("acquire");
    let out = run(Some(&cluster), &["status", "--json", &name]);
    let v = json(&out);
    assert_schema(&v, 3);
    assert_eq!(out.status.code(), Some(0), "held → 0");
    assert_eq!(
        (v["state"].as_str(), v["held"].as_bool()),
        (Some("held"), Some(true))
    );
    assert_eq!(v["holder"], lock.token_prefix());
    assert_eq!(v["holder_nodes"], 3);
    let left = v["expires_in_ms"].as_u64().expect("a TTL");
    assert!(left > 0 && left <= 10_000, "{left}");
    for n in v["nodes"].as_array().unwrap() {
        assert_eq!(
            (n["state"].as_str(), n["holder"].as_str()),
            (Some("held"), Some(lock.token_prefix()))
        );
    }
    lock.release().await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_json_names_each_failed_node_and_its_error() {
    let mut cluster = Cluster::local(3);
    let name = unique("cli-json-down");
    let _: () = cluster.exec(0, redis::cmd("HSET").arg(&name).arg("f").arg("v"));
    cluster.kill(2);
    let out = run(Some(&cluster), &["status", "--json", &name]);
    let v = json(&out);
    assert_schema(&v, 3);
    let nodes = v["nodes"].as_array().unwrap();
    assert_eq!(nodes[0]["state"], "error");
    assert_eq!(nodes[0]["error"]["kind"], "redis");
    assert_eq!(nodes[0]["error"]["code"], "WRONGTYPE");
    assert_eq!(nodes[1]["state"], "free");
    assert_eq!(nodes[2]["state"], "error");
    assert!(
        ["connection", "timeout"].contains(&nodes[2]["error"]["kind"].as_str().unwrap()),
        "{}",
        nodes[2]
    );
    assert_eq!(
        v["state"], "unknown",
        "one free answer of three is no quorum"
    );
    assert_eq!(
        Some(v["exit_code"].as_u64().unwrap() as i32),
        out.status.code()
    );
}

#[test]
fn completions_are_generated_for_each_shell_without_nodes() {
    for (shell, marker) in [
        ("bash", "_quorumlock()"),
        ("zsh", "#compdef quorumlock"),
        ("fish", "complete -c quorumlock"),
        ("elvish", "quorumlock"),
        ("powershell", "quorumlock"),
    ] {
        let out = run(None, &["completions", shell]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{shell}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains(marker), "{shell} script lacks {marker:?}");
        for word in [
            "run",
            "status",
            "elect",
            "leader",
            "ttl",
            "json",
            "take",
            "restart-quarantine",
            "completions",
        ] {
            assert!(text.contains(word), "{shell} script lacks {word}");
        }
    }
    let out = run(None, &["completions", "tcsh"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "an unknown shell is a usage error"
    );
}
