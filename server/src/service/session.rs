//! Sessions: start, update (a last-write-wins record), liveness (heartbeats, the reaper),
//! end. Status changes follow `core::status` and take a revision and an event each;
//! liveness alone (`last_seen_at`, `tool_count`) is not a write and takes neither.

use baton_proto::v1::{
    Actor, EndSessionRequest, EndSessionResponse, EventKind, GetSessionResponse, HeartbeatResponse,
    ListSessionsResponse, RecordValue, SessionStatus, StartSessionRequest, StartSessionResponse,
    UpdateSessionRequest, UpdateSessionResponse, record_value,
};

use super::write::{self, Write, event};
use crate::core::conflict::{self, Contested};
use crate::core::lww::{self, Decision, RecordVersion};
use crate::core::status;
use crate::core::time::ts;
use crate::error::{Error, Result};
use crate::store::model::{self, Change, FirstRead, Lock, Session};
use crate::store::rows::encode_actor;
use crate::store::{Entity, Expiry, SessionQuery, Store, Within, WriteCtx, WriteTx, is_within};

/// The fields of a new session (StartSession, or ResumeSession's successor).
pub(crate) struct NewSession<'a> {
    pub id: &'a str,
    pub project: &'a str,
    pub agent: i32,
    pub agent_session_id: &'a str,
    pub host: &'a str,
    pub user: &'a str,
    pub cwd: &'a str,
    pub branch: &'a str,
    pub goal: &'a str,
    pub status: SessionStatus,
    pub lease_ttl_ms: i64,
    pub git_base: &'a str,
    pub resumed_from: Option<&'a str>,
    pub metadata: &'a std::collections::HashMap<String, String>,
    /// The server made the id (a uuid v7): no session can have it yet, so it is not looked
    /// up (a round trip of each resume: `baton-bench`'s row "resume p99").
    pub generated: bool,
    /// An orchestrator's thread and checkpoint namespace (`service::thread`).
    pub thread: Option<(&'a str, &'a str)>,
}

fn not_found(id: &str) -> Error {
    Error::NotFound(format!("session_id: no session {id}; start one with StartSession"))
}

/// The lock of a write to a session of `project`, which reads the session first.
fn lock(project: &str, ctx: &WriteCtx, id: &str) -> Lock {
    Lock {
        project: project.to_owned(),
        request_id: ctx.request_id.clone(),
        memory: false,
        first_read: Some(FirstRead::Session(id.to_owned())),
        rewrites_log: false,
    }
}

/// The project of a session (read before its write, to know which row to lock: a
/// session's project never changes); a session outside `within` is not found.
pub(crate) async fn project_of<S: Store>(store: &S, id: &str, within: &Within) -> Result<String> {
    store
        .project_of(Entity::Session, id.to_owned())
        .await?
        .filter(|p| is_within(p, within))
        .ok_or_else(|| not_found(id))
}

/// A session the write reads under its lock.
pub(crate) async fn read<T: WriteTx>(w: &mut Write<T>, id: &str) -> Result<Session> {
    w.session(id).await?.ok_or_else(|| not_found(id))
}

/// StartSession.
#[tracing::instrument(level = "debug", skip_all, fields(project = %req.project))]
pub async fn start<S: Store>(
    store: &S,
    ctx: WriteCtx,
    req: StartSessionRequest,
    id: uuid::Uuid,
) -> Result<StartSessionResponse> {
    let id = id.to_string();
    let lock = lock(&req.project, &ctx, &id);
    let ran = write::run(store, lock, ctx, move |w, ctx| {
        Box::pin(async move {
            let status = if req.status == SessionStatus::Initializing as i32 {
                SessionStatus::Initializing
            } else {
                SessionStatus::Active
            };
            let new = NewSession {
                id: &id,
                project: &req.project,
                agent: req.agent,
                agent_session_id: &req.agent_session_id,
                host: &req.host,
                user: &req.user,
                cwd: &req.cwd,
                branch: &req.branch,
                goal: &req.goal,
                status,
                lease_ttl_ms: req.lease_ttl_ms,
                git_base: &req.git_base,
                resumed_from: None,
                metadata: &req.metadata,
                // Read with the lock either way (`lock`): checking costs nothing.
                generated: false,
                thread: None,
            };
            let session = insert(w, &new, ctx)
                .await?
                .ok_or_else(|| {
                    Error::AlreadyExists(format!(
                        "session_id: session {id} already exists; use a new id (or none) to start a session"
                    ))
                })?
                .to_proto();
            let mut ev = event(EventKind::SessionStarted, "session", &id, &ctx.actor);
            ev.value = Some(baton_proto::v1::event::Value::Session(session.clone()));
            let revision = w.emit(ev)?.revision;
            let result = conflict::result(revision, Decision::Applied, None, ctx.writer());
            let reply = StartSessionResponse { session: Some(session), result: Some(result) };
            w.finish(ctx, &reply)?;
            Ok(reply)
        })
    });
    ran.await?.or_replayed(|r| r.result.as_mut())
}

