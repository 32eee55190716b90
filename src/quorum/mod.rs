//! How the nodes decide together.

pub(crate) mod attempt;
pub(crate) mod background;
pub(crate) mod claim;
pub(crate) mod election;
pub(crate) mod engine;
pub(crate) mod fanout;
pub(crate) mod handoff;
pub(crate) mod held;
pub(crate) mod queue;
pub(crate) mod read;
pub(crate) mod remote_check;
pub(crate) mod repair;
pub(crate) mod retry;
pub(crate) mod rule;
pub(crate) mod set_order;
pub(crate) mod slots;
