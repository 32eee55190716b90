//! What a redis error means for the vote: a timeout, a lost connection, an
//! error reply with its code, or a reply this client cannot read.
//!
//! An error reply's code reads the same on every server line. Redis 7 and
//! Valkey pass an error raised inside a script through with its
//! own code (`WRONGTYPE …`, `READONLY …`). Redis 6.2 wraps it in a generic
//! `ERR`:
//!
//! ```text
//! ERR Error running script (call to f_…): @user_script:1: WRONGTYPE Operation against …
//! ERR Error running script (call to f_…): @user_script:1: @user_script: 1: -READONLY You can't …
//! ```
//!
//! so without unwrapping, the same fault reads `ERR` on 6.2 and `WRONGTYPE`
//! on 7. [`NodeFailureKind::reply`] takes the inner code out of the
//! wrapper.

use std::time::Duration;

use redis::{ErrorKind, RedisError};

use crate::error::NodeFailureKind;

/// The failure kind of a command that ended in `e` after `waited`: a
/// timeout of the redis crate's own (connecting) is one of what was waited.
pub(crate) fn classify(e: &RedisError, waited: Duration) -> NodeFailureKind {
    if e.is_timeout() {
        return NodeFailureKind::Timeout(waited);
    }
    if let Some(code) = e.code() {
        return NodeFailureKind::reply(code, e.detail().unwrap_or_default());
    }
    // A pipelined command (GET + PTTL) that failed with a code redis-rs has
    // no kind for (`WRONGTYPE`) carries its server error inside.
    let server = e.clone().into_server_errors().unwrap_or_default();
    if let Some((_, server)) = server.first() {
        return NodeFailureKind::reply(server.code(), server.details().unwrap_or_default());
    }
    match e.kind() {
        // The server's WRONGPASS reply to AUTH; redis-rs replaces it with its
        // own error kind while connecting, so restore the code here.
        ErrorKind::AuthenticationFailed => NodeFailureKind::reply(
            "WRONGPASS",
            "authentication failed: wrong user name or password, the user is disabled, or a \
             password was sent to a node that has none",
        ),
        // The crate says so for a group no sentinel watches and for one whose
        // master is down or being replaced; `build()` tells the first apart.
        ErrorKind::MasterNameNotFoundBySentinel => NodeFailureKind::Connection(
            "the sentinels name no master for the group now (its master down, or a failover \
             under way)"
                .to_owned(),
        ),
        // Everything else: a connection refused, reset or dropped, another
        // I/O error, a client-side error. (An error of a server kind always
        // has a code, so it was handled above.)
        _ => NodeFailureKind::Connection(e.to_string()),
    }
}

/// What Redis 6.2 and 7 and Valkey say when a script calls a command,
/// key or channel the user's ACL refuses.
const SCRIPT_DENIED: &str = "The user executing the script can't";
/// What 6.2 puts before the wrapped error.
const WRAPPER: &str = "Error running script";
/// What 6.2 puts before each location prefix (`@user_script:1:` and
/// `@user_script: 1:`).
const LOCATION: &str = "@user_script:";

impl NodeFailureKind {
    /// The failure of an error reply: `code` and `detail` as the node sent
    /// them, except for Redis 6.2's `ERR Error running script …` wrapper
    /// around an error with a code of its own, which yields the inner code
    /// and message.
    ///
    /// A command a script calls that the user's ACL refuses is a plain
    /// `ERR` (`ERR The user executing the script can't run this command or
    /// subcommand …`, wrapped on 6.2), where the same command sent alone
    /// gets `NOPERM`: it reads as `NOPERM`, one code for the missing right.
    pub(crate) fn reply(code: &str, detail: &str) -> Self {
        let (code, message) = unwrap_script_error(code, detail).unwrap_or((code, detail));
        let code = if code.eq_ignore_ascii_case("ERR") && message.contains(SCRIPT_DENIED) {
            "NOPERM"
        } else {
            code
        };
        NodeFailureKind::Redis {
            code: code.to_owned(),
            message: message.to_owned(),
        }
    }
}

