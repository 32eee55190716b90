//! The semaphore model's configurations (`L = 2` permits, 3 nodes): each
//! prints its state count (and, for a negative control, the
//! counterexample's trace) on stderr.
//!
//! Negative controls: the counter design over-admits; the old fence commit
//! rule ("counter >= T counts") and a restart that loses the counter each
//! repeat a fence.

use quorumlock_model::fencing::Rule;
use quorumlock_model::search::{assert_found, assert_safe};
use quorumlock_model::semaphore::{self, Design, Semaphore, Violation};

fn too_many(v: &Violation) -> bool {
    matches!(v, Violation::TooManyPermits(_))
}

fn repeats_a_fence(v: &Violation) -> bool {
    matches!(v, Violation::Fence(_))
}

/// Fenced, two clients taking one permit each: the base of the fencing
/// configurations (faults only where named).
const FENCED: semaphore::Config = semaphore::Config {
    takes: &[1, 1],
    fenced: true,
    exclusion: false,
    ..semaphore::BASE
};

/// Three clients taking one permit each, one attempt, no fault.
#[test]
fn semaphore_slots_never_admit_more_than_l() {
    assert_safe(
        "semaphore: slots, L=2, 3 clients x 1 permit",
        &Semaphore(semaphore::BASE),
    );
}

/// One of the three clients takes two permits (all or nothing).
#[test]
fn semaphore_slots_never_admit_more_than_l_with_a_two_permit_client() {
    assert_safe(
        "semaphore: slots, L=2, clients taking 1, 1 and 2 permits",
        &Semaphore(semaphore::Config {
            takes: &[1, 1, 2],
            ..semaphore::BASE
        }),
    );
}

/// Negative control: a count per node, held once a majority admitted. A
/// on x, y; B on y, z; C on x, z (up to names): each node admits two, all
/// three hold.
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

/// Fences unique and ordered by commit, with an early expiry (a clock
/// jump) of a key a holder counts on.
#[test]
fn semaphore_fences_unique_and_ordered() {
    assert_safe(
        "semaphore: fenced, 2 clients x 1 permit, early expiry",
        &Semaphore(semaphore::Config {
            early_expiries: 1,
            ..FENCED
        }),
    );
}

/// The same with a client taking both permits.
#[test]
fn semaphore_fences_unique_and_ordered_with_a_two_permit_client() {
    assert_safe(
        "semaphore: fenced, clients taking 1 and 2 permits, early expiry",
        &Semaphore(semaphore::Config {
            takes: &[1, 2],
            early_expiries: 1,
            ..FENCED
        }),
    );
}

/// Fences unique and ordered by commit across a restart that keeps the
/// counter.
#[test]
fn semaphore_fences_unique_and_ordered_across_a_restart() {
    assert_safe(
        "semaphore: fenced, 2 clients x 1 permit, restart (counter kept)",
        &Semaphore(semaphore::Config {
            restarts: 1,
            ..FENCED
        }),
    );
}

/// Negative control: the old commit rule repeats a fence.
#[test]
fn semaphore_old_commit_rule_repeats_a_fence() {
    assert_found(
        "semaphore: fenced, old rule (counter >= T counts), early expiry",
        &Semaphore(semaphore::Config {
            rule: Rule::AtLeast,
            early_expiries: 1,
            ..FENCED
        }),
        24,
        repeats_a_fence,
    );
}

/// Negative control: a restart that loses the counter repeats a fence.
#[test]
fn semaphore_restart_losing_the_counter_repeats_a_fence() {
    assert_found(
        "semaphore: fenced, restart losing the counter",
        &Semaphore(semaphore::Config {
            restarts: 1,
            persistent_counter: false,
            ..FENCED
        }),
        24,
        repeats_a_fence,
    );
}
