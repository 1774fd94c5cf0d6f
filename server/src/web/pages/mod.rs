//! One file per page: its query, its handler, its template's data.

pub mod activity;
pub mod admin;
pub mod brief;
pub mod commit;
pub mod compare;
pub mod logs;
pub mod memory;
pub mod overview;
pub mod reservations;
pub mod search;
pub mod session;
pub mod sessions;
