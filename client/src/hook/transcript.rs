//! What an agent left in its transcript, turned into a checkpoint's state: the todo list
//! (tasks and their status), files created/modified/deleted, tool calls and errors, the
//! last prompt and the last answer.
//!
//! Claude Code writes JSONL lines `{type: user|assistant, message: {content: [...]}}`;
//! Codex writes `{type: response_item, payload: {type: message|function_call|...}}`. The
//! formats are internal to the agents, so parsing is tolerant: unknown lines are skipped.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::Path;

use baton_proto::v1::{CheckpointState, Task, ToolCall};
use serde_json::Value;

/// Transcripts beyond this are read from their last part only (the state that matters is
/// recent, and a hook has a time budget).
const MAX_READ: u64 = 32 * 1024 * 1024;
const MAX_TOOL_HISTORY: usize = 50;
const MAX_TEXT: usize = 4000;

#[derive(Default)]
struct Acc {
    tasks: Vec<Task>,
    created: BTreeSet<String>,
    modified: BTreeSet<String>,
    deleted: BTreeSet<String>,
    tools: Vec<ToolCall>,
    tool_count: i64,
    errors: Vec<String>,
    last_prompt: String,
    last_answer: String,
}

fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(max - 1).collect();
    out.push('…');
    out
}

fn text_of(content: &Value) -> Option<String> {
    match content {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => {
            let texts: Vec<&str> = parts
                .iter()
                .filter(|p| {
                    matches!(
                        p.get("type").and_then(Value::as_str),
                        Some("text" | "input_text" | "output_text")
                    )
                })
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect();
            (!texts.is_empty()).then(|| texts.join("\n"))
        }
        _ => None,
    }
}

