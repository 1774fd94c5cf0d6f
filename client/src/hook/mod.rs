//! `baton hook <agent> <event>`: what the agents' hooks call. It reads the agent's JSON
//! payload on stdin, does the right thing for the event, prints what the agent expects,
//! and never breaks the agent: bounded time, always exit 0, errors go to `hook.log`.
//!
//! Hooks of one conversation take its project from its record while the cwd is the same,
//! and PostToolUse reaches the hub only for a heartbeat (at most every 10 s) or a
//! checkpoint: without them hook-bench's "PostToolUse, 4 at once" row spent two `git`
//! processes and a connection on every call (16.1 ms p50 against 15).

pub mod risk;

use anyhow::Context as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use baton_proto::v1::{
    CheckpointKind, CreateCheckpointRequest, EndSessionRequest, HeartbeatRequest, StartSessionRequest,
};

use crate::agents::payload::Payload;
pub use crate::agents::{Agent, Event};
use crate::ctx::log;
use crate::hub::remote::{self, Hub, Timeouts};
use crate::local::journal;
use crate::outbox::write::{self, Delivered, Write};
use crate::project::{self, Project};
use crate::usecase::brief::{brief_budget, brief_text, cached_brief, deliver, offline_brief};
use crate::usecase::checkpoint::conversation_state;
use crate::{ctx::Ctx, local::cache, project::git};

/// How long a hook may take in all (the agents allow more; Baton should not need it).
const HOOK_BUDGET: Duration = Duration::from_millis(2500);
/// How long the detached part of a hook may take (SessionEnd, and uploads), summaries aside.
const DETACHED_BUDGET: Duration = Duration::from_secs(30);
/// How long a hook waits for the queue lock before queueing behind another flush.
const LOCK_WAIT: Duration = Duration::from_millis(300);

/// Runs a hook and returns what to print. Never fails: problems are logged.
pub async fn run(ctx: &Ctx, agent: Agent, event: &str, stdin: &str, payload_file: Option<&Path>) -> String {
    if std::env::var_os(crate::agents::summary::RUNNING).is_some() {
        // Baton's own summarizer run (`crate::agents::summary`) is not a Baton session.
        return agent.quiet_output().to_owned();
    }
    let Some(event) = Event::parse(event) else {
        log(ctx, &format!("{}: unknown hook event {event:?} (ignored)", agent.name()));
        return agent.quiet_output().to_owned();
    };
    let parsed = match payload_file {
        Some(file) => {
            let text = std::fs::read_to_string(file).unwrap_or_default();
            let _ = std::fs::remove_file(file);
            Payload::parse(&text)
        }
        None => Payload::parse(stdin),
    };
    let payload = match parsed {
        Ok(payload) => payload,
        Err(why) => {
            log(ctx, &format!("{} {event:?}: nothing done: {why}", agent.name()));
            return agent.quiet_output().to_owned();
        }
    };
    if agent == Agent::Claude && runs_under_cursor_with_its_own_hooks(&payload.cwd()) {
        // Cursor also loads Claude Code's hooks: Baton's Cursor hooks do the work.
        return agent.quiet_output().to_owned();
    }
    let detached = payload_file.is_some();
    // Work handed to a detached process has no agent waiting on it: room for an upload and
    // a summary's time limit, still bounded.
    let budget = if detached {
        DETACHED_BUDGET
            + Duration::from_secs(ctx.settings.summarize.map_or(0, |_| ctx.settings.summarize_seconds))
    } else {
        HOOK_BUDGET
    };
    let work = handle(ctx, agent, event, &payload, detached);
    match tokio::time::timeout(budget, work).await {
        Ok(Ok(out)) => out,
        Ok(Err(e)) => {
            log(ctx, &format!("{} {event:?}: {e:#}", agent.name()));
            let refused = e.downcast_ref::<write::Refused>().map(|r| r.0.as_str());
            fallback(ctx, agent, event, &payload, refused)
        }
        Err(_) => {
            log(ctx, &format!("{} {event:?}: gave up after {budget:?}", agent.name()));
            fallback(ctx, agent, event, &payload, None)
        }
    }
}

/// What to print when the work failed: for SessionStart, still a brief from the cache,
/// headed by what happened (the hub refused the session, or could not be reached).
fn fallback(ctx: &Ctx, agent: Agent, event: Event, payload: &Payload, refused: Option<&str>) -> String {
    if event == Event::SessionStart {
        let project = project::identify(&payload.cwd());
        let budget = brief_budget(ctx, agent);
        let brief = match refused {
            Some(why) => {
                cached_brief(ctx, &project, budget, &format!("The Baton hub refused this session: {why}"))
            }
            None => offline_brief(ctx, &project, budget),
        };
        return deliver(ctx, agent, &brief);
    }
    agent.quiet_output().to_owned()
}

