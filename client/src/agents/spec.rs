//! What Baton knows about one agent. Each agent's module implements [`Spec`]; the shared
//! machinery (the hooks, `install`, `mcp`, `summary`, `baton doctor`) asks it and never names
//! an agent. A method with a default is what most agents do; an agent that differs says so in
//! its own module.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use baton_proto::v1::{AgentKind, BlobRef};
use serde_json::{Map, Value, json};

use super::Verdict;
use super::mcp::Files;
use super::{Agent, Hook, Scope};

pub trait Spec: Sync {
    // Who it is.

    /// Baton's name for it: `baton init <name>`, `baton hook <name> …`, the config's keys.
    fn name(&self) -> &'static str;

    /// Its own name, for people.
    fn title(&self) -> &'static str;

    /// Its kind as the hub records it.
    fn kind(&self) -> AgentKind;

    // Its hooks.

    /// The hooks Baton installs.
    fn hooks(&self) -> &'static [Hook];

    /// The settings file its hooks go in, for a scope.
    fn settings_file(&self, scope: Scope, project_root: &Path) -> anyhow::Result<PathBuf>;

    /// One handler entry in its settings file.
    fn handler(&self, hook: &Hook, command: String) -> Value {
        json!({ "type": "command", "command": command, "timeout": hook.timeout })
    }

    /// Whether an event's handlers sit in matcher groups (`[{matcher, hooks: […]}]`) rather
    /// than in one flat list.
    fn grouped_hooks(&self) -> bool {
        true
    }

    /// Fills in what its settings file must hold besides the hooks, where missing.
    fn fill_settings(&self, _settings: &mut Map<String, Value>) {}

    /// The setting that turns its hooks on, if it has one: the dotted key the installed
    /// version reads, and a note on what was found.
    fn hooks_switch(&self) -> Option<(&'static str, Option<String>)> {
        None
    }

    /// Takes that setting out again (an uninstall that empties a file Baton made).
    fn forget_hooks_switch(&self, _settings: &mut Value) {}

