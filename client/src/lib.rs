//! Baton's client: agent hooks, warmup briefs, checkpoints, resume and the offline queue.
//!
//! Modules depend one way down (docs/architecture.md, The client; `tests/layout.rs` keeps it
//! so): the front ends `cmd`, `hook` and `mcp` call the shared use cases in `usecase`, which
//! work through `ctx`, `outbox` (send or queue), `hub` (the server), `local` (this machine's
//! records), `project` (identity and git), `agents` (everything known about each agent) and
//! `config`, over the leaves `text`, `clock`, `safe`, `fsperm`, `host` and `view`.

pub mod agents;
pub mod clock;
pub mod cmd;
pub mod config;
pub mod ctx;
pub mod fsperm;
pub mod hook;
pub mod host;
pub mod hub;
pub mod local;
pub mod mcp;
pub mod outbox;
pub mod project;
pub mod safe;
pub mod text;
pub mod usecase;
pub mod view;
