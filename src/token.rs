//! Lock tokens: 128 random bits from the operating system, stored as 32
//! lowercase hex characters so other Redlock clients and `redis-cli` can
//! read them.

use std::fmt;
use std::sync::Arc;

/// The random value a lock's keys hold; proof of ownership.
///
/// Its `Debug` and `Display` show only the first 8 characters, so a token
/// never ends up in full in a log or an error message.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Token(Arc<str>);

impl Token {
    /// Characters of the token shown in logs and messages.
    pub(crate) const SHOWN: usize = 8;

    /// A fresh token, drawn from the operating system for each token
    /// ([`random`](crate::random)): unique across `fork()`, where a
    /// generator in the process would hand parent and child the same ones.
    pub(crate) fn generate() -> Self {
        let bits = crate::random::bits128();
        Self(format!("{bits:032x}").into())
    }

    /// The full value, as sent to Redis.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// The shown prefix.
    pub(crate) fn prefix(&self) -> &str {
        self.0.get(..Self::SHOWN).unwrap_or(&self.0)
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}…", self.prefix())
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_128_bit_hex_and_fresh() {
        let a = Token::generate();
        let b = Token::generate();
        assert_ne!(a, b);
        assert_eq!(a.as_str().len(), 32);
        assert!(a.as_str().bytes().all(|c| c.is_ascii_hexdigit()));
    }

    #[test]
    fn tokens_never_print_in_full() {
        let t = Token::generate();
        let shown = format!("{t} {t:?}");
        assert!(!shown.contains(t.as_str()));
        assert!(shown.contains(t.prefix()));
    }

    #[test]
    fn tokens_are_lowercase_hex_and_never_repeat() {
        let mut seen = std::collections::HashSet::new();
        for _ in 0..10_000 {
            let t = Token::generate();
            assert!(
                t.as_str()
                    .bytes()
                    .all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')),
                "{}",
                t.as_str()
            );
            assert_eq!(t.as_str().len(), 32);
            assert!(seen.insert(t.as_str().to_owned()), "a token repeated");
        }
    }

    #[test]
    fn logs_show_the_first_eight_characters() {
        let t = Token::generate();
        let head = &t.as_str()[..Token::SHOWN];
        assert_eq!(t.prefix(), head);
        assert_eq!(format!("{t:?}"), format!("{head}…"));
        assert_eq!(format!("{t}"), format!("{head}…"));
    }
}
