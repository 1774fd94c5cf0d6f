//! Baton's own rules, pure and unit-tested: no I/O here. Both storage backends and every
//! RPC share them, so SQLite and Postgres can only differ in SQL.

pub mod access;
pub mod blobs;
pub mod brief;
pub mod checkpoint;
pub mod chunk;
pub mod commit;
pub mod conflict;
pub mod head;
pub mod items;
pub mod lww;
pub mod memory;
pub mod packed;
pub mod page;
pub mod purge;
pub mod reservation;
pub mod resume;
pub mod retention;
pub mod search;
pub mod set_item;
pub mod status;
pub mod thread;
pub mod time;
pub mod tree;
pub mod validate;

/// Secret redaction, shared with the client (it lives in `baton-proto` so both apply the
/// same patterns).
pub use baton_proto::redact;
