//! `quorumlock run` as a supervisor, against real nodes: broken pipes,
//! process groups, the parent-death signal, signals in every phase, no
//! quorum, TTL checks, secrets, and the smaller promises of the CLI
//! section of the README. Each test names the defect it guards against.
//!
//! `QUORUMLOCK_TEST_BIN` runs these tests against another build of the
//! binary (e.g. an older one, to see them fail).

use quorumlock_testkit as support;

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use support::{unique, Cluster, Fault};

fn bin() -> String {
    std::env::var("QUORUMLOCK_TEST_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_quorumlock").to_owned())
}

fn quorumlock(urls: &[String]) -> Command {
    quorumlock_timing(urls, "100ms")
}

fn quorumlock_timing(urls: &[String], node_timeout: &str) -> Command {
    let mut cmd = Command::new(bin());
    cmd.env("QUORUMLOCK_NODES", urls.join(","))
        .args(["--node-timeout", node_timeout])
        .stdin(Stdio::null());
    cmd
}

/// What a bounded run of the binary gave.
struct Ran {
    status: Option<ExitStatus>,
    stdout: String,
    stderr: String,
    took: Duration,
}

impl Ran {
    fn code(&self) -> Option<i32> {
        self.status.and_then(|s| s.code())
    }
}

/// Runs `cmd` with piped output; kills it after `limit` (status `None`).
fn run_within(mut cmd: Command, limit: Duration) -> Ran {
    let start = Instant::now();
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn quorumlock");
    let stdout = reader(child.stdout.take());
    let stderr = reader(child.stderr.take());
    let status = wait_within(&mut child, limit);
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let took = start.elapsed();
    Ran {
        status,
        stdout: stdout
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_default(),
        stderr: stderr
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_default(),
        took,
    }
}

fn reader(pipe: Option<impl Read + Send + 'static>) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    if let Some(mut pipe) = pipe {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            let _ = tx.send(text);
        });
    }
    rx
}

fn wait_within(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .args([sig, "--", &pid.to_string()])
        .status();
}

/// Processes whose command line contains `marker`.
fn with_marker(marker: &str) -> Vec<u32> {
    let mut found = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        // Zombies have an empty command line and count as gone.
        if String::from_utf8_lossy(&cmdline).contains(marker) {
            found.push(pid);
        }
    }
    found
}

/// True when process `pid` has a handler installed for every signal
/// number in `sigs` (`SigCgt` in `/proc/PID/status`): it is ready for
/// them, and none of them can kill it by default any more.
fn catches(pid: u32, sigs: &[u32]) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    let caught = status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or(0);
    sigs.iter().all(|&n| caught & (1 << (n - 1)) != 0)
}

/// Waits (bounded) until a process other than `except` carrying `marker`
/// catches every signal in `sigs` (e.g. a script's traps are set). A child
/// quorumlock has forked but not yet exec'd (the command's, the watcher's)
/// carries quorumlock's command line and handlers: it does not count.
fn marked_catches(marker: &str, except: u32, sigs: &[u32]) -> bool {
    let execed = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .is_ok_and(|comm| !comm.trim_end().starts_with("quorumlock"))
    };
    support::block_on_eventually(Duration::from_secs(20), || {
        with_marker(marker)
            .into_iter()
            .any(|pid| pid != except && execed(pid) && catches(pid, sigs))
    })
}

/// Waits (bounded) until no process carries `marker`; kills any that
/// remain so that a failing test leaves nothing behind. True when none
/// was left.
fn none_left(marker: &str, limit: Duration) -> bool {
    let gone = support::block_on_eventually(limit, || with_marker(marker).is_empty());
    for pid in with_marker(marker) {
        signal(pid, "-KILL");
    }
    gone
}

/// A unique `sleep` duration: the marker of one test's processes.
fn sleep_marker() -> String {
    format!("300.{:09}", rand::random::<u32>())
}

fn wait_held(cluster: &Cluster, name: &str, nodes: usize) {
    assert!(
        support::block_on_eventually(Duration::from_secs(20), || cluster.holders(name.as_bytes())
            >= nodes),
        "the lock was taken"
    );
}

fn released(cluster: &Cluster, name: &str) -> bool {
    support::block_on_eventually(Duration::from_secs(3), || {
        cluster.holders(name.as_bytes()) == 0
    })
}

// ---- 1. a closed stderr ----------------------------------------------

/// A `| logger` that died: stderr is a pipe nobody reads.
fn closed_stderr(mut cmd: Command) -> Child {
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    drop(child.stderr.take());
    child
}

#[test]
fn a_closed_stderr_does_not_stop_the_kill_or_the_release() {
    let cluster = Cluster::local(5);
    let name = unique("cli-epipe-lost");
    let marker = sleep_marker();
    let mut cmd = quorumlock(&cluster.urls());
    cmd.args([
        "run", "--ttl", "1s", "--grace", "1s", &name, "--", "sleep", &marker,
    ]);
    let mut child = closed_stderr(cmd);
    wait_held(&cluster, &name, 5);
    for i in 0..3 {
        let _: () = cluster.exec(i, redis::cmd("DEL").arg(&name));
    }
    let status = wait_within(&mut child, Duration::from_secs(15));
    let _ = child.kill();
    assert_eq!(status.and_then(|s| s.code()), Some(79), "{status:?}");
    assert!(
        none_left(&marker, Duration::from_secs(3)),
        "the command was killed"
    );
    assert!(released(&cluster, &name), "released on every node");
}

