//! The Lua scripts against the rule the model check explores: every script
//! runs on a real node over the model's input grid — the key absent, held
//! by this token or by another, with a short or a long TTL; the fencing
//! counter unset, below, at and above the fence; every command with a short
//! and a long TTL — and each reply, the key (token and TTL) and the counter
//! afterwards must be what `scripts::answer_at` (`model/src/scripts.rs`, the
//! rule the model check explores) says, and the reply must vote as
//! `reply::counts` (`src/node/reply.rs`, the client's) says. An unset
//! counter, and an acquire's counter behind the time, read as the node's
//! time in microseconds: the time is read around each such run, and an
//! acquire's reply must fall inside it.
//!
//! This is what ties the model to the code: reverting `fence_commit.lua` to
//! "a counter already at T counts", making `release.lua` a plain `DEL`, or
//! letting `extend.lua` re-create an expired key each fails here, and the
//! model check's negative controls show what each of them breaks. So does
//! an extension that answers 0 for a missing key (the client could not tell
//! where to repair).
//!
//! The semaphore's script, `acquire_slots.lua`, has cases of its own at the
//! end (the reply `src/node/grant.rs` reads): the first `k` free slots in
//! the order given or none at all, the fencing counter read (and stored
//! only where it was read as the time), a counter out of range refused before anything is set; and
//! `release.lua` given a channel announces once there, per key without.
//! The status read, `peek.lua`, answers for the keys set only, each key's
//! token and time left, and a key of another type on its own.
//! `fence_commit.lua` given a round key (a permit's commit) is checked
//! against `scripts::commit_permit`; the read–write lock's two acquires
//! against the node rule of its model (`model/src/rwlock.rs`) last.

use quorumlock_testkit as support;

#[allow(dead_code)]
#[path = "../src/node/reply.rs"]
mod reply;
#[path = "../model/src/scripts.rs"]
mod scripts;

use std::time::Duration;

use redis::{Connection, Value};
use reply::{counts, Kind};
use scripts::{answer_at, Command, Held, Key};
use support::{unique, Cluster};

/// The scripts as the library sends them: the same files it embeds.
const ACQUIRE_FENCED: &str = concat!(
    include_str!("../src/node/lua/fence_check.lua"),
    include_str!("../src/node/lua/acquire_fenced.lua")
);
const ACQUIRE_MULTI: &str = include_str!("../src/node/lua/acquire_multi.lua");
const FENCE_COMMIT: &str = concat!(
    include_str!("../src/node/lua/fence_check.lua"),
    include_str!("../src/node/lua/fence_commit.lua")
);
const RELEASE: &str = include_str!("../src/node/lua/release.lua");
const EXTEND: &str = include_str!("../src/node/lua/extend.lua");
const HOLDS: &str = include_str!("../src/node/lua/holds.lua");

const MINE: &str = "token-of-this-lock";
const THEIRS: &str = "token-of-another-lock";
/// The fence every commit proposes; the counters sit around it.
const FENCE: u64 = 5;
/// TTLs in milliseconds, far enough apart to tell which one a key has even
/// on a slow machine.
const SHORT: u64 = 30_000;
const LONG: u64 = 300_000;
/// How much of a TTL may pass between setting a key and reading it back.
const SLACK: u64 = 20_000;

type State = Held<&'static str, u64>;

/// Every state of the grid.
fn states() -> Vec<State> {
    let mut out = Vec::new();
    for key in [
        None,
        Some((MINE, SHORT)),
        Some((MINE, LONG)),
        Some((THEIRS, SHORT)),
        Some((THEIRS, LONG)),
    ] {
        for counter in [0, FENCE - 1, FENCE, FENCE + 1] {
            out.push(Held {
                key: key.map(|(token, life)| Key { token, life }),
                counter,
            });
        }
    }
    out
}

/// Every command of the grid.
fn commands() -> Vec<Command<&'static str, u64>> {
    let mut out = vec![
        Command::Commit {
            token: MINE,
            fence: FENCE,
        },
        Command::Release { token: MINE },
        Command::Holds { token: MINE },
    ];
    for life in [SHORT, LONG] {
        out.push(Command::Acquire { token: MINE, life });
        out.push(Command::Extend { token: MINE, life });
        out.push(Command::Repair { token: MINE, life });
    }
    out
}

/// One node and the two keys of a resource on it.
struct Node {
    conn: Connection,
    resource: String,
    counter: String,
}

impl Node {
    fn set(&mut self, state: State) {
        let mut pipe = redis::pipe();
        pipe.del(&self.resource).del(&self.counter);
        if let Some(key) = state.key {
            pipe.cmd("SET")
                .arg(&self.resource)
                .arg(key.token)
                .arg("PX")
                .arg(key.life);
        }
        // Counter 0 stands for the unset counter (no script stores 0).
        if state.counter > 0 {
            pipe.set(&self.counter, state.counter);
        }
        pipe.query::<()>(&mut self.conn).expect("set the state");
    }

