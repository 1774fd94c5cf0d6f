//! CopyThread: every namespace of a thread, each checkpoint with its key, metadata, content
//! and pending writes, under a new thread key, in one write. The copies are new records
//! (new ids, their digests over their new session), each with its own revision and event,
//! as if they had been written there: a watcher replays them like any others.

use std::collections::HashMap;

use baton_proto::v1::{CheckpointRef, CopyThreadResponse, EventKind, ThreadWrites};

use super::{Labels, ThreadName, create, lock, write_ref};
use crate::core::checkpoint::{self, Header, ThreadPart};
use crate::core::conflict;
use crate::core::lww::Decision;
use crate::core::thread::MAX_COPY;
use crate::error::{Error, Result};
use crate::service::write::Write;
use crate::service::write::{self, event};
use crate::store::model::{Change, Checkpoint, PendingWrite, Session};
use crate::store::threads::ThreadTx;
use crate::store::{Store, WriteCtx, WriteTx};

/// The stored bytes (compressed) one copy may read, at most.
const MAX_COPY_BYTES: i64 = 256 * 1024 * 1024;

/// CopyThread.
#[tracing::instrument(level = "debug", skip_all)]
pub async fn copy<S: Store>(
    store: &S,
    ctx: WriteCtx,
    project: String,
    source: String,
    target: String,
) -> Result<CopyThreadResponse> {
    let lock = lock(&project, &ctx);
    let ran = write::run(store, lock, ctx, move |w, ctx| {
        Box::pin(async move {
            let sessions = w.tx().thread_sessions(&source).await?;
            if sessions.is_empty() {
                return Err(Error::NotFound(format!(
                    "source_thread: nothing is stored under thread {source:?} in project {project:?}"
                )));
            }
            if !w.tx().thread_sessions(&target).await?.is_empty() {
                return Err(Error::AlreadyExists(format!(
                    "target_thread: thread {target:?} already has checkpoints in project {project:?}; delete it \
                     first (DeleteThreads) or copy to a new key"
                )));
            }
            let (mut copied, mut copied_writes, mut read_bytes) = (0i64, 0i64, 0i64);
            for source_session in sessions {
                let namespace = source_session.thread_ns.clone().unwrap_or_default();
                let name = ThreadName { project: project.clone(), thread: target.clone(), namespace };
                let labels = Labels {
                    agent: source_session.agent,
                    host: source_session.host.clone(),
                    user: source_session.user_name.clone(),
                    metadata: serde_json::from_str(&source_session.metadata).unwrap_or_default(),
                };
                let rows = w.tx().session_checkpoints(&source_session.id, true).await?;
                copied += i64::try_from(rows.len()).unwrap_or(i64::MAX);
                read_bytes += rows
                    .iter()
                    .map(|c| i64::try_from(c.state.len() + c.payload.len()).unwrap_or(0))
                    .sum::<i64>();
                if copied > i64::try_from(MAX_COPY).unwrap_or(i64::MAX) || read_bytes > MAX_COPY_BYTES {
                    return Err(Error::ResourceExhausted(format!(
                        "source_thread: thread {source:?} is over what one copy takes ({MAX_COPY} checkpoints, \
                         {MAX_COPY_BYTES} stored bytes); prune it first (PruneThreads)"
                    )));
                }
                copied_writes += copy_session(w, ctx, &source_session, &name, &labels, rows).await?;
            }
            let result = conflict::result(w.revision_taken(), Decision::Applied, None, ctx.writer());
            let reply =
                CopyThreadResponse { copied_checkpoints: copied, copied_writes, result: Some(result) };
            w.finish(ctx, &reply)?;
            Ok(reply)
        })
    });
    ran.await?.or_replayed(|r| r.result.as_mut())
}

