//! Claude Code: its hooks and settings files, the MCP server's entry and the rule that lets
//! its tools run, where its transcripts and task files live and how they are restored,
//! and its headless run for summaries.

use std::path::{Path, PathBuf};

use baton_proto::v1::{AgentKind, BlobRef};
use serde_json::Value;

use super::files::{home, read_json, rehomed, write_whole};
use super::mcp::{self, Files, NAME, rules};
use super::spec::{Spec, Summarizer};
use super::{Agent, Hook, Scope};

pub const AGENT: Agent = Agent::new(&Claude);

pub struct Claude;

impl Spec for Claude {
    fn name(&self) -> &'static str {
        "claude"
    }

    fn title(&self) -> &'static str {
        "Claude Code"
    }

    fn kind(&self) -> AgentKind {
        AgentKind::ClaudeCode
    }

    fn hooks(&self) -> &'static [Hook] {
        HOOKS
    }

    fn settings_file(&self, scope: Scope, project_root: &Path) -> anyhow::Result<PathBuf> {
        settings_file(scope, project_root)
    }

    /// Cursor runs Claude Code's hooks too: inside Cursor with Baton's Cursor hooks
    /// installed, those do the work.
    fn stands_down(&self, cwd: &Path, toplevel: &dyn Fn() -> Option<PathBuf>) -> bool {
        super::cursor::runs_its_own_hooks(cwd, toplevel)
    }

    fn brief_delivery(&self) -> &'static str {
        "Claude Code adds it to the conversation as a system message, \"SessionStart hook additional context: …\""
    }

    fn mcp_files(&self, scope: Scope, root: &Path) -> anyhow::Result<Files> {
        Ok(match scope {
            Scope::User => Files { server: claude_json()?, permission: settings_file(scope, root)? },
            Scope::Project => {
                Files { server: root.join(".mcp.json"), permission: settings_file(scope, root)? }
            }
        })
    }

    fn register_mcp(
        &self,
        scope: Scope,
        files: &Files,
        exe: &str,
        uninstall: bool,
    ) -> anyhow::Result<Vec<PathBuf>> {
        mcp::edit_both(
            files,
            |doc| mcp::set_server(doc, AGENT, exe, serde_json::json!({ "type": "stdio" }), uninstall),
            |doc| {
                mcp::allow(doc, MCP_RULE, uninstall)?;
                if scope == Scope::Project {
                    // The project's .mcp.json server, approved (Claude Code would wait for a yes).
                    mcp::set_item(doc, "enabledMcpjsonServers", NAME, !uninstall)?;
                }
                Ok(())
            },
        )
    }

    fn mcp_note(&self, scope: Scope) -> Option<&'static str> {
        (scope == Scope::Project).then_some(
            "Claude Code ignores allow rules in .claude/settings.local.json in a workspace you have not trusted (or when the file is tracked in git): `baton doctor` says so",
        )
    }

    fn mcp_health(&self, scope: Scope, root: &Path, files: &Files) -> Result<(), String> {
        mcp_health(scope, root, files)
    }

    fn carries_transcripts(&self) -> bool {
        true
    }

    fn restore_transcript(
        &self,
        data: &[u8],
        blob: &BlobRef,
        cwd: &Path,
        home: &Path,
    ) -> anyhow::Result<PathBuf> {
        restore(data, blob, cwd, home)
    }

    fn conversation_here(&self, home: &Path, agent_session_id: &str) -> bool {
        conversation_here(home, agent_session_id)
    }

    /// Claude Code keeps a conversation's tasks beside it, not in the transcript.
    fn side_files_role(&self) -> Option<&'static str> {
        Some("claude-tasks")
    }

    fn bundle_side_files(&self, home: &Path, agent_session_id: &str) -> anyhow::Result<Option<Vec<u8>>> {
        bundle_tasks(home, agent_session_id)
    }

    fn restore_side_files(&self, data: &[u8], blob: &BlobRef, home: &Path) -> anyhow::Result<PathBuf> {
        restore_tasks(data, blob, home)
    }

    fn summarizer(&self) -> Result<&'static dyn Summarizer, &'static str> {
        Ok(&Claude)
    }
}

