//! Baton's client: agent hooks, the MCP server, warmup briefs, checkpoints, memory, search,
//! resume and the offline queue.
//!
//! Modules depend one way down (docs/architecture.md, The client; `tests/layout.rs` keeps
//! them free of cycles): the front ends `cmd`, `hook` and `mcp` never call each other; they
//! call the shared use cases in `usecase` and any layer below: `ctx`, `outbox` (send or
//! queue), `hub` (the server), `project` (identity and git), `config`, `agents` (each
//! agent's hooks, files, transcripts and summaries), `local` (this machine's records), and
//! at the bottom `view`, `safe`, `text`, `clock`, `fsperm` and `host`.

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
