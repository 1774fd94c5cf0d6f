//! Writes to the hub: sent now, or queued on disk and sent in order when the hub answers.

pub mod queue;
pub mod write;
