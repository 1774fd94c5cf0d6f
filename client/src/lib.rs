//! Baton's client: agent hooks, warmup briefs, checkpoints, resume and the offline queue.

pub mod agents;
pub mod ancestry;
pub mod blob;
pub mod cache;
pub mod cmd;
pub mod codex_trust;
pub mod config;
pub mod fsperm;
pub mod git;
pub mod hook;
pub mod install;
pub mod mcp;
pub mod pages;
pub mod project;
pub mod queue;
pub mod remote;
pub mod remotes;
pub mod safe;
pub mod search;
pub mod state;
pub mod summary;
pub mod view;
pub mod write;

use crate::config::Settings;

/// What every command works with.
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

/// Clips at a char boundary, marking the cut.
pub fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Keeps whole lines of `text` within `max` characters.
pub fn fit_lines(text: &str, max: usize) -> String {
    let mut out = String::new();
    let mut used = 0;
    for line in text.lines() {
        let cost = line.chars().count() + 1;
        if used + cost > max {
            break;
        }
        out.push_str(line);
        out.push('\n');
        used += cost;
    }
    out
}

/// "3m"-style age of a duration in µs.
pub fn ago(us: i64) -> String {
    let s = us.max(0) / 1_000_000;
    match s {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86_400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

/// `n` with the noun in the number it takes: "1 session", "3 sessions", "0 sessions".
pub fn count<N: std::fmt::Display + TryInto<u64> + Copy>(n: N, one: &str, many: &str) -> String {
    let singular = n.try_into().ok() == Some(1);
    format!("{n} {}", if singular { one } else { many })
}

/// Whether an executable `command` is on PATH.
pub fn on_path(command: &str) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).any(|dir| {
        std::fs::metadata(dir.join(command)).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}
