//! One file per page: its query, its handler, its template's data.

pub mod activity;
pub mod compare;
pub mod memory;
pub mod overview;
pub mod session;
pub mod sessions;