/// Copies one namespace's checkpoints (ordered by key) into a new session of the target
/// thread; returns how many pending writes it copied.
async fn copy_session<T: WriteTx + ThreadTx>(
    w: &mut Write<T>,
    ctx: &WriteCtx,
    source_session: &Session,
    name: &ThreadName,
    labels: &Labels,
    mut rows: Vec<Checkpoint>,
) -> Result<i64> {
    let mut copied_writes = 0i64;
    // Parents before their children: a parent is always older.
    rows.sort_by_key(|c| c.revision);
    let mut session = create(w, ctx, name, labels).await?;
    let mut ids: HashMap<String, String> = HashMap::new();
    let mut keys: HashMap<String, String> = HashMap::new();
    for row in rows {
        let writes = w.tx().checkpoint_writes(&row.id).await?;
        copied_writes += i64::try_from(writes.len()).unwrap_or(i64::MAX);
        let new = copied_row(row, &session.id, &ids)?;
        ids.insert(new.0.clone(), new.1.id.clone());
        let (old_id, mut cp) = new;
        let revision = w.revision();
        cp.revision = revision;
        cp.created_us = w.now_us;
        let is_head = source_session.head_checkpoint_id.as_deref() == Some(old_id.as_str());
        if is_head {
            crate::service::checkpoint::set_head(&mut session, Some(cp.id.clone()), revision, ctx, w.now_us);
        }
        let mut ev = event(EventKind::CheckpointCreated, "checkpoint", &cp.id, &ctx.actor);
        ev.value = Some(baton_proto::v1::event::Value::Checkpoint(CheckpointRef {
            id: cp.id.clone(),
            session_id: session.id.clone(),
            parent_id: cp.parent_id.clone().unwrap_or_default(),
            digest: cp.digest.clone(),
            kind: cp.kind,
            is_head,
            key: cp.ordered_key.clone().unwrap_or_default(),
            parent_key: cp.parent_id.as_ref().and_then(|p| keys.get(p)).cloned().unwrap_or_default(),
            metadata_json: cp.metadata.clone().unwrap_or_default(),
        }));
        let (new_id, key) = (cp.id.clone(), cp.ordered_key.clone().unwrap_or_default());
        keys.insert(new_id.clone(), key.clone());
        w.apply(Change::InsertCheckpoint(Box::new(cp)));
        w.emit(ev)?;
        if !writes.is_empty() {
            let revision = w.revision();
            let rows: Vec<PendingWrite> = writes
                .into_iter()
                .map(|p| PendingWrite { checkpoint_id: new_id.clone(), revision, ..p })
                .collect();
            let mut ev = event(EventKind::ThreadWrites, "checkpoint", &new_id, &ctx.actor);
            ev.value = Some(baton_proto::v1::event::Value::ThreadWrites(ThreadWrites {
                session_id: session.id.clone(),
                checkpoint_id: new_id.clone(),
                key,
                writes: rows.iter().map(write_ref).collect(),
            }));
            w.apply(Change::PutWrites(rows));
            w.emit(ev)?;
        }
    }
    session.updated_us = w.now_us;
    w.apply(Change::PutSession(Box::new(session)));
    Ok(copied_writes)
}

/// A checkpoint's copy into another session (a new id, its parent's copy, digests over the
/// new session), verified first; with the source's id.
fn copied_row(
    row: Checkpoint,
    session_id: &str,
    ids: &HashMap<String, String>,
) -> Result<(String, Checkpoint)> {
    let (state, payload) = checkpoint::decode(&row.header(), &row.stored(), &row.digest)
        .map_err(|source| Error::DataLoss { id: row.id.clone(), source })?;
    let header = Header {
        session_id,
        kind: row.kind,
        reason: &row.reason,
        payload_content_type: &row.payload_content_type,
        blobs: crate::core::blobs::unpack(&row.blobs)
            .map_err(|source| Error::DataLoss { id: row.id.clone(), source })?,
        thread: ThreadPart::of(row.ordered_key.as_deref(), row.metadata.as_deref()),
    };
    let content = checkpoint::encode(&header, &state, &payload)
        .map_err(|e| Error::internal(format!("compressing a checkpoint: {e}")))?;
    let old = row.id.clone();
    let copy = Checkpoint {
        id: uuid::Uuid::now_v7().to_string(),
        session_id: session_id.to_owned(),
        parent_id: row.parent_id.as_ref().and_then(|p| ids.get(p).cloned()),
        state: content.state,
        payload: content.payload,
        compression: content.compression.as_str().to_owned(),
        size_bytes: content.size_bytes,
        digest: content.digest,
        state_digest: Some(content.state_digest),
        ..row
    };
    Ok((old, copy))
}
