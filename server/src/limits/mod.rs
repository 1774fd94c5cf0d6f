//! Per-request limits that protect the server and keep one caller from affecting others:
//! request sizes per message kind, request rates per token (and authentication attempts per
//! client address), watch streams and searches per token.

pub mod conn;
pub mod rate;
pub mod size;
pub mod slots;

pub use size::{SizeLimitLayer, SizeLimits};
pub use slots::{SEARCHES, Slot, Slots, WATCHES};
