//! What a claim covers on each node: its resources (one, or several taken
//! all-or-nothing) and, by its [`Shape`], what it keeps beside them — a
//! fencing counter, a semaphore's limit record and round key, a read–write
//! lock's readers' entries and intent mark.

use std::fmt;
use std::sync::Arc;

use crate::error::{Error, LostReason, Primitive, ResourceName, Result};

pub(crate) mod hash_slot;
mod queue;
mod slots;

pub(crate) use queue::Queue;
pub(crate) use slots::Slots;

/// Prefix of the fencing counter keys: `quorumlock:fence:{<resource>}`,
/// or `quorumlock:fence:tagged:<resource>` for a resource that carries a
/// Redis Cluster hash tag (`{order:7}:a`), so that the counter always
/// hashes to its resource's slot and no two resources share one (`x` and
/// `{x}` have theirs apart). Resource names starting with it are reserved.
pub const FENCE_KEY_PREFIX: &[u8] = b"quorumlock:fence:";

/// Prefix of a counting semaphore's keys: its slots
/// `quorumlock:semaphore:{<name>}:<i>`, its fencing counter
/// `quorumlock:semaphore:{<name>}:fence`, the counter's round key
/// `quorumlock:semaphore:{<name>}:fence:round` and the limit every holder
/// named, `quorumlock:semaphore:{<name>}:limit`. Resource names starting
/// with it are reserved.
pub const SEMAPHORE_KEY_PREFIX: &[u8] = b"quorumlock:semaphore:";

/// Prefix of a leader election's keys: its leadership
/// `quorumlock:election:{<name>}`, the epoch counter and the leader's
/// record beside it. Resource names starting with it are reserved.
pub const ELECTION_KEY_PREFIX: &[u8] = b"quorumlock:election:";

/// Prefix of a read–write lock's keys beside its resource `<name>`: the
/// readers' entries `quorumlock:rwlock:{<name>}:readers` and a waiting
/// writer's intent mark `quorumlock:rwlock:{<name>}:intent`; waiting
/// readers listen on the channel `quorumlock:rwlock:{<name>}` (after
/// [`RELEASE_CHANNEL_PREFIX`]). A name that carries a hash tag keeps it,
/// after `tagged:` (`quorumlock:rwlock:tagged:{order:7}:a:readers`), as a
/// fencing counter does ([`FENCE_KEY_PREFIX`]). Resource names starting
/// with it are reserved.
pub const RWLOCK_KEY_PREFIX: &[u8] = b"quorumlock:rwlock:";

/// Prefix of the waiter queue's keys beside a resource `<name>`
/// (`docs/queue.md`): the entries `quorumlock:queue:{<name>}`, their
/// leases `…:leases` and the ticket counter `…:ticket`, which live only
/// while somebody waits. A semaphore's queue is beside its channel, a
/// read–write lock's beside its resource (one queue for both sides).
/// Resource names starting with it are reserved.
pub const QUEUE_KEY_PREFIX: &[u8] = b"quorumlock:queue:";

/// Prefix of a queued waiter's own channel, `quorumlock:next:<id>`, on
/// which a leaving head names it the next (`docs/queue.md`).
pub const NEXT_CHANNEL_PREFIX: &[u8] = b"quorumlock:next:";

/// Prefix of the channels the release script publishes on:
/// `quorumlock:released:<resource>`.
pub const RELEASE_CHANNEL_PREFIX: &[u8] = b"quorumlock:released:";

/// The keys of one claim: its resources and what its shape keeps beside
/// them. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Keys(Arc<Inner>);

struct Inner {
    resources: Vec<Vec<u8>>,
    shape: Shape,
}

