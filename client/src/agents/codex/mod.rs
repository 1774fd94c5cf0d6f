//! Codex: its hooks (which run only once trusted: `trust`), the MCP server's table in
//! `config.toml` (`mcp`), and where its rollouts live and how one is restored. Codex writes
//! no summaries: it cannot be run without tools.

pub mod mcp;
pub mod trust;

use std::path::{Path, PathBuf};

use baton_proto::v1::BlobRef;

use super::files::{find_under, home, rehomed, write_whole};
use super::mcp::Files;
use super::{Hook, Scope};

pub const HOOKS: &[Hook] = &[
    Hook::new("SessionStart", Some("startup|resume|clear|compact"), 10),
    Hook::new("UserPromptSubmit", None, 10),
    Hook::new("PreToolUse", None, 10),
    Hook::new("PostToolUse", None, 10),
    Hook::new("PreCompact", Some("manual|auto"), 10),
    Hook::new("PostCompact", None, 10),
    Hook::new("Stop", None, 10),
    // Codex caps SessionEnd at 3 s; the work is detached anyway.
    Hook::new("SessionEnd", None, 3),
];

pub fn settings_file(scope: Scope, project_root: &Path) -> anyhow::Result<PathBuf> {
    Ok(match scope {
        Scope::User => codex_home(&home()?).join("hooks.json"),
        Scope::Project => project_root.join(".codex/hooks.json"),
    })
}

/// The server's table and its approval are both in `config.toml`.
pub fn mcp_files(scope: Scope, root: &Path) -> anyhow::Result<Files> {
    let file = match scope {
        Scope::User => trust::config_file(&home()?),
        Scope::Project => root.join(".codex/config.toml"),
    };
    Ok(Files { server: file.clone(), permission: file })
}

/// Why Codex writes no summaries: a summary is written with no tools at all.
pub const NO_SUMMARY: &str = "Codex cannot be run without tools: with every tool feature, web search and MCP off, \
     `codex exec` still offers its model request_user_input and apply_patch; use claude or gemini";

/// Codex's home (`CODEX_HOME`, else `~/.codex`).
pub fn codex_home(home: &Path) -> PathBuf {
    std::env::var_os("CODEX_HOME").map_or_else(|| home.join(".codex"), PathBuf::from)
}

/// The rollout of a Codex conversation on this machine, if any.
pub fn rollout(home: &Path, id: &str) -> Option<PathBuf> {
    let suffix = format!("-{id}.jsonl");
    find_under(&codex_home(home).join("sessions"), &|n| n.starts_with("rollout-") && n.ends_with(&suffix), 4)
}

/// Writes a Codex rollout where `codex resume <id>` finds it on this machine, with the old
/// project path rewritten: over the conversation's rollout if this machine has one (Codex's
/// index then still points at it), else under today's folder of `sessions/` (Codex finds a
/// conversation it does not know by the id in the file's name). Returns the file written.
pub fn restore(data: &[u8], blob: &BlobRef, cwd: &Path, home: &Path) -> anyhow::Result<PathBuf> {
    let id = crate::safe::agent_session_id(&blob.agent_session_id)?;
    let file = if let Some(existing) = rollout(home, id) {
        existing
    } else {
        let now = chrono::Local::now();
        codex_home(home)
            .join("sessions")
            .join(now.format("%Y/%m/%d").to_string())
            .join(format!("rollout-{}-{id}.jsonl", now.format("%Y-%m-%dT%H-%M-%S")))
    };
    write_whole(&file, &rehomed(data, blob, cwd))?;
    Ok(file)
}
