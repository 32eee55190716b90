//! One server's wire path: the commands the lock sends ([`commands`], the
//! Lua scripts in [`lua`]), what each reply means ([`reply`], [`fence`],
//! an acquire's in [`grant`], an election's in [`election`]), what a new
//! connection must show ([`admission`]) and the wait behind a durable
//! vote ([`durable`]). Pure: how a command reaches its server is the
//! member's (`src/member/`).
//!
//! A node call has no timer of its own: the fan-out that sends it keeps
//! one deadline for every node ([`Window`]). A reply after that deadline
//! is not counted as a reply: it arrives as a timeout, which the fan-out
//! counts.

pub(crate) mod admission;
pub(crate) mod commands;
pub(crate) mod durable;
pub(crate) mod election;
pub(crate) mod fence;
pub(crate) mod grant;
pub(crate) mod lua;
pub(crate) mod reply;

use std::time::{Duration, Instant};

/// When a node call began (every node of a fan-out at once: a reply's
/// latency counts from it) and until when its answer counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Window {
    pub(crate) start: Instant,
    pub(crate) deadline: Instant,
}

impl Window {
    /// From now until `timeout` has passed (without limit when that
    /// instant cannot be represented).
    pub(crate) fn from_now(timeout: Duration) -> Self {
        let now = Instant::now();
        Self {
            start: now,
            deadline: now
                .checked_add(timeout)
                .or_else(|| now.checked_add(Duration::from_secs(1 << 32)))
                .unwrap_or(now),
        }
    }

    /// The timeout the deadline stands for (for the message of a late
    /// answer).
    pub(crate) fn timeout(&self) -> Duration {
        self.deadline.saturating_duration_since(self.start)
    }
}
