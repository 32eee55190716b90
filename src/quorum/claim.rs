//! What an acquisition asks the nodes for: a lock's keys, permits of a
//! semaphore, or an election's leadership lock. The retry loop ([`crate::quorum::retry`]) is the same for
//! both; this is where they differ — the attempt, the channels a waiter
//! listens on, and the look a woken waiter takes before trying again.

use std::time::Duration;

use crate::error::ResourceName;
use crate::keys::{Keys, Slots};
use crate::quorum::attempt::{self, Attempt};
use crate::quorum::engine::Engine;
use crate::quorum::permit_attempt;
use crate::stats::locks::{Holding, Primitive};
use crate::status::NodeView;
use crate::token::Token;

/// What an acquisition takes.
#[derive(Debug, Clone)]
pub(crate) enum Claim {
    /// A lock over these keys.
    Lock(Keys),
    /// `want` permits of a semaphore.
    Permits {
        /// The semaphore's slots.
        slots: Slots,
        /// Permits wanted, all or nothing (at least 1, at most the slots).
        want: usize,
    },
    /// The leadership lock of an election ([`Keys::election`]): taken as a
    /// lock, counted as an election.
    Election(Keys),
}

impl From<Keys> for Claim {
    fn from(keys: Keys) -> Self {
        Claim::Lock(keys)
    }
}

impl Claim {
    /// What a grant counts as: a lock, `want` permits, or a leadership.
    pub(crate) fn holding(&self) -> Holding {
        match self {
            Claim::Lock(_) => Holding::LOCK,
            Claim::Election(_) => Holding::ELECTION,
            Claim::Permits { want, .. } => Holding {
                primitive: Primitive::Permit,
                count: *want as u64,
            },
        }
    }

    /// One attempt with a fresh `token`.
    pub(crate) async fn attempt(
        &self,
        engine: &std::sync::Arc<Engine>,
        token: &Token,
        ttl: Duration,
        drift: Duration,
    ) -> Attempt {
        match self {
            Claim::Lock(keys) | Claim::Election(keys) => {
                attempt::acquire_once(engine, keys, token, ttl, drift).await
            }
            Claim::Permits { slots, want } => {
                permit_attempt::take_once(engine, slots, *want, token, ttl, drift).await
            }
        }
    }

    /// The keys whose release announcements wake a waiter: the lock's, or
    /// every slot (announced on the semaphore's one channel).
    pub(crate) fn watched(&self) -> Keys {
        match self {
            Claim::Lock(keys) | Claim::Election(keys) => keys.clone(),
            Claim::Permits { slots, .. } => slots.every().clone(),
        }
    }

    /// The name errors give.
    pub(crate) fn name(&self) -> ResourceName {
        match self {
            Claim::Lock(keys) | Claim::Election(keys) => keys.name(),
            Claim::Permits { slots, .. } => ResourceName::new(slots.name()),
        }
    }

    /// The fencing counter's key, when what is claimed is fenced.
    pub(crate) fn fence_key(&self) -> Option<&[u8]> {
        match self {
            Claim::Lock(keys) | Claim::Election(keys) => keys.fence_key(),
            Claim::Permits { slots, .. } => slots.fence_key(),
        }
    }

    /// The name a refusal gives: for a lock over several resources, the
    /// one found held.
    pub(crate) async fn held_resource(&self, engine: &Engine) -> ResourceName {
        match self {
            Claim::Lock(keys) | Claim::Election(keys) => engine.held_resource(keys).await,
            Claim::Permits { .. } => self.name(),
        }
    }

    /// A waiter's hint, from one node picked at random: free when what is
    /// wanted is free there; held otherwise, for as long as it takes for
    /// enough of it to expire.
    pub(crate) async fn look(&self, engine: &Engine) -> NodeView {
        match self {
            Claim::Lock(keys) | Claim::Election(keys) => engine.look(keys).await,
            Claim::Permits { slots, want } => {
                let views = engine.look_at_each(slots.every()).await;
                NodeView::enough_free(views, *want)
            }
        }
    }
}
