//! The Baton session of an agent conversation, as its hooks find it: this machine's record
//! of the conversation, a successor `baton resume` prepared, or a new session.

use std::path::{Path, PathBuf};

use baton_proto::v1::StartSessionRequest;

use super::LOCK_WAIT;
use crate::agents::Agent;
use crate::agents::payload::Payload;
use crate::ctx::{Ctx, log};
use crate::hub::remote::{self, Hub, Timeouts};
use crate::local::journal;
use crate::outbox::write::{self, Write};
use crate::project::{self, Project, git};

/// The Baton session of this agent conversation: the one this machine started for it, or
/// a new one (hooks installed mid-conversation, or a new conversation).
pub(super) async fn session_for(
    ctx: &Ctx,
    agent: Agent,
    p: &Payload,
    project: &Project,
    mut hub: Option<&mut Hub>,
    continuing: bool,
    info: Option<&git::Info>,
) -> anyhow::Result<String> {
    let agent_sid = p.agent_session_id().unwrap_or("unknown").to_owned();
    let cwd = p.cwd();
    if continuing
        && let Some(s) =
            ctx.state.get(agent.name(), &agent_sid).filter(|s| !s.ended && s.project == project.key)
    {
        if s.adopt {
            // The successor `baton resume` made: this conversation carries it now.
            adopt(ctx, agent, p, &s.baton_session_id, project, hub, &cwd).await?;
            ctx.state.update(agent.name(), &agent_sid, |s| s.adopt = false)?;
        }
        return Ok(s.baton_session_id);
    }
    // `baton resume` here, for a conversation this machine does not have: the next new
    // conversation in the project continues the successor session it made.
    if let Some(pending) = ctx.state.take(agent.name(), &format!("pending:{}", project.key)) {
        let id = pending.baton_session_id.clone();
        remember(ctx, agent, p, &agent_sid, &id, project, &cwd)?;
        // The work it continues: the resumed checkpoint's tasks and files.
        ctx.state.update(agent.name(), &agent_sid, |s| s.journal = pending.journal)?;
        adopt(ctx, agent, p, &id, project, hub, &cwd).await?;
        return Ok(id);
    }
    // The agent resumed a conversation whose Baton session ended here: a successor linked to
    // it (`resumed_from`), not an unrelated session. Needs the hub; offline, a new session.
    let ended = ctx.state.get(agent.name(), &agent_sid).filter(|s| s.ended && s.project == project.key);
    if continuing && let (Some(ended), Some(hub)) = (ended, hub.as_deref_mut()) {
        match resume_ended(ctx, agent, p, project, hub, &ended.baton_session_id, &cwd).await {
            Ok(id) => return Ok(id),
            Err(status) => {
                log(ctx, &format!("could not link the resumed conversation: {}", remote::explain(&status)));
            }
        }
    }
    let id = uuid::Uuid::now_v7().to_string();
    // The caller's, when it has read it already: each `git` call is a process.
    let info = info.cloned().unwrap_or_else(|| git::info(&cwd));
    let request = StartSessionRequest {
        project: project.key.clone(),
        session_id: id.clone(),
        agent: agent.kind() as i32,
        agent_session_id: p.agent_session_id().unwrap_or_default().to_owned(),
        host: write::hostname(),
        user: write::user(),
        cwd: cwd.display().to_string(),
        branch: info.branch.unwrap_or_default(),
        git_base: info.head.unwrap_or_default(),
        write: write::options(agent.kind() as i32, &id),
        ..Default::default()
    };
    // Remembered before it is sent (the id is made here): if the hub never answers and the
    // hook's budget runs out mid-send, the next hook still knows this conversation's session
    // instead of starting another. And only once the start is on disk: a power cut must not
    // keep a record of a session whose start it lost.
    let record = || remember(ctx, agent, p, &agent_sid, &id, project, &cwd);
    write::submit_then(&ctx.queue, hub, Write::StartSession(request), Some(LOCK_WAIT), record).await?;
    Ok(id)
}

/// A successor of `ended` (a session of this conversation that ended here) for the
/// conversation resumed now; this machine's record of the conversation points at it.
pub(super) async fn resume_ended(
    ctx: &Ctx,
    agent: Agent,
    p: &Payload,
    project: &Project,
    hub: &mut Hub,
    ended: &str,
    cwd: &Path,
) -> Result<String, tonic::Status> {
    let id = uuid::Uuid::now_v7().to_string();
    let agent_sid = p.agent_session_id().unwrap_or("unknown").to_owned();
    let request = baton_proto::v1::ResumeSessionRequest {
        project: project.key.clone(),
        target: Some(baton_proto::v1::resume_session_request::Target::SessionId(ended.to_owned())),
        new_session_id: id.clone(),
        agent: agent.kind() as i32,
        agent_session_id: agent_sid.clone(),
        host: write::hostname(),
        user: write::user(),
        cwd: cwd.display().to_string(),
        branch: git::branch(cwd).unwrap_or_default(),
        // The brief comes from GetBrief, as for any SessionStart.
        brief_budget_chars: 500,
        write: write::options(agent.kind() as i32, &id),
        ..Default::default()
    };
    let reply = hub.sessions.resume_session(request).await?.into_inner();
    let session = reply.session.unwrap_or_default();
    let journal = reply.checkpoint.as_ref().and_then(|c| c.state.as_ref()).map(journal::Journal::continuing);
    remember(ctx, agent, p, &agent_sid, &session.id, project, cwd)
        .map_err(|e| tonic::Status::internal(e.to_string()))?;
    if let Some(journal) = journal {
        ctx.state
            .update(agent.name(), &agent_sid, |s| s.journal = journal)
            .map_err(|e| tonic::Status::internal(e.to_string()))?;
    }
    Ok(session.id)
}

