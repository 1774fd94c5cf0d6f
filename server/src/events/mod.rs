//! Change delivery: one reader per watched project reads new event rows and fans them out
//! to that project's watchers; each watcher replays from the table, then follows live.

mod all;
mod hub;
pub mod instances;
mod wakers;
mod watch;

pub use all::watch_all;
pub use hub::Hub;
pub use instances::Instances;
pub use wakers::{Hold, Wakers};
pub use watch::{Delivery, Watch, watch};
