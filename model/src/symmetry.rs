//! Symmetry reduction shared by the fencing and semaphore models: states
//! that differ only by how the nodes or the clients are named are one
//! state for the search.
//!
//! A model writes everything about one node — what it holds, the messages
//! to and from it — as that node's signature (its state first, then its
//! messages in any order), and [`push_nodes`] appends the signatures in a
//! form that forgets which node is which. Client renamings are tried one by
//! one ([`client_orders`]) and the smallest encoding kept.

/// Every renaming of up to three clients: `order[i]` is client `i`'s new
/// name.
const ORDERS: [[u8; 3]; 6] = [
    [0, 1, 2],
    [0, 2, 1],
    [1, 0, 2],
    [1, 2, 0],
    [2, 0, 1],
    [2, 1, 0],
];

/// The renamings of `clients` clients (at most three) that `allowed`
/// accepts; the identity always comes first.
///
/// # Panics
///
/// With more than three clients.
pub fn client_orders(
    clients: usize,
    allowed: impl Fn(&[u8]) -> bool,
) -> impl Iterator<Item = &'static [u8]> {
    assert!(clients <= 3, "at most three clients");
    // Sorted: equal prefixes are neighbours, and each is kept once.
    ORDERS
        .iter()
        .enumerate()
        .filter(move |&(i, o)| i == 0 || ORDERS[i - 1][..clients] != o[..clients])
        .map(move |(_, o)| &o[..clients])
        .filter(move |o| o.iter().all(|&c| usize::from(c) < clients))
        .filter(move |o| allowed(o))
}

/// Appends the nodes' signatures to `out` without their names: each
/// signature's messages (all but its first entry) sorted, the signatures
/// sorted, each one preceded by its length (which keeps the concatenation
/// unique).
///
/// # Panics
///
/// When a signature has 256 entries or more.
pub fn push_nodes<const W: usize>(out: &mut Vec<u8>, signatures: &mut [Vec<[u8; W]>]) {
    for sig in signatures.iter_mut() {
        if let Some(messages) = sig.get_mut(1..) {
            messages.sort_unstable();
        }
    }
    signatures.sort_unstable();
    for sig in signatures.iter() {
        out.push(u8::try_from(sig.len()).expect("short"));
        out.extend(sig.iter().flatten());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_orders_rename_only_the_clients_there_are() {
        assert_eq!(client_orders(1, |_| true).count(), 1);
        assert_eq!(client_orders(2, |_| true).count(), 2);
        assert_eq!(client_orders(3, |_| true).count(), 6);
        assert_eq!(client_orders(3, |_| true).next(), Some(&[0u8, 1, 2][..]));
        // Only renamings that keep client 2 where it is.
        let kept: Vec<_> = client_orders(3, |o| o[2] == 2).collect();
        assert_eq!(kept, [&[0, 1, 2][..], &[1, 0, 2][..]]);
    }

    #[test]
    fn push_nodes_forgets_node_names_and_message_order() {
        let encode = |sigs: &[Vec<[u8; 1]>]| {
            let mut out = Vec::new();
            push_nodes(&mut out, &mut sigs.to_vec());
            out
        };
        let a = encode(&[vec![[1], [7], [5]], vec![[0]]]);
        assert_eq!(a, encode(&[vec![[0]], vec![[1], [5], [7]]]));
        assert_eq!(a, [1, 0, 3, 1, 5, 7]);
        // A node's own state is not sorted among its messages.
        assert_ne!(a, encode(&[vec![[5], [1], [7]], vec![[0]]]));
        // Lengths keep the split between nodes.
        assert_ne!(
            encode(&[vec![[1], [2]], vec![[3]]]),
            encode(&[vec![[1]], vec![[2], [3]]])
        );
    }
}
