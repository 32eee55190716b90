//! The model check's configurations: each prints its state count (and, for
//! a negative control, the counterexample's trace) on stderr.
//!
//! Negative controls: each plausible wrong implementation — the old fence
//! commit rule, a plain `DEL` release, an extension that re-creates an
//! expired key, no restart quarantine, colliding tokens, a server counted
//! twice, a restart that loses the counter or brings it back older — must
//! be caught with a counterexample, and so must today's extension rule
//! once a reconnect reorders a cancelled short extension and a longer one.

use quorumlock_model::fencing::{self, Fencing};
use quorumlock_model::lease::{self, DeadlineRule, ExtendScript, Lease, ReleaseScript, Repair};
use quorumlock_model::search::{assert_found, assert_safe};

// The fencing model.

#[test]
fn two_clients_no_faults_exclusive_and_fences_unique() {
    assert_safe(
        "fencing: 2 clients, no expiry or restart",
        &Fencing(fencing::BASE),
    );
}

#[test]
fn two_clients_early_expiry_fences_unique() {
    assert_safe(
        "fencing: 2 clients, early expiry",
        &Fencing(fencing::Config {
            extends: 0,
            early_expiries: 1,
            exclusion: false,
            ..fencing::BASE
        }),
    );
}

#[test]
fn two_clients_restart_keeping_the_counter_fences_unique() {
    assert_safe(
        "fencing: 2 clients, 2 restarts (counter kept)",
        &Fencing(fencing::Config {
            extends: 0,
            restarts: 2,
            exclusion: false,
            ..fencing::BASE
        }),
    );
}

#[test]
fn three_clients_no_faults_exclusive_and_fences_unique() {
    assert_safe(
        "fencing: 3 clients, no expiry or restart",
        &Fencing(fencing::Config {
            clients: 3,
            extends: 0,
            ..fencing::BASE
        }),
    );
}

/// Negative control: the old commit rule is found out (issue 10, defect 1).
#[test]
fn the_old_commit_rule_repeats_a_fence() {
    assert_found(
        "fencing: old rule (counter >= T counts), early expiry",
        &Fencing(fencing::Config {
            extends: 0,
            early_expiries: 1,
            rule: fencing::Rule::AtLeast,
            exclusion: false,
            ..fencing::BASE
        }),
        30,
        repeats_a_fence,
    );
}

/// Negative control: without persistence a restart forgets the counter,
/// and fences repeat — the assumption the proof states.
#[test]
fn a_restart_that_loses_the_counter_repeats_a_fence() {
    assert_found(
        "fencing: restart losing the counter",
        &Fencing(fencing::Config {
            extends: 0,
            restarts: 1,
            persistence: fencing::Persistence::Off,
            exclusion: false,
            ..fencing::BASE
        }),
        30,
        repeats_a_fence,
    );
}

/// Restarts that lose the counter, up to every node, the counter starting
/// again from the clock (`fence_check.lua`): fences stay unique and
/// ordered. The negative control is the one above, whose counter starts
/// again from 0.
#[test]
fn a_restart_that_loses_the_counter_keeps_fences_unique_with_the_clock() {
    assert_safe(
        "fencing: 2 clients, 3 restarts losing the counter, clock",
        &Fencing(fencing::Config {
            extends: 0,
            restarts: 3,
            persistence: fencing::Persistence::Off,
            missing: fencing::Missing::Clock,
            exclusion: false,
            ..fencing::BASE
        }),
    );
}

/// Negative control: restarts of a majority that lose the counter and set
/// the clock back (a host whose clock is reset at boot, or counters that
/// outgrew the clock): a fence repeats.
#[test]
fn a_restart_that_sets_the_clock_back_repeats_a_fence() {
    assert_found(
        "fencing: restarts losing the counter and setting the clock back",
        &Fencing(fencing::Config {
            extends: 0,
            restarts: 2,
            persistence: fencing::Persistence::Off,
            missing: fencing::Missing::ClockSetBack,
            exclusion: false,
            ..fencing::BASE
        }),
        40,
        repeats_a_fence,
    );
}

/// Negative control: a restart brings a counter back older (from a
/// snapshot taken before its last change), and an acquire reads it as it
/// is — the rule before the lift: a fence goes back (below one granted
/// before its commit began).
#[test]
fn a_counter_back_from_an_older_snapshot_repeats_a_fence() {
    assert_found(
        "fencing: restart from an older snapshot, counter read as stored",
        &Fencing(older_snapshots(1, fencing::Missing::ClockIfMissing)),
        30,
        repeats_a_fence,
    );
}

/// The configuration of the negative control above, the acquire reading
/// a counter never below the clock (`fence_check.lua`): fences stay unique
/// and ordered. (Two restarts, a majority's: 4.8 million states, about a
/// minute; three: 10 million, five minutes.)
#[test]
fn a_counter_back_from_an_older_snapshot_keeps_fences_unique_with_the_clock() {
    assert_safe(
        "fencing: 2 clients, restart from an older snapshot, clock",
        &Fencing(older_snapshots(1, fencing::Missing::Clock)),
    );
}