#[test]
fn a_closed_stderr_keeps_the_statuses_75_and_127() {
    let cluster = Cluster::shared(5);
    let name = unique("cli-epipe-busy");
    let marker = sleep_marker();
    let mut holder = quorumlock(&cluster.urls());
    holder.args(["run", &name, "--", "sleep", &marker]);
    let mut holder = holder.stderr(Stdio::null()).spawn().expect("holder");
    wait_held(&cluster, &name, 5);

    let mut busy = quorumlock(&cluster.urls());
    busy.args(["run", "--no-wait", &name, "--", "true"]);
    let mut busy = closed_stderr(busy);
    let status = wait_within(&mut busy, Duration::from_secs(10));
    assert_eq!(status.and_then(|s| s.code()), Some(75), "{status:?}");
    signal(holder.id(), "-TERM");
    let _ = wait_within(&mut holder, Duration::from_secs(10));
    assert!(none_left(&marker, Duration::from_secs(3)));

    let name = unique("cli-epipe-127");
    let mut missing = quorumlock(&cluster.urls());
    missing.args(["run", &name, "--", "/no/such/command"]);
    let mut missing = closed_stderr(missing);
    let status = wait_within(&mut missing, Duration::from_secs(10));
    assert_eq!(status.and_then(|s| s.code()), Some(127), "{status:?}");
    assert!(
        released(&cluster, &name),
        "released after the missing command"
    );
}

// ---- 2. process groups ---------------------------------------------

#[test]
fn sigterm_and_a_lost_lock_reach_everything_the_command_started() {
    let cluster = Cluster::local(5);
    for lose in [false, true] {
        let name = unique("cli-group");
        let marker = sleep_marker();
        let mut cmd = quorumlock(&cluster.urls());
        cmd.args([
            "run", "--ttl", "1s", "--grace", "1s", &name, "--", "sh", "-c",
        ])
        .arg(format!("sleep {marker} & sleep {marker} & wait"));
        let mut child = cmd.stderr(Stdio::null()).spawn().expect("spawn");
        wait_held(&cluster, &name, 5);
        assert!(support::block_on_eventually(Duration::from_secs(5), || {
            with_marker(&marker).len() >= 4
        }));
        if lose {
            for i in 0..3 {
                let _: () = cluster.exec(i, redis::cmd("DEL").arg(&name));
            }
        } else {
            signal(child.id(), "-TERM");
        }
        let status = wait_within(&mut child, Duration::from_secs(15));
        let _ = child.kill();
        let expected = if lose { 79 } else { 128 + 15 };
        assert_eq!(status.and_then(|s| s.code()), Some(expected), "lose={lose}");
        assert!(
            none_left(&marker, Duration::from_secs(3)),
            "the background sleeps died too (lose={lose})"
        );
        assert!(released(&cluster, &name));
    }
}

/// `--grace` is the command's time to shut down while the lock still
/// covers it; once the validity is over another holder may run, so a
/// command that ignores SIGTERM is killed by then, however long the grace.
#[test]
fn a_lost_lock_kills_the_command_by_the_end_of_its_validity() {
    let cluster = Cluster::local(5);
    let name = unique("cli-lost-grace");
    let marker = sleep_marker();
    let mut cmd = quorumlock(&cluster.urls());
    cmd.args([
        "run", "--ttl", "2s", "--grace", "10m", &name, "--", "sh", "-c",
    ])
    .arg(format!("trap '' TERM; sleep {marker}"));
    let mut child = cmd.stderr(Stdio::null()).spawn().expect("spawn");
    wait_held(&cluster, &name, 5);
    assert!(support::block_on_eventually(Duration::from_secs(5), || {
        with_marker(&marker).len() >= 2
    }));
    for i in 0..3 {
        let _: () = cluster.exec(i, redis::cmd("DEL").arg(&name));
    }
    // Renewal (every third of the TTL) meets the refusal within about a
    // second; a kill that waited for the 10-minute grace would miss this.
    let status = wait_within(&mut child, Duration::from_secs(20));
    let _ = child.kill();
    assert_eq!(status.and_then(|s| s.code()), Some(79), "{status:?}");
    assert!(
        none_left(&marker, Duration::from_secs(3)),
        "the command that ignores SIGTERM was killed"
    );
    assert!(released(&cluster, &name));
}

#[test]
fn processes_the_command_leaves_behind_do_not_outlive_the_lock() {
    let cluster = Cluster::shared(3);
    let name = unique("cli-leftover");
    let marker = sleep_marker();
    let mut cmd = quorumlock(&cluster.urls());
    cmd.args(["run", "--grace", "1s", &name, "--", "sh", "-c"])
        .arg(format!("sleep {marker} > /dev/null 2>&1 & exit 3"));
    let ran = run_within(cmd, Duration::from_secs(15));
    assert_eq!(ran.code(), Some(3), "{}", ran.stderr);
    assert!(none_left(&marker, Duration::from_secs(2)), "{}", ran.stderr);
    assert!(released(&cluster, &name));
}

// ---- 2b. what the command leaves behind, in its group or not --------

/// How the command leaves a job behind when it exits.
#[derive(Debug, Clone, Copy)]
enum Leftover {
    /// `job &`: the job stays in the command's process group.
    InGroup,
    /// `setsid job &`: the job leaves the group and the session.
    Setsid,
    /// `set -m` (job control; bash, which does it without a terminal):
    /// the job gets a process group of its own.
    JobControl,
}

impl Leftover {
    /// The command: starts `job.sh DIR MARKER` in the background the
    /// chosen way, waits until the job wrote its pid, and exits `code`.
    fn command(self, dir: &Path, marker: &str, code: u8) -> Vec<String> {
        let job = format!(
            "sh {}/job.sh {} {marker} > /dev/null 2>&1 &",
            dir.display(),
            dir.display()
        );
        let wait = format!(
            "while [ ! -e {}/pid ]; do sleep 0.01; done; exit {code}",
            dir.display()
        );
        let (shell, script) = match self {
            Leftover::InGroup => ("sh", format!("{job} {wait}")),
            Leftover::Setsid => ("sh", format!("setsid {job} {wait}")),
            Leftover::JobControl => ("bash", format!("set -m; {job} {wait}")),
        };
        vec![shell.to_owned(), "-c".to_owned(), script]
    }
}

