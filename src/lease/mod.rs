//! The lease lifecycle of a held lock, in one place.
//!
//! A lock is granted with a term — its deadline and its TTL with the TTL's
//! drift allowance ([`crate::validity::Term`], the drift computed once
//! where the TTL is checked) — kept in the shared [`state`] (`Lease`) that
//! the lock, its renewal task and every [`LostSignal`] read. A confirmed
//! extension moves the term ([`crate::validity::Term::extended`]).
//! [`Renewal`] settings resolve, for the current TTL, into the pure
//! [`schedule`], which the background task ([`renewal`]) follows: renew,
//! wait, or fire the signal. The lock ends by release or drop, by a failed
//! extension, at expiry, or — without ending — the signal warns that it can
//! no longer be counted on or that renewal reached its cap. Every way it
//! ends has one vocabulary, in `error::lost`: a [`LostReason`](crate::LostReason) saying what
//! happened, whose [`kind`](crate::LostReason::kind) ([`LossKind`](crate::LossKind)) says what it
//! means; the signal moves through its kinds by the rules of
//! [`state::SignalState`].
//!
//! Only `mod` lines and re-exports live here: the files below refer to each
//! other directly, never through this one.

pub(crate) mod renewal;
pub(crate) mod schedule;
pub(crate) mod signal;
pub(crate) mod state;

pub use renewal::Renewal;
pub use signal::LostSignal;
