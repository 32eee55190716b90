//! Seeded fault schedules, and a thread that plays one on a [`Cluster`].
//!
//! A [`Schedule`] is a list of episodes — a fault on one node from `start` to
//! `end` — drawn from a seed, so a failing run can be replayed. At any moment
//! at most `max_faulty` nodes (a minority) are in an episode, and a node is
//! in at most one. Every fault but one stays inside the Redlock model: a
//! killed node restarts (empty) only after more than the largest TTL, the
//! spec's delayed restart; immediate restarts are left to the negative
//! controls.
//!
//! With [`Limits::clients`] set, each client reaches each node through its
//! own proxy (a link, see `Cluster::links`) and the nemesis also scripts
//! single links: hold one client's requests to a node, or the node's
//! replies to it, or both, and release them in order later; or delay one
//! direction of one link. Those faults reorder one client's messages
//! against another's — what whole-node faults never do. A link fault counts
//! as a fault on its node for the minority bound. Node-wide network faults
//! are set on every link of the node.
//!
//! The exception is [`Action::ClockJump`], drawn only when
//! [`Limits::clock_jumps`] is set (nodes under libfaketime): the node's
//! wall clock steps forward and every key on it expires at once. That is
//! outside the model for mutual exclusion — the checker only excuses an
//! overlap a jump could explain — but inside it for fencing tokens, which
//! must stay unique and ordered through it.
//!
//! Members with replicas (Sentinel groups) fail over instead
//! ([`Action::Failover`], scheduled by `failovers::schedule`): a restart
//! the client must notice, since the promoted replica may lack the
//! master's last writes. A [`Nemesis`] plays a schedule on any [`Target`]:
//! a [`Cluster`] with each client's links ([`Proxied`]), or members.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{Cluster, Direction, Fault, FaultHandle};

/// What an episode does to its node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// SIGSTOP at start, SIGCONT at end.
    Pause,
    /// kill -9 at start, restart without data at end (always longer than the
    /// largest TTL after the kill).
    Kill,
    /// A proxy fault from start to end.
    Net(Fault),
    /// Step the node's wall clock forward by this much at start (it stays
    /// ahead: clocks are not stepped back). The node counts as faulty
    /// until end, so jumps and other faults together stay a minority.
    ClockJump(Duration),
    /// Hold `dir` on client `client`'s link to the node from start to end;
    /// what was held is delivered, in order, at end.
    LinkHold {
        /// The client whose link is held.
        client: usize,
        /// Which way.
        dir: Direction,
    },
    /// Delay `dir` on client `client`'s link to the node by `by`.
    LinkDelay {
        /// The client whose link is delayed.
        client: usize,
        /// Which way.
        dir: Direction,
        /// The added delay.
        by: Duration,
    },
    /// The member's master is replaced by a promoted replica (a member
    /// with replicas only).
    Failover(Failover),
}

/// How a member with replicas (a Sentinel group) fails over. Each begins
/// when the episode starts and returns once a replica is promoted; what
/// the episode's end does is said per kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failover {
    /// `SENTINEL FAILOVER` while the master runs; the old master is
    /// demoted once every Sentinel names the new one. The end does
    /// nothing.
    Graceful,
    /// The master is killed (`kill -9`) and the Sentinels promote a
    /// replica; at the end the old master starts again, empty, as a
    /// replica.
    Crash,
    /// The master is stopped (SIGSTOP) for longer than the Sentinels'
    /// down-after, until they promoted a replica; at the end it resumes
    /// and answers as a master beside the new one for `split` (the
    /// split-brain window), then it is demoted.
    Pause {
        /// How long both answer as masters.
        split: Duration,
    },
    /// `SENTINEL FAILOVER` while the master runs, the old master left
    /// running as a master, with its keys and its clients' connections, as
    /// the Sentinels leave it for 10 to 20 s; at the end it is demoted.
    Switch,
}

impl Action {
    /// Short name for reports.
    pub fn name(&self) -> &'static str {
        match self {
            Action::Pause => "pause",
            Action::Kill => "kill",
            Action::Net(Fault::None) => "none",
            Action::Net(Fault::Latency { .. }) => "latency",
            Action::Net(Fault::Blackhole) => "blackhole",
            Action::Net(Fault::BlackholeReplies) => "blackhole_replies",
            Action::Net(Fault::Reset) => "reset",
            Action::Net(Fault::SlowReplies { .. }) => "slow",
            Action::ClockJump(_) => "clock_jump",
            Action::LinkHold { dir, .. } => match dir {
                Direction::Requests => "link_hold_requests",
                Direction::Replies => "link_hold_replies",
                Direction::Both => "link_hold_both",
            },
            Action::LinkDelay { dir, .. } => match dir {
                Direction::Requests => "link_delay_requests",
                Direction::Replies => "link_delay_replies",
                Direction::Both => "link_delay_both",
            },
            Action::Failover(Failover::Graceful) => "failover",
            Action::Failover(Failover::Crash) => "crash_failover",
            Action::Failover(Failover::Pause { .. }) => "pause_failover",
            Action::Failover(Failover::Switch) => "switch_failover",
        }
    }

    /// Whether it needs the nodes to be local processes.
    pub fn needs_process_control(&self) -> bool {
        matches!(
            self,
            Action::Pause | Action::Kill | Action::ClockJump(_) | Action::Failover(_)
        )
    }
}

