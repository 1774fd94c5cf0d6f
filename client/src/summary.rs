//! Session summaries without a human (opt-in: `summarize = "claude" | "codex" | "gemini"`).
//!
//! At SessionEnd and PreCompact, the detached process that writes the checkpoint runs that
//! agent's own CLI headless with a fixed prompt and a JSON schema to extract `{goal,
//! decisions with rationale, open_loops, summary}` from the session's record and the tail of
//! its transcript. The run has Baton's hooks and MCP server off (and `BATON_SUMMARIZING` set,
//! so a Baton hook that still fires stands down): it is not a Baton session, and it leaves
//! nothing in the agent's own resume list. Bounded: a time limit (then the process group is
//! killed), a cap on what it sends, secrets redacted first; a failure changes nothing else
//! and is logged.
//!
//! What it finds stays on the session (a checkpoint with the goal, summary, open loops and
//! decisions; the session's summary and goal); decisions also go to project memory as
//! `extracted_decision`, a history of its own that never evicts a decision recorded on
//! purpose.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use baton_proto::v1::{CheckpointState, Decision};
use serde::Deserialize;

use crate::hook::Agent;

/// Set in the summarizer's environment: Baton's hooks and MCP server stand down under it.
pub const RUNNING: &str = "BATON_SUMMARIZING";
/// Marks the prompt (the test suite's fake model answers it by this).
const MARKER: &str = "BATON-SESSION-SUMMARY";
/// The most characters of the session's record and transcript sent to the model.
pub const INPUT_CHARS: usize = 60_000;

const SCHEMA: &str = r#"{"type":"object","additionalProperties":false,"required":["goal","decisions","open_loops","summary"],"properties":{"goal":{"type":"string"},"decisions":{"type":"array","maxItems":5,"items":{"type":"object","additionalProperties":false,"required":["decision","rationale"],"properties":{"decision":{"type":"string"},"rationale":{"type":"string"}}}},"open_loops":{"type":"array","maxItems":5,"items":{"type":"string"}},"summary":{"type":"string"}}}"#;

/// What the model extracted.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Extracted {
    pub goal: String,
    pub decisions: Vec<ExtractedDecision>,
    pub open_loops: Vec<String>,
    pub summary: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ExtractedDecision {
    pub decision: String,
    #[serde(default)]
    pub rationale: String,
}

/// The model's input: the instructions, then the session's record and transcript tail,
/// redacted and capped.
pub fn input(state: &CheckpointState, transcript: Option<&Path>) -> String {
    let mut record = String::new();
    let mut line = |label: &str, value: &str| {
        if !value.trim().is_empty() {
            let _ = writeln!(record, "{label}: {}", crate::clip(value, 2000));
        }
    };
    line("Goal", &state.goal);
    line("Last prompt", &state.last_prompt);
    line("Last answer", &state.last_answer);
    let tasks: Vec<String> =
        state.active_tasks.iter().map(|t| format!("[{}] {}", t.status, t.content)).collect();
    line("Tasks", &tasks.join("; "));
    line("Files created", &state.files_created.join(", "));
    line("Files modified", &state.files_modified.join(", "));
    line("Files deleted", &state.files_deleted.join(", "));
    line("Errors", &state.errors.join("; "));
    let room = INPUT_CHARS.saturating_sub(record.chars().count());
    let tail = transcript.and_then(|t| std::fs::read(t).ok()).map(|bytes| {
        let text = String::from_utf8_lossy(&bytes);
        let skip = text.chars().count().saturating_sub(room);
        text.chars().skip(skip).collect::<String>()
    });
    if let Some(tail) = tail.filter(|t| !t.is_empty()) {
        record.push_str("Transcript (its last part):\n");
        record.push_str(&tail);
    }
    let (record, _) = baton_proto::redact::redact(&record);
    format!(
        "{MARKER}\nYou summarize a coding-agent session for the next session, which will not see it.\n\
         Answer with one JSON object only (no prose, no code fence) that matches this JSON schema:\n{SCHEMA}\n\
         goal: what the session worked towards, in one sentence (\"\" if unclear). decisions: choices the \
         record shows were made, each with its rationale (at most 5, none if none). open_loops: work started \
         and not finished, questions left open (at most 5). summary: at most five sentences on what was done \
         and where it stopped.\nThe session's record follows the line ---.\n---\n{record}"
    )
}

