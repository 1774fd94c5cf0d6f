//! Gemini CLI: its hooks (and the setting that turns them on), the MCP server's entry, where
//! its chats live and how one is restored, and its headless run for summaries.

use std::path::{Path, PathBuf};

use baton_proto::v1::{AgentKind, BlobRef};
use serde_json::{Value, json};

use super::Verdict;
use super::files::{home, read_json, rehomed, write_whole};
use super::mcp::{self, Files, NAME};
use super::spec::{Spec, Summarizer};
use super::{Agent, Hook, Scope};

pub const AGENT: Agent = Agent::new(&Gemini);

pub struct Gemini;

impl Spec for Gemini {
    fn name(&self) -> &'static str {
        "gemini"
    }

    fn title(&self) -> &'static str {
        "Gemini CLI"
    }

    fn kind(&self) -> AgentKind {
        AgentKind::Gemini
    }

    fn hooks(&self) -> &'static [Hook] {
        HOOKS
    }

    fn settings_file(&self, scope: Scope, project_root: &Path) -> anyhow::Result<PathBuf> {
        settings_file(scope, project_root)
    }

    fn handler(&self, hook: &Hook, command: String) -> Value {
        json!({
            "name": format!("baton-{}", hook.event.to_ascii_lowercase()),
            "type": "command",
            "command": command,
            "timeout": hook.timeout,
            "description": "Baton session continuity",
        })
    }

    fn hooks_switch(&self) -> Option<(&'static str, Option<String>)> {
        Some(enable_key())
    }

    fn forget_hooks_switch(&self, settings: &mut Value) {
        forget_switch(settings);
    }

    fn hook_findings(&self, file: &Path, project_root: &Path) -> Vec<(bool, String)> {
        let mut found: Vec<(bool, String)> = never_matching(file)
            .into_iter()
            .map(|(event, matcher)| {
                (false, format!("its {event} matcher {matcher:?} never matches (Gemini compares it with the trigger as one exact string): run `baton init gemini` again"))
            })
            .collect();
        let user = settings_file(Scope::User, project_root).ok();
        if enabled(file) != Some(true) && user.and_then(|u| enabled(&u)) != Some(true) {
            found.push((
                false,
                "the Gemini hooks system is not enabled (hooksConfig.enabled or tools.enableHooks)".into(),
            ));
        }
        found
    }

    /// Where stdout must be JSON.
    /// BeforeTool refuses with `decision: deny` (the model gets "Tool execution blocked:
    /// <reason>"); its additionalContext is read but never used, so a warning waits for
    /// AfterTool.
    fn pre_tool_output(&self, verdict: &Verdict) -> Option<String> {
        match verdict {
            Verdict::Deny(reason) => Some(json!({ "decision": "deny", "reason": reason }).to_string()),
            Verdict::Warn(_) => None,
        }
    }

    /// AfterTool's additionalContext is appended to the tool's result in `<hook_context>`.
    fn post_tool_output(&self, text: &str) -> Option<String> {
        Some(
            json!({ "hookSpecificOutput": { "hookEventName": "AfterTool", "additionalContext": text } })
                .to_string(),
        )
    }

    fn quiet_output(&self) -> &'static str {
        "{}"
    }

    fn brief_delivery(&self) -> &'static str {
        "Gemini CLI puts it before the prompt, inside <hook_context>…</hook_context>"
    }

    /// The server's entry and its trust are both in the settings file.
    fn mcp_files(&self, scope: Scope, root: &Path) -> anyhow::Result<Files> {
        let file = settings_file(scope, root)?;
        Ok(Files { server: file.clone(), permission: file })
    }

    fn register_mcp(
        &self,
        _scope: Scope,
        files: &Files,
        exe: &str,
        uninstall: bool,
    ) -> anyhow::Result<Vec<PathBuf>> {
        let changed = mcp::edit_json(&files.server, |doc| {
            // Gemini asks before each call to a server it does not trust.
            mcp::set_server(doc, AGENT, exe, json!({ "trust": true }), uninstall)?;
            // A user who keeps a list of allowed servers starts only those.
            if let Some(mcp) = doc.get_mut("mcp").and_then(Value::as_object_mut)
                && mcp.contains_key("allowed")
            {
                mcp::set_item(mcp, "allowed", NAME, !uninstall)?;
            }
            Ok(())
        })?;
        Ok(if changed { vec![files.server.clone()] } else { vec![] })
    }

    fn mcp_note(&self, _scope: Scope) -> Option<&'static str> {
        Some(
            "Gemini CLI starts stdio MCP servers only in folders you trust (/permissions, or ~/.gemini/trustedFolders.json)",
        )
    }

    fn mcp_health(&self, _scope: Scope, _root: &Path, files: &Files) -> Result<(), String> {
        mcp_health(&files.server)
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

    /// Gemini names a chat by the id's first 8 characters; its first line has the id.
    fn conversation_here(&self, home: &Path, agent_session_id: &str) -> bool {
        chat(home, agent_session_id).is_some()
    }

    fn summarizer(&self) -> Result<&'static dyn Summarizer, &'static str> {
        Ok(&Gemini)
    }
}

