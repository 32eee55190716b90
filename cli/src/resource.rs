//! The RESOURCE argument that `run` and `status` share.

use clap::Args;

/// The lock's name: positional, or through `--resource` for a name that
/// begins with `-`.
#[derive(Args, Debug)]
pub struct ResourceArg {
    /// The lock's name, for a name that begins with `-`.
    #[arg(
        long = "resource",
        value_name = "RESOURCE",
        allow_hyphen_values = true,
        conflicts_with = "resource"
    )]
    pub resource_flag: Option<String>,
    /// The lock's name (the Redis key).
    #[arg(required_unless_present = "resource_flag")]
    pub resource: Option<String>,
}

impl ResourceArg {
    /// The name given, whichever way (clap requires one of the two).
    pub fn name(&self) -> String {
        self.resource_flag
            .clone()
            .or_else(|| self.resource.clone())
            .unwrap_or_default()
    }
}
