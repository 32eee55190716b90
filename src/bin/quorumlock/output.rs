//! Messages on stderr: quiet, normal, verbose; a live line on a terminal.

use std::io::{IsTerminal, Write};

use crate::Common;

/// Sends the library's tracing to stderr with `--verbose`.
pub fn init_tracing(common: &Common) {
    if common.verbose {
        let _ = tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| "quorumlock=debug".into()),
            )
            .try_init();
    }
}

/// Where progress and notices go.
#[derive(Debug, Clone, Copy)]
pub struct Out {
    quiet: bool,
    verbose: bool,
    live: bool,
}

impl Out {
    pub fn new(common: &Common) -> Self {
        Self {
            quiet: common.quiet,
            verbose: common.verbose,
            live: std::io::stderr().is_terminal(),
        }
    }

    pub fn verbose(&self) -> bool {
        self.verbose
    }

    /// A notice (suppressed by `--quiet`).
    pub fn say(&self, msg: &str) {
        if !self.quiet {
            self.clear();
            eprintln!("quorumlock: {msg}");
        }
    }

    /// An error (always shown).
    pub fn error(&self, msg: &str) {
        self.clear();
        eprintln!("quorumlock: {msg}");
    }

    /// Progress: rewritten in place on a terminal, one line each on a pipe.
    pub fn progress(&self, msg: &str) {
        if self.quiet {
            return;
        }
        let mut err = std::io::stderr().lock();
        if self.live {
            let _ = write!(err, "\r\x1b[2Kquorumlock: {msg}");
            let _ = err.flush();
        } else {
            let _ = writeln!(err, "quorumlock: {msg}");
        }
    }

    fn clear(&self) {
        if self.live && !self.quiet {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
        }
    }
}