/// A new session at the write's revision; `None` if a session with that id exists.
pub(crate) async fn insert<T: WriteTx>(
    w: &mut Write<T>,
    s: &NewSession<'_>,
    ctx: &WriteCtx,
) -> Result<Option<Session>> {
    // Taken in this project or another: the same answer either way (never the database's
    // unique-key error, which told the two apart).
    if !s.generated && (w.tx().session(s.id).await?.is_some() || w.tx().session_taken(s.id).await?) {
        return Ok(None);
    }
    let revision = w.revision();
    let metadata = serde_json::to_string(s.metadata).map_err(Error::internal)?;
    let author = encode_actor(&ctx.actor);
    let row = Session {
        id: s.id.to_owned(),
        project: s.project.to_owned(),
        agent: s.agent,
        agent_session_id: s.agent_session_id.to_owned(),
        host: s.host.to_owned(),
        user_name: s.user.to_owned(),
        cwd: s.cwd.to_owned(),
        branch: s.branch.to_owned(),
        goal: s.goal.to_owned(),
        status: s.status as i32,
        lease_ttl_ms: s.lease_ttl_ms,
        last_seen_us: w.now_us,
        head_checkpoint_id: None,
        git_base: s.git_base.to_owned(),
        git_head: String::new(),
        summary: String::new(),
        tool_count: 0,
        resumed_from: s.resumed_from.map(str::to_owned),
        resumed_by: None,
        metadata,
        created_us: w.now_us,
        updated_us: w.now_us,
        revision,
        written_us: ctx.written_us(w.now_us),
        author: author.clone(),
        head_revision: 0,
        head_written_us: 0,
        head_author: author,
        thread_key: s.thread.map(|(key, _)| key.to_owned()),
        thread_ns: s.thread.map(|(_, ns)| ns.to_owned()),
        start_revision: revision,
    };
    fail::fail_point!("session.insert", |_| Err(write::injected("session.insert")));
    w.apply(Change::InsertSession(Box::new(row.clone())));
    Ok(Some(row))
}

/// UpdateSession: the editable fields, last-write-wins.
#[tracing::instrument(level = "debug", skip_all)]
pub async fn update<S: Store>(
    store: &S,
    ctx: WriteCtx,
    req: UpdateSessionRequest,
    id: uuid::Uuid,
    within: Within,
) -> Result<UpdateSessionResponse> {
    let id = id.to_string();
    let project = project_of(store, &id, &within).await?;
    let lock = lock(&project, &ctx, &id);
    let ran = write::run(store, lock, ctx, move |w, ctx| {
        Box::pin(async move {
            let mut row = read(w, &id).await?;
            status::check_open(&row.id, row.status(), row.resumed_by.as_deref())?;
            touch(w, &mut row, &ctx.actor)?;
            let current = RecordVersion { revision: row.revision, written_us: row.written_us };
            let decision = lww::decide(Some(current), ctx.intent(w.now_us));
            let before = row.to_proto();
            let mut after = before.clone();
            if let Some(goal) = &req.goal {
                after.goal.clone_from(goal);
            }
            if let Some(branch) = &req.branch {
                after.branch.clone_from(branch);
            }
            if let Some(summary) = &req.summary {
                after.summary.clone_from(summary);
            }
            if let Some(agent_session_id) = &req.agent_session_id {
                after.agent_session_id.clone_from(agent_session_id);
            }
            if req.replace_metadata {
                after.metadata.clone_from(&req.metadata);
            } else {
                after.metadata.extend(req.metadata.clone());
            }
            let as_value = |s: &baton_proto::v1::Session| RecordValue {
                value: Some(record_value::Value::Session(s.clone())),
            };
            let conflict = decision.is_conflict().then(|| {
                let contested = Contested {
                    record: format!("session/{id}"),
                    current: Some((current, crate::store::rows::decode_actor(&row.author))),
                    current_value: Some(as_value(&before)),
                    written_value: Some(as_value(&after)),
                    detail: String::new(),
                };
                conflict::conflict(decision, ctx.writer(), contested)
            });
            if let (Decision::Rejected, Some(conflict)) = (decision, &conflict) {
                return Err(w.rejected(conflict.clone()));
            }
            let revision = w.revision();
            if decision.applies() {
                row.goal.clone_from(&after.goal);
                row.branch.clone_from(&after.branch);
                row.summary.clone_from(&after.summary);
                row.agent_session_id.clone_from(&after.agent_session_id);
                row.metadata = serde_json::to_string(&after.metadata).map_err(Error::internal)?;
                row.revision = revision;
                row.written_us = ctx.written_us(w.now_us);
                row.author = encode_actor(&ctx.actor);
                row.updated_us = w.now_us;
            }
            w.apply(Change::PutSession(Box::new(row.clone())));
            let session = row.to_proto();
            let mut ev = event(EventKind::SessionUpdated, "session", &id, &ctx.actor);
            ev.value = Some(baton_proto::v1::event::Value::Session(session.clone()));
            ev.conflict = conflict;
            let conflict = w.emit(ev)?.conflict;
            let result = conflict::result(revision, decision, conflict, ctx.writer());
            let reply = UpdateSessionResponse { session: Some(session), result: Some(result) };
            w.finish(ctx, &reply)?;
            Ok(reply)
        })
    });
    ran.await?.or_replayed(|r| r.result.as_mut())
}

