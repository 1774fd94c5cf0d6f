//! What an agent left in its transcript, read into a journal by the same rules as the hook
//! payloads (`local::journal`): each tool call is paired with its result, and only the result
//! says what happened (a refused Write changed nothing). The transcript complements the
//! hooks: it holds what no hook reported (Claude Code fires no hook for a call its own
//! validation refused) and what came before the hooks were installed.
//!
//! Claude Code writes JSONL lines `{type: user|assistant, message: {content: [...]}}`, a
//! tool's result in a user line's `tool_result` block with the structured result beside it
//! in `toolUseResult`; Codex writes `{type: response_item, payload: {type: message |
//! function_call | function_call_output | custom_tool_call | ...}}`. The formats are the
//! agents' own and change, so parsing is tolerant: unknown lines are skipped.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;

use baton_proto::v1::CheckpointState;
use serde_json::Value;

use crate::local::journal::{Journal, ToolUse};

/// Transcripts beyond this are read from their last part only (the state that matters is
/// recent, and a hook has a time budget).
const MAX_READ: u64 = 32 * 1024 * 1024;
const MAX_TEXT: usize = 4000;

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

/// Codex's shell output ends its header with the exit code: "Process exited with code 2".
fn codex_exit(output: &str) -> Option<i64> {
    let rest = output.split("exited with code ").nth(1)?;
    rest.split(|c: char| !c.is_ascii_digit() && c != '-').next()?.parse().ok()
}

struct Reader<'a> {
    journal: Journal,
    /// Calls waiting for their result, by call id: (tool, input).
    pending: HashMap<String, (String, Value)>,
    cwd: &'a Path,
    root: &'a Path,
}

impl Reader<'_> {
    fn result(&mut self, id: &str, response: &Value, error: Option<&str>) {
        let Some((name, input)) = self.pending.remove(id) else { return };
        self.journal.tool(&ToolUse {
            name: &name,
            input: &input,
            response,
            error,
            cwd: self.cwd,
            root: self.root,
        });
    }

    fn claude_line(&mut self, line: &Value) {
        let kind = line.get("type").and_then(Value::as_str).unwrap_or_default();
        let Some(message) = line.get("message") else { return };
        let content = message.get("content").unwrap_or(&Value::Null);
        match kind {
            "assistant" => {
                for part in content.as_array().into_iter().flatten() {
                    if part.get("type").and_then(Value::as_str) == Some("tool_use") {
                        let id = part.get("id").and_then(Value::as_str).unwrap_or_default().to_owned();
                        let name = part.get("name").and_then(Value::as_str).unwrap_or("tool").to_owned();
                        self.pending.insert(id, (name, part.get("input").cloned().unwrap_or(Value::Null)));
                    }
                }
                if let Some(text) = text_of(content) {
                    self.journal.answer(&crate::text::clip(&text, MAX_TEXT));
                }
            }
            "user" => {
                let structured = line.get("toolUseResult").cloned().unwrap_or(Value::Null);
                for part in content.as_array().into_iter().flatten() {
                    if part.get("type").and_then(Value::as_str) != Some("tool_result") {
                        continue;
                    }
                    let id = part.get("tool_use_id").and_then(Value::as_str).unwrap_or_default();
                    if part.get("is_error").and_then(Value::as_bool) == Some(true) {
                        let text = text_of(part.get("content").unwrap_or(&Value::Null))
                            .unwrap_or_else(|| "tool failed".into());
                        let text =
                            text.trim_start_matches("<tool_use_error>").trim_end_matches("</tool_use_error>");
                        self.result(id, &Value::Null, Some(text));
                    } else {
                        self.result(id, &structured, None);
                    }
                }
                let is_meta = line.get("isMeta").and_then(Value::as_bool) == Some(true);
                let is_result = content.as_array().is_some_and(|parts| {
                    parts.iter().any(|p| p.get("type").and_then(Value::as_str) == Some("tool_result"))
                });
                if let Some(text) = text_of(content).filter(|_| !is_meta && !is_result) {
                    self.journal.prompt(&text);
                }
            }
            _ => {}
        }
    }

    fn codex_line(&mut self, line: &Value) {
        let Some(payload) = line.get("payload") else { return };
        let call_id = || payload.get("call_id").and_then(Value::as_str).unwrap_or_default().to_owned();
        match payload.get("type").and_then(Value::as_str).unwrap_or_default() {
            "message" => {
                let text = text_of(payload.get("content").unwrap_or(&Value::Null));
                match (payload.get("role").and_then(Value::as_str), text) {
                    // Codex's own context (instructions, the environment) comes as markup.
                    (Some("user"), Some(t)) if !t.starts_with('<') => self.journal.prompt(&t),
                    (Some("assistant"), Some(t)) => self.journal.answer(&t),
                    _ => {}
                }
            }
            "function_call" | "local_shell_call" => {
                let name = payload.get("name").and_then(Value::as_str).unwrap_or("shell").to_owned();
                let args = payload
                    .get("arguments")
                    .and_then(Value::as_str)
                    .and_then(|a| serde_json::from_str::<Value>(a).ok())
                    .or_else(|| payload.get("action").cloned())
                    .unwrap_or(Value::Null);
                self.pending.insert(call_id(), (name, args));
            }
            "custom_tool_call" => {
                let name = payload.get("name").and_then(Value::as_str).unwrap_or("tool").to_owned();
                let input = payload.get("input").and_then(Value::as_str).unwrap_or_default();
                self.pending.insert(call_id(), (name, serde_json::json!({ "command": input })));
            }
            "function_call_output" | "custom_tool_call_output" => {
                let output = payload.get("output").map(|o| match o {
                    Value::String(s) => s.clone(),
                    other => other
                        .get("content")
                        .and_then(Value::as_str)
                        .map_or_else(|| other.to_string(), str::to_owned),
                });
                let output = output.unwrap_or_default();
                let failed =
                    codex_exit(&output).filter(|code| *code != 0).map(|_| crate::text::clip(&output, 300));
                self.result(&call_id(), &Value::String(output), failed.as_deref());
            }
            _ => {}
        }
    }
}

