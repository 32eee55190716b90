//! The command: started in its own process group with the parent-death
//! signal set, signalled as a group, and ended — with everything it
//! started, in its group or not (see `descendants`) — when it exits or the
//! lock is lost.
//!
//! - Its own process group: a signal to the supervisor's group (Ctrl-C,
//!   `kill -- -PGID`, systemd's `KillMode=control-group`) reaches CMD once,
//!   through the supervisor, and every signal the supervisor passes on
//!   reaches what CMD started in the background in that group as well.
//! - `PR_SET_PDEATHSIG` = SIGKILL: if the supervisor dies (even by
//!   SIGKILL), CMD dies with it instead of running on past the lock's TTL.
//!   The kernel ties that signal to the *thread* that forked the child; the
//!   binary runs its runtime on the main thread, which lives as long as the
//!   process, and only ever spawns from there.
//! - On a terminal, the command's group becomes the terminal's foreground
//!   group while it runs (as a shell does), so it can read the terminal and
//!   gets Ctrl-C directly (once: the supervisor no longer does).

use std::io::IsTerminal;
use std::os::fd::BorrowedFd;
use std::os::unix::process::CommandExt as _;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{killpg, SigSet, SigmaskHow, Signal};
use nix::unistd::{getpgrp, getpid, getppid, setpgid, tcgetpgrp, tcsetpgrp, Pid};
use tokio::process::{Child, Command};
use tokio::signal::unix::SignalKind;

use crate::descendants::{self, Descendants};

/// What CMD is started with.
pub struct Spec<'a> {
    pub argv: &'a [String],
    pub env: Vec<(&'static str, String)>,
    /// Remove these variables from CMD's environment.
    pub env_remove: Vec<&'static str>,
}

/// The terminal handed to the command's group, given back on drop.
pub struct Terminal {
    ours: Pid,
}

impl Drop for Terminal {
    fn drop(&mut self) {
        // Taking the terminal back from a background group needs SIGTTOU
        // blocked, or the kernel stops us.
        let mut ttou = SigSet::empty();
        ttou.add(Signal::SIGTTOU);
        let mut old = SigSet::empty();
        if nix::sys::signal::pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&ttou), Some(&mut old))
            .is_ok()
        {
            let _ = tcsetpgrp(std::io::stdin(), self.ours);
            let _ = nix::sys::signal::pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&old), None);
        }
    }
}

/// The running command and its process group.
pub struct Running {
    pub child: Child,
    /// The group's id (the command's pid); `None` if the pid was unknown.
    group: Option<Pid>,
    /// Everything CMD started, in its group or not.
    descendants: Descendants,
    ending: Ending,
    /// Says when a child of quorumlock exited: time to reap.
    pub exits: ChildExits,
    watcher: Option<Watcher>,
    _terminal: Option<Terminal>,
}

/// A tiny process outside both groups that kills the command's whole
/// group if quorumlock dies without saying goodbye: it reads one line
/// from a pipe whose only writer is quorumlock; end of file (quorumlock
/// is gone, even by SIGKILL) means kill. The parent-death signal reaches
/// only the command itself, not what it started in the background.
struct Watcher {
    child: std::process::Child,
}

impl Watcher {
    fn start(group: Pid) -> std::io::Result<Self> {
        let child = std::process::Command::new("/bin/sh")
            .args([
                "-c",
                "read -r line || kill -KILL -\"$1\"",
                "quorumlock-watch",
            ])
            .arg(group.as_raw().to_string())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .process_group(0)
            .spawn()?;
        Ok(Self { child })
    }

    /// Tells the watcher that all is well and lets it exit.
    fn disarm(mut self) {
        if let Some(mut stdin) = self.child.stdin.take() {
            let _ = std::io::Write::write_all(&mut stdin, b"done\n");
        }
        let _ = self.child.wait();
    }
}