/// The headless run that writes a summary, in Baton's own scratch directory (which no one
/// has trusted), with no MCP servers or extensions, and a policy that denies every tool:
/// Gemini leaves a tool its policy denies out of what it offers the model. The policy is
/// given as an admin's (above any of the user's) and as the user's (in case the machine's
/// own admin policies make Gemini ignore the first).
impl Summarizer for Gemini {
    fn args(&self, ask: &str, scratch: &Path) -> anyhow::Result<Vec<String>> {
        let policy = scratch.join("no-tools.toml");
        std::fs::write(&policy, GEMINI_NO_TOOLS)?;
        let policy = policy.display().to_string();
        Ok([
            "-p",
            ask,
            "-o",
            "json",
            "--skip-trust",
            "--allowed-mcp-server-names",
            "none",
            "-e",
            "none",
            "--admin-policy",
            &policy,
            "--policy",
            &policy,
        ]
        .map(str::to_owned)
        .to_vec())
    }

    fn clean_up(&self, started: std::time::SystemTime, ask: &str) {
        forget_summary_chat(started, ask);
    }
}

/// Gemini compares SessionStart's matcher with the trigger as one exact string (0.61):
/// "startup|resume|clear" never matches, no matcher matches all. It fires PreCompress
/// before every model request, compressing or not, so PreCompress cannot mark a compaction
/// and is not installed: AfterAgent checkpoints every turn. Timeouts in milliseconds.
pub const HOOKS: &[Hook] = &[
    Hook::new("SessionStart", None, 10_000),
    Hook::new("BeforeAgent", None, 10_000),
    Hook::new("BeforeTool", Some("^(run_shell_command|write_file|replace)$"), 10_000),
    Hook::new("AfterTool", None, 10_000),
    Hook::new("AfterAgent", None, 10_000),
    Hook::new("SessionEnd", None, 5_000),
];

pub fn settings_file(scope: Scope, project_root: &Path) -> anyhow::Result<PathBuf> {
    Ok(match scope {
        Scope::User => home()?.join(".gemini/settings.json"),
        Scope::Project => project_root.join(".gemini/settings.json"),
    })
}

/// The chats folder of Gemini CLI for a project folder (named by the folder's base name).
fn chats(home: &Path, cwd: &Path) -> PathBuf {
    let short = cwd.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    home.join(".gemini/tmp").join(short).join("chats")
}

