//! The code of a node's error reply, the same on every server line.
//!
//! Redis 7 and Valkey pass an error raised inside a script through with its
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

use crate::error::NodeFailureKind;

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
    pub(crate) fn reply(code: &str, detail: &str) -> Self {
        let (code, message) = unwrap_script_error(code, detail).unwrap_or((code, detail));
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
    use super::*;

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