fn unwrap_script_error<'a>(code: &str, detail: &'a str) -> Option<(&'a str, &'a str)> {
    if !code.eq_ignore_ascii_case("ERR") || !detail.starts_with(WRAPPER) {
        return None;
    }
    let (_, mut rest) = detail.split_once("): ")?;
    while let Some(after) = rest.strip_prefix(LOCATION) {
        // `1: ` or ` 1: `
        let (line, tail) = after.split_once(':')?;
        if !line.trim().chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
        rest = tail.trim_start();
    }
    let rest = rest.strip_prefix('-').unwrap_or(rest);
    let (inner, message) = rest.split_once(' ').unwrap_or((rest, ""));
    let is_code = inner.len() >= 2 && inner.chars().all(|c| c.is_ascii_uppercase());
    is_code.then_some((inner, message))
}

#[cfg(test)]
mod tests {
    use std::io;

    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// The error redis-rs makes of the error reply `-line`.
    fn reply(line: &str) -> RedisError {
        let value = redis::parse_redis_value(format!("-{line}\r\n").as_bytes())
            .expect("an error reply parses");
        value
            .extract_error()
            .expect_err("an error reply is an error")
    }

    fn io_error(kind: io::ErrorKind) -> RedisError {
        io::Error::new(kind, "from the test").into()
    }

    fn redis(code: &str, message: &str) -> NodeFailureKind {
        NodeFailureKind::Redis {
            code: code.to_owned(),
            message: message.to_owned(),
        }
    }

    #[test]
    fn a_script_refused_by_the_acl_reads_as_noperm() {
        for line in [
            // Redis 7 and Valkey.
            "ERR The user executing the script can't run this command or subcommand script: \
             a1a8aedd3370fb4bc99add510a79624f28883756, on @user_script:13.",
            "ERR The user executing the script can't access at least one of the keys mentioned \
             in the command script: 1f, on @user_script:4.",
            // Redis 6.2.
            "ERR Error running script (call to f_a1a8): @user_script:13: @user_script: 13: \
             The user executing the script can't run this command or subcommand",
        ] {
            let failure = classify(&reply(line), MS);
            assert!(failure.is_redis_error("NOPERM"), "{line}: {failure:?}");
            assert!(failure.is_misconfigured(), "{line}");
        }
        // Another ERR keeps its code.
        assert!(classify(
            &reply("ERR user_script:1: Script attempted to access a non local key"),
            MS
        )
        .is_redis_error("ERR"));
    }

    #[test]
    fn timeouts_read_as_timeouts() {
        for kind in [io::ErrorKind::TimedOut, io::ErrorKind::WouldBlock] {
            // The time waited, not a meaningless zero.
            let failure = classify(&io_error(kind), 1500 * MS);
            assert_eq!(failure, NodeFailureKind::Timeout(1500 * MS), "{kind:?}");
            assert!(failure.is_timeout());
            assert_eq!(failure.to_string(), "no answer within 1.5 s");
        }
    }

    #[test]
    fn error_replies_keep_their_code_and_message() {
        for (line, code, message) in [
            // Codes redis-rs has a kind for.
            ("ERR invalid expire time", "ERR", "invalid expire time"),
            (
                "READONLY You can't write against a read only replica.",
                "READONLY",
                "You can't write against a read only replica.",
            ),
            (
                "NOSCRIPT No matching script.",
                "NOSCRIPT",
                "No matching script.",
            ),
            (
                "LOADING Redis is loading the dataset in memory",
                "LOADING",
                "Redis is loading the dataset in memory",
            ),
            (
                "NOPERM this user has no permissions",
                "NOPERM",
                "this user has no permissions",
            ),
            // Codes it has none for.
            (
                "WRONGTYPE Operation against a key holding the wrong kind of value",
                "WRONGTYPE",
                "Operation against a key holding the wrong kind of value",
            ),
            (
                "OOM command not allowed when used memory > 'maxmemory'.",
                "OOM",
                "command not allowed when used memory > 'maxmemory'.",
            ),
            (
                "BUSY Redis is busy running a script.",
                "BUSY",
                "Redis is busy running a script.",
            ),
            (
                "NOAUTH Authentication required.",
                "NOAUTH",
                "Authentication required.",
            ),
            (
                "FENCERANGE counter is not an integer",
                "FENCERANGE",
                "counter is not an integer",
            ),
            // A code alone.
            ("OOM", "OOM", ""),
        ] {
            let failure = classify(&reply(line), MS);
            assert_eq!(failure, redis(code, message), "{line}");
            assert!(failure.is_redis_error(code), "{line}");
            assert!(!failure.is_timeout(), "{line}");
        }
    }

