//! SessionStart: the conversation's Baton session (continued, a successor, or new), the
//! unsaved work of killed conversations here saved, and the brief printed for the agent.

use std::path::Path;

use baton_proto::v1::{CheckpointKind, CreateCheckpointRequest, HeartbeatRequest};

use super::LOCK_WAIT;
use super::session::session_for;
use crate::agents::Agent;
use crate::agents::payload::Payload;
use crate::ctx::{Ctx, log};
use crate::hub::remote::{self, Hub, Timeouts};
use crate::local::cache;
use crate::outbox::write::{self, Write};
use crate::project::{self, Project, git};
use crate::usecase::brief::{brief_budget, brief_text, cached_brief, deliver, offline_brief};

pub(super) async fn session_start(ctx: &Ctx, agent: Agent, p: &Payload) -> anyhow::Result<String> {
    let swept = ctx.state.sweep(crate::local::state::EXPIRY);
    if swept > 0 {
        log(ctx, &format!("forgot {swept} conversation record(s) untouched for 30 days"));
    }
    let cwd = p.cwd();
    let info = git::info(&cwd);
    let project = project::identify_in(&cwd, info.toplevel.clone());
    let mut hub = remote::connect(&ctx.settings, Timeouts::HOOK).await.ok();
    // resume / compact / clear-less restarts continue this conversation's Baton session.
    let continuing =
        matches!(p.source.as_deref(), Some("resume" | "compact")) || agent.start_always_continues();
    let known =
        p.agent_session_id().and_then(|sid| ctx.state.get(agent.name(), sid)).map(|s| s.baton_session_id);
    let session_id = session_for(ctx, agent, p, &project, hub.as_mut(), continuing, Some(&info)).await?;
    super::commits::start(ctx, agent, p, &info);
    save_unsaved(ctx, agent, &project, &session_id, hub.as_mut()).await;
    let budget = brief_budget(ctx, agent);
    let Some(hub) = hub.as_mut() else {
        return Ok(deliver(ctx, agent, &offline_brief(ctx, &project, budget)));
    };
    // A continued session is alive again; a session just started needs no heartbeat.
    if known.as_deref() == Some(session_id.as_str()) {
        let _ = hub
            .sessions
            .heartbeat(HeartbeatRequest { session_id: session_id.clone(), ..Default::default() })
            .await;
    }
    match brief_text(hub, &project, Some(&session_id), &cwd, &info, budget).await {
        Ok(text) => {
            let _ = cache::store(&ctx.settings.data_dir, &project.key, &text);
            Ok(deliver(ctx, agent, &text))
        }
        Err(status) if remote::is_transient(&status) => {
            log(ctx, &format!("GetBrief failed: {}", remote::explain(&status)));
            Ok(deliver(ctx, agent, &offline_brief(ctx, &project, budget)))
        }
        Err(status) => {
            let why = remote::explain(&status);
            log(ctx, &format!("GetBrief refused: {why}"));
            let note = format!("The Baton hub refused the brief: {why}");
            Ok(deliver(ctx, agent, &cached_brief(ctx, &project, budget, &note)))
        }
    }
}

/// Other conversations of this project on this machine that recorded tool calls after
/// their last checkpoint and never ended (killed, or still running): their journal is saved
/// as a checkpoint now, so nothing the hooks saw is lost to a `kill -9` and the brief says
/// where they stopped. At most a few, and never the caller's own.
pub(super) async fn save_unsaved(
    ctx: &Ctx,
    agent: Agent,
    project: &Project,
    own: &str,
    mut hub: Option<&mut Hub>,
) {
    const AT_MOST: usize = 3;
    let unsaved: Vec<(String, crate::local::state::AgentSession)> = ctx
        .state
        .unsaved(agent.name())
        .into_iter()
        .filter(|(_, s)| s.project == project.key && !s.ended && s.baton_session_id != own)
        .filter(|(_, s)| s.journal.tool_count > 0 && s.tool_count > s.checkpointed_at)
        .take(AT_MOST)
        .collect();
    for (key, record) in unsaved {
        let mut state = record.journal.state();
        state.git_head = git::head(Path::new(&record.cwd)).unwrap_or_default();
        let session_id = record.baton_session_id.clone();
        let request = CreateCheckpointRequest {
            session_id: session_id.clone(),
            checkpoint_id: uuid::Uuid::now_v7().to_string(),
            kind: CheckpointKind::Auto as i32,
            reason: "saved by the next session here: what its hooks recorded after its last checkpoint"
                .into(),
            state: Some(state),
            // Written by this session for that one: not that session's activity (a killed
            // session does not come back to life).
            write: write::options(agent.kind() as i32, own),
            ..Default::default()
        };
        let sent = write::submit(
            &ctx.queue,
            hub.as_deref_mut(),
            Write::CreateCheckpoint(Box::new(request), project.key.clone()),
            Some(LOCK_WAIT),
        )
        .await;
        match sent {
            Ok(_) => {
                let _ = ctx.state.update(agent.name(), &key, |s| s.checkpointed_at = s.tool_count);
                ctx.state.mark_unsaved(agent.name(), &key, false);
            }
            Err(e) => log(ctx, &format!("could not save session {session_id}'s unsaved calls: {e:#}")),
        }
    }
}
