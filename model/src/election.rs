//! Leader election, as configurations of the fencing model
//! ([`crate::fencing`]).
//!
//! A leader is a holder of a fenced mutex on the election key, and its
//! epoch is the fence its campaign committed: a campaign is a lock
//! attempt, a failed one is retried (the next attempt), resigning is a
//! release, and a leadership whose validity ends is lost. So the fencing
//! model checks election as it stands, a leadership renewing itself (an
//! extension):
//!
//! - epochs are unique across leaders, and a leadership whose campaign's
//!   commit began after another leader was granted has a larger epoch —
//!   under message reordering, give-ups, early expiry (a clock jump) and
//!   restarts that keep the counter ([`epochs`]), and through a restart
//!   that loses it, the counter starting again from the clock
//!   ([`epochs_after_lost_counters`]);
//! - with no fault, no two leaders inside validity at once ([`leaders`]).
//!
//! The fencing model's own configurations check the same with three
//! clients; these are the ones named for election.
//!
//! Negative controls: an epoch taken as the largest `INCR` reply of a
//! majority, with no commit ([`Rule::IncrMax`], in
//! [`incr_epochs`]), and a restart that loses the counter, which starts
//! again from 0 ([`forgetful_epochs`]).
//!
//! What observers read (the leader's value, the stream of changes) is not
//! modelled: it carries no promise beyond the epoch's.

use crate::fencing::{Config, Missing, Persistence, Rule};

/// Two candidates campaigning once each, renewing once, with one early
/// expiry and one restart that keeps the counter: epochs only (exclusion
/// is not promised under these faults).
pub fn epochs() -> Config {
    Config {
        clients: 2,
        attempts: 1,
        extends: 1,
        early_expiries: 1,
        restarts: 1,
        persistence: Persistence::Aof,
        missing: Missing::Zero,
        rule: Rule::RaiseFromBelow,
        exclusion: false,
    }
}

/// Two candidates, no fault: no two leaders at once, and epochs.
pub fn leaders() -> Config {
    Config {
        early_expiries: 0,
        restarts: 0,
        exclusion: true,
        ..epochs()
    }
}

/// Negative control: epochs from `INCR` replies with no commit; two
/// candidates campaigning twice each (successive leaders), no fault.
pub fn incr_epochs() -> Config {
    Config {
        attempts: 2,
        extends: 0,
        rule: Rule::IncrMax,
        ..leaders()
    }
}

/// Two candidates campaigning once each, renewing once, and a restart that
/// loses the counter, which starts again from the clock: the configuration
/// of [`forgetful_epochs`] with the clock, and a renewal. (Two restarts: 6
/// million states; three: 16 million, six minutes. The fencing model's
/// configuration without the renewal restarts every node.)
pub fn epochs_after_lost_counters() -> Config {
    Config {
        early_expiries: 0,
        restarts: 1,
        persistence: Persistence::Off,
        missing: Missing::Clock,
        ..epochs()
    }
}

/// Negative control: one restart that loses the counter, which starts
/// again from 0.
pub fn forgetful_epochs() -> Config {
    Config {
        extends: 0,
        early_expiries: 0,
        persistence: Persistence::Off,
        ..epochs()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configurations_differ_only_where_named() {
        assert!(!epochs().exclusion && leaders().exclusion);
        assert_eq!(leaders().early_expiries + leaders().restarts, 0);
        assert_eq!(incr_epochs().rule, Rule::IncrMax);
        assert_eq!(incr_epochs().attempts, 2);
        let forgetful = forgetful_epochs();
        assert!(forgetful.persistence == Persistence::Off && forgetful.restarts == 1);
        assert_eq!(forgetful.missing, Missing::Zero);
        assert_eq!(epochs_after_lost_counters().missing, Missing::Clock);
        assert_eq!(epochs().rule, Rule::RaiseFromBelow);
    }
}
