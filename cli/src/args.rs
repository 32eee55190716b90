//! The command line as clap reads it: the global options, the subcommands
//! and their arguments. Definitions only; what each subcommand does is in
//! its own module.

use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use clap_complete::Shell;
use quorumlock::{MAX_PERMITS, MAX_TTL};

use crate::exit;

/// Run a command under a distributed lock held on a quorum of Redis nodes.
#[derive(Parser, Debug)]
#[command(name = "quorumlock", version, after_help = exit::TABLE)]
pub struct Cli {
    #[command(flatten)]
    pub common: Common,
    #[command(subcommand)]
    pub command: Command,
}

/// Options shared by every subcommand.
#[derive(Args, Debug, Clone)]
pub struct Common {
    /// Quorum members, comma-separated URLs: a server
    /// (`redis://[user:pass@]host:port[/db]`), a Sentinel group
    /// (`redis+sentinel://[user:pass@]host:port,host:port/group`) or a
    /// Redis Cluster (`redis+cluster://host:port,host:port`).
    #[arg(
        long,
        env = "QUORUMLOCK_NODES",
        hide_env_values = true,
        value_delimiter = ',',
        global = true
    )]
    pub nodes: Vec<String>,
    /// Per-node reply timeout.
    #[arg(long, default_value = "50ms", value_parser = humantime::parse_duration, global = true)]
    pub node_timeout: Duration,
    /// Per-node connection timeout.
    #[arg(long, default_value = "500ms", value_parser = humantime::parse_duration, global = true)]
    pub connect_timeout: Duration,
    /// Largest random delay between attempts while waiting.
    #[arg(long, default_value = "200ms", value_parser = humantime::parse_duration, global = true)]
    pub retry_delay: Duration,
    /// Restart quarantine: a node up for less than this does not vote
    /// (a node that restarted without persistence forgot every key). Set
    /// it to at least the largest TTL in use when nodes may restart without
    /// `appendfsync always`; off by default.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, global = true)]
    pub restart_quarantine: Option<Duration>,
    /// Durable votes: a Sentinel group's or cluster master's yes counts
    /// once this many replicas have the write (`WAIT`); with --durable-aof,
    /// once they and the master fsynced it to their AOF (`WAITAOF`, Redis
    /// 7.2+ or Valkey). Required for a member that fails over, and equal to
    /// its number of replicas (a deposed master then grants nothing).
    #[arg(long, value_name = "REPLICAS", global = true)]
    pub durable_replicas: Option<u32>,
    /// With --durable-replicas: count a yes once fsynced to the AOFs too.
    #[arg(long, global = true, requires = "durable_replicas")]
    pub durable_aof: bool,
    /// Accept nodes whose maxmemory is set with a maxmemory-policy other
    /// than noeviction (refused by default: eviction can drop a held
    /// lock's key or a fencing counter).
    #[arg(long, global = true)]
    pub allow_eviction: bool,
    /// Only errors on stderr.
    #[arg(long, short, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Per-node details on stderr.
    #[arg(long, short, global = true)]
    pub verbose: bool,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Take the lock, run CMD while renewing it, release it when CMD exits.
    ///
    /// CMD runs in its own process group and gets QUORUMLOCK_RESOURCE,
    /// QUORUMLOCK_DEADLINE (Unix time in ms at which the lock's first
    /// validity window ends; renewals extend the lock past it),
    /// QUORUMLOCK_DEADLINE_FILE (a file holding the current deadline, kept
    /// up to date as the lock is renewed) and, with --fenced,
    /// QUORUMLOCK_FENCE. QUORUMLOCK_NODES is removed from its environment
    /// unless --export-nodes is given. SIGINT, SIGTERM, SIGHUP, SIGQUIT,
    /// SIGUSR1 and SIGUSR2 sent to quorumlock are passed on to CMD's process
    /// group; if quorumlock itself dies, CMD is killed (parent-death signal).
    /// What CMD leaves running, in its group or not (setsid, set -m), gets
    /// SIGTERM and, after --grace, SIGKILL before the lock is released.
    ///
    /// With --permits L, one permit of the counting semaphore RESOURCE of L
    /// permits is taken instead of the lock: at most L commands run at once
    /// across hosts, each supervised as above; CMD also gets QUORUMLOCK_SLOT
    /// (its slot, 0 to L-1: no other holder has it while the permit lasts;
    /// with --take K, its K slots, comma-separated).
    Run(RunArgs),
    /// Show, per node, whether RESOURCE is locked, by whom and for how long;
    /// with --permits L, the holders of the semaphore RESOURCE's permits.
    Status(StatusArgs),
    /// Wait until this process leads the election RESOURCE, run CMD while
    /// it leads, resign when CMD exits.
    ///
    /// CMD is supervised as by `run` (its process group, signals, what it
    /// leaves behind): if the leadership is lost, CMD and everything it
    /// started are killed and the exit status is 79. CMD gets
    /// QUORUMLOCK_EPOCH (the leadership's epoch: larger than every earlier
    /// leader's) and the variables of `run` but QUORUMLOCK_FENCE.
    Elect(ElectArgs),
    /// Show who leads the election RESOURCE: its epoch and value (exit 0),
    /// or that nobody does (exit 1).
    Leader(LeaderArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish,
    /// powershell) on stdout; needs no nodes.
    Completions(CompletionsArgs),
}

/// Default bound on waiting for a quorum that does not answer.
pub const DEFAULT_OUTAGE_WAIT: &str = "30s";