/// The headless run that writes a summary: no tools, no MCP servers, no hooks, nothing kept.
impl Summarizer for Claude {
    fn args(&self, ask: &str, _scratch: &Path) -> anyhow::Result<Vec<String>> {
        Ok([
            "-p",
            ask,
            "--output-format",
            "json",
            "--no-session-persistence",
            "--strict-mcp-config",
            "--tools",
            "",
            "--settings",
            r#"{"disableAllHooks": true}"#,
        ]
        .map(str::to_owned)
        .to_vec())
    }

    fn answer_field(&self) -> &'static str {
        "result"
    }
}

pub const HOOKS: &[Hook] = &[
    Hook::new("SessionStart", Some("startup|resume|clear|compact"), 10),
    Hook::new("UserPromptSubmit", None, 10),
    Hook::new("PreToolUse", Some("Bash|Edit|Write|MultiEdit|NotebookEdit"), 10),
    Hook::new("PostToolUse", None, 10),
    Hook::new("PostToolUseFailure", None, 10),
    Hook::new("PreCompact", Some("manual|auto"), 10),
    Hook::new("PostCompact", None, 10),
    Hook::new("SubagentStop", None, 10),
    Hook::new("Stop", None, 10),
    Hook::new("StopFailure", None, 10),
    Hook::new("SessionEnd", None, 5),
];

/// The settings file holding hooks (and the MCP permission).
pub fn settings_file(scope: Scope, project_root: &Path) -> anyhow::Result<PathBuf> {
    Ok(match scope {
        Scope::User => home()?.join(".claude/settings.json"),
        // Personal and not committed: the agent's "local" project settings.
        Scope::Project => project_root.join(".claude/settings.local.json"),
    })
}

/// Claude Code's rule for every tool of the server.
pub const MCP_RULE: &str = "mcp__baton";

/// Whether this machine holds the conversation (so `claude --resume` works here).
fn conversation_here(home: &Path, agent_session_id: &str) -> bool {
    std::fs::read_dir(claude_root(home).join("projects"))
        .into_iter()
        .flatten()
        .flatten()
        .any(|d| d.path().join(format!("{agent_session_id}.jsonl")).exists())
}

/// Task files are small JSON documents: at most this many, each at most this large.
const MAX_TASK_FILES: usize = 1000;

const MAX_TASK_FILE: usize = 64 * 1024;

/// Claude Code's project directory name for a cwd: every non-alphanumeric becomes `-`.
pub fn project_dir(cwd: &Path) -> String {
    cwd.display().to_string().chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect()
}

/// Writes a Claude Code transcript where Claude Code looks for it for `cwd` on this machine,
/// with the old project path rewritten to `cwd`. Returns the file written.
fn restore(data: &[u8], blob: &BlobRef, cwd: &Path, home: &Path) -> anyhow::Result<PathBuf> {
    // One plain name, or nothing is written (the hub or a teammate chose it).
    let name = crate::safe::agent_session_id(&blob.agent_session_id)?;
    let file = claude_root(home).join("projects").join(project_dir(cwd)).join(format!("{name}.jsonl"));
    write_whole(&file, &rehomed(data, blob, cwd))?;
    Ok(file)
}

/// Where Claude Code keeps its files (`CLAUDE_CONFIG_DIR`, else `~/.claude`).
pub fn claude_root(home: &Path) -> PathBuf {
    std::env::var_os("CLAUDE_CONFIG_DIR").map_or_else(|| home.join(".claude"), PathBuf::from)
}