/// Records on a successor session which conversation carries it now (for `baton resume`
/// elsewhere later: the agent's own resume command needs the conversation's id).
pub(super) async fn adopt(
    ctx: &Ctx,
    agent: Agent,
    p: &Payload,
    id: &str,
    project: &Project,
    hub: Option<&mut Hub>,
    cwd: &Path,
) -> anyhow::Result<()> {
    let update = baton_proto::v1::UpdateSessionRequest {
        session_id: id.to_owned(),
        agent_session_id: p.agent_session_id().map(str::to_owned),
        branch: git::branch(cwd),
        write: write::options(agent.kind() as i32, id),
        ..Default::default()
    };
    write::submit(&ctx.queue, hub, Write::UpdateSession(update, project.key.clone()), Some(LOCK_WAIT))
        .await?;
    Ok(())
}

/// Records which Baton session this agent conversation is, starting its counters afresh.
pub(super) fn remember(
    ctx: &Ctx,
    agent: Agent,
    p: &Payload,
    agent_sid: &str,
    id: &str,
    project: &Project,
    cwd: &Path,
) -> anyhow::Result<()> {
    let now = crate::clock::now_us();
    // Where its work starts: commits HEAD gains from here on are linked to it (`commits`).
    let at = git::info(cwd);
    ctx.state.update(agent.name(), agent_sid, |s| {
        *s = crate::local::state::AgentSession {
            baton_session_id: id.to_owned(),
            project: project.key.clone(),
            transcript_path: p.transcript_path.clone().unwrap_or_default(),
            cwd: cwd.display().to_string(),
            root: project.root.display().to_string(),
            // The time checkpoints count from the session's start.
            last_checkpoint_us: now,
            agent_pids: crate::host::pids(),
            head_seen: at.head.unwrap_or_default(),
            head_branch: at.branch.unwrap_or_default(),
            head_seen_us: now,
            hook_us: now,
            ..Default::default()
        };
    })
}

/// The project of a conversation this machine has a live record of (in the same cwd), from
/// that record; else found again (`git`). The record, when there is one.
pub(super) fn conversation_project(
    ctx: &Ctx,
    agent: Agent,
    agent_sid: &str,
    cwd: &Path,
) -> (Project, Option<crate::local::state::AgentSession>) {
    let known = ctx
        .state
        .get(agent.name(), agent_sid)
        .filter(|s| !s.ended && !s.root.is_empty() && s.cwd == cwd.display().to_string());
    let project = match &known {
        Some(s) => Project {
            key: s.project.clone(),
            source: project::Source::Recorded,
            root: PathBuf::from(&s.root),
        },
        None => project::identify(cwd),
    };
    (project, known)
}

/// Records what a hook says into the conversation's journal (its Baton session made first
/// if this machine has none for it yet).
pub(super) async fn record(
    ctx: &Ctx,
    agent: Agent,
    p: &Payload,
    f: impl FnOnce(&mut journal::Journal),
) -> anyhow::Result<()> {
    let agent_sid = p.agent_session_id().unwrap_or("unknown").to_owned();
    let (project, known) = conversation_project(ctx, agent, &agent_sid, &p.cwd());
    if known.is_none() {
        let mut hub = remote::connect(&ctx.settings, Timeouts::HOOK).await.ok();
        session_for(ctx, agent, p, &project, hub.as_mut(), true, None).await?;
    }
    ctx.state.update(agent.name(), &agent_sid, |s| f(&mut s.journal))
}

/// A conversation's first prompt is its session's goal (`baton sessions`, the brief's
/// session lines) until a summary finds a better one: its first line, redacted as the
/// journal keeps it.
pub(super) async fn first_prompt_as_goal(ctx: &Ctx, agent: Agent, p: &Payload) -> anyhow::Result<()> {
    let sid = p.agent_session_id().unwrap_or("unknown");
    let Some(record) = ctx.state.get(agent.name(), sid) else { return Ok(()) };
    let goal = record.journal.last_prompt.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or_default();
    if goal.is_empty() || record.baton_session_id.is_empty() {
        return Ok(());
    }
    let update = baton_proto::v1::UpdateSessionRequest {
        session_id: record.baton_session_id.clone(),
        goal: Some(crate::text::clip(goal, GOAL_CHARS)),
        write: write::options(agent.kind() as i32, &record.baton_session_id),
        ..Default::default()
    };
    let mut hub = remote::connect(&ctx.settings, Timeouts::HOOK).await.ok();
    write::submit(&ctx.queue, hub.as_mut(), Write::UpdateSession(update, record.project), Some(LOCK_WAIT))
        .await?;
    Ok(())
}

/// The most characters of a first prompt kept as a session's goal.
pub(super) const GOAL_CHARS: usize = 200;