impl Acc {
    fn tool_use(&mut self, name: &str, input: &Value) {
        self.tool_count += 1;
        let path = input
            .get("file_path")
            .or_else(|| input.get("path"))
            .or_else(|| input.get("notebook_path"))
            .and_then(Value::as_str);
        match name {
            "TodoWrite" | "todo_write" | "update_plan" => {
                let items = input.get("todos").or_else(|| input.get("plan")).and_then(Value::as_array);
                if let Some(items) = items {
                    self.tasks = items
                        .iter()
                        .enumerate()
                        .map(|(i, t)| Task {
                            id: t
                                .get("id")
                                .and_then(Value::as_str)
                                .map_or_else(|| (i + 1).to_string(), str::to_owned),
                            content: t
                                .get("content")
                                .or_else(|| t.get("step"))
                                .and_then(Value::as_str)
                                .unwrap_or_default()
                                .to_owned(),
                            status: t.get("status").and_then(Value::as_str).unwrap_or("pending").to_owned(),
                            progress: if t.get("status").and_then(Value::as_str) == Some("completed") {
                                100
                            } else {
                                0
                            },
                        })
                        .collect();
                }
            }
            "Write" | "write_file" => {
                if let Some(p) = path {
                    if !self.modified.contains(p) {
                        self.created.insert(p.to_owned());
                    }
                    self.deleted.remove(p);
                }
            }
            "Edit" | "MultiEdit" | "NotebookEdit" | "replace" | "edit_file" => {
                if let Some(p) = path
                    && !self.created.contains(p)
                {
                    self.modified.insert(p.to_owned());
                }
            }
            "Bash" | "shell" | "run_shell_command" | "exec_command" => {
                let cmd = input.get("command").map(|c| match c {
                    Value::Array(a) => a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" "),
                    other => other.as_str().unwrap_or_default().to_owned(),
                });
                if let Some(cmd) = cmd {
                    self.deleted_by(&cmd);
                }
            }
            _ => {}
        }
        let summary = path
            .map(str::to_owned)
            .or_else(|| input.get("command").and_then(Value::as_str).map(|c| clip(c, 200)))
            .unwrap_or_default();
        self.tools.push(ToolCall { name: name.to_owned(), summary, failed: false });
    }

    /// Files removed by a plain `rm` (recursive deletes are listed as given).
    fn deleted_by(&mut self, command: &str) {
        for part in command.split(['&', ';', '|']) {
            let words: Vec<&str> = part.split_whitespace().collect();
            if words.first() == Some(&"rm") || words.first() == Some(&"git") && words.get(1) == Some(&"rm") {
                for w in words.iter().skip(1).filter(|w| !w.starts_with('-') && **w != "rm") {
                    self.created.remove(*w);
                    self.modified.remove(*w);
                    self.deleted.insert((*w).to_owned());
                }
            }
        }
    }

    fn tool_error(&mut self, text: &str) {
        if let Some(last) = self.tools.last_mut() {
            last.failed = true;
        }
        self.errors.push(clip(text.trim(), 500));
    }

    fn claude_line(&mut self, line: &Value) {
        let kind = line.get("type").and_then(Value::as_str).unwrap_or_default();
        let Some(message) = line.get("message") else { return };
        let content = message.get("content").unwrap_or(&Value::Null);
        match kind {
            "assistant" => {
                if let Some(parts) = content.as_array() {
                    for part in parts {
                        if part.get("type").and_then(Value::as_str) == Some("tool_use") {
                            let name = part.get("name").and_then(Value::as_str).unwrap_or("tool");
                            self.tool_use(name, part.get("input").unwrap_or(&Value::Null));
                        }
                    }
                }
                if let Some(text) = text_of(content) {
                    self.last_answer = clip(&text, MAX_TEXT);
                }
            }
            "user" => {
                if let Some(parts) = content.as_array() {
                    for part in
                        parts.iter().filter(|p| p.get("type").and_then(Value::as_str) == Some("tool_result"))
                    {
                        if part.get("is_error").and_then(Value::as_bool) == Some(true) {
                            let text = text_of(part.get("content").unwrap_or(&Value::Null))
                                .unwrap_or_else(|| "tool failed".into());
                            self.tool_error(&text);
                        }
                    }
                }
                let is_meta = line.get("isMeta").and_then(Value::as_bool) == Some(true);
                if let Some(text) = text_of(content).filter(|_| !is_meta) {
                    self.last_prompt = clip(&text, MAX_TEXT);
                }
            }
            _ => {}
        }
    }

    fn codex_line(&mut self, line: &Value) {
        let Some(payload) = line.get("payload") else { return };
        match payload.get("type").and_then(Value::as_str).unwrap_or_default() {
            "message" => {
                let text = text_of(payload.get("content").unwrap_or(&Value::Null));
                match (payload.get("role").and_then(Value::as_str), text) {
                    (Some("user"), Some(t)) if !t.starts_with('<') => self.last_prompt = clip(&t, MAX_TEXT),
                    (Some("assistant"), Some(t)) => self.last_answer = clip(&t, MAX_TEXT),
                    _ => {}
                }
            }
            "function_call" | "custom_tool_call" | "local_shell_call" => {
                let name = payload.get("name").and_then(Value::as_str).unwrap_or("shell");
                let args = payload
                    .get("arguments")
                    .and_then(Value::as_str)
                    .and_then(|a| serde_json::from_str::<Value>(a).ok())
                    .or_else(|| payload.get("action").cloned())
                    .unwrap_or(Value::Null);
                self.tool_use(name, &args);
            }
            _ => {}
        }
    }
}

/// Reads a transcript into a checkpoint state (empty when it cannot be read).
pub fn read(path: &Path) -> CheckpointState {
    let mut acc = Acc::default();
    if let Ok(mut file) = std::fs::File::open(path) {
        use std::io::{Seek, SeekFrom};
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        let skip_first = len > MAX_READ && file.seek(SeekFrom::Start(len - MAX_READ)).is_ok();
        let mut lines = BufReader::new(file).lines().map_while(Result::ok);
        if skip_first {
            lines.next(); // a partial line
        }
        for line in lines {
            let Ok(value) = serde_json::from_str::<Value>(&line) else { continue };
            if value.get("payload").is_some() && value.get("message").is_none() {
                acc.codex_line(&value);
            } else {
                acc.claude_line(&value);
            }
        }
    }
    let keep = acc.tools.len().saturating_sub(MAX_TOOL_HISTORY);
    let done = acc.tasks.iter().filter(|t| t.status == "completed").count();
    let progress =
        if acc.tasks.is_empty() { 0 } else { i32::try_from(done * 100 / acc.tasks.len()).unwrap_or(0) };
    acc.errors.truncate(100);
    CheckpointState {
        active_tasks: acc.tasks,
        files_created: acc.created.into_iter().collect(),
        files_modified: acc.modified.into_iter().collect(),
        files_deleted: acc.deleted.into_iter().collect(),
        tool_history: acc.tools.split_off(keep),
        tool_count: acc.tool_count,
        errors: acc.errors,
        progress,
        last_prompt: acc.last_prompt,
        last_answer: acc.last_answer,
        ..Default::default()
    }
}
