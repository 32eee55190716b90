//! Taking the lock (or permits of a semaphore, or a leadership) for `run`
//! and `elect`: waits for
//! contention as long as asked, for an outage at most `--outage-wait`, for
//! a configuration error not at all; a stop signal ends the wait and
//! releases whatever was partly taken.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use quorumlock::{Redlock, Retry};

use crate::args::{Common, HoldArgs};
use crate::diagnose::{after_refusal, classify, wrongtype, Verdict};
use crate::output::Out;
use crate::signals::{is_stop, status_for, Signals};
use crate::target::{Taken, Target};
use crate::{client, exit};

/// Longest single call into the library while waiting, so that the kind of
/// failure is looked at regularly.
const SLICE: Duration = Duration::from_secs(1);

/// How long a `--fair` request waits without `--wait`: a day, after which
/// it joins the queue again.
const FAIR_WAIT: Duration = Duration::from_secs(24 * 3600);

/// What taking the lock needs from the command line.
#[derive(Debug, Clone)]
pub struct AcquireOptions {
    /// The lock, permits of a semaphore, or a leadership.
    pub target: Target,
    /// The lock's TTL.
    pub ttl: Duration,
    /// How long to wait for a busy lock (`None`: until it is free).
    pub wait: Option<Duration>,
    /// Give up at once when the lock is busy.
    pub no_wait: bool,
    /// Wait in turn, in the resource's waiter queue.
    pub fair: bool,
    /// How long to keep trying while no quorum answers.
    pub outage_wait: Duration,
    /// The per-node reply timeout (bounds the wait for partial releases).
    pub node_timeout: Duration,
    /// Largest random pause between attempts during an outage.
    pub retry_delay: Duration,
}

impl AcquireOptions {
    /// The options `run` or `elect` was given, for `target`.
    pub fn new(common: &Common, args: &HoldArgs, target: Target) -> Self {
        Self {
            target,
            ttl: args.ttl,
            wait: args.wait,
            no_wait: args.no_wait,
            fair: args.fair,
            outage_wait: args.outage_wait,
            node_timeout: common.node_timeout,
            retry_delay: common.retry_delay,
        }
    }
}

/// Takes the lock (or the permit), or returns the exit status.
pub async fn acquire(
    redlock: &Redlock,
    args: &AcquireOptions,
    resource: &str,
    out: Out,
    signals: &mut Signals,
) -> Result<Taken, u8> {
    let started = Instant::now();
    // Why the last attempt failed when no holder explains it (too few
    // nodes vote: down, quarantined, short of replicas): the progress line
    // says that rather than "is free".
    let outage = Arc::new(Mutex::new(None::<String>));
    let progress = (!args.no_wait).then(|| {
        let (redlock, resource) = (redlock.clone(), resource.to_owned());
        let (target, outage) = (args.target.clone(), outage.clone());
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            loop {
                let why = outage
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone();
                let status = match why {
                    Some(why) => why,
                    None => target.read(&redlock, &resource).await.to_string(),
                };
                out.progress(&format!(
                    "waiting for {} ({:.0}s): {status}",
                    target.wanted(),
                    started.elapsed().as_secs_f64()
                ));
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        })
    });
    let result = attempts(redlock, args, resource, (out, &outage), signals, started).await;
    if let Some(progress) = progress {
        progress.abort();
    }
    out.clear();
    if result.is_err() {
        // The last attempt's partial grants are being released in the
        // background; the process exits next.
        redlock.settle(args.node_timeout.saturating_mul(2)).await;
    }
    result
}

