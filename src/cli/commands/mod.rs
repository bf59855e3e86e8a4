//! One file per command: its flags and a thin `exec` over a library call in `crate::ops`.

pub mod apply;
pub mod autoscale;
pub mod bench;
pub mod completion;
pub mod import;
pub mod install;
pub mod man;
pub mod plan;
pub mod render;
pub mod rollout;
pub mod run;
pub mod schema;
pub mod slurm;
pub mod status;
pub mod sync;
pub mod validate;
