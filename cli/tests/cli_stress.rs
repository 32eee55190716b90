//! A short stress of `quorumlock run` under signals: 100 runs, each sent
//! SIGTERM at a random moment (seeded, printed) — while starting, while
//! connecting, while acquiring, between acquisition and the command's
//! start, or while the command runs. Afterwards no process of any command
//! may be left (the commands start background children) and no key may be
//! left on any node. Every other run takes a permit of a semaphore
//! (`--permits 3`) instead of the lock: the same promises.
//!
//! Replay with `QUORUMLOCK_SEED=<seed>`; `QUORUMLOCK_TEST_BIN` runs it
//! against another build of the binary.

use quorumlock_testkit as support;

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use support::{unique, Cluster};

const RUNS: usize = 100;
/// The latest moment a signal is sent, after the start of `run`.
const LATEST: Duration = Duration::from_millis(60);

fn bin() -> String {
    std::env::var("QUORUMLOCK_TEST_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_quorumlock").to_owned())
}

fn with_marker(marker: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if std::fs::read(entry.path().join("cmdline"))
            .is_ok_and(|c| String::from_utf8_lossy(&c).contains(marker))
        {
            found.push(pid);
        }
    }
    found
}

#[test]
fn sigterm_at_a_random_moment_leaves_no_process_and_no_key() {
    let cluster = Cluster::shared(5);
    let seed = support::seed("sigterm_at_a_random_moment");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let marker = format!("400.{:09}", rng.random::<u32>());
    let script = format!("sleep {marker} & sleep {marker} & wait");
    let started = Instant::now();
    let mut names = Vec::new();
    let mut outcomes = std::collections::BTreeMap::<String, usize>::new();
    for run in 0..RUNS {
        let name = unique("cli-stress");
        let delay = LATEST.mul_f64(rng.random::<f64>());
        let permits: &[&str] = if run % 2 == 1 {
            &["--permits", "3"]
        } else {
            &[]
        };
        let mut child = Command::new(bin())
            .env("QUORUMLOCK_NODES", cluster.urls().join(","))
            .args(["--node-timeout", "100ms", "--quiet", "run", "--ttl", "30s"])
            .args(permits)
            .args(["--grace", "1s", &name, "--", "sh", "-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn quorumlock");
        std::thread::sleep(delay);
        common::signal(child.id(), "-TERM");
        let status = common::wait_within(&mut child, Duration::from_secs(10));
        let status = status.unwrap_or_else(|| {
            panic!("run {run} (signal after {delay:?}, seed {seed}) ignored SIGTERM")
        });
        use std::os::unix::process::ExitStatusExt;
        // 143: quorumlock (or the command it passed SIGTERM on to) ended
        // by the signal; killed by signal 15: before the handlers existed.
        let ok = status.code() == Some(143) || status.signal() == Some(15);
        assert!(
            ok,
            "run {run} (signal after {delay:?}, seed {seed}): {status:?}"
        );
        *outcomes
            .entry(format!("{:?}/{:?}", status.code(), status.signal()))
            .or_default() += 1;
        names.push(name);
    }
    let orphans_gone =
        support::block_on_eventually(Duration::from_secs(5), || with_marker(&marker).is_empty());
    let orphans = with_marker(&marker);
    for pid in &orphans {
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
    // The lock's key for even runs, the semaphore's three slots for odd.
    let keys: Vec<Vec<u8>> = names
        .iter()
        .enumerate()
        .flat_map(|(run, n)| {
            if run % 2 == 1 {
                (0..3)
                    .map(|i| format!("quorumlock:semaphore:{{{n}}}:{i}").into_bytes())
                    .collect()
            } else {
                vec![n.clone().into_bytes()]
            }
        })
        .collect();
    let keys_gone = support::block_on_eventually(Duration::from_secs(5), || {
        keys.iter().all(|k| cluster.holders(k) == 0)
    });
    let left: Vec<String> = keys
        .iter()
        .filter(|k| cluster.holders(k) > 0)
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .collect();
    support::report(&format!(
        "cli stress: {RUNS} runs in {:.1}s, seed {seed}, exits {outcomes:?}, \
         orphans {}, keys left {}",
        started.elapsed().as_secs_f64(),
        orphans.len(),
        left.len()
    ));
    assert!(
        orphans_gone,
        "orphaned processes (seed {seed}): {orphans:?}"
    );
    assert!(keys_gone, "keys left behind (seed {seed}): {left:?}");
}
