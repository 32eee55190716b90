//! What a node's reply to each lock script counts for ([`counts`]): the
//! client reads every script reply with it, and so does the model check
//! (`model/`), which includes this file by path.
//!
//! What the scripts answer, given what a node holds, is stated in the model
//! (`model/src/scripts.rs`); `tests/conformance.rs` runs every script on a
//! real server over the model's inputs and compares each reply, and how it
//! votes here, with that rule.
//!
//! No I/O and nothing from the rest of the crate: the model check includes
//! this file by path.

/// What a node said to an operation, reduced to the three cases the quorum
/// logic needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Vote {
    /// The node did what was asked (set the key, extended it, confirmed release).
    Yes,
    /// The node answered but refused: the key is held by another token.
    No,
    /// The node did not answer usably: timeout, connection error, error reply.
    Failed,
}

/// Which reply a command gives, for reading it: the scripts differ in how
/// they say yes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `acquire_fenced.lua`: the counter (≥ 0) when set, −1 when the key
    /// exists.
    AcquireFenced,
    /// `acquire_multi.lua`: 1 when every key was set, 0 when one existed.
    AcquireMulti,
    /// `fence_commit.lua`: 1 when committed (a lock's: the counter raised
    /// from below to the token), the only yes; 0 when the key no longer
    /// holds the token (expired or taken); −1 when another commit of this
    /// token or a later one came first (a lock's: the counter already at or
    /// above the token; a permit's: its round passed, or its slot was
    /// committed in it).
    Commit,
    /// `release.lua`: the keys deleted, negated when the announcement was
    /// refused; 0 when none carried the token.
    Release,
    /// `extend.lua`: 1 when extended, 0 when another token holds a key,
    /// −1 when a key is missing and none is another's (both a no).
    Extend,
    /// The repair's `SET NX PX`, read as 1 (`OK`: set) or 0 (nil: present).
    Repair,
    /// `holds.lua`: 1 when every key carries the token, 0 otherwise.
    Holds,
    /// `proclaim.lua`: 1 when the node carries the record (or a later one
    /// of the same leader), 0 when the leadership is not held with its
    /// token there.
    Proclaim,
    /// `retire.lua`: 1 when the leader's record was there and deleted, 0
    /// otherwise.
    Retire,
}

/// Whether a node's `reply` to a command of `kind` counts as a yes for the
/// client: `Some(true)` yes, `Some(false)` no, `None` a reply that command
/// never gives (a protocol error). A fenced acquire's yes carries the
/// counter: the reply itself.
pub(crate) const fn counts(kind: Kind, reply: i64) -> Option<bool> {
    match (kind, reply) {
        (Kind::AcquireFenced, 0..) | (Kind::Commit, 1) => Some(true),
        (Kind::AcquireFenced | Kind::Commit | Kind::Extend, -1) => Some(false),
        (Kind::Release, n) => Some(n != 0),
        // Every other script: 1 or 0.
        (_, 1) => Some(true),
        (_, 0) => Some(false),
        _ => None,
    }
}

/// Whether a node's `reply` to an extension says the key is missing there
/// (not held by another token): the only nodes a repair goes to.
pub(crate) const fn missing(kind: Kind, reply: i64) -> bool {
    matches!((kind, reply), (Kind::Extend, -1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_vote() {
        assert_eq!(counts(Kind::AcquireFenced, 0), Some(true));
        assert_eq!(counts(Kind::AcquireFenced, 9), Some(true));
        assert_eq!(counts(Kind::AcquireFenced, -1), Some(false));
        assert_eq!(counts(Kind::AcquireFenced, -2), None);
        assert_eq!(counts(Kind::Commit, 1), Some(true));
        assert_eq!(counts(Kind::Commit, 0), Some(false));
        assert_eq!(counts(Kind::Commit, -1), Some(false));
        assert_eq!(counts(Kind::Commit, 2), None);
        for n in [1, -1, 3, -3] {
            assert_eq!(counts(Kind::Release, n), Some(true), "{n}");
        }
        assert_eq!(counts(Kind::Release, 0), Some(false));
        for kind in [
            Kind::AcquireMulti,
            Kind::Extend,
            Kind::Holds,
            Kind::Repair,
            Kind::Proclaim,
            Kind::Retire,
        ] {
            assert_eq!(counts(kind, 1), Some(true));
            assert_eq!(counts(kind, 0), Some(false));
            assert_eq!(counts(kind, 2), None);
            assert!(!missing(kind, 0));
        }
        for kind in [
            Kind::AcquireMulti,
            Kind::Holds,
            Kind::Repair,
            Kind::Proclaim,
            Kind::Retire,
        ] {
            assert_eq!(counts(kind, -1), None);
            assert!(!missing(kind, -1));
        }
        assert_eq!(counts(Kind::Extend, -1), Some(false), "missing is a no");
        assert!(missing(Kind::Extend, -1));
    }
}