/// What a claim keeps beside its resources, which decides the script of
/// each operation on it (`node/commands.rs` matches on it).
pub(crate) enum Shape {
    /// A lock over one resource or several: the resources alone.
    Lock,
    /// A fenced lock over one resource, or an election's leadership: the
    /// resource and its fencing counter.
    Fenced { counter: Vec<u8> },
    /// Some slots of a semaphore, as a holder (`every`: with the
    /// semaphore's limit record, kept alive by an extension and deleted by
    /// the release that leaves no slot) or an attempt's leftovers.
    Slots {
        semaphore: Arc<Semaphore>,
        /// Slots a release clears as well, if they carry the token: a
        /// holder's other slots, which a node that answered its grant late
        /// may have set. Never extended or counted as held.
        strays: Vec<Vec<u8>>,
        every: bool,
    },
    /// A reader's hold of a read–write lock.
    Read(Side),
    /// A writer's hold of a read–write lock, fenced by its resource's
    /// counter or not.
    Write {
        side: Side,
        counter: Option<Vec<u8>>,
    },
}

/// What every slot of one semaphore shares ([`Slots`]).
pub(crate) struct Semaphore {
    /// The semaphore's name, as given.
    name: Vec<u8>,
    /// The one channel (after [`RELEASE_CHANNEL_PREFIX`]) its releases
    /// announce on.
    pub(crate) channel: Vec<u8>,
    /// Its fencing counter and the counter's round key (`…:fence:round`):
    /// the slots committed in the counter's round (`fence_commit.lua`).
    pub(crate) fence: Option<(Vec<u8>, Vec<u8>)>,
    /// The record of the limit its holders named, and that limit `L`.
    pub(crate) limit: (Vec<u8>, u32),
}

/// The keys a read–write lock keeps beside its resource (the resource
/// itself holds the writer's token, or the readers' marker while readers
/// hold): the readers' entries, a waiting writer's intent mark, and the
/// channel a writer's release wakes the readers on.
pub(crate) struct Side {
    pub(crate) readers: Vec<u8>,
    pub(crate) intent: Vec<u8>,
    pub(crate) channel: Vec<u8>,
}

impl Side {
    /// The keys a side's scripts take: the resource, the readers' entries
    /// and the intent mark.
    pub(crate) fn keys<'k>(&'k self, resource: &'k [u8]) -> [&'k [u8]; 3] {
        [resource, &self.readers, &self.intent]
    }
}

impl Keys {
    /// Resources checked already, in `shape`.
    fn new(resources: Vec<Vec<u8>>, shape: Shape) -> Self {
        Self(Arc::new(Inner { resources, shape }))
    }

    /// One resource, optionally fenced.
    pub(crate) fn one(resource: impl Into<Vec<u8>>, fenced: bool) -> Result<Self> {
        let resource = resource.into();
        check_resource(&resource)?;
        let shape = fence_of(&resource, fenced).map(|counter| Shape::Fenced { counter });
        Ok(Self::new(vec![resource], shape.unwrap_or(Shape::Lock)))
    }

    /// Several distinct resources, locked together.
    pub(crate) fn many<I, R>(resources: I) -> Result<Self>
    where
        I: IntoIterator<Item = R>,
        R: AsRef<[u8]>,
    {
        let mut list: Vec<Vec<u8>> = Vec::new();
        for r in resources {
            let r = r.as_ref();
            check_resource(r)?;
            if list.iter().any(|seen| seen.as_slice() == r) {
                return Err(Error::invalid(format!(
                    "resource {} is listed twice",
                    ResourceName::new(r)
                )));
            }
            list.push(r.to_vec());
        }
        if list.is_empty() {
            return Err(Error::invalid("no resources given"));
        }
        Ok(Self::new(list, Shape::Lock))
    }

    /// The leadership lock of the leader election `name`:
    /// `quorumlock:election:{<name>}`, fenced by its epoch counter
    /// `quorumlock:election:{<name>}:epoch`. The braces are a hash tag: a
    /// Redis Cluster member would keep an election's keys in one slot. The
    /// reserved prefix is the point here, so only an empty name is refused.
    pub(crate) fn election(name: &[u8]) -> Result<Self> {
        if name.is_empty() {
            return Err(Error::invalid("election name must not be empty"));
        }
        let lock = [ELECTION_KEY_PREFIX, b"{", name, b"}"].concat();
        let counter = [&lock[..], b":epoch"].concat();
        Ok(Self::new(vec![lock], Shape::Fenced { counter }))
    }

