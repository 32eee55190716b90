//! `quorumlock run [--permits L] RESOURCE -- CMD [ARGS…]` and `quorumlock
//! elect NAME -- CMD [ARGS…]`: the supervisor.
//!
//! Order of events: signal handlers first (kept until exit), checks of the
//! TTL and the node list, the lock (or permits of the semaphore, which are
//! the lock over their slots, or the leadership, a fenced lock whose token
//! is the epoch: the rest is the same), a last look for a stop signal,
//! then
//! CMD in its own process group; when CMD exits (or the lock is lost),
//! whatever is left of everything it started is terminated while the lock
//! is still watched, then the lock is released and the process exits as
//! soon as a quorum confirmed the release.

use std::io::ErrorKind;
use std::time::{Duration, Instant};

use quorumlock::{Redlock, Renewal};

use crate::acquire::{self, AcquireOptions};
use crate::args::{Common, HoldArgs};
use crate::child::{self, Left, Running, Spec};
use crate::deadline::{self, DeadlineFile};
use crate::output::Out;
use crate::signals::{status_for, Signals};
use crate::target::{Held, Taken, Target};
use crate::{client, exit};

/// The shortest TTL `run` accepts, in node timeouts: acquisition (1), a
/// renewal at a third of the TTL (1) with one retry (2), and the safety
/// margin of two node timeouts (2) must fit in two thirds of the TTL with
/// room to spare.
pub const MIN_TTL_NODE_TIMEOUTS: u32 = 8;

/// How long before the lock's validity ends a lost lock's SIGKILL is
/// sent: finding every process of CMD's in `/proc` and signalling each
/// takes a few milliseconds, and a timer may fire a millisecond late.
const KILL_LEAD: Duration = Duration::from_millis(20);

/// Takes `target` as `args` say, runs CMD under it, returns the exit status.
pub async fn run(common: &Common, args: &HoldArgs, target: Target) -> u8 {
    let out = Out::new(common);
    let mut signals = match Signals::install() {
        Ok(s) => s,
        Err(e) => {
            out.error(&format!("cannot install signal handlers: {e}"));
            return exit::SOFTWARE;
        }
    };
    let resource = args.resource.name();
    let min_ttl = common.node_timeout.saturating_mul(MIN_TTL_NODE_TIMEOUTS);
    if args.ttl < min_ttl {
        out.error(&format!(
            "--ttl {} is too short to renew the lock with --node-timeout {}: the minimum \
             is {} ({MIN_TTL_NODE_TIMEOUTS} × the node timeout)",
            humantime::format_duration(args.ttl),
            humantime::format_duration(common.node_timeout),
            humantime::format_duration(min_ttl)
        ));
        return exit::USAGE;
    }
    let redlock = match client::connect(common).await {
        Ok(r) => r,
        Err(code) => return code,
    };
    let options = AcquireOptions::new(common, args, target);
    let Taken { lock, slots } =
        match acquire::acquire(&redlock, &options, &resource, out, &mut signals).await {
            Ok(taken) => taken,
            Err(code) => return code,
        };
    let noun = options.target.noun();
    let releaser = Releaser {
        redlock: redlock.clone(),
        node_timeout: common.node_timeout,
        out,
        noun,
    };
    // A stop signal that came while the lock was being granted is acted
    // on here: CMD never starts. (The yield lets the runtime read the
    // signals delivered so far.)
    tokio::task::yield_now().await;
    if let Some(sig) = signals.pending_stop() {
        out.say(&format!(
            "got {sig} before the command started; releasing the {noun}"
        ));
        releaser.release(lock).await;
        return status_for(sig);
    }
    let slots = slots
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let what = match &options.target {
        Target::Permit { permits, .. } => {
            format!("{noun} of {resource:?} taken (slots {slots} of {permits}, ")
        }
        _ => format!("{noun} {resource:?} taken ("),
    };
    out.detail(&format!(
        "{what}token {}…, valid {:?}{})",
        lock.token_prefix(),
        lock.validity(),
        lock.fence()
            .map(|f| format!(", fence {f}"))
            .unwrap_or_default()
    ));
    let mut file = match DeadlineFile::create() {
        Ok(f) => Some(f),
        Err(e) => {
            out.say(&format!("no QUORUMLOCK_DEADLINE_FILE: {e}"));
            None
        }
    };
    if let Some(file) = &mut file {
        file.update(lock.deadline());
    }
    let mut env = vec![
        ("QUORUMLOCK_RESOURCE", resource.clone()),
        (
            "QUORUMLOCK_DEADLINE",
            deadline::unix_ms(lock.deadline()).to_string(),
        ),
    ];
    if let Some(file) = &file {
        env.push((
            "QUORUMLOCK_DEADLINE_FILE",
            file.path().display().to_string(),
        ));
    }
    if let Some(fence) = lock.fence() {
        let name = match options.target {
            Target::Leadership { .. } => "QUORUMLOCK_EPOCH",
            _ => "QUORUMLOCK_FENCE",
        };
        env.push((name, fence.to_string()));
    }
    if !slots.is_empty() {
        env.push(("QUORUMLOCK_SLOT", slots));
    }
    if args.export_nodes {
        env.push(("QUORUMLOCK_NODES", common.nodes.join(",")));
    }
    let spec = Spec {
        argv: &args.command,
        env,
        env_remove: vec!["QUORUMLOCK_NODES"],
    };
    let running = match child::spawn(&spec) {
        Ok(running) => running,
        Err(e) => {
            let code = match e.kind() {
                ErrorKind::NotFound => exit::NOT_FOUND,
                _ => exit::CANNOT_EXECUTE,
            };
            out.error(&format!("cannot run {:?}: {e}", args.command[0]));
            releaser.release(lock).await;
            return code;
        }
    };
    supervise(
        running,
        lock,
        args,
        &resource,
        &releaser,
        &mut signals,
        file,
    )
    .await
}