    /// What the user still has to do, or know, once the hooks are installed.
    fn install_note(&self) -> Option<&'static str> {
        None
    }

    /// Whether it keeps a trust in hooks that `baton init --trust` can record for the user.
    fn records_trust(&self) -> bool {
        false
    }

    /// Records its trust in Baton's hooks in `hooks_file`; says what was recorded where.
    fn record_trust(&self, _hooks_file: &Path) -> anyhow::Result<String> {
        anyhow::bail!("{} keeps no trust in hooks for Baton to record", self.title())
    }

    /// What `baton doctor` finds in a settings file that holds Baton's hooks: (fine, what).
    fn hook_findings(&self, _file: &Path, _project_root: &Path) -> Vec<(bool, String)> {
        Vec::new()
    }

    /// What `baton doctor` says when its hooks are installed beside those of `hooked`.
    fn alongside(&self, _hooked: &[Agent]) -> Option<&'static str> {
        None
    }

    /// Whether Baton's hooks for it stand down in `cwd` because another agent's hooks do the
    /// work there; `toplevel` is the repository `cwd` is in.
    fn stands_down(&self, _cwd: &Path, _toplevel: &dyn Fn() -> Option<PathBuf>) -> bool {
        false
    }

    /// Whether every SessionStart continues the session of a conversation Baton knows,
    /// rather than only a resumed or compacted one.
    fn start_always_continues(&self) -> bool {
        false
    }

    // The brief.

    /// The SessionStart hook's output that puts `text` into the model's context.
    fn brief_output(&self, text: &str) -> String {
        json!({ "hookSpecificOutput": { "hookEventName": "SessionStart", "additionalContext": text } })
            .to_string()
    }

    /// The pre-tool hook's output for a reservation verdict: the call refused with the reason
    /// the model reads, or let through with a warning the model reads. `None` when the agent
    /// has no way to warn before a tool runs (the warning then goes with the post-tool hook).
    /// Claude Code's and Codex's shape; Codex refuses (and ignores) any other key.
    fn pre_tool_output(&self, verdict: &Verdict) -> Option<String> {
        Some(
            match verdict {
                Verdict::Deny(reason) => json!({ "hookSpecificOutput": {
                    "hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": reason
                }}),
                Verdict::Warn(text) => {
                    json!({ "hookSpecificOutput": { "hookEventName": "PreToolUse", "additionalContext": text } })
                }
            }
            .to_string(),
        )
    }

    /// The post-tool hook's output that puts `text` before the model with the tool's result;
    /// `None` when the agent has none (the text then goes with the next pre-tool hook).
    fn post_tool_output(&self, text: &str) -> Option<String> {
        Some(
            json!({ "hookSpecificOutput": { "hookEventName": "PostToolUse", "additionalContext": text } })
                .to_string(),
        )
    }

    /// What to print for events whose output is ignored or must not steer the agent.
    fn quiet_output(&self) -> &'static str {
        ""
    }

    /// The brief's length, in characters, that it shows the model inline (with a margin).
    fn default_budget(&self) -> usize {
        9_000
    }

    /// How it hands the brief to its model, for `baton doctor --try`.
    fn brief_delivery(&self) -> &'static str;

    // Baton's MCP server.

    /// The files its MCP server entry and the permission to call it go in, for a scope.
    fn mcp_files(&self, scope: Scope, project_root: &Path) -> anyhow::Result<Files>;

    /// Registers (or removes) the server `exe` in `files` with the permission to call its
    /// tools without asking; returns the files changed.
    fn register_mcp(
        &self,
        scope: Scope,
        files: &Files,
        exe: &str,
        uninstall: bool,
    ) -> anyhow::Result<Vec<PathBuf>>;

    /// What the user still has to do, or know, once the server is registered.
    fn mcp_note(&self, _scope: Scope) -> Option<&'static str> {
        None
    }

    /// Whether `server_file` registers Baton's server.
    fn mcp_registered(&self, server_file: &Path) -> bool {
        super::mcp::in_json(server_file)
    }

    /// Whether it may call the registered server's tools, and if not, why.
    fn mcp_health(&self, scope: Scope, project_root: &Path, files: &Files) -> Result<(), String>;

    // Its conversations.

    /// Whether its transcripts are carried between machines (`sync_transcripts`).
    fn carries_transcripts(&self) -> bool {
        false
    }

    /// Writes a conversation's transcript where it looks for it for `cwd` on this machine
    /// (`home`), with the project path it was written at rewritten. The file.
    fn restore_transcript(
        &self,
        _data: &[u8],
        _blob: &BlobRef,
        _cwd: &Path,
        _home: &Path,
    ) -> anyhow::Result<PathBuf> {
        anyhow::bail!("{}'s conversations are not carried between machines", self.title())
    }

    /// Whether this machine holds its conversation (so its own resume works here).
    fn conversation_here(&self, _home: &Path, _agent_session_id: &str) -> bool {
        false
    }

    /// The role, among a checkpoint's blobs, of the files it keeps beside a conversation's
    /// transcript, carried with it as one document; None when it keeps none.
    fn side_files_role(&self) -> Option<&'static str> {
        None
    }

    /// Those files of a conversation as one document; None when there are none.
    fn bundle_side_files(&self, _home: &Path, _agent_session_id: &str) -> anyhow::Result<Option<Vec<u8>>> {
        Ok(None)
    }

    /// Writes such a document's files back where it keeps them; returns the folder.
    fn restore_side_files(&self, _data: &[u8], _blob: &BlobRef, _home: &Path) -> anyhow::Result<PathBuf> {
        anyhow::bail!("{} keeps no files beside its conversations", self.title())
    }

    // Summaries.

    /// Its headless run that writes session summaries, or why it writes none.
    fn summarizer(&self) -> Result<&'static dyn Summarizer, &'static str>;
}

/// An agent's CLI run headless to write a session summary. It must offer the model no tool
/// at all, so that nothing in a transcript can make the model run anything.
pub trait Summarizer: Sync {
    /// The arguments of a run that reads its input on stdin and asks `ask`; `scratch` is a
    /// private directory for its files.
    fn args(&self, ask: &str, scratch: &Path) -> anyhow::Result<Vec<String>>;

    /// The field of its JSON output that holds the answer.
    fn answer_field(&self) -> &'static str {
        "response"
    }

    /// Takes away what the run `started` then left behind.
    fn clean_up(&self, _started: SystemTime, _ask: &str) {}
}
