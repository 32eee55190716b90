//! The Lua scripts against the rule the model check explores: every script
//! runs on a real node over the model's input grid — the key absent, held
//! by this token or by another, with a short or a long TTL; the fencing
//! counter unset, below, at and above the fence; every command with a short
//! and a long TTL — and each reply, the key (token and TTL) and the counter
//! afterwards must be what `reply::answer` (`src/node/reply.rs`, which the model
//! check includes) says, and the reply must vote as `reply::counts` says.
//!
//! This is what ties the model to the code: reverting `fence_commit.lua` to
//! "a counter already at T counts", making `release.lua` a plain `DEL`, or
//! letting `extend.lua` re-create an expired key each fails here, and the
//! model check's negative controls show what each of them breaks. So does
//! an extension that answers 0 for a missing key (the client could not tell
//! where to repair).

use quorumlock_testkit as support;

#[allow(dead_code)]
#[path = "../src/node/reply.rs"]
mod reply;

use std::time::Duration;

use redis::{Connection, Value};
use reply::{answer, counts, Command, Held, Key, Kind};
use support::{unique, Cluster};

/// The scripts as the library sends them: the same files it embeds.
const ACQUIRE_FENCED: &str = include_str!("../src/node/lua/acquire_fenced.lua");
const ACQUIRE_MULTI: &str = include_str!("../src/node/lua/acquire_multi.lua");
const FENCE_COMMIT: &str = include_str!("../src/node/lua/fence_commit.lua");
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
        // Counter 0 is the unset counter: the scripts read both as 0.
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

/// What `answer` says, in the form read back from the node.
fn expected(state: State, command: Command<&'static str, u64>) -> (i64, Held<String, Option<u64>>) {
    let (reply, after) = answer(state, command);
    (
        reply,
        Held {
            key: after.key.map(|k| Key {
                token: k.token.to_owned(),
                life: Some(k.life),
            }),
            counter: after.counter,
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
            let (model_reply, model_after) = expected(state, command);
            for &way in Way::of(command) {
                node.set(state);
                let reply = node.run(way, command);
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
