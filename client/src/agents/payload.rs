//! The JSON an agent writes on a hook's stdin. Every field is optional: agents and their
//! versions differ (AGENT_HOOKS.md), and a hook must cope with whatever arrives.

use std::path::PathBuf;

use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Payload {
    pub session_id: Option<String>,
    /// Cursor's name for the session id.
    pub conversation_id: Option<String>,
    pub transcript_path: Option<String>,
    pub cwd: Option<String>,
    /// Cursor sends workspace roots instead of a cwd.
    pub workspace_roots: Option<Vec<String>>,
    pub hook_event_name: Option<String>,
    /// SessionStart: startup | resume | clear | compact | fork.
    pub source: Option<String>,
    pub reason: Option<String>,
    pub trigger: Option<String>,
    pub tool_name: Option<String>,
    pub tool_input: Option<Value>,
    pub tool_response: Option<Value>,
    /// Claude Code / Codex Stop.
    pub last_assistant_message: Option<String>,
    /// Gemini AfterAgent.
    pub prompt_response: Option<String>,
    pub prompt: Option<String>,
    /// Cursor beforeShellExecution.
    pub command: Option<String>,
    /// Claude Code's PostToolUseFailure and StopFailure: what went wrong (text or object).
    pub error: Option<Value>,
    /// PostCompact: the summary the compaction made.
    pub compact_summary: Option<String>,
    /// SubagentStop: which subagent.
    pub agent_type: Option<String>,
}

impl Payload {
    /// The payload, or why the input is not one: not a JSON object, or without the
    /// conversation id every agent sends (a hook must start nothing from such input).
    pub fn parse(stdin: &str) -> Result<Self, String> {
        if stdin.trim().is_empty() {
            return Err("no payload on stdin".into());
        }
        let payload: Self = serde_json::from_str(stdin)
            .map_err(|e| format!("the payload is not a hook's JSON object ({e})"))?;
        if payload.agent_session_id().is_none() {
            return Err("the payload has no session_id (or conversation_id)".into());
        }
        Ok(payload)
    }

    pub fn agent_session_id(&self) -> Option<&str> {
        self.session_id.as_deref().or(self.conversation_id.as_deref()).filter(|s| !s.is_empty())
    }

    /// The working directory: the payload's cwd, else Cursor's first workspace root, else
    /// the agent's project dir variables, else this process' cwd.
    pub fn cwd(&self) -> PathBuf {
        let from_env = ["CLAUDE_PROJECT_DIR", "CURSOR_PROJECT_DIR", "GEMINI_PROJECT_DIR"]
            .iter()
            .find_map(|k| std::env::var(k).ok());
        self.cwd
            .clone()
            .filter(|c| !c.is_empty())
            .or_else(|| self.workspace_roots.as_ref().and_then(|r| r.first().cloned()))
            .or(from_env)
            .map(PathBuf::from)
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_else(|| PathBuf::from("."))
    }

    pub fn transcript(&self) -> Option<PathBuf> {
        self.transcript_path
            .clone()
            .or_else(|| std::env::var("CURSOR_TRANSCRIPT_PATH").ok())
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
    }

    /// The shell command a tool is about to run, if any.
    pub fn shell_command(&self) -> Option<String> {
        if let Some(c) = &self.command {
            return Some(c.clone());
        }
        let input = self.tool_input.as_ref()?;
        input.get("command").and_then(Value::as_str).map(str::to_owned).or_else(|| {
            input
                .get("command")
                .and_then(Value::as_array)
                .map(|parts| parts.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" "))
        })
    }

    /// The error a failure event reported, as text.
    pub fn error_text(&self) -> Option<String> {
        match self.error.as_ref()? {
            Value::Null => None,
            Value::String(s) => Some(s.clone()),
            other => Some(
                other.get("message").and_then(Value::as_str).map_or_else(|| other.to_string(), str::to_owned),
            ),
        }
    }

    pub fn last_answer(&self) -> Option<&str> {
        self.last_assistant_message.as_deref().or(self.prompt_response.as_deref()).filter(|s| !s.is_empty())
    }
}