/// Reads the model's answer: the JSON object in it, checked and clipped.
pub fn parse(answer: &str) -> anyhow::Result<Extracted> {
    let start = answer.find('{').context("the answer holds no JSON object")?;
    let end = answer.rfind('}').context("the answer holds no JSON object")?;
    anyhow::ensure!(end > start, "the answer holds no JSON object");
    let mut e: Extracted = serde_json::from_str(&answer[start..=end])
        .context("the answer is not the JSON object the schema asks for")?;
    anyhow::ensure!(!e.summary.trim().is_empty(), "the answer has an empty summary");
    e.goal = crate::clip(e.goal.trim(), 300);
    e.summary = crate::clip(e.summary.trim(), 2000);
    e.decisions.retain(|d| !d.decision.trim().is_empty());
    e.decisions.truncate(5);
    for d in &mut e.decisions {
        d.decision = crate::clip(d.decision.trim(), 500);
        d.rationale = crate::clip(d.rationale.trim(), 500);
    }
    e.open_loops.retain(|l| !l.trim().is_empty());
    e.open_loops.truncate(5);
    for l in &mut e.open_loops {
        *l = crate::clip(l.trim(), 500);
    }
    Ok(e)
}

/// The prompt argument (the instructions themselves come on stdin).
fn ask() -> String {
    format!("{MARKER}: follow the instructions in the input.")
}

