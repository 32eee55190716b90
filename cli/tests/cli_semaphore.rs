//! `quorumlock run --permits L` and `quorumlock status --permits L` against
//! real nodes: at most L commands at once (and L really at once), a lost
//! permit ending the command and everything it started as a lost lock
//! does, the holders shown by `status`, another L than the holders' refused
//! as a configuration error, bad `--permits` refused before anything is
//! sent.

use quorumlock_testkit as support;

mod common;

use std::process::{Child, Stdio};
use std::time::Duration;

use common::{
    json, none_left, output, quorumlock, signal, sleep_marker, text, wait_within, with_marker,
};
use support::{unique, Cluster};

/// The key of slot `i` of the semaphore `name`.
fn slot_key(name: &str, i: usize) -> Vec<u8> {
    format!("quorumlock:semaphore:{{{name}}}:{i}").into_bytes()
}

/// Nodes holding any of the semaphore's `permits` slots, summed.
fn slots_held(cluster: &Cluster, name: &str, permits: usize) -> usize {
    (0..permits)
        .map(|i| cluster.holders(&slot_key(name, i)))
        .sum()
}

fn released(cluster: &Cluster, name: &str, permits: usize) -> bool {
    support::block_on_eventually(Duration::from_secs(3), || {
        slots_held(cluster, name, permits) == 0
    })
}

/// One command's time under its permit, from its log lines.
#[derive(Debug, Clone, Copy)]
struct Held {
    start: u128,
    end: u128,
    slot: u32,
}

/// The most intervals that overlap at one moment (an end at the same
/// nanosecond as a start counts first: no overlap).
fn max_overlap(held: &[Held]) -> usize {
    let mut events: Vec<(u128, i32)> = held
        .iter()
        .flat_map(|h| [(h.start, 1), (h.end, -1)])
        .collect();
    events.sort();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, step) in events {
        now += step;
        most = most.max(now);
    }
    usize::try_from(most).unwrap_or(0)
}

/// L = 2, four commands started together, each waiting: every one runs,
/// never more than two at once, and two do run at once (each command waits
/// up to 10 s for a peer's marker, so the first two overlap for sure: a
/// semaphore that admitted one at a time, a mutex, fails here), the two
/// overlapping ones on different slots.
#[test]
fn at_most_l_commands_run_at_once_and_all_of_them_run() {
    let cluster = Cluster::shared(3);
    let dir = tempfile::tempdir().expect("dir");
    let log = dir.path().join("log");
    let marks = dir.path().join("marks");
    std::fs::create_dir(&marks).expect("marks dir");
    let name = unique("cli-sem-bound");
    let script = format!(
        "echo \"start $$ $(date +%s%N) $QUORUMLOCK_SLOT\" >> {log}; mkdir {marks}/$$; \
         i=0; while [ $(ls {marks} | wc -l) -lt 2 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; \
         sleep 0.3; rmdir {marks}/$$; echo \"end $$ $(date +%s%N)\" >> {log}",
        log = log.display(),
        marks = marks.display()
    );
    let runs: Vec<Child> = (0..4)
        .map(|_| {
            let mut cmd = quorumlock(&cluster);
            cmd.args([
                "run",
                "--permits",
                "2",
                "--wait",
                "120s",
                "--quiet",
                &name,
                "--",
                "sh",
                "-c",
                &script,
            ]);
            cmd.spawn().expect("spawn")
        })
        .collect();
    for mut run in runs {
        let status = wait_within(&mut run, Duration::from_secs(180));
        assert_eq!(status.and_then(|s| s.code()), Some(0), "{status:?}");
    }
    let lines = std::fs::read_to_string(&log).expect("log");
    let mut held: Vec<Held> = Vec::new();
    for line in lines.lines().filter(|l| l.starts_with("start ")) {
        let f: Vec<&str> = line.split_whitespace().collect();
        let end = lines
            .lines()
            .find_map(|l| {
                let e: Vec<&str> = l.split_whitespace().collect();
                (e[0] == "end" && e[1] == f[1]).then(|| e[2].parse::<u128>().expect("end ns"))
            })
            .unwrap_or_else(|| panic!("no end for {line}:\n{lines}"));
        held.push(Held {
            start: f[2].parse().expect("start ns"),
            end,
            slot: f[3].parse().expect("QUORUMLOCK_SLOT is a number"),
        });
    }
    assert_eq!(held.len(), 4, "every command ran:\n{lines}");
    assert!(held.iter().all(|h| h.slot < 2), "{held:?}");
    assert_eq!(
        max_overlap(&held),
        2,
        "at most 2 at once, and 2 did run at once:\n{lines}"
    );
    for (i, a) in held.iter().enumerate() {
        for b in &held[i + 1..] {
            if a.start < b.end && b.start < a.end {
                assert_ne!(a.slot, b.slot, "two holders of one slot: {a:?} {b:?}");
            }
        }
    }
    assert!(released(&cluster, &name, 2), "every permit released");
}

