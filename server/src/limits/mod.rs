//! Per-request limits that protect the server and keep one caller from affecting others:
//! request sizes per message kind, request rates per token, watch streams per token.

pub mod rate;
pub mod size;
pub mod watch;

pub use rate::RateLimitLayer;
pub use size::{SizeLimitLayer, SizeLimits};
pub use watch::{Slot, WatchSlots};