/// Gemini CLI's chat: a first line naming the session, then message lines `{id, type:
/// user|gemini, content, toolCalls?}` written more than once each (a model message is
/// written again with its tool calls: the last copy counts), and `{"$set": {...}}` lines, a
/// `messages` one holding every message so far.
#[derive(Default)]
struct GeminiChat {
    order: Vec<String>,
    messages: HashMap<String, Value>,
}

impl GeminiChat {
    fn line(&mut self, line: &Value) {
        if let Some(all) = line.pointer("/$set/messages").and_then(Value::as_array) {
            self.order.clear();
            self.messages.clear();
            for m in all {
                self.message(m);
            }
        } else if line.get("type").is_some() && line.get("id").is_some() {
            self.message(line);
        }
    }

    fn message(&mut self, m: &Value) {
        let id = m.get("id").and_then(Value::as_str).unwrap_or_default().to_owned();
        if !self.messages.contains_key(&id) {
            self.order.push(id.clone());
        }
        self.messages.insert(id, m.clone());
    }

    fn into_journal(self, reader: &mut Reader<'_>) {
        for id in &self.order {
            let Some(m) = self.messages.get(id) else { continue };
            match m.get("type").and_then(Value::as_str) {
                Some("user") => {
                    let text: Vec<&str> = m
                        .get("content")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(|p| p.get("text").and_then(Value::as_str))
                        .collect();
                    // Gemini's own setup message is not a prompt.
                    if let Some(text) =
                        Some(text.join("\n")).filter(|t| !t.is_empty() && !t.starts_with("<session_context>"))
                    {
                        reader.journal.prompt(&text);
                    }
                }
                Some("gemini") => {
                    for call in m.get("toolCalls").and_then(Value::as_array).into_iter().flatten() {
                        let name = call.get("name").and_then(Value::as_str).unwrap_or("tool");
                        let response = call
                            .pointer("/result/0/functionResponse/response")
                            .cloned()
                            .unwrap_or(Value::Null);
                        let error = response
                            .get("error")
                            .map(|e| e.as_str().map_or_else(|| e.to_string(), str::to_owned));
                        let output = response.get("output").cloned().unwrap_or(Value::Null);
                        let shaped = serde_json::json!({ "llmContent": output });
                        reader.journal.tool(&ToolUse {
                            name,
                            input: call.get("args").unwrap_or(&Value::Null),
                            response: &shaped,
                            error: error.as_deref(),
                            cwd: reader.cwd,
                            root: reader.root,
                        });
                    }
                    if let Some(text) = m.get("content").and_then(Value::as_str).filter(|t| !t.is_empty()) {
                        reader.journal.answer(text);
                    }
                }
                _ => {}
            }
        }
    }
}

