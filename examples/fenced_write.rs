//! The second safeguard: a fencing token checked by the database.
//!
//! ```text
//! cargo run --example fenced_write
//! ```
//!
//! Worker A takes a fenced lock, checks that it is still valid, and then
//! stalls (a GC pause, swap, a stopped VM) for longer than the lock's TTL.
//! Worker B takes the lock meanwhile, with a higher fencing token, and
//! writes, twice. When A wakes up it writes too — but the SQLite table only
//! accepts a write whose token is at least the last one stored (`<=`: B's
//! second write carries the same token as its first and must pass), so A's
//! stale write is rejected instead of overwriting B's.
//!
//! Nodes: `QUORUMLOCK_NODES` if set, else five local `redis-server`s.

mod common;

use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rusqlite::{params, Connection};

const RESOURCE: &str = "report:monthly";
const TTL: Duration = Duration::from_millis(800);

/// The protected resource: one row, written only with a fence at least the
/// stored one (the same holder writes again with the same fence).
struct Store {
    db: Mutex<Connection>,
}

impl Store {
    fn open(path: &std::path::Path) -> rusqlite::Result<Self> {
        let db = Connection::open(path)?;
        db.execute_batch(
            "CREATE TABLE report (id INTEGER PRIMARY KEY, body TEXT NOT NULL, fence INTEGER NOT NULL);
             INSERT INTO report VALUES (1, 'empty', 0);",
        )?;
        Ok(Self { db: Mutex::new(db) })
    }

    /// The fenced write: accepted only if `fence` is at least the stored
    /// one. `<` would refuse a holder's own second write.
    fn write(&self, body: &str, fence: u64) -> rusqlite::Result<bool> {
        let db = self.db.lock().map_err(|_| rusqlite::Error::InvalidQuery)?;
        let changed = db.execute(
            "UPDATE report SET body = ?1, fence = ?2 WHERE id = 1 AND fence <= ?2",
            params![body, fence as i64],
        )?;
        Ok(changed == 1)
    }

    fn read(&self) -> rusqlite::Result<(String, i64)> {
        let db = self.db.lock().map_err(|_| rusqlite::Error::InvalidQuery)?;
        db.query_row("SELECT body, fence FROM report WHERE id = 1", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fenced_write: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), String> {
    let nodes = common::Nodes::get()?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let store = Arc::new(Store::open(&dir.path().join("reports.db")).map_err(|e| e.to_string())?);
    let redlock = quorumlock::Builder::new(nodes.urls.clone())
        .retry(quorumlock::Retry::Times(100))
        .retry_delay(Duration::from_millis(20), Duration::from_millis(60))
        .build()
        .await
        .map_err(|e| e.to_string())?;
    let t0 = Instant::now();
    let log = |who: &str, msg: String| println!("{} {who}: {msg}", common::stamp(t0));

    let a_lock = redlock
        .lock(RESOURCE, TTL)
        .fenced()
        .acquire()
        .await
        .map_err(|e| e.to_string())?;
    let a_fence = a_lock.fence().ok_or("fenced lock without a token")?;
    log(
        "A",
        format!("lock taken, fence {a_fence}, valid {:?}", a_lock.validity()),
    );
    log(
        "A",
        "validity checked: fine. Writing… (and then the process stalls)".into(),
    );

    let b = {
        let (redlock, store) = (redlock.clone(), store.clone());
        tokio::spawn(async move {
            let lock = redlock.lock(RESOURCE, TTL).fenced().acquire().await?;
            let fence = lock.fence().unwrap_or(0);
            println!(
                "{} B: lock taken after A's expired, fence {fence}",
                common::stamp(t0)
            );
            let mut accepted = true;
            for part in ["report by B", "report by B, part 2"] {
                let ok = store.write(part, fence).unwrap_or(false);
                println!(
                    "{} B: write {part:?} with fence {fence}: {}",
                    common::stamp(t0),
                    verdict(ok)
                );
                accepted &= ok;
            }
            lock.release().await?;
            Ok::<(u64, bool), quorumlock::Error>((fence, accepted))
        })
    };

    // A's stall: longer than the TTL. A still holds its `Lock` value and
    // believes it may write; only the database can tell otherwise.
    tokio::time::sleep(TTL * 2).await;
    let (b_fence, b_accepted) = b
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    log(
        "A",
        format!(
            "wakes up; its lock's validity is now {:?}",
            a_lock.validity()
        ),
    );
    let a_accepted = store
        .write("report by A", a_fence)
        .map_err(|e| e.to_string())?;
    log(
        "A",
        format!("stale write with fence {a_fence}: {}", verdict(a_accepted)),
    );
    drop(a_lock);

    let (body, fence) = store.read().map_err(|e| e.to_string())?;
    println!("\nstored: {body:?} with fence {fence}");
    println!(
        "without the fence check, A's write would have replaced B's: a lost update the lock alone cannot prevent."
    );
    if !(b_accepted && !a_accepted && b_fence > a_fence && body == "report by B, part 2") {
        return Err("the stale write was not rejected".into());
    }
    Ok(())
}

fn verdict(accepted: bool) -> &'static str {
    if accepted {
        "accepted"
    } else {
        "REJECTED (a newer holder already wrote)"
    }
}
