//! `baton resume`: continue the latest (or a given) session here: the brief of that point
//! and the agent's own resume command when the conversation exists on this machine.

use std::path::{Path, PathBuf};

use baton_proto::v1::{ResumeSessionRequest, resume_session_request};

use crate::agents::Agent;
use crate::hub::remote::{self, Timeouts};
use crate::{ctx::Ctx, outbox::write, project, project::git, view};

/// The resumed checkpoint's own state: what the brief of that point adds to the project's.
/// Stored text is data: each item is one line with its control characters made visible,
/// so a teammate's text can never become a heading or an instruction line of its own.
fn where_it_stopped(state: &baton_proto::v1::CheckpointState) -> String {
    let one = |text: &str, max: usize| crate::safe::line(&crate::text::clip(text, max)).into_owned();
    let mut lines = Vec::new();
    for t in state.active_tasks.iter().filter(|t| t.status != "completed") {
        let status = if t.status.is_empty() { "pending" } else { &t.status };
        lines.push(format!("- [{}] {}", one(status, 40), one(&t.content, 500)));
    }
    for q in &state.open_questions {
        lines.push(format!("- open question: {}", one(q, 500)));
    }
    for b in &state.blockers {
        lines.push(format!("- blocker: {}", one(b, 500)));
    }
    let files: Vec<&String> =
        state.files_created.iter().chain(&state.files_modified).chain(&state.files_deleted).collect();
    if !files.is_empty() {
        lines.push(format!(
            "- files touched: {}",
            files.iter().take(20).map(|f| one(f, 300)).collect::<Vec<_>>().join(", ")
        ));
    }
    if let Some(e) = state.errors.last() {
        lines.push(format!("- last error: {}", one(e, 200)));
    }
    if !state.last_prompt.is_empty() {
        lines.push(format!("- last prompt: {}", one(&state.last_prompt, 300)));
    }
    if !state.last_answer.is_empty() {
        lines.push(format!("- last answer: {}", one(&state.last_answer, 300)));
    }
    if lines.is_empty() {
        return String::new();
    }
    format!("# Where it stopped\n\n{}\n\n", lines.join("\n"))
}

