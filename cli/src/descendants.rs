//! Everything CMD started, wherever it went.
//!
//! CMD's process group holds what a plain `cmd &` starts, but a process can
//! leave the group: `setsid`, a shell with job control (`set -m`), a daemon
//! that detaches. Before CMD starts, the supervisor makes itself a child
//! subreaper (`PR_SET_CHILD_SUBREAPER`, Linux): a process of CMD's tree
//! whose parent exits is re-parented to the supervisor instead of to init.
//! So everything CMD started is, for as long as it runs, either in CMD's
//! process group or a descendant of the supervisor (by the parent links in
//! `/proc`), and [`Descendants`] finds, signals and reaps it all.
//!
//! Not covered: a process that leaves the tree by design — adopted by
//! another subreaper that is not below the supervisor, or started through
//! a service manager, `at`, `cron`, `ssh` or a container runtime (the
//! process is then a child of that service, not of CMD), as is one started
//! in a PID namespace that is not below the supervisor's (`docker exec`).
//! A PID namespace CMD creates is covered: its processes show in `/proc`
//! here. A process that forks and exits faster than `/proc` is read can
//! slip past the SIGTERM sweep; SIGKILL is repeated at every scan until
//! nothing is left.

use std::collections::{HashMap, HashSet};

use nix::errno::Errno;
use nix::sys::signal::{kill, killpg, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag};
use nix::unistd::Pid;

/// How often [`Descendants::terminate`] reads `/proc` at most: a process
/// that forks faster than that is left to SIGKILL.
const MAX_SWEEPS: usize = 16;

/// Makes the supervisor the reaper of CMD's orphans. Fails where the
/// kernel has no such attribute (not Linux, or older than 3.4): then only
/// CMD's process group is covered.
pub fn adopt_orphans() -> nix::Result<()> {
    nix::sys::prctl::set_child_subreaper(true)
}

/// CMD's processes, as seen from the supervisor.
pub struct Descendants {
    supervisor: Pid,
    /// CMD's process group (its pid).
    group: Option<Pid>,
    /// The supervisor's children that are not CMD's (the watcher): neither
    /// they nor theirs are covered, and they are not reaped here.
    not_cmds: Vec<Pid>,
}

/// One process, from `/proc/PID/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    pid: i32,
    ppid: i32,
    pgrp: i32,
    /// Exited and not yet reaped (`Z`) or dead (`X`): runs nothing.
    zombie: bool,
}

impl Descendants {
    pub fn new(supervisor: Pid, group: Option<Pid>) -> Self {
        Self {
            supervisor,
            group,
            not_cmds: Vec::new(),
        }
    }

    /// `pid` is a child of the supervisor that is not CMD's.
    pub fn exclude(&mut self, pid: Pid) {
        self.not_cmds.push(pid);
    }

    /// Every running process of CMD's (CMD included while it runs), after
    /// reaping the exited ones re-parented to the supervisor. `None` when
    /// `/proc` cannot be read.
    fn live(&self) -> Option<Vec<Entry>> {
        let table = proc_table()?;
        self.reap_in(&table);
        let skip: Vec<i32> = self.not_cmds.iter().map(|p| p.as_raw()).collect();
        Some(covered(
            &table,
            self.supervisor.as_raw(),
            self.group.map(Pid::as_raw),
            &skip,
        ))
    }

    /// True while any process of CMD's runs. Without `/proc`: while CMD's
    /// group has a member (zombies included).
    pub fn any_alive(&self) -> bool {
        match self.live() {
            Some(live) => !live.is_empty(),
            None => self.group_exists(),
        }
    }

    fn group_exists(&self) -> bool {
        self.group
            .is_some_and(|g| killpg(g, None) != Err(Errno::ESRCH))
    }

    /// SIGTERM, then SIGCONT (a stopped process acts on the SIGTERM), to
    /// every running process of CMD's, each once: `/proc` is read again
    /// until it shows no process that was not signalled yet (one forked in
    /// the meantime), as systemd does for a unit's processes. Processes
    /// started after that (say, the helper a SIGTERM handler runs to shut
    /// down) are left alone until SIGKILL. Without `/proc`, CMD's group
    /// gets them.
    ///
    /// A process is signalled by its pid right after `/proc` listed it: a
    /// pid is reused only after its process was reaped and the kernel went
    /// once round the pid space, which a scan-then-signal does not give
    /// time for.
    pub fn terminate(&self) {
        let mut told = HashSet::new();
        for _ in 0..MAX_SWEEPS {
            let Some(live) = self.live() else {
                if let Some(group) = self.group {
                    let _ = killpg(group, Signal::SIGTERM);
                    let _ = killpg(group, Signal::SIGCONT);
                }
                return;
            };
            let mut new = live.iter().filter(|e| told.insert(e.pid)).peekable();
            if new.peek().is_none() {
                return;
            }
            for entry in new {
                let _ = kill(Pid::from_raw(entry.pid), Signal::SIGTERM);
                let _ = kill(Pid::from_raw(entry.pid), Signal::SIGCONT);
            }
        }
    }

    /// SIGKILL to CMD's group and to every running process of CMD's.
    pub fn kill_all(&self) {
        if let Some(group) = self.group {
            let _ = killpg(group, Signal::SIGKILL);
        }
        for entry in self.live().unwrap_or_default() {
            let _ = kill(Pid::from_raw(entry.pid), Signal::SIGKILL);
        }
    }