/// Writes `DIR/job.sh`: a job that writes its pid to `DIR/pid`, then
/// appends `beat` to `DIR/hb` every 50 ms until it dies. On SIGTERM it
/// does `on_term` (a trap action; `''` ignores SIGTERM).
fn write_job(dir: &Path, on_term: &str) {
    let script = format!(
        "trap {on_term} TERM\n\
         echo $$ > \"$1/pid.tmp\" && mv \"$1/pid.tmp\" \"$1/pid\"\n\
         while :; do echo beat >> \"$1/hb\"; sleep 0.05; done\n"
    );
    std::fs::write(dir.join("job.sh"), script).expect("job script");
}

/// The job's pid, once it wrote it (bounded wait).
fn job_pid(dir: &Path) -> u32 {
    let mut pid = None;
    support::block_on_eventually(Duration::from_secs(20), || {
        pid = std::fs::read_to_string(dir.join("pid"))
            .ok()
            .and_then(|p| p.trim().parse().ok());
        pid.is_some()
    });
    pid.expect("the job started and wrote its pid")
}

/// True while `pid` runs (a zombie runs nothing).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X")
    })
}

/// The heartbeat file's lines after the second holder's `SECOND`: what
/// the first holder's job wrote while the second one held the lock.
fn written_after_second(dir: &Path) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(dir.join("hb")).unwrap_or_default();
    let lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let at = lines
        .iter()
        .position(|l| l == "SECOND")
        .ok_or_else(|| format!("the second holder never ran: {lines:?}"))?;
    Ok(lines[at + 1..].to_vec())
}

/// A second `run` of `name` on the nodes `urls`, waiting for the lock:
/// its command appends `SECOND` to the heartbeat file.
fn second_holder(urls: &[String], name: &str, dir: &Path) -> Child {
    let mut second = quorumlock(urls);
    second
        .args(["run", "--wait", "60s", name, "--", "sh", "-c"])
        .arg(format!("echo SECOND >> {}/hb", dir.display()));
    second.stderr(Stdio::null()).spawn().expect("second holder")
}

/// The command exits at once, leaving behind (in its group, or out of it)
/// a job that ignores SIGTERM; then two of the three nodes stall past the
/// TTL and the lock is lost. The job must be killed by the end of the
/// validity, as the command itself would be, however long `--grace`; no
/// second holder may run while it lives; and `run` exits 79, not 0.
fn a_lost_lock_kills_what_the_command_left(how: Leftover) {
    let mut cluster = Cluster::local(3);
    let proxied = cluster.proxied();
    let dir = tempfile::tempdir().expect("dir");
    write_job(dir.path(), "''");
    let name = unique("cli-leftover-lost");
    let marker = sleep_marker();
    let mut first = quorumlock(&proxied);
    first
        .args(["run", "--ttl", "3s", "--grace", "10m", &name, "--"])
        .args(how.command(dir.path(), &marker, 0));
    let mut first = first
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("first holder");
    let stderr = reader(first.stderr.take());
    let pid = job_pid(dir.path());
    // Only the job is left of the command (quorumlock's own command line
    // carries the marker too).
    assert!(
        support::block_on_eventually(Duration::from_secs(20), || {
            with_marker(&marker)
                .into_iter()
                .filter(|&p| p != first.id())
                .eq([pid])
        }),
        "{how:?}: the command exited and left its job: {:?}",
        with_marker(&marker)
    );

    // Nodes 1 and 2 stall: the renewal cannot reach a quorum. Their keys
    // expire by `expires_by`; the validity ends no later.
    for i in [1, 2] {
        cluster.proxy(i).set(Fault::Blackhole);
    }
    // The earliest instant both stalled nodes' keys may have expired (a
    // PTTL is read between `asked` and the answer).
    let mut expires_by = Instant::now();
    for i in [1, 2] {
        let asked = Instant::now();
        let left: i64 = cluster.exec(i, redis::cmd("PTTL").arg(&name));
        let left = Duration::from_millis(u64::try_from(left).unwrap_or(0));
        expires_by = expires_by.max(asked + left);
    }
    let mut second = second_holder(&cluster.urls(), &name, dir.path());

    let margin = Duration::from_secs(5);
    let limit = expires_by + margin;
    while running(pid) && Instant::now() < limit {
        std::thread::sleep(Duration::from_millis(1));
    }
    let seen_gone = Instant::now();
    let killed = !running(pid);
    // A figure, not an assert (a loaded machine may shift it).
    support::report(&format!(
        "{how:?}: the job was seen gone {} ms {} its keys could first expire",
        expires_by
            .max(seen_gone)
            .duration_since(expires_by.min(seen_gone))
            .as_millis(),
        if seen_gone <= expires_by {
            "before"
        } else {
            "after"
        }
    ));
    let first_status = wait_within(&mut first, Duration::from_secs(30));
    let second_status = wait_within(&mut second, Duration::from_secs(60));
    let _ = first.kill();
    let _ = second.kill();
    let gone = none_left(&marker, Duration::from_secs(3));
    cluster.heal_proxies();
    let stderr = stderr
        .recv_timeout(Duration::from_secs(5))
        .unwrap_or_default();
    assert!(
        killed,
        "{how:?}: the job ignoring SIGTERM was still running {margin:?} after the \
         keys expired\n{stderr}"
    );
    assert_eq!(
        first_status.and_then(|s| s.code()),
        Some(79),
        "{how:?}: the lock was lost\n{stderr}"
    );
    assert_eq!(second_status.and_then(|s| s.code()), Some(0), "{how:?}");
    let after = written_after_second(dir.path()).unwrap_or_else(|e| panic!("{how:?}: {e}"));
    assert!(
        after.is_empty(),
        "{how:?}: the first holder's job ran on while the second held the lock: \
         {after:?}\n{stderr}"
    );
    assert!(gone, "{how:?}");
}

#[test]
fn a_lost_lock_kills_what_the_command_left_in_its_group_by_the_end_of_validity() {
    a_lost_lock_kills_what_the_command_left(Leftover::InGroup);
}

#[test]
fn a_lost_lock_kills_what_the_command_started_with_setsid() {
    a_lost_lock_kills_what_the_command_left(Leftover::Setsid);
}

