//! Background jobs of a server instance.

pub mod backfill;
pub mod reaper;
pub mod retention;
pub mod search;