async fn handle(
    ctx: &Ctx,
    agent: Agent,
    event: Event,
    p: &Payload,
    detached: bool,
) -> anyhow::Result<String> {
    if event == Event::SessionStart {
        return session_start(ctx, agent, p).await;
    }
    record_event(ctx, agent, event, p, detached).await?;
    Ok(agent.quiet_output().to_owned())
}

/// What an event other than SessionStart records (its output is the agent's quiet one).
async fn record_event(
    ctx: &Ctx,
    agent: Agent,
    event: Event,
    p: &Payload,
    detached: bool,
) -> anyhow::Result<()> {
    match event {
        Event::SessionStart => {}
        Event::PostToolUse => {
            post_tool_use(ctx, agent, p, None).await?;
        }
        Event::ToolFailure => {
            let error = p.error_text().unwrap_or_else(|| "the tool failed".into());
            post_tool_use(ctx, agent, p, Some(&error)).await?;
        }
        Event::Prompt => {
            if let Some(prompt) = &p.prompt {
                let sid = p.agent_session_id().unwrap_or("unknown");
                let first = ctx.state.get(agent.name(), sid).is_none_or(|s| s.journal.last_prompt.is_empty());
                record(ctx, agent, p, |j| j.prompt(prompt)).await?;
                if first {
                    first_prompt_as_goal(ctx, agent, p).await?;
                }
            }
        }
        Event::SubagentStop => {
            let name = p.agent_type.clone().unwrap_or_else(|| "subagent".into());
            record(ctx, agent, p, |j| j.note_tool("Subagent", &name)).await?;
        }
        Event::StopFailure => {
            let error = p.error_text().unwrap_or_else(|| "the turn ended in an error".into());
            record(ctx, agent, p, |j| j.error(&error)).await?;
            checkpoint_now(ctx, agent, p, CheckpointKind::Auto, "a turn ended in an error", false).await?;
        }
        Event::PostCompact => {
            if let Some(summary) = &p.compact_summary {
                record(ctx, agent, p, |j| j.compacted(summary)).await?;
            }
            let reason = format!("after compaction ({})", p.trigger.as_deref().unwrap_or("auto"));
            checkpoint_now(ctx, agent, p, CheckpointKind::Auto, &reason, false).await?;
        }
        Event::PreToolUse => {
            if let Some(command) = p.shell_command()
                && let Some(why) = risk::risky(&command)
            {
                let reason = format!("before {why}: {}", crate::text::clip(&command, 300));
                checkpoint_now(ctx, agent, p, CheckpointKind::Risk, &reason, false).await?;
            }
        }
        Event::Stop | Event::PreCompact
            if !detached
                && (syncs(ctx, agent, p)
                    || (event == Event::PreCompact && ctx.settings.summarize.is_some())) =>
        {
            // Uploading a transcript is slow work: a detached process does it.
            let name = if event == Event::Stop { "Stop" } else { "PreCompact" };
            if let Err(e) = spawn_detached(ctx, agent, name, p) {
                log(ctx, &format!("cannot detach {name} work ({e:#})"));
            }
        }
        Event::Stop => {
            checkpoint_now(ctx, agent, p, CheckpointKind::Auto, "end of a turn", detached).await?;
        }
        Event::PreCompact => {
            let mut hub = remote::connect(&ctx.settings, Timeouts::HOOK).await.ok();
            let reason = format!("before compaction ({})", p.trigger.as_deref().unwrap_or("auto"));
            checkpoint(ctx, agent, p, hub.as_mut(), CheckpointKind::PreCompact, &reason, detached).await?;
            if detached {
                summarize(ctx, agent, p, hub.as_mut(), false).await;
            }
        }
        Event::SessionEnd if !detached => {
            // The agents give SessionEnd 1–1.5 s or do not wait at all: hand the work to a
            // detached process and return at once.
            if let Err(e) = spawn_detached(ctx, agent, "SessionEnd", p) {
                log(ctx, &format!("cannot detach SessionEnd work ({e:#}); doing it inline"));
                session_end(ctx, agent, p).await?;
            }
        }
        Event::SessionEnd => {
            session_end(ctx, agent, p).await?;
        }
    }
    Ok(())
}