#[test]
fn a_lost_lock_kills_what_the_command_started_under_job_control() {
    a_lost_lock_kills_what_the_command_left(Leftover::JobControl);
}

/// The command exits 3 and leaves a job outside its process group (by
/// `setsid`, by job control) that shuts down slowly on SIGTERM: the job
/// gets SIGTERM, the lock stays held until it has finished, and only then
/// can a second holder run; `run` exits with the command's status.
#[test]
fn the_lock_is_released_only_after_what_the_command_left_outside_its_group_is_gone() {
    let cluster = Cluster::shared(3);
    for how in [Leftover::Setsid, Leftover::JobControl] {
        let dir = tempfile::tempdir().expect("dir");
        write_job(
            dir.path(),
            "'echo term >> \"$1/hb\"; sleep 0.3; echo last >> \"$1/hb\"; exit 0'",
        );
        let name = unique("cli-leftover-outside");
        let marker = sleep_marker();
        let mut first = quorumlock(&cluster.urls());
        first
            .args(["run", "--grace", "20s", &name, "--"])
            .args(how.command(dir.path(), &marker, 3));
        let mut first = first
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("first holder");
        let stderr = reader(first.stderr.take());
        job_pid(dir.path());
        let mut second = second_holder(&cluster.urls(), &name, dir.path());
        let first_status = wait_within(&mut first, Duration::from_secs(30));
        let second_status = wait_within(&mut second, Duration::from_secs(60));
        let _ = first.kill();
        let _ = second.kill();
        let gone = none_left(&marker, Duration::from_secs(3));
        let stderr = stderr
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_default();
        assert_eq!(
            first_status.and_then(|s| s.code()),
            Some(3),
            "{how:?}: the command's status\n{stderr}"
        );
        assert_eq!(second_status.and_then(|s| s.code()), Some(0), "{how:?}");
        let after = written_after_second(dir.path()).unwrap_or_else(|e| panic!("{how:?}: {e}"));
        assert!(
            after.is_empty(),
            "{how:?}: the job ran on after the lock was released: {after:?}\n{stderr}"
        );
        let text = std::fs::read_to_string(dir.path().join("hb")).unwrap_or_default();
        assert!(
            text.contains("term\nlast\n"),
            "{how:?}: the job got SIGTERM and finished its shutdown: {text:?}"
        );
        assert!(gone, "{how:?}");
        assert!(released(&cluster, &name));
    }
}

/// The processes `/proc` lists as children of `parent`, with their state.
fn children_of(parent: u32) -> Vec<(u32, String)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
            let state = fields.next()?.to_owned();
            let ppid = fields.next()?.parse::<u32>().ok()?;
            (ppid == parent).then_some((pid, state))
        })
        .collect()
}

/// `run` is the subreaper of the command's tree: a process orphaned while
/// the command runs (here by a subshell that starts `setsid sleep` and
/// exits) is re-parented to `run`, not to init, and once it exits `run`
/// reaps it at once rather than keeping a zombie until the end.
#[test]
fn orphans_of_the_command_are_adopted_and_reaped_by_run() {
    let cluster = Cluster::shared(3);
    let name = unique("cli-adopt");
    let orphan = format!("1.{:09}", rand::random::<u32>() % 1_000_000_000);
    let mut cmd = quorumlock(&cluster.urls());
    cmd.args(["run", &name, "--", "sh", "-c"]).arg(format!(
        "(setsid sleep {orphan} > /dev/null 2>&1 &); sleep 6"
    ));
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let run = child.id();
    let is_orphan = |pid: u32| {
        std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|c| String::from_utf8_lossy(&c) == format!("sleep\0{orphan}\0"))
    };
    let adopted = support::block_on_eventually(Duration::from_secs(10), || {
        children_of(run).iter().any(|&(pid, _)| is_orphan(pid))
    });
    // The orphan sleeps about a second; then no zombie child of `run` may
    // stay (only the orphan could be one).
    let reaped = adopted
        && support::block_on_eventually(Duration::from_secs(5), || {
            let children = children_of(run);
            !children.iter().any(|&(pid, _)| is_orphan(pid))
                && !children.iter().any(|(_, state)| state == "Z")
        });
    let children = children_of(run);
    let status = wait_within(&mut child, Duration::from_secs(20));
    let _ = child.kill();
    assert!(adopted, "the orphan was re-parented to run");
    assert!(reaped, "the orphan was reaped: {children:?}");
    assert_eq!(status.and_then(|s| s.code()), Some(0));
    assert!(released(&cluster, &name));
}

// ---- 3. quorumlock dies; signals in every phase ---------------------

#[test]
fn the_command_dies_with_quorumlock() {
    let cluster = Cluster::shared(3);
    let name = unique("cli-pdeath");
    let marker = sleep_marker();
    let mut cmd = quorumlock(&cluster.urls());
    cmd.args(["run", &name, "--", "sh", "-c"])
        .arg(format!("sleep {marker} & sleep {marker} & wait"));
    let mut child = cmd.stderr(Stdio::null()).spawn().expect("spawn");
    // quorumlock, sh and both sleeps carry the marker.
    assert!(support::block_on_eventually(
        Duration::from_secs(10),
        || { with_marker(&marker).len() >= 4 }
    ));
    signal(child.id(), "-KILL");
    let _ = child.wait();
    assert!(
        none_left(&marker, Duration::from_secs(3)),
        "the command and its background children were killed with their supervisor"
    );
}