/// The headless command for `agent`, reading the input on stdin; `scratch` is a private
/// directory for its files.
fn command(agent: Agent, scratch: &Path) -> anyhow::Result<(std::process::Command, Option<PathBuf>)> {
    let ask = ask();
    let mut out_file = None;
    let mut c = std::process::Command::new(agent.name());
    match agent {
        Agent::Claude => {
            c.args([
                "-p",
                &ask,
                "--output-format",
                "json",
                "--no-session-persistence",
                "--strict-mcp-config",
            ])
            .args(["--tools", "", "--settings", r#"{"disableAllHooks": true}"#]);
        }
        Agent::Codex => {
            let schema = scratch.join("schema.json");
            std::fs::write(&schema, SCHEMA)?;
            let last = scratch.join("answer.txt");
            c.args(["exec", "--skip-git-repo-check", "--ephemeral", "-s", "read-only"])
                .args(["--disable", "hooks", "-c", "mcp_servers={}", "--output-schema"])
                .arg(&schema)
                .arg("-o")
                .arg(&last)
                .arg(&ask);
            out_file = Some(last);
        }
        Agent::Gemini => {
            // It runs in Baton's own scratch directory, which no one has trusted: it reads
            // only its input and has no MCP servers or extensions.
            c.args([
                "-p",
                &ask,
                "-o",
                "json",
                "--skip-trust",
                "--allowed-mcp-server-names",
                "none",
                "-e",
                "none",
            ]);
        }
        Agent::Cursor => anyhow::bail!("summaries are written by claude, codex or gemini"),
    }
    c.env(RUNNING, "1").current_dir(scratch);
    Ok((c, out_file))
}

/// Runs `agent`'s CLI on `input` within `limit`; returns what it extracted.
pub async fn run(agent: Agent, input: &str, limit: Duration, scratch: &Path) -> anyhow::Result<Extracted> {
    use std::os::unix::process::CommandExt as _;
    use std::process::Stdio;
    let started = std::time::SystemTime::now();
    let (mut command, out_file) = command(agent, scratch)?;
    command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
    let mut child = tokio::process::Command::from(command)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot start `{}` (is it on PATH?)", agent.name()))?;
    let pid = child.id();
    if let Some(mut stdin) = child.stdin.take() {
        use tokio::io::AsyncWriteExt as _;
        stdin.write_all(input.as_bytes()).await.context("writing the input")?;
    }
    let output = if let Ok(out) = tokio::time::timeout(limit, child.wait_with_output()).await {
        out.context("waiting for the summarizer")?
    } else {
        // The CLI's own children too: the whole group.
        if let Some(pid) = pid {
            let _ = std::process::Command::new("kill").args(["-9", "--", &format!("-{pid}")]).status();
        }
        anyhow::bail!("{} gave no summary within {limit:?}", agent.name());
    };
    if !output.status.success() {
        // The end of what it said: the reason comes last.
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: String =
            stderr.trim().chars().rev().take(600).collect::<Vec<_>>().into_iter().rev().collect();
        anyhow::bail!("{} failed ({}): …{tail}", agent.name(), output.status);
    }
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let answer = match agent {
        Agent::Codex => match out_file {
            Some(f) => std::fs::read_to_string(f).context("codex wrote no last message")?,
            None => stdout,
        },
        // `--output-format json` / `-o json`: the answer is a field of the result.
        Agent::Claude | Agent::Gemini => {
            let v: serde_json::Value = serde_json::from_str(stdout.trim())
                .with_context(|| format!("{}'s output is not JSON", agent.name()))?;
            let field = if agent == Agent::Claude { "result" } else { "response" };
            v[field]
                .as_str()
                .with_context(|| format!("{}'s output has no {field:?}", agent.name()))?
                .to_owned()
        }
        Agent::Cursor => stdout,
    };
    if agent == Agent::Gemini {
        forget_gemini_chat(started);
    }
    parse(&answer)
}

/// Gemini keeps every headless run as a chat it offers to resume: the summarizer's goes —
/// only a chat written since this run started that holds its exact prompt, so that no chat
/// of the user's is touched.
fn forget_gemini_chat(started: std::time::SystemTime) {
    let Some(home) = directories::BaseDirs::new().map(|b| b.home_dir().join(".gemini/tmp")) else { return };
    let Ok(projects) = std::fs::read_dir(home) else { return };
    let ask = ask();
    for chats in projects.flatten().map(|p| p.path().join("chats")) {
        let Ok(files) = std::fs::read_dir(chats) else { continue };
        for file in files.flatten().map(|f| f.path()) {
            let fresh = std::fs::metadata(&file).and_then(|m| m.modified()).is_ok_and(|t| t >= started);
            if fresh && std::fs::read_to_string(&file).is_ok_and(|t| t.contains(&ask)) {
                let _ = std::fs::remove_file(&file);
            }
        }
    }
}

/// The state of the checkpoint that carries the summary: the session's state with what
/// the model found.
pub fn with_summary(mut state: CheckpointState, e: &Extracted) -> CheckpointState {
    if !e.goal.is_empty() {
        state.goal.clone_from(&e.goal);
    }
    state.summary.clone_from(&e.summary);
    for l in &e.open_loops {
        if !state.open_questions.contains(l) {
            state.open_questions.push(l.clone());
        }
    }
    state.decisions.extend(e.decisions.iter().map(|d| Decision {
        decision: d.decision.clone(),
        rationale: d.rationale.clone(),
        impact: "extracted".into(),
    }));
    state
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_good_answer_is_read_and_clipped() {
        let answer = format!(
            "Here you go:\n```json\n{{\"goal\": \"Ship it\", \"decisions\": [{{\"decision\": \"Use WAL\", \"rationale\": \"readers\"}}, {{\"decision\": \" \", \"rationale\": \"\"}}], \"open_loops\": [\"fuzz\", \"\"], \"summary\": \"{}\"}}\n```",
            "x".repeat(5000)
        );
        let e = parse(&answer).unwrap();
        assert_eq!(e.goal, "Ship it");
        assert_eq!(
            e.decisions,
            [ExtractedDecision { decision: "Use WAL".into(), rationale: "readers".into() }]
        );
        assert_eq!(e.open_loops, ["fuzz"]);
        assert_eq!(e.summary.chars().count(), 2000);
    }

    #[test]
    fn garbage_is_refused() {
        for bad in [
            "I cannot help with that.",
            "{\"goal\": 1}",
            "{\"goal\":\"\",\"decisions\":[],\"open_loops\":[],\"summary\":\"  \"}",
            "}{",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_input_is_capped_and_redacted() {
        let dir = tempfile::tempdir().unwrap();
        let transcript = dir.path().join("t.jsonl");
        std::fs::write(&transcript, format!("{} key AKIAABCDEFGHIJKLMNOP tail-end", "y".repeat(200_000)))
            .unwrap();
        let state = CheckpointState { last_prompt: "fix the build".into(), ..Default::default() };
        let text = input(&state, Some(&transcript));
        assert!(text.starts_with(MARKER) && text.contains("fix the build") && text.ends_with("tail-end"));
        assert!(!text.contains("AKIAABCDEFGHIJKLMNOP"), "redacted");
        assert!(text.chars().count() < INPUT_CHARS + 2000);
    }
}
