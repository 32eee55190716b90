//! What a redis error means for the vote: a timeout, a lost connection, an
//! error reply with its code, or a reply this client cannot read.

use std::time::Duration;

use redis::{ErrorKind, RedisError};

use crate::error::NodeFailureKind;
use crate::reply_code::reply_code;

/// The failure kind of a command that ended in `e`.
pub(crate) fn classify(e: &RedisError) -> NodeFailureKind {
    if e.is_timeout() {
        return NodeFailureKind::Timeout(Duration::ZERO);
    }
    if let Some(code) = e.code() {
        let (code, message) = reply_code(code, e.detail().unwrap_or_default());
        return NodeFailureKind::Redis {
            code: code.to_owned(),
            message: message.to_owned(),
        };
    }
    // A pipelined command (GET + PTTL) that failed with a code redis-rs has
    // no kind for (`WRONGTYPE`) carries its server error inside.
    if let Some(server) = e
        .clone()
        .into_server_errors()
        .and_then(|errors| errors.first().map(|(_, err)| err.clone()))
    {
        return NodeFailureKind::Redis {
            code: server.code().to_owned(),
            message: server.details().unwrap_or_default().to_owned(),
        };
    }
    if e.kind() == ErrorKind::AuthenticationFailed {
        // The server's WRONGPASS reply to AUTH; redis-rs replaces it with its
        // own error kind while connecting, so restore the code here.
        return NodeFailureKind::Redis {
            code: "WRONGPASS".to_owned(),
            message: "authentication failed: wrong user name or password, the user is \
                      disabled, or a password was sent to a node that has none"
                .to_owned(),
        };
    }
    if e.is_io_error() || e.is_connection_refusal() || e.is_connection_dropped() {
        return NodeFailureKind::Connection(e.to_string());
    }
    match e.kind() {
        ErrorKind::Server(_) => NodeFailureKind::Redis {
            code: "ERR".to_owned(),
            message: e.to_string(),
        },
        _ => NodeFailureKind::Connection(e.to_string()),
    }
}
