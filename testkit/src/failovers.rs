//! A randomized safety run on members that fail over: Sentinel groups as
//! the quorum's members, a seeded schedule of failovers on one group at a
//! time ([`schedule`]: graceful, crash, a pause past the Sentinels'
//! down-after that leaves two masters answering for a while, and a graceful
//! switch that leaves the old master running as a master until the end),
//! and a [`Load`] of clients recording their grants in a [`Checker`] — the
//! load, the checker and the client loop of the other safety runs.
//!
//! The clients run with durable votes on every replica (what a group
//! needs) and restart quarantine ([`FailoverRun::quarantine`], at least the
//! largest TTL a key is given), and the run records when each failover was
//! played, so that an acquire refused for want of members can be told
//! apart from one the failovers do not explain, and how long each left the
//! clients without a grant ([`FailoverOutcome::gaps`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use super::checker::{Checker, Figures, Overlap};
use super::nemesis::{ms, Action, Episode, Failover, Nemesis, Played, Schedule, Target};
use super::safety::{Client, Load};
use super::workload::{resource_name, Workload};
use super::{GroupOptions, SentinelGroup};

/// A randomized failover run: its settings.
#[derive(Debug, Clone)]
pub struct FailoverRun {
    /// Seeds the workload and the failovers.
    pub seed: u64,
    /// How long clients run, at least: the failovers' planned end plus
    /// [`FailoverRun::quiet`] when that is later.
    pub duration: Duration,
    /// The run's last stretch, without failovers: time for the last
    /// quarantine to end and grants to resume.
    pub quiet: Duration,
    /// Sentinel groups started as the members.
    pub groups: usize,
    /// How each group is built.
    pub group_options: GroupOptions,
    /// Each client's restart quarantine; at least
    /// [`Workload::max_key_ttl`].
    pub quarantine: Duration,
    /// The clients' load.
    pub workload: Workload,
}

/// What a failover run found. Holds the groups, so a failing assertion
/// on it prints every process's log (as a group dropped while panicking
/// does).
pub struct FailoverOutcome {
    /// The members the run used.
    pub groups: Vec<SentinelGroup>,
    /// The history the clients recorded.
    pub checker: Arc<Checker>,
    /// The checker's figures.
    pub figures: Figures,
    /// Every overlap found.
    pub overlaps: Vec<Overlap>,
    /// The failovers as played.
    pub played: Vec<Played>,
    /// The failovers played, by kind: `crash_failover=1,failover=2`.
    pub fault_kinds: String,
    /// Acquires and releases refused as unavailable outside every
    /// failover's window (its beginning to its end plus a quarantine and a
    /// second): when, from the start of the load, and the error.
    pub unexplained_outages: Vec<String>,
    /// When the load started.
    pub started: Instant,
    /// How long it ran.
    pub duration: Duration,
    /// Grants after the last failover was over.
    pub grants_after_faults: usize,
    /// Keys of the run's resources left on a master once every TTL passed.
    pub leaked_keys: usize,
    /// How long a fresh client took, after the run, to take each resource
    /// (the slowest), or `None` when one could not be taken in time.
    pub recovery: Option<Duration>,
    /// Per failover played, in order: the longest time without a grant
    /// (of any resource, to any client) from its beginning to the first
    /// grant after its end.
    pub gaps: Vec<Duration>,
}

/// Per failover in `played`, the longest time without a grant (`grants`,
/// sorted) from its beginning to the first grant after its end (or `last`,
/// the end of the load, when none came).
pub fn grant_gaps(played: &[Played], grants: &[Instant], last: Instant) -> Vec<Duration> {
    played
        .iter()
        .map(|p| {
            let from = grants.partition_point(|&g| g <= p.began);
            let resumed = grants.partition_point(|&g| g <= p.ended);
            let until = grants.get(resumed).copied().unwrap_or(last);
            let inside = grants.get(from..resumed).unwrap_or_default();
            let points = std::iter::once(p.began)
                .chain(inside.iter().copied())
                .chain(std::iter::once(until));
            let mut gap = Duration::ZERO;
            let mut previous = p.began;
            for t in points {
                gap = gap.max(t.saturating_duration_since(previous));
                previous = t;
            }
            gap
        })
        .collect()
}