/// A task file's name as Claude Code makes them: `<number>.json`.
fn is_task_file(name: &str) -> bool {
    name.strip_suffix(".json")
        .is_some_and(|n| !n.is_empty() && n.len() <= 9 && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Claude Code's task files of a conversation (`tasks/<id>/<n>.json`) as one JSON object
/// `{name: content}`, secrets redacted; None when it has none.
fn bundle_tasks(home: &Path, agent_session_id: &str) -> anyhow::Result<Option<Vec<u8>>> {
    let id = crate::safe::agent_session_id(agent_session_id)?;
    let dir = claude_root(home).join("tasks").join(id);
    let Ok(entries) = std::fs::read_dir(&dir) else { return Ok(None) };
    let mut files = serde_json::Map::new();
    for entry in entries.flatten().take(MAX_TASK_FILES) {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !is_task_file(&name) || entry.metadata().map_or(u64::MAX, |m| m.len()) > MAX_TASK_FILE as u64 {
            continue;
        }
        let text = std::fs::read_to_string(entry.path())?;
        files.insert(name, serde_json::Value::String(baton_proto::redact::redact(&text).0.into_owned()));
    }
    if files.is_empty() {
        return Ok(None);
    }
    Ok(Some(serde_json::to_vec(&files)?))
}

/// Writes a conversation's task files where Claude Code keeps them on this machine. What
/// the hub sent is checked first: the conversation id one plain name, every file named
/// `<number>.json` and small, so nothing is written outside `tasks/<id>/`. Returns the
/// folder written.
fn restore_tasks(data: &[u8], blob: &BlobRef, home: &Path) -> anyhow::Result<PathBuf> {
    let id = crate::safe::agent_session_id(&blob.agent_session_id)?;
    let files: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(data)
        .map_err(|e| anyhow::anyhow!("the task files are not a JSON object: {e}"))?;
    if files.len() > MAX_TASK_FILES {
        anyhow::bail!("{} task files: at most {MAX_TASK_FILES}", files.len());
    }
    let mut checked = Vec::new();
    for (name, content) in &files {
        let content = content
            .as_str()
            .ok_or_else(|| anyhow::anyhow!("task file {} is not text", crate::safe::line(name)))?;
        if !is_task_file(name) || content.len() > MAX_TASK_FILE {
            anyhow::bail!(
                "refusing task file {}: not <number>.json of at most 64 KiB",
                crate::safe::line(name)
            );
        }
        checked.push((name.clone(), content.to_owned()));
    }
    let dir = claude_root(home).join("tasks").join(id);
    for (name, content) in checked {
        write_whole(&dir.join(&name), &content)?;
    }
    Ok(dir)
}

/// Claude Code's own state file, which holds user-scope MCP servers.
pub fn claude_json() -> anyhow::Result<PathBuf> {
    Ok(match std::env::var_os("CLAUDE_CONFIG_DIR") {
        Some(dir) => PathBuf::from(dir).join(".claude.json"),
        None => home()?.join(".claude.json"),
    })
}

fn matches_rule(rule: &str) -> bool {
    rule == MCP_RULE || rule == "mcp__*" || rule.starts_with("mcp__baton__")
}

fn mcp_health(scope: Scope, root: &Path, files: &Files) -> Result<(), String> {
    let user = settings_file(Scope::User, root).map_err(|e| format!("{e:#}"))?;
    let local = settings_file(Scope::Project, root).map_err(|e| format!("{e:#}"))?;
    let shared = root.join(".claude/settings.json");
    let docs: Vec<(PathBuf, Value)> = [user.clone(), shared, local.clone()]
        .into_iter()
        .filter_map(|f| read_json(&f).ok().map(|(_, d)| (f, d)))
        .collect();
    for (file, doc) in &docs {
        if rules(doc, "deny").iter().any(|r| matches_rule(r)) {
            return Err(format!("denied by a rule in {}", file.display()));
        }
        let rejected = doc
            .get("disabledMcpjsonServers")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|v| v.as_str() == Some(NAME)));
        if scope == Scope::Project && rejected {
            return Err(format!("rejected in {} (disabledMcpjsonServers)", file.display()));
        }
    }
    let allowed_in = |file: &Path| {
        docs.iter().any(|(f, d)| f == file && rules(d, "allow").iter().any(|r| matches_rule(r)))
    };
    if allowed_in(&user) {
        return Ok(());
    }
    if allowed_in(&local) {
        // Claude Code reads a project's allow rules only in a workspace the user trusted.
        let trusted = claude_json()
            .ok()
            .and_then(|f| read_json(&f).ok())
            .and_then(|(_, d)| {
                d.get("projects")?.get(root.display().to_string())?.get("hasTrustDialogAccepted")?.as_bool()
            })
            .unwrap_or(false);
        return if trusted {
            Ok(())
        } else {
            Err(format!(
                "the allow rule is in {}, which Claude Code ignores until you trust this workspace (start `claude` here once and accept), or run `baton init claude` for the user",
                local.display()
            ))
        };
    }
    Err(format!(
        "registered in {}, but Claude Code will not call its tools: no allow rule (run `baton init claude` again)",
        files.server.display()
    ))
}