    /// A reader's (`reader`) or a writer's hold of the read–write lock
    /// on `resource` (a writer's optionally fenced, by the resource's own
    /// fencing counter): the resource, with the readers' entries and the
    /// writer's intent mark under [`RWLOCK_KEY_PREFIX`] beside it. A
    /// waiting reader listens on the readers' channel (all of them wake
    /// at a writer's release); a waiting writer, on the resource's own
    /// (one wakes at a writer's or the last reader's release).
    pub(crate) fn read_write(resource: &[u8], reader: bool, fenced: bool) -> Result<Self> {
        check_resource(resource)?;
        let channel = hash_slot::beside(RWLOCK_KEY_PREFIX, resource, b"");
        let side = Side {
            readers: [&channel[..], b":readers"].concat(),
            intent: [&channel[..], b":intent"].concat(),
            channel,
        };
        let shape = match reader {
            true => Shape::Read(side),
            false => Shape::Write {
                side,
                counter: fence_of(resource, fenced),
            },
        };
        Ok(Self::new(vec![resource.to_vec()], shape))
    }

    /// What these keys keep beside their resources.
    pub(crate) fn shape(&self) -> &Shape {
        &self.0.shape
    }

    /// For a read–write lock: its keys beside the resource.
    pub(crate) fn side(&self) -> Option<&Side> {
        match self.shape() {
            Shape::Read(side) | Shape::Write { side, .. } => Some(side),
            Shape::Lock | Shape::Fenced { .. } | Shape::Slots { .. } => None,
        }
    }

    /// The leader's record beside an election's leadership lock
    /// ([`Keys::election`]): `quorumlock:election:{<name>}:leader`.
    pub(crate) fn leader_record(&self) -> Vec<u8> {
        [self.first(), b":leader"].concat()
    }

    /// The resources, in the order given.
    pub(crate) fn resources(&self) -> &[Vec<u8>] {
        &self.0.resources
    }

    /// The resources as byte slices, in order.
    pub(crate) fn slices(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        self.0.resources.iter().map(Vec::as_slice)
    }

    /// The first (for a single lock: the only) resource.
    pub(crate) fn first(&self) -> &[u8] {
        self.slices().next().unwrap_or_default()
    }

    /// True for a lock over more than one resource.
    pub(crate) fn is_multi(&self) -> bool {
        self.0.resources.len() > 1
    }

    /// The fencing counter key, for a fenced claim.
    pub(crate) fn fence_key(&self) -> Option<&[u8]> {
        match self.shape() {
            Shape::Fenced { counter } => Some(counter),
            Shape::Write { counter, .. } => counter.as_deref(),
            Shape::Slots { semaphore, .. } => semaphore.fence.as_ref().map(|(c, _)| &c[..]),
            Shape::Lock | Shape::Read(_) => None,
        }
    }

    /// Every key beside the resources, in no particular order.
    fn beside(&self) -> Vec<&[u8]> {
        let side = self.side().into_iter();
        let side = side.flat_map(|side| [&side.readers[..], &side.intent]);
        let mut keys: Vec<&[u8]> = side.chain(self.fence_key()).collect();
        if let Shape::Slots {
            semaphore,
            strays,
            every,
        } = self.shape()
        {
            keys.extend(semaphore.fence.as_ref().map(|(_, round)| &round[..]));
            keys.extend(strays.iter().map(Vec::as_slice));
            keys.extend(every.then_some(&semaphore.limit.0[..]));
        }
        keys
    }

    /// The one Redis Cluster hash slot every key of the lock lives in;
    /// `None` when they span several, which a cluster member refuses
    /// (one script on a cluster touches one slot).
    pub(crate) fn slot(&self) -> Option<u16> {
        hash_slot::same_slot(self.slices().chain(self.beside()))
    }

    /// What these keys are: an election's leadership, a semaphore's slots,
    /// a side of a read–write lock, or a lock.
    pub(crate) fn primitive(&self) -> Primitive {
        self.named().0
    }

