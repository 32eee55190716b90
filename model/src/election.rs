//! Leader election, as configurations of the fencing model
//! ([`crate::fencing`]).
//!
//! A leader is a holder of a fenced mutex on the election key, and its
//! epoch is the fence its campaign committed: a campaign is a lock
//! attempt, a failed one is retried (the next attempt), resigning is a
//! release, and a leadership whose validity ends is lost. So the fencing
//! model checks election as it stands, with campaigns retried by each
//! client so that leaders succeed one another:
//!
//! - epochs are unique across leaders, and a leadership whose campaign's
//!   commit began after another leader was granted has a larger epoch —
//!   under message reordering, give-ups, early expiry (a clock jump) and
//!   restarts that keep the counter ([`epochs`]);
//! - with no fault, no two leaders inside validity at once ([`leaders`]).
//!
//! Negative controls: an epoch taken as the largest `INCR` reply of a
//! majority, with no commit ([`Rule::IncrMax`], in
//! [`incr_epochs`]), and a restart that loses the counter
//! ([`forgetful_epochs`]).
//!
//! What observers read (the leader's value, the stream of changes) is not
//! modelled: it carries no promise beyond the epoch's.

use crate::fencing::{Config, Rule};

/// Campaigns (attempts) per candidate in every configuration.
pub const CAMPAIGNS: u8 = 2;

/// Two candidates campaigning [`CAMPAIGNS`] times each, with the faults
/// given, checking epochs only.
pub fn epochs(early_expiries: u8, restarts: u8) -> Config {
    Config {
        clients: 2,
        attempts: CAMPAIGNS,
        extends: 0,
        early_expiries,
        restarts,
        persistent_counter: true,
        rule: Rule::RaiseFromBelow,
        exclusion: false,
    }
}

/// `candidates` campaigning [`CAMPAIGNS`] times each with no fault,
/// checking that no two lead at once as well.
pub fn leaders(candidates: u8) -> Config {
    Config {
        clients: candidates,
        exclusion: true,
        ..epochs(0, 0)
    }
}

/// Negative control: epochs from `INCR` replies, no commit, no fault.
pub fn incr_epochs() -> Config {
    Config {
        rule: Rule::IncrMax,
        ..epochs(0, 0)
    }
}

/// Negative control: one restart that loses the counter.
pub fn forgetful_epochs() -> Config {
    Config {
        persistent_counter: false,
        ..epochs(0, 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configurations_differ_only_where_named() {
        assert!(!epochs(1, 1).exclusion && leaders(3).exclusion);
        assert_eq!(leaders(3).clients, 3);
        assert_eq!(incr_epochs().rule, Rule::IncrMax);
        let forgetful = forgetful_epochs();
        assert!(!forgetful.persistent_counter && forgetful.restarts == 1);
        assert_eq!(epochs(0, 0).attempts, CAMPAIGNS);
    }
}
