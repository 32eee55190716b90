//! Durable votes: a member's yes counts only once the write reached `r`
//! replicas (`WAIT r timeout`) or the append-only files (`WAITAOF local r
//! timeout`), so that a failover to a replica that acknowledged it keeps
//! the lock. The command sent behind a vote, and what its reply means.
//! Pure.

use std::time::{Duration, Instant};

use redis::{Cmd, Value};

use crate::config::Durability;
use crate::error::NodeFailureKind;
use crate::node::Window;
use crate::validity;

/// The command sent right behind a vote on the same connection: it
/// waits until the writes of that connection reached what `durability`
/// asks, at most `timeout` (never 0, which would wait for ever).
pub(crate) fn wait(durability: Durability, timeout: Duration) -> Cmd {
    let ms = validity::millis(timeout).max(1);
    let mut cmd = match durability {
        Durability::Replicas(r) => redis::cmd("WAIT").arg(r).clone(),
        Durability::Aof { local, replicas } => redis::cmd("WAITAOF")
            .arg(u8::from(local))
            .arg(replicas)
            .clone(),
    };
    cmd.arg(ms);
    cmd
}

/// How long a wait sent now may block the server: three quarters of
/// what is left of `window` once [`SERVER_TICK`] is set aside, so that a
/// wait that times out still answers inside it (and the failure says
/// "reached 1 of 2 replicas", not "no answer"). A short window (a node
/// timeout near or below the tick) gets half of what is left instead,
/// when that is more: replicas that acknowledge within it still make the
/// vote count, where a wait of a millisecond would miss any hiccup; one
/// that times out may then answer after the window, a timeout.
pub(crate) fn budget(window: Window) -> Duration {
    let left = window.deadline.saturating_duration_since(Instant::now());
    (left.saturating_sub(SERVER_TICK) * 3 / 4).max(left / 2)
}

/// How late a server may answer a wait that timed out: it notices the
/// timeout at its next timer tick, every 100 ms at the default `hz 10`.
pub(crate) const SERVER_TICK: Duration = Duration::from_millis(100);

/// Whether the reply to [`wait`] shows the write durable as asked;
/// `Err` with the failure when it does not, or with a protocol error
/// saying what the reply was when it cannot be read.
pub(crate) fn reached(durability: Durability, reply: &Value) -> Result<(), NodeFailureKind> {
    let count = |v: &Value| match v {
        Value::Int(n) => u32::try_from(*n).ok(),
        _ => None,
    };
    let read = match (durability, reply) {
        (Durability::Replicas(required), reply) => count(reply).map(|n| (true, n, required)),
        (Durability::Aof { local, replicas }, Value::Array(pair)) => match &pair[..] {
            [l, r] => count(l)
                .zip(count(r))
                .map(|(l, r)| (l > 0 || !local, r, replicas)),
            _ => None,
        },
        _ => None,
    };
    let Some((fsynced, replicas, required)) = read else {
        let what = format!("{reply:?} in answer to a durable vote's wait");
        return Err(NodeFailureKind::Protocol(what));
    };
    if fsynced && replicas >= required {
        Ok(())
    } else {
        Err(NodeFailureKind::NotDurable {
            replicas,
            required,
            fsynced,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(cmd: &Cmd) -> Vec<String> {
        cmd.args_iter()
            .filter_map(|a| match a {
                redis::Arg::Simple(b) => Some(String::from_utf8_lossy(b).into_owned()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn the_wait_never_waits_for_ever() {
        assert_eq!(
            args(&wait(Durability::Replicas(1), Duration::from_millis(50))),
            ["WAIT", "1", "50"]
        );
        assert_eq!(
            args(&wait(Durability::Replicas(2), Duration::ZERO)),
            ["WAIT", "2", "1"]
        );
        let aof = Durability::Aof {
            local: true,
            replicas: 1,
        };
        assert_eq!(
            args(&wait(aof, Duration::from_millis(80))),
            ["WAITAOF", "1", "1", "80"]
        );
    }

    #[test]
    fn a_wait_gets_three_quarters_of_what_the_tick_leaves_or_half_of_a_short_window() {
        // The budget is three quarters of what is left less the server's
        // tick, read at some instant between the window's start and the
        // read below: at most that of the whole window, at least that of
        // what is left after the call.
        for (timeout, most) in [
            (Duration::from_secs(4), Duration::from_millis(2925)),
            (Duration::from_secs(3600), Duration::from_millis(2_699_925)),
            (Duration::from_millis(1000), Duration::from_millis(675)),
        ] {
            let window = Window::from_now(timeout);
            let budget = budget(window);
            let left = window.deadline.saturating_duration_since(Instant::now());
            let least = (left.saturating_sub(SERVER_TICK) * 3 / 4).max(left / 2);
            assert!(
                least <= budget && budget <= most,
                "{timeout:?}: {budget:?} not within {least:?}..={most:?}"
            );
        }
        let now = Instant::now();
        let past = Window {
            start: now,
            deadline: now,
        };
        assert_eq!(budget(past), Duration::ZERO);
        // A window near or below the tick gives the wait half of what is
        // left, not the millisecond the tick would leave.
        for ms in [50, 80, 200] {
            let timeout = Duration::from_millis(ms);
            let short = Window::from_now(timeout);
            let budget = budget(short);
            let left = short.deadline.saturating_duration_since(Instant::now());
            assert!(
                left / 2 <= budget && budget <= timeout / 2,
                "{timeout:?}: {budget:?} not within {:?}..={:?}",
                left / 2,
                timeout / 2
            );
        }
    }

    #[test]
    fn a_yes_counts_when_enough_replicas_and_files_have_it() {
        let two = Durability::Replicas(2);
        assert_eq!(reached(two, &Value::Int(2)), Ok(()));
        assert_eq!(reached(two, &Value::Int(3)), Ok(()));
        let short = NodeFailureKind::NotDurable {
            replicas: 1,
            required: 2,
            fsynced: true,
        };
        assert_eq!(reached(two, &Value::Int(1)), Err(short));
        let aof = Durability::Aof {
            local: true,
            replicas: 1,
        };
        let pair = |l, r| Value::Array(vec![Value::Int(l), Value::Int(r)]);
        assert_eq!(reached(aof, &pair(1, 1)), Ok(()));
        let unsynced = NodeFailureKind::NotDurable {
            replicas: 1,
            required: 1,
            fsynced: false,
        };
        assert_eq!(reached(aof, &pair(0, 1)), Err(unsynced));
        let replicas_only = Durability::Aof {
            local: false,
            replicas: 1,
        };
        assert_eq!(reached(replicas_only, &pair(0, 1)), Ok(()));
        assert!(matches!(
            reached(two, &Value::Nil),
            Err(NodeFailureKind::Protocol(_))
        ));
        assert!(matches!(
            reached(aof, &Value::Int(1)),
            Err(NodeFailureKind::Protocol(_))
        ));
    }
}
