//! The tools' arguments: each field's description is what the model reads.

use rmcp::schemars;
use serde::Deserialize;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Brief {
    /// Most characters the brief may have (500 to 50000). Default: what this agent's
    /// SessionStart brief gets.
    #[schemars(range(min = 500, max = 50_000))]
    pub budget: Option<u32>,
}

/// What kind of thing to remember.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// What the project is working towards now (a current-state set).
    Goal,
    /// A rule every session must follow, e.g. "no new dependencies" (a current-state set).
    Constraint,
    /// Something started and not finished, or a question still open (a current-state set).
    OpenLoop,
    /// A choice made, with its rationale (appended to the project's decision history).
    Decision,
    /// A fact under a key, e.g. key "deploy" (a later note with the same key replaces it).
    Note,
}

impl Category {
    pub fn name(self) -> &'static str {
        match self {
            Self::Goal => "goal",
            Self::Constraint => "constraint",
            Self::OpenLoop => "open_loop",
            Self::Decision => "decision",
            Self::Note => "note",
        }
    }
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Remember {
    /// goal, constraint or open_loop (current state, shared by every session of the
    /// project), decision (with rationale) or note (with key).
    pub category: Category,
    /// The item, in one or two plain sentences a later session can act on.
    pub text: String,
    /// Why (decisions): what was weighed and what it rules out.
    pub rationale: Option<String>,
    /// The note's key (required for notes, e.g. "deploy", "retry-policy").
    pub key: Option<String>,
    /// Scope it to this git branch instead of the whole project.
    pub branch: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Forget {
    /// The entry's id as `recall` shows it (the full id, or its last 8+ characters).
    pub id: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Recall {
    /// Only this category: goal, constraint, open_loop, recent_change, decision,
    /// session_summary, extracted_decision (decisions a model found in a session's
    /// transcript) or note. Default: all of them.
    #[schemars(extend("enum" = ["goal", "constraint", "open_loop", "recent_change", "decision", "session_summary", "extracted_decision", "note"]))]
    pub category: Option<String>,
    /// Also decisions and summaries evicted from the brief by the history cap.
    #[serde(default)]
    pub include_evicted: bool,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Sessions {
    /// Only sessions with these statuses: active, idle, completed, crashed, resumed,
    /// initializing. Default: all.
    #[serde(default)]
    #[schemars(extend("items" = {"type": "string", "enum": ["active", "idle", "completed", "crashed", "resumed", "initializing"]}))]
    pub status: Vec<String>,
    /// How many, newest first (1 to 50, default 10).
    #[schemars(range(min = 1, max = 50))]
    pub limit: Option<u32>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Session {
    /// The session's id as `sessions` shows it (full, or its first or last 8+ characters).
    pub id: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Task {
    /// What the task is.
    pub content: String,
    /// pending, in_progress or completed.
    #[schemars(extend("enum" = ["pending", "in_progress", "completed"]))]
    pub status: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Decision {
    /// The choice made.
    pub decision: String,
    /// Why: what was weighed and what it rules out.
    pub rationale: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    /// Why now, e.g. "before switching the storage engine".
    pub reason: String,
    /// This session's tasks with their status (replaces the task list Baton recorded).
    #[serde(default)]
    pub tasks: Vec<Task>,
    /// Decisions made in this session.
    #[serde(default)]
    pub decisions: Vec<Decision>,
    /// Questions still open.
    #[serde(default)]
    pub open_questions: Vec<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Conflicts {}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Search {
    /// Words (all must match), "quoted phrases" (side by side), -word to exclude, and OR
    /// between two terms for either. Identifiers and paths are found by their parts:
    /// `auth.rs`, `retry_policy`, `RetryPolicy`.
    pub query: String,
    /// Only these kinds: memory, checkpoint, session. Default: all.
    #[serde(default)]
    #[schemars(extend("items" = {"type": "string", "enum": ["memory", "checkpoint", "session"]}))]
    pub kinds: Vec<String>,
    /// Only records of this session (its id as `sessions` shows it).
    pub session: Option<String>,
    /// Only records on this branch.
    pub branch: Option<String>,
    /// How many hits, best first (1 to 50, default 10).
    #[schemars(range(min = 1, max = 50))]
    pub limit: Option<u32>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Reserve {
    /// Files or directories to reserve, relative to the project's directory (a directory
    /// covers everything in it).
    #[serde(default)]
    pub paths: Vec<String>,
    /// Tasks to reserve by key: an issue id, a task title.
    #[serde(default)]
    pub tasks: Vec<String>,
    /// Why: shown to any session that is kept off them.
    pub reason: Option<String>,
    /// When another session holds them, wait this many seconds in line (0 to 600, default
    /// 0: answer at once).
    #[schemars(range(min = 0, max = 600))]
    pub wait_seconds: Option<u32>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Release {
    /// Files or directories to release (as reserved).
    #[serde(default)]
    pub paths: Vec<String>,
    /// Tasks to release.
    #[serde(default)]
    pub tasks: Vec<String>,
    /// Release everything this session holds or waits for.
    #[serde(default)]
    pub all: bool,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Reservations {
    /// Only reservations overlapping these files or directories. Default: all.
    #[serde(default)]
    pub paths: Vec<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Why {
    /// The file, relative to where the agent works (or absolute, inside the repository).
    pub file: String,
    /// The first line to explain (from 1). Default: the whole file.
    #[serde(default)]
    pub first_line: Option<u32>,
    /// The last line to explain. Default: first_line.
    #[serde(default)]
    pub last_line: Option<u32>,
}
