//! What carrying out one action of a pass came to, as `act`'s loop reads it: written (and its
//! Event), skipped, noted (the next action goes on), or stopped by Slurm. Its own file so that
//! the features' acts can answer it without importing `act`.

use crate::rollout::Event;
use crate::slurm::SlurmError;

/// What carrying out one action tells the loop of `act`.
pub(crate) enum Written {
    /// It wrote: the event is told and recorded.
    Wrote(Event),
    /// Nothing written (gone, unknown, or already so): the next action.
    Skipped,
    /// Slurm refused a worker its block: noted, the next action.
    Unplaced(String),
    /// A canary's script could not be read: noted, the next action.
    CanaryError(String),
    /// A maintenance reservation could not be made or asked for: noted, the next action.
    ReservationError(String),
    /// A Slurm error: noted, and the rest waits for the next pass.
    Stopped(SlurmError),
}
