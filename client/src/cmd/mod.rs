//! The human commands, one file each.

pub mod checkpoints;
pub mod doctor;
pub mod events;
pub mod githook;
pub mod init;
pub mod memory;
pub mod postcommit;
pub mod precommit;
pub mod reservations;
pub mod resume;
pub mod search;
pub mod sessions;
pub mod status;
pub mod sync;
pub mod threads;
pub mod warmup;
pub mod why;
pub mod words;
