//! The client's construction: the [`Builder`] (`builder.rs`) takes the
//! nodes ([`IntoNode`], `nodes.rs`: a node's address parsed, shown and
//! checked, all in that file; a Sentinel group's or a Redis Cluster's
//! addresses in `members.rs`), checks the settings and connects the nodes
//! into a [`Redlock`](crate::Redlock), whose readiness is [`Health`]
//! (`health.rs`).

mod builder;
mod health;
mod members;
mod nodes;

pub use builder::Builder;
pub use health::{Health, HealthState, NodeHealth};
pub use nodes::{IntoNode, NodeSource};