#[test]
fn the_overlap_count_sees_three_at_once() {
    // The checker itself: three intervals with a common moment count 3,
    // touching ones do not overlap.
    let h = |start, end| Held {
        start,
        end,
        slot: 0,
    };
    assert_eq!(max_overlap(&[h(0, 10), h(5, 15), h(9, 20)]), 3);
    assert_eq!(max_overlap(&[h(0, 10), h(10, 20), h(20, 30)]), 1);
}

/// A permit lost (its slot's key gone on a majority, as after a clock
/// jump) ends CMD and its background children and `run` exits 79, as a
/// lost lock does. Negative control: the same keys gone on a minority only
/// leave the permit held — CMD keeps running through several renewals.
#[test]
fn a_lost_permit_stops_the_command_and_everything_it_started() {
    let cluster = Cluster::local(5);
    let name = unique("cli-sem-lost");
    let marker = sleep_marker();
    let mut cmd = quorumlock(&cluster);
    cmd.args([
        "run",
        "--permits",
        "2",
        "--ttl",
        "1s",
        "--grace",
        "1s",
        &name,
        "--",
        "sh",
        "-c",
    ])
    .arg(format!("sleep {marker} & sleep {marker} & wait"));
    let mut child = cmd.stderr(Stdio::piped()).spawn().expect("spawn");
    assert!(
        support::block_on_eventually(Duration::from_secs(20), || slots_held(&cluster, &name, 2)
            == 5),
        "the permit was taken on every node"
    );
    assert!(support::block_on_eventually(Duration::from_secs(5), || {
        with_marker(&marker).len() >= 2
    }));
    let delete = |nodes: std::ops::Range<usize>| {
        for i in nodes {
            for slot in 0..2 {
                let _: () = cluster.exec(i, redis::cmd("DEL").arg(slot_key(&name, slot)));
            }
        }
    };
    // Control: a minority's keys gone. Renewals (every third of the TTL)
    // still reach a majority; three TTLs later everything runs on.
    delete(3..5);
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        child.try_wait().expect("try_wait").is_none(),
        "a permit still held on a majority is not lost"
    );
    assert!(with_marker(&marker).len() >= 2, "the command runs on");
    // A renewal that lands between two of these deletions sees a majority
    // and repairs the deleted keys (the library's repair on renewal).
    common::lost_under_deletions(&mut child, || delete(0..3), "PERMIT LOST", &marker);
    assert!(released(&cluster, &name, 2));
}