/// The median and the largest of `gaps`.
pub fn gap_figures(gaps: &[Duration]) -> (Duration, Duration) {
    let mut sorted = gaps.to_vec();
    sorted.sort();
    let p50 = sorted.get(sorted.len() / 2).copied().unwrap_or_default();
    (p50, sorted.last().copied().unwrap_or_default())
}

impl FailoverOutcome {
    /// Whether every kind of failover was played.
    pub fn every_kind(&self) -> bool {
        [
            "failover",
            "crash_failover",
            "pause_failover",
            "switch_failover",
        ]
        .iter()
        .all(|k| self.played.iter().any(|p| p.action.name() == *k))
    }

    /// The failovers as played, from the start of the load: `member 1
    /// crash_failover +0.5s..+5.2s; …`.
    pub fn timeline(&self) -> String {
        let at = |t: Instant| t.saturating_duration_since(self.started).as_secs_f64();
        let played: Vec<String> = self
            .played
            .iter()
            .map(|p| {
                format!(
                    "member {} {} +{:.1}s..+{:.1}s",
                    p.node,
                    p.action.name(),
                    at(p.began),
                    at(p.ended)
                )
            })
            .collect();
        played.join("; ")
    }
}

/// Failovers on one of `members` members at a time, 0.3–1 s apart: one of
/// each kind first, in a seeded order (whatever `span`), then any while
/// they end by `span`. Each is planned as long as it takes with the
/// default [`GroupOptions`] (a promotion is the Sentinels' down-after,
/// their election and the switch: about 4 s after a crash or a pause; a
/// pause's end, its split and the demotion, comes on top); the nemesis
/// plays the steps in order, so one that overruns delays the next but
/// never overlaps it.
pub fn schedule(seed: u64, members: usize, span: Duration) -> Schedule {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut first = [0, 1, 2, 3];
    first.shuffle(&mut rng);
    let mut episodes = Vec::new();
    let mut t = ms(&mut rng, 300, 600);
    loop {
        let kind = first
            .get(episodes.len())
            .copied()
            .unwrap_or_else(|| rng.random_range(0..4));
        let (failover, length) = match kind {
            0 => (Failover::Graceful, ms(&mut rng, 1_500, 2_000)),
            1 => (Failover::Crash, ms(&mut rng, 4_500, 5_500)),
            // The switch, then two masters for 1 to 3 s.
            3 => (Failover::Switch, ms(&mut rng, 2_500, 4_500)),
            _ => (
                Failover::Pause {
                    split: ms(&mut rng, 200, 1_500),
                },
                ms(&mut rng, 4_500, 5_000),
            ),
        };
        let ending = ending(failover);
        if episodes.len() >= first.len() && t + length + ending > span {
            return Schedule { seed, episodes };
        }
        episodes.push(Episode {
            node: rng.random_range(0..members.max(1)),
            start: t,
            end: t + length,
            action: Action::Failover(failover),
        });
        t += length + ending + ms(&mut rng, 300, 1_000);
    }
}

/// How long the end of a failover takes: a pause's split and demotion.
fn ending(failover: Failover) -> Duration {
    match failover {
        Failover::Pause { split } => split + Duration::from_millis(500),
        _ => Duration::ZERO,
    }
}

/// When the last failover of `schedule` is planned to be over.
fn planned_end(schedule: &Schedule) -> Duration {
    let over = |e: &Episode| match e.action {
        Action::Failover(f) => e.end + ending(f),
        _ => e.end,
    };
    schedule.episodes.iter().map(over).max().unwrap_or_default()
}

/// The groups as a nemesis target: each failover's old and new master,
/// kept from its beginning to its end.
struct Members {
    groups: Vec<SentinelGroup>,
    switched: Vec<Option<(u16, u16)>>,
    /// Per group, its last old master demoted while it ran, until the
    /// group's next failover has waited for the Sentinels to read it.
    demoted: Vec<Option<u16>>,
}

impl Target for Members {
    fn begin(&mut self, node: usize, action: Action) {
        let Action::Failover(kind) = action else {
            panic!("members only fail over, not {}", action.name());
        };
        let group = &mut self.groups[node];
        if let Some(demoted) = self.demoted[node].take() {
            group.await_sentinels_read_replica(demoted);
        }
        let old = group.master_port();
        let new = match kind {
            Failover::Graceful => group.failover(),
            Failover::Crash => {
                group.kill_master();
                group.await_promotion(old)
            }
            Failover::Pause { .. } => {
                group.pause_data(old);
                group.await_promotion(old)
            }
            Failover::Switch => group.switch().1,
        };
        self.switched[node] = Some((old, new));
    }

