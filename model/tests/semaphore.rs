//! The semaphore model's configurations (`L = 2`, 3 nodes): each prints
//! its state count (and, for a negative control, the counterexample's
//! trace) on stderr.
//!
//! Negative controls: the counter design over-admits, and the old fence
//! commit rule repeats a fence.

use quorumlock_model::fencing::Rule;
use quorumlock_model::search::{assert_found, assert_safe};
use quorumlock_model::semaphore::{self, Design, Semaphore, Violation};

fn too_many(v: &Violation) -> bool {
    matches!(v, Violation::TooManyPermits(_))
}

fn repeats_a_fence(v: &Violation) -> bool {
    matches!(v, Violation::Fence(_))
}

/// Three clients taking one permit each, one attempt, no fault.
#[test]
fn semaphore_slots_never_admit_more_than_l() {
    assert_safe(
        "semaphore: slots, L=2, 3 clients x 1 permit",
        &Semaphore(semaphore::BASE),
    );
}

/// Negative control: a count per node, held once a majority admitted. A
/// on x, y; B on y, z; C on x, z: each node admits two, all three hold.
#[test]
fn semaphore_counter_design_over_admits() {
    assert_found(
        "semaphore: counter design, L=2, 3 clients x 1 permit",
        &Semaphore(semaphore::Config {
            design: Design::Counter,
            ..semaphore::BASE
        }),
        15,
        too_many,
    );
}