    /// The resource for messages: a lock's first resource, or the name of
    /// the semaphore or election these keys belong to (not its key).
    pub(crate) fn name(&self) -> ResourceName {
        let (primitive, name) = self.named();
        ResourceName::of(primitive, name)
    }

    /// What these keys are, and the name given to it: a semaphore's, or
    /// within the braces of an election's leadership key.
    fn named(&self) -> (Primitive, &[u8]) {
        let first = self.first();
        match self.shape() {
            Shape::Read(_) => (Primitive::Read, first),
            Shape::Write { .. } => (Primitive::Write, first),
            Shape::Slots { semaphore, .. } => (Primitive::Permit, &semaphore.name),
            Shape::Lock | Shape::Fenced { .. } => {
                let election = first.strip_prefix(ELECTION_KEY_PREFIX);
                let election = election.and_then(|k| k.strip_prefix(b"{")?.strip_suffix(b"}"));
                election.map_or((Primitive::Lock, first), |name| (Primitive::Election, name))
            }
        }
    }

    /// [`Error::Lost`] for these keys, naming what they are held as by
    /// the name it was asked for by (a semaphore's, not its slot's key).
    pub(crate) fn lost(&self, reason: LostReason) -> Error {
        Error::Lost {
            resource: self.name(),
            reason,
        }
    }

    /// The channel names (after [`RELEASE_CHANNEL_PREFIX`]) a release of
    /// these keys is announced on.
    pub(crate) fn channels(&self) -> Vec<&[u8]> {
        match self.shape() {
            Shape::Read(side) => vec![&side.channel],
            Shape::Slots { semaphore, .. } => vec![&semaphore.channel],
            Shape::Lock | Shape::Fenced { .. } | Shape::Write { .. } => self.slices().collect(),
        }
    }
}

/// The fencing counter of `resource`, when `fenced`.
fn fence_of(resource: &[u8], fenced: bool) -> Option<Vec<u8>> {
    fenced.then(|| hash_slot::beside(FENCE_KEY_PREFIX, resource, b""))
}

fn check_resource(resource: &[u8]) -> Result<()> {
    if resource.is_empty() {
        return Err(Error::invalid("resource name must not be empty"));
    }
    for (prefix, what) in [
        (FENCE_KEY_PREFIX, "fencing counters"),
        (SEMAPHORE_KEY_PREFIX, "semaphores"),
        (ELECTION_KEY_PREFIX, "elections"),
        (RWLOCK_KEY_PREFIX, "read–write locks"),
        (QUEUE_KEY_PREFIX, "waiter queues"),
    ] {
        if resource.starts_with(prefix) {
            return Err(Error::invalid(format!(
                "resource {} uses the reserved prefix of {what}",
                ResourceName::new(resource)
            )));
        }
    }
    Ok(())
}

impl fmt::Debug for Keys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Keys({self})")
    }
}

