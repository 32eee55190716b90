//! The read–write lock model's configurations (3 nodes, 2 readers and 1
//! writer; a second writer too): each prints its state count (and, for the
//! negative control, the counterexample's trace) on stderr.
//!
//! Negative control: a reader that checks for a writer and adds its entry
//! in two separate quorum steps holds beside a writer.

use quorumlock_model::rwlock::{self, Design, Rw, Violation};
use quorumlock_model::search::{assert_found, assert_safe};

#[test]
fn rwlock_script_never_lets_a_writer_hold_beside_anyone() {
    assert_safe("rwlock: script, 2 readers + 1 writer", &Rw(rwlock::BASE));
}

#[test]
#[ignore = "3 million states (about 60 s): run with --ignored"]
fn rwlock_script_never_lets_a_writer_hold_beside_anyone_across_attempts() {
    assert_safe(
        "rwlock: script, 2 readers + 1 writer x 2 attempts",
        &Rw(rwlock::Config {
            attempts: 2,
            ..rwlock::BASE
        }),
    );
}

#[test]
fn rwlock_script_keeps_two_writers_apart_beside_a_reader() {
    assert_safe(
        "rwlock: script, 1 reader + 2 writers",
        &Rw(rwlock::Config {
            readers: &[true, false, false],
            ..rwlock::BASE
        }),
    );
}

#[test]
fn rwlock_two_steps_let_a_reader_hold_beside_a_writer() {
    assert_found(
        "rwlock: two steps (negative control), 2 readers + 1 writer",
        &Rw(rwlock::Config {
            design: Design::TwoSteps,
            ..rwlock::BASE
        }),
        20,
        |v| matches!(v, Violation::Overlap { .. }),
    );
}
