//! The operation a node's vote belongs to: a leaf shared by the counters
//! of `stats` and the series of `metrics`, so neither imports the other's
//! caller.

/// The operation a vote belongs to.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Op {
    Acquire,
    Extend,
    Release,
}
