//! The command: started in its own process group with the parent-death
//! signal set, signalled as a group, and swept up when it exits.
//!
//! - Its own process group: a signal to the supervisor's group (Ctrl-C,
//!   `kill -- -PGID`, systemd's `KillMode=control-group`) reaches CMD once,
//!   through the supervisor, and every signal the supervisor sends reaches
//!   everything CMD started in the background as well.
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
    Ok(Running {
        child,
        group,
        watcher,
        _terminal: terminal,
    })
}

impl Running {
    /// Sends `sig` to the whole group; false when no process is left in it.
    pub fn signal(&self, sig: Signal) -> bool {
        match self.group {
            Some(group) => killpg(group, sig) != Err(Errno::ESRCH),
            None => false,
        }
    }

    /// True while any process of the group is still running. Zombies do
    /// not count: they run nothing, and an init that reaps slowly (as in
    /// some containers) would otherwise make every exit wait for --grace.
    fn group_alive(&self) -> bool {
        match self.group {
            Some(group) => killpg(group, None) != Err(Errno::ESRCH) && running_in(group),
            None => false,
        }
    }

    /// Waits until the command has exited and its group is empty, at most
    /// `limit`; true when it is.
    /// A `limit` too large to add to the current instant (`--grace
    /// 500000000000y`) is no limit.
    async fn wait_gone(&mut self, limit: Duration) -> bool {
        let deadline = Instant::now().checked_add(limit);
        loop {
            let exited = !matches!(self.child.try_wait(), Ok(None));
            if exited && !self.group_alive() {
                return true;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// SIGTERM to the group, SIGKILL to whatever is left after `grace`;
    /// returns once the group is gone (or did not go within a bounded
    /// wait after SIGKILL: a zombie nobody reaps). True when SIGKILL was
    /// needed.
    pub async fn terminate(&mut self, grace: Duration) -> bool {
        if !self.signal(Signal::SIGTERM) && !matches!(self.child.try_wait(), Ok(None)) {
            return false;
        }
        if self.wait_gone(grace).await {
            return false;
        }
        self.signal(Signal::SIGKILL);
        let _ = self.child.start_kill();
        self.wait_gone(Duration::from_secs(2)).await;
        true
    }

    /// Once the command and its group are gone: stops the watcher.
    pub fn finish(&mut self) {
        if let Some(watcher) = self.watcher.take() {
            watcher.disarm();
        }
    }

    /// After the command itself exited: true when processes it left in
    /// its group are still running.
    pub fn leftovers(&mut self) -> bool {
        self.group_alive()
    }
}

/// True when `/proc` lists a process of `group` that is not a zombie (or
/// when `/proc` cannot be read: then assume one is).
fn running_in(group: Pid) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return true;
    };
    dir.flatten().any(|entry| {
        let is_pid = entry
            .file_name()
            .to_str()
            .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()));
        is_pid
            && std::fs::read_to_string(entry.path().join("stat"))
                .ok()
                .and_then(|stat| parse_stat(&stat))
                .is_some_and(|(state, pgrp)| pgrp == group.as_raw() && !matches!(state, 'Z' | 'X'))
    })
}

/// The state and process group from a `/proc/PID/stat` line:
/// `pid (comm) state ppid pgrp …`, where comm may hold spaces and parens.
fn parse_stat(stat: &str) -> Option<(char, i32)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let _ppid = fields.next()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some((state, pgrp))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_give_state_and_group() {
        assert_eq!(
            parse_stat("4242 (sleep) S 4240 4241 4241 0 -1 4194560"),
            Some(('S', 4241))
        );
        assert_eq!(parse_stat("7 (a (b) c) Z 1 7 7 0"), Some(('Z', 7)));
        assert_eq!(parse_stat("garbage"), None);
    }
}
