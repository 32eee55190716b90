//! The waiter queue's configurations (3 nodes, 2 or 3 waiters): each
//! prints its state count on stderr, and for a negative control the trace
//! of its counterexample or of its stuck state.
//!
//! Every configuration of the design checks unique and ordered tickets,
//! one head, FIFO grants, exclusion, and progress: no reachable state
//! from which no run grants every waiter that did not crash.
//!
//! Negative controls: node-local tickets leave three waiters with no head
//! (stuck); a head decided by one node's answer is ahead of a live lower
//! ticket; leases that never expire leave a crashed waiter's entry in the
//! way for good; a waiter that rejoins only once a majority of all nodes
//! miss its entry waits forever once a node fails; a heartbeat that stops
//! at its first majority of "not head" sends a waiter to the back while
//! its entry is on a majority.

use quorumlock_model::queue::{self, assert_live, assert_stuck, Design, Queue, Rejoin, Violation};
use quorumlock_model::search::assert_found;

/// Two waiters, two joins each, no fault: every interleaving of their
/// reads, commits and heartbeats.
#[test]
fn queue_two_waiters_unique_tickets_one_head_fifo_and_progress() {
    assert_live("queue: 2 waiters", &Queue(queue::BASE));
}

/// Three waiters, one join each, no fault.
#[test]
fn queue_three_waiters_unique_tickets_one_head_fifo_and_progress() {
    assert_live(
        "queue: 3 waiters",
        &Queue(queue::Config {
            waiters: 3,
            attempts: 1,
            ..queue::BASE
        }),
    );
}

/// A waiter that crashes at any point (the head included, and the holder,
/// whose lock then expires), and a live waiter's entry that lapses on one
/// node: the others are head once its entries expire, and the lapsed
/// waiter rejoins at the back.
#[test]
fn queue_a_crashed_or_lapsed_waiter_holds_up_the_others_only_until_its_entries_expire() {
    assert_live(
        "queue: 2 waiters, a crash, a lapse",
        &Queue(queue::Config {
            crashes: 1,
            lapses: 1,
            ..queue::BASE
        }),
    );
}

/// A node that fails for good, beside a crash and a lapse.
#[test]
fn queue_survives_a_failed_node() {
    assert_live(
        "queue: 2 waiters, a crash, a lapse, a failed node",
        &Queue(queue::Config {
            crashes: 1,
            lapses: 1,
            node_failures: 1,
            ..queue::BASE
        }),
    );
}

/// Slow nodes: a waiter times out on commits and heartbeats still in
/// flight (their requests may land later), beside a crash and a failed
/// node.
#[test]
fn queue_survives_time_outs_on_answers_still_in_flight() {
    assert_live(
        "queue: 2 waiters, time-outs, a crash, a failed node",
        &Queue(queue::Config {
            crashes: 1,
            node_failures: 1,
            slow: true,
            ..queue::BASE
        }),
    );
}

/// A plain acquirer takes the lock whenever it is free: the fair waiters
/// still go in ticket order among themselves.
#[test]
fn queue_keeps_fifo_among_fair_waiters_beside_a_plain_acquirer() {
    assert_live(
        "queue: 2 waiters and a plain acquirer, a crash",
        &Queue(queue::Config {
            crashes: 1,
            barger: true,
            ..queue::BASE
        }),
    );
}

#[test]
#[ignore = "1.5 million states (about 30 s): run with --ignored"]
fn queue_three_waiters_one_crashing() {
    assert_live(
        "queue: 3 waiters, a crash",
        &Queue(queue::Config {
            waiters: 3,
            attempts: 1,
            crashes: 1,
            ..queue::BASE
        }),
    );
}

#[test]
#[ignore = "8.3 million states (about 2.5 minutes, 2 GB): run with --ignored"]
fn queue_three_waiters_two_joins_each() {
    assert_live(
        "queue: 3 waiters x 2 joins",
        &Queue(queue::Config {
            waiters: 3,
            ..queue::BASE
        }),
    );
}

#[test]
#[ignore = "2.8 million states (about 40 s): run with --ignored"]
fn queue_two_waiters_every_fault() {
    assert_live(
        "queue: 2 waiters and a plain acquirer, a crash, a lapse, a failed node, time-outs",
        &Queue(queue::Config {
            crashes: 1,
            lapses: 1,
            node_failures: 1,
            slow: true,
            barger: true,
            ..queue::BASE
        }),
    );
}

/// Negative control (a): each node numbers its own joins. Three waiters
/// reach the nodes in a different order on each, each node's head is
/// another waiter, and none is ever head on a majority.
#[test]
fn queue_node_local_tickets_leave_nobody_at_the_head() {
    assert_stuck(
        "queue: node-local tickets (negative control), 3 waiters",
        &Queue(queue::Config {
            design: Design::LocalTickets,
            waiters: 3,
            attempts: 1,
            ..queue::BASE
        }),
        10,
        |_| true,
    );
}

/// Negative control (b): the head decided by one node's answer — a node
/// the lower ticket's commit has not reached yet.
#[test]
fn queue_a_head_decided_by_one_node_is_ahead_of_a_lower_ticket() {
    assert_found(
        "queue: head by one node (negative control), 2 waiters",
        &Queue(queue::Config {
            design: Design::OneNodeHead,
            ..queue::BASE
        }),
        15,
        |v| matches!(v, Violation::HeadAhead { .. } | Violation::TwoHeads { .. }),
    );
}

/// Negative control (c): leases that never expire: a crashed waiter's
/// entries stay ahead of the others for good.
#[test]
fn queue_leases_that_never_expire_let_a_crashed_waiter_block_the_others() {
    let model = Queue(queue::Config {
        leases_expire: false,
        crashes: 1,
        ..queue::BASE
    });
    assert_stuck(
        "queue: leases never expire (negative control), 2 waiters, a crash",
        &model,
        10,
        |s| model.crashed_waiter_queued(s),
    );
}

/// Negative control (d): a waiter rejoins only once a majority of all the
/// nodes miss its entry. Its ticket committed on two nodes, one fails, and
/// the third refused it (a higher ticket landed there first): it is head
/// on one node, missing on the other, and waits forever, and the others
/// behind it.
#[test]
fn queue_rejoining_only_on_a_majority_of_misses_waits_forever_past_a_failed_node() {
    let model = Queue(queue::Config {
        rejoin: Rejoin::AbsentOnMajority,
        node_failures: 1,
        ..queue::BASE
    });
    assert_stuck(
        "queue: rejoin on a majority of misses (negative control), 2 waiters, a failed node",
        &model,
        12,
        |s| model.node_failed(s),
    );
}

/// Negative control (e): a heartbeat that stops as soon as a majority
/// answered "not head". A waiter's entry is on x and y, its commit to z
/// still on its way; y answers "behind the first waiter" and z "missing":
/// two answers, one holding the entry, and the waiter rejoins at the back
/// without hearing x.
#[test]
fn queue_a_heartbeat_that_stops_at_its_first_not_head_majority_gives_up_a_place() {
    assert_found(
        "queue: heartbeat decided early (negative control), 2 waiters",
        &Queue(queue::Config {
            rejoin: Rejoin::AtTheDecision,
            ..queue::BASE
        }),
        30,
        |v| matches!(v, Violation::LeftItsPlace { .. }),
    );
}
