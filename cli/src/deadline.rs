//! The lock's deadline for the command: `QUORUMLOCK_DEADLINE` holds the end
//! of the first validity window (never later than the truth, never
//! updated), and the file named by `QUORUMLOCK_DEADLINE_FILE` holds the
//! current one, rewritten (atomically, by rename) after each renewal.

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// `deadline` (monotonic) as Unix time in milliseconds.
pub fn unix_ms(deadline: Instant) -> u128 {
    let left = deadline.saturating_duration_since(Instant::now());
    SystemTime::now()
        .checked_add(left)
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis())
}

/// The deadline file; removed on drop.
pub struct DeadlineFile {
    path: PathBuf,
    written: Option<Instant>,
}

impl DeadlineFile {
    /// Creates a new file in the temporary directory (fails if it exists).
    pub fn create() -> std::io::Result<Self> {
        let dir = std::env::temp_dir();
        // The process id makes the name unique among live processes, the
        // random part across a reused id; `create_new` refuses a clash.
        // (The generator's state is never copied: the tool forks only to
        // exec the command.)
        let name = format!(
            "quorumlock-{}-{:016x}.deadline",
            std::process::id(),
            rand::random::<u64>()
        );
        let path = dir.join(name);
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)?;
        Ok(Self {
            path,
            written: None,
        })
    }

    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// Writes `deadline` unless it is the one written last.
    pub fn update(&mut self, deadline: Instant) {
        if self.written == Some(deadline) {
            return;
        }
        let tmp = self.path.with_extension("tmp");
        let text = format!("{}\n", unix_ms(deadline));
        if std::fs::write(&tmp, text).is_ok() && std::fs::rename(&tmp, &self.path).is_ok() {
            self.written = Some(deadline);
        }
    }
}

impl Drop for DeadlineFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = std::fs::remove_file(self.path.with_extension("tmp"));
    }
}

/// How often the file is checked against the lock's deadline.
pub const REFRESH: Duration = Duration::from_millis(100);