/// A fault on one node for a while.
#[derive(Debug, Clone, Copy)]
pub struct Episode {
    /// The node faulted (index in the cluster).
    pub node: usize,
    /// Offset from the start of the run.
    pub start: Duration,
    /// Offset from the start of the run at which the fault is undone.
    pub end: Duration,
    /// The fault.
    pub action: Action,
}

/// Bounds of a schedule.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Nodes in the cluster.
    pub nodes: usize,
    /// Every episode ends by then.
    pub span: Duration,
    /// Nodes faulted at once; keep it a minority.
    pub max_faulty: usize,
    /// The largest TTL the workload uses; kills last longer than this.
    pub max_ttl: Duration,
    /// Include pause and kill (needs local nodes).
    pub process_faults: bool,
    /// Include forward clock jumps (needs nodes under libfaketime).
    pub clock_jumps: bool,
    /// Clients with links of their own: scripted link faults pick one of
    /// them (0: no link faults).
    pub clients: usize,
}

/// A seeded list of episodes.
#[derive(Debug, Clone)]
pub struct Schedule {
    /// The seed it was drawn from.
    pub seed: u64,
    /// The faults, by start.
    pub episodes: Vec<Episode>,
}

fn direction(rng: &mut StdRng) -> Direction {
    match rng.random_range(0..3) {
        0 => Direction::Requests,
        1 => Direction::Replies,
        _ => Direction::Both,
    }
}

/// A duration drawn from `lo..=hi` milliseconds.
pub fn ms(rng: &mut StdRng, lo: u64, hi: u64) -> Duration {
    Duration::from_millis(rng.random_range(lo..=hi))
}

impl Schedule {
    /// Draws a schedule from `seed`: `max_faulty` lanes of back-to-back
    /// episodes with random gaps, each on a node no other lane is faulting
    /// at that time.
    pub fn generate(seed: u64, limits: &Limits) -> Self {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut episodes: Vec<Episode> = Vec::new();
        let margin = Duration::from_millis(50);
        let ttl_ms = u64::try_from(limits.max_ttl.as_millis()).unwrap_or(u64::MAX);
        for _lane in 0..limits.max_faulty {
            let mut t = ms(&mut rng, 0, 300);
            loop {
                let mut kinds: Vec<u32> = (0..6).collect();
                if limits.process_faults {
                    kinds.extend([6, 7]);
                }
                if limits.clock_jumps {
                    kinds.push(8);
                }
                if limits.clients > 0 {
                    // Link faults as often as all whole-node ones together.
                    kinds.extend(std::iter::repeat_n([9, 10], kinds.len() / 2).flatten());
                }
                let pick = kinds[rng.random_range(0..kinds.len())];
                let (action, length) = match pick {
                    0 => (
                        Action::Net(Fault::Latency {
                            base: ms(&mut rng, 5, 60),
                            jitter: ms(&mut rng, 0, 20),
                        }),
                        ms(&mut rng, 300, 2_000),
                    ),
                    1 => (Action::Net(Fault::Blackhole), ms(&mut rng, 100, 1_500)),
                    2 => (
                        Action::Net(Fault::BlackholeReplies),
                        ms(&mut rng, 100, 1_500),
                    ),
                    3 => (Action::Net(Fault::Reset), ms(&mut rng, 20, 500)),
                    4 => (
                        Action::Net(Fault::SlowReplies {
                            bytes: rng.random_range(1..=8),
                            every: ms(&mut rng, 1, 5),
                        }),
                        ms(&mut rng, 200, 1_500),
                    ),
                    5 => (
                        Action::Net(Fault::latency(Duration::from_millis(20))),
                        ms(&mut rng, 300, 1_000),
                    ),
                    6 => (Action::Pause, ms(&mut rng, 100, 1_500)),
                    7 => (Action::Kill, ms(&mut rng, ttl_ms + 200, ttl_ms + 1_000)),
                    8 => (
                        // Whole seconds (libfaketime's unit): past every TTL.
                        Action::ClockJump(Duration::from_secs(rng.random_range(1..=120))),
                        ms(&mut rng, 100, 1_000),
                    ),
                    9 => (
                        Action::LinkHold {
                            client: rng.random_range(0..limits.clients.max(1)),
                            dir: direction(&mut rng),
                        },
                        ms(&mut rng, 50, 1_500),
                    ),
                    _ => (
                        Action::LinkDelay {
                            client: rng.random_range(0..limits.clients.max(1)),
                            dir: direction(&mut rng),
                            by: ms(&mut rng, 10, 300),
                        },
                        ms(&mut rng, 300, 2_000),
                    ),
                };
                let (start, end) = (t, t + length);
                if end > limits.span {
                    break;
                }
                let busy = |node: usize| {
                    episodes
                        .iter()
                        .any(|e| e.node == node && e.start < end + margin && start < e.end + margin)
                };
                let free: Vec<usize> = (0..limits.nodes).filter(|&n| !busy(n)).collect();
                if !free.is_empty() {
                    let node = free[rng.random_range(0..free.len())];
                    episodes.push(Episode {
                        node,
                        start,
                        end,
                        action,
                    });
                }
                t = end + ms(&mut rng, 0, 600);
            }
        }
        // A short run may draw no jump by chance; make its first network
        // fault one, so every such run steps a clock.
        if limits.clock_jumps
            && !episodes
                .iter()
                .any(|e| matches!(e.action, Action::ClockJump(_)))
        {
            if let Some(e) = episodes
                .iter_mut()
                .find(|e| matches!(e.action, Action::Net(_)))
            {
                e.action = Action::ClockJump(Duration::from_secs(rng.random_range(1..=120)));
            }
        }
        episodes.sort_by_key(|e| (e.start, e.node));
        Self { seed, episodes }
    }

