//! What slurmops reads from Slurm, typed, and the wire shapes of slurmrestd's data parsers.
//! Every version-specific detail lives here. v0.0.42 to v0.0.45 (Slurm 24.11 serves 40-42, 26.05
//! serves 42-45) agree on the fields slurmops uses: node `state` is a list of upper-case flags,
//! numbers may come as `{set, infinite, number}` objects, job `nodes` is a hostlist expression.
//! What differs: v0.0.43 adds a node's `topology` (`name:unit`), v0.0.45 drops ping's `pinged` and
//! `mode` (both optional here). v0.0.40 and v0.0.41 are not spoken: every supported Slurm serves
//! v0.0.42, and 26.05 no longer serves the older two.

mod data_parser;
mod job;
mod node;
mod reservation;
mod wire;

pub use super::words::Word;
pub use data_parser::DataParser;
pub use job::{Job, JobRequest, state_word};
pub use node::{Node, NodeState};
pub use reservation::{Reservation, ReservationRequest};
pub use wire::{
    ApiMessage, Envelope, JobWire, JobsWire, NodeWire, NodesWire, ReservationWire, ReservationsWire,
};

#[cfg(test)]
mod tests;