async fn attempts(
    redlock: &Redlock,
    args: &AcquireOptions,
    resource: &str,
    (out, outage): (Out, &Mutex<Option<String>>),
    signals: &mut Signals,
    started: Instant,
) -> Result<Taken, u8> {
    let set_outage = |why: Option<String>| {
        *outage.lock().unwrap_or_else(PoisonError::into_inner) = why;
    };
    // A wait too large to add to an instant is no limit.
    let wait_until = args.wait.and_then(|w| started.checked_add(w));
    let ran_out = || {
        wait_until.is_some_and(|d| {
            d.saturating_duration_since(Instant::now()) < Duration::from_millis(10)
        })
    };
    let (nodes, quorum) = (redlock.nodes(), redlock.quorum());
    let mut outage_since: Option<Instant> = None;
    let mut first = true;
    loop {
        let attempt_started = Instant::now();
        let retry = if args.no_wait {
            // A couple of quick retries only settle split votes between
            // contenders that started together.
            Retry::Times(2)
        } else if args.fair {
            // One request for the whole wait: a new one would join the
            // queue again, at the back.
            Retry::Until(
                wait_until.map_or(FAIR_WAIT, |d| d.saturating_duration_since(Instant::now())),
            )
        } else if first {
            Retry::Times(0)
        } else {
            let left = wait_until.map_or(SLICE, |d| d.saturating_duration_since(Instant::now()));
            Retry::Until(left.min(SLICE))
        };
        first = false;
        // Boxed, so that dropping it below really ends it (and spawns the
        // release of what it took) before the wait for that release.
        let mut attempt = args
            .target
            .attempt(redlock, resource, args.ttl, retry, args.fair);
        let result = loop {
            tokio::select! {
                biased;
                sig = signals.next() => {
                    if is_stop(sig) {
                        out.say(&format!("got {sig} while waiting for {}; giving up", args.target.wanted()));
                        // Dropping the attempt releases what it took, in
                        // the background: wait for that before exiting.
                        drop(attempt);
                        redlock.settle(args.node_timeout.saturating_mul(4)).await;
                        return Err(status_for(sig));
                    }
                    out.detail(&format!("got {sig} while waiting for {}; no command to pass it to yet", args.target.wanted()));
                }
                r = &mut attempt => break r,
            }
        };
        let err = match result {
            Ok(taken) => return Ok(taken),
            Err(e) => e,
        };
        let mut verdict = classify(&err, nodes, quorum);
        let mut reading = None;
        if verdict == Verdict::Contended {
            // "Busy" only when someone holds it: refusals can also come
            // from this process' own previous attempt, whose release is
            // still on its way while most nodes are down.
            let seen = args.target.read(redlock, resource).await;
            if let Some(v) = after_refusal(&seen.views(), nodes, quorum) {
                verdict = v;
            }
            reading = Some(seen);
        }
        match verdict {
            Verdict::Contended => {
                outage_since = None;
                set_outage(None);
                let reading = match reading {
                    Some(r) => r,
                    None => args.target.read(redlock, resource).await,
                };
                if let Some(wrongtype) = wrongtype(&reading.views(), nodes, quorum) {
                    let (what, keys) = match args.target {
                        Target::Lock { .. } | Target::Shared => ("a lock", "its key holds"),
                        Target::Permit { .. } => ("a semaphore", "its slots' keys hold"),
                        Target::Leadership { .. } => ("an election", "its leadership key holds"),
                    };
                    out.error(&format!(
                        "{resource:?} is not {what}: {keys} a value of another type on \
                         {wrongtype} of {nodes} nodes (WRONGTYPE); choose another resource name"
                    ));
                    return Err(exit::CONFIG);
                }
                if args.no_wait || ran_out() {
                    let busy = match args.target {
                        Target::Lock { .. } => "lock busy",
                        Target::Shared => "written",
                        Target::Permit { take: 1, .. } => "no permit free",
                        Target::Permit { .. } => "not enough permits free",
                        Target::Leadership { .. } => "another process leads",
                    };
                    out.say(&format!("{busy}: {reading}"));
                    return Err(exit::BUSY);
                }
            }
            Verdict::Outage(msg) => {
                let since = *outage_since.get_or_insert(attempt_started);
                if args.no_wait || ran_out() || since.elapsed() >= args.outage_wait {
                    out.error(&msg);
                    out.detail(&err.to_string());
                    return Err(exit::UNAVAILABLE);
                }
                out.detail(&msg);
                set_outage(Some(msg));
                // Let the release of this attempt's partial grants land
                // before the next one. The thread-local generator is fine
                // here, unlike in the library (its `random` module): this
                // process forks only to exec the command, so no copy of its
                // state ever draws.
                let pause = args.retry_delay.mul_f64(rand::random::<f64>());
                tokio::time::sleep(pause.max(Duration::from_millis(10))).await;
            }
            Verdict::Config(msg) => {
                out.error(&format!("{msg}; this will not pass by waiting"));
                out.detail(&err.to_string());
                return Err(exit::CONFIG);
            }
            Verdict::Usage(msg) => {
                out.error(&msg);
                return Err(exit::USAGE);
            }
            Verdict::Other(msg) => {
                out.error(&msg);
                return Err(client::status_of(&err));
            }
        }
    }
}