    /// Episodes per kind, e.g. `kill=2,latency=5,pause=3`.
    pub fn counts(&self) -> String {
        counts(self.episodes.iter().map(|e| e.action))
    }

    /// The most nodes faulted at the same time.
    pub fn max_concurrent(&self) -> usize {
        self.episodes
            .iter()
            .map(|e| {
                self.episodes
                    .iter()
                    .filter(|o| o.start <= e.start && e.start < o.end)
                    .count()
            })
            .max()
            .unwrap_or(0)
    }
}

#[derive(Debug, Clone, Copy)]
enum Step {
    Begin,
    End,
}

/// What the nemesis did.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Episodes begun.
    pub faults: usize,
    /// Episodes healed on schedule.
    pub healed: usize,
    /// Each clock jump: the moments just before and just after the step.
    pub jumps: Vec<(Instant, Instant)>,
    /// Each episode as played: when its fault began and when it was
    /// undone (both steps done).
    pub played: Vec<Played>,
}

impl Report {
    /// Episodes played per kind, e.g. `crash_failover=1,failover=2`.
    pub fn counts(&self) -> String {
        counts(self.played.iter().map(|p| p.action))
    }
}

fn counts(actions: impl Iterator<Item = Action>) -> String {
    let mut by: BTreeMap<&str, usize> = BTreeMap::new();
    for action in actions {
        *by.entry(action.name()).or_default() += 1;
    }
    let mut out = String::new();
    for (k, v) in by {
        let _ = write!(out, "{}{k}={v}", if out.is_empty() { "" } else { "," });
    }
    out
}

/// One episode as the nemesis played it.
#[derive(Debug, Clone, Copy)]
pub struct Played {
    /// The node (or member) faulted.
    pub node: usize,
    /// The fault.
    pub action: Action,
    /// When its beginning was started.
    pub began: Instant,
    /// When its end was done.
    pub ended: Instant,
}

/// What a [`Nemesis`] plays a schedule on: nodes on which an [`Action`]
/// can begin and end.
pub trait Target: Send + 'static {
    /// Starts `action` on `node`; may block until it took effect (a
    /// failover waits for the promotion).
    fn begin(&mut self, node: usize, action: Action);
    /// Undoes `action` on `node`.
    fn end(&mut self, node: usize, action: Action);
}

/// A [`Cluster`] as a [`Target`], with `links[client][node]`: each
/// client's own link to each node, for link faults (node-wide network
/// faults are set on every link of the node too).
pub struct Proxied {
    /// The nodes.
    pub cluster: Cluster,
    /// Each client's link to each node (empty: no link faults).
    pub links: Vec<Vec<FaultHandle>>,
}

/// Plays a schedule on its own thread. It owns the target meanwhile;
/// [`Nemesis::finish`] gives it back. Dropped early (a failing test), it
/// heals what it broke at once and drops the target, which prints the
/// node logs while panicking.
pub struct Nemesis<T: Target = Proxied> {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<(T, Report)>>,
}