/// The chat file of a Gemini conversation: its name carries only the id's first 8
/// characters, its first line the whole id.
pub fn chat(home: &Path, id: &str) -> Option<PathBuf> {
    let prefix: String = id.chars().take(8).collect();
    let suffix = format!("-{prefix}.jsonl");
    let root = home.join(".gemini/tmp");
    for project in std::fs::read_dir(&root).ok()?.flatten() {
        for chat in std::fs::read_dir(project.path().join("chats")).into_iter().flatten().flatten() {
            let name = chat.file_name().to_string_lossy().into_owned();
            if name.starts_with("session-")
                && name.ends_with(&suffix)
                && chat_id(&chat.path()).as_deref() == Some(id)
            {
                return Some(chat.path());
            }
        }
    }
    None
}

/// The conversation id a Gemini chat file names on its first line.
fn chat_id(path: &Path) -> Option<String> {
    use std::io::BufRead as _;
    let file = std::fs::File::open(path).ok()?;
    let mut first = String::new();
    std::io::Read::take(std::io::BufReader::new(file), 64 * 1024).read_line(&mut first).ok()?;
    let line: serde_json::Value = serde_json::from_str(&first).ok()?;
    line.get("sessionId").and_then(serde_json::Value::as_str).map(str::to_owned)
}

/// Writes a Gemini chat where `gemini --resume <id>` finds it for `cwd` on this machine:
/// over the conversation's chat if this machine has one in that folder, else a new file
/// named as Gemini names them (its start time, the id's first 8 characters).
fn restore(data: &[u8], blob: &BlobRef, cwd: &Path, home: &Path) -> anyhow::Result<PathBuf> {
    let id = crate::safe::agent_session_id(&blob.agent_session_id)?;
    let text = rehomed(data, blob, cwd);
    let dir = chats(home, cwd);
    let existing = chat(home, id).filter(|f| f.parent() == Some(dir.as_path()));
    let file = if let Some(file) = existing {
        file
    } else {
        // Gemini's own name: session-<start, to the minute>-<first 8 of the id>.jsonl.
        let first: serde_json::Value =
            text.lines().next().and_then(|l| serde_json::from_str(l).ok()).unwrap_or_default();
        let started = first
            .get("startTime")
            .and_then(serde_json::Value::as_str)
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .map_or_else(chrono::Utc::now, |t| t.with_timezone(&chrono::Utc));
        let prefix: String = id.chars().take(8).collect();
        dir.join(format!("session-{}-{prefix}.jsonl", started.format("%Y-%m-%dT%H-%M")))
    };
    write_whole(&file, &text)?;
    Ok(file)
}

/// Which setting enables hooks in the installed Gemini CLI: `hooksConfig.enabled` since
/// v0.26.0, `tools.enableHooks` before (AGENT_HOOKS.md §3.1). Unknown version: the current
/// key, and a note.
fn enable_key() -> (&'static str, Option<String>) {
    let version = std::process::Command::new("gemini")
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().trim_start_matches('v').to_owned());
    match version.as_deref().and_then(parse_version) {
        Some(v) if v < (0, 26, 0) => ("tools.enableHooks", Some(format!("Gemini CLI {} found: enabled hooks with tools.enableHooks", version.unwrap_or_default()))),
        Some(_) => ("hooksConfig.enabled", Some(format!("Gemini CLI {} found: enabled hooks with hooksConfig.enabled", version.unwrap_or_default()))),
        None => (
            "hooksConfig.enabled",
            Some("Gemini CLI not found on PATH: set hooksConfig.enabled (v0.26+); on older versions enable hooks under /settings → Advanced".into()),
        ),
    }
}

fn parse_version(v: &str) -> Option<(u32, u32, u32)> {
    let mut it =
        v.split(|c: char| !c.is_ascii_digit()).filter(|s| !s.is_empty()).map(|s| s.parse::<u32>().ok());
    Some((it.next()??, it.next()??, it.next().flatten().unwrap_or(0)))
}

/// Takes out the settings that turn Gemini's hooks on, and the objects they leave empty.
fn forget_switch(doc: &mut Value) {
    for (outer, inner) in [("hooksConfig", "enabled"), ("tools", "enableHooks")] {
        let Some(map) = doc.get_mut(outer).and_then(Value::as_object_mut) else { continue };
        map.remove(inner);
        if map.is_empty()
            && let Some(root) = doc.as_object_mut()
        {
            root.remove(outer);
        }
    }
}

