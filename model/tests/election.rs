//! Leader election as configurations of the fencing model
//! (`quorumlock_model::election`): each prints its state count (and, for a
//! negative control, the counterexample's trace) on stderr.
//!
//! Negative controls: an epoch taken from `INCR` replies without a commit,
//! and a restart that loses the counter, each repeat or reorder an epoch.

use quorumlock_model::election;
use quorumlock_model::fencing::{Fencing, Violation};
use quorumlock_model::search::{assert_found, assert_safe};

fn repeats_an_epoch(v: &Violation) -> bool {
    matches!(v, Violation::Fence(_))
}

/// Reordering, give-ups, a renewal, an early expiry and a restart that
/// keeps the counter: epochs unique and increasing in grant order.
#[test]
fn election_epochs_unique_and_increasing() {
    assert_safe(
        "election: 2 candidates, 1 renewal, early expiry, restart (counter kept)",
        &Fencing(election::epochs()),
    );
}

/// No fault: never two leaders at once.
#[test]
fn election_no_two_leaders_without_faults() {
    assert_safe(
        "election: 2 candidates, 1 renewal, no fault",
        &Fencing(election::leaders()),
    );
}

/// Negative control: each node `INCR`s where it grants, and the leader
/// takes the largest reply of its majority as its epoch, with no commit.
#[test]
fn election_epoch_from_incr_replies_repeats_an_epoch() {
    assert_found(
        "election: epoch = max of INCR replies, 2 candidates x 2 campaigns",
        &Fencing(election::incr_epochs()),
        20,
        repeats_an_epoch,
    );
}

/// Negative control: a restart that loses the counter.
#[test]
fn election_restart_losing_the_counter_repeats_an_epoch() {
    assert_found(
        "election: restart losing the counter",
        &Fencing(election::forgetful_epochs()),
        30,
        repeats_an_epoch,
    );
}