#[test]
fn user_signals_are_passed_on_and_never_kill_the_supervisor() {
    let cluster = Cluster::shared(3);
    let dir = tempfile::tempdir().expect("dir");
    let log = dir.path().join("signals");
    let name = unique("cli-usr");
    // Waiting for a busy lock: USR1 and QUIT-less signals must not kill it.
    let marker = sleep_marker();
    let mut holder = quorumlock(&cluster.urls());
    holder.args(["run", &name, "--", "sleep", &marker]);
    let mut holder = holder.stderr(Stdio::null()).spawn().expect("holder");
    wait_held(&cluster, &name, 3);
    let mut waiter = quorumlock(&cluster.urls());
    waiter.args(["run", &name, "--", "true"]);
    let mut waiter = waiter.stderr(Stdio::null()).spawn().expect("waiter");
    // Its handlers are in place (not a fixed sleep: a loaded machine may
    // take longer to start it, and USR1's default action kills).
    assert!(
        support::block_on_eventually(Duration::from_secs(20), || catches(waiter.id(), &[10, 12])),
        "quorumlock installed its handlers"
    );
    std::thread::sleep(Duration::from_millis(300));
    for sig in ["-USR1", "-USR2"] {
        signal(waiter.id(), sig);
    }
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        matches!(waiter.try_wait(), Ok(None)),
        "USR1/USR2 while waiting did not kill quorumlock"
    );
    signal(waiter.id(), "-QUIT");
    let status = wait_within(&mut waiter, Duration::from_secs(10));
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(128 + 3),
        "QUIT ends the wait"
    );
    signal(holder.id(), "-TERM");
    let _ = wait_within(&mut holder, Duration::from_secs(10));
    assert!(none_left(&marker, Duration::from_secs(3)));

    // While the command runs: every signal is passed on to it.
    let name = unique("cli-usr-run");
    let script_marker = format!("usr-run-{:016x}", rand::random::<u64>());
    let script = format!(
        "for s in USR1 USR2 HUP QUIT; do trap \"echo $s >> {log}\" $s; done; \
         trap 'echo TERM >> {log}; exit 0' TERM; \
         while :; do sleep 0.02; done",
        log = log.display()
    );
    let mut cmd = quorumlock(&cluster.urls());
    cmd.args(["run", &name, "--", "sh", "-c", &script, &script_marker]);
    let mut child = cmd.stderr(Stdio::null()).spawn().expect("spawn");
    wait_held(&cluster, &name, 3);
    // The command runs and its traps are set (USR1 USR2 HUP QUIT TERM):
    // a signal sent before that would kill it or never reach it.
    assert!(
        marked_catches(&script_marker, child.id(), &[10, 12, 1, 3, 15]),
        "the command set its traps"
    );
    let mut expected = Vec::new();
    for sig in ["USR1", "USR2", "HUP", "QUIT", "TERM"] {
        signal(child.id(), &format!("-{sig}"));
        expected.push(sig);
        assert!(
            support::block_on_eventually(Duration::from_secs(5), || std::fs::read_to_string(&log)
                .unwrap_or_default()
                .lines()
                .count()
                == expected.len()),
            "{sig} reached the command"
        );
    }
    let status = wait_within(&mut child, Duration::from_secs(10));
    assert_eq!(status.and_then(|s| s.code()), Some(0));
    let seen = std::fs::read_to_string(&log).expect("log");
    assert_eq!(seen.lines().collect::<Vec<_>>(), expected);
    assert!(released(&cluster, &name));
}

// ---- 4. a signal during acquisition --------------------------------

#[test]
fn a_signal_during_acquisition_leaves_no_key_behind() {
    let mut cluster = Cluster::local(5);
    let urls = cluster.proxied();
    let name = unique("cli-acq-signal");
    // Someone else holds the lock: quorumlock connects and waits.
    for i in 0..5 {
        let _: () = cluster.exec(
            i,
            redis::cmd("SET")
                .arg(&name)
                .arg("other")
                .arg("PX")
                .arg(60_000),
        );
    }
    let mut cmd = quorumlock_timing(&urls, "5s");
    cmd.args(["-v", "run", "--ttl", "60s", &name, "--", "true"]);
    let mut child = cmd.stderr(Stdio::piped()).spawn().expect("spawn");
    let stderr = reader(child.stderr.take());
    std::thread::sleep(Duration::from_millis(1000));
    // Now requests go through at once but three nodes' replies come 1.5 s
    // late: when the holder leaves, the next attempt sets the key on every
    // node and then waits.
    for i in 2..5 {
        cluster
            .proxy(i)
            .set(Fault::latency(Duration::from_millis(1500)));
    }
    for i in 0..5 {
        let _: () = cluster.exec(i, redis::cmd("DEL").arg(&name));
    }
    let everywhere = support::block_on_eventually(Duration::from_secs(20), || {
        cluster
            .values(name.as_bytes())
            .iter()
            .all(|v| v.as_deref().is_some_and(|v| v != b"other"))
    });
    if !everywhere {
        let _ = child.kill();
        let stderr = stderr
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_default();
        panic!(
            "the attempt did not set the key everywhere: {:?}\n{stderr}",
            cluster.values(name.as_bytes())
        );
    }
    signal(child.id(), "-TERM");
    let status = wait_within(&mut child, Duration::from_secs(30));
    let _ = child.kill();
    let stderr = stderr
        .recv_timeout(Duration::from_secs(5))
        .unwrap_or_default();
    assert_eq!(status.and_then(|s| s.code()), Some(128 + 15), "{stderr}");
    cluster.heal_proxies();
    assert!(
        released(&cluster, &name),
        "keys left after an interrupted acquisition: {:?}\n{stderr}",
        cluster.values(name.as_bytes())
    );
}

// ---- 6. a group signal reaches the command once ---------------------

