//! Redis Cluster's hash slots: which of the 16384 slots a key lives in
//! (CRC16 of the key's hash tag, or of the whole key), and the name of a
//! key kept beside a resource in the resource's own slot. Pure.
//!
//! A lock's keys (the resource, its fencing counter, a read–write lock's
//! readers and intent mark) are taken, renewed and released by one script
//! on each member. On a Redis Cluster member one script can only touch
//! one slot, so every key of a lock is named to hash where its resource
//! hashes ([`beside`]).

/// The number of hash slots of a Redis Cluster.
pub(crate) const SLOTS: u16 = 16384;

/// The slot `key` lives in on a Redis Cluster: CRC16 (XMODEM) of its hash
/// tag — the bytes between the first `{` and the first `}` after it, when
/// there are some — or of the whole key, modulo 16384.
pub(crate) fn slot(key: &[u8]) -> u16 {
    crc16(tag(key).unwrap_or(key)) % SLOTS
}

/// The hash tag of `key`, if it has one (a non-empty `{…}`).
fn tag(key: &[u8]) -> Option<&[u8]> {
    let open = key.iter().position(|&b| b == b'{')?;
    let rest = &key[open + 1..];
    let close = rest.iter().position(|&b| b == b'}')?;
    (close > 0).then(|| &rest[..close])
}

/// What [`beside`] puts between its prefix and a resource that carries a
/// hash tag. No `{` in it, so the key's tag is the resource's; not a `{`
/// first, so such keys never meet those of resources without a tag,
/// which have the `{` of their braces there.
pub(crate) const TAGGED: &[u8] = b"tagged:";

/// The key `prefix` + `resource` + `suffix`, in `resource`'s slot: a
/// resource without a hash tag in braces (`prefix{x}suffix`, the whole
/// resource as the tag), one with a tag as it is after [`TAGGED`]
/// (`prefix` `tagged:{o}:1` `suffix`, the same tag). The two forms differ
/// right after `prefix`, and each holds the resource whole, so two
/// resources never share a key (`x` and `{x}`, `a}b` and `{a}b}` did when
/// both forms were `prefix{…}`); `prefix` must hold no `{`. A resource
/// without a tag but with a `}` (`a}b`, `a{}b`) cannot be wrapped so: no
/// tag can hold its `}`, so its keys span two slots, which a Redis Cluster
/// member refuses ([`same_slot`]).
pub(crate) fn beside(prefix: &[u8], resource: &[u8], suffix: &[u8]) -> Vec<u8> {
    if tag(resource).is_some() {
        [prefix, TAGGED, resource, suffix].concat()
    } else {
        [prefix, b"{", resource, b"}", suffix].concat()
    }
}

/// The one slot every key of `keys` lives in; `None` when they span
/// several (or there are none).
pub(crate) fn same_slot<'k>(keys: impl IntoIterator<Item = &'k [u8]>) -> Option<u16> {
    let mut slots = keys.into_iter().map(slot);
    let first = slots.next()?;
    slots.all(|s| s == first).then_some(first)
}

/// CRC16-XMODEM (polynomial 0x1021, initial value 0), as Redis Cluster
/// computes it.
fn crc16(bytes: &[u8]) -> u16 {
    bytes.iter().fold(0u16, |crc, &b| {
        (0..8).fold(crc ^ (u16::from(b) << 8), |crc, _| {
            if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_the_servers() {
        // `CLUSTER KEYSLOT` on Redis 7.0.
        assert_eq!(crc16(b"123456789"), 0x31c3);
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"bar"), 5061);
        assert_eq!(slot(b"{user1000}.following"), slot(b"user1000"));
        assert_eq!(slot(b"foo{}{bar}"), slot(b"foo{}{bar}"));
        assert_ne!(slot(b"foo{}{bar}"), slot(b"bar"));
        assert_eq!(slot(b"foo{{bar}}zap"), slot(b"{bar"));
        assert_eq!(slot(b"foo{bar}{zap}"), slot(b"bar"));
        assert_eq!(slot(b""), 0);
    }

    #[test]
    fn a_key_beside_a_resource_shares_its_slot() {
        let prefix = b"quorumlock:fence:";
        for resource in [
            &b"job:42"[..],
            b"{order:7}:a",
            b"a{b",
            b"x{y}z{w}",
            b"\xff\x00",
        ] {
            let key = beside(prefix, resource, b":readers");
            assert_eq!(slot(&key), slot(resource), "{key:?}");
            assert_eq!(same_slot([resource, &key[..]]), Some(slot(resource)));
        }
        assert_eq!(beside(prefix, b"job:42", b""), b"quorumlock:fence:{job:42}");
        assert_eq!(
            beside(prefix, b"{o}:1", b""),
            b"quorumlock:fence:tagged:{o}:1"
        );
        // No tag, but a `}`: cannot be kept beside it.
        for resource in [&b"a}b"[..], b"a{}b"] {
            let key = beside(prefix, resource, b"");
            assert_eq!(same_slot([resource, &key[..]]), None, "{key:?}");
        }
        // No tag, but a `}` and the rest with a tag: apart.
        for (a, b) in [(&b"a}b"[..], &b"{a}b}"[..]), (b"a{}b", b"{a{}b}")] {
            assert_ne!(beside(prefix, a, b""), beside(prefix, b, b""));
            assert_eq!(slot(&beside(prefix, b, b"")), slot(b));
        }
        assert_eq!(same_slot([&b"{o}:1"[..], b"{o}:2"]), Some(slot(b"o")));
        assert_eq!(same_slot([&b"a"[..], b"b"]), None);
        assert_eq!(same_slot(std::iter::empty()), None);
    }

    #[test]
    fn no_two_resources_share_a_key_beside_them() {
        // Each with and without braces, with stray braces, with the marker
        // of the tagged form inside, and the keys the forms make themselves.
        let names: &[&[u8]] = &[
            b"x",
            b"{x}",
            b"{{x}}",
            b"a}b",
            b"{a}b}",
            b"{a}b",
            b"a{}b",
            b"{a{}b}",
            b"}",
            b"{}",
            b"{}}",
            b"tagged:{x}",
            b"{tagged:{x}}",
            b"x}:readers",
            b"{x}:readers",
            b"x:readers",
            b"{x:readers}",
        ];
        let prefix = b"quorumlock:rwlock:";
        // A fencing counter (or a channel) alone; a read–write lock's two
        // keys together.
        let families: [&[&[u8]]; 2] = [&[b""], &[b":readers", b":intent"]];
        for suffixes in families {
            let mut keys = std::collections::HashMap::new();
            for &name in names {
                for &suffix in suffixes {
                    let key = beside(prefix, name, suffix);
                    // In its resource's slot, wherever one can be.
                    if tag(name).is_some() || !name.contains(&b'}') {
                        assert_eq!(slot(&key), slot(name), "{key:?}");
                    }
                    if let Some(other) = keys.insert(key.clone(), (name, suffix)) {
                        panic!("{key:?}: {other:?} and {:?}", (name, suffix));
                    }
                }
            }
        }
    }
}