/// Two holders of L = 2: `status --permits` shows both (prefix, slot,
/// expiry), a third `run --no-wait` exits 75, and once one holder is gone
/// another command runs (with `--fenced`: a token) and its status is passed
/// on; then nothing is held.
#[test]
fn status_shows_the_holders_and_a_full_semaphore_is_busy() {
    let cluster = Cluster::shared(3);
    let name = unique("cli-sem-status");
    let marker = sleep_marker();
    let mut holders: Vec<Child> = (0..2)
        .map(|_| {
            let mut cmd = quorumlock(&cluster);
            cmd.args([
                "run",
                "--permits",
                "2",
                "--ttl",
                "10s",
                "--wait",
                "60s",
                &name,
                "--",
                "sleep",
                &marker,
            ]);
            cmd.stderr(Stdio::null()).spawn().expect("holder")
        })
        .collect();
    assert!(
        support::block_on_eventually(Duration::from_secs(20), || slots_held(&cluster, &name, 2)
            == 6),
        "both permits taken on every node"
    );
    let prefixes: Vec<String> = (0..2)
        .map(|i| {
            let value = cluster.values(&slot_key(&name, i))[0]
                .clone()
                .expect("slot held");
            text(&value).chars().take(8).collect()
        })
        .collect();

    let mut cmd = quorumlock(&cluster);
    cmd.args(["status", "--permits", "2", &name]);
    let out = output(cmd);
    let shown = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "held → 0: {shown}");
    for (slot, prefix) in prefixes.iter().enumerate() {
        let line = shown
            .lines()
            .find(|l| l.contains(&format!("held by {prefix}…")))
            .unwrap_or_else(|| panic!("no line for {prefix}: {shown}"));
        assert!(line.contains(&format!("slot {slot}  expires in")), "{line}");
    }
    assert!(shown.contains("2 of 2 permits held"), "{shown}");
    assert!(shown.contains(", 0 free"), "{shown}");

    let mut cmd = quorumlock(&cluster);
    cmd.args(["status", "--json", "--permits", "2", &name]);
    let out = output(cmd);
    let v = json(&out);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        (
            v["version"].as_u64(),
            v["permits"].as_u64(),
            v["permits_held"].as_u64(),
            v["permits_free"].as_u64(),
            v["permits_unknown"].as_u64(),
        ),
        (Some(1), Some(2), Some(2), Some(0), Some(0)),
        "{v}"
    );
    assert_eq!(v["resource"], name.as_str());
    assert_eq!(
        (v["quorum"].as_u64(), v["nodes_total"].as_u64()),
        (Some(2), Some(3))
    );
    assert_eq!(v["exit_code"], 0);
    let listed = v["holders"].as_array().expect("holders");
    assert_eq!(listed.len(), 2, "{v}");
    for (slot, prefix) in prefixes.iter().enumerate() {
        let h = &listed[slot];
        assert_eq!(h["holder"], prefix.as_str(), "{v}");
        assert_eq!(h["slots"], serde_json::json!([slot]), "{v}");
        let left = h["expires_in_ms"].as_u64().expect("a TTL");
        assert!(left > 0 && left <= 10_000, "{left}");
        assert_eq!(v["slots"][slot]["state"], "held", "{v}");
        assert_eq!(v["slots"][slot]["holder_nodes"], 3, "{v}");
    }
    assert!(
        v["nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .all(|n| n["node"].is_string() && n["error"].is_null()),
        "{v}"
    );

    let mut busy = quorumlock(&cluster);
    busy.args(["run", "--permits", "2", "--no-wait", &name, "--", "true"]);
    let out = output(busy);
    assert_eq!(out.status.code(), Some(75), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("no permit free"),
        "{}",
        text(&out.stderr)
    );

    // Another L is refused at once, even while waiting is allowed: a
    // configuration error (78) naming both numbers; the third slot, which
    // only it lists, stays free, and `status` with that L says what the
    // holders named.
    let mut other = quorumlock(&cluster);
    other.args([
        "run",
        "--permits",
        "3",
        "--wait",
        "60s",
        &name,
        "--",
        "true",
    ]);
    let out = output(other);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{stderr}");
    assert!(
        stderr.contains("held with 2 permits, this acquire named 3"),
        "{stderr}"
    );
    assert_eq!(cluster.holders(&slot_key(&name, 2)), 0, "nothing set");
    let mut cmd = quorumlock(&cluster);
    cmd.args(["status", "--permits", "3", &name]);
    let shown = text(&output(cmd).stdout);
    assert!(shown.contains("its holders named 2 permits"), "{shown}");
    let mut cmd = quorumlock(&cluster);
    cmd.args(["status", "--json", "--permits", "3", &name]);
    assert_eq!(json(&output(cmd))["permits_recorded"], 2);

    signal(holders[0].id(), "-TERM");
    let status = wait_within(&mut holders[0], Duration::from_secs(10));
    assert_eq!(status.and_then(|s| s.code()), Some(128 + 15));
    let mut next = quorumlock(&cluster);
    next.args([
        "run",
        "--permits",
        "2",
        "--fenced",
        "--wait",
        "30s",
        &name,
        "--",
        "sh",
        "-c",
    ])
    .arg("test \"$QUORUMLOCK_FENCE\" -ge 1 && exit $((QUORUMLOCK_SLOT + 7))");
    let out = output(next);
    assert!(
        matches!(out.status.code(), Some(7 | 8)),
        "CMD's status, with its slot and a fencing token: {:?} {}",
        out.status,
        text(&out.stderr)
    );

    signal(holders[1].id(), "-TERM");
    let _ = wait_within(&mut holders[1], Duration::from_secs(10));
    assert!(none_left(&marker, Duration::from_secs(3)));
    assert!(released(&cluster, &name, 2));
    let mut cmd = quorumlock(&cluster);
    cmd.args(["status", "--permits", "2", &name]);
    let out = output(cmd);
    assert_eq!(out.status.code(), Some(1), "nothing held → 1");
    assert!(
        text(&out.stdout).contains("0 of 2 permits held"),
        "{}",
        text(&out.stdout)
    );
}