/// Heartbeat: liveness, and a status change when one is asked for (active ↔ idle).
#[tracing::instrument(level = "debug", skip_all)]
pub async fn heartbeat<S: Store>(
    store: &S,
    id: uuid::Uuid,
    to: SessionStatus,
    tool_count: Option<i64>,
    within: Within,
) -> Result<HeartbeatResponse> {
    let id = id.to_string();
    let tool_count = tool_count.unwrap_or(0);
    if to == SessionStatus::Active {
        // The common case needs no lock and no revision: liveness is not a write.
        if let Some(model::Liveness { last_seen_us: seen, .. }) =
            store.touch_session(id.clone(), tool_count, Some(to), within.clone()).await?
        {
            return Ok(HeartbeatResponse { status: to as i32, last_seen_at: Some(ts(seen)), revision: 0 });
        }
    }
    let project = project_of(store, &id, &within).await?;
    let ctx = WriteCtx::default();
    let lock = lock(&project, &ctx, &id);
    let body_id = id.clone();
    let ran = write::run(store, lock, ctx, move |w, ctx| {
        Box::pin(async move {
            let id = body_id;
            let mut row = read(w, &id).await?;
            status::check_open(&row.id, row.status(), row.resumed_by.as_deref())?;
            if row.status() == to {
                // Nothing to change but liveness: the revision is given back.
                return Ok(None);
            }
            row.tool_count = row.tool_count.max(tool_count);
            let actor = Actor { session_id: id.clone(), ..Default::default() };
            set_status(w, &mut row, to, &actor, true)?;
            w.apply(Change::PutSession(Box::new(row.clone())));
            let revision = w.revision_taken();
            w.finish(ctx, &HeartbeatResponse::default())?;
            Ok(Some(HeartbeatResponse {
                status: row.status,
                last_seen_at: Some(ts(row.last_seen_us)),
                revision,
            }))
        })
    });
    if let Some(reply) = ran.await?.done()? {
        return Ok(reply);
    }
    let model::Liveness { status, last_seen_us: seen } =
        store.touch_session(id.clone(), tool_count, None, within).await?.ok_or_else(|| not_found(&id))?;
    Ok(HeartbeatResponse { status, last_seen_at: Some(ts(seen)), revision: 0 })
}

/// EndSession: completed (or crashed, for an orchestrator's worker), with a last summary.
#[tracing::instrument(level = "debug", skip_all)]
pub async fn end<S: Store>(
    store: &S,
    ctx: WriteCtx,
    req: EndSessionRequest,
    id: uuid::Uuid,
    to: SessionStatus,
    within: Within,
) -> Result<EndSessionResponse> {
    let id = id.to_string();
    let project = project_of(store, &id, &within).await?;
    let lock = lock(&project, &ctx, &id);
    let ran = write::run(store, lock, ctx, move |w, ctx| {
        Box::pin(async move {
            let mut row = read(w, &id).await?;
            status::check_open(&row.id, row.status(), row.resumed_by.as_deref())?;
            status::check_transition(&row.id, row.status(), to)?;
            let revision = w.revision();
            if !req.summary.is_empty() {
                // The summary is an editable field: the record's revision moves with it.
                row.summary.clone_from(&req.summary);
                row.revision = revision;
                row.written_us = ctx.written_us(w.now_us);
                row.author = encode_actor(&ctx.actor);
            }
            if !req.git_head.is_empty() {
                row.git_head.clone_from(&req.git_head);
            }
            set_status(w, &mut row, to, &ctx.actor, true)?;
            w.apply(Change::PutSession(Box::new(row.clone())));
            // Its reservations end with it (their own event, after the status's).
            super::reservation::end_with_session(w, ctx, &row.id).await?;
            let result = conflict::result(revision, Decision::Applied, None, ctx.writer());
            let reply = EndSessionResponse { session: Some(row.to_proto()), result: Some(result) };
            w.finish(ctx, &reply)?;
            Ok(reply)
        })
    });
    ran.await?.or_replayed(|r| r.result.as_mut())
}

