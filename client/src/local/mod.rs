//! What the client keeps on this machine: each conversation's record and journal, and the
//! last brief per project for when the hub cannot be reached.

pub mod cache;
pub mod journal;
pub mod reserved;
pub mod state;