/// A conversation's first prompt is its session's goal (`baton sessions`, the brief's
/// session lines) until a summary finds a better one: its first line, redacted as the
/// journal keeps it.
async fn first_prompt_as_goal(ctx: &Ctx, agent: Agent, p: &Payload) -> anyhow::Result<()> {
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
const GOAL_CHARS: usize = 200;

/// A checkpoint made now, from its own connection to the hub (queued when there is none).
async fn checkpoint_now(
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

/// The Baton session of this agent conversation: the one this machine started for it, or
/// a new one (hooks installed mid-conversation, or a new conversation).
async fn session_for(
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
    // The caller's, when it has read it already: each `git` call is a process (~2 ms).
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
    // instead of starting another.
    remember(ctx, agent, p, &agent_sid, &id, project, &cwd)?;
    write::submit(&ctx.queue, hub, Write::StartSession(request), Some(LOCK_WAIT)).await?;
    Ok(id)
}

/// A successor of `ended` (a session of this conversation that ended here) for the
/// conversation resumed now; this machine's record of the conversation points at it.
async fn resume_ended(
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
async fn adopt(
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
fn remember(
    ctx: &Ctx,
    agent: Agent,
    p: &Payload,
    agent_sid: &str,
    id: &str,
    project: &Project,
    cwd: &Path,
) -> anyhow::Result<()> {
    ctx.state.update(agent.name(), agent_sid, |s| {
        *s = crate::local::state::AgentSession {
            baton_session_id: id.to_owned(),
            project: project.key.clone(),
            transcript_path: p.transcript_path.clone().unwrap_or_default(),
            cwd: cwd.display().to_string(),
            root: project.root.display().to_string(),
            // The time checkpoints count from the session's start.
            last_checkpoint_us: crate::clock::now_us(),
            agent_pids: crate::host::pids(),
            ..Default::default()
        };
    })
}

async fn session_start(ctx: &Ctx, agent: Agent, p: &Payload) -> anyhow::Result<String> {
    let swept = ctx.state.sweep(crate::local::state::EXPIRY);
    if swept > 0 {
        log(ctx, &format!("forgot {swept} conversation record(s) untouched for 30 days"));
    }
    let cwd = p.cwd();
    let info = git::info(&cwd);
    let project = project::identify_in(&cwd, info.toplevel.clone());
    let mut hub = remote::connect(&ctx.settings, Timeouts::HOOK).await.ok();
    // resume / compact / clear-less restarts continue this conversation's Baton session.
    let continuing = matches!(p.source.as_deref(), Some("resume" | "compact")) || agent == Agent::Cursor;
    let known =
        p.agent_session_id().and_then(|sid| ctx.state.get(agent.name(), sid)).map(|s| s.baton_session_id);
    let session_id = session_for(ctx, agent, p, &project, hub.as_mut(), continuing, Some(&info)).await?;
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
async fn save_unsaved(ctx: &Ctx, agent: Agent, project: &Project, own: &str, mut hub: Option<&mut Hub>) {
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

/// The project of a conversation this machine has a live record of (in the same cwd), from
/// that record; else found again (`git`). The record, when there is one.
fn conversation_project(
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
async fn record(
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

/// A tool call (or its failure): into the journal, then a heartbeat, and a checkpoint when
/// the call made a moment (a task completed, a failure recovered from) or one is due (every
/// N calls, every M minutes of activity).
async fn post_tool_use(ctx: &Ctx, agent: Agent, p: &Payload, error: Option<&str>) -> anyhow::Result<()> {
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
    let now = crate::clock::now_us();
    let null = serde_json::Value::Null;
    let (count, due, beat) = ctx.state.update(agent.name(), &agent_sid, |s| {
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
        (s.tool_count, due, beat)
    })?;
    if hub.is_none() && (beat || !due.is_empty()) {
        hub = remote::connect(&ctx.settings, Timeouts::HOOK).await.ok();
    }
    if let Some(h) = hub.as_mut().filter(|_| beat) {
        heartbeat(ctx, h, session_id, count).await;
    }
    if due.is_empty() {
        ctx.state.mark_unsaved(agent.name(), &agent_sid, true);
    }
    // One checkpoint holds the whole state: the first moment names it, the rest its reason.
    if let Some((kind, _)) = due.first() {
        let reason = due.iter().map(|(_, r)| r.as_str()).collect::<Vec<_>>().join("; ");
        checkpoint(ctx, agent, p, hub.as_mut(), *kind, &reason, false).await?;
    }
    Ok(())
}

/// The checkpoints a tool call makes due: one per moment it made (a task completed, a
/// failure recovered from), one when M minutes of activity or N calls have passed since the
/// last. Claimed in `s`, under the state's lock: a parallel hook does not make the same one.
fn due_checkpoints(
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
async fn heartbeat(ctx: &Ctx, hub: &mut Hub, session_id: String, count: u64) {
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

/// Whether transcripts are carried over for this agent (opt-in; Claude Code first).
fn syncs(ctx: &Ctx, agent: Agent, p: &Payload) -> bool {
    ctx.settings.sync_transcripts
        && matches!(agent, Agent::Claude | Agent::Codex | Agent::Gemini)
        && p.transcript().is_some_and(|t| t.exists())
}

/// A checkpoint from what the agent left: its transcript, its last answer, the git head.
/// Returns how it was delivered and the agent's last answer (a session's summary at its end).
/// `may_upload`: this process may take the time to upload the transcript (when synced).
async fn checkpoint(
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
        // Claude Code keeps the conversation's tasks beside it, not in the transcript.
        if agent == Agent::Claude {
            match upload_claude_tasks(h, &project.key, p.agent_session_id().unwrap_or_default(), &cwd).await {
                Ok(blob) => blobs.extend(blob),
                Err(e) => {
                    log(ctx, &format!("task files upload failed ({e:#}); checkpoint saved without them"));
                }
            }
        }
    }
    let request = CreateCheckpointRequest {
        session_id: session_id.clone(),
        checkpoint_id: uuid::Uuid::now_v7().to_string(),
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
    // Every call the journal holds is in this checkpoint (sent or queued).
    ctx.state.mark_unsaved(agent.name(), agent_sid, false);
    Ok((delivered, last_answer))
}

async fn upload_transcript(
    hub: &mut Hub,
    project: &str,
    path: &Path,
    agent_session_id: &str,
    cwd: &Path,
) -> anyhow::Result<baton_proto::v1::BlobRef> {
    let (data, _) = crate::hub::blob::prepare(path)?;
    crate::hub::blob::upload(hub, project, crate::hub::blob::TRANSCRIPT, &data, agent_session_id, cwd).await
}

async fn upload_claude_tasks(
    hub: &mut Hub,
    project: &str,
    agent_session_id: &str,
    cwd: &Path,
) -> anyhow::Result<Option<baton_proto::v1::BlobRef>> {
    let home = directories::BaseDirs::new().context("no home directory")?.home_dir().to_path_buf();
    let Some(data) = crate::hub::blob::bundle_claude_tasks(&home, agent_session_id)? else { return Ok(None) };
    Ok(Some(
        crate::hub::blob::upload(hub, project, crate::hub::blob::CLAUDE_TASKS, &data, agent_session_id, cwd)
            .await?,
    ))
}

async fn session_end(ctx: &Ctx, agent: Agent, p: &Payload) -> anyhow::Result<()> {
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
async fn summarize(
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
fn summary_writes(
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
fn tempfile_dir(ctx: &Ctx) -> anyhow::Result<PathBuf> {
    let dir = ctx.settings.data_dir.join("tmp").join(format!("summary-{}", uuid::Uuid::now_v7()));
    crate::fsperm::create_private_dir(&dir)?;
    Ok(dir)
}

/// Starts `baton hook <agent> <event> --payload-file F` in its own process group, so it
/// outlives the agent's wait and any signal to the hook's group.
fn spawn_detached(ctx: &Ctx, agent: Agent, event: &str, p: &Payload) -> anyhow::Result<()> {
    use std::os::unix::process::CommandExt;
    let dir = ctx.settings.data_dir.join("tmp");
    crate::fsperm::create_private_dir(&dir)?;
    let file = dir.join(format!("{event}-{}.json", uuid::Uuid::now_v7()));
    let payload = serde_json::json!({
        "session_id": p.agent_session_id(),
        "transcript_path": p.transcript_path,
        "cwd": p.cwd(),
        "reason": p.reason,
        "trigger": p.trigger,
        "last_assistant_message": p.last_answer(),
    });
    crate::fsperm::write_private(&file, payload.to_string().as_bytes())?;
    std::process::Command::new(std::env::current_exe()?)
        .args(["hook", agent.name(), event, "--payload-file"])
        .arg(&file)
        // The same hub as this process, whether it came from a flag, the environment or
        // the config file.
        .env("BATON_SERVER", &ctx.settings.server)
        .envs(ctx.settings.token.as_ref().map(|t| ("BATON_TOKEN", t)))
        .envs(ctx.settings.ca_cert.as_ref().map(|c| ("BATON_CA_CERT", c)))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn()?;
    Ok(())
}

/// Cursor runs Claude Code's hooks too; when Baton's own Cursor hooks are installed, the
/// Claude ones stand down so nothing runs twice.
fn runs_under_cursor_with_its_own_hooks(cwd: &Path) -> bool {
    if std::env::var_os("CURSOR_VERSION").is_none() {
        return false;
    }
    let mut files = vec![cwd.join(".cursor/hooks.json")];
    if let Some(root) = git::toplevel(cwd) {
        files.push(root.join(".cursor/hooks.json"));
    }
    if let Some(home) = directories::BaseDirs::new() {
        files.push(home.home_dir().join(".cursor/hooks.json"));
    }
    files.iter().any(|f| std::fs::read_to_string(f).is_ok_and(|t| t.contains("baton hook cursor")))
}