#[test]
fn a_signal_to_quorumlocks_process_group_reaches_the_command_once() {
    use std::os::unix::process::CommandExt;
    let cluster = Cluster::shared(3);
    let dir = tempfile::tempdir().expect("dir");
    let log = dir.path().join("terms");
    let name = unique("cli-pgrp");
    let marker = format!("pgrp-{:016x}", rand::random::<u64>());
    // perl runs its handler once per delivered signal.
    let mut cmd = quorumlock(&cluster.urls());
    cmd.args(["run", &name, "--", "perl", "-e"])
        .arg(
            "$SIG{TERM} = sub { open(my $f, '>>', $ARGV[0]); print $f \"TERM\\n\"; close $f }; \
             select(undef, undef, undef, 0.01) while 1;",
        )
        .arg(&log)
        .arg(&marker)
        .process_group(0);
    let mut child = cmd.stderr(Stdio::null()).spawn().expect("spawn");
    wait_held(&cluster, &name, 3);
    // perl runs and its TERM handler is set (no fixed sleep for that).
    assert!(
        marked_catches(&marker, child.id(), &[15]),
        "the command set its handler"
    );
    // What Ctrl-C and systemd's KillMode=control-group do: the whole group.
    let _ = Command::new("kill")
        .args(["-TERM", "--", &format!("-{}", child.id())])
        .status();
    // The first TERM (bounded wait), then time for a second to show up.
    support::block_on_eventually(Duration::from_secs(10), || {
        std::fs::read_to_string(&log).is_ok_and(|t| !t.is_empty())
    });
    std::thread::sleep(Duration::from_millis(1000));
    let terms = std::fs::read_to_string(&log).unwrap_or_default();
    signal(child.id(), "-KILL");
    let _ = child.wait();
    let gone = none_left(&marker, Duration::from_secs(3));
    assert_eq!(
        terms.lines().count(),
        1,
        "TERM reached the command: {terms:?}"
    );
    assert!(gone, "the command died with quorumlock");
}

// ---- 7. no quorum ----------------------------------------------------

#[test]
fn no_quorum_is_said_and_the_wait_for_it_is_bounded() {
    let mut cluster = Cluster::local(5);
    for i in 0..3 {
        cluster.kill(i);
    }
    let name = unique("cli-noquorum");
    let mut cmd = quorumlock(&cluster.urls());
    cmd.args(["run", "--wait", "1500ms", &name, "--", "true"]);
    let ran = run_within(cmd, Duration::from_secs(20));
    assert_eq!(ran.code(), Some(69), "{}", ran.stderr);
    assert!(ran.stderr.contains("no quorum"), "{}", ran.stderr);
    assert!(ran.stderr.contains("3 refused"), "{}", ran.stderr);
    assert!(!ran.stderr.contains("is free"), "{}", ran.stderr);

    // Without --wait (unlimited for contention), the outage bound ends it.
    let mut cmd = quorumlock(&cluster.urls());
    cmd.args(["run", "--outage-wait", "1s", &name, "--", "true"]);
    let ran = run_within(cmd, Duration::from_secs(20));
    assert_eq!(ran.code(), Some(69), "{}", ran.stderr);

    let mut cmd = quorumlock(&cluster.urls());
    cmd.args(["run", "--no-wait", &name, "--", "true"]);
    let ran = run_within(cmd, Duration::from_secs(10));
    assert_eq!(ran.code(), Some(69), "{}", ran.stderr);
    assert!(
        released(&cluster, &name),
        "the partial grants were released before exit"
    );
}

/// And says how many nodes refused the credentials, without implying that
/// the nodes the decision did not wait for accepted them.
#[test]
fn a_wrong_password_fails_at_once_with_78() {
    let cluster = Cluster::local(5);
    let urls: Vec<String> = cluster
        .urls()
        .iter()
        .map(|u| u.replace("redis://", "redis://:not-the-password@"))
        .collect();
    let name = unique("cli-wrongpass");
    let mut cmd = quorumlock(&urls);
    cmd.args(["run", &name, "--", "true"]);
    let ran = run_within(cmd, Duration::from_secs(10));
    assert_eq!(ran.code(), Some(78), "{}", ran.stderr);
    assert!(!ran.stderr.contains("not-the-password"), "{}", ran.stderr);
    assert!(
        ran.stderr.contains(
            "no quorum (3 of 5 nodes needed): 3 refused the credentials (WRONGPASS); 2 \
             unanswered when it was decided"
        ),
        "{}",
        ran.stderr
    );
}

#[test]
fn a_key_of_another_type_is_not_reported_free() {
    let cluster = Cluster::shared(3);
    let name = unique("cli-wrongtype");
    for i in 0..3 {
        let _: () = cluster.exec(i, redis::cmd("HSET").arg(&name).arg("f").arg("v"));
    }
    let mut status = quorumlock(&cluster.urls());
    status.args(["status", &name]);
    let ran = run_within(status, Duration::from_secs(10));
    assert!(!ran.stdout.contains("is free"), "{}", ran.stdout);
    assert_eq!(ran.code(), Some(78), "{}", ran.stdout);

    let mut run = quorumlock(&cluster.urls());
    run.args(["run", "--no-wait", &name, "--", "true"]);
    let ran = run_within(run, Duration::from_secs(10));
    assert_eq!(ran.code(), Some(78), "{}", ran.stderr);
    assert!(!ran.stderr.contains("is free"), "{}", ran.stderr);
    assert!(ran.stderr.contains("WRONGTYPE"), "{}", ran.stderr);

    let mut run = quorumlock(&cluster.urls());
    run.args(["run", &name, "--", "true"]);
    let ran = run_within(run, Duration::from_secs(10));
    assert_eq!(
        ran.code(),
        Some(78),
        "waiting does not hide it: {}",
        ran.stderr
    );
    for i in 0..3 {
        let _: () = cluster.exec(i, redis::cmd("DEL").arg(&name));
    }
}

// ---- 8. a TTL too short to renew ------------------------------------

#[test]
fn a_ttl_too_short_to_renew_is_refused_with_the_minimum() {
    let cluster = Cluster::shared(3);
    let name = unique("cli-shortttl");
    let mut cmd = quorumlock(&cluster.urls());
    cmd.args(["run", "--ttl", "3ms", &name, "--", "true"]);
    let ran = run_within(cmd, Duration::from_secs(10));
    assert_eq!(ran.code(), Some(2), "{}", ran.stderr);
    assert!(ran.stderr.contains("minimum is 800ms"), "{}", ran.stderr);
    assert_eq!(cluster.holders(name.as_bytes()), 0);
}

// ---- 9. secrets ------------------------------------------------------