/// Whether the agent's conversation is stored on this machine (so its own resume works).
pub fn conversation_here(agent: i32, agent_session_id: &str) -> bool {
    let Ok(agent_session_id) = crate::safe::agent_session_id(agent_session_id) else {
        return false;
    };
    let Some(home) = directories::BaseDirs::new().map(|b| b.home_dir().to_path_buf()) else { return false };
    Agent::from_kind(agent).is_some_and(|a| a.conversation_here(&home, agent_session_id))
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
    let mut target = match (session, checkpoint) {
        (session, Some(c)) => Some(resume_session_request::Target::CheckpointId(
            crate::cmd::checkpoints::resolve_checkpoint(&mut hub, &project.key, session.as_deref(), &c)
                .await?,
        )),
        (Some(s), None) => Some(resume_session_request::Target::SessionId(
            crate::usecase::sessions::resolve(&mut hub, &project.key, &s).await?,
        )),
        (None, None) => None,
    };
    // A successor this machine made earlier that no conversation has taken up yet: the
    // same resume again continues it rather than making another.
    if let Some(waiting) = waiting_successor(ctx, &mut hub, agent, &project.key, target.as_ref()).await? {
        return reuse(ctx, &mut hub, &project.key, waiting, json).await;
    }
    // --restore fetches and verifies the transcript before the session is claimed: a
    // resume of a crashed session can be made once, and must not be spent on a transcript
    // that cannot be restored.
    let mut fetched = None;
    if restore {
        if target.is_none() {
            target = Some(resume_session_request::Target::SessionId(
                latest_to_resume(&mut hub, &project.key).await?,
            ));
        }
        let (checkpoint_id, blob) = transcript_of(&mut hub, target.as_ref()).await?;
        let data = crate::hub::blob::download(&mut hub, &project.key, &blob).await?;
        fetched = Some((checkpoint_id, blob, data));
    }
    let reply = hub
        .sessions
        .resume_session(ResumeSessionRequest {
            project: project.key.clone(),
            target,
            agent: agent.kind() as i32,
            host: write::hostname(),
            user: write::user(),
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
    let restored = match fetched {
        Some(fetched) => {
            Some(restore_transcript(&mut hub, &project.key, dir, fetched, &reply, old.agent).await?)
        }
        None => None,
    };
    let here = conversation_here(old.agent, &old.agent_session_id);
    // Built here from the checked id, never taken from the hub's text.
    let argv = if here { baton_proto::agent::resume_argv(old.agent, &old.agent_session_id) } else { None };
    let command = argv.as_deref().map(crate::safe::shell_line).unwrap_or_default();
    // The agent's next SessionStart for that conversation (or a fresh one here) continues
    // the successor session rather than starting another.
    let key = if here { old.agent_session_id.clone() } else { format!("pending:{}", project.key) };
    remember(ctx, agent, &project.key, &key, &reply, (&old.id, &new.id), argv.clone().unwrap_or_default())?;
    let stopped =
        reply.checkpoint.as_ref().and_then(|c| c.state.as_ref()).map(where_it_stopped).unwrap_or_default();
    let brief =
        with_changes(ctx, &mut hub, &project, &new.id, dir, reply.brief.clone().unwrap_or_default()).await;
    let brief = format!("{stopped}{brief}");
    let brief = crate::safe::text(&brief).into_owned();
    if json {
        println!(
            "{}",
            serde_json::json!({
                "session": view::session_json(&new), "resumed_from": view::session_json(&old),
                "checkpoint": reply.checkpoint.as_ref().map(view::checkpoint_json),
                "skipped": reply.skipped.iter().map(|s| serde_json::json!({"checkpoint_id": s.checkpoint_id, "reason": s.reason})).collect::<Vec<_>>(),
                "resume_command": command, "resume_argv": argv.unwrap_or_default(), "brief": brief, "restored": restored,
            })
        );
        return Ok(());
    }
    print_resumed(agent, &brief, restored.as_deref(), &reply, &new.id, &command);
    Ok(())
}

/// Writes the fetched transcript (or the one of the checkpoint the resume started from, when
/// another came in between) where the agent that wrote it (`agent`) keeps its conversations,
/// with Claude Code's task files beside it; returns the transcript's path.
async fn restore_transcript(
    hub: &mut remote::Hub,
    project: &str,
    dir: &Path,
    (checkpoint_id, blob, data): (String, baton_proto::v1::BlobRef, Vec<u8>),
    reply: &baton_proto::v1::ResumeSessionResponse,
    agent: i32,
) -> anyhow::Result<PathBuf> {
    let home = directories::BaseDirs::new()
        .map(|b| b.home_dir().to_path_buf())
        .ok_or_else(|| anyhow::anyhow!("no home directory"))?;
    // The resume starts where the transcript was read, unless a checkpoint came in
    // between (or the head failed its check): then that one's transcript.
    let started = reply.checkpoint.as_ref().map(|c| c.id.as_str()).unwrap_or_default();
    let (blob, data) = match reply.checkpoint.as_ref().and_then(transcript_blob) {
        Some(other) if started != checkpoint_id => {
            let data = crate::hub::blob::download(hub, project, &other).await?;
            (other, data)
        }
        _ => (blob, data),
    };
    // Where the agent that wrote it keeps its conversations (a session of no known agent's
    // is Claude Code's: the agent transcripts were carried for first).
    let agent = Agent::from_kind(agent).unwrap_or(crate::agents::claude::AGENT);
    let restored = agent.restore_transcript(&data, &blob, dir, &home)?;
    // The files it keeps beside its transcript (Claude Code's tasks), carried with it.
    let side = agent
        .side_files_role()
        .and_then(|role| reply.checkpoint.as_ref().and_then(|c| c.blobs.iter().find(|b| b.role == role)));
    if let Some(side) = side.filter(|s| s.agent_session_id == blob.agent_session_id) {
        let data = crate::hub::blob::download(hub, project, side).await?;
        agent.restore_side_files(&data, side, &home)?;
    }
    Ok(restored)
}

/// What this machine keeps of the resume: the conversation (or the next new one, `key`)
/// continues the successor session, and the same resume again reuses it.
fn remember(
    ctx: &Ctx,
    agent: Agent,
    project: &str,
    key: &str,
    reply: &baton_proto::v1::ResumeSessionResponse,
    (old_id, new_id): (&str, &str),
    argv: Vec<String>,
) -> anyhow::Result<()> {
    ctx.state.update(agent.name(), key, |s| {
        *s = crate::local::state::AgentSession {
            baton_session_id: new_id.to_owned(),
            project: project.to_owned(),
            adopt: true,
            last_checkpoint_us: crate::clock::now_us(),
            // The work continues from where the checkpoint left it.
            journal: reply
                .checkpoint
                .as_ref()
                .and_then(|c| c.state.as_ref())
                .map(crate::local::journal::Journal::continuing)
                .unwrap_or_default(),
            ..Default::default()
        };
    })?;
    ctx.state.update(agent.name(), &successor_key(project), |s| {
        *s = crate::local::state::AgentSession {
            baton_session_id: new_id.to_owned(),
            project: project.to_owned(),
            resumed_from: old_id.to_owned(),
            resume_argv: argv,
            ..Default::default()
        };
    })?;
    Ok(())
}

/// What `baton resume` prints for a person: the brief, what it restored and skipped, where
/// it starts, and how to continue.
fn print_resumed(
    agent: Agent,
    brief: &str,
    restored: Option<&Path>,
    reply: &baton_proto::v1::ResumeSessionResponse,
    new_id: &str,
    command: &str,
) {
    print!("{}", crate::safe::text(brief));
    if let Some(file) = restored {
        println!("restored the transcript to {}", crate::safe::line(&file.display().to_string()));
    }
    for s in &reply.skipped {
        println!(
            "skipped corrupt checkpoint {}: {}",
            crate::safe::line(&s.checkpoint_id),
            crate::safe::line(&s.reason)
        );
    }
    if let Some(cp) = &reply.checkpoint {
        println!(
            "resuming from checkpoint {} ({}, {})",
            crate::safe::line(&cp.id),
            view::kind(cp.kind),
            view::age(cp.created_at.as_ref())
        );
    }
    if command.is_empty() {
        println!(
            "Start a new {} session here: the brief above carries the context (session {}).",
            agent.name(),
            crate::safe::line(new_id)
        );
    } else {
        println!("Continue the conversation with:\n  {command}");
    }
}

/// The resume's brief, with the git changes since the resumed session's last commit when
/// this clone has moved on (as `baton warmup` shows them).
async fn with_changes(
    ctx: &Ctx,
    hub: &mut remote::Hub,
    project: &project::Project,
    session_id: &str,
    dir: &Path,
    brief: baton_proto::v1::Brief,
) -> String {
    let head = git::head(dir).unwrap_or_default();
    if brief.last_git_head.is_empty() || head.is_empty() || brief.last_git_head == head {
        return brief.text;
    }
    let info = git::info(dir);
    let budget = usize::try_from(ctx.settings.brief_budget).unwrap_or(9000);
    match crate::usecase::brief::brief_text(hub, project, Some(session_id), dir, &info, budget).await {
        Ok(text) => text,
        Err(_) => brief.text,
    }
}

/// Where the successor of the last `baton resume` here is remembered.
fn successor_key(project: &str) -> String {
    format!("successor:{project}")
}

/// The successor an earlier `baton resume` here made for the same target (or for any, when
/// none is named), if no conversation has taken it up: still open on the hub, with no
/// conversation and no checkpoint of its own.
async fn waiting_successor(
    ctx: &Ctx,
    hub: &mut remote::Hub,
    agent: Agent,
    project: &str,
    target: Option<&resume_session_request::Target>,
) -> anyhow::Result<Option<crate::local::state::AgentSession>> {
    use baton_proto::v1::{GetSessionRequest, SessionStatus};
    let Some(earlier) = ctx.state.get(agent.name(), &successor_key(project)) else { return Ok(None) };
    match target {
        None => {}
        Some(resume_session_request::Target::SessionId(id)) if *id == earlier.resumed_from => {}
        Some(_) => return Ok(None),
    }
    let session = match hub
        .sessions
        .get_session(GetSessionRequest { session_id: earlier.baton_session_id.clone() })
        .await
    {
        Ok(reply) => reply.into_inner().session.unwrap_or_default(),
        Err(status) if status.code() == tonic::Code::NotFound => return Ok(None),
        Err(status) => return Err(remote::fail(status)),
    };
    let open =
        matches!(SessionStatus::try_from(session.status), Ok(SessionStatus::Active | SessionStatus::Idle));
    let untouched = session.agent_session_id.is_empty() && session.head_checkpoint_id.is_empty();
    Ok((open && untouched && session.project == project).then_some(earlier))
}

/// Prints a waiting successor's brief and how to continue it, as the resume that made it did.
async fn reuse(
    ctx: &Ctx,
    hub: &mut remote::Hub,
    project: &str,
    waiting: crate::local::state::AgentSession,
    json: bool,
) -> anyhow::Result<()> {
    let brief = hub
        .brief
        .get_brief(baton_proto::v1::GetBriefRequest {
            project: project.to_owned(),
            session_id: waiting.baton_session_id.clone(),
            budget_chars: i32::try_from(ctx.settings.brief_budget).unwrap_or(9000),
            ..Default::default()
        })
        .await
        .map_err(remote::fail)?
        .into_inner()
        .brief
        .unwrap_or_default();
    let brief = crate::safe::text(&brief.text).into_owned();
    // The argv was built from a checked id when it was stored; checked again all the same.
    let argv = match waiting.resume_argv.as_slice() {
        [program, .., id] if crate::safe::agent_session_id(id).is_ok() && !program.is_empty() => {
            Some(waiting.resume_argv.clone())
        }
        _ => None,
    };
    let command = argv.as_deref().map(crate::safe::shell_line).unwrap_or_default();
    if json {
        println!(
            "{}",
            serde_json::json!({
                "session": {"id": waiting.baton_session_id}, "resumed_from": {"id": waiting.resumed_from},
                "reused": true, "resume_command": command, "resume_argv": argv.unwrap_or_default(), "brief": brief,
            })
        );
        return Ok(());
    }
    print!("{brief}");
    println!(
        "session {} (made by an earlier `baton resume` here) is still waiting for its conversation: no new one was made",
        crate::safe::line(&waiting.baton_session_id)
    );
    if command.is_empty() {
        println!("Start a new session here: the brief above carries the context.");
    } else {
        println!("Continue the conversation with:\n  {command}");
    }
    Ok(())
}

/// The transcript a checkpoint references.
fn transcript_blob(checkpoint: &baton_proto::v1::Checkpoint) -> Option<baton_proto::v1::BlobRef> {
    checkpoint.blobs.iter().find(|b| b.role == crate::hub::blob::TRANSCRIPT).cloned()
}

/// The session a resume without a target takes over, as the hub picks it: the latest
/// crashed or idle one, else the latest completed one (every page read).
async fn latest_to_resume(hub: &mut remote::Hub, project: &str) -> anyhow::Result<String> {
    use baton_proto::v1::{ListSessionsRequest, Session, SessionStatus};
    let at = |s: &Session| s.updated_at.as_ref().map(|t| (t.seconds, t.nanos));
    for statuses in [vec![SessionStatus::Crashed, SessionStatus::Idle], vec![SessionStatus::Completed]] {
        let mut latest: Option<Session> = None;
        let mut page_token = String::new();
        loop {
            let reply = hub
                .sessions
                .list_sessions(ListSessionsRequest {
                    project: project.to_owned(),
                    statuses: statuses.iter().map(|s| *s as i32).collect(),
                    page_size: 1000,
                    page_token: page_token.clone(),
                    ..Default::default()
                })
                .await
                .map_err(remote::fail)?
                .into_inner();
            for s in reply.sessions {
                if latest.as_ref().is_none_or(|l| (at(&s), &s.id) > (at(l), &l.id)) {
                    latest = Some(s);
                }
            }
            if reply.next_page_token.is_empty() || reply.next_page_token == page_token {
                break;
            }
            page_token = reply.next_page_token;
        }
        if let Some(latest) = latest {
            return Ok(latest.id);
        }
    }
    anyhow::bail!(
        "project {} has no crashed, idle or completed session to resume",
        crate::safe::line(project)
    )
}

/// The checkpoint a resume of `target` starts from and its transcript, checked: the one
/// asked for, or the session's head, or (as the hub does) its nearest ancestor that is not
/// corrupt.
async fn transcript_of(
    hub: &mut remote::Hub,
    target: Option<&resume_session_request::Target>,
) -> anyhow::Result<(String, baton_proto::v1::BlobRef)> {
    use baton_proto::v1::{GetCheckpointRequest, GetSessionRequest};
    let (checkpoint_id, session_id) = match target {
        Some(resume_session_request::Target::CheckpointId(c)) => (c.clone(), None),
        Some(resume_session_request::Target::SessionId(s)) => {
            let session = hub
                .sessions
                .get_session(GetSessionRequest { session_id: s.clone() })
                .await
                .map_err(remote::fail)?
                .into_inner()
                .session
                .unwrap_or_default();
            (session.head_checkpoint_id, Some(s.clone()))
        }
        None => anyhow::bail!("no session to resume"),
    };
    let no_transcript = || {
        anyhow::anyhow!(
            "session {} has no uploaded transcript at its last checkpoint (turn uploads on with `baton init claude --sync-transcripts` on the machine it ran on); `baton resume` without --restore starts a fresh session with the brief",
            crate::safe::line(session_id.as_deref().unwrap_or(&checkpoint_id))
        )
    };
    if checkpoint_id.is_empty() {
        return Err(no_transcript());
    }
    let checkpoint = match hub
        .checkpoints
        .get_checkpoint(GetCheckpointRequest { checkpoint_id: checkpoint_id.clone(), include_payload: false })
        .await
    {
        Ok(reply) => reply.into_inner().checkpoint.unwrap_or_default(),
        // A corrupt checkpoint: the resume starts from its nearest valid ancestor.
        Err(status) if status.code() == tonic::Code::DataLoss => {
            let session = session_id.clone().ok_or_else(|| remote::fail(status.clone()))?;
            let (tree, _) = crate::hub::pages::checkpoints(hub, &session, false).await?;
            let mut next = Some(checkpoint_id.clone());
            let mut found = None;
            while let Some(id) = next.take() {
                let Some(c) = tree.iter().find(|c| c.id == id) else { break };
                if !c.corrupt {
                    found = Some(c.clone());
                    break;
                }
                next = (!c.parent_id.is_empty()).then(|| c.parent_id.clone());
            }
            found.ok_or_else(no_transcript)?
        }
        Err(status) => return Err(remote::fail(status)),
    };
    let blob = transcript_blob(&checkpoint).ok_or_else(no_transcript)?;
    crate::hub::blob::check(&blob)?;
    Ok((checkpoint.id, blob))
}