    /// What the node holds, the key's TTL rounded to the grid's TTL it
    /// comes from (`None` when it is neither).
    fn read(&mut self) -> Held<String, Option<u64>> {
        let (token, ttl, counter): (Option<String>, i64, Option<u64>) = redis::pipe()
            .get(&self.resource)
            .pttl(&self.resource)
            .get(&self.counter)
            .query(&mut self.conn)
            .expect("read the state");
        let life = [SHORT, LONG]
            .into_iter()
            .find(|&life| u64::try_from(ttl).is_ok_and(|t| t <= life && t + SLACK > life));
        Held {
            key: token.map(|token| Key { token, life }),
            counter: counter.unwrap_or(0),
        }
    }

    /// The node's time in microseconds, what an unset counter reads as.
    fn now(&mut self) -> u64 {
        let (secs, micros): (u64, u64) = redis::cmd("TIME").query(&mut self.conn).expect("TIME");
        secs * 1_000_000 + micros
    }

    fn eval(&mut self, script: &str, keys: &[&str], args: &[String]) -> Value {
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(script).arg(keys.len()).arg(keys).arg(args);
        cmd.query(&mut self.conn).expect("script")
    }

    fn int(&mut self, script: &str, keys: &[&str], args: &[String]) -> i64 {
        match self.eval(script, keys, args) {
            Value::Int(n) => n,
            other => panic!("{other:?} from a script that answers an integer"),
        }
    }

    /// Runs `command` the way `way` sends it; the reply, read as `way`'s
    /// kind.
    fn run(&mut self, way: Way, command: Command<&str, u64>) -> i64 {
        let (res, fence) = (self.resource.clone(), self.counter.clone());
        let (both, one) = ([res.as_str(), fence.as_str()], [res.as_str()]);
        let (token, arg) = match command {
            Command::Acquire { token, life }
            | Command::Extend { token, life }
            | Command::Repair { token, life } => (token, life.to_string()),
            Command::Commit { token, fence } => (token, fence.to_string()),
            Command::Release { token } => {
                let announce = if way == Way::ReleaseAnnounced {
                    "1"
                } else {
                    "0"
                };
                (token, announce.to_owned())
            }
            Command::Holds { token } => (token, String::new()),
        };
        let args = [token.to_owned(), arg];
        match way {
            Way::SetNx | Way::Repair => {
                let reply: Value = redis::cmd("SET")
                    .arg(&self.resource)
                    .arg(token)
                    .arg("NX")
                    .arg("PX")
                    .arg(&args[1])
                    .query(&mut self.conn)
                    .expect("SET NX PX");
                match reply {
                    Value::Okay => 1,
                    Value::Nil => 0,
                    other => panic!("SET NX PX answered {other:?}"),
                }
            }
            Way::AcquireFenced | Way::Commit => {
                let script = if way == Way::Commit {
                    FENCE_COMMIT
                } else {
                    ACQUIRE_FENCED
                };
                self.int(script, &both, &args)
            }
            Way::Holds => self.int(HOLDS, &one, &args[..1]),
            _ => self.int(way.script(), &one, &args),
        }
    }
}

/// How the client sends a command: the script (or plain `SET NX PX`) and
/// how its reply is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Way {
    AcquireFenced,
    AcquireMulti,
    SetNx,
    /// The repair: `SET NX PX` read as `reply::Kind::Repair`.
    Repair,
    Commit,
    Release,
    ReleaseAnnounced,
    Extend,
    Holds,
}

impl Way {
    /// Every way the client sends `command`.
    fn of(command: Command<&str, u64>) -> &'static [Way] {
        match command {
            Command::Acquire { .. } => &[Way::AcquireFenced, Way::AcquireMulti, Way::SetNx],
            Command::Commit { .. } => &[Way::Commit],
            Command::Release { .. } => &[Way::Release, Way::ReleaseAnnounced],
            Command::Extend { .. } => &[Way::Extend],
            Command::Holds { .. } => &[Way::Holds],
            Command::Repair { .. } => &[Way::Repair],
        }
    }

    fn script(self) -> &'static str {
        match self {
            Way::AcquireFenced => ACQUIRE_FENCED,
            Way::AcquireMulti => ACQUIRE_MULTI,
            Way::SetNx | Way::Repair => "SET NX PX",
            Way::Commit => FENCE_COMMIT,
            Way::Release | Way::ReleaseAnnounced => RELEASE,
            Way::Extend => EXTEND,
            Way::Holds => HOLDS,
        }
    }

    /// How the client reads the reply (`SET NX PX` as the client reads
    /// it: OK as 1, nil as 0).
    fn kind(self) -> Kind {
        match self {
            Way::AcquireFenced => Kind::AcquireFenced,
            Way::AcquireMulti | Way::SetNx => Kind::AcquireMulti,
            Way::Commit => Kind::Commit,
            Way::Release | Way::ReleaseAnnounced => Kind::Release,
            Way::Extend => Kind::Extend,
            Way::Holds => Kind::Holds,
            Way::Repair => Kind::Repair,
        }
    }
}

