//! `quorumlock run RESOURCE -- CMD [ARGS…]`.

use std::io::ErrorKind;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Args;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use quorumlock::{Lock, Redlock, Renewal};
use tokio::process::{Child, Command};
use tokio::signal::unix::{signal, SignalKind};

use crate::output::Out;
use crate::{exit, Common};

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Lock TTL; the lock is renewed every TTL/3 while CMD runs.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub ttl: Duration,
    /// Wait at most this long for a busy lock (default: wait until it is free).
    #[arg(long, value_parser = humantime::parse_duration, conflicts_with = "no_wait")]
    pub wait: Option<Duration>,
    /// Exit at once with status 75 if the lock is busy (a nightly job's "skip").
    #[arg(long)]
    pub no_wait: bool,
    /// Hand CMD a fencing token in QUORUMLOCK_FENCE.
    #[arg(long)]
    pub fenced: bool,
    /// After a lost lock: time between SIGTERM and SIGKILL.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub grace: Duration,
    /// The lock's name (the Redis key).
    pub resource: String,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

pub async fn run(common: &Common, args: RunArgs) -> u8 {
    let out = Out::new(common);
    let redlock = match crate::redlock(common).await {
        Ok(r) => r,
        Err(e) => {
            out.error(&e.to_string());
            return crate::status_of(&e);
        }
    };
    let Some(lock) = acquire(&redlock, &args, out).await else {
        return exit::BUSY;
    };
    let lock = match lock {
        Ok(lock) => lock,
        Err(code) => return code,
    };
    if out.verbose() {
        out.say(&format!(
            "lock {:?} taken (token {}…, valid {:?}{})",
            args.resource,
            lock.token_prefix(),
            lock.validity(),
            lock.fence()
                .map(|f| format!(", fence {f}"))
                .unwrap_or_default()
        ));
    }
    let child = match spawn(&args, &lock) {
        Ok(child) => child,
        Err(e) => {
            let code = match e.kind() {
                ErrorKind::NotFound => exit::NOT_FOUND,
                ErrorKind::PermissionDenied => exit::CANNOT_EXECUTE,
                _ => exit::CANNOT_EXECUTE,
            };
            out.error(&format!("cannot run {:?}: {e}", args.command[0]));
            release(lock, out).await;
            redlock.settle(common.node_timeout * 4).await;
            return code;
        }
    };
    let code = supervise(child, lock, &args, out).await;
    // Releases still on their way to the slowest nodes finish before exit.
    redlock.settle(common.node_timeout * 4).await;
    code
}

