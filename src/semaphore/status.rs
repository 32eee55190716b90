//! [`SemaphoreStatus`]: who holds a semaphore's permits, as every node
//! sees its slots at one moment.

use std::fmt;
use std::time::Duration;

use crate::error::ResourceName;
use crate::status::{expiry, Status};

/// A semaphore's slots as every node sees them, from
/// [`Redlock::semaphore_status`](crate::Redlock::semaphore_status).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SemaphoreStatus {
    /// The semaphore, printable.
    pub name: ResourceName,
    /// Per slot, in order: what each node holds for its key.
    pub slots: Vec<Status>,
    /// The number of permits the semaphore's holders named, as a majority
    /// of the nodes record it; `None` when none is recorded on a majority
    /// (the record goes with the last permit). An acquire naming another
    /// number is refused ([`Error::LimitMismatch`](crate::Error::LimitMismatch)).
    pub limit: Option<u32>,
}

/// One holder of a semaphore's permits: a token on a majority of the
/// nodes for each of its slots.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SemaphoreHolder {
    /// The first characters of the holder's token
    /// ([`Lock::token_prefix`](crate::Lock::token_prefix)).
    pub token_prefix: String,
    /// The slots it holds.
    pub slots: Vec<u32>,
    /// The longest time until one of its slots expires on the last node of
    /// its majority (an upper bound of the permits' life).
    pub expires_in: Option<Duration>,
}

impl SemaphoreStatus {
    /// The status from what the nodes hold for each slot's key, then for
    /// the limit's record (its value read as a holder's token is).
    pub(crate) fn new(name: ResourceName, mut slots: Vec<Status>) -> Self {
        let record = slots.pop();
        let limit = record.as_ref().filter(|r| r.held_by_quorum());
        let limit = limit.and_then(|r| r.leading_holder()?.0.parse().ok());
        Self { name, slots, limit }
    }

    /// The holders: each token held by a quorum on some slot, with its
    /// slots, in the order of their first slot.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(redlock: quorumlock::Redlock) -> Result<(), quorumlock::Error> {
    /// let status = redlock.semaphore_status("exports", 4).await?;
    /// for holder in status.holders() {
    ///     println!("{}… holds slots {:?}", holder.token_prefix, holder.slots);
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn holders(&self) -> Vec<SemaphoreHolder> {
        let mut holders: Vec<SemaphoreHolder> = Vec::new();
        for (i, slot) in (0..).zip(&self.slots) {
            let Some((prefix, _)) = slot.leading_holder().filter(|_| slot.held_by_quorum()) else {
                continue;
            };
            let expires_in = slot.expires_in();
            match holders.iter_mut().find(|h| h.token_prefix == prefix) {
                Some(holder) => {
                    holder.slots.push(i);
                    holder.expires_in = holder.expires_in.max(expires_in);
                }
                None => holders.push(SemaphoreHolder {
                    token_prefix: prefix.to_owned(),
                    slots: vec![i],
                    expires_in,
                }),
            }
        }
        holders
    }

    /// Permits held: the slots held by a quorum. A read cannot tell a
    /// holder's slot from one a failed attempt set on a quorum and has not
    /// cleaned up yet (its cleanup is in flight, or could not reach a node
    /// during a failover): such a slot counts as held, and is taken indeed
    /// (no other acquire can have it) until the cleanup lands or its key
    /// expires, at most one TTL later.
    pub fn held(&self) -> u32 {
        super::permits(self.slots.iter().filter(|s| s.held_by_quorum()).count())
    }

    /// Permits known to be free: the slots that a quorum of nodes answered
    /// are absent. The rest (`slots − held − free`) cannot be told: too
    /// few nodes answered, or a minority holds them (an attempt in flight,
    /// or one that failed and is being cleaned up).
    pub fn free(&self) -> u32 {
        super::permits(self.slots.iter().filter(|s| s.free() >= s.quorum).count())
    }
}

