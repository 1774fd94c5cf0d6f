//! Background jobs of a server instance.

pub mod reaper;
pub mod retention;
