//! The scenarios: what a contender takes and how it cycles, the holds
//! recorded on one clock for the overlap validator, and the five
//! measurements, each plain and fair in one run.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use quorumlock::{Lock, Permit, Redlock, Retry};
use rand::rngs::StdRng;
use rand::Rng;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::measure::{self, micros, Spread, Summary};
use crate::report::{ms, ratio, Table};
use crate::Plan;

const TTL: Duration = Duration::from_secs(10);
/// How long a cycling contender would wait: longer than any run, which
/// cancels it first.
const LONG: Duration = Duration::from_secs(300);
/// The hold in `turns`, and in the scenarios of one waiter.
const TURN: Duration = Duration::from_millis(10);
const HOLD: Duration = Duration::from_millis(50);
/// The semaphore's permits in `permits`.
const PERMITS: u32 = 4;
/// A writer's weight, and what the validator admits of a read–write lock.
const RW: u32 = 64;
/// Plain, then fair (`true`).
const MODES: [bool; 2] = [false, true];

fn mode(fair: bool) -> &'static str {
    ["plain", "fair"][usize::from(fair)]
}

/// What a contender takes.
#[derive(Debug, Clone, Copy)]
pub enum Take {
    Lock,
    Permits(u32),
    Read,
    Write,
}

impl Take {
    /// Its weight against what the primitive admits at once.
    fn weight(self) -> u32 {
        match self {
            Take::Lock | Take::Read => 1,
            Take::Permits(k) => k,
            Take::Write => RW,
        }
    }
}

/// `request` waiting as `retry` says, fair or not.
macro_rules! ask {
    ($request:expr, $fair:expr, $retry:expr) => {{
        let request = $request.retry($retry);
        if $fair {
            request.fair()
        } else {
            request
        }
    }};
}

type Result<T> = quorumlock::Result<T>;

async fn acquire(rl: &Redlock, key: &str, take: Take, fair: bool, retry: Retry) -> Result<Lock> {
    match take {
        Take::Lock => ask!(rl.lock(key, TTL), fair, retry).acquire().await,
        Take::Permits(k) => ask!(rl.semaphore(key, PERMITS, TTL).take(k), fair, retry)
            .acquire()
            .await
            .map(Permit::into_lock),
        Take::Read => ask!(rl.read(key, TTL), fair, retry).acquire().await,
        Take::Write => ask!(rl.write(key, TTL), fair, retry).acquire().await,
    }
}

/// What one run recorded: every hold as `(weight, granted, released)` in
/// ns since its start (the grant read once the acquire returned, the
/// release before it is sent), and the errors no contender expected.
#[derive(Clone)]
struct Log {
    start: Instant,
    all: Arc<Mutex<(Vec<Hold>, Vec<String>)>>,
}

/// `(weight, granted, released)`, as the overlap validator reads it.
type Hold = (u32, u64, u64);

impl Log {
    fn new() -> Self {
        let all = Arc::default();
        Log {
            start: Instant::now(),
            all,
        }
    }

    /// Holds `lock`, granted just now, for `hold`; records it; releases it.
    async fn hold(&self, lock: Lock, weight: u32, hold: Duration) {
        let granted = self.start.elapsed().as_nanos() as u64;
        tokio::time::sleep(hold).await;
        let held = (weight, granted, self.start.elapsed().as_nanos() as u64);
        self.all.lock().expect("the log").0.push(held);
        if let Err(e) = lock.release().await {
            self.error("release", &e);
        }
    }

    fn error(&self, what: &str, e: &quorumlock::Error) {
        let mut all = self.all.lock().expect("the log");
        all.1.push(format!("{what}: {e}"));
    }

    /// The overlaps of the holds ([`measure::overlaps`]), and how many
    /// unexpected errors (the first printed, with `run`).
    fn end(&self, limit: u32, run: &str) -> (usize, usize) {
        let (holds, errors) = &mut *self.all.lock().expect("the log");
        if let Some(first) = errors.first() {
            eprintln!("{run}: {} errors; the first: {first}", errors.len());
        }
        (measure::overlaps(holds, limit), errors.len())
    }
}

