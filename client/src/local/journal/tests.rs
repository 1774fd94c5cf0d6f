use serde_json::json;

use super::*;

/// Recorded hook payloads of the real CLIs (tests/agents/payloads).
fn recorded(agent: &str) -> Value {
    let text = match agent {
        "claude" => include_str!("../../../../tests/agents/payloads/claude-hook-payloads.json"),
        "codex" => include_str!("../../../../tests/agents/payloads/codex-hook-payloads.json"),
        _ => include_str!("../../../../tests/agents/payloads/gemini-hook-payloads.json"),
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
        vec![Shell::Removed("a b".into()), Shell::Removed("c".into()), Shell::Moved("d".into(), "e".into())]
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
