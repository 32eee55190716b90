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

/// Two candidates campaigning once each and renewing once, a restart that
/// loses the counter, which starts again from the clock: epochs unique and
/// increasing (the negative control below, with the clock).
#[test]
fn election_epochs_unique_after_lost_counters_with_the_clock() {
    assert_safe(
        "election: 2 candidates, 1 renewal, restart losing the counter, clock",
        &Fencing(election::epochs_after_lost_counters()),
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

mod visibility {
    use quorumlock_model::search::{assert_found, assert_safe};
    use quorumlock_model::visibility::{Config, Repair, Visibility};

    const ROLLING: Config = Config {
        nodes: 3,
        restarts: 3,
        proclaimed_on: 3,
        repair: Repair::Full,
    };

    /// Rolling restarts under a leader whose proclamation reached every
    /// node: the repair restores the record with the lock, and a quorum
    /// read sees the leader whenever a majority votes and was renewed.
    #[test]
    fn a_valid_leader_is_read_through_rolling_restarts() {
        assert_safe(
            "election visibility: 3 nodes, 3 restarts",
            &Visibility(ROLLING),
        );
        assert_safe(
            "election visibility: 5 nodes, 3 restarts",
            &Visibility(Config {
                nodes: 5,
                proclaimed_on: 5,
                ..ROLLING
            }),
        );
    }

    /// Negative control: the repair as it was (the lock's key, not the
    /// record) hides a valid leader after two restarts.
    #[test]
    fn a_repair_without_the_record_hides_the_leader() {
        assert_found(
            "election visibility: lock-only repair",
            &Visibility(Config {
                repair: Repair::LockOnly,
                ..ROLLING
            }),
            8,
            |_| true,
        );
    }

    /// A proclamation that reached two nodes of three: the renewal writes
    /// the record on the third, where the lock holds without it.
    #[test]
    fn a_node_that_missed_the_proclamation_gets_the_record() {
        assert_safe(
            "election visibility: proclamation on 2 of 3",
            &Visibility(Config {
                proclaimed_on: 2,
                ..ROLLING
            }),
        );
    }

    /// Negative control: the record restored only with a missing lock; a
    /// node that missed the proclamation keeps the lock without it, and
    /// one restart hides the leader.
    #[test]
    fn a_record_restored_only_with_the_lock_misses_a_node() {
        assert_found(
            "election visibility: record only with a missing lock",
            &Visibility(Config {
                proclaimed_on: 2,
                repair: Repair::WithMissingLock,
                ..ROLLING
            }),
            8,
            |_| true,
        );
    }
}
