//! PostToolUse and its failure: the call into the journal, a heartbeat (with the session's
//! reservations renewed) at most every 10 s, and a checkpoint when the call made a moment or
//! one is due.
//!
//! The device here serves hook-bench's "PostToolUse, 4 at once" row (docs/performance.md):
//! a known conversation takes its project from its record while the cwd is the same, and
//! reaches the hub only for a heartbeat or a checkpoint, instead of two `git` processes and
//! a connection on every call.

use baton_proto::v1::{CheckpointKind, HeartbeatRequest};

use super::checkpoint::checkpoint;
use super::session::{conversation_project, session_for};
use crate::agents::Agent;
use crate::agents::payload::Payload;
use crate::ctx::{Ctx, log};
use crate::hub::remote::{self, Hub, Timeouts};
use crate::local::journal;

/// A tool call (or its failure): into the journal, then a heartbeat, and a checkpoint when
/// the call made a moment (a task completed, a failure recovered from) or one is due (every
/// N calls, every M minutes of activity).
pub(super) async fn post_tool_use(
    ctx: &Ctx,
    agent: Agent,
    p: &Payload,
    error: Option<&str>,
) -> anyhow::Result<Option<String>> {
    // The hub only for a heartbeat (at most every BEAT) or a checkpoint (the module's header).
    const BEAT: i64 = 10_000_000;
    let cwd = p.cwd();
    let agent_sid = p.agent_session_id().unwrap_or("unknown").to_owned();
    let (project, known) = conversation_project(ctx, agent, &agent_sid, &cwd);
    let mut hub = match known {
        Some(_) => None,
        None => remote::connect(&ctx.settings, Timeouts::HOOK).await.ok(),
    };
    let session_id = session_for(ctx, agent, p, &project, hub.as_mut(), true, None).await?;
    super::commits::after(ctx, agent, p, hub.as_mut(), &project, true).await;
    let now = crate::clock::now_us();
    let null = serde_json::Value::Null;
    let (count, due, beat, mut auto, known) = ctx.state.update(agent.name(), &agent_sid, |s| {
        let signals = p.tool_name.as_deref().map_or_else(Vec::new, |name| {
            s.journal.tool(&journal::ToolUse {
                name,
                input: p.tool_input.as_ref().unwrap_or(&null),
                response: p.tool_response.as_ref().unwrap_or(&null),
                error,
                cwd: &cwd,
                root: &project.root,
            })
        });
        s.tool_count += 1;
        let due = due_checkpoints(ctx, s, signals, now);
        let beat = now - s.last_beat_us >= BEAT;
        if beat {
            s.last_beat_us = now;
        }
        let known = if beat { s.reserved_ids.clone() } else { Vec::new() };
        (s.tool_count, due, beat, s.auto_reserve, known)
    })?;
    if hub.is_none() && (beat || !due.is_empty()) {
        hub = remote::connect(&ctx.settings, Timeouts::HOOK).await.ok();
    }
    let mut notice = None;
    if let Some(h) = hub.as_mut().filter(|_| beat) {
        heartbeat(ctx, h, session_id.clone(), count).await;
        let renewed =
            super::reserved::renew(ctx, agent, &agent_sid, h, (&project.key, &session_id), known).await;
        notice = renewed.0;
        auto = renewed.1.unwrap_or(auto);
    }
    if auto {
        super::reserved::auto_tasks(ctx, agent, &agent_sid, &mut hub, &project.key, &session_id).await;
    }
    if due.is_empty() {
        ctx.state.mark_unsaved(agent.name(), &agent_sid, true);
    }
    // One checkpoint holds the whole state: the first moment names it, the rest its reason.
    if let Some((kind, _)) = due.first() {
        let reason = due.iter().map(|(_, r)| r.as_str()).collect::<Vec<_>>().join("; ");
        checkpoint(ctx, agent, p, hub.as_mut(), *kind, &reason, false).await?;
    }
    Ok(notice)
}

/// The checkpoints a tool call makes due: one per moment it made (a task completed, a
/// failure recovered from), one when M minutes of activity or N calls have passed since the
/// last. Claimed in `s`, under the state's lock: a parallel hook does not make the same one.
pub(super) fn due_checkpoints(
    ctx: &Ctx,
    s: &mut crate::local::state::AgentSession,
    signals: Vec<journal::Signal>,
    now: i64,
) -> Vec<(CheckpointKind, String)> {
    let every = u64::from(ctx.settings.checkpoint_every);
    let period_us = i64::from(ctx.settings.checkpoint_minutes) * 60_000_000;
    let mut due: Vec<(CheckpointKind, String)> = signals
        .into_iter()
        .map(|signal| match signal {
            journal::Signal::TaskCompleted(task) => (CheckpointKind::Task, format!("task completed: {task}")),
            journal::Signal::Recovered(what) => {
                (CheckpointKind::Recovery, format!("recovered after a failure: {what}"))
            }
        })
        .collect();
    if period_us > 0 && s.last_checkpoint_us > 0 && now - s.last_checkpoint_us >= period_us {
        due.push((CheckpointKind::Time, format!("{} minutes of activity", ctx.settings.checkpoint_minutes)));
    }
    if every > 0 && s.tool_count - s.checkpointed_at >= every {
        due.push((CheckpointKind::Auto, format!("every {every} tool calls")));
    }
    if !due.is_empty() {
        s.checkpointed_at = s.tool_count;
        s.last_checkpoint_us = now;
    }
    due
}

/// Tells the hub the session is alive; a refusal is logged, never the hook's failure.
pub(super) async fn heartbeat(ctx: &Ctx, hub: &mut Hub, session_id: String, count: u64) {
    let beat = hub
        .sessions
        .heartbeat(HeartbeatRequest {
            session_id,
            tool_count: Some(i64::try_from(count).unwrap_or(i64::MAX)),
            ..Default::default()
        })
        .await;
    if let Err(status) = beat
        && !remote::is_transient(&status)
    {
        log(ctx, &format!("heartbeat refused: {}", remote::explain(&status)));
    }
}
