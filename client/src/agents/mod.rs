//! The agents Baton hooks into: one module each (what it is called, its hooks and settings
//! files, its MCP registration, its transcripts, its summaries: its [`Spec`]), the list of
//! them ([`Agent::ALL`]), and the machinery they share: installing hooks, registering the
//! MCP server, reading payloads and transcripts, running summaries.

pub mod claude;
pub mod codex;
pub mod cursor;
pub mod files;
pub mod gemini;
pub mod install;
pub mod mcp;
pub mod payload;
pub mod spec;
pub mod summary;
pub mod transcript;

use baton_proto::v1::AgentKind;

pub use spec::Spec;

/// What a pre-tool hook tells the agent (`hook::reserved`); each agent words it its own way
/// (`Spec::pre_tool_output`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The call goes ahead; the model reads this.
    Warn(String),
    /// The call is refused; the model reads this as the reason.
    Deny(String),
}

/// The agents Baton knows, in the order Baton lists them. Adding one: its module beside
/// these (implementing [`Spec`]) and its line here. On the wire an agent is also its
/// `AgentKind` in baton.proto and its resume command in `baton_proto::agent`, which the hub
/// gives too.
impl Agent {
    pub const ALL: &'static [Self] = &[claude::AGENT, codex::AGENT, gemini::AGENT, cursor::AGENT];
}

/// One of the agents: a handle on what its module knows ([`Spec`]), which the shared
/// machinery (hooks, install, MCP, summaries, doctor) asks instead of naming agents.
#[derive(Clone, Copy)]
pub struct Agent(&'static dyn Spec);

impl Agent {
    pub const fn new(spec: &'static dyn Spec) -> Self {
        Self(spec)
    }

    /// The agent of a `name()`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|a| a.name() == name)
    }

    /// The agent of a session's kind as the hub records it.
    pub fn from_kind(kind: i32) -> Option<Self> {
        let kind = AgentKind::try_from(kind).ok()?;
        Self::ALL.iter().copied().find(|a| a.kind() == kind)
    }

    /// The names of the agents `which` picks, in the list's order.
    pub fn names(which: impl Fn(Self) -> bool) -> Vec<String> {
        Self::ALL.iter().copied().filter(|a| which(*a)).map(|a| a.name().to_owned()).collect()
    }

    /// Claude Code's cap on injected context is 10,000 characters; the others take at
    /// least that. Leave room for the JSON around it.
    pub const MAX_BRIEF_CHARS: usize = 9_500;
}

impl std::ops::Deref for Agent {
    type Target = dyn Spec;

    fn deref(&self) -> &Self::Target {
        self.0
    }
}

impl PartialEq for Agent {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name()
    }
}

impl Eq for Agent {}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// `baton init <agent>` and the like take the agents' names.
impl clap::ValueEnum for Agent {
    fn value_variants<'a>() -> &'a [Self] {
        Self::ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.name()))
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