/// Each client a contender on `key`, from an offset drawn within `hold`
/// on: takes `take` (waiting as long as it takes), holds it for `hold`,
/// releases it and asks again at once, until `stop`. Each returns its
/// waits from asking to holding.
fn cycling(
    clients: &[Redlock],
    key: &str,
    (take, fair, hold): (Take, bool, Duration),
    log: &Log,
    stop: &CancellationToken,
    rng: &mut StdRng,
) -> Vec<JoinHandle<Vec<Duration>>> {
    let spawn = |rl: Redlock, offset: Duration| {
        let (key, log, stop) = (key.to_owned(), log.clone(), stop.clone());
        tokio::spawn(async move {
            let mut waits = Vec::new();
            tokio::select! {
                () = tokio::time::sleep(offset) => {}
                () = stop.cancelled() => return waits,
            }
            while !stop.is_cancelled() {
                let asked = Instant::now();
                let taken = tokio::select! {
                    taken = acquire(&rl, &key, take, fair, Retry::Until(LONG)) => taken,
                    () = stop.cancelled() => break,
                };
                match taken {
                    Ok(lock) => {
                        waits.push(asked.elapsed());
                        log.hold(lock, take.weight(), hold).await;
                    }
                    Err(e) => {
                        log.error("acquire", &e);
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                }
            }
            waits
        })
    };
    let span = hold.as_micros() as u64;
    let offset = |rng: &mut StdRng| Duration::from_micros(rng.random_range(0..span));
    clients
        .iter()
        .map(|rl| spawn(rl.clone(), offset(rng)))
        .collect()
}

/// Each contender's waits, once it ended.
async fn joined(tasks: Vec<JoinHandle<Vec<Duration>>>) -> Vec<Vec<Duration>> {
    let ended = futures::future::join_all(tasks).await;
    ended
        .into_iter()
        .map(|t| t.expect("a contender panicked"))
        .collect()
}

/// `n` acquire + release cycles on fresh resources; their durations.
async fn cycles(rl: &Redlock, round: &str, fair: bool, n: usize, log: &Log) -> Vec<Duration> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let key = format!("bench:fairness:cost:{round}:{}:{i}", mode(fair));
        let began = Instant::now();
        match acquire(rl, &key, Take::Lock, fair, Retry::Times(0)).await {
            Ok(lock) => match lock.release().await {
                Ok(()) => out.push(began.elapsed()),
                Err(e) => log.error("release", &e),
            },
            Err(e) => log.error("acquire", &e),
        }
    }
    out
}

/// 1. `cost`: rounds of uncontended cycles of one client, plain and fair
///    in a drawn order each round. One holder at a time, on resources of
///    their own: nothing can overlap.
pub async fn cost(rl: &Redlock, plan: &Plan, rng: &mut StdRng) -> Table {
    let logs = [Log::new(), Log::new()];
    for fair in MODES {
        cycles(rl, "warmup", fair, 20, &logs[fair as usize]).await;
    }
    let (mut pooled, mut p50s) = ([Vec::new(), Vec::new()], Vec::new());
    for round in 0..plan.rounds {
        let mut p50 = [0.0; 2];
        let first = rng.random_bool(0.5);
        for fair in [first, !first] {
            let log = &logs[fair as usize];
            let these = cycles(rl, &round.to_string(), fair, plan.cycles, log).await;
            p50[fair as usize] = micros(Summary::of(&these).p50);
            pooled[fair as usize].extend(these);
        }
        p50s.push(p50[1] / p50[0].max(1.0));
    }
    let r = Spread::of(&p50s);
    let caption = format!(
        "Acquire + release of a free lock (one attempt), each on a fresh resource: {} rounds \
         × {} cycles of each mode, in a drawn order. Fair/plain p50 per round: median {:.2}, \
         {:.2}–{:.2}.",
        plan.rounds, plan.cycles, r.median, r.min, r.max
    );
    let columns = "mode | cycles | p50 ms | p99 ms | mean ms | errors";
    let mut table = Table::new("cost", caption, columns);
    let [plain, fair] = pooled.map(|p| Summary::of(&p));
    for (name, s, log) in [("plain", plain, &logs[0]), ("fair", fair, &logs[1])] {
        let (n, p50, p99, mean) = (s.n, ms(s.p50), ms(s.p99), ms(s.mean));
        let (_, errors) = log.end(1, &format!("cost ({name})"));
        table.row(&format!("{name} | {n} | {p50} | {p99} | {mean} | {errors}"));
    }
    let times = |f: fn(&Summary) -> Duration| ratio(micros(f(&fair)), micros(f(&plain)));
    let (p50, p99, mean) = (times(|s| s.p50), times(|s| s.p99), times(|s| s.mean));
    table.row(&format!("fair/plain | | {p50} | {p99} | {mean} |"));
    table
}