#[test]
fn passwords_reach_neither_the_screen_nor_the_command() {
    let cluster = Cluster::shared(3);
    let secret = "s3cret-pw";
    let mut help = Command::new(bin());
    help.env(
        "QUORUMLOCK_NODES",
        format!("redis://:{secret}@127.0.0.1:1,redis://127.0.0.1:2"),
    )
    .args(["run", "--help"]);
    let ran = run_within(help, Duration::from_secs(10));
    assert_eq!(ran.code(), Some(0));
    assert!(!ran.stdout.contains(secret), "{}", ran.stdout);

    let mut bad = Command::new(bin());
    bad.args([
        "--nodes",
        &format!("unix:///tmp/none.sock?db=x&pass={secret}"),
    ])
    .args(["status", "r"]);
    let ran = run_within(bad, Duration::from_secs(10));
    assert_eq!(ran.code(), Some(2), "{}", ran.stderr);
    assert!(!ran.stderr.contains(secret), "{}", ran.stderr);

    let dir = tempfile::tempdir().expect("dir");
    let env = dir.path().join("env");
    let name = unique("cli-env-secret");
    let mut cmd = quorumlock(&cluster.urls());
    cmd.args(["run", &name, "--", "sh", "-c"])
        .arg(format!("env > {}", env.display()));
    let ran = run_within(cmd, Duration::from_secs(10));
    assert_eq!(ran.code(), Some(0), "{}", ran.stderr);
    let seen = std::fs::read_to_string(&env).expect("env");
    assert!(!seen.contains("QUORUMLOCK_NODES"), "{seen}");
    assert!(seen.contains("QUORUMLOCK_RESOURCE="), "{seen}");

    let mut cmd = quorumlock(&cluster.urls());
    cmd.args(["run", "--export-nodes", &name, "--", "sh", "-c"])
        .arg(format!("env > {}", env.display()));
    let ran = run_within(cmd, Duration::from_secs(10));
    assert_eq!(ran.code(), Some(0), "{}", ran.stderr);
    let seen = std::fs::read_to_string(&env).expect("env");
    assert!(seen.contains("QUORUMLOCK_NODES="), "asked for: {seen}");
}

// ---- smaller ---------------------------------------------------------

#[test]
fn a_hung_node_costs_nothing_and_still_gets_the_release() {
    let mut cluster = Cluster::local(5);
    cluster.pause(4);
    let name = unique("cli-hung");
    // A node timeout far above what the run needs: waiting for the hung
    // node at any point would take at least 10 s, while a run takes well
    // under a second; the bound between leaves room for a loaded machine
    // on both sides.
    let mut cmd = quorumlock_timing(&cluster.urls(), "10s");
    cmd.args(["run", "--ttl", "120s", &name, "--", "true"]);
    let ran = run_within(cmd, Duration::from_secs(60));
    assert_eq!(ran.code(), Some(0), "{}", ran.stderr);
    assert!(
        ran.took < Duration::from_secs(7),
        "exit waited for the hung node: {:?}",
        ran.took
    );
    cluster.resume(4);
    assert!(
        released(&cluster, &name),
        "the release reached the node once it resumed: {:?}",
        cluster.values(name.as_bytes())
    );
}

#[test]
fn verbose_output_into_a_pipe_has_no_colour_codes() {
    let cluster = Cluster::shared(3);
    let name = unique("cli-ansi");
    let mut cmd = quorumlock(&cluster.urls());
    cmd.args(["-v", "run", &name, "--", "true"]);
    let ran = run_within(cmd, Duration::from_secs(10));
    assert_eq!(ran.code(), Some(0), "{}", ran.stderr);
    assert!(!ran.stderr.is_empty());
    assert!(!ran.stderr.contains('\x1b'), "{:?}", ran.stderr);
}

#[test]
fn the_waiting_line_is_cleared_before_the_command_writes() {
    let cluster = Cluster::shared(3);
    let name = unique("cli-tty");
    let marker = sleep_marker();
    let mut holder = quorumlock(&cluster.urls());
    holder.args(["run", &name, "--", "sleep", &marker]);
    let mut holder = holder.stderr(Stdio::null()).spawn().expect("holder");
    wait_held(&cluster, &name, 3);
    let releaser = {
        let pid = holder.id();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(1500));
            signal(pid, "-TERM");
        })
    };
    // script(1) gives quorumlock a terminal.
    let line = format!(
        "QUORUMLOCK_NODES={} {} --node-timeout 100ms run {name} -- printf CMD-OUTPUT",
        cluster.urls().join(","),
        bin()
    );
    let mut cmd = Command::new("script");
    cmd.args(["-qec", &line, "/dev/null"]).stdin(Stdio::null());
    let ran = run_within(cmd, Duration::from_secs(20));
    let _ = releaser.join();
    let _ = wait_within(&mut holder, Duration::from_secs(10));
    assert!(none_left(&marker, Duration::from_secs(3)));
    assert_eq!(ran.code(), Some(0), "{:?}", ran.stdout);
    assert!(
        ran.stdout.contains("waiting for the lock"),
        "{:?}",
        ran.stdout
    );
    assert!(
        ran.stdout.contains("\x1b[2KCMD-OUTPUT"),
        "the live line was cleared first: {:?}",
        ran.stdout
    );
}

#[test]
fn a_ttl_of_one_year_and_a_resource_starting_with_a_dash_are_accepted() {
    let cluster = Cluster::shared(3);
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("resource");
    let name = unique("cli-year");
    let mut cmd = quorumlock(&cluster.urls());
    cmd.args(["run", "--ttl", "1y", &name, "--", "true"]);
    let ran = run_within(cmd, Duration::from_secs(10));
    assert_eq!(ran.code(), Some(0), "{}", ran.stderr);
    assert!(released(&cluster, &name));

    let name = format!("-{}", unique("cli-dash"));
    let mut cmd = quorumlock(&cluster.urls());
    cmd.args(["run", "--resource", &name, "--", "sh", "-c"])
        .arg(format!(
            "echo \"$QUORUMLOCK_RESOURCE\" > {}",
            file.display()
        ));
    let ran = run_within(cmd, Duration::from_secs(10));
    assert_eq!(ran.code(), Some(0), "{}", ran.stderr);
    assert_eq!(std::fs::read_to_string(&file).expect("file").trim(), name);
    assert!(released(&cluster, &name));
}

