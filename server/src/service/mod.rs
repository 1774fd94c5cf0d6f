//! Use cases: each reads through a store transaction, asks `core` what to do, and has the
//! store apply it (docs/architecture.md, Layers: api → service → core, store below). One
//! file per use case; `write` holds what every write shares.

pub mod brief;
pub mod checkpoint;
pub mod commit;
pub mod export;
pub mod import;
pub mod index;
pub mod items;
pub mod log;
pub mod memory;
pub mod memory_cache;
pub mod purge;
pub mod reservation;
pub mod resume;
pub mod retention;
pub mod search;
pub mod session;
pub mod thread;
pub mod tokens;
pub(crate) mod write;
