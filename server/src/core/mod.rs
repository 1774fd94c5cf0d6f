//! Baton's own rules, pure and unit-tested: no I/O here. Both storage backends and every
//! RPC share them, so SQLite and Postgres can only differ in SQL.

pub mod brief;
pub mod checkpoint;
pub mod lww;
pub mod memory;
pub mod redact;
pub mod status;
pub mod validate;