    fn end(&mut self, node: usize, action: Action) {
        let Some((old, new)) = self.switched[node].take() else {
            return;
        };
        let group = &mut self.groups[node];
        match action {
            Action::Failover(Failover::Crash) => group.restart_data(old),
            Action::Failover(Failover::Pause { split }) => {
                group.resume_data(old);
                std::thread::sleep(split);
                group.demote(old, new);
            }
            Action::Failover(Failover::Switch) => group.demote(old, new),
            _ => {}
        }
        // A master demoted while running (not restarted): the next
        // failover of this group waits until every Sentinel has read it
        // as a replica, or a Sentinel may undo that failover's promotion.
        if !matches!(action, Action::Failover(Failover::Crash)) {
            self.demoted[node] = Some(old);
        }
    }
}

impl FailoverRun {
    /// The one summary line.
    pub fn line(&self, outcome: &FailoverOutcome) -> String {
        let w = &self.workload;
        let ttls: Vec<String> = w.ttls.iter().map(|t| t.as_millis().to_string()).collect();
        let slowest = outcome
            .played
            .iter()
            .map(|p| p.ended - p.began)
            .max()
            .unwrap_or_default();
        format!(
            "safety/members: seed={} secs={} clients={} members={}(sentinel) resources={} \
             ttls_ms={} quarantine_ms={} faults={} fault_kinds={} slowest_fault={:.0}ms \
             grants_after_faults={} unexplained_outages={} release_errors={} leaked_keys={} \
             recovery={} no_grant_p50={:.0}ms no_grant_max={:.0}ms {} failovers=[{}]",
            self.seed,
            outcome.duration.as_secs(),
            w.clients,
            self.groups,
            w.resources,
            ttls.join("/"),
            self.quarantine.as_millis(),
            outcome.played.len(),
            outcome.fault_kinds,
            slowest.as_secs_f64() * 1e3,
            outcome.grants_after_faults,
            outcome.unexplained_outages.len(),
            outcome.figures.release_errors,
            outcome.leaked_keys,
            outcome.recovery.map_or("none".to_owned(), |d| format!(
                "{:.0}ms",
                d.as_secs_f64() * 1e3
            )),
            gap_figures(&outcome.gaps).0.as_secs_f64() * 1e3,
            gap_figures(&outcome.gaps).1.as_secs_f64() * 1e3,
            outcome.figures.line(),
            outcome.timeline(),
        )
    }

