//! The lease lifecycle of a held lock, in one place.
//!
//! A lock is granted with a [`term`] — deadline, TTL and the TTL's drift
//! allowance, computed once where the TTL is set — kept in the shared
//! [`state`] (`Lease`) that the lock, its renewal task and every
//! [`LostSignal`] read. A confirmed extension moves the term
//! ([`term::Term::extended`]). [`Renewal`] settings resolve, for the
//! current term, into the pure [`schedule`], which the background [`task`]
//! follows: renew, wait, or fire the signal. The lock ends by release or
//! drop, by a failed extension, at expiry, or — without ending — the signal
//! warns that it can no longer be counted on or that renewal reached its
//! cap. Every way it ends has one vocabulary, in [`crate::error::lost`]: a
//! [`LostReason`](crate::LostReason) saying what happened, whose
//! [`kind`](crate::LostReason::kind) ([`LossKind`](crate::LossKind)) says
//! what it means; the signal moves through its kinds by
//! the rules of [`signal_state`].
//!
//! Only `mod` lines and re-exports live here: the files below refer to each
//! other directly, never through this one.

pub(crate) mod renewal;
pub(crate) mod schedule;
pub(crate) mod signal;
pub(crate) mod signal_state;
pub(crate) mod state;
pub(crate) mod task;
pub(crate) mod term;

pub use renewal::Renewal;
pub use signal::LostSignal;
