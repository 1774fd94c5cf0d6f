//! A test file system that forgets what was not synced, as a power cut does (issue 47): the
//! model of its volatile and durable states (`model`). The FUSE layer that serves a mount from
//! it, and the power-loss cycles that run the server and the client on such a mount, build on
//! this.

pub mod data;
pub mod fuse;
pub mod model;
pub mod users;
