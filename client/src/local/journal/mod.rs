//! What a conversation did, built from the hook payloads as they arrive: tasks and their
//! status, files created/modified/deleted (from the tools' results, not their requests),
//! tool calls and errors, the last prompt and answer. The agents' transcripts lag the hooks
//! (Claude Code's does not exist at SessionStart and trails PostToolUse by a step), so the
//! payloads are the source and the transcript a complement (`merge`).
//!
//! Kept per conversation in the hook state (`state.rs`, under its lock: hooks of parallel
//! tool calls run at once), capped in size and redacted as it is recorded. Pure: no I/O.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use baton_proto::v1::{CheckpointState, Task, ToolCall};
use serde::{Deserialize, Serialize};
use serde_json::Value;

mod calls;

pub use self::calls::{Shell, shell_changes, shell_command};

const MAX_TOOLS: usize = 50;
const MAX_ERRORS: usize = 20;
const MAX_FILES: usize = 500;
const MAX_TASKS: usize = 200;
const MAX_TEXT: usize = 4000;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalTask {
    pub id: String,
    pub content: String,
    pub status: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalTool {
    pub name: String,
    pub summary: String,
    pub failed: bool,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Journal {
    pub tasks: Vec<JournalTask>,
    pub created: BTreeSet<String>,
    pub modified: BTreeSet<String>,
    pub deleted: BTreeSet<String>,
    pub tools: Vec<JournalTool>,
    pub tool_count: u64,
    pub errors: Vec<String>,
    pub last_prompt: String,
    pub last_answer: String,
    /// The latest compaction's summary.
    pub summary: String,
    /// The last failed call (tool and what it acted on), until a retry succeeds.
    pub failing: Option<(String, String)>,
    /// Secrets taken out of what was recorded.
    pub redacted: u32,
}

/// A tool call as a hook reports it.
#[derive(Debug, Clone, Copy)]
pub struct ToolUse<'a> {
    pub name: &'a str,
    pub input: &'a Value,
    pub response: &'a Value,
    /// The failure the agent reported (Claude Code's PostToolUseFailure), if any.
    pub error: Option<&'a str>,
    /// Where relative paths of the call start.
    pub cwd: &'a Path,
    /// The repository root: paths are stored relative to it, so another machine reads them.
    pub root: &'a Path,
}

/// Moments that deserve a checkpoint of their own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signal {
    /// A task was marked completed (its text).
    TaskCompleted(String),
    /// A call that had failed succeeded on a retry (tool and what it acted on).
    Recovered(String),
}

fn clip(text: &str, max: usize) -> String {
    crate::text::clip(text.trim(), max)
}

/// A path as stored: relative to the repository root when inside it, lexically normalized.
pub fn relative(path: &str, cwd: &Path, root: &Path) -> String {
    let joined = if Path::new(path).is_absolute() { PathBuf::from(path) } else { cwd.join(path) };
    let mut normal = PathBuf::new();
    for part in joined.components() {
        match part {
            Component::ParentDir => {
                normal.pop();
            }
            Component::CurDir => {}
            other => normal.push(other),
        }
    }
    match normal.strip_prefix(root) {
        Ok(inside) if !inside.as_os_str().is_empty() => inside.display().to_string(),
        _ => normal.display().to_string(),
    }
}

impl Journal {
    fn redact(&mut self, text: &str) -> String {
        let (clean, n) = baton_proto::redact::redact(text);
        self.redacted += n;
        clean.into_owned()
    }

    /// A journal that continues a checkpoint (a resumed session): its tasks and files.
    pub fn continuing(state: &CheckpointState) -> Self {
        Self {
            tasks: state
                .active_tasks
                .iter()
                .take(MAX_TASKS)
                .map(|t| JournalTask {
                    id: t.id.clone(),
                    content: t.content.clone(),
                    status: t.status.clone(),
                })
                .collect(),
            created: state.files_created.iter().take(MAX_FILES).cloned().collect(),
            modified: state.files_modified.iter().take(MAX_FILES).cloned().collect(),
            deleted: state.files_deleted.iter().take(MAX_FILES).cloned().collect(),
            ..Self::default()
        }
    }

    pub fn prompt(&mut self, prompt: &str) {
        // Gemini puts the SessionStart context before the prompt it reports.
        let prompt = match prompt.split_once("</hook_context>") {
            Some((_, rest)) if prompt.starts_with("<hook_context>") => rest.trim_start(),
            _ => prompt,
        };
        let clean = self.redact(prompt);
        self.last_prompt = clip(&clean, MAX_TEXT);
    }

