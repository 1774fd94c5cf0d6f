//! Per-request limits that protect the server and keep one caller from affecting others:
//! request sizes per message kind, request rates per token (and authentication attempts per
//! client address), watch streams per token.

pub mod conn;
pub mod rate;
pub mod size;
pub mod watch;

pub use size::{SizeLimitLayer, SizeLimits};
pub use watch::{Slot, WatchSlots};
