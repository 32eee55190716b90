//! Messages on stderr (and `status`'s table on stdout): quiet, normal,
//! verbose; a live line on a terminal. Every write ignores its errors: a
//! closed or broken stderr (a `| logger` that died) must never stop the
//! supervisor from killing the command or releasing the lock.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::args::Common;

/// A live progress line is on the terminal and must be cleared before
/// anything else is written there.
static DRAWN: AtomicBool = AtomicBool::new(false);

/// Sends the library's tracing to stderr with `--verbose`; colours only on
/// a terminal.
pub fn init_tracing(common: &Common) {
    if common.verbose {
        let _ = tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_ansi(std::io::stderr().is_terminal())
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| "quorumlock=debug".into()),
            )
            .try_init();
    }
}

/// Writes `quorumlock: {msg}` and a newline to stderr, ignoring errors.
pub fn stderr_line(msg: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "quorumlock: {msg}");
    let _ = err.flush();
}

/// Writes one line to stdout, ignoring errors (a closed pipe included).
pub fn stdout_line(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
}

/// Flushes stdout and stderr before the process exits, ignoring errors.
pub fn flush() {
    let _ = std::io::stdout().lock().flush();
    let _ = std::io::stderr().lock().flush();
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

    /// A notice (suppressed by `--quiet`).
    pub fn say(&self, msg: &str) {
        if !self.quiet {
            self.clear();
            stderr_line(msg);
        }
    }

    /// A notice shown only with `--verbose`.
    pub fn detail(&self, msg: &str) {
        if self.verbose {
            self.say(msg);
        }
    }

    /// An error (always shown).
    pub fn error(&self, msg: &str) {
        self.clear();
        stderr_line(msg);
    }

    /// Progress: rewritten in place on a terminal, one line each on a pipe.
    pub fn progress(&self, msg: &str) {
        if self.quiet {
            return;
        }
        let mut err = std::io::stderr().lock();
        if self.live {
            let _ = write!(err, "\r\x1b[2Kquorumlock: {msg}");
            DRAWN.store(true, Ordering::Relaxed);
        } else {
            let _ = writeln!(err, "quorumlock: {msg}");
        }
        let _ = err.flush();
    }

    /// Removes the live progress line, if one is drawn (before the
    /// command starts writing to the same terminal).
    pub fn clear(&self) {
        if self.live && DRAWN.swap(false, Ordering::Relaxed) {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
        }
    }
}
