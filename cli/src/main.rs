//! `quorumlock`: run a command under a Redlock lock, like `flock(1)` for a
//! set of Redis nodes; or show who holds a lock.

mod acquire;
mod child;
mod completions;
mod deadline;
mod descendants;
mod diagnose;
mod exit;
mod json;
mod output;
mod resource;
mod run;
mod signals;
mod status;

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

/// Run a command under a distributed lock held on a quorum of Redis nodes.
#[derive(Parser, Debug)]
#[command(name = "quorumlock", version, after_help = exit::TABLE)]
struct Cli {
    #[command(flatten)]
    common: Common,
    #[command(subcommand)]
    command: Command,
}

/// Options shared by every subcommand.
#[derive(Args, Debug, Clone)]
pub struct Common {
    /// Redis nodes, comma-separated URLs (`redis://[user:pass@]host:port[/db]`).
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
enum Command {
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
    Run(run::RunArgs),
    /// Show, per node, whether RESOURCE is locked, by whom and for how long.
    Status(status::StatusArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish,
    /// powershell) on stdout; needs no nodes.
    Completions(completions::CompletionsArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    output::init_tracing(&cli.common);
    if let Command::Completions(args) = &cli.command {
        return ExitCode::from(completions::completions(args));
    }
    if cli.common.nodes.is_empty() {
        output::stderr_line("no Redis nodes: pass --nodes URL,URL,... or set QUORUMLOCK_NODES");
        return ExitCode::from(exit::USAGE);
    }
    // One thread: the command is forked from the main thread, which lives
    // as long as the process, so its parent-death signal fires only when
    // quorumlock really exits.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            output::stderr_line(&format!("cannot start the runtime: {e}"));
            return ExitCode::from(exit::SOFTWARE);
        }
    };
    let code = runtime.block_on(async move {
        match cli.command {
            Command::Run(args) => run::run(&cli.common, args).await,
            Command::Status(args) => status::status(&cli.common, args).await,
            Command::Completions(_) => exit::OK,
        }
    });
    // Releases were written to every node before the quorum answered; no
    // background work is waited for (a hung node must cost nothing).
    output::flush();
    std::process::exit(i32::from(code))
}

/// Builds the client from the common options.
pub async fn redlock(common: &Common) -> Result<quorumlock::Redlock, quorumlock::Error> {
    // One list as written (--nodes or QUORUMLOCK_NODES): empty entries
    // ignored, a bad one named by its position.
    quorumlock::Builder::from_list(&common.nodes.join(","))
        .node_timeout(common.node_timeout)
        .connect_timeout(common.connect_timeout)
        .retry_delay(Duration::ZERO, common.retry_delay)
        .allow_eviction(common.allow_eviction)
        .build()
        .await
}

/// The exit status for a library error.
pub fn status_of(err: &quorumlock::Error) -> u8 {
    if err.is_contended() {
        exit::BUSY
    } else if err.is_invalid_input() {
        exit::USAGE
    } else if err.is_lost() {
        exit::LOST
    } else if err
        .node_failures()
        .iter()
        .any(|f| diagnose::is_config(&f.kind))
    {
        exit::CONFIG
    } else {
        exit::UNAVAILABLE
    }
}