    pub fn answer(&mut self, answer: &str) {
        let clean = self.redact(answer);
        self.last_answer = clip(&clean, MAX_TEXT);
    }

    /// A compaction's summary: the conversation's own account of itself.
    pub fn compacted(&mut self, summary: &str) {
        let clean = self.redact(summary);
        self.summary = clip(&clean, MAX_TEXT);
    }

    /// A call the hooks report without its input or result (a subagent that finished).
    pub fn note_tool(&mut self, name: &str, summary: &str) {
        self.tool_count += 1;
        let summary = clip(&self.redact(summary), 200);
        self.tools.push(JournalTool { name: name.to_owned(), summary, failed: false });
        let extra = self.tools.len().saturating_sub(MAX_TOOLS);
        self.tools.drain(..extra);
    }

    /// An error that is not a tool's (StopFailure).
    pub fn error(&mut self, text: &str) {
        let clean = self.redact(text);
        self.push_error(clip(&clean, 500));
    }

    fn push_error(&mut self, text: String) {
        self.errors.push(text);
        let extra = self.errors.len().saturating_sub(MAX_ERRORS);
        self.errors.drain(..extra);
    }

    /// The checkpoint state this journal describes.
    pub fn state(&self) -> CheckpointState {
        let done = self.tasks.iter().filter(|t| t.status == "completed").count();
        CheckpointState {
            active_tasks: self
                .tasks
                .iter()
                .map(|t| Task {
                    id: t.id.clone(),
                    content: t.content.clone(),
                    status: t.status.clone(),
                    progress: if t.status == "completed" { 100 } else { 0 },
                })
                .collect(),
            files_created: self.created.iter().cloned().collect(),
            files_modified: self.modified.iter().cloned().collect(),
            files_deleted: self.deleted.iter().cloned().collect(),
            tool_history: self
                .tools
                .iter()
                .map(|t| ToolCall { name: t.name.clone(), summary: t.summary.clone(), failed: t.failed })
                .collect(),
            tool_count: i64::try_from(self.tool_count).unwrap_or(i64::MAX),
            errors: self.errors.clone(),
            progress: if self.tasks.is_empty() {
                0
            } else {
                i32::try_from(done * 100 / self.tasks.len()).unwrap_or(0)
            },
            last_prompt: self.last_prompt.clone(),
            last_answer: self.last_answer.clone(),
            summary: self.summary.clone(),
            ..Default::default()
        }
    }

    /// Whether the hooks saw anything of this conversation (hooks installed mid-way see
    /// only its end: the transcript then carries what came before).
    pub fn is_empty(&self) -> bool {
        self.tool_count == 0 && self.tasks.is_empty() && self.last_prompt.is_empty()
    }
}

/// The checkpoint state: the journal, completed by what only the transcript has (a call no
/// hook reported, such as one the agent's own validation refused, or those before the hooks
/// were installed). For a file both know, the journal's account wins; tasks and tool history
/// are the journal's when it has any.
pub fn merge(journal: &Journal, transcript: CheckpointState) -> CheckpointState {
    if journal.is_empty() {
        return transcript;
    }
    let mut state = journal.state();
    if state.active_tasks.is_empty() {
        state.active_tasks = transcript.active_tasks;
        state.progress = transcript.progress;
    }
    let known: BTreeSet<String> =
        journal.created.iter().chain(&journal.modified).chain(&journal.deleted).cloned().collect();
    for (into, from) in [
        (&mut state.files_created, transcript.files_created),
        (&mut state.files_modified, transcript.files_modified),
        (&mut state.files_deleted, transcript.files_deleted),
    ] {
        into.extend(from.into_iter().filter(|f| !known.contains(f)));
        into.sort();
        into.dedup();
    }
    for error in transcript.errors {
        if !state.errors.contains(&error) && state.errors.len() < MAX_ERRORS {
            state.errors.push(error);
        }
    }
    if state.tool_history.is_empty() {
        state.tool_history = transcript.tool_history;
    }
    if state.last_answer.is_empty() {
        state.last_answer = transcript.last_answer;
    }
    if state.last_prompt.is_empty() {
        state.last_prompt = transcript.last_prompt;
    }
    if state.summary.is_empty() {
        state.summary = transcript.summary;
    }
    state.tool_count = state.tool_count.max(transcript.tool_count);
    state
}

#[cfg(test)]
mod tests;