/// Two clients, `restarts` restarts that bring a counter back as it was
/// before its last change, the counter read as `missing` says.
fn older_snapshots(restarts: u8, missing: fencing::Missing) -> fencing::Config {
    fencing::Config {
        extends: 0,
        restarts,
        persistence: fencing::Persistence::Snapshot,
        missing,
        exclusion: false,
        ..fencing::BASE
    }
}

/// Negative control for exclusion: with an early expiry, the check finds
/// two holders (the checker can fail; fencing covers this case).
#[test]
fn early_expiry_breaks_exclusion() {
    assert_found(
        "fencing: exclusion checked under early expiry",
        &Fencing(fencing::Config {
            extends: 0,
            early_expiries: 1,
            ..fencing::BASE
        }),
        30,
        |v| *v == fencing::Violation::TwoHolders,
    );
}

// The lease model.

/// Extensions short and long, cancelled or not, in the order a connection
/// keeps; releases, lapses.
#[test]
fn lease_in_connection_order_holds_every_property() {
    assert_safe(
        "lease: 2 clients, 1 extension, connection order",
        &Lease(lease::Config {
            extends: 1,
            ..lease::base()
        }),
    );
}

/// A node never shortens a key, and the client's deadline moves only once
/// a majority confirmed: reconnects may reorder a client's requests on two
/// connections.
#[test]
fn lease_with_reordering_holds_every_property_under_the_keep_longer_rule() {
    assert_safe(
        "lease: 1 client, 3 extensions, 2 reconnects reorder, keep-longer rule",
        &Lease(lease::Config {
            clients: 1,
            extends: 3,
            overtakes: 2,
            ..lease::base()
        }),
    );
}

/// Negative control, the earlier extension rule (the key takes the new
/// TTL, the deadline is lowered before sending): a cancelled extension
/// that a later one overtakes leaves the keys shorter than the deadline.
#[test]
fn the_earlier_extension_rule_leaves_keys_short_of_the_deadline() {
    assert_found(
        "lease: the earlier extension rule, 2 reconnects reorder",
        &Lease(lease::Config {
            extends: 2,
            overtakes: 2,
            clients: 1,
            extend: ExtendScript::Pexpire,
            deadline: DeadlineRule::LowerThenReplace,
            ..lease::base()
        }),
        20,
        |v| matches!(v, lease::Violation::KeysShorterThanTheDeadline { .. }),
    );
}

/// Restarts that lose keys, with the quarantine: exclusion holds.
#[test]
fn lease_restarts_with_quarantine_keep_exclusion() {
    assert_safe(
        "lease: 2 clients, 2 restarts, quarantine",
        &Lease(lease::Config {
            extends: 0,
            restarts: 2,
            ..lease::base()
        }),
    );
}

/// Negative control: without the quarantine, a restart that loses a key
/// leaves the holder short of a majority at once, and lets a second client
/// in (with that first check off).
#[test]
fn without_quarantine_a_restart_lets_a_second_holder_in() {
    let config = lease::Config {
        extends: 0,
        restarts: 1,
        quarantine: false,
        ..lease::base()
    };
    assert_found(
        "lease: restart without quarantine",
        &Lease(config.clone()),
        8,
        |v| matches!(v, lease::Violation::KeysShorterThanTheDeadline { .. }),
    );
    assert_found(
        "lease: restart without quarantine, exclusion",
        &Lease(lease::Config {
            keys_last: false,
            ..config
        }),
        14,
        |v| *v == lease::Violation::TwoHolders,
    );
}

/// Five servers, restarts with the quarantine.
#[test]
fn lease_five_servers_with_restarts_hold_every_property() {
    assert_safe(
        "lease: 5 servers, 2 clients, 2 restarts, quarantine",
        &Lease(lease::Config {
            names: vec![0, 1, 2, 3, 4],
            extends: 0,
            lapse: false,
            restarts: 2,
            ..lease::base()
        }),
    );
}

/// Three clients, two of them fork-free, with reordering.
#[test]
fn lease_three_clients_hold_every_property() {
    assert_safe(
        "lease: 3 clients, releases and cleanups only",
        &Lease(lease::Config {
            clients: 3,
            extends: 0,
            lapse: false,
            ..lease::base()
        }),
    );
}

/// Negative control, the fork case: two clients drawing the same tokens;
/// the second one's cleanup deletes the first one's lock.
#[test]
fn colliding_tokens_delete_another_lock() {
    assert_found(
        "lease: tokens shared by two clients (fork)",
        &Lease(lease::Config {
            extends: 0,
            shared_tokens: true,
            ..lease::base()
        }),
        12,
        |v| matches!(v, lease::Violation::DeletedAnotherLock { .. }),
    );
}

/// Negative control: a plain `DEL` release deletes another lock.
#[test]
fn a_plain_del_release_deletes_another_lock() {
    assert_found(
        "lease: release as a plain DEL",
        &Lease(lease::Config {
            extends: 0,
            release: ReleaseScript::PlainDel,
            ..lease::base()
        }),
        16,
        |v| matches!(v, lease::Violation::DeletedAnotherLock { .. }),
    );
}