/// What `run` and `elect` share: how the lease is taken and waited for,
/// how CMD is supervised, the name and CMD.
#[derive(Args, Debug)]
pub struct HoldArgs {
    /// Lock TTL, at least 8 × --node-timeout, at most 1y (365 days); the
    /// lock is renewed every TTL/3 while CMD runs.
    #[arg(long, default_value = "30s", value_parser = parse_ttl)]
    pub ttl: Duration,
    /// Wait at most this long for a busy lock (default: wait until it is free).
    #[arg(long, value_parser = humantime::parse_duration, conflicts_with = "no_wait")]
    pub wait: Option<Duration>,
    /// Exit at once with status 75 if the lock is busy (a nightly job's "skip").
    #[arg(long)]
    pub no_wait: bool,
    /// Wait in turn: join RESOURCE's waiter queue and be served in the
    /// order of arrival among the processes that ask with --fair (plain
    /// ones may overtake). The wait is one request, so --outage-wait does
    /// not cut it short.
    #[arg(long)]
    pub fair: bool,
    /// While no quorum of nodes answers (nodes down, hung, refusing), keep
    /// trying at most this long, then exit 69; applies even without --wait.
    #[arg(long, default_value = DEFAULT_OUTAGE_WAIT, value_parser = humantime::parse_duration)]
    pub outage_wait: Duration,
    /// After a lost lock, or CMD's exit with processes it started still
    /// running (in its group or not): time between SIGTERM and SIGKILL to
    /// them (never past the lock's validity).
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub grace: Duration,
    /// Pass the node list on to CMD in QUORUMLOCK_NODES (it may hold
    /// passwords; by default CMD does not get it).
    #[arg(long)]
    pub export_nodes: bool,
    #[command(flatten)]
    pub resource: ResourceArg,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub hold: HoldArgs,
    /// Hand CMD a fencing token in QUORUMLOCK_FENCE.
    #[arg(long)]
    pub fenced: bool,
    /// Take one permit of the counting semaphore RESOURCE, which has L
    /// permits (1 to 1024), instead of the lock: at most L commands run at
    /// once. Every user of RESOURCE must give the same L.
    #[arg(long, value_name = "L", value_parser = permits_range())]
    pub permits: Option<u32>,
    /// With --permits L: take K of the L permits at once, all or nothing
    /// (K at most L; default 1).
    #[arg(long, value_name = "K", value_parser = permits_range(), requires = "permits")]
    pub take: Option<u32>,
    /// Take the read side of the read–write lock RESOURCE instead of the
    /// lock: any number of --shared commands run at once, never beside a
    /// plain `run` of RESOURCE (whose lock keeps readers out as a writer's
    /// does) or a writer.
    #[arg(long, conflicts_with_all = ["permits", "fenced"])]
    pub shared: bool,
}

#[derive(Args, Debug)]
pub struct ElectArgs {
    #[command(flatten)]
    pub hold: HoldArgs,
    /// What `quorumlock leader` shows while this process leads (an
    /// address, a host name).
    #[arg(long, default_value = "")]
    pub value: String,
}

/// A TTL as humantime reads it; `1y` (365.25 days) means the maximum.
fn parse_ttl(text: &str) -> Result<Duration, String> {
    let ttl = humantime::parse_duration(text).map_err(|e| e.to_string())?;
    if ttl > MAX_TTL && ttl <= HUMANTIME_YEAR {
        return Ok(MAX_TTL);
    }
    if ttl > MAX_TTL {
        return Err(format!("at most 1y ({MAX_TTL:?})"));
    }
    Ok(ttl)
}

/// The number of permits a semaphore may have, or take: 1 to
/// [`MAX_PERMITS`] (a usage error otherwise, before anything is sent).
fn permits_range() -> clap::builder::RangedI64ValueParser<u32> {
    clap::value_parser!(u32).range(1..=i64::from(MAX_PERMITS))
}

/// How long humantime's `1y` is (365.25 days); accepted as the maximum.
const HUMANTIME_YEAR: Duration = Duration::from_secs(31_557_600);

#[derive(Args, Debug)]
pub struct StatusArgs {
    #[command(flatten)]
    pub resource: ResourceArg,
    /// Show the counting semaphore RESOURCE of L permits (1 to 1024): its
    /// holders, each with its slots and expiry, and the permits held and
    /// free.
    #[arg(long, value_name = "L", value_parser = permits_range())]
    pub permits: Option<u32>,
    /// Show the read–write lock RESOURCE: its writer (or lock) and how
    /// many readers hold, per node.
    #[arg(long, conflicts_with = "permits")]
    pub shared: bool,
    /// Print one JSON object (stable fields, see the README) instead of
    /// the table; the exit status is the same.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct LeaderArgs {
    #[command(flatten)]
    pub resource: ResourceArg,
    /// Print one JSON object (stable fields, see the README); the exit
    /// status is the same.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct CompletionsArgs {
    /// The shell to write the completion script for.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// The name of the lock, semaphore or election: positional, or through
/// `--resource` for a name that begins with `-`.
#[derive(Args, Debug)]
pub struct ResourceArg {
    /// The name, for a name that begins with `-`.
    #[arg(
        long = "resource",
        value_name = "RESOURCE",
        allow_hyphen_values = true,
        conflicts_with = "resource"
    )]
    pub resource_flag: Option<String>,
    /// The name of the lock (its Redis key), semaphore or election.
    #[arg(required_unless_present = "resource_flag")]
    pub resource: Option<String>,
}

impl ResourceArg {
    /// The name given, whichever way (clap requires one of the two).
    pub fn name(&self) -> String {
        self.resource_flag
            .clone()
            .or_else(|| self.resource.clone())
            .unwrap_or_default()
    }
}
