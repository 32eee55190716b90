//! Every way an operation can fail, as one table: per-node error replies
//! from real servers, dead, hung and unreachable nodes, bad TTLs, names and
//! node lists, and releases and extensions that come too late or from the
//! wrong owner. Each row says what the operation must return; every row
//! must end without a panic and without a key of ours left on any node.
//!
//! Per-node faults hit three of five nodes (no quorum possible: the error
//! must name the cause per node) or two of five (a minority: the lock must
//! still work, the failing nodes simply not counted).

use quorumlock_testkit as support;

use std::fmt::Write as _;
use std::time::Duration;

use quorumlock::{Error, LostReason, NodeFailureKind, Redlock};
use support::inject::Busy;
use support::{eventually, unique, Cluster, Fault, OneAttempt};

const TTL: Duration = Duration::from_secs(10);
/// For rows whose keys may stay until they expire.
const SHORT_TTL: Duration = Duration::from_secs(2);
const PASSWORD: &str = "sesame";

/// What is done to the first `n` nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Inject {
    None,
    /// `maxmemory 1`, `noeviction`.
    Oom,
    /// A Lua busy loop.
    Busy,
    /// `requirepass`; the client sends no password.
    NoAuth,
    /// `requirepass`; the client sends a wrong one.
    WrongPass,
    /// The node is a replica.
    Replica,
    /// The resource key holds a hash.
    Hash,
    /// `SCRIPT FLUSH` on every node.
    FlushScripts,
    /// kill -9: connections refused.
    Killed,
    /// SIGSTOP: connections accepted, nothing answered.
    Paused,
    /// The proxy holds all traffic.
    Blackholed,
    /// The proxy resets every connection.
    Reset,
}

/// A resource name of a given shape.
#[derive(Debug, Clone, Copy)]
enum Name {
    Empty,
    Binary,
    Unicode,
    Megabyte,
}

/// A node list of a given shape.
#[derive(Debug, Clone, Copy)]
enum Nodes {
    Zero,
    Duplicate,
    Even,
    EvenHalfDown,
    AllRefused,
}

/// The operation of a row.
#[derive(Debug, Clone, Copy)]
enum Op {
    /// Inject, then acquire.
    Acquire,
    /// Acquire, inject, extend.
    Extend,
    /// Acquire, inject, release.
    Release,
    AcquireTtl(Duration),
    ExtendTtl(Duration),
    AcquireName(Name),
    Build(Nodes),
    ExtendAfterExpiry,
    ReleaseAfterExpiry,
    /// The keys were deleted behind the lock's back (a second release).
    ReleaseAfterSideDelete,
    /// The lock expired and another owner holds the resource now.
    ReleaseByFormerOwner,
}