#[test]
fn the_deadline_file_follows_renewals() {
    let cluster = Cluster::shared(3);
    let dir = tempfile::tempdir().expect("dir");
    let (first, later) = (dir.path().join("first"), dir.path().join("later"));
    let name = unique("cli-deadline");
    let mut cmd = quorumlock(&cluster.urls());
    cmd.args(["run", "--ttl", "900ms", &name, "--", "sh", "-c"])
        .arg(format!(
            "cat \"$QUORUMLOCK_DEADLINE_FILE\" > {first}; sleep 1.5; \
             cat \"$QUORUMLOCK_DEADLINE_FILE\" > {later}; echo $QUORUMLOCK_DEADLINE >> {first}",
            first = first.display(),
            later = later.display()
        ));
    let ran = run_within(cmd, Duration::from_secs(15));
    assert_eq!(ran.code(), Some(0), "{}", ran.stderr);
    let read = |p: &Path| -> Vec<u128> {
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    };
    let (first, later) = (read(&first), read(&later));
    assert_eq!(first.len(), 2, "file and variable: {first:?}");
    assert!(
        first[1] <= first[0] + 50,
        "the variable is the first window's end"
    );
    assert!(
        later.first().is_some_and(|&l| l > first[0] + 500),
        "renewed deadline {later:?} after {first:?}"
    );
}

#[test]
fn one_server_listed_twice_under_other_names_is_refused() {
    let cluster = Cluster::shared(3);
    let name = unique("cli-sameserver");
    let urls = cluster.urls();
    let port = urls[0].rsplit(':').next().expect("port").to_owned();
    for twin in [
        format!("redis://localhost:{port}"),
        format!("redis://127.0.0.1:{port}/1"),
    ] {
        let nodes = vec![urls[0].clone(), twin.clone(), urls[1].clone()];
        let mut cmd = quorumlock(&nodes);
        cmd.args(["run", &name, "--", "true"]);
        let ran = run_within(cmd, Duration::from_secs(10));
        assert_eq!(ran.code(), Some(2), "{twin}: {}", ran.stderr);
        assert!(ran.stderr.contains("same server"), "{}", ran.stderr);
    }
}

#[test]
fn ipv6_nodes_are_shown_in_brackets() {
    let mut status = Command::new(bin());
    status
        .args(["--nodes", "redis://[::1]:1,redis://127.0.0.1:1"])
        .args(["--connect-timeout", "200ms", "status", "r"]);
    let ran = run_within(status, Duration::from_secs(10));
    assert!(ran.stdout.contains("[::1]:1/0"), "{}", ran.stdout);
}

/// With CMD in its own process group, a terminal must still work as with
/// a shell: CMD's group is the terminal's foreground group while it runs,
/// so it can read the terminal, and Ctrl-C reaches it (once).
#[test]
fn a_command_on_a_terminal_can_read_it_and_gets_ctrl_c() {
    use std::io::Write;
    let cluster = Cluster::shared(3);
    let nodes = cluster.urls().join(",");
    let in_terminal = |name: &str, command: &str, input: &[u8], after: Duration| {
        let line = format!(
            "QUORUMLOCK_NODES={nodes} {} --node-timeout 100ms run {name} -- {command}; \
             echo rc=$?",
            bin()
        );
        let mut script = Command::new("script")
            .args(["-qec", &line, "/dev/null"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("script");
        let stdout = reader(script.stdout.take());
        let mut stdin = script.stdin.take().expect("stdin");
        std::thread::sleep(after);
        let _ = stdin.write_all(input);
        let _ = stdin.flush();
        let status = wait_within(&mut script, Duration::from_secs(15));
        drop(stdin);
        if status.is_none() {
            let _ = script.kill();
        }
        stdout
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_default()
    };

    let name = unique("cli-tty-read");
    let shown = in_terminal(
        &name,
        "sh -c 'read x; echo got:$x'",
        b"hello\n",
        Duration::from_millis(1000),
    );
    assert!(shown.contains("got:hello"), "{shown:?}");
    assert!(shown.contains("rc=0"), "{shown:?}");

    let name = unique("cli-tty-ctrlc");
    let marker = sleep_marker();
    let shown = in_terminal(
        &name,
        &format!("sleep {marker}"),
        b"\x03",
        Duration::from_millis(1000),
    );
    assert!(shown.contains("rc=130"), "{shown:?}");
    assert!(none_left(&marker, Duration::from_secs(3)));
    assert!(released(&cluster, &name));
}

// ---- durations too large for an instant ------------------------------

#[test]
fn waits_and_graces_too_large_for_an_instant_mean_no_limit() {
    // humantime accepts up to ~5.8e11 years; an Instant cannot hold that.
    const HUGE: &str = "500000000000y";
    let cluster = Cluster::shared(3);
    let name = unique("cli-huge-wait");
    let mut cmd = quorumlock(&cluster.urls());
    cmd.args(["run", "--wait", HUGE, &name, "--", "true"]);
    let ran = run_within(cmd, Duration::from_secs(15));
    assert_eq!(ran.code(), Some(0), "--wait {HUGE}: {}", ran.stderr);
    assert!(released(&cluster, &name));

    // A leftover process is terminated with a grace that never runs out:
    // it dies of the SIGTERM, the supervisor does not panic on the way.
    let name = unique("cli-huge-grace");
    let marker = sleep_marker();
    let mut cmd = quorumlock(&cluster.urls());
    cmd.args(["run", "--grace", HUGE, &name, "--", "sh", "-c"])
        .arg(format!("sleep {marker} > /dev/null 2>&1 & exit 3"));
    let ran = run_within(cmd, Duration::from_secs(15));
    let gone = none_left(&marker, Duration::from_secs(3));
    assert_eq!(ran.code(), Some(3), "--grace {HUGE}: {}", ran.stderr);
    assert!(gone, "the leftover was terminated");
    assert!(released(&cluster, &name));
}
