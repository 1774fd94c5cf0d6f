//! The hub: the connection to the server, paged lists, transcript chunks and search.

pub mod blob;
pub mod pages;
pub mod remote;
pub mod search;
