//! `quorumlock`: run a command under a Redlock lock, like `flock(1)` for a
//! set of Redis nodes; or show who holds a lock.

mod exit;
mod output;
mod run;
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
    /// Redis nodes, comma-separated URLs (redis://[user:pass@]host:port[/db]).
    #[arg(long, env = "QUORUMLOCK_NODES", value_delimiter = ',', global = true)]
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
    /// CMD gets QUORUMLOCK_RESOURCE, QUORUMLOCK_DEADLINE (Unix time in ms at
    /// which the lock's current validity ends) and, with --fenced,
    /// QUORUMLOCK_FENCE in its environment. SIGINT, SIGTERM and SIGHUP sent to
    /// quorumlock are passed on to CMD.
    Run(run::RunArgs),
    /// Show, per node, whether RESOURCE is locked, by whom and for how long.
    Status(status::StatusArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    output::init_tracing(&cli.common);
    if cli.common.nodes.is_empty() {
        eprintln!("quorumlock: no Redis nodes: pass --nodes URL,URL,... or set QUORUMLOCK_NODES");
        return ExitCode::from(exit::USAGE);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("quorumlock: cannot start the runtime: {e}");
            return ExitCode::from(exit::SOFTWARE);
        }
    };
    let code = runtime.block_on(async move {
        match cli.command {
            Command::Run(args) => run::run(&cli.common, args).await,
            Command::Status(args) => status::status(&cli.common, args).await,
        }
    });
    // Background releases and renewals must not keep the process alive.
    runtime.shutdown_timeout(Duration::from_millis(500));
    ExitCode::from(code)
}

/// Builds the client from the common options.
pub async fn redlock(common: &Common) -> Result<quorumlock::Redlock, quorumlock::Error> {
    quorumlock::Redlock::builder(&common.nodes)
        .node_timeout(common.node_timeout)
        .connect_timeout(common.connect_timeout)
        .retry_delay(Duration::ZERO, common.retry_delay)
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
    } else {
        exit::UNAVAILABLE
    }
}