impl SemaphoreHolder {
    /// `3f9a0c1e… slots 0, 2, expires in 29.1s`.
    fn shown(&self) -> String {
        let slots: Vec<String> = self.slots.iter().map(ToString::to_string).collect();
        let noun = if slots.len() == 1 { "slot" } else { "slots" };
        let expiry = expiry(self.expires_in);
        format!("{}… {noun} {}{expiry}", self.token_prefix, slots.join(", "))
    }
}

/// One line: `"exports": 2 of 4 permits held (3f9a0c1e… slots 0, 2, expires
/// in 29.1s), 2 free` — and, when its holders named another number of
/// permits than the slots read, `; its holders named 3 permits`.
impl fmt::Display for SemaphoreStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (held, free, slots) = (self.held(), self.free(), super::permits(self.slots.len()));
        write!(f, "{}: {held} of {slots} permits held", self.name)?;
        let holders: Vec<String> = self.holders().iter().map(SemaphoreHolder::shown).collect();
        if !holders.is_empty() {
            write!(f, " ({})", holders.join("; "))?;
        }
        write!(f, ", {free} free")?;
        let unknown = slots - held - free;
        if unknown > 0 {
            write!(f, ", {unknown} unknown")?;
        }
        if let Some(limit) = self.limit.filter(|&limit| limit != slots) {
            write!(f, "; its holders named {limit} permits")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::NodeView;

    fn held(prefix: &str, secs: u64) -> NodeView {
        NodeView::Held {
            token_prefix: prefix.to_owned(),
            expires_in: Some(Duration::from_secs(secs)),
        }
    }

    fn slot(views: Vec<NodeView>) -> Status {
        let nodes = views
            .into_iter()
            .enumerate()
            .map(|(i, v)| (format!("n{i}"), v))
            .collect();
        Status {
            resource: ResourceName::new(b"slot"),
            nodes,
            quorum: 2,
        }
    }

    #[test]
    fn holders_are_grouped_by_token_over_their_slots() {
        let status = SemaphoreStatus::new(
            ResourceName::new(b"exports"),
            vec![
                slot(vec![held("aaaa", 3), held("aaaa", 5), NodeView::Free]),
                slot(vec![NodeView::Free, NodeView::Free, held("bbbb", 1)]),
                slot(vec![held("aaaa", 9), held("aaaa", 2), held("aaaa", 2)]),
                slot(vec![held("cccc", 4), held("dddd", 4), NodeView::Free]),
                // The limit's record: the one its holders named.
                slot(vec![held("4", 9), held("4", 9), NodeView::Free]),
            ],
        );
        assert_eq!(status.limit, Some(4));
        let holders = status.holders();
        assert_eq!(holders.len(), 1);
        assert_eq!(holders[0].slots, [0, 2]);
        assert_eq!(holders[0].expires_in, Some(Duration::from_secs(9)));
        assert_eq!((status.held(), status.free()), (2, 1));
        assert_eq!(
            status.to_string(),
            "\"exports\": 2 of 4 permits held (aaaa… slots 0, 2, expires in 9.0s), 1 free, 1 unknown"
        );
    }

    #[test]
    fn another_limit_recorded_is_shown() {
        let read = |record: Vec<NodeView>| {
            let free = || slot(vec![NodeView::Free; 3]);
            SemaphoreStatus::new(
                ResourceName::new(b"pool"),
                vec![free(), free(), slot(record)],
            )
        };
        let status = read(vec![held("3", 9), held("3", 9), NodeView::Free]);
        assert_eq!(status.limit, Some(3));
        assert_eq!(
            status.to_string(),
            "\"pool\": 0 of 2 permits held, 2 free; its holders named 3 permits"
        );
        // On a minority only: not the semaphore's.
        let status = read(vec![held("3", 9), NodeView::Free, NodeView::Free]);
        assert_eq!(status.limit, None);
        assert_eq!(status.to_string(), "\"pool\": 0 of 2 permits held, 2 free");
    }
}
