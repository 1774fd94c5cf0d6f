//! `baton resume`: continue the latest (or a given) session here: the brief of that point
//! and the agent's own resume command when the conversation exists on this machine.

use std::path::{Path, PathBuf};

use baton_proto::v1::{ResumeSessionRequest, resume_session_request};

use crate::hook::Agent;
use crate::remote::{self, Timeouts};
use crate::{Ctx, git, project, view, write};

/// The resumed checkpoint's own state: what the brief of that point adds to the project's.
fn where_it_stopped(state: &baton_proto::v1::CheckpointState) -> String {
    let mut lines = Vec::new();
    for t in state.active_tasks.iter().filter(|t| t.status != "completed") {
        lines.push(format!("- [{}] {}", if t.status.is_empty() { "pending" } else { &t.status }, t.content));
    }
    for q in &state.open_questions {
        lines.push(format!("- open question: {q}"));
    }
    for b in &state.blockers {
        lines.push(format!("- blocker: {b}"));
    }
    let files: Vec<&String> =
        state.files_created.iter().chain(&state.files_modified).chain(&state.files_deleted).collect();
    if !files.is_empty() {
        lines.push(format!(
            "- files touched: {}",
            files.iter().take(20).map(|f| f.as_str()).collect::<Vec<_>>().join(", ")
        ));
    }
    if let Some(e) = state.errors.last() {
        lines.push(format!("- last error: {}", crate::clip(e, 200)));
    }
    if !state.last_prompt.is_empty() {
        lines.push(format!("- last prompt: {}", crate::clip(&state.last_prompt.replace('\n', " "), 300)));
    }
    if !state.last_answer.is_empty() {
        lines.push(format!("- last answer: {}", crate::clip(&state.last_answer.replace('\n', " "), 300)));
    }
    if lines.is_empty() {
        return String::new();
    }
    format!("# Where it stopped\n\n{}\n\n", lines.join("\n"))
}

/// Whether the agent's conversation is stored on this machine (so its own resume works).
pub fn conversation_here(agent: i32, agent_session_id: &str) -> bool {
    if agent_session_id.is_empty() {
        return false;
    }
    let Some(home) = directories::BaseDirs::new().map(|b| b.home_dir().to_path_buf()) else { return false };
    match baton_proto::v1::AgentKind::try_from(agent).unwrap_or_default() {
        baton_proto::v1::AgentKind::ClaudeCode => {
            let root = std::env::var_os("CLAUDE_CONFIG_DIR")
                .map_or_else(|| home.join(".claude"), PathBuf::from)
                .join("projects");
            std::fs::read_dir(root)
                .into_iter()
                .flatten()
                .flatten()
                .any(|d| d.path().join(format!("{agent_session_id}.jsonl")).exists())
        }
        baton_proto::v1::AgentKind::Codex => {
            let root = std::env::var_os("CODEX_HOME")
                .map_or_else(|| home.join(".codex"), PathBuf::from)
                .join("sessions");
            find_file(&root, &|name| name.starts_with("rollout-") && name.contains(agent_session_id), 4)
        }
        baton_proto::v1::AgentKind::Gemini => {
            find_file(&home.join(".gemini/tmp"), &|name| name.contains(agent_session_id), 4)
        }
        _ => false,
    }
}

fn find_file(dir: &Path, matches: &dyn Fn(&str) -> bool, depth: u32) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else { return false };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if depth > 0 && find_file(&path, matches, depth - 1) {
                return true;
            }
        } else if path.file_name().and_then(|n| n.to_str()).is_some_and(matches) {
            return true;
        }
    }
    false
}