/// What `answer_at` says at the node's time `now`, in the form read back
/// from the node (counter 0: unset).
fn expected(
    state: State,
    command: Command<&'static str, u64>,
    now: u64,
) -> (i64, Held<String, Option<u64>>) {
    let stored = (state.counter > 0).then_some(state.counter);
    let (reply, key, counter) = answer_at(state.key, stored, now, command);
    (
        reply,
        Held {
            key: key.map(|k| Key {
                token: k.token.to_owned(),
                life: Some(k.life),
            }),
            counter: counter.unwrap_or(0),
        },
    )
}

#[test]
fn every_script_answers_as_the_model_says() {
    let cluster = Cluster::shared(1);
    let name = unique("conformance");
    let mut node = Node {
        conn: cluster.conn(0),
        resource: format!("{name}:res"),
        counter: format!("{name}:fence"),
    };
    node.conn
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut cases = 0;
    let mut mismatches = Vec::new();
    for state in states() {
        for command in commands() {
            for &way in Way::of(command) {
                node.set(state);
                let before = node.now();
                let reply = node.run(way, command);
                // The time the script read (rounded down to a multiple of
                // 1024): an acquire's reply, when it falls inside the run;
                // any time of the run otherwise.
                let now = match u64::try_from(reply) {
                    Ok(read) if read % 1024 == 0 && read + 1024 > before && read <= node.now() => {
                        read
                    }
                    _ => before,
                };
                let (model_reply, mut model_after) = expected(state, command, now);
                if matches!(way, Way::AcquireMulti | Way::SetNx) {
                    // Not fenced: the counter is neither read nor stored.
                    model_after.counter = state.counter;
                }
                let after = node.read();
                cases += 1;
                // The fenced scripts answer exactly the model's integer;
                // the others as their own kind of the same vote.
                let model_kind = match command {
                    Command::Acquire { .. } => Kind::AcquireFenced,
                    _ => way.kind(),
                };
                let same_reply = match way {
                    Way::AcquireMulti | Way::SetNx => {
                        counts(way.kind(), reply) == counts(model_kind, model_reply)
                    }
                    _ => reply == model_reply,
                };
                if !same_reply || counts(way.kind(), reply).is_none() || after != model_after {
                    mismatches.push(format!(
                        "{way:?} from {state:?} on {command:?}: answered {reply}, left \
                         {after:?}; the model says {model_reply}, {model_after:?}"
                    ));
                }
            }
        }
    }
    node.set(Held::default());
    support::report(&format!(
        "conformance: {cases} script runs over {} states and {} commands",
        states().len(),
        commands().len()
    ));
    assert!(
        mismatches.is_empty(),
        "{} of {cases} runs differ from the model:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}

// ------------------------------------------------ the semaphore's scripts

/// The semaphore's script, as the library sends it.
const ACQUIRE_SLOTS: &str = concat!(
    include_str!("../src/node/lua/fence_check.lua"),
    include_str!("../src/node/lua/acquire_slots.lua")
);

/// The slots of one semaphore on one node: `count` keys, the record of
/// its limit and the counter.
struct SlotsOnNode {
    conn: Connection,
    keys: Vec<String>,
    limit: String,
    counter: String,
}

impl SlotsOnNode {
    fn new(cluster: &Cluster, count: usize) -> Self {
        let base = format!("quorumlock:semaphore:{{{}}}", unique("conformance-slots"));
        let conn = cluster.conn(0);
        conn.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        Self {
            conn,
            keys: (0..count).map(|i| format!("{base}:{i}")).collect(),
            limit: format!("{base}:limit"),
            counter: format!("{base}:fence"),
        }
    }

    /// Slots `held` set to another token, the rest absent; the counter
    /// set to `counter` (absent when `None`); no limit recorded.
    fn set(&mut self, held: &[usize], counter: Option<&str>) {
        let mut pipe = redis::pipe();
        pipe.del(&self.keys).del(&self.counter).del(&self.limit);
        for &i in held {
            pipe.cmd("SET")
                .arg(&self.keys[i])
                .arg(THEIRS)
                .arg("PX")
                .arg(LONG);
        }
        if let Some(counter) = counter {
            pipe.set(&self.counter, counter);
        }
        pipe.query::<()>(&mut self.conn).expect("set the slots");
    }

    /// Per slot: its token and whether its TTL is `SHORT`.
    fn read(&mut self) -> Vec<Option<(String, bool)>> {
        let mut out = Vec::new();
        for key in self.keys.clone() {
            let (token, ttl): (Option<String>, i64) = redis::pipe()
                .get(&key)
                .pttl(&key)
                .query(&mut self.conn)
                .expect("read a slot");
            let short = u64::try_from(ttl).is_ok_and(|t| t <= SHORT && t + SLACK > SHORT);
            out.push(token.map(|t| (t, short)));
        }
        out
    }

    fn counter(&mut self) -> Option<String> {
        redis::cmd("GET")
            .arg(&self.counter)
            .query(&mut self.conn)
            .expect("read the counter")
    }

    /// `acquire_slots.lua` for `want` slots, listed from slot `first` on
    /// (wrapping around), as the library sends it.
    fn take(&mut self, first: usize, want: usize, fenced: bool) -> redis::RedisResult<Value> {
        let n = self.keys.len();
        let mut keys: Vec<&str> = (0..n)
            .map(|k| self.keys[(first + k) % n].as_str())
            .collect();
        keys.push(&self.limit);
        if fenced {
            keys.push(&self.counter);
        }
        redis::cmd("EVAL")
            .arg(ACQUIRE_SLOTS)
            .arg(keys.len())
            .arg(&keys)
            .arg(MINE)
            .arg(SHORT)
            .arg(want)
            .arg(if fenced { "1" } else { "0" })
            .query(&mut self.conn)
    }
}

fn ints(reply: &Value) -> Vec<i64> {
    match reply {
        Value::Array(items) => items
            .iter()
            .map(|v| match v {
                Value::Int(n) => *n,
                other => panic!("{other:?} in a slots reply"),
            })
            .collect(),
        other => panic!("{other:?} from acquire_slots.lua"),
    }
}

#[test]
fn acquire_slots_sets_the_first_k_free_in_the_given_order_or_nothing() {
    let cluster = Cluster::shared(1);
    let mut node = SlotsOnNode::new(&cluster, 4);
    let mine = Some((MINE.to_owned(), true));
    let theirs = Some((THEIRS.to_owned(), false));

    // Slot 3 taken; 2 wanted, listed from slot 2: 2, 3, 0, 1. The first two
    // free in that order are 2 and 0, at positions 1 and 3.
    node.set(&[3], None);
    let reply = ints(&node.take(2, 2, false).expect("script"));
    assert_eq!(
        reply,
        [0, 1, 3],
        "counter 0 (not fenced), positions 1 and 3"
    );
    assert_eq!(
        node.read(),
        [mine.clone(), None, mine.clone(), theirs.clone()],
        "slots 2 and 0 set with the token and the TTL, slot 1 left free"
    );

    // All or nothing: 3 wanted with 2 free is refused with the number
    // free, and nothing is set.
    for first in 0..4 {
        node.set(&[1, 3], None);
        let reply = ints(&node.take(first, 3, false).expect("script"));
        assert_eq!(reply, [-1, 2], "from slot {first}");
        assert_eq!(
            node.read(),
            [None, theirs.clone(), None, theirs.clone()],
            "from slot {first}: nothing set"
        );
    }

    // The reply is what the client reads as a yes or a no: every slot,
    // in order, when all are wanted and free; a refusal when one is held.
    node.set(&[], None);
    assert_eq!(
        ints(&node.take(1, 4, false).expect("script")),
        [0, 1, 2, 3, 4]
    );
    node.set(&[0], None);
    assert_eq!(ints(&node.take(1, 4, false).expect("script")), [-1, 3]);
    node.set(&[], None);
}

#[test]
fn acquire_slots_reads_the_counter_and_refuses_one_out_of_range() {
    let cluster = Cluster::shared(1);
    let mut node = SlotsOnNode::new(&cluster, 3);
    let time = |node: &mut SlotsOnNode| {
        let (secs, micros): (i64, i64) = redis::cmd("TIME").query(&mut node.conn).expect("TIME");
        secs * 1_000_000 + micros
    };
    // A counter ahead of the node's time, or less than 2^20 us behind it,
    // is read with the slots and left as it is.
    let recent = (time(&mut node) - 500_000).to_string();
    for counter in ["9007199254740991", &recent] {
        node.set(&[0], Some(counter));
        let reply = ints(&node.take(0, 1, true).expect("script"));
        let read: i64 = counter.parse().expect("a number");
        assert_eq!(reply, [read, 2], "counter {counter}");
        assert_eq!(
            node.counter().as_deref(),
            Some(counter),
            "the counter is only read"
        );
    }
    // Unset, or further behind (brought back older), it reads as the
    // node's time in microseconds rounded down to a multiple of 1024, and
    // is stored with the slots; unfenced, no counter is read or set.
    for counter in [None, Some("41")] {
        node.set(&[0], counter);
        let before = time(&mut node);
        let reply = ints(&node.take(0, 1, true).expect("script"));
        let started = reply[0] % 1024 == 0 && reply[0] + 1024 > before;
        assert!(
            started && reply[0] <= time(&mut node),
            "{counter:?}: {reply:?}"
        );
        assert_eq!(reply[1], 2);
        assert_eq!(node.counter(), Some(reply[0].to_string()), "stored");
    }
    node.set(&[0], None);
    assert_eq!(ints(&node.take(0, 1, false).expect("script")), [0, 2]);
    assert_eq!(node.counter(), None, "not fenced: nothing stored");
    // Fenced, a refusal still says how many were free, and stores no
    // counter.
    node.set(&[0, 1, 2], Some("7"));
    assert_eq!(ints(&node.take(0, 1, true).expect("script")), [-1, 0]);
    node.set(&[0, 1, 2], None);
    assert_eq!(ints(&node.take(0, 1, true).expect("script")), [-1, 0]);
    assert_eq!(node.counter(), None, "refused: nothing stored");
    // A counter that is not a canonical integer in [0, 2^53): an error
    // reply naming FENCERANGE, and no slot set.
    for bad in [
        "9007199254740992",
        "-1",
        "007",
        "1e3",
        "abc",
        "12345678901234567",
    ] {
        node.set(&[], Some(bad));
        let err = node.take(0, 2, true).expect_err(bad);
        assert!(err.to_string().contains("FENCERANGE"), "{bad}: {err}");
        assert_eq!(node.read(), [None, None, None], "{bad}: nothing set");
        assert_eq!(node.counter().as_deref(), Some(bad));
    }
    node.set(&[], None);
}

#[test]
fn acquire_slots_records_the_limit_and_refuses_another_before_anything_is_set() {
    let cluster = Cluster::shared(1);
    let mut node = SlotsOnNode::new(&cluster, 3);
    let limit = |node: &mut SlotsOnNode| -> (Option<String>, i64) {
        redis::pipe()
            .get(&node.limit)
            .pttl(&node.limit)
            .query(&mut node.conn)
            .expect("read the record")
    };
    // A grant records the limit (the slots listed), with the slots' TTL.
    node.set(&[], None);
    assert_eq!(ints(&node.take(0, 1, false).expect("script")), [0, 1]);
    let (recorded, ttl) = limit(&mut node);
    assert_eq!(recorded.as_deref(), Some("3"));
    assert!(ttl > 0 && ttl <= SHORT as i64, "{ttl}");
    // A record of another limit refuses with it, fenced or not, before
    // anything is set: no slot, the record and the counter as they were.
    for (fenced, counter) in [(false, None), (true, Some("7"))] {
        node.set(&[1], counter);
        let _: () = redis::cmd("SET")
            .arg(&node.limit)
            .arg("2")
            .query(&mut node.conn)
            .expect("record 2");
        let reply = ints(&node.take(0, 1, fenced).expect("script"));
        assert_eq!(reply, [-2, 2], "fenced: {fenced}");
        let theirs = Some((THEIRS.to_owned(), false));
        assert_eq!(node.read(), [None, theirs, None], "nothing set");
        assert_eq!(limit(&mut node), (Some("2".to_owned()), -1));
        assert_eq!(node.counter().as_deref(), counter);
    }
    // The same limit recorded: granted, and the record lives at least as
    // long as the slot set (never shortened).
    node.set(&[], None);
    let _: () = redis::cmd("SET")
        .arg(&node.limit)
        .arg("3")
        .arg("PX")
        .arg(LONG)
        .query(&mut node.conn)
        .expect("record 3");
    assert_eq!(ints(&node.take(2, 1, false).expect("script")), [0, 1]);
    assert!(limit(&mut node).1 > SHORT as i64, "never shortened");
    node.set(&[], None);
}

#[test]
fn the_limit_record_lives_with_the_slots_and_goes_with_the_last() {
    let cluster = Cluster::shared(1);
    let mut node = SlotsOnNode::new(&cluster, 2);
    let pttl = |node: &mut SlotsOnNode| -> i64 {
        redis::cmd("PTTL")
            .arg(&node.limit)
            .query(&mut node.conn)
            .expect("PTTL")
    };
    // Slot 0 ours (with the record), slot 1 another's.
    node.set(&[1], None);
    ints(&node.take(0, 1, false).expect("script"));
    // The extension of a permit (its slot, the record last, the limit as
    // ARGV[3]) keeps the record at least as long as the slot.
    let _: () = redis::cmd("PEXPIRE")
        .arg(&node.limit)
        .arg(1_000)
        .query(&mut node.conn)
        .expect("shorten");
    let extend = |node: &mut SlotsOnNode, limit: &str| -> i64 {
        redis::cmd("EVAL")
            .arg(EXTEND)
            .arg(2)
            .arg(&node.keys[0])
            .arg(&node.limit)
            .arg(MINE)
            .arg(LONG)
            .arg(limit)
            .query(&mut node.conn)
            .expect("extend")
    };
    assert_eq!(extend(&mut node, "2"), 1);
    assert!(pttl(&mut node) > SHORT as i64, "lengthened with the slot");
    // Re-recorded where missing; never where another limit is recorded.
    let _: () = redis::cmd("DEL")
        .arg(&node.limit)
        .query(&mut node.conn)
        .expect("DEL");
    assert_eq!(extend(&mut node, "2"), 1);
    assert!(pttl(&mut node) > SHORT as i64, "recorded again");
    let _: () = redis::cmd("SET")
        .arg(&node.limit)
        .arg("5")
        .query(&mut node.conn)
        .expect("SET");
    assert_eq!(extend(&mut node, "2"), 1);
    assert_eq!(pttl(&mut node), -1, "another limit is left as it is");
    // A release of every slot with the record last (ARGV[4] = "1"): while
    // another's slot lives the record stays; with the last slot it goes.
    let release = |node: &mut SlotsOnNode, token: &str| -> i64 {
        redis::cmd("EVAL")
            .arg(RELEASE)
            .arg(3)
            .arg(&node.keys)
            .arg(&node.limit)
            .arg(token)
            .arg("0")
            .arg("channel")
            .arg("1")
            .query(&mut node.conn)
            .expect("release")
    };
    assert_eq!(release(&mut node, MINE), 1);
    assert_eq!(
        pttl(&mut node),
        -1,
        "another's slot lives: the record stays"
    );
    assert_eq!(release(&mut node, THEIRS), 1);
    assert_eq!(pttl(&mut node), -2, "the last slot gone: the record too");
    node.set(&[], None);
}

/// How many messages `channels` (on node 0) carry while `during` runs and
/// within 300 ms after.
fn published(cluster: &Cluster, channels: &[String], during: impl FnOnce()) -> usize {
    let mut conn = cluster.conn(0);
    let mut pubsub = conn.as_pubsub();
    for channel in channels {
        pubsub.subscribe(channel).expect("subscribe");
    }
    pubsub
        .set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    during();
    let mut seen = 0;
    while pubsub.get_message().is_ok() {
        seen += 1;
    }
    seen
}

#[test]
fn release_announces_once_on_the_channel_given_and_per_key_without_one() {
    let cluster = Cluster::shared(1);
    let mut node = SlotsOnNode::new(&cluster, 3);
    let base = node.keys[0]
        .rsplit_once(':')
        .map(|(b, _)| b.to_owned())
        .expect("a slot key");
    let channel = |name: &str| format!("quorumlock:released:{name}");
    // Listened to: the semaphore's channel and each slot's own.
    let mut every = vec![channel(&base)];
    every.extend(node.keys.iter().map(|k| channel(k)));
    // (what, ARGV[2..], slots ours, keys deleted, announcements)
    let cases: [(&str, Vec<&str>, bool, i64, usize); 5] = [
        ("with the channel", vec!["1", &base], true, 2, 1),
        ("without a channel", vec!["1"], true, 2, 2),
        ("silent, with the channel", vec!["0", &base], true, 2, 0),
        ("silent, without a channel", vec!["0"], true, 2, 0),
        (
            "with the channel, nothing ours",
            vec!["1", &base],
            false,
            0,
            0,
        ),
    ];
    for (what, args, ours, deleted, messages) in cases {
        // Slot 2 another holder's; slots 0 and 1 ours (set by the script),
        // or another's too.
        if ours {
            node.set(&[2], None);
            ints(&node.take(0, 2, false).expect("script"));
        } else {
            node.set(&[0, 1, 2], None);
        }
        let mut reply = 0;
        let seen = published(&cluster, &every, || {
            reply = redis::cmd("EVAL")
                .arg(RELEASE)
                .arg(node.keys.len())
                .arg(&node.keys)
                .arg(MINE)
                .arg(&args)
                .query(&mut node.conn)
                .expect("release");
        });
        assert_eq!(reply, deleted, "{what}: keys deleted");
        assert_eq!(seen, messages, "{what}: announcements");
        let left = node.read().iter().filter(|s| s.is_some()).count();
        assert_eq!(left, 3 - deleted as usize, "{what}: another's slot stays");
    }
    node.set(&[], None);
}

// ------------------------------------------------------- the status read

/// The status read, as the library sends it.
const PEEK: &str = include_str!("../src/node/lua/peek.lua");

#[test]
fn peek_answers_for_the_keys_set_only_and_a_key_of_another_type_on_its_own() {
    let cluster = Cluster::shared(1);
    let mut conn = cluster.conn(0);
    let base = unique("conformance-peek");
    let keys: Vec<String> = (0..5).map(|i| format!("{base}:{i}")).collect();
    let _: () = redis::cmd("SET")
        .arg(&keys[1])
        .arg(MINE)
        .arg("PX")
        .arg(LONG)
        .query(&mut conn)
        .expect("set");
    let _: () = redis::cmd("SET")
        .arg(&keys[3])
        .arg(THEIRS)
        .query(&mut conn)
        .expect("set");
    let _: i64 = redis::cmd("HSET")
        .arg(&keys[4])
        .arg("f")
        .arg("v")
        .query(&mut conn)
        .expect("hset");
    let reply: Value = redis::cmd("EVAL")
        .arg(PEEK)
        .arg(keys.len())
        .arg(&keys)
        .query(&mut conn)
        .expect("peek");
    let Value::Array(items) = reply else {
        panic!("{reply:?} from peek.lua");
    };
    let text = |v: &Value| match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        other => panic!("{other:?} in place of a value"),
    };
    assert_eq!(items.len(), 9, "three keys set of five: {items:?}");
    assert_eq!(items[0], Value::Int(2));
    assert_eq!(text(&items[1]), MINE);
    assert!(
        matches!(items[2], Value::Int(t) if t > (LONG - SLACK) as i64 && t <= LONG as i64),
        "{:?}",
        items[2]
    );
    assert_eq!(
        (&items[3], text(&items[4]), &items[5]),
        (&Value::Int(4), THEIRS.to_owned(), &Value::Int(-1))
    );
    assert_eq!(items[6], Value::Int(5));
    assert!(text(&items[7]).starts_with("WRONGTYPE"), "{:?}", items[7]);
    assert_eq!(items[8], Value::Int(-3));
    let _: i64 = redis::cmd("DEL").arg(&keys).query(&mut conn).expect("del");
}

// ------------------------------------------------ a permit's fence commit

/// `fence_commit.lua` given a round key (a permit holder's commit of
/// `T = r × 1024 + s`), over the holder's slot (held by this token, by
/// another, absent), the counter (unset; in the round before; in `r`
/// below, at and above `T`; in the round after) and the round key (absent,
/// present with no bit, with `s`, with another slot, with both): each
/// reply, counter and round key afterwards as `scripts::commit_permit` says,
/// and the reply votes as `reply::counts` says for a commit.
#[test]
fn the_permit_commit_answers_as_the_model_says() {
    let cluster = Cluster::shared(1);
    let base = format!("quorumlock:semaphore:{{{}}}", unique("conformance-round"));
    let (slot, counter, round) = (
        format!("{base}:5"),
        format!("{base}:fence"),
        format!("{base}:fence:round"),
    );
    let mut conn = cluster.conn(0);
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let fence = 2 * 1024 + 5;
    let mut cases = 0;
    let mut mismatches = Vec::new();
    for holder in [None, Some(MINE), Some(THEIRS)] {
        for count in [0, 1024 + 9, 2048 + 1, fence, 2048 + 7, 3 * 1024] {
            for committed in [None, Some(0), Some(1 << 5), Some(1 << 1), Some(0b10_0010)] {
                let at = scripts::Round {
                    counter: count,
                    committed,
                };
                let mut pipe = redis::pipe();
                pipe.del(&slot).del(&counter).del(&round);
                if let Some(token) = holder {
                    pipe.set(&slot, token);
                }
                if count > 0 {
                    pipe.set(&counter, count);
                }
                if let Some(bits) = committed {
                    // Bit 0 written as 0 makes the key with no bit set.
                    pipe.setbit(&round, 0, false);
                    for i in (0..64).filter(|i| bits & (1u64 << i) != 0) {
                        pipe.setbit(&round, i, true);
                    }
                }
                pipe.query::<()>(&mut conn).expect("set the state");
                let answered: i64 = redis::cmd("EVAL")
                    .arg(FENCE_COMMIT)
                    .arg(3)
                    .arg(&[&slot, &counter, &round])
                    .arg(MINE)
                    .arg(fence)
                    .query(&mut conn)
                    .expect("commit");
                let (c, r): (Option<u64>, Option<Vec<u8>>) = redis::pipe()
                    .get(&counter)
                    .get(&round)
                    .query(&mut conn)
                    .expect("read the state");
                let after = scripts::Round {
                    counter: c.unwrap_or(0),
                    committed: r.map(|bytes| {
                        (0..64)
                            .filter(|i| {
                                bytes.get(i / 8).is_some_and(|b| b & (0x80 >> (i % 8)) != 0)
                            })
                            .fold(0, |bits, i| bits | 1u64 << i)
                    }),
                };
                // Unset (0 here), the counter reads as the node's time, far
                // past the fence's round; a no leaves it unset.
                let (secs, micros): (u64, u64) = redis::cmd("TIME").query(&mut conn).expect("TIME");
                let read = scripts::Round {
                    counter: if count > 0 {
                        count
                    } else {
                        secs * 1_000_000 + micros
                    },
                    committed,
                };
                let mut model = scripts::commit_permit(holder == Some(MINE), read, fence, 1024);
                if model.0 != 1 {
                    model.1.counter = count;
                }
                cases += 1;
                if (answered, after) != model || counts(Kind::Commit, answered).is_none() {
                    mismatches.push(format!(
                        "{holder:?} holding, {at:?}: answered {answered}, left {after:?}; \
                         the model says {model:?}"
                    ));
                }
            }
        }
    }
    support::report(&format!("conformance: {cases} permit commits"));
    assert!(
        mismatches.is_empty(),
        "{} of {cases} runs differ from the model:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}

/// The read–write lock's acquire scripts, as the library joins them.
const READ_ACQUIRE: &str = concat!(
    include_str!("../src/node/lua/read_write.lua"),
    include_str!("../src/node/lua/read_acquire.lua")
);
const WRITE_ACQUIRE: &str = concat!(
    include_str!("../src/node/lua/fence_check.lua"),
    include_str!("../src/node/lua/read_write.lua"),
    include_str!("../src/node/lua/write_acquire.lua")
);
/// What the resource holds while readers do (`read_write.lua`).
const MARKER: &str = "quorumlock:rwlock:readers";

/// One node's state of a read–write lock, as the model's node rule sees it
/// (`model/src/rwlock.rs`): who holds the resource's key, the readers'
/// entries (live, or expired by the node's clock and not yet purged) and a
/// waiting writer's intent mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resource {
    Free,
    /// Another writer's token, or a plain lock of the same name.
    Written,
    /// The readers' marker.
    Marked,
}

/// The two sides' acquires on every state a node can be in, against the
/// model's node rule (`model/src/rwlock.rs`, `Rw::apply`): a reader's entry
/// is added where no writer holds (and, outside the model, no intent mark
/// is set: it only ever refuses); a writer's key is set where no writer
/// holds and no entry is live, and a writer refused by live entries sets
/// its intent mark. A granted reader leaves the marker on the resource,
/// living at least as long as its entry, so that a plain `SET NX` of the
/// name fails; a granted writer clears the intent mark. Catches a reader
/// script that ignores the writer or the intent, a writer script that
/// counts an expired entry as live or ignores a live one, and a reader
/// that leaves the resource free for a plain lock.
#[test]
fn read_write_scripts_answer_as_the_model_says() {
    let cluster = Cluster::shared(1);
    let mut conn = cluster.conn(0);
    let mut cases = 0;
    for resource in [Resource::Free, Resource::Written, Resource::Marked] {
        for entry in [None, Some(true), Some(false)] {
            for intent in [false, true] {
                for reader in [true, false] {
                    let name = unique("rw-conformance");
                    let readers = format!("quorumlock:rwlock:{{{name}}}:readers");
                    let mark = format!("quorumlock:rwlock:{{{name}}}:intent");
                    let keys = [name.as_str(), readers.as_str(), mark.as_str()];
                    let (now_s, now_us): (u64, u64) =
                        redis::cmd("TIME").query(&mut conn).expect("TIME");
                    let now_ms = now_s * 1000 + now_us / 1000;
                    let mut pipe = redis::pipe();
                    pipe.cmd("DEL").arg(&keys[..]);
                    match resource {
                        Resource::Free => {}
                        Resource::Written => {
                            pipe.cmd("SET").arg(&name).arg(THEIRS).arg("PX").arg(LONG);
                        }
                        Resource::Marked => {
                            pipe.cmd("SET").arg(&name).arg(MARKER).arg("PX").arg(LONG);
                        }
                    }
                    if let Some(live) = entry {
                        // A live entry ends far ahead; an expired one ended
                        // a minute ago.
                        let ends = if live { now_ms + LONG } else { now_ms - 60_000 };
                        pipe.cmd("ZADD")
                            .arg(&readers)
                            .arg(ends)
                            .arg("another-reader");
                    }
                    if intent {
                        pipe.cmd("SET")
                            .arg(&mark)
                            .arg("a-writer")
                            .arg("PX")
                            .arg(LONG);
                    }
                    pipe.query::<()>(&mut conn).expect("set the state");

                    let written = resource == Resource::Written;
                    let live = entry == Some(true);
                    let state = format!(
                        "{resource:?}, entry {entry:?}, intent {intent}, {}",
                        if reader { "reader" } else { "writer" }
                    );
                    let eval = |conn: &mut Connection, script: &str, args: &[String]| -> i64 {
                        redis::cmd("EVAL")
                            .arg(script)
                            .arg(keys.len())
                            .arg(&keys[..])
                            .arg(args)
                            .query(conn)
                            .expect("script")
                    };
                    let args = [MINE.to_owned(), SHORT.to_string()];
                    let held: Option<String> = if reader {
                        let granted = eval(
                            &mut conn,
                            READ_ACQUIRE,
                            &[&args[..], &["0".into()]].concat(),
                        );
                        assert_eq!(granted == 1, !written && !intent, "{state}: {granted}");
                        let held: Option<String> =
                            redis::cmd("GET").arg(&name).query(&mut conn).expect("GET");
                        let score: Option<f64> = redis::cmd("ZSCORE")
                            .arg(&readers)
                            .arg(MINE)
                            .query(&mut conn)
                            .expect("ZSCORE");
                        assert_eq!(score.is_some(), granted == 1, "{state}: the entry");
                        if granted == 1 {
                            let pttl: i64 = redis::cmd("PTTL")
                                .arg(&name)
                                .query(&mut conn)
                                .expect("PTTL");
                            assert_eq!(held.as_deref(), Some(MARKER), "{state}");
                            assert!(
                                pttl + i64::try_from(SLACK).unwrap()
                                    > i64::try_from(SHORT).unwrap(),
                                "{state}: the marker lives {pttl} ms"
                            );
                            let plain: Option<String> = redis::cmd("SET")
                                .arg(&name)
                                .arg("plain")
                                .arg("NX")
                                .arg("PX")
                                .arg(SHORT)
                                .query(&mut conn)
                                .expect("SET NX");
                            assert_eq!(plain, None, "{state}: a plain lock got in beside a reader");
                        }
                        held
                    } else {
                        let intent_ms = 2_000.to_string();
                        let granted = eval(
                            &mut conn,
                            WRITE_ACQUIRE,
                            &[&args[..], &[intent_ms]].concat(),
                        );
                        assert_eq!(granted == 1, !written && !live, "{state}: {granted}");
                        let held: Option<String> =
                            redis::cmd("GET").arg(&name).query(&mut conn).expect("GET");
                        let mark_left: bool = redis::cmd("EXISTS")
                            .arg(&mark)
                            .query(&mut conn)
                            .expect("EXISTS");
                        if granted == 1 {
                            assert_eq!(held.as_deref(), Some(MINE), "{state}");
                            assert!(!mark_left, "{state}: a granted writer's intent mark stays");
                        } else if live && !written {
                            assert!(mark_left, "{state}: refused by readers, no intent mark");
                        }
                        held
                    };
                    if written {
                        assert_eq!(
                            held.as_deref(),
                            Some(THEIRS),
                            "{state}: the writer's key changed"
                        );
                    }
                    let _: () = redis::cmd("DEL")
                        .arg(&keys[..])
                        .query(&mut conn)
                        .expect("DEL");
                    cases += 1;
                }
            }
        }
    }
    assert_eq!(cases, 36);
}
