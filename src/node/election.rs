//! Leader election on one node: the leader's record (what it says, and how
//! it is written and read back), the commands that write, read and remove
//! it, and what each reply means.
//!
//! The record sits beside the election's leadership lock, with no expiry:
//! `<epoch> <seq> <ttl ms> <token> <value>`. It counts on a node only
//! while that node's lock key holds the record's token — a leader that
//! crashed leaves its record behind, and readers pass over it once its lock
//! has expired. So renewal, which extends the lock alone, keeps the record
//! alive too.

use std::sync::Arc;
use std::time::Duration;

use crate::keys::Keys;
use crate::node::commands::Command;
use crate::node::lua;
use crate::token::Token;
use crate::validity;

/// What a leader proclaimed: its epoch (the leadership's fencing token),
/// the proclamation's number within the leadership (later ones win), the
/// TTL of the leadership (observers poll at a third of it), the leader's
/// token, and the value observers read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) epoch: u64,
    pub(crate) seq: u64,
    pub(crate) ttl: Duration,
    pub(crate) token: String,
    pub(crate) value: Vec<u8>,
}

impl Record {
    /// `<epoch> <seq> <ttl ms> <token> <value>`: four decimal or hex fields
    /// and then the value, byte for byte (it may hold spaces).
    pub(crate) fn encode(&self) -> Vec<u8> {
        let ttl = validity::millis(self.ttl);
        let head = format!("{} {} {ttl} {} ", self.epoch, self.seq, self.token);
        [head.as_bytes(), &self.value].concat()
    }

    /// The record in `raw`, or `None` when it is not one (written by hand,
    /// or by another program).
    pub(crate) fn decode(raw: &[u8]) -> Option<Self> {
        let mut fields = raw.splitn(5, |&b| b == b' ');
        let mut number = || -> Option<u64> {
            let field = fields.next().filter(|f| all(f, u8::is_ascii_digit))?;
            std::str::from_utf8(field).ok()?.parse().ok()
        };
        let (epoch, seq, ttl) = (number()?, number()?, number()?);
        let token = fields.next().filter(|t| all(t, u8::is_ascii_hexdigit))?;
        Some(Self {
            epoch,
            seq,
            ttl: Duration::from_millis(ttl),
            token: String::from_utf8(token.to_vec()).ok()?,
            value: fields.next()?.to_vec(),
        })
    }
}

/// Whether `field` is not empty and every byte of it is `kind`.
fn all(field: &[u8], kind: fn(&u8) -> bool) -> bool {
    !field.is_empty() && field.iter().all(kind)
}

/// What one node says about an election: the record it has, and whether
/// its leadership lock holds that record's token now — the only case in
/// which the record counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reading {
    pub(crate) record: Option<Record>,
    pub(crate) current: bool,
}

impl Reading {
    /// The reading of a lock key's value and a record's bytes.
    pub(crate) fn new(lock: Option<&[u8]>, record: Option<&[u8]>) -> Self {
        let record = record.and_then(Record::decode);
        let current = record
            .as_ref()
            .zip(lock)
            .is_some_and(|(r, held)| r.token.as_bytes() == held);
        Self { record, current }
    }

    /// The record, when it counts (its leader's lock holds its token).
    pub(crate) fn current(&self) -> Option<&Record> {
        self.record.as_ref().filter(|_| self.current)
    }
}

impl Command {
    /// Writes `record` where `keys`' lock holds the record's token.
    pub(crate) fn proclaim(keys: &Keys, record: &Record) -> Arc<Self> {
        let at = keys.leader_record();
        Self::call(&lua::PROCLAIM, [keys.first(), &at], |cmd| {
            cmd.arg(&record.token).arg(record.seq).arg(record.encode());
        })
    }

    /// Reads the lock and the record of an election (read-only).
    pub(crate) fn read_leader(keys: &Keys) -> Arc<Self> {
        Self::call(&lua::LEADER, [keys.first(), &keys.leader_record()], |_| {})
    }

    /// Deletes the record where it is still `token`'s.
    pub(crate) fn retire(keys: &Keys, token: &Token) -> Arc<Self> {
        Self::call(&lua::RETIRE, [&keys.leader_record()[..]], |cmd| {
            cmd.arg(token.as_str());
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(value: &[u8]) -> Record {
        Record {
            epoch: 7,
            seq: 2,
            ttl: Duration::from_millis(1500),
            token: "00ff1a".to_owned(),
            value: value.to_vec(),
        }
    }

    #[test]
    fn a_record_round_trips_whatever_its_value_holds() {
        for value in [&b""[..], b"10.0.0.5:8080", b"a b  c ", b"\x00\xff\n"] {
            let r = record(value);
            assert_eq!(Record::decode(&r.encode()), Some(r));
        }
        assert_eq!(record(b"x y").encode(), b"7 2 1500 00ff1a x y");
    }

    #[test]
    fn anything_else_is_no_record() {
        for raw in [
            &b""[..],
            b"7 2 1500 00ff1a",
            b"7 2 1500  x",
            b"7 -2 1500 00ff1a x",
            b"7 2 15s 00ff1a x",
            b"x 2 1500 00ff1a x",
            b"7 2 1500 token! x",
            b"99999999999999999999 2 1500 00ff1a x",
        ] {
            assert_eq!(Record::decode(raw), None, "{}", raw.escape_ascii());
        }
    }

    #[test]
    fn a_record_counts_only_where_the_lock_holds_its_token() {
        let raw = record(b"v").encode();
        let held = Reading::new(Some(b"00ff1a"), Some(&raw));
        assert_eq!(held.current(), Some(&record(b"v")));
        // The leader crashed and its lock expired: the record stays, unread.
        let expired = Reading::new(None, Some(&raw));
        assert!(expired.record.is_some() && expired.current().is_none());
        // A new leader holds the lock and has not proclaimed yet.
        let next = Reading::new(Some(b"abcdef"), Some(&raw));
        assert!(next.current().is_none());
        assert_eq!(Reading::new(Some(b"00ff1a"), None).current(), None);
        assert_eq!(Reading::new(Some(b"00ff1a"), Some(b"junk")).current(), None);
    }
}
