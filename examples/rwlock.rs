//! Many readers or one writer: three readers share a catalog, a writer
//! waits for them and keeps new readers out meanwhile.
//!
//! ```text
//! cargo run --example rwlock
//! ```
//!
//! Three readers take the read side of `catalog` together and read for a
//! second. A writer asks for the write side meanwhile: it waits, and its
//! intent keeps a late reader out, so the readers already in are all it
//! waits for. Once they release, the writer is in with a fencing token;
//! a reader asking then is refused until the writer releases. The example
//! checks each of these and fails if one does not hold.
//!
//! Nodes: `QUORUMLOCK_NODES` if set, else five local `redis-server`s.

mod common;

use std::error::Error;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use quorumlock::{Redlock, Retry};

const NAME: &str = "catalog";
const TTL: Duration = Duration::from_secs(5);
const READING: Duration = Duration::from_secs(1);

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rwlock: {e}");
            ExitCode::FAILURE
        }
    }
}

/// One attempt at the read side: whether it was granted (and released
/// again), or refused because the other side holds or waits.
async fn try_read(redlock: &Redlock) -> Result<bool, quorumlock::Error> {
    let once = redlock.read(NAME, TTL).retry(Retry::Times(0));
    match once.acquire().await {
        Ok(reader) => reader.release().await.map(|()| true),
        Err(e) if e.is_contended() => Ok(false),
        Err(e) => Err(e),
    }
}

async fn run() -> Result<(), Box<dyn Error>> {
    let nodes = common::Nodes::get()?;
    // Each check below is one attempt: on a busy machine, give it time.
    let redlock = quorumlock::Builder::new(nodes.urls.clone())
        .node_timeout(Duration::from_millis(500))
        .build()
        .await?;
    let t0 = Instant::now();
    let reading = Arc::new(AtomicUsize::new(0));

    println!("== three readers take {NAME:?} together");
    let mut readers = Vec::new();
    for r in 1..=3 {
        let reader = redlock.read(NAME, TTL).acquire().await?;
        reading.fetch_add(1, Ordering::SeqCst);
        println!("{} reader {r} in", common::stamp(t0));
        let reading = reading.clone();
        readers.push(tokio::spawn(async move {
            tokio::time::sleep(READING).await;
            reading.fetch_sub(1, Ordering::SeqCst);
            println!("{} reader {r} done", common::stamp(t0));
            reader.release().await
        }));
    }
    let status = redlock.rwlock_status(NAME).await?;
    println!("{} status: {status}", common::stamp(t0));

    println!("== a writer asks while they read");
    let request = redlock
        .write(NAME, TTL)
        .fenced()
        .retry(Retry::Until(TTL * 2));
    let writer = tokio::spawn(async move {
        let writer = request.acquire().await?;
        // Readers still reading when the writer got in: none, or a bug.
        Ok::<_, quorumlock::Error>((writer, reading.load(Ordering::SeqCst)))
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    if try_read(&redlock).await? {
        return Err("a late reader got in while a writer was waiting".into());
    }
    println!("{} a late reader is refused", common::stamp(t0));

    for reader in readers {
        reader.await??;
    }
    let (writer, readers_left) = writer.await??;
    println!(
        "{} the writer is in with fencing token {:?}",
        common::stamp(t0),
        writer.fence()
    );
    if readers_left != 0 {
        return Err(format!("the writer got in beside {readers_left} reader(s)").into());
    }
    if try_read(&redlock).await? {
        return Err("a reader got in beside the writer".into());
    }
    println!(
        "{} a reader is refused beside the writer",
        common::stamp(t0)
    );
    writer.release().await?;

    if !try_read(&redlock).await? {
        return Err("a reader was refused after the writer released".into());
    }
    println!("{} the writer released: a reader is in", common::stamp(t0));
    redlock.settle(Duration::from_millis(500)).await;
    Ok(())
}
