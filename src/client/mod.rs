//! The client's construction: the [`Builder`] (`builder.rs`) takes the
//! nodes ([`IntoNode`], `nodes.rs`: every address — a server's, a
//! Sentinel group's, a Redis Cluster's — parsed, shown and checked, all in
//! that file), checks the settings and connects the nodes into a
//! [`Redlock`](crate::Redlock).

mod builder;
mod nodes;

pub use builder::Builder;
pub use nodes::{IntoNode, NodeSource};
