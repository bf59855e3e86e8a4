//! The pass's features, one folder each: its pure decide (`mod.rs`, table-tested beside it) and,
//! where it writes on its own, its act (`act.rs`). The pass's steps (`steps.rs`) call them; a
//! feature imports from the core (`decide`, `gate`, `mark`, `observation`, `pods`) and never the
//! other way round but through those steps, `decisions.rs`, `act.rs` and `upkeep.rs`.

pub mod autoscale;
pub mod blocks;
pub mod canary;
pub mod checks;
pub mod controllers_roll;
pub mod decrees;
pub mod per_node;
pub mod probe;
pub mod sync;
pub mod windows;
