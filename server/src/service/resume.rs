//! ResumeSession: take over an ended session (claiming a crashed or idle one exactly once),
//! start its successor from the nearest valid checkpoint, and hand back a brief. `core::resume`
//! decides which session and which checkpoint; this file reads and applies.
//!
//! The brief of a named session is read beside the write instead of after it (it would be
//! about half of a resume's latency; `baton-bench`'s row "resume p99"): it leaves out the
//! session being resumed and takes it as the previous one, which is what the write makes
//! true.

use baton_proto::v1::{
    Checkpoint as CheckpointMessage, EventKind, ResumeSessionRequest, ResumeSessionResponse, SessionStatus,
    resume_session_request,
};

use super::brief::{build_brief, fit_brief};
use super::memory_cache::MemoryCache;
use super::session::{self, NewSession};
use super::write::{self, Write, event};
use crate::core::conflict;
use crate::core::lww::Decision;
use crate::core::resume::{self, Asked, Candidate, Step, Walk};
use crate::core::validate;
use crate::error::{Error, Result};
use crate::store::model::{FirstRead, Lock, Session};
use crate::store::{BriefFor, Store, WriteCtx, WriteTx};

/// `ResumeSession`: the write, and the brief its reply carries (of `budget` characters).
#[tracing::instrument(level = "debug", skip_all, fields(project = %req.project))]
pub async fn resume_with_brief<S: Store>(
    store: &S,
    cache: &MemoryCache,
    ctx: WriteCtx,
    req: ResumeSessionRequest,
    new_id: uuid::Uuid,
    budget: usize,
) -> Result<ResumeSessionResponse> {
    let project = req.project.clone();
    let ahead = match &req.target {
        Some(resume_session_request::Target::SessionId(target)) => Some(BriefFor {
            project: project.clone(),
            session_id: Some(new_id),
            branch: req.branch.clone(),
            resuming: Some(target.clone()),
        }),
        _ => None,
    };
    let (mut reply, ahead) = match ahead {
        Some(q) => {
            let (reply, data) =
                tokio::join!(resume(store, ctx, req, new_id), super::brief::data(store, cache, q));
            (reply?, Some(data))
        }
        None => (resume(store, ctx, req, new_id).await?, None),
    };
    let (session_id, branch) =
        reply.session.as_ref().map(|s| (s.id.clone(), s.branch.clone())).unwrap_or_default();
    let new_session = reply.result.as_ref().is_some_and(|r| !r.replayed) && session_id == new_id.to_string();
    let brief = match ahead {
        Some(data) if new_session => {
            let mut data = data?;
            // The resumed session as the write left it.
            data.previous = reply.resumed_from.clone().or(data.previous);
            fit_brief(&project, data, budget, &[])
        }
        _ => {
            // A replayed reply (another new session), or no session named.
            let session_id = validate::uuid("session_id", &session_id).ok();
            build_brief(
                store,
                cache,
                BriefFor { project: project.clone(), session_id, branch, resuming: None },
                budget,
                &[],
            )
            .await?
        }
    };
    reply.brief = Some(brief);
    Ok(reply)
}

/// The write: claims the target and starts the successor.
async fn resume<S: Store>(
    store: &S,
    ctx: WriteCtx,
    req: ResumeSessionRequest,
    new_id: uuid::Uuid,
) -> Result<ResumeSessionResponse> {
    // A named session is read with the lock.
    let first_read = match &req.target {
        Some(resume_session_request::Target::SessionId(id)) => Some(FirstRead::Session(id.clone())),
        _ => None,
    };
    let lock = Lock {
        project: req.project.clone(),
        request_id: ctx.request_id.clone(),
        memory: false,
        first_read,
        rewrites_log: false,
    };
    let ran = write::run(store, lock, ctx, move |w, ctx| {
        Box::pin(async move {
            let asked = match &req.target {
                Some(resume_session_request::Target::SessionId(id)) => Asked::Session(id),
                Some(resume_session_request::Target::CheckpointId(id)) => Asked::Checkpoint(id),
                None => Asked::Latest,
            };
            let target = target(w, asked, &req.project).await?;
            if let Some(thread) = &target.thread_key {
                return Err(Error::FailedPrecondition(format!(
                    "session {} is thread {thread:?} of an orchestrator (ThreadService): it is continued by putting \
                     its next checkpoint, not resumed",
                    target.id
                )));
            }
            resume::check_resumable(&target.id, target.status(), target.resumed_by.as_deref())?;
            let start = match asked {
                Asked::Checkpoint(id) => Some(id.to_owned()),
                _ => target.head_checkpoint_id.clone(),
            };
            let (checkpoint, skipped) = nearest_valid(w, start).await?;
            let new_id = new_id.to_string();
            let resumed_from =
                if resume::claims(target.status()) { claim(w, target, &new_id, ctx)? } else { target };
            let git_head = checkpoint.as_ref().and_then(|c| c.state.as_ref()).map(|s| s.git_head.as_str());
            let new = NewSession {
                id: &new_id,
                project: &req.project,
                agent: if req.agent == 0 { resumed_from.agent } else { req.agent },
                agent_session_id: &req.agent_session_id,
                host: &resume::inherit(&req.host, &resumed_from.host),
                user: &resume::inherit(&req.user, &resumed_from.user_name),
                cwd: &resume::inherit(&req.cwd, &resumed_from.cwd),
                branch: &resume::inherit(&req.branch, &resumed_from.branch),
                goal: &resumed_from.goal,
                status: SessionStatus::Active,
                lease_ttl_ms: req.lease_ttl_ms,
                git_base: &resume::git_base(git_head, &resumed_from.git_head),
                resumed_from: Some(&resumed_from.id),
                metadata: &std::collections::HashMap::new(),
                generated: req.new_session_id.is_empty(),
                thread: None,
            };
            let session = session::insert(w, &new, ctx)
                .await?
                .ok_or_else(|| {
                    Error::AlreadyExists(format!("new_session_id: session {new_id} already exists"))
                })?
                .to_proto();
            let mut ev = event(EventKind::SessionStarted, "session", &new_id, &ctx.actor);
            ev.value = Some(baton_proto::v1::event::Value::Session(session.clone()));
            let revision = w.emit(ev)?.revision;
            // What the resumed session held, its successor holds (the brief shows it there).
            super::reservation::hand_over(w, ctx, &resumed_from.id, &session).await?;
            let reply = ResumeSessionResponse {
                session: Some(session),
                resume_command: resume_command(resumed_from.agent, &resumed_from.agent_session_id),
                resumed_from: Some(resumed_from.to_proto()),
                checkpoint,
                skipped,
                brief: None,
                result: Some(conflict::result(revision, Decision::Applied, None, ctx.writer())),
            };
            w.finish(ctx, &reply)?;
            Ok(reply)
        })
    });
    ran.await?.or_replayed(|r| r.result.as_mut())
}

