//! What a redis error means for the vote: a timeout, a lost connection, an
//! error reply with its code, or a reply this client cannot read.

use std::time::Duration;

use redis::{ErrorKind, RedisError};

use crate::error::NodeFailureKind;

/// The failure kind of a command that ended in `e`.
pub(crate) fn classify(e: &RedisError) -> NodeFailureKind {
    if e.is_timeout() {
        return NodeFailureKind::Timeout(Duration::ZERO);
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
    if e.kind() == ErrorKind::AuthenticationFailed {
        // The server's WRONGPASS reply to AUTH; redis-rs replaces it with its
        // own error kind while connecting, so restore the code here.
        return NodeFailureKind::reply(
            "WRONGPASS",
            "authentication failed: wrong user name or password, the user is disabled, or a \
             password was sent to a node that has none",
        );
    }
    // Everything else: a connection refused, reset or dropped, another I/O
    // error, a client-side error. (An error of a server kind always has a
    // code, so it was handled above.)
    NodeFailureKind::Connection(e.to_string())
}

#[cfg(test)]
mod tests {
    use std::io;

    use super::*;

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
    fn timeouts_read_as_timeouts() {
        for kind in [io::ErrorKind::TimedOut, io::ErrorKind::WouldBlock] {
            let failure = classify(&io_error(kind));
            assert_eq!(
                failure,
                NodeFailureKind::Timeout(Duration::ZERO),
                "{kind:?}"
            );
            assert!(failure.is_timeout());
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
            let failure = classify(&reply(line));
            assert_eq!(failure, redis(code, message), "{line}");
            assert!(failure.is_redis_error(code), "{line}");
            assert!(!failure.is_timeout(), "{line}");
        }
    }

    #[test]
    fn a_script_error_wrapped_by_redis_6_2_reads_as_its_own_code() {
        let line = "ERR Error running script (call to f_d1ad): @user_script:1: \
                    WRONGTYPE Operation against a key holding the wrong kind of value";
        let failure = classify(&reply(line));
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
        let failure = classify(&e);
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
            let failure = classify(&e);
            assert_eq!(failure, NodeFailureKind::Connection(e.to_string()));
            assert!(!failure.is_timeout(), "{e}");
        }
    }
}