/// Starts the command in a new process group whose leader dies with us.
pub fn spawn(spec: &Spec<'_>) -> std::io::Result<Running> {
    let supervisor = getpid();
    let stdin = std::io::stdin();
    let foreground = stdin.is_terminal() && tcgetpgrp(&stdin).ok() == Some(getpgrp());
    // SAFETY: file descriptor 0 stays open for the life of the process.
    let tty = unsafe { BorrowedFd::borrow_raw(nix::libc::STDIN_FILENO) };
    let mut cmd = std::process::Command::new(&spec.argv[0]);
    cmd.args(&spec.argv[1..]);
    for name in &spec.env_remove {
        cmd.env_remove(name);
    }
    for (name, value) in &spec.env {
        cmd.env(name, value);
    }
    // SAFETY: the closure runs in the forked child before exec and calls
    // only async-signal-safe functions (setpgid, prctl, getppid,
    // sigprocmask, tcsetpgrp, getpid); it allocates nothing and takes no
    // lock.
    unsafe {
        cmd.pre_exec(move || {
            setpgid(Pid::from_raw(0), Pid::from_raw(0))?;
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
            // The supervisor may have died before the line above: then the
            // signal will never come, and the child must not run.
            if getppid() != supervisor {
                return Err(Errno::ESRCH.into());
            }
            if foreground {
                let mut ttou = SigSet::empty();
                ttou.add(Signal::SIGTTOU);
                let mut old = SigSet::empty();
                nix::sys::signal::sigprocmask(SigmaskHow::SIG_BLOCK, Some(&ttou), Some(&mut old))?;
                let _ = tcsetpgrp(tty, getpid());
                nix::sys::signal::sigprocmask(SigmaskHow::SIG_SETMASK, Some(&old), None)?;
            }
            Ok(())
        });
    }
    let terminal = foreground.then(|| Terminal { ours: getpgrp() });
    // Orphans of CMD's tree come to us (where the kernel allows it: else
    // only CMD's group and the descendants still linked to it are found),
    // and each exit of a child of ours says so.
    let _ = descendants::adopt_orphans();
    let sigchld = tokio::signal::unix::signal(SignalKind::child()).ok();
    let child = Command::from(cmd).kill_on_drop(false).spawn()?;
    let group = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .map(Pid::from_raw);
    let watcher = match group.map(Watcher::start) {
        Some(Ok(watcher)) => Some(watcher),
        // Without it, the command itself still dies with quorumlock.
        _ => None,
    };
    let mut descendants = Descendants::new(supervisor, group);
    if let Some(watcher) = &watcher {
        if let Ok(pid) = i32::try_from(watcher.child.id()) {
            descendants.exclude(Pid::from_raw(pid));
        }
    }
    Ok(Running {
        child,
        group,
        descendants,
        ending: Ending::Running,
        exits: ChildExits(sigchld),
        watcher,
        _terminal: terminal,
    })
}

impl Running {
    /// Sends `sig` to CMD's process group (the signals quorumlock passes
    /// on); false when no process is left in it.
    pub fn signal(&self, sig: Signal) -> bool {
        match self.group {
            Some(group) => killpg(group, sig) != Err(Errno::ESRCH),
            None => false,
        }
    }

    /// True while CMD or anything it started still runs.
    pub fn any_alive(&self) -> bool {
        self.descendants.any_alive()
    }

    /// Starts ending everything of CMD's, or moves its end closer: SIGTERM
    /// now (the first time), and SIGKILL at `kill_at` (never, if `None`)
    /// or at an earlier instant given before. Call [`Running::progress`]
    /// until it says what is left is nothing.
    pub fn stop(&mut self, kill_at: Option<Instant>) {
        self.ending = match self.ending {
            Ending::Running => {
                self.descendants.terminate();
                Ending::Terminating { kill_at }
            }
            Ending::Terminating { kill_at: before } => Ending::Terminating {
                kill_at: earliest(before, kill_at),
            },
            killed @ Ending::Killed { .. } => killed,
        };
    }

    /// True once [`Running::stop`] was called.
    pub fn stopping(&self) -> bool {
        !matches!(self.ending, Ending::Running)
    }

    /// When to call [`Running::progress`] next: after [`POLL`], or when
    /// SIGKILL is due if that comes first.
    pub fn next_check(&self) -> Instant {
        let poll = Instant::now() + POLL;
        match self.ending {
            Ending::Terminating { kill_at: Some(at) } => poll.min(at),
            _ => poll,
        }
    }

