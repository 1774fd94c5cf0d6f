//! SessionEnd, and the opt-in session summary (also before a compaction).

use std::path::PathBuf;
use std::time::Duration;

use baton_proto::v1::{CheckpointKind, CreateCheckpointRequest, EndSessionRequest};

use super::LOCK_WAIT;
use super::checkpoint::checkpoint;
use super::session::conversation_project;
use crate::agents::Agent;
use crate::agents::payload::Payload;
use crate::ctx::{Ctx, log};
use crate::hub::remote::{self, Hub, Timeouts};
use crate::outbox::write::{self, Write};
use crate::project::{self, git};
use crate::usecase::checkpoint::conversation_state;

pub(super) async fn session_end(ctx: &Ctx, agent: Agent, p: &Payload) -> anyhow::Result<()> {
    let cwd = p.cwd();
    let project = project::identify(&cwd);
    let mut hub = remote::connect(&ctx.settings, Timeouts::HOOK).await.ok();
    let reason = format!("session end ({})", p.reason.as_deref().unwrap_or("other"));
    let (_, last_answer) =
        checkpoint(ctx, agent, p, hub.as_mut(), CheckpointKind::SessionEnd, &reason, true).await?;
    let agent_sid = p.agent_session_id().unwrap_or("unknown").to_owned();
    let Some(local) = ctx.state.get(agent.name(), &agent_sid) else { return Ok(()) };
    let summary = summarize(ctx, agent, p, hub.as_mut(), true).await;
    // Already redacted with the checkpoint's state.
    let request = EndSessionRequest {
        session_id: local.baton_session_id.clone(),
        summary: summary.unwrap_or_else(|| crate::text::clip(&last_answer, 2000)),
        git_head: git::head(&cwd).unwrap_or_default(),
        write: write::options(agent.kind() as i32, &local.baton_session_id),
        ..Default::default()
    };
    write::submit(&ctx.queue, hub.as_mut(), Write::EndSession(request, project.key), Some(LOCK_WAIT)).await?;
    ctx.state.update(agent.name(), &agent_sid, |s| s.ended = true)?;
    Ok(())
}

/// The opt-in session summary (`crate::agents::summary`), written for the conversation's session:
/// a checkpoint with what the model found, the session's goal, and its decisions as
/// `extracted_decision` memory. At a session end at most once. Returns the summary; a
/// failure is logged and changes nothing.
pub(super) async fn summarize(
    ctx: &Ctx,
    agent: Agent,
    p: &Payload,
    mut hub: Option<&mut Hub>,
    at_end: bool,
) -> Option<String> {
    let by = ctx.settings.summarize?;
    let agent_sid = p.agent_session_id().unwrap_or("unknown").to_owned();
    let mut first = false;
    let record = ctx
        .state
        .update(agent.name(), &agent_sid, |s| {
            first = !s.summarized_end;
            if at_end {
                s.summarized_end = true;
            }
            s.clone()
        })
        .ok()?;
    if record.baton_session_id.is_empty() || (at_end && !first) {
        return None;
    }
    let cwd = p.cwd();
    let (project, _) = conversation_project(ctx, agent, &agent_sid, &cwd);
    let state = conversation_state(ctx, &record, p.transcript(), &cwd, &project.root);
    let transcript = p.transcript().or_else(|| Some(PathBuf::from(&record.transcript_path)));
    let input = crate::agents::summary::input(&state, transcript.as_deref().filter(|t| t.is_file()));
    let scratch = match tempfile_dir(ctx) {
        Ok(dir) => dir,
        Err(e) => {
            log(ctx, &format!("summary: no scratch directory ({e:#})"));
            return None;
        }
    };
    let limit = Duration::from_secs(ctx.settings.summarize_seconds);
    let result = crate::agents::summary::run(by, &input, limit, &scratch).await;
    let _ = std::fs::remove_dir_all(&scratch);
    let extracted = match result {
        Ok(e) => e,
        Err(e) => {
            log(ctx, &format!("summary by {}: {e:#} (nothing recorded)", by.name()));
            return None;
        }
    };
    let reason = format!("session summary (by {})", by.name());
    let writes =
        summary_writes(agent, &record.baton_session_id, &project.key, state, &extracted, &reason, at_end);
    for w in writes {
        if let Err(e) = write::submit(&ctx.queue, hub.as_deref_mut(), w, Some(LOCK_WAIT)).await {
            log(ctx, &format!("summary: a write was refused: {e:#}"));
        }
    }
    Some(extracted.summary)
}

/// What a summary records: a checkpoint with it, the session's goal and summary (at a
/// session end only when the model found a goal), and its decisions as memory.
pub(super) fn summary_writes(
    agent: Agent,
    session_id: &str,
    project: &str,
    state: baton_proto::v1::CheckpointState,
    extracted: &crate::agents::summary::Extracted,
    reason: &str,
    at_end: bool,
) -> Vec<Write> {
    let session_id = session_id.to_owned();
    let author = |id: &str| write::options(agent.kind() as i32, id);
    let request = CreateCheckpointRequest {
        session_id: session_id.clone(),
        checkpoint_id: uuid::Uuid::now_v7().to_string(),
        kind: CheckpointKind::Auto as i32,
        reason: reason.to_owned(),
        state: Some(crate::agents::summary::with_summary(state, extracted)),
        write: author(&session_id),
        ..Default::default()
    };
    let mut writes = vec![Write::CreateCheckpoint(Box::new(request), project.to_owned())];
    if !extracted.goal.is_empty() || !at_end {
        writes.push(Write::UpdateSession(
            baton_proto::v1::UpdateSessionRequest {
                session_id: session_id.clone(),
                goal: Some(extracted.goal.clone()).filter(|g| !g.is_empty()),
                summary: Some(extracted.summary.clone()),
                write: author(&session_id),
                ..Default::default()
            },
            project.to_owned(),
        ));
    }
    if !extracted.decisions.is_empty() {
        writes.push(Write::PutMemory(baton_proto::v1::PutMemoryRequest {
            project: project.to_owned(),
            category: "extracted_decision".into(),
            op: baton_proto::v1::MemoryOp::Append as i32,
            items: extracted
                .decisions
                .iter()
                .map(|d| baton_proto::v1::MemoryItem {
                    content: d.decision.clone(),
                    rationale: d.rationale.clone(),
                })
                .collect(),
            write: author(&session_id),
            ..Default::default()
        }));
    }
    writes
}

/// A private scratch directory under Baton's data directory.
pub(super) fn tempfile_dir(ctx: &Ctx) -> anyhow::Result<PathBuf> {
    let dir = ctx.settings.data_dir.join("tmp").join(format!("summary-{}", uuid::Uuid::now_v7()));
    crate::fsperm::create_private_dir(&dir)?;
    Ok(dir)
}
