//! The human commands, one file each.

pub mod status;
pub mod sync;
pub mod warmup;
