//! The agents Baton hooks into, their event names, and how each wants the brief; the hooks
//! in their settings files, the MCP server registered with them, Codex' trust, and the
//! summaries their CLIs write.

pub mod claude;
pub mod codex;
pub mod cursor;
pub mod files;
pub mod gemini;
pub mod install;
pub mod mcp;
pub mod payload;
pub mod summary;
pub mod transcript;

use std::path::{Path, PathBuf};

use baton_proto::v1::BlobRef;

use baton_proto::v1::AgentKind;

/// The agents Baton knows. Adding one: its module here, a variant, and its arm in each
/// `match` on `Agent` (the compiler lists them): what it is called, its hooks, files,
/// transcripts and summaries. Its resume command is `baton_proto::agent::resume_argv`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Agent {
    Claude,
    Codex,
    Gemini,
    Cursor,
}

impl Agent {
    pub fn name(self) -> &'static str {
        match self {
            Self::Claude => "claude",
            Self::Codex => "codex",
            Self::Gemini => "gemini",
            Self::Cursor => "cursor",
        }
    }

    pub const ALL: [Self; 4] = [Self::Claude, Self::Codex, Self::Gemini, Self::Cursor];

    /// The agent of a `name()`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.name() == name)
    }

    /// The agent of a session's kind as the hub records it.
    pub fn from_kind(kind: i32) -> Option<Self> {
        let kind = AgentKind::try_from(kind).ok()?;
        Self::ALL.into_iter().find(|a| a.kind() == kind)
    }

    /// The hooks Baton installs for this agent.
    pub fn hooks(self) -> &'static [Hook] {
        match self {
            Self::Claude => claude::HOOKS,
            Self::Codex => codex::HOOKS,
            Self::Gemini => gemini::HOOKS,
            Self::Cursor => cursor::HOOKS,
        }
    }

    /// The settings file its hooks go in, for a scope.
    pub fn settings_file(self, scope: Scope, project_root: &Path) -> anyhow::Result<PathBuf> {
        match self {
            Self::Claude => claude::settings_file(scope, project_root),
            Self::Codex => codex::settings_file(scope, project_root),
            Self::Gemini => gemini::settings_file(scope, project_root),
            Self::Cursor => cursor::settings_file(scope, project_root),
        }
    }

    /// The files its MCP server entry and the permission to call it go in, for a scope.
    pub fn mcp_files(self, scope: Scope, root: &Path) -> anyhow::Result<mcp::Files> {
        match self {
            Self::Claude => claude::mcp_files(scope, root),
            Self::Codex => codex::mcp_files(scope, root),
            Self::Gemini => gemini::mcp_files(scope, root),
            Self::Cursor => cursor::mcp_files(scope, root),
        }
    }

    /// Writes a conversation's transcript where this agent looks for it for `cwd` on this
    /// machine (`home`), with the project path it was written at rewritten. The file.
    pub fn restore_transcript(
        self,
        data: &[u8],
        blob: &BlobRef,
        cwd: &Path,
        home: &Path,
    ) -> anyhow::Result<PathBuf> {
        match self {
            Self::Claude => claude::restore(data, blob, cwd, home),
            Self::Codex => codex::restore(data, blob, cwd, home),
            Self::Gemini => gemini::restore(data, blob, cwd, home),
            Self::Cursor => anyhow::bail!("Cursor's conversations are not carried between machines"),
        }
    }

    /// Whether this machine holds the agent's conversation (so the agent's own resume works).
    pub fn conversation_here(self, home: &Path, agent_session_id: &str) -> bool {
        match self {
            Self::Claude => claude::conversation_here(home, agent_session_id),
            Self::Codex => codex::rollout(home, agent_session_id).is_some(),
            // Gemini names a chat by the id's first 8 characters; its first line has the id.
            Self::Gemini => gemini::chat(home, agent_session_id).is_some(),
            Self::Cursor => false,
        }
    }

    pub fn kind(self) -> AgentKind {
        match self {
            Self::Claude => AgentKind::ClaudeCode,
            Self::Codex => AgentKind::Codex,
            Self::Gemini => AgentKind::Gemini,
            Self::Cursor => AgentKind::Cursor,
        }
    }

    /// The brief as this agent injects it into the model's context (Claude Code, Codex and
    /// Gemini take `hookSpecificOutput.additionalContext`; Cursor `additional_context`).
    pub fn brief_output(self, text: &str) -> String {
        let value = match self {
            Self::Cursor => serde_json::json!({ "additional_context": text }),
            _ => serde_json::json!({
                "hookSpecificOutput": { "hookEventName": "SessionStart", "additionalContext": text }
            }),
        };
        value.to_string()
    }

    /// What to print for events whose output is ignored or must not steer the agent:
    /// nothing for Claude Code and Codex (Codex' Stop rejects plain text), an empty JSON
    /// object where stdout must be JSON (Gemini, Cursor).
    pub fn quiet_output(self) -> &'static str {
        match self {
            Self::Claude | Self::Codex => "",
            Self::Gemini | Self::Cursor => "{}",
        }
    }

    /// Claude Code's cap on injected context is 10,000 characters; the others take at
    /// least that. Leave room for the JSON around it.
    pub const MAX_BRIEF_CHARS: usize = 9_500;

    /// What this agent shows the model inline, with a margin, in characters: Claude Code
    /// moves context over 10,000 characters to a file and shows a 2,000-character preview;
    /// Codex does the same past 2,500 tokens (6,000 characters stay under that even for
    /// text of 2.4 characters a token); Gemini and Cursor take the common cap.
    pub fn default_budget(self) -> usize {
        match self {
            Self::Codex => 6_000,
            Self::Claude | Self::Gemini | Self::Cursor => 9_000,
        }
    }
}