#[derive(Debug, Clone, Copy)]
enum Expect {
    Ok,
    Invalid,
    Contended,
    /// With a node failure of this kind: a Redis error code, `timeout`,
    /// `connection`, or `` for any.
    Unavailable(&'static str),
    /// No quorum because of nodes with this misconfiguration (a Redis
    /// error code): never an outage.
    Misconfigured(&'static str),
    /// `expired`, or a node failure kind as above.
    Lost(&'static str),
}

struct Row {
    op: Op,
    inject: Inject,
    n: usize,
    expect: Expect,
}

const fn row(op: Op, inject: Inject, n: usize, expect: Expect) -> Row {
    Row {
        op,
        inject,
        n,
        expect,
    }
}

fn rows() -> Vec<Row> {
    use Expect::*;
    use Inject as I;
    let ms = Duration::from_millis;
    vec![
        // Per-node error replies on a majority: no quorum, the cause per node.
        row(Op::Acquire, I::Oom, 3, Unavailable("OOM")),
        row(Op::Acquire, I::Busy, 3, Unavailable("BUSY")),
        row(Op::Acquire, I::NoAuth, 3, Misconfigured("NOAUTH")),
        row(Op::Acquire, I::WrongPass, 3, Misconfigured("WRONGPASS")),
        row(Op::Acquire, I::Replica, 3, Unavailable("READONLY")),
        row(Op::Acquire, I::Hash, 3, Contended),
        row(Op::Acquire, I::Killed, 3, Unavailable("connection")),
        row(Op::Acquire, I::Reset, 3, Unavailable("connection")),
        row(Op::Acquire, I::Paused, 3, Unavailable("timeout")),
        row(Op::Acquire, I::Blackholed, 3, Unavailable("timeout")),
        // The same on a minority: never a vote, the lock still works.
        row(Op::Acquire, I::Oom, 2, Ok),
        row(Op::Acquire, I::Busy, 2, Ok),
        row(Op::Acquire, I::NoAuth, 2, Ok),
        row(Op::Acquire, I::WrongPass, 2, Ok),
        row(Op::Acquire, I::Replica, 2, Ok),
        row(Op::Acquire, I::Hash, 2, Ok),
        row(Op::Acquire, I::Killed, 2, Ok),
        row(Op::Acquire, I::Reset, 2, Ok),
        row(Op::Acquire, I::Paused, 2, Ok),
        row(Op::Acquire, I::Blackholed, 2, Ok),
        row(Op::Acquire, I::FlushScripts, 5, Ok),
        // Extending a held lock.
        row(Op::Extend, I::Hash, 3, Lost("WRONGTYPE")),
        row(Op::Extend, I::Busy, 3, Lost("BUSY")),
        row(Op::Extend, I::Replica, 3, Lost("READONLY")),
        row(Op::Extend, I::Killed, 3, Lost("connection")),
        row(Op::Extend, I::Paused, 3, Lost("timeout")),
        row(Op::Extend, I::FlushScripts, 5, Ok),
        row(Op::Extend, I::Hash, 2, Ok),
        row(Op::Extend, I::Paused, 2, Ok),
        // Releasing a held lock.
        row(Op::Release, I::Hash, 3, Misconfigured("WRONGTYPE")),
        row(Op::Release, I::Busy, 3, Unavailable("BUSY")),
        row(Op::Release, I::Killed, 3, Unavailable("connection")),
        row(Op::Release, I::Blackholed, 3, Unavailable("timeout")),
        row(Op::Release, I::Oom, 5, Ok),
        row(Op::Release, I::FlushScripts, 5, Ok),
        row(Op::Release, I::Hash, 2, Ok),
        // Too late, or not ours.
        row(Op::ExtendAfterExpiry, I::None, 0, Lost("expired")),
        row(Op::ReleaseAfterExpiry, I::None, 0, Ok),
        row(Op::ReleaseAfterSideDelete, I::None, 0, Ok),
        row(Op::ReleaseByFormerOwner, I::None, 0, Ok),
        // TTLs: zero, not above the drift, beyond any lease.
        row(Op::AcquireTtl(Duration::ZERO), I::None, 0, Invalid),
        row(Op::AcquireTtl(ms(1)), I::None, 0, Invalid),
        row(Op::AcquireTtl(ms(2)), I::None, 0, Invalid),
        row(Op::AcquireTtl(ms(u64::MAX)), I::None, 0, Invalid),
        row(Op::AcquireTtl(ms(u64::MAX - 1)), I::None, 0, Invalid),
        row(Op::AcquireTtl(Duration::MAX), I::None, 0, Invalid),
        row(Op::ExtendTtl(Duration::ZERO), I::None, 0, Invalid),
        row(Op::ExtendTtl(ms(u64::MAX)), I::None, 0, Invalid),
        // Resource names.
        row(Op::AcquireName(Name::Empty), I::None, 0, Invalid),
        row(Op::AcquireName(Name::Binary), I::None, 0, Ok),
        row(Op::AcquireName(Name::Unicode), I::None, 0, Ok),
        row(Op::AcquireName(Name::Megabyte), I::None, 0, Ok),
        // Node lists.
        row(Op::Build(Nodes::Zero), I::None, 0, Invalid),
        row(Op::Build(Nodes::Duplicate), I::None, 0, Invalid),
        row(Op::Build(Nodes::Even), I::None, 0, Ok),
        row(
            Op::Build(Nodes::EvenHalfDown),
            I::None,
            0,
            Unavailable("connection"),
        ),
        row(
            Op::Build(Nodes::AllRefused),
            I::None,
            0,
            Unavailable("connection"),
        ),
    ]
}

/// The cluster all rows share, plus a primary outside it for replicas.
struct Env {
    cluster: Cluster,
    proxied: Vec<String>,
    primary: Cluster,
}

/// Undo information for an injection.
#[derive(Default)]
struct Injected {
    busy: Vec<Busy>,
}

impl Env {
    fn inject(&mut self, what: Inject, n: usize, key: &[u8]) -> Injected {
        let mut undo = Injected::default();
        for i in 0..n {
            match what {
                Inject::None => {}
                Inject::Oom => self.cluster.oom(i),
                Inject::Busy => undo.busy.push(self.cluster.busy(i)),
                Inject::NoAuth | Inject::WrongPass => self.cluster.require_pass(i, PASSWORD),
                Inject::Replica => self.cluster.make_replica(i, self.primary.side_addr(0)),
                Inject::Hash => self.cluster.plant_hash(i, key),
                Inject::FlushScripts => self.cluster.flush_scripts(i),
                Inject::Killed => self.cluster.kill(i),
                Inject::Paused => self.cluster.pause(i),
                Inject::Blackholed => self.cluster.proxy(i).set(Fault::Blackhole),
                Inject::Reset => self.cluster.proxy(i).set(Fault::Reset),
            }
        }
        undo
    }

    fn heal(&mut self, what: Inject, n: usize, undo: Injected) {
        for busy in undo.busy {
            busy.heal();
        }
        for i in 0..n {
            match what {
                Inject::Oom => self.cluster.heal_oom(i),
                Inject::NoAuth | Inject::WrongPass => self.cluster.heal_pass(i, PASSWORD),
                Inject::Replica => self.cluster.heal_replica(i),
                Inject::Killed => self.cluster.restart(i),
                Inject::Paused => self.cluster.resume(i),
                Inject::Blackholed | Inject::Reset => self.cluster.proxy(i).heal(),
                _ => {}
            }
        }
    }

    /// A client through the proxies; with a wrong password for the first
    /// `n` nodes when the row asks for one.
    async fn redlock(&self, what: Inject, n: usize) -> Redlock {
        self.redlock_timed(what, n, Duration::from_millis(100))
            .await
    }

    /// As [`Env::redlock`], with `node_timeout` instead of 100 ms.
    async fn redlock_timed(&self, what: Inject, n: usize, node_timeout: Duration) -> Redlock {
        let urls: Vec<String> = self
            .proxied
            .iter()
            .enumerate()
            .map(|(i, url)| {
                if what == Inject::WrongPass && i < n {
                    url.replacen("redis://", "redis://:not-the-password@", 1)
                } else {
                    url.clone()
                }
            })
            .collect();
        quorumlock::Builder::new(urls)
            .node_timeout(node_timeout)
            .connect_timeout(Duration::from_millis(300))
            .one_attempt()
            .build()
            .await
            .expect("build")
    }
}

fn has_failure(err: &Error, tag: &str) -> bool {
    let failures = err.node_failures();
    match tag {
        "" => true,
        "timeout" => failures.iter().any(|f| f.kind.is_timeout()),
        "connection" => failures
            .iter()
            .any(|f| matches!(f.kind, NodeFailureKind::Connection(_))),
        code => failures.iter().any(|f| f.kind.is_redis_error(code)),
    }
}

fn matches(expect: Expect, result: &Result<(), Error>) -> bool {
    match (expect, result) {
        (Expect::Ok, Ok(())) => true,
        (Expect::Invalid, Err(e)) => e.is_invalid_input(),
        (Expect::Contended, Err(e)) => e.is_contended(),
        (Expect::Unavailable(tag), Err(e)) => e.is_unavailable() && has_failure(e, tag),
        (Expect::Misconfigured(tag), Err(e)) => {
            e.is_misconfigured() && !e.is_unavailable() && has_failure(e, tag)
        }
        (Expect::Lost("expired"), Err(e)) => matches!(
            e,
            Error::Lost {
                reason: LostReason::Expired,
                ..
            }
        ),
        (Expect::Lost(tag), Err(e)) => e.is_lost() && has_failure(e, tag),
        _ => false,
    }
}

/// A short account of a result: the error class and each node's cause.
fn describe(result: &Result<(), Error>) -> String {
    let Err(e) = result else {
        return "ok".into();
    };
    let class = if e.is_invalid_input() {
        "invalid"
    } else if e.is_contended() {
        "contended"
    } else if e.is_misconfigured() {
        "misconfigured"
    } else if e.is_unavailable() {
        "unavailable"
    } else if e.is_lost() {
        "lost"
    } else {
        "other"
    };
    let causes: Vec<String> = e
        .node_failures()
        .iter()
        .map(|f| match &f.kind {
            NodeFailureKind::Timeout(_) => "timeout".to_owned(),
            NodeFailureKind::Connection(_) => "connection".to_owned(),
            NodeFailureKind::Redis { code, .. } => code.clone(),
            other => format!("{other}"),
        })
        .collect();
    if causes.is_empty() {
        class.to_owned()
    } else {
        format!("{class}[{}]", causes.join(","))
    }
}

fn name_bytes(name: Name, base: &str) -> Vec<u8> {
    match name {
        Name::Empty => Vec::new(),
        Name::Binary => {
            let mut v = base.as_bytes().to_vec();
            v.extend_from_slice(b"\x00\xff\r\n\x01 *?[");
            v
        }
        Name::Unicode => format!("{base}:verrou-ロック-🔒").into_bytes(),
        Name::Megabyte => {
            let mut v = base.as_bytes().to_vec();
            v.resize(1 << 20, b'm');
            v
        }
    }
}

/// Runs one row; returns its result and the resource it used.
async fn run_row(env: &mut Env, row: &Row, key: &[u8]) -> Result<(), Error> {
    let short = Duration::from_millis(300);
    match row.op {
        Op::Acquire => {
            let undo = env.inject(row.inject, row.n, key);
            let redlock = env.redlock(row.inject, row.n).await;
            let result = redlock.try_acquire(key, TTL).await;
            env.heal(row.inject, row.n, undo);
            match result {
                Ok(lock) => lock.release().await,
                Err(e) => Err(e),
            }
        }
        Op::Extend | Op::Release => {
            let redlock = env.redlock(Inject::None, 0).await;
            // A release refused with an error reply leaves the key until its
            // TTL: keep that short, so "nothing outlives its TTL" is checked.
            let lock = redlock.try_acquire(key, SHORT_TTL).await.expect("acquire");
            let undo = env.inject(row.inject, row.n, key);
            let result = if matches!(row.op, Op::Extend) {
                lock.extend(SHORT_TTL).await.map(drop)
            } else {
                let r = lock.release().await;
                env.heal(row.inject, row.n, undo);
                return r;
            };
            env.heal(row.inject, row.n, undo);
            let _ = lock.release().await;
            result
        }
        Op::AcquireTtl(ttl) => {
            let redlock = env.redlock(Inject::None, 0).await;
            let once = redlock.try_acquire(key, ttl).await.map(drop);
            let retried = redlock.acquire(key, ttl).await.map(drop);
            assert_eq!(describe(&once), describe(&retried));
            once
        }
        Op::ExtendTtl(ttl) => {
            let redlock = env.redlock(Inject::None, 0).await;
            let lock = redlock.try_acquire(key, TTL).await.expect("acquire");
            let result = lock.extend(ttl).await.map(drop);
            assert!(lock.validity() > TTL / 2, "a rejected TTL leaves the lock");
            lock.release().await.expect("release");
            result
        }
        Op::AcquireName(shape) => {
            // A 1 MiB name takes several milliseconds per node through the
            // proxies on a loaded machine: a generous timeout keeps this row
            // about the name, not about the machine's load.
            let redlock = env
                .redlock_timed(Inject::None, 0, Duration::from_secs(5))
                .await;
            let name = name_bytes(shape, &String::from_utf8_lossy(key));
            let lock = match redlock.try_acquire(&name, TTL).await {
                Ok(lock) => lock,
                Err(e) => return Err(e),
            };
            assert_eq!(lock.resource(), &name[..]);
            assert!(
                env.cluster.holders(&name) >= 3,
                "stored byte for byte under the exact name"
            );
            let r = lock.release().await;
            assert!(
                eventually(Duration::from_secs(2), || env.cluster.holders(&name) == 0).await,
                "released"
            );
            r
        }
        Op::Build(shape) => build_row(env, shape, key).await,
        Op::ExtendAfterExpiry => {
            let redlock = env.redlock(Inject::None, 0).await;
            let lock = redlock.try_acquire(key, short).await.expect("acquire");
            tokio::time::sleep(short + Duration::from_millis(100)).await;
            let result = lock.extend(TTL).await.map(drop);
            assert_eq!(env.cluster.holders(key), 0, "never re-created");
            result
        }
        Op::ReleaseAfterExpiry => {
            let redlock = env.redlock(Inject::None, 0).await;
            let lock = redlock.try_acquire(key, short).await.expect("acquire");
            tokio::time::sleep(short + Duration::from_millis(100)).await;
            lock.release().await
        }
        Op::ReleaseAfterSideDelete => {
            let redlock = env.redlock(Inject::None, 0).await;
            let lock = redlock.try_acquire(key, TTL).await.expect("acquire");
            for i in 0..env.cluster.len() {
                env.cluster.expire_early(i, key);
            }
            lock.release().await
        }
        Op::ReleaseByFormerOwner => {
            let redlock = env.redlock(Inject::None, 0).await;
            let old = redlock.try_acquire(key, short).await.expect("acquire");
            tokio::time::sleep(short + Duration::from_millis(100)).await;
            let new = redlock.try_acquire(key, TTL).await.expect("new owner");
            // The grant comes at the quorum-th yes; the last node's SET may
            // land just after. Compare against every node holding it.
            let all = env.cluster.len();
            assert!(
                support::eventually(Duration::from_secs(5), || env.cluster.holders(key) == all)
                    .await,
                "the new owner's SET reached every node"
            );
            let before = env.cluster.values(key);
            let result = old.release().await;
            assert_eq!(env.cluster.values(key), before, "the new owner's keys stay");
            assert!(new.validity() > TTL / 2);
            new.release().await.expect("new owner releases");
            result
        }
    }
}

async fn build_row(env: &Env, shape: Nodes, key: &[u8]) -> Result<(), Error> {
    let refused = || {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        format!("redis://127.0.0.1:{}", l.local_addr().expect("addr").port())
    };
    let urls: Vec<String> = match shape {
        Nodes::Zero => Vec::new(),
        Nodes::Duplicate => vec![
            env.cluster.url(0),
            env.cluster.url(1),
            format!("{}/0", env.cluster.url(0)),
        ],
        Nodes::Even => env.cluster.urls()[..4].to_vec(),
        Nodes::EvenHalfDown => {
            let mut u = env.cluster.urls()[..2].to_vec();
            u.push(refused());
            u.push(refused());
            u
        }
        Nodes::AllRefused => (0..3).map(|_| refused()).collect(),
    };
    let redlock = quorumlock::Builder::new(urls.clone())
        .node_timeout(Duration::from_millis(100))
        .one_attempt()
        .build()
        .await?;
    if matches!(shape, Nodes::Even | Nodes::EvenHalfDown) {
        assert_eq!((redlock.nodes(), redlock.quorum()), (4, 3));
    }
    let lock = redlock.try_acquire(key, TTL).await?;
    lock.release().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_failure_is_typed_and_leaves_nothing() {
    let mut cluster = Cluster::local(5);
    let proxied = cluster.proxied();
    let mut env = Env {
        cluster,
        proxied,
        primary: Cluster::local(1),
    };
    let mut table = String::new();
    let mut wrong = Vec::new();
    for (i, row) in rows().iter().enumerate() {
        let label = format!("{:?} with {:?} on {}", row.op, row.inject, row.n);
        let key = unique(&format!("matrix-{i}")).into_bytes();
        let result = run_row(&mut env, row, &key).await;
        let got = describe(&result);
        // A message must render, must not leak a password, and names the
        // resource when it is not about bad input.
        if let Err(e) = &result {
            let text = format!("{e} {e:?}");
            assert!(!text.contains(PASSWORD) && !text.contains("not-the-password"));
        }
        // No quorum: each node granted, failed, or was not waited for (the
        // outcome decided without it), and the message says how many were
        // not, so that they do not read as fine.
        if let Err(
            e @ Error::Unavailable {
                granted,
                nodes,
                unanswered,
                failures,
                ..
            },
        ) = &result
        {
            assert!(
                granted + failures.len() + unanswered <= *nodes,
                "{label}: {e}"
            );
            let said = e
                .to_string()
                .contains(&format!("({unanswered} unanswered when it was decided)"));
            assert_eq!(said, *unanswered > 0, "{label}: {e}");
        }
        // Nothing of ours stays: the key is gone everywhere (planted hashes
        // are not ours and are removed after the check).
        let clean = eventually(Duration::from_secs(5), || env.cluster.holders(&key) == 0).await;
        for n in 0..env.cluster.len() {
            let _: () = env.cluster.exec(n, redis::cmd("DEL").arg(&key));
        }
        let ok = matches(row.expect, &result) && clean;
        let _ = writeln!(
            table,
            "{} {label:<46} expect {:<24} got {got}{}",
            if ok { "ok  " } else { "FAIL" },
            format!("{:?}", row.expect),
            if clean { "" } else { " (key left behind)" },
        );
        if !ok {
            wrong.push(label);
        }
    }
    eprintln!("{table}");
    assert!(wrong.is_empty(), "rows that failed: {wrong:#?}\n{table}");
}
