//! `quorumlock completions SHELL`: the completion script for bash, zsh,
//! fish, elvish or PowerShell on stdout, generated from the same argument
//! definitions the command parses (no nodes needed).
//!
//! ```text
//! quorumlock completions bash > /etc/bash_completion.d/quorumlock
//! quorumlock completions zsh > "${fpath[1]}/_quorumlock"
//! quorumlock completions fish > ~/.config/fish/completions/quorumlock.fish
//! ```

use std::io::Write;

use clap::CommandFactory;

use crate::args::{Cli, CompletionsArgs};
use crate::exit;

/// Writes the script; a closed stdout is not an error worth a status.
pub fn completions(args: &CompletionsArgs) -> u8 {
    let mut cmd = Cli::command();
    let mut out = std::io::stdout().lock();
    clap_complete::generate(args.shell, &mut cmd, "quorumlock", &mut out);
    let _ = out.flush();
    exit::OK
}
