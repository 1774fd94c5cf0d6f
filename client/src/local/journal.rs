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

fn text_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => {
            other.get("llmContent").and_then(Value::as_str).map_or_else(|| other.to_string(), str::to_owned)
        }
    }
}

/// Gemini's shell reports a non-zero exit only in its text ("Exit Code: 2").
fn gemini_exit_code(response: &Value) -> Option<i64> {
    let text = response.get("llmContent").and_then(Value::as_str)?;
    let rest = text.split("Exit Code: ").nth(1)?;
    rest.split_whitespace().next()?.parse().ok()
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

    /// Records a tool call; returns the moments it makes.
    pub fn tool(&mut self, call: &ToolUse<'_>) -> Vec<Signal> {
        self.tool_count += 1;
        let failure = Self::failure_of(call);
        let path = ["file_path", "path", "notebook_path", "absolute_path"]
            .iter()
            .find_map(|k| call.input.get(*k).and_then(Value::as_str))
            .map(|p| relative(p, call.cwd, call.root));
        let command = shell_command(call.name, call.input);
        let target = command.map(str::to_owned).or_else(|| path.clone()).unwrap_or_default();
        let mut signals = Vec::new();
        if let Some(error) = &failure {
            let clean = self.redact(error);
            self.push_error(clip(&format!("{}: {clean}", call.name), 500));
            self.failing = Some((call.name.to_owned(), target.clone()));
        } else {
            if self.failing.as_ref().is_some_and(|(name, t)| name == call.name && *t == target) {
                self.failing = None;
                signals.push(Signal::Recovered(clip(&format!("{} {target}", call.name), 200)));
            }
            signals.extend(self.effects(call, path.as_deref(), command));
        }
        let summary = clip(&self.redact(&target), 200);
        self.tools.push(JournalTool { name: call.name.to_owned(), summary, failed: failure.is_some() });
        let extra = self.tools.len().saturating_sub(MAX_TOOLS);
        self.tools.drain(..extra);
        signals
    }

    /// Why a call failed, from what the agent reported and the result itself.
    fn failure_of(call: &ToolUse<'_>) -> Option<String> {
        if let Some(error) = call.error {
            return Some(error.to_owned());
        }
        let r = call.response;
        if let Some(error) = r.get("error").filter(|e| !e.is_null()) {
            return Some(
                error.get("message").and_then(Value::as_str).map_or_else(|| error.to_string(), str::to_owned),
            );
        }
        if r.get("success").and_then(Value::as_bool) == Some(false) {
            return Some(text_of(r));
        }
        if let Some(code) = gemini_exit_code(r).filter(|c| *c != 0) {
            return Some(format!("exit code {code}: {}", clip(&text_of(r), 300)));
        }
        // Codex reports results as text that starts with the exit code.
        if let Some(code) =
            r.as_str().and_then(|t| t.strip_prefix("Exit code: ")).and_then(|t| t.lines().next())
            && code.trim() != "0"
        {
            return Some(clip(r.as_str().unwrap_or_default(), 300));
        }
        None
    }

    /// What a successful call changed: tasks, files.
    fn effects(&mut self, call: &ToolUse<'_>, path: Option<&str>, command: Option<&str>) -> Vec<Signal> {
        let (input, response) = (call.input, call.response);
        match call.name {
            "TaskCreate" => self.task_created(input, response),
            "TaskUpdate" => return self.task_updated(input, response),
            // A whole list each time: Claude Code's TodoWrite, Codex's update_plan, Gemini's
            // write_todos.
            "TodoWrite" | "update_plan" | "write_todos" => return self.task_list(input),
            "Write" => match (path, response.get("type").and_then(Value::as_str)) {
                (Some(p), Some("create")) => self.created_file(p),
                (Some(p), Some("update")) => self.modified_file(p),
                _ => {}
            },
            "write_file" => match path {
                Some(p) if text_of(response).contains("Successfully created") => self.created_file(p),
                Some(p) => self.modified_file(p),
                None => {}
            },
            "Edit" | "MultiEdit" | "NotebookEdit" | "replace" | "edit_file" => {
                if let Some(p) = path {
                    self.modified_file(p);
                }
            }
            "apply_patch" => {
                // The result lists what the patch did: "A path", "M path", "D path".
                for line in text_of(response).lines() {
                    match line.split_once(' ') {
                        Some(("A", p)) => self.created_file(&relative(p, call.cwd, call.root)),
                        Some(("M", p)) => self.modified_file(&relative(p, call.cwd, call.root)),
                        Some(("D", p)) => self.deleted_file(&relative(p, call.cwd, call.root)),
                        _ => {}
                    }
                }
            }
            _ => {
                if let Some(command) = command {
                    self.shell_effects(call, command);
                }
            }
        }
        vec![]
    }

    /// Claude Code's TaskCreate: the id is in the tool's response only.
    fn task_created(&mut self, input: &Value, response: &Value) {
        let content = input.get("subject").and_then(Value::as_str).unwrap_or_default();
        let id = response
            .pointer("/task/id")
            .and_then(Value::as_str)
            .map_or_else(|| (self.tasks.len() + 1).to_string(), str::to_owned);
        if self.tasks.len() < MAX_TASKS {
            let content = self.redact(content);
            self.tasks.push(JournalTask { id, content: clip(&content, 500), status: "pending".into() });
        }
    }

    /// Claude Code's TaskUpdate: a status change (or a deletion) of a task by its id.
    fn task_updated(&mut self, input: &Value, response: &Value) -> Vec<Signal> {
        let id = input.get("taskId").map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned));
        let status = response
            .pointer("/statusChange/to")
            .or_else(|| input.get("status"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let subject = input.get("subject").and_then(Value::as_str).map(|s| clip(s, 500));
        let Some(id) = id else { return vec![] };
        if status.as_deref() == Some("deleted") {
            self.tasks.retain(|t| t.id != id);
            return vec![];
        }
        let Some(task) = self.tasks.iter_mut().find(|t| t.id == id) else { return vec![] };
        if let Some(subject) = subject {
            task.content = subject;
        }
        let mut signals = vec![];
        if let Some(status) = status {
            if status == "completed" && task.status != "completed" {
                signals.push(Signal::TaskCompleted(task.content.clone()));
            }
            task.status = status;
        }
        signals
    }

    /// A whole task list (TodoWrite, update_plan, write_todos): replaces the tasks.
    fn task_list(&mut self, input: &Value) -> Vec<Signal> {
        let items = input.get("todos").or_else(|| input.get("plan")).and_then(Value::as_array);
        let Some(items) = items else { return vec![] };
        let before = std::mem::take(&mut self.tasks);
        let mut signals = vec![];
        for (i, item) in items.iter().take(MAX_TASKS).enumerate() {
            let content = ["content", "step", "description"]
                .iter()
                .find_map(|k| item.get(*k).and_then(Value::as_str))
                .unwrap_or_default();
            let content = clip(&self.redact(content), 500);
            let status = item.get("status").and_then(Value::as_str).unwrap_or("pending").to_owned();
            let was_done = before.iter().any(|t| t.content == content && t.status == "completed");
            if status == "completed" && !was_done {
                signals.push(Signal::TaskCompleted(content.clone()));
            }
            let id =
                item.get("id").and_then(Value::as_str).map_or_else(|| (i + 1).to_string(), str::to_owned);
            self.tasks.push(JournalTask { id, content, status });
        }
        signals
    }

    /// The files a shell command removed or moved, relative to the repository's root.
    fn shell_effects(&mut self, call: &ToolUse<'_>, command: &str) {
        let input = call.input;
        let workdir = ["workdir", "dir_path", "cwd"]
            .iter()
            .find_map(|k| input.get(*k).and_then(Value::as_str))
            .map_or_else(|| call.cwd.to_path_buf(), |d| call.cwd.join(d));
        for change in shell_changes(command) {
            match change {
                Shell::Removed(p) => self.deleted_file(&relative(&p, &workdir, call.root)),
                Shell::Moved(from, to) => {
                    self.deleted_file(&relative(&from, &workdir, call.root));
                    self.created_file(&relative(&to, &workdir, call.root));
                }
            }
        }
    }

    fn created_file(&mut self, path: &str) {
        // A file deleted and written again in one conversation was there before it.
        if self.deleted.remove(path) {
            self.modified.insert(path.to_owned());
        } else if !self.modified.contains(path) && self.created.len() < MAX_FILES {
            self.created.insert(path.to_owned());
        }
    }

    fn modified_file(&mut self, path: &str) {
        if !self.created.contains(path) && self.modified.len() < MAX_FILES {
            self.modified.insert(path.to_owned());
        }
    }

    fn deleted_file(&mut self, path: &str) {
        // Created and deleted within the conversation: it never was.
        if self.created.remove(path) {
            return;
        }
        self.modified.remove(path);
        if self.deleted.len() < MAX_FILES {
            self.deleted.insert(path.to_owned());
        }
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

/// The shell command of a call: Claude Code's and Codex's `Bash {command}`, Gemini's
/// `run_shell_command {command}`, Codex's rollout `exec_command {cmd}`, Cursor's shell.
pub fn shell_command<'a>(name: &str, input: &'a Value) -> Option<&'a str> {
    match name {
        "Bash" | "bash" | "shell" | "run_shell_command" | "exec_command" | "local_shell" | "Shell" => {
            input.get("command").or_else(|| input.get("cmd")).and_then(Value::as_str)
        }
        _ => None,
    }
}

