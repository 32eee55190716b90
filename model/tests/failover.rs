//! The failover model's configurations (`quorumlock_model::failover`: one
//! Sentinel group, two clients): each prints its state count (and, for a
//! negative control, the counterexample's trace) on stderr.
//!
//! Negative controls: a vote that waits for no replica, with or without
//! the restart quarantine on a promoted replica (the deposed master grants
//! one client while the promoted one grants the other); one that waits for
//! one replica fewer than the master has, with the sentinels promoting the
//! most advanced replica (a replica left with the deposed master
//! acknowledges for it); one that waits for the replicas a connection
//! reads online; and a `WAIT` that a demotion leaves blocked (Redis
//! unblocks it), acknowledged once its server is promoted again.

use quorumlock_model::failover::{self, Failover, Promotion, Required, Violation};
use quorumlock_model::search::{assert_found, assert_safe};

fn two_holders(v: &Violation) -> bool {
    *v == Violation::TwoHolders
}

/// The rule, two replicas: two failovers, any replica promoted, the old
/// master running until re-pointed, stale sentinels (817 125 states,
/// about 6 s).
#[test]
fn waiting_for_every_replica_keeps_one_holder_through_failovers() {
    assert_safe(
        "failover: WAIT every replica (2), 2 clients x 2 attempts, 2 failovers",
        &Failover(failover::BASE),
    );
}

/// The rule, one replica: three failovers (21 805 states).
#[test]
fn waiting_for_the_one_replica_keeps_one_holder_through_failovers() {
    assert_safe(
        "failover: WAIT every replica (1), 2 clients x 2 attempts, 3 failovers",
        &Failover(failover::Config {
            replicas: 1,
            failovers: 3,
            ..failover::BASE
        }),
    );
}

/// Negative control: no durable votes.
#[test]
fn without_durable_votes_a_failover_gives_the_lock_twice() {
    assert_found(
        "failover: WAIT 0 (negative control)",
        &Failover(failover::Config {
            required: Required::Fixed(0),
            ..failover::BASE
        }),
        7,
        two_holders,
    );
}

/// Negative control: no durable votes, and the promoted replica sits out
/// every attempt live when it was promoted (restart quarantine): the
/// deposed master still grants.
#[test]
fn quarantine_alone_does_not_stop_a_deposed_master() {
    assert_found(
        "failover: WAIT 0 + quarantine (negative control)",
        &Failover(failover::Config {
            required: Required::Fixed(0),
            quarantine: true,
            ..failover::BASE
        }),
        7,
        two_holders,
    );
}

/// Negative control: one replica fewer than the master has, the most
/// advanced replica promoted: the other, partitioned with the deposed
/// master, acknowledges its grant.
#[test]
fn waiting_for_one_replica_fewer_gives_the_lock_twice() {
    assert_found(
        "failover: WAIT r - 1 (negative control), most advanced promoted",
        &Failover(failover::Config {
            required: Required::Fixed(1),
            promotion: Promotion::MostAdvanced,
            ..failover::BASE
        }),
        8,
        two_holders,
    );
}

/// Negative control: the replicas online when the client connected.
#[test]
fn waiting_for_the_replicas_online_gives_the_lock_twice() {
    assert_found(
        "failover: WAIT replicas online (negative control)",
        &Failover(failover::Config {
            required: Required::Online,
            promotion: Promotion::MostAdvanced,
            ..failover::BASE
        }),
        9,
        two_holders,
    );
}

/// Negative control: a demoted master keeps a `WAIT` blocked across its
/// resync; promoted again, its new replicas acknowledge offsets of a
/// history that lost the write.
#[test]
fn a_wait_left_blocked_across_a_demotion_gives_the_lock_twice() {
    assert_found(
        "failover: WAIT every replica, demotion leaves WAIT blocked (negative control)",
        &Failover(failover::Config {
            demotion_unblocks: false,
            ..failover::BASE
        }),
        9,
        two_holders,
    );
}
