//! What every command file uses (cargo's `command_prelude`): the shared flags, the outcome and
//! its error, and the library calls' module.

pub use std::path::PathBuf;

pub use super::args::{Format, KubeArgs, Output, SlurmArgs, WatchArgs};
pub use super::guard::GuardArgs;
pub use super::{CliError, Outcome, Success};
pub use crate::ops;