/// The session the resume takes over, or NOT_FOUND saying what was missing.
async fn target<T: WriteTx>(w: &mut Write<T>, asked: Asked<'_>, project: &str) -> Result<Session> {
    let mut candidates = w.tx().resume_candidates(asked).await?;
    let chosen = {
        let view: Vec<Candidate<'_>> = candidates
            .iter()
            .map(|s| Candidate { id: &s.id, status: s.status(), updated_us: s.updated_us })
            .collect();
        resume::choose(asked, &view)
    };
    if let Some(i) = chosen {
        return Ok(candidates.swap_remove(i));
    }
    Err(Error::NotFound(match asked {
        Asked::Session(id) => format!("session_id: no session {id}; start one with StartSession"),
        Asked::Checkpoint(id) => match w.tx().checkpoint(id).await? {
            None => format!("checkpoint_id: no checkpoint {id}"),
            Some(cp) => format!("checkpoint_id: checkpoint {id}'s session {} is gone", cp.session_id),
        },
        Asked::Latest => {
            format!(
                "project {project:?} has no crashed, idle or completed session to resume; start a new session"
            )
        }
    }))
}

/// The nearest checkpoint that verifies, from `start` up its ancestors, and the corrupt ones
/// skipped on the way. A checkpoint asked for by id must exist.
async fn nearest_valid<T: WriteTx>(
    w: &mut Write<T>,
    start: Option<String>,
) -> Result<(Option<CheckpointMessage>, Vec<baton_proto::v1::SkippedCheckpoint>)> {
    let mut walk = Walk::default();
    let mut next = start;
    let found = loop {
        let Some(id) = next.take() else { break None };
        let Some(row) = w.tx().checkpoint(&id).await? else {
            // Only the head's or a parent's can be missing (purged): the asked one was
            // read with its session.
            break None;
        };
        match walk.visit(&row.id, row.parent_id.as_deref(), row.verified(false)) {
            Step::Found(checkpoint) => break Some(checkpoint),
            Step::Parent(parent) => next = Some(parent),
            Step::End => break None,
        }
    };
    for skipped in &walk.skipped {
        tracing::warn!(checkpoint = %skipped.checkpoint_id, error = %skipped.reason, "resume skips a corrupt checkpoint");
    }
    Ok((found, walk.skipped))
}

/// Claims a crashed or idle session for its successor `by`: it becomes resumed, which
/// fences its old writers. The change goes with the write's log.
fn claim<T: WriteTx>(w: &mut Write<T>, mut row: Session, by: &str, ctx: &WriteCtx) -> Result<Session> {
    row.resumed_by = Some(by.to_owned());
    session::set_status(w, &mut row, SessionStatus::Resumed, &ctx.actor, false)?;
    w.apply(crate::store::model::Change::PutSession(Box::new(row.clone())));
    Ok(row)
}

/// The agent's own command to continue a conversation, as one shell line (the argv holds
/// only safe ids, which need no quoting).
fn resume_command(agent: i32, agent_session_id: &str) -> String {
    baton_proto::agent::resume_argv(agent, agent_session_id).map(|argv| argv.join(" ")).unwrap_or_default()
}
