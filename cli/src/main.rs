//! `quorumlock`: run a command under a Redlock lock, like `flock(1)` for a
//! set of Redis nodes, under permits of a counting semaphore (at most L at
//! once), or while this process leads an election; or show who holds a
//! lock or a semaphore's permits, or who leads.

mod acquire;
mod args;
mod child;
mod client;
mod completions;
mod deadline;
mod descendants;
mod diagnose;
mod exit;
mod json;
mod output;
mod run;
mod signals;
mod status;
mod target;

use std::process::ExitCode;

use clap::Parser;

use crate::args::{Cli, Command};
use crate::target::Target;

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
            Command::Run(args) => {
                let target = match args.shared {
                    true => Target::Shared,
                    false => Target::new(args.permits, args.take, args.fenced),
                };
                run::run(&cli.common, &args.hold, target).await
            }
            Command::Elect(args) => {
                let target = Target::Leadership { value: args.value };
                run::run(&cli.common, &args.hold, target).await
            }
            Command::Status(args) => status::status(&cli.common, args).await,
            Command::Leader(args) => status::leader(&cli.common, args).await,
            Command::Completions(_) => exit::OK,
        }
    });
    // Releases were written to every node before the quorum answered; no
    // background work is waited for (a hung node must cost nothing).
    output::flush();
    std::process::exit(i32::from(code))
}
