//! Leader election as configurations of the fencing model
//! (`quorumlock_model::election`): each prints its state count (and, for a
//! negative control, the counterexample's trace) on stderr.

use quorumlock_model::election;
use quorumlock_model::fencing::{Fencing, Violation};
use quorumlock_model::search::{assert_found, assert_safe};

fn repeats_an_epoch(v: &Violation) -> bool {
    matches!(v, Violation::Fence(_))
}

#[test]
fn election_epochs_unique_and_increasing() {
    assert_safe(
        "election: 2 candidates x 2 campaigns, no fault",
        &Fencing(election::epochs(0, 0)),
    );
}
