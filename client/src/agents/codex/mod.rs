//! Codex: its hooks (which run only once trusted: `trust`), the MCP server's table in
//! `config.toml` (`mcp`), and where its rollouts live and how one is restored. Codex writes
//! no summaries: it cannot be run without tools.

pub mod mcp;
pub mod trust;

use std::path::{Path, PathBuf};

use baton_proto::v1::{AgentKind, BlobRef};

use super::files::{find_under, home, rehomed, write_whole};
use super::mcp::Files;
use super::spec::{Spec, Summarizer};
use super::{Agent, Hook, Scope};

pub const AGENT: Agent = Agent::new(&Codex);

pub struct Codex;

impl Spec for Codex {
    /// Whether PostToolUse's additionalContext reaches the model is not verified for Codex:
    /// a notice waits for the next PreToolUse, whose additionalContext does.
    fn post_tool_output(&self, _text: &str) -> Option<String> {
        None
    }

    fn name(&self) -> &'static str {
        "codex"
    }

    fn title(&self) -> &'static str {
        "Codex"
    }

    fn kind(&self) -> AgentKind {
        AgentKind::Codex
    }

    fn hooks(&self) -> &'static [Hook] {
        HOOKS
    }

    fn settings_file(&self, scope: Scope, project_root: &Path) -> anyhow::Result<PathBuf> {
        Ok(match scope {
            Scope::User => codex_home(&home()?).join("hooks.json"),
            Scope::Project => project_root.join(".codex/hooks.json"),
        })
    }

    fn install_note(&self) -> Option<&'static str> {
        Some(
            "Codex runs a new or changed hook only after you trust it: open /hooks in Codex and trust the Baton entries, or run `baton init codex --trust` (records that trust as /hooks does)",
        )
    }

    fn records_trust(&self) -> bool {
        true
    }

    fn record_trust(&self, hooks_file: &Path) -> anyhow::Result<String> {
        let config = trust::config_file(&home().unwrap_or_default());
        let recorded = trust::record(&config, &trust::baton_handlers(hooks_file))?;
        Ok(format!("Codex trusts Baton's hooks: recorded {recorded} in {}", config.display()))
    }

    /// Codex skips a hook it has not trusted, without a word.
    fn hook_findings(&self, file: &Path, _project_root: &Path) -> Vec<(bool, String)> {
        let config = trust::config_file(&home().unwrap_or_default());
        let trust = trust::trust(&config, &trust::baton_handlers(file));
        let skipped: Vec<&str> = trust
            .iter()
            .filter(|(_, t)| *t != trust::Trust::Trusted)
            .map(|(h, _)| h.event.as_str())
            .collect();
        if skipped.is_empty() {
            return vec![(true, "trusted in Codex".into())];
        }
        vec![(
            false,
            format!(
                "Codex skips {} of them ({}): never trusted, or changed since: open /hooks in Codex and trust the Baton entries, or run `baton init codex --trust`",
                skipped.len(),
                skipped.join(", ")
            ),
        )]
    }

    /// Codex moves context past 2,500 tokens to a file; 6,000 characters stay under that
    /// even for text of 2.4 characters a token.
    fn default_budget(&self) -> usize {
        6_000
    }

    fn brief_delivery(&self) -> &'static str {
        "Codex adds it as a developer message before the first prompt (again on each resume)"
    }

    /// The server's table and its approval are both in `config.toml`.
    fn mcp_files(&self, scope: Scope, root: &Path) -> anyhow::Result<Files> {
        let file = match scope {
            Scope::User => trust::config_file(&home()?),
            Scope::Project => root.join(".codex/config.toml"),
        };
        Ok(Files { server: file.clone(), permission: file })
    }

    fn register_mcp(
        &self,
        _scope: Scope,
        files: &Files,
        exe: &str,
        uninstall: bool,
    ) -> anyhow::Result<Vec<PathBuf>> {
        Ok(if mcp::register(&files.server, exe, uninstall)? { vec![files.server.clone()] } else { vec![] })
    }

    fn mcp_registered(&self, server_file: &Path) -> bool {
        mcp::server(server_file).is_some()
    }

    fn mcp_health(&self, _scope: Scope, _root: &Path, files: &Files) -> Result<(), String> {
        if mcp::approved(&files.server) {
            return Ok(());
        }
        Err(format!(
            "in {}, but each call waits for approval (`codex exec` refuses them): run `baton init codex` again",
            files.server.display()
        ))
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
        rollout(home, agent_session_id).is_some()
    }

    fn summarizer(&self) -> Result<&'static dyn Summarizer, &'static str> {
        Err(NO_SUMMARY)
    }
}

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

/// Why Codex writes no summaries: a summary is written with no tools at all.
const NO_SUMMARY: &str = "Codex cannot be run without tools: with every tool feature, web search and MCP off, \
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
fn restore(data: &[u8], blob: &BlobRef, cwd: &Path, home: &Path) -> anyhow::Result<PathBuf> {
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
