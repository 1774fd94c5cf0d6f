//! Checkpoints the hooks make: from the journal and the transcript, with the transcript
//! (and Claude Code's task files) uploaded when transcripts are synced.

use std::path::Path;

use anyhow::Context as _;
use baton_proto::v1::{CheckpointKind, CreateCheckpointRequest};

use super::LOCK_WAIT;
use super::session::session_for;
use crate::agents::Agent;
use crate::agents::payload::Payload;
use crate::ctx::{Ctx, log};
use crate::hub::remote::{self, Hub, Timeouts};
use crate::outbox::write::{self, Delivered, Write};
use crate::project::{self};
use crate::usecase::checkpoint::conversation_state;

/// A checkpoint made now, from its own connection to the hub (queued when there is none).
pub(super) async fn checkpoint_now(
    ctx: &Ctx,
    agent: Agent,
    p: &Payload,
    kind: CheckpointKind,
    reason: &str,
    may_upload: bool,
) -> anyhow::Result<()> {
    let mut hub = remote::connect(&ctx.settings, Timeouts::HOOK).await.ok();
    checkpoint(ctx, agent, p, hub.as_mut(), kind, reason, may_upload).await?;
    Ok(())
}

/// Whether transcripts are carried over for this agent (opt-in).
pub(super) fn syncs(ctx: &Ctx, agent: Agent, p: &Payload) -> bool {
    ctx.settings.sync_transcripts && agent.carries_transcripts() && p.transcript().is_some_and(|t| t.exists())
}

/// A checkpoint from what the agent left: its transcript, its last answer, the git head.
/// Returns how it was delivered and the agent's last answer (a session's summary at its end).
/// `may_upload`: this process may take the time to upload the transcript (when synced).
pub(super) async fn checkpoint(
    ctx: &Ctx,
    agent: Agent,
    p: &Payload,
    mut hub: Option<&mut Hub>,
    kind: CheckpointKind,
    reason: &str,
    may_upload: bool,
) -> anyhow::Result<(Delivered, String)> {
    let cwd = p.cwd();
    let project = project::identify(&cwd);
    let session_id = session_for(ctx, agent, p, &project, hub.as_deref_mut(), true, None).await?;
    super::commits::after(ctx, agent, p, hub.as_deref_mut(), &project, false).await;
    let agent_sid = p.agent_session_id().unwrap_or("unknown");
    if let Some(answer) = p.last_answer() {
        ctx.state.update(agent.name(), agent_sid, |s| s.journal.answer(answer))?;
    }
    let local = ctx.state.get(agent.name(), agent_sid).unwrap_or_default();
    let state = conversation_state(ctx, &local, p.transcript(), &cwd, &project.root);
    let last_answer = state.last_answer.clone();
    let mut blobs = Vec::new();
    if may_upload
        && syncs(ctx, agent, p)
        && let (Some(h), Some(path)) = (hub.as_deref_mut(), p.transcript())
    {
        match upload_transcript(h, &project.key, &path, p.agent_session_id().unwrap_or_default(), &cwd).await
        {
            Ok(blob) => blobs.push(blob),
            Err(e) => log(ctx, &format!("transcript upload failed ({e:#}); checkpoint saved without it")),
        }
        // What the agent keeps beside the transcript (Claude Code's tasks).
        match upload_side_files(h, agent, &project.key, p.agent_session_id().unwrap_or_default(), &cwd).await
        {
            Ok(blob) => blobs.extend(blob),
            Err(e) => log(ctx, &format!("side files upload failed ({e:#}); checkpoint saved without them")),
        }
    }
    let checkpoint_id = uuid::Uuid::now_v7().to_string();
    let request = CreateCheckpointRequest {
        session_id: session_id.clone(),
        checkpoint_id: checkpoint_id.clone(),
        parent_id: None,
        kind: kind as i32,
        reason: reason.to_owned(),
        state: Some(state),
        write: write::options(agent.kind() as i32, &session_id),
        blobs,
        ..Default::default()
    };
    let delivered = write::submit(
        &ctx.queue,
        hub,
        Write::CreateCheckpoint(Box::new(request), project.key),
        Some(LOCK_WAIT),
    )
    .await?;
    // Every call the journal holds is in this checkpoint (sent or queued); it is the one
    // before the conversation's next commits.
    ctx.state.mark_unsaved(agent.name(), agent_sid, false);
    ctx.state.update(agent.name(), agent_sid, |s| s.last_checkpoint_id = checkpoint_id)?;
    Ok((delivered, last_answer))
}

pub(super) async fn upload_transcript(
    hub: &mut Hub,
    project: &str,
    path: &Path,
    agent_session_id: &str,
    cwd: &Path,
) -> anyhow::Result<baton_proto::v1::BlobRef> {
    let (data, _) = crate::hub::blob::prepare(path)?;
    crate::hub::blob::upload(hub, project, crate::hub::blob::TRANSCRIPT, &data, agent_session_id, cwd).await
}

pub(super) async fn upload_side_files(
    hub: &mut Hub,
    agent: Agent,
    project: &str,
    agent_session_id: &str,
    cwd: &Path,
) -> anyhow::Result<Option<baton_proto::v1::BlobRef>> {
    let Some(role) = agent.side_files_role() else { return Ok(None) };
    let home = directories::BaseDirs::new().context("no home directory")?.home_dir().to_path_buf();
    let Some(data) = agent.bundle_side_files(&home, agent_session_id)? else { return Ok(None) };
    Ok(Some(crate::hub::blob::upload(hub, project, role, &data, agent_session_id, cwd).await?))
}