    #[test]
    fn a_script_error_wrapped_by_redis_6_2_reads_as_its_own_code() {
        let line = "ERR Error running script (call to f_d1ad): @user_script:1: \
                    WRONGTYPE Operation against a key holding the wrong kind of value";
        let failure = classify(&reply(line), MS);
        assert_eq!(
            failure,
            redis(
                "WRONGTYPE",
                "Operation against a key holding the wrong kind of value"
            )
        );
        assert!(!failure.is_redis_error("ERR"));
    }

    #[test]
    fn a_refused_password_reads_as_wrongpass() {
        let e = RedisError::from((
            ErrorKind::AuthenticationFailed,
            "Password authentication failed",
        ));
        let failure = classify(&e, MS);
        assert!(failure.is_redis_error("WRONGPASS"), "{failure}");
        assert!(
            failure.to_string().contains("authentication failed"),
            "{failure}"
        );
    }

    #[test]
    fn everything_else_is_a_connection_failure() {
        let mut errors: Vec<RedisError> = [
            io::ErrorKind::ConnectionRefused,
            io::ErrorKind::ConnectionReset,
            io::ErrorKind::BrokenPipe,
            io::ErrorKind::UnexpectedEof,
            io::ErrorKind::NotFound,
            io::ErrorKind::PermissionDenied,
        ]
        .into_iter()
        .map(io_error)
        .collect();
        errors.push((ErrorKind::Io, "connection closed").into());
        errors.push((ErrorKind::Client, "empty command").into());
        errors.push(
            (
                ErrorKind::InvalidClientConfig,
                "bad URL",
                "no host".to_owned(),
            )
                .into(),
        );
        for e in errors {
            let failure = classify(&e, MS);
            assert_eq!(failure, NodeFailureKind::Connection(e.to_string()));
            assert!(!failure.is_timeout(), "{e}");
        }
    }

    /// The code and message `NodeFailureKind::reply` keeps.
    fn reply_code<'a>(code: &'a str, detail: &'a str) -> (&'a str, &'a str) {
        unwrap_script_error(code, detail).unwrap_or((code, detail))
    }

    #[test]
    fn redis_6_2_script_wrapper_yields_the_inner_code() {
        let wrongtype = "Error running script (call to f_d1ad8397c172dc0a63e271f0c4c4250ca8d5d1fb): \
                         @user_script:1: WRONGTYPE Operation against a key holding the wrong kind of value";
        assert_eq!(
            reply_code("ERR", wrongtype),
            (
                "WRONGTYPE",
                "Operation against a key holding the wrong kind of value"
            )
        );
        let readonly = "Error running script (call to f_e0b3): @user_script:4: @user_script: 4: \
                        -READONLY You can't write against a read only replica.";
        assert_eq!(
            reply_code("ERR", readonly),
            ("READONLY", "You can't write against a read only replica.")
        );
    }

    #[test]
    fn everything_else_is_left_alone() {
        for (code, detail) in [
            // Redis 7 / Valkey: already the inner code.
            (
                "WRONGTYPE",
                "Operation against a key holding the wrong kind of value",
            ),
            ("ERR", "invalid expire time in 'set' command"),
            // A Lua runtime error has no code of its own.
            (
                "ERR",
                "Error running script (call to f_1): @user_script:2: user_script:2: \
                 attempt to compare nil with number",
            ),
            (
                "ERR",
                "Error running script (call to f_1): @user_script:2: Lowercase words",
            ),
            ("ERR", "Error running script without the usual shape"),
            (
                "ERR",
                "Error running script (call to f_1): @user_script:x: WRONGTYPE no",
            ),
            ("ERR", ""),
            // Only an `ERR` reply is a wrapper, whatever its message says.
            (
                "BUSY",
                "Error running script (call to f_1): @user_script:1: WRONGTYPE no",
            ),
            ("BUSY", "Redis is busy running a script."),
        ] {
            assert_eq!(reply_code(code, detail), (code, detail), "{detail:?}");
        }
    }
}