/// Where hooks and MCP servers go: the user's settings (every project) or this project's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scope {
    User,
    Project,
}

/// One hook Baton installs.
pub struct Hook {
    /// The agent's event name.
    pub event: &'static str,
    pub matcher: Option<&'static str>,
    /// In the agent's unit (seconds, or milliseconds for Gemini).
    pub timeout: u64,
}

impl Hook {
    pub const fn new(event: &'static str, matcher: Option<&'static str>, timeout: u64) -> Self {
        Self { event, matcher, timeout }
    }
}

/// Baton's own names for the hook events it handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    SessionStart,
    /// A prompt the user submitted (Claude/Codex UserPromptSubmit, Gemini BeforeAgent).
    Prompt,
    PreToolUse,
    PostToolUse,
    /// A tool call that failed (Claude Code's PostToolUseFailure, Cursor's).
    ToolFailure,
    PreCompact,
    /// After a compaction, with its summary (Claude Code, Codex).
    PostCompact,
    Stop,
    /// A turn that ended in an API error (Claude Code).
    StopFailure,
    /// A subagent finished (Claude Code, Codex).
    SubagentStop,
    SessionEnd,
}

impl Event {
    /// Accepts each agent's spelling (Claude/Codex `PreCompact`, Gemini `PreCompress`,
    /// Gemini `AfterAgent` for a turn's end, Cursor's camelCase, kebab-case).
    pub fn parse(name: &str) -> Option<Self> {
        let n: String =
            name.chars().filter(char::is_ascii_alphanumeric).collect::<String>().to_ascii_lowercase();
        Some(match n.as_str() {
            "sessionstart" => Self::SessionStart,
            "userpromptsubmit" | "beforeagent" | "beforesubmitprompt" => Self::Prompt,
            "posttoolusefailure" => Self::ToolFailure,
            "postcompact" => Self::PostCompact,
            "stopfailure" => Self::StopFailure,
            "subagentstop" => Self::SubagentStop,
            "pretooluse" | "beforetool" | "beforeshellexecution" => Self::PreToolUse,
            "posttooluse" | "aftertool" | "aftershellexecution" | "afterfileedit" => Self::PostToolUse,
            "precompact" | "precompress" => Self::PreCompact,
            "stop" | "afteragent" => Self::Stop,
            "sessionend" => Self::SessionEnd,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests;
