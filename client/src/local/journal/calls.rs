//! How a tool call changes the journal, by the agents' tool names: tasks (Claude Code's
//! TaskCreate/TaskUpdate and TodoWrite, Codex's update_plan, Gemini's write_todos), files
//! from the tools' results, shell commands that remove or move files, failures and recovery.

use serde_json::Value;

use super::{
    Journal, JournalTask, JournalTool, MAX_FILES, MAX_TASKS, MAX_TOOLS, Signal, ToolUse, clip, relative,
};

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