/// `--permits` of 0, above `MAX_PERMITS` or not a number: a usage error
/// (2) naming the flag, for `run` and `status`, before any node is asked —
/// also when no node could be reached, which would otherwise be 69.
/// `--permits 1024` (the maximum) is accepted.
#[test]
fn bad_permits_are_a_usage_error_and_nothing_is_sent() {
    let cluster = Cluster::shared(3);
    let name = unique("cli-sem-usage");
    let max = quorumlock::MAX_PERMITS.to_string();
    let above = (quorumlock::MAX_PERMITS + 1).to_string();
    for permits in ["0", above.as_str(), "-1", "two", ""] {
        let flag = format!("--permits={permits}");
        for args in [
            vec!["run", &flag, &name, "--", "true"],
            vec!["status", &flag, &name],
        ] {
            for nodes in [cluster.urls().join(","), "redis://127.0.0.1:1".to_owned()] {
                let mut cmd = quorumlock(&cluster);
                cmd.env("QUORUMLOCK_NODES", nodes).args(&args);
                let out = output(cmd);
                let stderr = text(&out.stderr);
                assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
                assert!(stderr.contains("--permits"), "{args:?}: {stderr}");
            }
        }
    }
    assert_eq!(slots_held(&cluster, &name, 2), 0, "nothing taken");

    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("slot");
    let mut cmd = quorumlock(&cluster);
    cmd.args(["run", "--permits", &max, &name, "--", "sh", "-c"])
        .arg(format!("echo $QUORUMLOCK_SLOT > {}", file.display()));
    let out = output(cmd);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let slot: usize = std::fs::read_to_string(&file)
        .expect("the command ran")
        .trim()
        .parse()
        .expect("QUORUMLOCK_SLOT");
    assert!(slot < 1024, "{slot}");
    assert!(support::block_on_eventually(Duration::from_secs(3), || {
        cluster.holders(&slot_key(&name, slot)) == 0
    }));
}