/// Shows the first resource as [`ResourceName`] does (escaped, cut after
/// 96 bytes) and how many more, formatted only when a log line is
/// actually written.
impl fmt::Display for Keys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name().as_str())?;
        if self.is_multi() {
            write!(f, " (+{} more)", self.0.resources.len() - 1)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loss_names_what_was_held_by_the_name_it_was_asked_for() {
        let lost = |keys: Keys| keys.lost(LostReason::Expired).to_string();
        let permit = Slots::new(b"exp}orts", 4, false).unwrap().held(&[3]);
        assert_eq!(permit.primitive(), Primitive::Permit);
        assert_eq!(
            lost(permit),
            "permit of semaphore \"exp}orts\" lost: its validity ran out"
        );
        let leadership = Keys::election(b"scheduler").unwrap();
        assert_eq!(leadership.primitive(), Primitive::Election);
        assert!(
            lost(leadership).starts_with("leadership of election \"scheduler\" lost: "),
            "the election's name, not its key"
        );
        let lock = Keys::many([&b"a"[..], b"b"]).unwrap();
        assert_eq!(lock.primitive(), Primitive::Lock);
        assert!(lost(lock).starts_with("lock \"a\" lost: "));
    }

    #[test]
    fn single_keys_carry_an_optional_fence_counter() {
        let k = Keys::one(b"job", true).unwrap();
        assert_eq!(k.fence_key(), Some(&b"quorumlock:fence:{job}"[..]));
        assert!(!k.is_multi());
        assert!(Keys::one(b"job", false).unwrap().fence_key().is_none());
        // A resource with a hash tag keeps it: the counter shares its slot.
        let tagged = Keys::one(b"{order:7}:pay", true).unwrap();
        assert_eq!(
            tagged.fence_key(),
            Some(&b"quorumlock:fence:tagged:{order:7}:pay"[..])
        );
        assert_eq!(tagged.slot(), Some(hash_slot::slot(b"order:7")));
        let many = Keys::many([&b"{o}:a"[..], b"{o}:b"]).unwrap();
        assert_eq!(many.slot(), Some(hash_slot::slot(b"o")));
        assert_eq!(Keys::many([&b"a"[..], b"b"]).unwrap().slot(), None);
        assert!(Keys::one(b"", false).unwrap_err().is_invalid_input());
        assert!(Keys::one(b"quorumlock:fence:x", false).is_err());
        assert!(Keys::one(b"quorumlock:semaphore:{x}:0", false).is_err());
        assert!(Keys::one(b"quorumlock:election:{x}", false).is_err());
        assert!(Keys::one(b"quorumlock:rwlock:{x}:readers", false).is_err());
    }

    /// The keys of a read–write lock's side: `[resource, readers, intent]`.
    fn side_keys(keys: &Keys) -> [&[u8]; 3] {
        let side = keys.side().expect("a side of a read–write lock");
        side.keys(keys.first())
    }

    #[test]
    fn a_read_write_lock_keeps_its_entries_and_intent_beside_its_resource() {
        let reader = Keys::read_write(b"doc", true, false).unwrap();
        let [name, readers, intent] = side_keys(&reader);
        assert_eq!(name, b"doc");
        assert_eq!(readers, b"quorumlock:rwlock:{doc}:readers");
        assert_eq!(intent, b"quorumlock:rwlock:{doc}:intent");
        assert!(matches!(reader.shape(), Shape::Read(_)));
        assert_eq!(reader.primitive(), Primitive::Read);
        let writer = Keys::read_write(b"doc", false, true).unwrap();
        assert!(matches!(writer.shape(), Shape::Write { .. }));
        assert_eq!(writer.primitive(), Primitive::Write);
        assert_eq!(writer.fence_key(), Some(&b"quorumlock:fence:{doc}"[..]));
        assert_eq!(writer.channels(), [&b"doc"[..]]);
        assert_eq!(
            writer.side().map(|side| &side.channel[..]),
            Some(&b"quorumlock:rwlock:{doc}"[..])
        );
        assert_eq!(reader.channels(), [&b"quorumlock:rwlock:{doc}"[..]]);
        assert!(reader.fence_key().is_none());
        assert!(Keys::read_write(b"", true, false).is_err_and(|e| e.is_invalid_input()));
        assert!(Keys::read_write(b"quorumlock:fence:x", true, false).is_err());
        assert!(Keys::one(b"doc", false).unwrap().side().is_none());
    }

    #[test]
    fn a_name_and_the_same_name_in_braces_keep_their_side_keys_apart() {
        for (plain, tagged) in [(&b"x"[..], &b"{x}"[..]), (b"a}b", b"{a}b}")] {
            for reader in [true, false] {
                let a = Keys::read_write(plain, reader, !reader).unwrap();
                let b = Keys::read_write(tagged, reader, !reader).unwrap();
                let [_, a_readers, a_intent] = side_keys(&a);
                let [_, b_readers, b_intent] = side_keys(&b);
                assert_ne!(a_readers, b_readers);
                assert_ne!(a_intent, b_intent);
                assert_ne!(a.channels(), b.channels());
                let channel = |k: &Keys| k.side().map(|side| side.channel.clone());
                assert_ne!(channel(&a), channel(&b));
                if !reader {
                    assert!(a.fence_key().is_some());
                    assert_ne!(a.fence_key(), b.fence_key());
                }
                // The tagged name's keys stay in its slot.
                assert_eq!(b.slot(), Some(hash_slot::slot(tagged)));
            }
        }
        let tagged = Keys::read_write(b"{x}", true, false).unwrap();
        assert_eq!(
            side_keys(&tagged),
            [
                &b"{x}"[..],
                b"quorumlock:rwlock:tagged:{x}:readers",
                b"quorumlock:rwlock:tagged:{x}:intent"
            ]
        );
        assert_eq!(tagged.slot(), Some(hash_slot::slot(b"x")));
    }

    #[test]
    fn keys_are_named_as_the_primitive_they_belong_to() {
        let lock = Keys::one(b"job", true).unwrap();
        assert_eq!(
            (lock.primitive(), lock.name().as_str()),
            (Primitive::Lock, "job")
        );
        let election = Keys::election(b"sched}uler").unwrap();
        assert_eq!(election.primitive(), Primitive::Election);
        assert_eq!(election.name().to_string(), "election \"sched}uler\"");
        let slots = Slots::new(b"pool", 3, false).unwrap();
        for keys in [slots.every().clone(), slots.held(&[1]), slots.except(&[1])] {
            assert_eq!(keys.primitive(), Primitive::Permit);
            assert_eq!(keys.name().to_string(), "semaphore \"pool\"");
        }
    }

    #[test]
    fn an_election_keeps_its_keys_under_one_hash_tag() {
        let k = Keys::election(b"db-primary").unwrap();
        assert_eq!(k.first(), b"quorumlock:election:{db-primary}");
        assert_eq!(
            k.fence_key(),
            Some(&b"quorumlock:election:{db-primary}:epoch"[..])
        );
        assert_eq!(
            k.leader_record(),
            b"quorumlock:election:{db-primary}:leader"
        );
        assert!(Keys::election(b"").unwrap_err().is_invalid_input());
        // Any other name is the election's own: nothing is reserved inside it.
        assert!(Keys::election(b"quorumlock:fence:x").is_ok());
    }

    #[test]
    fn many_keys_must_be_distinct_and_non_empty() {
        let k = Keys::many(["a", "b"]).unwrap();
        assert!(k.is_multi());
        assert_eq!(k.to_string(), "a (+1 more)");
        assert!(Keys::many(["a", "a"])
            .unwrap_err()
            .to_string()
            .contains("twice"));
        assert!(Keys::many(Vec::<&str>::new()).is_err());
        assert!(Keys::many(["a", ""]).is_err());
        assert!(!Keys::many(["only"]).unwrap().is_multi());
    }

    #[test]
    fn logs_show_the_first_resource_escaped_and_how_many_more() {
        let k = Keys::one(b"job\n\xff\"x", false).unwrap();
        assert_eq!(k.to_string(), "job\\n\\xff\\\"x");
        assert_eq!(format!("{k:?}"), "Keys(job\\n\\xff\\\"x)");
        let k = Keys::many(["a", "b", "c"]).unwrap();
        assert_eq!(k.to_string(), "a (+2 more)");
        assert_eq!(format!("{k:?}"), "Keys(a (+2 more))");
    }

    #[test]
    fn logs_cut_a_long_resource_name_after_96_bytes() {
        let fits = "r".repeat(96);
        assert_eq!(Keys::one(fits.as_bytes(), false).unwrap().to_string(), fits);
        let long = Keys::one("r".repeat(97).as_bytes(), false).unwrap();
        assert_eq!(long.to_string(), format!("{fits}…(97 bytes)"));
        let long = Keys::many(["s".repeat(200), "t".to_owned()]).unwrap();
        assert_eq!(
            long.to_string(),
            format!("{}…(200 bytes) (+1 more)", "s".repeat(96))
        );
    }
}