/// What a shell command did to files, as far as its words say: `rm`, `git rm`, `mv`,
/// `git mv` (the hooks run after the command succeeded).
#[derive(Debug, PartialEq, Eq)]
pub enum Shell {
    Removed(String),
    Moved(String, String),
}

pub fn shell_changes(command: &str) -> Vec<Shell> {
    let mut out = Vec::new();
    for part in command.split(['\n', ';', '&', '|']) {
        let Some(words) = shlex::split(part) else { continue };
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        let args: &[&str] = match words.as_slice() {
            ["git", "rm" | "mv", rest @ ..] | ["rm" | "mv", rest @ ..] => rest,
            _ => continue,
        };
        let verb = if words[0] == "git" { words[1] } else { words[0] };
        let paths: Vec<&str> = args.iter().copied().filter(|a| !a.starts_with('-')).collect();
        match (verb, paths.as_slice()) {
            ("rm", paths) => out.extend(paths.iter().map(|p| Shell::Removed((*p).to_owned()))),
            ("mv", [from, to]) => out.push(Shell::Moved((*from).to_owned(), (*to).to_owned())),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Recorded hook payloads of the real CLIs (tests/agents/payloads).
    fn recorded(agent: &str) -> Value {
        let text = match agent {
            "claude" => include_str!("../../../tests/agents/payloads/claude-hook-payloads.json"),
            "codex" => include_str!("../../../tests/agents/payloads/codex-hook-payloads.json"),
            _ => include_str!("../../../tests/agents/payloads/gemini-hook-payloads.json"),
        };
        serde_json::from_str(text).unwrap()
    }

    fn replay(journal: &mut Journal, payload: &Value, root: &Path) -> Vec<Signal> {
        let p = &payload["stdin"];
        let cwd = PathBuf::from(p["cwd"].as_str().unwrap());
        journal.tool(&ToolUse {
            name: p["tool_name"].as_str().unwrap(),
            input: &p["tool_input"],
            response: &p["tool_response"],
            error: p["error"].as_str(),
            cwd: &cwd,
            root,
        })
    }

    #[test]
    fn claude_tasks_files_and_failures_from_recorded_payloads() {
        let r = recorded("claude");
        let root = PathBuf::from(r["PostToolUse:Write"]["stdin"]["cwd"].as_str().unwrap());
        let mut j = Journal::default();
        j.prompt(r["UserPromptSubmit"]["stdin"]["prompt"].as_str().unwrap());
        // Two tasks created (the recorded payload is the first; the second is the same shape).
        replay(&mut j, &r["PostToolUse:TaskCreate"], &root);
        let mut second = r["PostToolUse:TaskCreate"].clone();
        second["stdin"]["tool_input"]["subject"] = json!("Fuzz it");
        second["stdin"]["tool_response"]["task"]["id"] = json!("2");
        replay(&mut j, &second, &root);
        let signals = replay(&mut j, &r["PostToolUse:TaskUpdate"], &root);
        assert_eq!(signals, vec![Signal::TaskCompleted("Write hello file".into())]);
        replay(&mut j, &r["PostToolUse:Write"], &root);
        replay(&mut j, &r["PostToolUse:Bash"], &root);
        let state = j.state();
        let tasks: Vec<(&str, &str)> =
            state.active_tasks.iter().map(|t| (t.content.as_str(), t.status.as_str())).collect();
        assert_eq!(tasks, [("Write hello file", "completed"), ("Fuzz it", "pending")]);
        assert_eq!(state.files_created, ["hello.txt"]);
        assert_eq!(state.files_deleted, ["doomed.txt"]);
        assert_eq!(state.last_prompt, "Do the scripted steps");
        assert_eq!(state.progress, 50);
        // A failure (PostToolUseFailure), then the same command succeeding: recovered.
        replay(&mut j, &r["PostToolUseFailure:Bash"], &root);
        assert!(j.errors[0].starts_with("Bash: Exit code 2"), "{:?}", j.errors);
        assert!(j.tools.last().unwrap().failed);
        let mut retry = r["PostToolUseFailure:Bash"].clone();
        retry["stdin"]["error"] = Value::Null;
        retry["stdin"]["tool_response"] = json!({"stdout": "", "stderr": ""});
        assert_eq!(replay(&mut j, &retry, &root), vec![Signal::Recovered("Bash ls /nonexistent-dir".into())]);
        assert_eq!(j.tool_count, 7);
    }

    #[test]
    fn overwrites_and_failed_writes_are_classified_by_result() {
        let root = PathBuf::from("/repo");
        let mut j = Journal::default();
        let write = |j: &mut Journal, response: Value| {
            let input = json!({"file_path": "/repo/src/a.rs", "content": "x"});
            j.tool(&ToolUse {
                name: "Write",
                input: &input,
                response: &response,
                error: None,
                cwd: &root,
                root: &root,
            })
        };
        write(&mut j, json!({"type": "update", "filePath": "/repo/src/a.rs"}));
        assert_eq!(j.state().files_modified, ["src/a.rs"]);
        assert!(j.state().files_created.is_empty(), "an overwrite is not a creation");
        // A refused write (no result) changes nothing.
        let mut k = Journal::default();
        write(&mut k, Value::Null);
        assert!(k.state().files_created.is_empty() && k.state().files_modified.is_empty());
    }

    #[test]
    fn codex_plan_shell_and_patch_from_recorded_payloads() {
        let r = recorded("codex");
        let root = PathBuf::from(r["PostToolUse:Bash"]["stdin"]["cwd"].as_str().unwrap());
        let mut j = Journal::default();
        replay(&mut j, &r["PostToolUse:update_plan"], &root);
        replay(&mut j, &r["PostToolUse:apply_patch"], &root);
        let mut rm = r["PostToolUse:Bash"].clone();
        rm["stdin"]["tool_input"]["command"] = json!("rm doomed.txt && git mv old.txt new.txt");
        replay(&mut j, &rm, &root);
        let state = j.state();
        let tasks: Vec<(&str, &str)> =
            state.active_tasks.iter().map(|t| (t.content.as_str(), t.status.as_str())).collect();
        assert_eq!(tasks, [("Create files", "in_progress"), ("Delete doomed", "pending")]);
        assert_eq!(state.files_created, ["hello.txt", "new.txt"]);
        assert_eq!(state.files_modified, ["existing.txt"]);
        assert_eq!(state.files_deleted, ["doomed.txt", "old.txt"]);
        // The plan moves on: a step completed is a moment.
        let mut plan = r["PostToolUse:update_plan"].clone();
        plan["stdin"]["tool_input"]["plan"][0]["status"] = json!("completed");
        assert_eq!(replay(&mut j, &plan, &root), vec![Signal::TaskCompleted("Create files".into())]);
    }

    #[test]
    fn gemini_todos_writes_shell_and_errors_from_recorded_payloads() {
        let r = recorded("gemini");
        let root = PathBuf::from(r["AfterTool:write_file"]["stdin"]["cwd"].as_str().unwrap());
        let mut j = Journal::default();
        j.prompt(r["BeforeAgent"]["stdin"]["prompt"].as_str().unwrap());
        assert_eq!(j.last_prompt, "Do the scripted steps", "the hook context is not the prompt");
        for event in [
            "AfterTool:write_todos",
            "AfterTool:write_file",
            "AfterTool:run_shell_command",
            "AfterTool:read_file",
        ] {
            replay(&mut j, &r[event], &root);
        }
        let state = j.state();
        assert_eq!(state.active_tasks.len(), 2);
        assert_eq!(state.files_created, ["hello.txt"]);
        assert_eq!(state.files_deleted, ["doomed.txt"]);
        assert_eq!(state.errors.len(), 1, "{:?}", state.errors);
        assert!(state.errors[0].starts_with("read_file: File not found"), "{:?}", state.errors);
        let failed_shell = json!({"llmContent": "Output: nope\nExit Code: 2\n"});
        let input = json!({"command": "make"});
        j.tool(&ToolUse {
            name: "run_shell_command",
            input: &input,
            response: &failed_shell,
            error: None,
            cwd: &root,
            root: &root,
        });
        assert!(j.tools.last().unwrap().failed);
    }

    #[test]
    fn shell_words() {
        assert_eq!(
            shell_changes("cd x && rm -rf 'a b' c; git mv d e | cat"),
            vec![
                Shell::Removed("a b".into()),
                Shell::Removed("c".into()),
                Shell::Moved("d".into(), "e".into())
            ]
        );
        assert!(shell_changes("echo rm x").is_empty());
        assert_eq!(relative("../b/c.txt", Path::new("/r/a"), Path::new("/r")), "b/c.txt");
        assert_eq!(relative("/elsewhere/x", Path::new("/r"), Path::new("/r")), "/elsewhere/x");
    }

    #[test]
    fn secrets_are_redacted_and_sizes_capped() {
        let root = PathBuf::from("/r");
        let mut j = Journal::default();
        j.prompt("use AKIAIOSFODNN7EXAMPLE please");
        assert!(!j.last_prompt.contains("AKIAIOSFODNN7EXAMPLE") && j.redacted == 1, "{}", j.last_prompt);
        let input = json!({"command": "false"});
        for _ in 0..200 {
            j.tool(&ToolUse {
                name: "Bash",
                input: &input,
                response: &Value::Null,
                error: Some(&"x".repeat(10_000)),
                cwd: &root,
                root: &root,
            });
        }
        assert_eq!(j.tools.len(), MAX_TOOLS);
        assert_eq!(j.errors.len(), MAX_ERRORS);
        assert!(serde_json::to_vec(&j).unwrap().len() < 64 * 1024);
    }
}
