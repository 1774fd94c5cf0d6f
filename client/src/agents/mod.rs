//! The agents Baton hooks into, their event names, and how each wants the brief; the hooks
//! in their settings files, the MCP server registered with them, Codex' trust, and the
//! summaries their CLIs write.

pub mod codex_trust;
pub mod install;
pub mod mcp;
pub mod payload;
pub mod summary;
pub mod transcript;

use baton_proto::v1::AgentKind;

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

    /// The agent of a `name()`.
    pub fn from_name(name: &str) -> Option<Self> {
        [Self::Claude, Self::Codex, Self::Gemini, Self::Cursor].into_iter().find(|a| a.name() == name)
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