/// Baton's hook groups in `file` whose matcher the agent can never match: Gemini compares
/// SessionStart's and PreCompress's matcher with the trigger as one exact string, so a
/// list such as `startup|resume|clear` never fires (Gemini CLI 0.61). (event, matcher).
fn never_matching(file: &Path) -> Vec<(String, String)> {
    let Ok(doc) =
        std::fs::read_to_string(file).map(|t| serde_json::from_str::<Value>(&t).unwrap_or(Value::Null))
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for event in ["SessionStart", "PreCompress"] {
        for group in doc.pointer(&format!("/hooks/{event}")).and_then(Value::as_array).into_iter().flatten() {
            let ours = super::install::is_ours(&group.to_string(), AGENT);
            let matcher = group.get("matcher").and_then(Value::as_str).unwrap_or_default();
            if ours
                && !matcher.is_empty()
                && matcher != "*"
                && !matcher.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                out.push((event.to_owned(), matcher.to_owned()));
            }
        }
    }
    out
}

/// Whether a settings file turns the hooks on.
fn enabled(file: &Path) -> Option<bool> {
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(file).ok()?).ok()?;
    let on = |a: &str, b: &str| doc.get(a).and_then(|v| v.get(b)).and_then(Value::as_bool) == Some(true);
    Some(on("hooksConfig", "enabled") || on("tools", "enableHooks"))
}

pub fn mcp_health(file: &Path) -> Result<(), String> {
    let (_, doc) = read_json(file).map_err(|e| format!("{e:#}"))?;
    let names = |key: &str| -> Vec<String> {
        doc.get("mcp")
            .and_then(|m| m.get(key))
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
            .unwrap_or_default()
    };
    if names("excluded").iter().any(|n| n == NAME) {
        return Err(format!("excluded in {} (mcp.excluded)", file.display()));
    }
    let allowed = doc.get("mcp").and_then(|m| m.get("allowed")).is_some();
    if allowed && !names("allowed").iter().any(|n| n == NAME) {
        return Err(format!("not in mcp.allowed in {}: Gemini CLI will not start it", file.display()));
    }
    let trusted =
        doc.get("mcpServers").and_then(|s| s.get(NAME)).and_then(|s| s.get("trust")).and_then(Value::as_bool);
    if trusted != Some(true) {
        return Err(format!(
            "not trusted in {}: Gemini CLI leaves its tools out when headless and asks before each call",
            file.display()
        ));
    }
    Ok(())
}

/// A Gemini CLI policy that denies every tool (`*`), at the highest priority of its tier.
const GEMINI_NO_TOOLS: &str = "[[rule]]\ntoolName = \"*\"\ndecision = \"deny\"\npriority = 999\n";

/// Gemini keeps every headless run as a chat it offers to resume: the summarizer's goes —
/// only a chat written since this run started that holds its exact prompt, so that no chat
/// of the user's is touched.
fn forget_summary_chat(started: std::time::SystemTime, ask: &str) {
    let Some(home) = directories::BaseDirs::new().map(|b| b.home_dir().join(".gemini/tmp")) else { return };
    let Ok(projects) = std::fs::read_dir(home) else { return };
    for chats in projects.flatten().map(|p| p.path().join("chats")) {
        let Ok(files) = std::fs::read_dir(chats) else { continue };
        for file in files.flatten().map(|f| f.path()) {
            let fresh = std::fs::metadata(&file).and_then(|m| m.modified()).is_ok_and(|t| t >= started);
            if fresh && std::fs::read_to_string(&file).is_ok_and(|t| t.contains(ask)) {
                let _ = std::fs::remove_file(&file);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(parse_version("0.25.1"), Some((0, 25, 1)));
        assert_eq!(parse_version("0.26"), Some((0, 26, 0)));
        assert_eq!(parse_version("nope"), None);
    }
}