/// Takes the lock; `None` when it is busy, `Some(Err(code))` on other errors.
async fn acquire(redlock: &Redlock, args: &RunArgs, out: Out) -> Option<Result<Lock, u8>> {
    let mut request = redlock.acquisition(&args.resource, args.ttl);
    if args.fenced {
        request = request.fenced();
    }
    request = if args.no_wait {
        // A couple of quick retries only settle split votes between
        // contenders that started together.
        request.retries(2)
    } else if let Some(wait) = args.wait {
        request.wait(wait)
    } else {
        request.retries(u32::MAX)
    };
    let started = Instant::now();
    let progress = {
        let (redlock, resource, waiting) = (redlock.clone(), args.resource.clone(), !args.no_wait);
        tokio::spawn(async move {
            if !waiting {
                return;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
            loop {
                let status = redlock.status(&resource).await;
                out.progress(&format!(
                    "waiting for the lock ({:.0}s): {status}",
                    started.elapsed().as_secs_f64()
                ));
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        })
    };
    let mut interrupt = signal(SignalKind::interrupt()).ok();
    let mut terminate = signal(SignalKind::terminate()).ok();
    let result = tokio::select! {
        r = request.acquire() => r,
        _ = recv(&mut interrupt) => {
            progress.abort();
            out.say("interrupted while waiting for the lock");
            return Some(Err(128 + Signal::SIGINT as u8));
        }
        _ = recv(&mut terminate) => {
            progress.abort();
            out.say("terminated while waiting for the lock");
            return Some(Err(128 + Signal::SIGTERM as u8));
        }
    };
    progress.abort();
    match result {
        Ok(lock) => Some(Ok(lock)),
        Err(e) if e.is_contended() => {
            let status = redlock.status(&args.resource).await;
            out.say(&format!("lock busy: {status}"));
            None
        }
        Err(e) => {
            out.error(&e.to_string());
            Some(Err(crate::status_of(&e)))
        }
    }
}

async fn recv(sig: &mut Option<tokio::signal::unix::Signal>) {
    match sig {
        Some(s) => {
            s.recv().await;
        }
        None => std::future::pending().await,
    }
}

fn spawn(args: &RunArgs, lock: &Lock) -> std::io::Result<Child> {
    let deadline = SystemTime::now()
        .checked_add(lock.validity())
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let mut cmd = Command::new(&args.command[0]);
    cmd.args(&args.command[1..])
        .env("QUORUMLOCK_RESOURCE", &args.resource)
        .env("QUORUMLOCK_DEADLINE", deadline.to_string());
    if let Some(fence) = lock.fence() {
        cmd.env("QUORUMLOCK_FENCE", fence.to_string());
    }
    cmd.spawn()
}

/// Waits for the child, forwarding signals, while the lock renews itself;
/// terminates the child as soon as the lock is lost or its renewal is late.
async fn supervise(mut child: Child, lock: Lock, args: &RunArgs, out: Out) -> u8 {
    let pid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .map(Pid::from_raw);
    let lost = match lock.auto_renew(Renewal::default()) {
        Ok(signal) => signal,
        Err(e) => {
            out.error(&format!("cannot renew the lock: {e}"));
            if let Some(pid) = pid {
                let _ = kill(pid, Signal::SIGTERM);
            }
            let _ = child.wait().await;
            release(lock, out).await;
            return exit::SOFTWARE;
        }
    };
    let mut signals: Vec<(Signal, Option<tokio::signal::unix::Signal>)> = [
        (Signal::SIGINT, SignalKind::interrupt()),
        (Signal::SIGTERM, SignalKind::terminate()),
        (Signal::SIGHUP, SignalKind::hangup()),
    ]
    .into_iter()
    .map(|(s, k)| (s, signal(k).ok()))
    .collect();
    loop {
        let forwarded = async {
            let waits = signals.iter_mut().map(|(sig, stream)| {
                let sig = *sig;
                Box::pin(async move {
                    recv(stream).await;
                    sig
                })
            });
            futures::future::select_all(waits).await.0
        };
        tokio::select! {
            status = child.wait() => {
                let code = match status {
                    Ok(status) => code_of(status),
                    Err(e) => {
                        out.error(&format!("waiting for the command: {e}"));
                        exit::SOFTWARE
                    }
                };
                release(lock, out).await;
                return code;
            }
            kind = lost.lost() => {
                let why = lost
                    .reason()
                    .map(|r| r.to_string())
                    .unwrap_or_else(|| kind.as_str().to_owned());
                out.error(&format!(
                    "LOCK LOST on {:?} ({}): {why}; terminating the command \
                     (SIGTERM, SIGKILL after {:?})",
                    args.resource,
                    kind.as_str(),
                    args.grace
                ));
                if let Some(pid) = pid {
                    let _ = kill(pid, Signal::SIGTERM);
                }
                if tokio::time::timeout(args.grace, child.wait()).await.is_err() {
                    out.error("the command ignored SIGTERM; sending SIGKILL");
                    let _ = child.kill().await;
                }
                release(lock, out).await;
                return exit::LOST;
            }
            sig = forwarded => {
                if let Some(pid) = pid {
                    let _ = kill(pid, sig);
                }
                if out.verbose() {
                    out.say(&format!("passed {sig} on to the command"));
                }
            }
        }
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

/// Releases the lock and waits (briefly) until every node got the
/// release, since the process exits right after.
async fn release(lock: Lock, out: Out) {
    if let Err(e) = lock.release().await {
        out.say(&format!("release: {e} (the keys expire with their TTL)"));
    }
}