pub async fn run(
    ctx: &Ctx,
    dir: &Path,
    agent: Agent,
    session: Option<String>,
    checkpoint: Option<String>,
    restore: bool,
    json: bool,
) -> anyhow::Result<()> {
    let project = project::identify(dir);
    let mut hub = remote::connect(&ctx.settings, Timeouts::CLI).await?;
    let target = match (session, checkpoint) {
        (Some(s), _) => Some(resume_session_request::Target::SessionId(
            crate::cmd::sessions::resolve(&mut hub, &project.key, &s).await?,
        )),
        (None, Some(c)) => Some(resume_session_request::Target::CheckpointId(c)),
        (None, None) => None,
    };
    let reply = hub
        .sessions
        .resume_session(ResumeSessionRequest {
            project: project.key.clone(),
            target,
            agent: agent.kind() as i32,
            host: write::hostname(),
            user: std::env::var("USER").unwrap_or_default(),
            cwd: dir.display().to_string(),
            branch: git::branch(dir).unwrap_or_default(),
            brief_budget_chars: i32::try_from(ctx.settings.brief_budget).unwrap_or(9000),
            write: write::options(agent.kind() as i32, ""),
            ..Default::default()
        })
        .await
        .map_err(remote::fail)?
        .into_inner();
    let old = reply.resumed_from.clone().unwrap_or_default();
    let new = reply.session.clone().unwrap_or_default();
    let mut restored = None;
    if restore {
        let blob =
            reply.checkpoint.as_ref().and_then(|c| c.blobs.iter().find(|b| b.role == "transcript")).cloned();
        let Some(blob) = blob else {
            anyhow::bail!(
                "session {} has no uploaded transcript at its last checkpoint (turn uploads on with `baton init claude --sync-transcripts` on the machine it ran on); `baton resume` without --restore starts a fresh session with the brief",
                old.id
            );
        };
        let home = directories::BaseDirs::new()
            .map(|b| b.home_dir().to_path_buf())
            .ok_or_else(|| anyhow::anyhow!("no home directory"))?;
        let data = crate::blob::download(&mut hub, &project.key, &blob).await?;
        restored = Some(crate::blob::restore_claude(&data, &blob, dir, &home)?);
    }
    let here = conversation_here(old.agent, &old.agent_session_id);
    let command = if here { reply.resume_command.clone() } else { String::new() };
    // The agent's next SessionStart for that conversation (or a fresh one here) continues
    // the successor session rather than starting another.
    let key = if here { old.agent_session_id.clone() } else { format!("pending:{}", project.key) };
    ctx.state.update(agent.name(), &key, |s| {
        *s = crate::state::AgentSession {
            baton_session_id: new.id.clone(),
            project: project.key.clone(),
            ..Default::default()
        };
    })?;
    let stopped =
        reply.checkpoint.as_ref().and_then(|c| c.state.as_ref()).map(where_it_stopped).unwrap_or_default();
    let brief = format!("{stopped}{}", reply.brief.map(|b| b.text).unwrap_or_default());
    if json {
        println!(
            "{}",
            serde_json::json!({
                "session": view::session_json(&new), "resumed_from": view::session_json(&old),
                "checkpoint": reply.checkpoint.as_ref().map(view::checkpoint_json),
                "skipped": reply.skipped.iter().map(|s| serde_json::json!({"checkpoint_id": s.checkpoint_id, "reason": s.reason})).collect::<Vec<_>>(),
                "resume_command": command, "brief": brief, "restored": restored,
            })
        );
        return Ok(());
    }
    print!("{brief}");
    if let Some(file) = &restored {
        println!("restored the transcript to {}", file.display());
    }
    for s in &reply.skipped {
        println!("skipped corrupt checkpoint {}: {}", s.checkpoint_id, s.reason);
    }
    if let Some(cp) = &reply.checkpoint {
        println!(
            "resuming from checkpoint {} ({}, {})",
            cp.id,
            view::kind(cp.kind),
            view::age(cp.created_at.as_ref())
        );
    }
    if command.is_empty() {
        println!(
            "Start a new {} session here: the brief above carries the context (session {}).",
            agent.name(),
            new.id
        );
    } else {
        println!("Continue the conversation with:\n  {command}");
    }
    Ok(())
}