/// Reads a transcript into a checkpoint state (empty when it cannot be read). Paths are
/// stored relative to `root`; relative ones in the transcript start at `cwd`.
pub fn read(path: &Path, cwd: &Path, root: &Path) -> CheckpointState {
    let mut reader = Reader { journal: Journal::default(), pending: HashMap::new(), cwd, root };
    if let Ok(mut file) = std::fs::File::open(path) {
        use std::io::{Seek, SeekFrom};
        let len = file.metadata().map_or(0, |m| m.len());
        let skip_first = len > MAX_READ && file.seek(SeekFrom::Start(len - MAX_READ)).is_ok();
        let mut lines = BufReader::new(file).lines().map_while(Result::ok);
        if skip_first {
            lines.next(); // a partial line
        }
        let mut gemini = GeminiChat::default();
        for line in lines {
            let Ok(value) = serde_json::from_str::<Value>(&line) else { continue };
            if value.get("payload").is_some() && value.get("message").is_none() {
                reader.codex_line(&value);
            } else if value.get("message").is_some() {
                reader.claude_line(&value);
            } else {
                gemini.line(&value);
            }
        }
        gemini.into_journal(&mut reader);
    }
    // Calls still waiting for a result (the transcript trails the hooks) are counted, not
    // judged: the journal has them.
    let mut state = reader.journal.state();
    state.tool_count += i64::try_from(reader.pending.len()).unwrap_or(0);
    state
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn fixture(name: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/agents/transcripts").join(name)
    }

    /// A real Claude Code 2.1.197 transcript (tests/agents/FINDINGS.md): tasks, a write, a
    /// blind overwrite its validation refused (no hook fired for it), a read, an overwrite,
    /// a shell delete; then resumed for one more turn.
    #[test]
    fn claude_transcript_by_results() {
        let root = PathBuf::from("/work/agent-lab/proj-claude-c1");
        let state = read(&fixture("claude.jsonl"), &root, &root);
        let tasks: Vec<(&str, &str)> =
            state.active_tasks.iter().map(|t| (t.content.as_str(), t.status.as_str())).collect();
        assert_eq!(tasks, [("Write hello file", "completed"), ("Update existing file", "pending")]);
        assert_eq!(state.files_created, ["hello.txt"]);
        assert_eq!(
            state.files_modified,
            ["existing.txt"],
            "the overwrite after the read, not the refused one"
        );
        assert_eq!(state.files_deleted, ["doomed.txt"]);
        assert_eq!(state.errors.len(), 1, "{:?}", state.errors);
        assert!(state.errors[0].starts_with("Write: File has not been read yet"), "{:?}", state.errors);
        // The conversation was resumed once after its first turn.
        assert_eq!(state.last_prompt, "continue please");
        assert!(state.last_answer.contains("RESUME-TEXT-MARKER"), "{}", state.last_answer);
        assert_eq!(state.tool_count, 8);
    }

    /// A real Gemini CLI 0.61.0 chat, resumed once: todos, a new file, an overwrite, a shell
    /// delete, a failed command and a failed read, each model message written twice.
    #[test]
    fn gemini_chat_by_results() {
        let root = PathBuf::from("/work/agent-lab/proj-gemini-g1");
        let state = read(&fixture("gemini.jsonl"), &root, &root);
        let tasks: Vec<(&str, &str)> =
            state.active_tasks.iter().map(|t| (t.content.as_str(), t.status.as_str())).collect();
        assert_eq!(tasks, [("Write hello file", "completed"), ("Delete doomed", "completed")]);
        assert_eq!(state.files_created, ["hello.txt"]);
        assert_eq!(state.files_modified, ["existing.txt"]);
        assert_eq!(state.files_deleted, ["doomed.txt"]);
        assert_eq!(state.errors.len(), 2, "{:?}", state.errors);
        assert_eq!(state.tool_count, 7, "each call once, though written twice");
        assert_eq!(state.last_prompt, "continue please");
        assert!(state.last_answer.contains("RESUME-TEXT-MARKER"), "{}", state.last_answer);
    }

    /// A real Codex 0.169.0 rollout: update_plan, exec_command {cmd, workdir}, apply_patch.
    #[test]
    fn codex_rollout_by_results() {
        let root = PathBuf::from("/work/agent-lab/proj-codex-x1");
        let state = read(&fixture("codex.jsonl"), &root, &root);
        assert!(!state.active_tasks.is_empty(), "{state:?}");
        assert!(state.files_deleted.contains(&"doomed.txt".to_owned()), "{state:?}");
        assert!(state.files_created.contains(&"hello.txt".to_owned()), "{state:?}");
        assert!(state.files_modified.contains(&"existing.txt".to_owned()), "{state:?}");
        assert_eq!(state.tool_count, 6);
    }
}