/// Negative control: an extension that re-creates an expired key leaves a
/// key behind once a release overtakes it.
#[test]
fn an_extension_that_recreates_a_key_leaves_it_behind() {
    assert_found(
        "lease: extension re-creating an absent key, 1 reconnect",
        &Lease(lease::Config {
            clients: 1,
            overtakes: 1,
            extend: ExtendScript::Recreate,
            ..lease::base()
        }),
        16,
        |v| matches!(v, lease::Violation::KeyLeftBehind { .. }),
    );
}

/// One server under two names, counted once (the `run_id` check): as
/// two servers.
#[test]
fn a_server_counted_once_holds_every_property() {
    assert_safe(
        "lease: one server under two names counted once (2 servers)",
        &Lease(lease::Config {
            names: vec![0, 1],
            extends: 2,
            ..lease::base()
        }),
    );
}

/// Negative control: one server under two names counted twice confirms an
/// extension on one server of two.
#[test]
fn a_server_counted_twice_confirms_an_extension_on_a_minority() {
    assert_found(
        "lease: one server under two names counted twice",
        &Lease(lease::Config {
            names: vec![0, 0, 1],
            extends: 1,
            ..lease::base()
        }),
        20,
        |v| matches!(v, lease::Violation::KeysShorterThanTheDeadline { .. }),
    );
}

/// What the fencing negative controls must find: a fence granted twice, or
/// out of commit order.
fn repeats_a_fence(v: &fencing::Violation) -> bool {
    matches!(v, fencing::Violation::Fence(_))
}

// The repair on renewal (docs/repair.md).

/// The repair: after an extension that reached a quorum in time, `SET NX`
/// where it found the key missing (the losers of a race left it free, or a
/// restart lost it). Exclusion and every other property hold.
#[test]
fn repair_with_set_nx_holds_every_property() {
    assert_safe(
        "lease: repair (SET NX), 2 clients, 1 extension",
        &Lease(lease::Config {
            repair: Repair::SetNx,
            ..lease::base()
        }),
    );
}

/// The repair with restarts and the quarantine: a restarted server is
/// repaired only once it votes again.
#[test]
fn repair_with_restarts_holds_every_property() {
    assert_safe(
        "lease: repair (SET NX), 1 restart, quarantine, 1 extension",
        &Lease(lease::Config {
            restarts: 1,
            repair: Repair::SetNx,
            ..lease::base()
        }),
    );
}

/// The configuration of the negative control below, with `SET NX`: a
/// second attempt per client lets a new lock meet a repair still in flight
/// after the repairing lock ended; `NX` leaves the new lock's keys alone.
/// 9.6 million states, about 13 minutes: run with `--ignored`.
#[test]
#[ignore = "9.6 million states (about 13 minutes): run with --ignored"]
fn repair_meeting_a_later_lock_holds_every_property() {
    assert_safe(
        "lease: repair (SET NX), 2 clients x 2 attempts, 1 long extension",
        &Lease(lease::Config {
            attempts: 2,
            ttls: &[lease::Ttl::Long],
            cancel: false,
            repair: Repair::SetNx,
            ..lease::base()
        }),
    );
}

/// Release against pending repairs: with `SET NX` as the library orders
/// it (no repair starts on a node once the release is on its way there,
/// and the release waits for a running one), a "missing" that arrives
/// after the release repairs nothing, and no key is ever left behind. The
/// negative control below is the same configuration without that order.
#[test]
fn a_release_is_never_overtaken_by_a_pending_repair() {
    assert_safe(
        "lease: repair (SET NX) ordered before the release, 2 clients, 1 long extension",
        &Lease(lease::Config {
            ttls: &[lease::Ttl::Long],
            repair: Repair::SetNx,
            ..lease::base()
        }),
    );
}

/// Negative control: a "missing" that reaches the holder after it released
/// still repairs — the key comes back behind the release, with nothing
/// left in flight to remove it.
#[test]
fn a_repair_after_the_release_leaves_a_key_behind() {
    let config = lease::Config {
        ttls: &[lease::Ttl::Long],
        repair: Repair::Unordered,
        ..lease::base()
    };
    assert_found("lease: repair after the release", &Lease(config), 30, |v| {
        matches!(v, lease::Violation::KeyLeftBehind { .. })
    });
}

/// Negative control: a repair sent as a plain `SET` (no `NX`) overwrites
/// a key that a later lock set there once the repairing lock ended, and
/// leaves that lock short of a majority.
#[test]
fn a_repair_without_nx_overwrites_another_lock() {
    let config = lease::Config {
        attempts: 2,
        ttls: &[lease::Ttl::Long],
        cancel: false,
        repair: Repair::PlainSet,
        ..lease::base()
    };
    assert_found("lease: repair with a plain SET", &Lease(config), 30, |v| {
        matches!(v, lease::Violation::KeysShorterThanTheDeadline { .. })
    });
}
