//! What every command, hook and MCP tool works with: the settings, the outbox's queue and the
//! local conversation records.

use std::io::Write as _;

use crate::config::Settings;
use crate::local::state;
use crate::outbox::queue;

pub struct Ctx {
    pub settings: Settings,
    pub queue: queue::Queue,
    pub state: state::Store,
}

impl Ctx {
    pub fn new(settings: Settings) -> Self {
        let queue = queue::Queue::new(&settings.data_dir);
        let state = state::Store::new(&settings.data_dir);
        Self { settings, queue, state }
    }
}

/// Appends a line to the client's own log, `hook.log` in the data directory: an agent shows
/// a hook's stderr to nobody.
pub fn log(ctx: &Ctx, line: &str) {
    let path = ctx.settings.data_dir.join("hook.log");
    let _ = crate::fsperm::create_private_dir(&ctx.settings.data_dir);
    // Keep the log small: start over past 1 MiB.
    if std::fs::metadata(&path).is_ok_and(|m| m.len() > 1024 * 1024) {
        let _ = std::fs::rename(&path, path.with_extension("log.old"));
    }
    if let Ok(mut f) = crate::fsperm::open_private(&path, true) {
        let _ = writeln!(f, "{} {line}", chrono::Utc::now().to_rfc3339());
    }
}