/// `--take 2` of 3 permits: one holder with two slots (`status` and its
/// JSON show them, CMD gets both in `QUORUMLOCK_SLOT`); a second `--take 2`
/// is refused with 75 while the first runs (one permit is free, two are
/// not), and runs once the first is gone.
#[test]
fn take_k_holds_k_permits_at_once_and_a_second_k_waits() {
    let cluster = Cluster::shared(3);
    let name = unique("cli-sem-take");
    let dir = tempfile::tempdir().expect("dir");
    let slots_file = dir.path().join("slots");
    let go = dir.path().join("go");
    let mut first = quorumlock(&cluster);
    first
        .args(["run", "--permits", "3", "--take", "2", &name, "--", "sh", "-c"])
        .arg(format!(
            "echo $QUORUMLOCK_SLOT > {0}.tmp && mv {0}.tmp {0}; i=0; while [ ! -e {1} ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done",
            slots_file.display(),
            go.display()
        ));
    let mut first = first.stderr(Stdio::null()).spawn().expect("first");
    assert!(
        support::block_on_eventually(Duration::from_secs(20), || slots_held(&cluster, &name, 3)
            == 6),
        "two slots taken on every node"
    );
    assert!(support::block_on_eventually(Duration::from_secs(5), || {
        slots_file.exists()
    }));
    let slots = std::fs::read_to_string(&slots_file).expect("slots");
    let mut slots: Vec<usize> = slots
        .trim()
        .split(',')
        .map(|s| s.parse().expect("a slot"))
        .collect();
    slots.sort_unstable();
    assert_eq!(slots.len(), 2, "{slots:?}");
    assert!(slots.iter().all(|&s| s < 3) && slots[0] != slots[1]);

    let mut cmd = quorumlock(&cluster);
    cmd.args(["status", "--permits", "3", &name]);
    let out = output(cmd);
    let shown = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    let holders: Vec<&str> = shown.lines().filter(|l| l.starts_with("held by")).collect();
    assert_eq!(holders.len(), 1, "one holder: {shown}");
    assert!(
        holders[0].contains(&format!("slots {}, {}", slots[0], slots[1])),
        "{shown}"
    );
    assert!(shown.contains("2 of 3 permits held"), "{shown}");
    let mut cmd = quorumlock(&cluster);
    cmd.args(["status", "--json", "--permits", "3", &name]);
    let v = json(&output(cmd));
    assert_eq!(v["permits_held"], 2, "{v}");
    assert_eq!(v["permits_free"], 1, "{v}");
    assert_eq!(v["holders"].as_array().map(Vec::len), Some(1), "{v}");
    assert_eq!(v["holders"][0]["slots"], serde_json::json!(slots), "{v}");

    let mut busy = quorumlock(&cluster);
    busy.args([
        "run",
        "--permits",
        "3",
        "--take",
        "2",
        "--no-wait",
        &name,
        "--",
        "true",
    ]);
    let out = output(busy);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(75), "{stderr}");
    assert!(stderr.contains("not enough permits free"), "{stderr}");
    assert_eq!(
        slots_held(&cluster, &name, 3),
        6,
        "the refused one left nothing"
    );

    let mut second = quorumlock(&cluster);
    second
        .args([
            "run",
            "--permits",
            "3",
            "--take",
            "2",
            "--wait",
            "60s",
            &name,
            "--",
            "sh",
            "-c",
        ])
        .arg("exit 5");
    let mut second = second.stderr(Stdio::null()).spawn().expect("second");
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        second.try_wait().expect("try_wait").is_none(),
        "the second waits while the first holds two of three"
    );
    std::fs::write(&go, b"").expect("go");
    let status = wait_within(&mut first, Duration::from_secs(20));
    assert_eq!(status.and_then(|s| s.code()), Some(0));
    let status = wait_within(&mut second, Duration::from_secs(60));
    assert_eq!(status.and_then(|s| s.code()), Some(5), "the second ran");
    assert!(released(&cluster, &name, 3));
}

/// `--take` above `--permits` is a usage error (2) and leaves nothing on
/// the nodes; `--take` without `--permits` and `--take 0` are refused by
/// the parser (2) before any node is asked.
#[test]
fn a_take_above_the_permits_is_a_usage_error_and_nothing_is_left() {
    let cluster = Cluster::shared(3);
    let name = unique("cli-sem-take-usage");
    for args in [
        vec!["run", "--permits", "2", "--take", "3", &name, "--", "true"],
        vec![
            "run",
            "--permits",
            "2",
            "--take",
            "3",
            "--no-wait",
            &name,
            "--",
            "true",
        ],
        vec!["run", "--take", "2", &name, "--", "true"],
        vec!["run", "--permits", "2", "--take", "0", &name, "--", "true"],
    ] {
        let mut cmd = quorumlock(&cluster);
        cmd.args(&args);
        let out = output(cmd);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("take") || stderr.contains("--permits"),
            "{args:?}: {stderr}"
        );
    }
    assert_eq!(slots_held(&cluster, &name, 3), 0, "nothing taken");
    for i in 0..cluster.len() {
        let keys: Vec<String> = cluster.exec(
            i,
            redis::cmd("KEYS").arg(format!("quorumlock:semaphore:{{{name}}}*")),
        );
        assert!(keys.is_empty(), "node {i}: {keys:?}");
    }
}
