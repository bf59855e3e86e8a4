//! `slurmops install --print`: the daemon's own objects — ServiceAccount, the least-privilege Role
//! and RoleBinding (the same rules the tests run every command under), the ClusterRole that lets
//! it read Nodes (to follow cordons), a Deployment of non-root, read-only replicas with leader
//! election, and a Service for webhooks and metrics.
//!
//! As installed, the daemon talks to Slurm: it reaches the slurmrestd Service each cluster.yaml
//! renders and mints short-lived tokens from that cluster's JWT key Secret (the one Secret the
//! Role lets it `get`, by name); no token is ever put on its command line. Commit signatures are
//! verified when allowed keys are given (ConfigMaps); without them the output says loudly that
//! any commit pushed to the branch is applied.

mod deployment;
mod image;
mod objects;
mod settings;

pub use image::default_image;
pub use objects::objects;
pub use settings::{
    Install, NAME, PEAK_BASE_MIB, PEAK_PER_TEN_THOUSAND_JOBS_MIB, PEAK_PER_THOUSAND_MIB,
    UNSIGNED_WARNING, Widened, memory_limit_mib, node_reader_name,
};
pub(super) use settings::{labels, meta};

#[cfg(test)]
pub(super) mod tests;