impl Nemesis<Proxied> {
    /// Starts playing `schedule` on `cluster` now.
    pub fn start(cluster: Cluster, schedule: Schedule) -> Self {
        Self::start_with_links(cluster, Vec::new(), schedule)
    }

    /// As [`Nemesis::start`], with each client's links ([`Proxied`]).
    pub fn start_with_links(
        cluster: Cluster,
        links: Vec<Vec<FaultHandle>>,
        schedule: Schedule,
    ) -> Self {
        Self::play(Proxied { cluster, links }, schedule)
    }
}

impl<T: Target> Nemesis<T> {
    /// Starts playing `schedule` on `target` now.
    pub fn play(target: T, schedule: Schedule) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("nemesis".into())
            .spawn(move || play(target, &schedule, &flag))
            .expect("spawn nemesis");
        Self {
            stop,
            thread: Some(thread),
        }
    }

    /// Waits for the schedule to end (every fault healed) and returns the
    /// target.
    pub fn finish(mut self) -> (T, Report) {
        let thread = self.thread.take().expect("not finished twice");
        match thread.join() {
            Ok(done) => done,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
}

impl<T: Target> Drop for Nemesis<T> {
    fn drop(&mut self) {
        if let Some(thread) = self.thread.take() {
            self.stop.store(true, Ordering::Relaxed);
            let _ = thread.join();
        }
    }
}

fn play<T: Target>(mut target: T, schedule: &Schedule, stop: &AtomicBool) -> (T, Report) {
    let start = Instant::now();
    let mut steps: Vec<(Duration, usize, Step, Action)> = Vec::new();
    for e in &schedule.episodes {
        steps.push((e.start, e.node, Step::Begin, e.action));
        steps.push((e.end, e.node, Step::End, e.action));
    }
    // Ends before begins at the same instant, so a node is free again first.
    steps.sort_by_key(|(t, node, step, _)| (*t, matches!(step, Step::Begin), *node));
    let mut report = Report::default();
    let mut active: BTreeMap<usize, (Action, Instant)> = BTreeMap::new();
    for (at, node, step, action) in steps {
        let when = start + at;
        while Instant::now() < when && !stop.load(Ordering::Relaxed) {
            std::thread::sleep((when - Instant::now()).min(Duration::from_millis(10)));
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
        match step {
            Step::Begin => {
                let before = Instant::now();
                target.begin(node, action);
                if matches!(action, Action::ClockJump(_)) {
                    report.jumps.push((before, Instant::now()));
                }
                active.insert(node, (action, before));
                report.faults += 1;
            }
            Step::End => {
                target.end(node, action);
                if let Some((_, began)) = active.remove(&node) {
                    report.played.push(Played {
                        node,
                        action,
                        began,
                        ended: Instant::now(),
                    });
                }
                report.healed += 1;
            }
        }
    }
    for (node, (action, _)) in active {
        target.end(node, action);
    }
    (target, report)
}

/// Client `client`'s link to `node`.
///
/// # Panics
///
/// When the schedule has link faults but the nemesis was given no links.
fn link(links: &[Vec<FaultHandle>], client: usize, node: usize) -> &FaultHandle {
    assert!(
        !links.is_empty(),
        "link faults need Nemesis::start_with_links"
    );
    &links[client % links.len()][node]
}

impl Target for Proxied {
    fn begin(&mut self, node: usize, action: Action) {
        begin(&mut self.cluster, &self.links, node, action);
    }

    fn end(&mut self, node: usize, action: Action) {
        end(&mut self.cluster, &self.links, node, action);
    }
}

fn begin(cluster: &mut Cluster, links: &[Vec<FaultHandle>], node: usize, action: Action) {
    match action {
        Action::Pause => cluster.pause(node),
        Action::Kill => cluster.kill(node),
        Action::Net(fault) => {
            cluster.proxy(node).set(fault);
            for client in links {
                client[node].set(fault);
            }
        }
        Action::ClockJump(by) => cluster.jump_clock(node, by),
        Action::LinkHold { client, dir } => link(links, client, node).hold(dir),
        Action::LinkDelay { client, dir, by } => link(links, client, node).delay(dir, by),
        Action::Failover(_) => panic!("a failover needs a member with replicas, not a node"),
    }
}

fn end(cluster: &mut Cluster, links: &[Vec<FaultHandle>], node: usize, action: Action) {
    match action {
        Action::Pause => cluster.resume(node),
        Action::Kill => cluster.restart(node),
        Action::Net(_) => {
            cluster.proxy(node).heal();
            for client in links {
                client[node].heal();
            }
        }
        Action::ClockJump(_) => {}
        Action::LinkHold { client, .. } | Action::LinkDelay { client, .. } => {
            link(links, client, node).heal();
        }
        Action::Failover(_) => {}
    }
}
