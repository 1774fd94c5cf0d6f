//! One file per page: its query, its handler, its template's data.

pub mod activity;
pub mod overview;
pub mod sessions;