/// 2. `turns`: every client a contender on one lock, holding it [`TURN`]
///    and asking again at once, for the plan's window; plain, then fair.
pub async fn turns(clients: &[Redlock], plan: &Plan, rng: &mut StdRng) -> Table {
    let caption = format!(
        "{} contenders on one lock for {:.1} s, each holding it {} ms and asking again at \
         once (waiting as long as it takes). Target for fair: most/fewest ≤ 1.5.",
        clients.len(),
        plan.window.as_secs_f64(),
        TURN.as_millis()
    );
    let columns = "mode | grants | grants/s | fewest | most | most/fewest | wait p50 ms \
                   | wait p99 ms | wait max ms | errors | overlaps";
    let mut table = Table::new("turns", caption, columns);
    for fair in MODES {
        let key = format!("bench:fairness:turns:{}", mode(fair));
        let (log, stop) = (Log::new(), CancellationToken::new());
        let tasks = cycling(clients, &key, (Take::Lock, fair, TURN), &log, &stop, rng);
        tokio::time::sleep(plan.window).await;
        stop.cancel();
        let each = joined(tasks).await;
        let grants: Vec<usize> = each.iter().map(Vec::len).collect();
        let fewest = grants.iter().copied().min().unwrap_or(0);
        let most = grants.iter().copied().max().unwrap_or(0);
        if fair {
            table.starved = grants.iter().filter(|&&g| g == 0).count();
        }
        let name = mode(fair);
        let (overlaps, errors) = log.end(1, &format!("turns ({name})"));
        table.overlaps += overlaps;
        let wait = Summary::of(&each.concat());
        let (p50, p99, max) = (ms(wait.p50), ms(wait.p99), ms(wait.max));
        let total: usize = grants.iter().sum();
        let rate = total as f64 / plan.window.as_secs_f64();
        let spread = ratio(most as f64, fewest as f64);
        table.row(&format!(
            "{name} | {total} | {rate:.1} | {fewest} | {most} | {spread} | {p50} | {p99} | \
             {max} | {errors} | {overlaps}"
        ));
    }
    table
}

/// A scenario of one waiter among contenders cycling on one resource:
/// its name, how many contenders and what each takes, what the waiter
/// asks for, what the validator admits, and what the waiter waits for.
pub type Among = (&'static str, usize, Take, Take, u32, &'static str);

/// 3. `permits`, 4. `readers`, 5. `writers`.
#[rustfmt::skip]
pub const AMONG: [Among; 3] = [
    ("permits", 6, Take::Permits(1), Take::Permits(2), PERMITS, "2 of 4 permits among 6 takers"),
    ("readers", 4, Take::Write, Take::Read, RW, "a read lock among 4 writers"),
    ("writers", 4, Take::Read, Take::Write, RW, "a write lock among 4 readers (overlapping)"),
];

/// 3–5: the waiter asks the plan's number of times, each after a drawn
/// pause and with the plan's cap, while the others cycle (each holding
/// [`HOLD`], asking again at once); plain, then fair (everyone fair).
pub async fn among(s: &Among, clients: &[Redlock], plan: &Plan, rng: &mut StdRng) -> Table {
    let &(name, count, take, wants, limit, what) = s;
    let (waiter, others) = clients.split_first().expect("a waiter's client");
    let others = &others[..count];
    let caption = format!(
        "The wait for {what}, each cycling (hold {} ms, asking again at once); the waiter's \
         asks: {}, each after a pause of 150–300 ms and capped at {:.0} s (an ask not \
         granted within the cap counts the cap).",
        HOLD.as_millis(),
        plan.asks,
        plan.cap.as_secs_f64()
    );
    let columns = "mode | granted | not within cap | wait p50 ms | wait p99 ms | wait max ms \
                   | others' grants/s | errors | overlaps";
    let mut table = Table::new(name, caption, columns);
    for fair in MODES {
        let key = format!("bench:fairness:{name}:{}", mode(fair));
        let (log, stop) = (Log::new(), CancellationToken::new());
        let tasks = cycling(others, &key, (take, fair, HOLD), &log, &stop, rng);
        let (mut waits, mut missed, began) = (Vec::new(), 0, Instant::now());
        for _ in 0..plan.asks {
            tokio::time::sleep(Duration::from_millis(rng.random_range(150..=300))).await;
            let asked = Instant::now();
            match acquire(waiter, &key, wants, fair, Retry::Until(plan.cap)).await {
                Ok(lock) => {
                    waits.push(asked.elapsed());
                    log.hold(lock, wants.weight(), HOLD).await;
                }
                Err(e) => {
                    if !e.is_contended() {
                        log.error("the waiter's acquire", &e);
                    }
                    waits.push(plan.cap);
                    missed += 1;
                }
            }
        }
        let took = began.elapsed();
        stop.cancel();
        let others_grants: usize = joined(tasks).await.iter().map(Vec::len).sum();
        let (overlaps, errors) = log.end(limit, &format!("{name} ({})", mode(fair)));
        table.overlaps += overlaps;
        let wait = Summary::of(&waits);
        let (p50, p99, max) = (ms(wait.p50), ms(wait.p99), ms(wait.max));
        let (asks, rate) = (plan.asks, others_grants as f64 / took.as_secs_f64());
        table.row(&format!(
            "{} | {} of {asks} | {missed} | {p50} | {p99} | {max} | {rate:.1} | {errors} | \
             {overlaps}",
            mode(fair),
            asks - missed
        ));
    }
    table
}
