//! slurmops: a Slurm cluster on Kubernetes, described by one cluster.yaml in git.
//!
//! The pipeline reads top to bottom, one module per stage, each importing only from those before
//! it (`tests/offline/structure.rs`): `source` (read cluster.yaml from a directory or a git
//! revision) → `cluster` (parse and validate the cluster file) → `render` (pure: the cluster →
//! Kubernetes objects and Slurm configs) → `guarded` (pure: the install's closed policy, checked
//! on what render made; `source::admit` runs it for every command and the daemon) → `plan` (pure: diff two renderings) → `apply`
//! (server-side apply, inventory, prune, drift) → `rollout` (the order workers drain in, what a
//! rollout reports) → `controller` (one level-triggered pass — observe, decide, act, return — for
//! the daemon and every command that writes: rollouts, worker sync and autoscale are its
//! decisions) → `status` (the status ConfigMap and what it shows) → `daemon` → `cli`. Below them
//! all: `vocab` (every name users see), `k8s`, `events` (Kubernetes Events), and `slurm`, the edge
//! to slurmrestd.

pub mod accounting;
pub mod apply;
pub mod bench;
pub mod cli;
pub mod cluster;
pub mod controller;
pub mod daemon;
pub mod events;
pub mod guarded;
pub mod import;
pub mod k8s;
pub mod net;
pub mod ops;
pub mod plan;
pub mod render;
pub mod rollout;
pub mod slurm;
pub mod source;
pub mod status;
pub mod text;
pub mod vocab;
