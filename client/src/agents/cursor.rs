//! Cursor: its hooks (a flat list, `version` 1), the MCP server's entry and the CLI's allow
//! rule, and how its hooks and Claude Code's (which Cursor also runs) stay out of each other's
//! way. Cursor has no headless run for summaries and no resume command.

use std::path::{Path, PathBuf};

use baton_proto::v1::AgentKind;
use serde_json::{Map, Value, json};

use super::Verdict;
use super::files::{home, read_json};
use super::mcp::{self, Files, rules};
use super::spec::{Spec, Summarizer};
use super::{Agent, Hook, Scope};

pub const AGENT: Agent = Agent::new(&Cursor);

pub struct Cursor;

impl Spec for Cursor {
    fn name(&self) -> &'static str {
        "cursor"
    }

    fn title(&self) -> &'static str {
        "Cursor"
    }

    fn kind(&self) -> AgentKind {
        AgentKind::Cursor
    }

    fn hooks(&self) -> &'static [Hook] {
        HOOKS
    }

    fn settings_file(&self, scope: Scope, project_root: &Path) -> anyhow::Result<PathBuf> {
        Ok(match scope {
            Scope::User => home()?.join(".cursor/hooks.json"),
            Scope::Project => project_root.join(".cursor/hooks.json"),
        })
    }

    fn handler(&self, hook: &Hook, command: String) -> Value {
        json!({ "command": command, "timeout": hook.timeout })
    }

    fn grouped_hooks(&self) -> bool {
        false
    }

    fn fill_settings(&self, settings: &mut Map<String, Value>) {
        if !settings.contains_key("version") {
            settings.insert("version".into(), json!(1));
        }
    }

    fn install_note(&self) -> Option<&'static str> {
        Some(
            "Cursor also loads Claude Code's hooks; Baton's Claude hooks stand down inside Cursor while these are installed, so nothing runs twice",
        )
    }

    fn alongside(&self, hooked: &[Agent]) -> Option<&'static str> {
        hooked.contains(&super::claude::AGENT).then_some(
            "Cursor also loads Claude Code's hooks: inside Cursor, Baton's Claude hooks stand down",
        )
    }

    /// Its sessionStart names no source: a conversation Baton knows continues its session.
    fn start_always_continues(&self) -> bool {
        true
    }

    fn brief_output(&self, text: &str) -> String {
        json!({ "additional_context": text }).to_string()
    }

    /// preToolUse refuses with `permission: deny` (`agent_message` goes to the agent when it
    /// refuses); it has no channel to the model for a call it lets through, so a warning waits
    /// for postToolUse.
    fn pre_tool_output(&self, verdict: &Verdict) -> Option<String> {
        match verdict {
            Verdict::Deny(reason) => Some(
                json!({ "permission": "deny", "user_message": "Baton: the file is reserved by another session", "agent_message": reason })
                    .to_string(),
            ),
            Verdict::Warn(_) => None,
        }
    }

    /// postToolUse's `additional_context` is added after the tool's result.
    fn post_tool_output(&self, text: &str) -> Option<String> {
        Some(json!({ "additional_context": text }).to_string())
    }

    /// Where stdout must be JSON.
    fn quiet_output(&self) -> &'static str {
        "{}"
    }

    fn brief_delivery(&self) -> &'static str {
        "Cursor adds it as additional context (its sessionStart does not wait: it may race the first prompt)"
    }

    fn mcp_files(&self, scope: Scope, root: &Path) -> anyhow::Result<Files> {
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

    fn register_mcp(
        &self,
        _scope: Scope,
        files: &Files,
        exe: &str,
        uninstall: bool,
    ) -> anyhow::Result<Vec<PathBuf>> {
        mcp::edit_both(
            files,
            |doc| mcp::set_server(doc, AGENT, exe, json!({ "type": "stdio" }), uninstall),
            |doc| mcp::allow(doc, MCP_RULE, uninstall),
        )
    }

    fn mcp_note(&self, _scope: Scope) -> Option<&'static str> {
        Some(
            "Cursor's agent asks before a project's MCP servers start: approve baton once (`cursor-agent mcp enable baton`)",
        )
    }

    fn mcp_health(&self, _scope: Scope, _root: &Path, files: &Files) -> Result<(), String> {
        let (_, doc) = read_json(&files.permission).map_err(|e| format!("{e:#}"))?;
        let has = |key: &str| rules(&doc, key).iter().any(|r| r == MCP_RULE || r.starts_with("Mcp(baton:"));
        if has("deny") {
            Err(format!("denied by a rule in {}", files.permission.display()))
        } else if has("allow") {
            Ok(())
        } else {
            Err(format!(
                "in {}, but no allow rule in {}: run `baton init cursor` again",
                files.server.display(),
                files.permission.display()
            ))
        }
    }

    fn summarizer(&self) -> Result<&'static dyn Summarizer, &'static str> {
        Err("Cursor has no headless run to write one; use claude or gemini")
    }
}

pub const HOOKS: &[Hook] = &[
    Hook::new("sessionStart", None, 10),
    Hook::new("beforeShellExecution", None, 10),
    Hook::new("preToolUse", Some("Write|Delete|StrReplace|Edit"), 10),
    Hook::new("postToolUse", None, 10),
    Hook::new("preCompact", None, 10),
    Hook::new("stop", None, 10),
    Hook::new("sessionEnd", None, 5),
];

/// Cursor CLI's rule for every tool of the server.
const MCP_RULE: &str = "Mcp(baton:*)";

/// Cursor runs Claude Code's hooks too; when Baton's own Cursor hooks are installed, the
/// Claude ones stand down so nothing runs twice. `toplevel`: the repository `cwd` is in.
pub fn runs_its_own_hooks(cwd: &Path, toplevel: &dyn Fn() -> Option<PathBuf>) -> bool {
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