    /// Starts the groups (in parallel), waits until their servers are
    /// older than the quarantine, plays the failovers while `load` runs,
    /// then checks recovery and leftovers.
    ///
    /// # Panics
    ///
    /// On a current-thread runtime (the groups are driven from blocking
    /// code), when a client cannot be built, a client panics (its
    /// assertion), or a group does not settle.
    pub async fn run(&self, load: &dyn Load) -> FailoverOutcome {
        let w = &self.workload;
        let booted = Instant::now();
        let groups: Vec<SentinelGroup> = tokio::task::block_in_place(|| {
            std::thread::scope(|s| {
                let starting: Vec<_> = (0..self.groups)
                    .map(|i| {
                        let options = &self.group_options;
                        s.spawn(move || SentinelGroup::start(&format!("member{i}"), options))
                    })
                    .collect();
                starting
                    .into_iter()
                    .map(|h| h.join().expect("a group starts"))
                    .collect()
            })
        });
        let urls: Vec<String> = groups.iter().map(SentinelGroup::url).collect();
        // Durable votes on every replica: a group needs them.
        let replicas = u32::try_from(self.group_options.replicas).unwrap_or(u32::MAX);
        // Uptime is read in whole seconds.
        let warmup = self.quarantine + Duration::from_secs(1);
        tokio::time::sleep(warmup.saturating_sub(booted.elapsed())).await;
        let build = || {
            load.builder(w.builder(&urls))
                .restart_quarantine(Some(self.quarantine))
                .durable_votes(Some(quorumlock::Durability::Replicas(replicas)))
                .build()
        };

        let schedule = schedule(
            self.seed,
            self.groups,
            self.duration.saturating_sub(self.quiet),
        );
        let duration = self.duration.max(planned_end(&schedule) + self.quiet);
        let prefix = super::unique("failover");
        let checker = Arc::new(Checker::new(w.resources, load.store(w.resources)));
        let mut clients = Vec::new();
        for _ in 0..w.clients {
            clients.push(build().await.expect("build a client"));
        }
        let started = Instant::now();
        let until = started + duration;
        let mut tasks = Vec::new();
        for (id, redlock) in clients.into_iter().enumerate() {
            tasks.push(load.client(Client {
                id,
                redlock,
                workload: w.clone(),
                checker: checker.clone(),
                prefix: prefix.clone(),
                seed: super::safety::client_seed(self.seed, id),
                until,
            }));
        }
        let members = Members {
            switched: vec![None; groups.len()],
            demoted: vec![None; groups.len()],
            groups,
        };
        let nemesis = Nemesis::play(members, schedule);
        let tasks: Vec<_> = tasks.into_iter().map(tokio::spawn).collect();
        for t in tasks {
            if let Err(e) = t.await {
                if e.is_panic() {
                    std::panic::resume_unwind(e.into_panic());
                }
            }
        }
        let (members, report) = tokio::task::block_in_place(|| nemesis.finish());

        // The failovers are over: a fresh client takes each resource within
        // a TTL (orphans expire) plus retries.
        let probe = build().await.expect("probe client");
        let start = Instant::now();
        let mut recovery = Some(Duration::ZERO);
        for r in 0..w.resources {
            let name = resource_name(&prefix, r);
            let wait = self.quarantine + w.max_ttl() + Duration::from_secs(3);
            if load.take_once(&probe, &name, w, wait).await {
                recovery = recovery.map(|d| d.max(start.elapsed()));
            } else {
                recovery = None;
            }
        }

        // Nothing outlives its TTL.
        tokio::time::sleep(w.max_key_ttl() + Duration::from_millis(500)).await;
        let pattern = load.keys(&prefix);
        let leaked_keys = tokio::task::block_in_place(|| {
            members
                .groups
                .iter()
                .map(|g| g.keys(g.master_port(), &pattern).len())
                .sum()
        });
        let slack = self.quarantine + Duration::from_secs(1);
        let explained = |t: Instant| {
            report
                .played
                .iter()
                .any(|p| p.began <= t && t <= p.ended + slack)
        };
        let unexplained_outages = checker
            .outages()
            .into_iter()
            .filter(|(t, _)| !explained(*t))
            .map(|(t, e)| format!("+{:.2}s: {e}", (t - started).as_secs_f64()))
            .collect();
        let mut granted: Vec<Instant> = checker.grants().iter().map(|g| g.granted_at).collect();
        granted.sort();
        let gaps = grant_gaps(&report.played, &granted, until);
        let quiet_from = report.played.iter().map(|p| p.ended).max();
        let grants_after_faults = checker
            .grants()
            .iter()
            .filter(|g| quiet_from.is_none_or(|q| g.granted_at > q))
            .count();
        FailoverOutcome {
            groups: members.groups,
            figures: checker.figures(),
            overlaps: checker.overlaps(),
            checker,
            fault_kinds: report.counts(),
            played: report.played,
            unexplained_outages,
            started,
            duration,
            grants_after_faults,
            leaked_keys,
            recovery,
            gaps,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gap_runs_from_the_failover_to_the_first_grant_after_its_end() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let played = |began, ended| Played {
            node: 0,
            action: Action::Failover(Failover::Graceful),
            began: at(began),
            ended: at(ended),
        };
        let grants = [at(50), at(120), at(900), at(1_000), at(3_000)];
        // Grants inside: the longest stretch is 120 -> 900.
        // None inside and the next one late: 1_000 -> 3_000.
        let gaps = grant_gaps(
            &[played(100, 950), played(1_100, 1_200)],
            &grants,
            at(4_000),
        );
        assert_eq!(
            gaps,
            [Duration::from_millis(780), Duration::from_millis(1_900)]
        );
        // No grant after it: until the end of the load.
        let gaps = grant_gaps(&[played(3_100, 3_200)], &grants, at(4_000));
        assert_eq!(gaps, [Duration::from_millis(900)]);
        assert_eq!(
            gap_figures(&[
                Duration::from_millis(3),
                Duration::from_millis(1),
                Duration::from_millis(2)
            ]),
            (Duration::from_millis(2), Duration::from_millis(3))
        );
    }
}
