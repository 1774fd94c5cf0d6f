//! Cursor: its hooks (a flat list, `version` 1), the MCP server's entry and the CLI's allow
//! rule, and how its hooks and Claude Code's (which Cursor also runs) stay out of each other's
//! way. Cursor has no headless run for summaries and no resume command.

use std::path::{Path, PathBuf};

use super::files::home;
use super::mcp::Files;
use super::{Hook, Scope};

pub const HOOKS: &[Hook] = &[
    Hook::new("sessionStart", None, 10),
    Hook::new("beforeShellExecution", None, 10),
    Hook::new("postToolUse", None, 10),
    Hook::new("preCompact", None, 10),
    Hook::new("stop", None, 10),
    Hook::new("sessionEnd", None, 5),
];

pub fn settings_file(scope: Scope, project_root: &Path) -> anyhow::Result<PathBuf> {
    Ok(match scope {
        Scope::User => home()?.join(".cursor/hooks.json"),
        Scope::Project => project_root.join(".cursor/hooks.json"),
    })
}

/// Cursor CLI's rule for every tool of the server.
pub const MCP_RULE: &str = "Mcp(baton:*)";

pub fn mcp_files(scope: Scope, root: &Path) -> anyhow::Result<Files> {
    Ok(match scope {
        Scope::User => Files {
            server: home()?.join(".cursor/mcp.json"),
            permission: home()?.join(".cursor/cli-config.json"),
        },
        Scope::Project => {
            Files { server: root.join(".cursor/mcp.json"), permission: root.join(".cursor/cli.json") }
        }
    })
}

/// Cursor runs Claude Code's hooks too; when Baton's own Cursor hooks are installed, the
/// Claude ones stand down so nothing runs twice. `toplevel`: the repository `cwd` is in.
pub fn runs_its_own_hooks(cwd: &Path, toplevel: impl FnOnce() -> Option<PathBuf>) -> bool {
    if std::env::var_os("CURSOR_VERSION").is_none() {
        return false;
    }
    let mut files = vec![cwd.join(".cursor/hooks.json")];
    if let Some(root) = toplevel() {
        files.push(root.join(".cursor/hooks.json"));
    }
    if let Ok(home) = home() {
        files.push(home.join(".cursor/hooks.json"));
    }
    files.iter().any(|f| std::fs::read_to_string(f).is_ok_and(|t| t.contains("baton hook cursor")))
}
