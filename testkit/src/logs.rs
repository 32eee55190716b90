//! A `tracing` writer into a shared buffer, for tests that assert what the
//! library logs (a warning per node, no token in a log line).

use std::sync::{Arc, Mutex, PoisonError};

/// Collects everything a `tracing_subscriber::fmt` subscriber writes.
/// Clones share the buffer: give one to the subscriber, read the other.
#[derive(Clone, Default, Debug)]
pub struct LogCapture(Arc<Mutex<Vec<u8>>>);

impl LogCapture {
    /// Captures the WARN and ERROR events of this thread until the guard
    /// is dropped (a current-thread runtime runs every task on it).
    pub fn warnings() -> (LogCapture, tracing::subscriber::DefaultGuard) {
        Self::at(tracing::Level::WARN)
    }

    /// Captures the events of this thread at `level` and above until the
    /// guard is dropped.
    pub fn at(level: tracing::Level) -> (LogCapture, tracing::subscriber::DefaultGuard) {
        let capture = LogCapture::default();
        let guard = tracing::subscriber::set_default(
            tracing_subscriber::fmt()
                .with_max_level(level)
                .with_writer(capture.clone())
                // Plain text, whatever the terminal: tests match fields
                // such as `resource="…"`.
                .with_ansi(false)
                .finish(),
        );
        (capture, guard)
    }

    /// What was written so far, as text.
    pub fn text(&self) -> String {
        let bytes = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

impl std::io::Write for LogCapture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogCapture {
    type Writer = LogCapture;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}
