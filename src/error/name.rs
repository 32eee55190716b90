//! What an error names: the operation that failed, a resource, a
//! semaphore or an election, each shown printable, and the word for each
//! primitive — written here once.

use std::fmt;

/// What a name names, in messages (`lock`, `semaphore`, `election`) and
/// in the counters ([`Stats`](crate::Stats) has one set per primitive).
///
/// # Examples
///
/// ```
/// assert_ne!(quorumlock::Primitive::Lock, quorumlock::Primitive::Permit);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Primitive {
    /// A lock ([`Stats::locks`](crate::Stats::locks)).
    Lock,
    /// Permits of a semaphore ([`Stats::permits`](crate::Stats::permits)).
    Permit,
    /// The leadership of an election, won by a campaign
    /// ([`Stats::elections`](crate::Stats::elections)).
    Election,
    /// The read side of a read–write lock ([`Stats::reads`](crate::Stats::reads)).
    Read,
    /// The write side of a read–write lock ([`Stats::writes`](crate::Stats::writes)).
    Write,
}

/// A resource name kept for messages: shown as text when it is printable
/// UTF-8, escaped otherwise, and shortened when very long; a semaphore's
/// or an election's name is shown with what it names
/// (`semaphore "exports"`), a lock's alone (`"invoice"`).
#[derive(Clone, PartialEq, Eq)]
pub struct ResourceName {
    text: String,
    primitive: Primitive,
}

impl ResourceName {
    const MAX_SHOWN: usize = 96;

    /// A lock's resource.
    pub(crate) fn new(bytes: &[u8]) -> Self {
        Self::of(Primitive::Lock, bytes)
    }

    /// The name of a lock, a semaphore or an election.
    pub(crate) fn of(primitive: Primitive, bytes: &[u8]) -> Self {
        let shown = &bytes[..bytes.len().min(Self::MAX_SHOWN)];
        let mut text: String = shown.escape_ascii().to_string();
        if bytes.len() > Self::MAX_SHOWN {
            text.push_str(&format!("…({} bytes)", bytes.len()));
        }
        Self { text, primitive }
    }

    /// The printable form.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// What the name names: a lock, a semaphore's permits, an election's
    /// leadership.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) {
    /// let permit = redlock.semaphore("exports", 4, std::time::Duration::from_secs(30)).acquire().await;
    /// if let Err(quorumlock::Error::Lost { resource, .. }) = permit {
    ///     assert_eq!(resource.primitive(), quorumlock::Primitive::Permit);
    /// }
    /// # }
    /// ```
    pub fn primitive(&self) -> Primitive {
        self.primitive
    }

    /// What a holder held, for a loss: `lock "invoice"`, `permit of
    /// semaphore "exports"`, `leadership of election "scheduler"`.
    pub(crate) fn held(&self) -> String {
        let what = match self.primitive {
            Primitive::Lock | Primitive::Read | Primitive::Write => "",
            Primitive::Permit => "permit of ",
            Primitive::Election => "leadership of ",
        };
        format!("{what}{}", self.named())
    }

    /// The name with what it names, for every primitive: `lock "invoice"`,
    /// `semaphore "exports"`, `election "scheduler"`. The one place a
    /// primitive is named in a message.
    pub(crate) fn named(&self) -> String {
        let what = match self.primitive {
            Primitive::Lock => "lock",
            Primitive::Permit => "semaphore",
            Primitive::Election => "election",
            Primitive::Read => "read lock",
            Primitive::Write => "write lock",
        };
        format!("{what} \"{}\"", self.text)
    }
}

impl fmt::Display for ResourceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.primitive {
            Primitive::Lock => write!(f, "\"{}\"", self.text),
            _ => f.write_str(&self.named()),
        }
    }
}

impl fmt::Debug for ResourceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// An operation of the lock, as named in [`Error::Unavailable`](crate::Error::Unavailable).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Operation {
    /// Taking a lock.
    Acquire,
    /// Extending a held lock (by hand or by renewal).
    Extend,
    /// Releasing a held lock.
    Release,
    /// Asking the nodes whether they still carry a held lock
    /// ([`Lock::is_held_remotely`](crate::Lock::is_held_remotely)).
    Check,
}

impl Operation {
    /// A short lowercase name: `acquire`, `extend`, `release` or `check`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(quorumlock::Operation::Release.as_str(), "release");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Acquire => "acquire",
            Operation::Extend => "extend",
            Operation::Release => "release",
            Operation::Check => "check",
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_names_are_escaped_and_shortened() {
        assert_eq!(
            ResourceName::new(b"invoice:nightly").as_str(),
            "invoice:nightly"
        );
        assert_eq!(ResourceName::new(b"a\x00\xff").as_str(), "a\\x00\\xff");
        let long = vec![b'x'; 1 << 20];
        let shown = ResourceName::new(&long);
        assert!(shown.as_str().len() < 200);
        assert!(shown.as_str().ends_with("…(1048576 bytes)"));
    }

    #[test]
    fn each_primitive_is_named_in_one_way() {
        let lock = ResourceName::new(b"invoice");
        let semaphore = ResourceName::of(Primitive::Permit, b"exports");
        let election = ResourceName::of(Primitive::Election, b"scheduler");
        assert_eq!(lock.to_string(), "\"invoice\"");
        assert_eq!(lock.named().to_string(), "lock \"invoice\"");
        assert_eq!(semaphore.to_string(), "semaphore \"exports\"");
        assert_eq!(election.named().to_string(), "election \"scheduler\"");
        assert_eq!(election.as_str(), "scheduler");
        assert_eq!(lock.held().to_string(), "lock \"invoice\"");
        assert_eq!(
            semaphore.held().to_string(),
            "permit of semaphore \"exports\""
        );
        assert_eq!(
            election.held().to_string(),
            "leadership of election \"scheduler\""
        );
    }
}