    /// Reaps the exited processes re-parented to the supervisor (CMD is
    /// reaped by whoever waits for it, the watcher by its owner).
    pub fn reap(&self) {
        if let Some(table) = proc_table() {
            self.reap_in(&table);
        }
    }

    fn reap_in(&self, table: &[Entry]) {
        let us = self.supervisor.as_raw();
        for entry in table {
            // CMD's pid is its group's id.
            let ours = entry.ppid == us
                && Some(entry.pid) != self.group.map(Pid::as_raw)
                && !self.not_cmds.iter().any(|p| p.as_raw() == entry.pid);
            if ours && entry.zombie {
                let _ = waitpid(Pid::from_raw(entry.pid), Some(WaitPidFlag::WNOHANG));
            }
        }
    }
}

/// The running processes CMD accounts for: the supervisor's descendants
/// (except those under `skip`) and the members of CMD's `group`.
fn covered(table: &[Entry], supervisor: i32, group: Option<i32>, skip: &[i32]) -> Vec<Entry> {
    let mut children: HashMap<i32, Vec<&Entry>> = HashMap::new();
    for entry in table {
        children.entry(entry.ppid).or_default().push(entry);
    }
    let mut found = Vec::new();
    let mut todo = vec![supervisor];
    while let Some(parent) = todo.pop() {
        for child in children.get(&parent).into_iter().flatten() {
            if skip.contains(&child.pid) || child.pid == supervisor {
                continue;
            }
            if !child.zombie {
                found.push(**child);
            }
            todo.push(child.pid);
        }
    }
    for entry in table {
        let in_group = group == Some(entry.pgrp) && entry.pid != supervisor;
        if in_group && !entry.zombie && !found.iter().any(|e| e.pid == entry.pid) {
            found.push(*entry);
        }
    }
    found
}

/// Every process `/proc` lists; `None` when it cannot be read.
fn proc_table() -> Option<Vec<Entry>> {
    let dir = std::fs::read_dir("/proc").ok()?;
    let table = dir
        .flatten()
        .filter(|entry| {
            entry
                .file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        // A process that exits between the listing and the read is gone.
        .filter_map(|entry| std::fs::read_to_string(entry.path().join("stat")).ok())
        .filter_map(|stat| parse_stat(&stat))
        .collect();
    Some(table)
}

/// A `/proc/PID/stat` line: `pid (comm) state ppid pgrp …`, where comm
/// may hold spaces and parentheses.
fn parse_stat(stat: &str) -> Option<Entry> {
    let open = stat.find(" (")?;
    let pid = stat[..open].trim().parse().ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some(Entry {
        pid,
        ppid,
        pgrp,
        zombie: matches!(state, 'Z' | 'X'),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(pid: i32, ppid: i32, pgrp: i32, zombie: bool) -> Entry {
        Entry {
            pid,
            ppid,
            pgrp,
            zombie,
        }
    }

    #[test]
    fn stat_lines_give_pid_parent_group_and_state() {
        assert_eq!(
            parse_stat("4242 (sleep) S 4240 4241 4241 0 -1 4194560"),
            Some(entry(4242, 4240, 4241, false))
        );
        assert_eq!(
            parse_stat("7 (a (b) c) Z 1 7 7 0"),
            Some(entry(7, 1, 7, true))
        );
        assert_eq!(parse_stat("garbage"), None);
    }

    /// The supervisor 10 (in group 9) with CMD 11 (group 11) and the
    /// watcher 12 (group 12).
    fn table() -> Vec<Entry> {
        vec![
            entry(1, 0, 1, false),
            entry(9, 1, 9, false),    // the supervisor's parent shell
            entry(10, 9, 9, false),   // the supervisor
            entry(11, 10, 11, false), // CMD
            entry(12, 10, 12, false), // the watcher
            entry(13, 12, 12, false), // the watcher's child
            entry(20, 11, 11, false), // CMD's background job
            entry(21, 11, 21, false), // a setsid'd child of CMD
            entry(22, 21, 21, false), // its child
            entry(30, 10, 30, false), // an orphan re-parented to the supervisor
            entry(31, 30, 31, true),  // its exited child
            entry(40, 1, 11, false),  // a member of CMD's group adopted elsewhere
            entry(50, 1, 50, false),  // unrelated
        ]
    }

    fn pids(found: Vec<Entry>) -> Vec<i32> {
        let mut pids: Vec<i32> = found.iter().map(|e| e.pid).collect();
        pids.sort_unstable();
        pids
    }

    #[test]
    fn the_tree_and_the_group_are_covered_the_watcher_and_zombies_are_not() {
        let found = covered(&table(), 10, Some(11), &[12]);
        assert_eq!(pids(found), vec![11, 20, 21, 22, 30, 40]);
    }

    #[test]
    fn nothing_is_covered_once_everything_exited() {
        let table = vec![
            entry(9, 1, 9, false),
            entry(10, 9, 9, false),
            entry(11, 10, 11, true),
            entry(12, 10, 12, false),
            entry(30, 10, 30, true),
        ];
        assert!(covered(&table, 10, Some(11), &[12]).is_empty());
    }

    #[test]
    fn without_a_group_only_the_tree_counts() {
        let found = covered(&table(), 10, None, &[12]);
        assert_eq!(pids(found), vec![11, 20, 21, 22, 30]);
    }
}