/// The reaper: sessions whose liveness ran out go crashed (with a lease) or idle; returns
/// how many changed.
#[tracing::instrument(level = "debug", skip_all)]
pub async fn expire<S: Store>(store: &S, expiry: Expiry) -> Result<usize> {
    let mut changed = 0;
    for model::ExpiredSession { id, project, status: old_status, last_seen_us: seen } in
        store.expired_sessions(expiry).await?
    {
        let ctx = WriteCtx::default();
        let lock = lock(&project, &ctx, &id);
        let ran = write::run(store, lock, ctx, move |w, ctx| {
            Box::pin(async move {
                let Some(mut row) = w.tx().session(&id).await? else { return Ok(false) };
                // Re-checked under the project lock: any activity since the scan wins, and of
                // several instances racing here exactly one makes the change.
                if row.status != old_status || row.last_seen_us != seen {
                    return Ok(false);
                }
                let to = if row.lease_ttl_ms > 0 { SessionStatus::Crashed } else { SessionStatus::Idle };
                let actor = Actor { session_id: id.clone(), ..Default::default() };
                set_status(w, &mut row, to, &actor, false)?;
                w.apply(Change::PutSession(Box::new(row)));
                if to == SessionStatus::Crashed {
                    super::reservation::end_with_session(w, ctx, &id).await?;
                }
                w.finish(ctx, &HeartbeatResponse::default())?;
                Ok(true)
            })
        });
        if ran.await?.done()? {
            changed += 1;
        }
    }
    Ok(changed)
}

/// Activity on a session: idle or initializing sessions become active again; otherwise
/// only its liveness moves. The caller applies the row.
pub(crate) fn touch<T: WriteTx>(w: &mut Write<T>, row: &mut Session, actor: &Actor) -> Result<()> {
    if matches!(row.status(), SessionStatus::Idle | SessionStatus::Initializing) {
        return set_status(w, row, SessionStatus::Active, actor, true);
    }
    row.last_seen_us = w.now_us;
    Ok(())
}

/// A status change: its own revision and event. `activity` says whether the change is the
/// session's own doing (which also counts as liveness) or the reaper's (which must not move
/// `last_seen_at`). The caller applies the row.
pub(crate) fn set_status<T: WriteTx>(
    w: &mut Write<T>,
    row: &mut Session,
    to: SessionStatus,
    actor: &Actor,
    activity: bool,
) -> Result<()> {
    status::check_transition(&row.id, row.status(), to)?;
    w.revision();
    row.status = to as i32;
    row.updated_us = w.now_us;
    if activity {
        row.last_seen_us = w.now_us;
    }
    emit_status(w, row, actor)
}

/// The event of a status change (the pending revision's).
pub(crate) fn emit_status<T: WriteTx>(w: &mut Write<T>, row: &Session, actor: &Actor) -> Result<()> {
    let mut ev = event(EventKind::SessionStatusChanged, "session", &row.id, actor);
    ev.value = Some(baton_proto::v1::event::Value::Session(row.to_proto()));
    w.emit(ev).map(drop)
}

/// GetSession: the session, and the project's revision it is at least as new as.
#[tracing::instrument(level = "debug", skip_all)]
pub async fn get<S: Store>(store: &S, id: uuid::Uuid, within: Within) -> Result<GetSessionResponse> {
    let id = id.to_string();
    let missing = || Error::NotFound(format!("session_id: no session {id}"));
    let project = store.project_of(Entity::Session, id.clone()).await?.filter(|p| is_within(p, &within));
    let project = project.ok_or_else(missing)?;
    // The head first: what is read after it is at least that new.
    let as_of_revision = crate::store::head_revision(store, project).await?;
    let row = store.session(id.clone()).await?.ok_or_else(missing)?;
    Ok(GetSessionResponse { session: Some(row.to_proto()), as_of_revision })
}

/// ListSessions: a page of a project's sessions, newest first, within the reply's budget.
#[tracing::instrument(level = "debug", skip_all, fields(project = %query.project))]
pub async fn list<S: Store>(store: &S, query: SessionQuery) -> Result<ListSessionsResponse> {
    let as_of_revision = crate::store::head_revision(store, query.project.clone()).await?;
    let mut page = crate::core::page::Budget::new(query.limit);
    let mut sessions = Vec::new();
    let mut more = false;
    for row in store.sessions(query).await? {
        let session = row.to_proto();
        if !page.take(prost::Message::encoded_len(&session)) {
            more = true;
            break;
        }
        sessions.push(session);
    }
    let next_page_token = match sessions.last() {
        Some(last) if more => last.id.clone(),
        _ => String::new(),
    };
    Ok(ListSessionsResponse { sessions, next_page_token, as_of_revision })
}
