//! The use cases the front ends share: `cmd` (the CLI), `hook` (the agents' hooks) and `mcp`
//! (the agents' tools) each call these rather than each other.

pub mod brief;
pub mod checkpoint;
pub mod commits;
pub mod memory;
pub mod reservations;
pub mod sessions;
pub mod why;
pub mod workspace;
