//! ThreadService: orchestrators' threads over sessions and checkpoints. A thread's
//! namespace is a session found by (project, thread, namespace); its checkpoints carry the
//! orchestrator's key and metadata beside Baton's id, and pending writes. Every change is a
//! write of the project like any other (`write::run`): revisions, events, idempotency.

mod copy;
mod put;
mod read;
mod remove;
mod writes;

pub use copy::copy;
pub use put::{NewThreadCheckpoint, put};
pub use read::{ListQuery, Position, get, list};
pub use remove::{delete_runs, delete_threads, prune};
pub use writes::put_writes;

use baton_proto::v1::{
    AgentKind, EventKind, OpenThreadResponse, PendingWrite as WriteMessage, SessionStatus, ThreadCheckpoint,
};

use super::session::{self, NewSession};
use super::write::{self, Write, event};
use crate::core::conflict;
use crate::core::lww::Decision;
use crate::error::{Error, Result};
use crate::store::model::{Lock, PendingWrite, Session};
use crate::store::threads::ThreadTx;
use crate::store::{Store, WriteCtx, WriteTx};

/// A thread's namespace, as a request names it.
#[derive(Debug, Clone)]
pub struct ThreadName {
    pub project: String,
    pub thread: String,
    pub namespace: String,
}

impl ThreadName {
    fn describe(&self) -> String {
        format!("thread {:?} namespace {:?} of project {:?}", self.thread, self.namespace, self.project)
    }
}

/// The labels of a session a thread write creates.
#[derive(Debug, Clone, Default)]
pub struct Labels {
    pub agent: i32,
    pub host: String,
    pub user: String,
    pub metadata: std::collections::HashMap<String, String>,
}

/// The lock of a thread write: the project's, nothing read first.
fn lock(project: &str, ctx: &WriteCtx) -> Lock {
    Lock {
        project: project.to_owned(),
        request_id: ctx.request_id.clone(),
        memory: false,
        first_read: None,
        rewrites_log: false,
    }
}

/// The session of a thread's namespace, read under the write's lock.
async fn find<T: WriteTx + ThreadTx>(w: &mut Write<T>, name: &ThreadName) -> Result<Option<Session>> {
    let sessions = w.tx().thread_sessions(&name.thread).await?;
    Ok(sessions.into_iter().find(|s| s.thread_ns.as_deref() == Some(name.namespace.as_str())))
}

/// Starts the session of a thread's namespace in this write (its own revision and
/// SESSION_STARTED event).
async fn create<T: WriteTx + ThreadTx>(
    w: &mut Write<T>,
    ctx: &WriteCtx,
    name: &ThreadName,
    labels: &Labels,
) -> Result<Session> {
    let id = uuid::Uuid::now_v7().to_string();
    let agent = if labels.agent == 0 { AgentKind::Custom as i32 } else { labels.agent };
    let new = NewSession {
        id: &id,
        project: &name.project,
        agent,
        agent_session_id: "",
        host: &labels.host,
        user: &labels.user,
        cwd: "",
        branch: "",
        goal: "",
        status: SessionStatus::Active,
        lease_ttl_ms: 0,
        git_base: "",
        resumed_from: None,
        metadata: &labels.metadata,
        generated: true,
        thread: Some((&name.thread, &name.namespace)),
    };
    let row =
        session::insert(w, &new, ctx).await?.ok_or_else(|| Error::internal("a new session id was taken"))?;
    let mut ev = event(EventKind::SessionStarted, "session", &id, &ctx.actor);
    ev.value = Some(baton_proto::v1::event::Value::Session(row.to_proto()));
    w.emit(ev)?;
    Ok(row)
}

/// OpenThread: the namespace's session, created when there is none (read first without the
/// lock: an existing session costs no write).
#[tracing::instrument(level = "debug", skip_all)]
pub async fn open<S: Store>(
    store: &S,
    ctx: WriteCtx,
    name: ThreadName,
    labels: Labels,
) -> Result<OpenThreadResponse> {
    let existing = store.thread_sessions(name.project.clone(), name.thread.clone()).await?;
    if let Some(s) = existing.into_iter().find(|s| s.thread_ns.as_deref() == Some(name.namespace.as_str())) {
        return Ok(OpenThreadResponse { session: Some(s.to_proto()), created: false, result: None });
    }
    let lock = lock(&name.project, &ctx);
    let ran = write::run(store, lock, ctx, move |w, ctx| {
        Box::pin(async move {
            if let Some(s) = find(w, &name).await? {
                return Ok(OpenThreadResponse { session: Some(s.to_proto()), created: false, result: None });
            }
            let row = create(w, ctx, &name, &labels).await?;
            let revision = w.revision_taken();
            let result = conflict::result(revision, Decision::Applied, None, ctx.writer());
            let reply =
                OpenThreadResponse { session: Some(row.to_proto()), created: true, result: Some(result) };
            w.finish(ctx, &reply)?;
            Ok(reply)
        })
    });
    ran.await?.or_replayed(|r| r.result.as_mut())
}

/// A pending write as the API shows it.
pub(crate) fn write_message(w: PendingWrite) -> WriteMessage {
    let named = write_ref(&w);
    WriteMessage { value: w.value, ..named }
}

/// A pending write as its event names it: everything but the value, which readers get
/// with the checkpoint (GetThreadCheckpoint); a change stream need not carry it twice.
pub(crate) fn write_ref(w: &PendingWrite) -> WriteMessage {
    WriteMessage {
        task_id: w.task_id.clone(),
        index: w.idx,
        channel: w.channel.clone(),
        task_path: w.task_path.clone(),
        value_type: w.value_type.clone(),
        value: Vec::new(),
    }
}

/// A stored checkpoint of a thread as the API shows it (without payload and writes).
fn shown(
    name: &ThreadName,
    row: &crate::store::model::Checkpoint,
    parent_key: Option<String>,
) -> ThreadCheckpoint {
    ThreadCheckpoint {
        thread: name.thread.clone(),
        namespace: name.namespace.clone(),
        key: row.ordered_key.clone().unwrap_or_default(),
        parent_key: parent_key.unwrap_or_default(),
        metadata_json: row.metadata.clone().unwrap_or_default(),
        checkpoint: Some(row.to_meta()),
        writes: Vec::new(),
    }
}