    /// True when SIGKILL was needed.
    pub fn killed(&self) -> bool {
        matches!(self.ending, Ending::Killed { .. })
    }

    /// One step of the end: SIGKILL once it is due (and again to anything
    /// seen after it); then whether anything of CMD's still runs: `Stuck`
    /// when something survived SIGKILL for [`KILL_WAIT`] (a process in
    /// uninterruptible sleep).
    pub fn progress(&mut self) -> Left {
        let now = Instant::now();
        match self.ending {
            Ending::Running => {}
            Ending::Terminating { kill_at } => {
                if kill_at.is_some_and(|k| now >= k) {
                    self.descendants.kill_all();
                    let _ = self.child.start_kill();
                    self.ending = Ending::Killed { at: now };
                }
            }
            Ending::Killed { .. } => self.descendants.kill_all(),
        }
        if !self.descendants.any_alive() {
            return Left::Nothing;
        }
        match self.ending {
            Ending::Killed { at } if now.duration_since(at) >= KILL_WAIT => Left::Stuck,
            _ => Left::Running,
        }
    }

    /// Reaps the processes of CMD's that were re-parented to quorumlock
    /// and exited (call when [`ChildExits::next`] says a child exited).
    pub fn reap(&self) {
        self.descendants.reap();
    }

    /// SIGTERM to everything of CMD's, SIGKILL to whatever is left after
    /// `grace`; returns once all of it is gone (or did not go within
    /// [`KILL_WAIT`] after SIGKILL). True when SIGKILL was needed.
    /// A `grace` too large to add to the current instant (`--grace
    /// 500000000000y`) is no limit.
    pub async fn terminate(&mut self, grace: Duration) -> bool {
        self.stop(Instant::now().checked_add(grace));
        while let Left::Running = self.progress() {
            tokio::time::sleep_until(self.next_check().into()).await;
        }
        self.killed()
    }

    /// Once the command and everything it started are gone: stops the
    /// watcher.
    pub fn finish(&mut self) {
        if let Some(watcher) = self.watcher.take() {
            watcher.disarm();
        }
    }
}

/// SIGCHLD: a child of quorumlock exited (CMD, or a process of CMD's
/// re-parented to quorumlock).
pub struct ChildExits(Option<tokio::signal::unix::Signal>);

impl ChildExits {
    /// Waits for the next SIGCHLD; never returns without the stream.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a SIGCHLD not yet taken stays pending.
    pub async fn next(&mut self) {
        if let Some(stream) = &mut self.0 {
            if stream.recv().await.is_some() {
                return;
            }
        }
        std::future::pending::<()>().await;
    }
}

/// What is left of CMD's processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Left {
    /// Something still runs.
    Running,
    /// Nothing runs any more.
    Nothing,
    /// Something survived SIGKILL for [`KILL_WAIT`].
    Stuck,
}

/// How far the end of CMD's processes has gone.
#[derive(Debug, Clone, Copy)]
enum Ending {
    /// No end asked for.
    Running,
    /// SIGTERM sent; SIGKILL due at `kill_at` (never, if `None`).
    Terminating { kill_at: Option<Instant> },
    /// SIGKILL sent at `at`.
    Killed { at: Instant },
}

/// The earlier of two optional instants, `None` meaning never.
fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

/// How often `/proc` is read while the end of CMD's processes is under way
/// (a read costs a few milliseconds on a busy machine; the SIGKILL itself
/// is sent on time, see [`Running::next_check`]).
const POLL: Duration = Duration::from_millis(50);

/// How long to wait for processes after SIGKILL before giving up on them.
const KILL_WAIT: Duration = Duration::from_secs(2);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_earliest_kill_wins_and_none_is_never() {
        let now = Instant::now();
        let later = now + Duration::from_secs(1);
        assert_eq!(earliest(Some(now), Some(later)), Some(now));
        assert_eq!(earliest(Some(later), None), Some(later));
        assert_eq!(earliest(None, Some(now)), Some(now));
        assert_eq!(earliest(None, None), None);
    }
}