/// Waits for the command and everything it started, passing signals on to
/// its group, while the lock renews itself; ends all of it as soon as the
/// lock is lost, by the end of the validity at the latest.
///
/// When CMD exits with processes of its still running (in its group or
/// not), the lock stays held and watched while they get SIGTERM and, after
/// `--grace`, SIGKILL; it is released once nothing of CMD's runs. If the
/// lock is lost meanwhile, the SIGKILL comes by the end of the validity
/// and `run` exits 79.
async fn supervise(
    mut running: Running,
    lock: Held,
    args: &HoldArgs,
    resource: &str,
    releaser: &Releaser,
    signals: &mut Signals,
    mut file: Option<DeadlineFile>,
) -> u8 {
    let out = releaser.out;
    // A leadership is renewed from its election on: this restarts its
    // renewal on the same schedule.
    let lost = match lock.auto_renew(Renewal::default()) {
        Ok(signal) => signal,
        Err(e) => {
            out.error(&format!(
                "cannot renew the {}: {e}; terminating the command",
                releaser.noun
            ));
            running.terminate(args.grace).await;
            running.finish();
            releaser.release(lock).await;
            return exit::SOFTWARE;
        }
    };
    let mut refresh = tokio::time::interval(deadline::REFRESH);
    // CMD's own status, once it exited.
    let mut status: Option<u8> = None;
    let mut lost_lock = false;
    let left = loop {
        let check_at = running.next_check();
        tokio::select! {
            result = running.child.wait(), if status.is_none() => {
                status = Some(match result {
                    Ok(result) => code_of(result),
                    Err(e) => {
                        out.error(&format!("waiting for the command: {e}"));
                        exit::SOFTWARE
                    }
                });
                if running.stopping() {
                    continue;
                }
                if !running.any_alive() {
                    break Left::Nothing;
                }
                out.say(&format!(
                    "the command exited but left processes running; terminating them \
                     (SIGTERM, SIGKILL after {}) before releasing the {}",
                    humantime::format_duration(args.grace),
                    releaser.noun
                ));
                running.stop(Instant::now().checked_add(args.grace));
            }
            kind = lost.lost(), if !lost_lock => {
                lost_lock = true;
                let why = lost
                    .reason()
                    .map(|r| r.to_string())
                    .unwrap_or_else(|| kind.as_str().to_owned());
                // Past the validity another holder may run: the grace never
                // reaches beyond it (none at all once the lock has expired
                // or a majority refused it).
                let deadline = lock.deadline();
                let kill_by = deadline.checked_sub(KILL_LEAD).unwrap_or(deadline);
                let grace = args
                    .grace
                    .min(kill_by.saturating_duration_since(Instant::now()));
                out.error(&format!(
                    "{} LOST on {resource:?} ({}): {why}; terminating the command and \
                     everything it started (SIGTERM, SIGKILL after {})",
                    releaser.noun.to_ascii_uppercase(),
                    kind.as_str(),
                    humantime::format_duration(Duration::from_millis(
                        u64::try_from(grace.as_millis()).unwrap_or(u64::MAX)
                    ))
                ));
                let kill_at = Instant::now()
                    .checked_add(grace)
                    .map_or(kill_by, |at| at.min(kill_by));
                running.stop(Some(kill_at));
            }
            sig = signals.next() => {
                running.signal(sig);
                out.detail(&format!("passed {sig} on to the command's process group"));
            }
            _ = refresh.tick() => {
                if let Some(file) = &mut file {
                    file.update(lock.deadline());
                }
            }
            () = running.exits.next() => running.reap(),
            () = tokio::time::sleep_until(check_at.into()), if running.stopping() => {
                match running.progress() {
                    Left::Running => {}
                    left => break left,
                }
            }
        }
    };
    if left == Left::Stuck {
        out.error(&format!(
            "processes of the command survived SIGKILL; releasing the {} anyway",
            releaser.noun
        ));
    } else if lost_lock && running.killed() {
        out.error("the command or a process it started ignored SIGTERM; it was sent SIGKILL");
    }
    // Everything of CMD's is gone, CMD too: its status is there at once
    // (unless it is among what survived SIGKILL).
    let status = match status {
        Some(status) => status,
        None => match running.child.try_wait() {
            Ok(Some(result)) => code_of(result),
            _ => exit::SOFTWARE,
        },
    };
    running.finish();
    releaser.release(lock).await;
    if lost_lock {
        exit::LOST
    } else {
        status
    }
}

fn code_of(status: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    if let Some(code) = status.code() {
        return u8::try_from(code).unwrap_or(1);
    }
    status
        .signal()
        .and_then(|s| u8::try_from(128 + s).ok())
        .unwrap_or(exit::SOFTWARE)
}

/// Releases the lock: returns once a quorum confirmed and the other
/// nodes' releases are out too, waiting for those at most one node timeout
/// (at most 250 ms): a node still waiting for its `SET` reply gets its
/// release only after it, and a hung node must not delay the exit by more.
struct Releaser {
    redlock: Redlock,
    node_timeout: Duration,
    out: Out,
    /// What is released, for messages: `lock`, `permit` or `leadership`.
    noun: &'static str,
}

impl Releaser {
    async fn release(&self, lock: Held) {
        if let Err(e) = lock.release().await {
            self.out
                .say(&format!("release: {e} (the keys expire with their TTL)"));
        }
        let limit = self.node_timeout.min(Duration::from_millis(250));
        self.redlock.settle(limit).await;
    }
}
