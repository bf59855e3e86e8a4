//! slurmops: a Slurm cluster on Kubernetes, described by one cluster.yaml in git.
//!
//! The pipeline reads top to bottom, one module per stage:
//! `source` (read cluster.yaml from a directory or a git revision) → `cluster` (parse and validate the cluster file)
//! → `render` (pure: the cluster → Kubernetes objects and Slurm configs) → `plan` (pure: diff two
//! renderings) → `apply` (server-side apply, inventory, prune, drift) → `rollout` (drain through
//! Slurm, replace pods), `autoscale` (replicas from Slurm's queue) and `sync` (Slurm state on pods,
//! cordons into drains) → `status` (Events). `controller` runs them as one level-triggered pass
//! (observe, decide, act, return) for the daemon and for `apply`.
//! `slurm` is the edge to slurmrestd; `cli` wires the stages to files, git,
//! the cluster and the terminal.

pub mod accounting;
pub mod apply;
pub mod autoscale;
pub mod bench;
pub mod cli;
pub mod cluster;
pub mod controller;
pub mod daemon;
pub mod events;
pub mod import;
pub mod k8s;
pub mod net;
pub mod plan;
pub mod render;
pub mod rollout;
pub mod slurm;
pub mod source;
pub mod status;
pub mod sync;
pub mod text;
pub mod vocab;
