//! The semaphore model's configurations (`L = 2` permits, 3 nodes): each
//! prints its state count (and, for a negative control, the
//! counterexample's trace) on stderr.
//!
//! Negative controls: the counter design over-admits, and so do slots
//! without the record of the limit when clients name different ones; the
//! oldest fence
//! commit rule ("counter >= T counts"), rounds without the slot bitmap and
//! a restart that loses the counter each repeat a fence.

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

/// A second attempt per client (after a failure or a release): one client
/// taking one permit, one taking both.
#[test]
#[ignore = "3.3 million states (about 90 s): run with --ignored"]
fn semaphore_slots_never_admit_more_than_l_across_attempts() {
    assert_safe(
        "semaphore: slots, L=2, clients taking 1 and 2 permits x 2 attempts",
        &Semaphore(semaphore::Config {
            takes: &[1, 2],
            attempts: 2,
            ..semaphore::BASE
        }),
    );
}

/// Fenced, no fault: the permits stay within `L` as well (one client
/// taking one permit, one taking both).
#[test]
fn semaphore_fenced_never_admits_more_than_l() {
    assert_safe(
        "semaphore: fenced, clients taking 1 and 2 permits, no fault",
        &Semaphore(semaphore::Config {
            takes: &[1, 2],
            exclusion: true,
            ..FENCED
        }),
    );
}

/// Clients naming 2 and 3 permits, taking 1 and 2: the nodes record the
/// limit of the slots they hold and refuse the other, so the permits held
/// stay within the smallest limit a holder named.
#[test]
fn semaphore_limits_named_apart_never_admit_more_than_the_smaller() {
    assert_safe(
        "semaphore: slots, limits 2 and 3 named, clients taking 1 and 2 permits",
        &Semaphore(semaphore::Config {
            limits: &[2, 3],
            takes: &[1, 2],
            ..semaphore::BASE
        }),
    );
}

/// The same with three clients, two naming 2 and one naming 3, one permit
/// each.
#[test]
fn semaphore_limits_named_apart_never_admit_more_than_the_smaller_three_clients() {
    assert_safe(
        "semaphore: slots, limits 2, 2 and 3 named, 3 clients x 1 permit",
        &Semaphore(semaphore::Config {
            limits: &[2, 2, 3],
            ..semaphore::BASE
        }),
    );
}

/// Negative control: without the record, the client naming 3 takes slots
/// 1 and 2 while the one naming 2 holds slot 0 — three permits held where
/// its holder's bound is two.
#[test]
fn semaphore_without_the_limit_record_over_admits() {
    assert_found(
        "semaphore: slots without the limit record, limits 2 and 3 named",
        &Semaphore(semaphore::Config {
            limits: &[2, 3],
            takes: &[1, 2],
            limit_check: false,
            ..semaphore::BASE
        }),
        12,
        too_many,
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

/// An early expiry and a restart in one run.
#[test]
#[ignore = "1.6 million states (about 70 s): run with --ignored"]
fn semaphore_fences_unique_and_ordered_with_early_expiry_and_a_restart() {
    assert_safe(
        "semaphore: fenced, 2 clients x 1 permit, early expiry, restart (counter kept)",
        &Semaphore(semaphore::Config {
            early_expiries: 1,
            restarts: 1,
            ..FENCED
        }),
    );
}

/// Three clients, fenced, no fault: permits within `L`, fences unique.
/// Not run to the end: after 19 CPU-minutes and 9 GB (tens of millions
/// of states) it was still exploring, with no violation found. The fenced
/// permit count is checked above with two clients, one taking both
/// permits.
#[test]
#[ignore = "tens of millions of states, not run to the end: run with --ignored"]
fn semaphore_fenced_three_clients_never_admit_more_than_l() {
    assert_safe(
        "semaphore: fenced, 3 clients x 1 permit, no fault",
        &Semaphore(semaphore::Config {
            takes: &[1, 1, 1],
            exclusion: true,
            ..FENCED
        }),
    );
}

/// Negative control: the old commit rule repeats a fence, even with no
/// fault — two holders of the semaphore on different slots propose the
/// same fence, and the later commit counts where the counter already
/// reached it.
#[test]
fn semaphore_old_commit_rule_repeats_a_fence() {
    assert_found(
        "semaphore: fenced, old rule (counter >= T counts), no fault",
        &Semaphore(semaphore::Config {
            rule: Rule::AtLeast,
            ..FENCED
        }),
        24,
        repeats_a_fence,
    );
}

/// Negative control: fences of rounds without the slots of the round (a
/// commit of the counter's round always counts) repeat a fence. With one
/// permit: A sets the slot on x and y; A's key on x expires early and B
/// sets it on x and z; all read counter 0, both propose round 1. A's commit
/// counts on y, B's on x and z: B holds 1, and lets go. A's late acquire
/// sets the slot on z, and A's commit of round 1 counts there too: A holds
/// 1 as well. With the bitmap, z says no (slot 0 committed in round 1).
#[test]
fn semaphore_rounds_without_the_slots_repeat_a_fence() {
    assert_found(
        "semaphore: fenced, L=1, rounds without the slot bitmap, early expiry",
        &Semaphore(semaphore::Config {
            permits: 1,
            rule: Rule::RoundsAnySlot,
            early_expiries: 1,
            ..FENCED
        }),
        30,
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
