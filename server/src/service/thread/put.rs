//! PutThreadCheckpoint: a checkpoint under the orchestrator's key, in one write with the
//! thread's session when that is new; the head moves as CreateCheckpoint's does (a parent
//! that is not the head forks the thread, reported as a conflict on the head).

use std::collections::HashSet;

use baton_proto::v1::{
    CheckpointKind, CheckpointRef, CheckpointState, EventKind, PutThreadCheckpointResponse, WriteOutcome,
    WriteResult,
};

use super::{Labels, ThreadName, create, find, lock, shown};
use crate::core::checkpoint::{self, Header, ThreadPart};
use crate::core::conflict;
use crate::core::lww::Decision;
use crate::core::status;
use crate::core::thread::Metadata;
use crate::error::{Error, Result};
use crate::service::checkpoint::{head_move, set_head};
use crate::service::session;
use crate::service::write::{self, event};
use crate::store::model::{Change, Checkpoint};
use crate::store::rows::encode_actor;
use crate::store::threads::ThreadTx;
use crate::store::{Store, WriteCtx, WriteTx};

/// A validated PutThreadCheckpoint.
pub struct NewThreadCheckpoint {
    pub name: ThreadName,
    pub key: String,
    pub parent_key: String,
    pub metadata: Metadata,
    pub state: CheckpointState,
    pub payload: Vec<u8>,
    pub payload_content_type: String,
    pub blobs: Vec<baton_proto::v1::BlobRef>,
    pub chunk_digests: Vec<String>,
    /// Chunks of `blobs` the request carried (compressed as stored): stored by the write
    /// when the project lacks them.
    pub carried: Vec<crate::store::model::Chunk>,
    /// Baton's id for it: the client's, or a new uuid v7.
    pub id: uuid::Uuid,
    /// Whether the client made the id (a new one made here needs no check that it is free).
    pub id_given: bool,
    pub labels: Labels,
}

/// PutThreadCheckpoint.
#[tracing::instrument(level = "debug", skip_all)]
pub async fn put<S: Store>(
    store: &S,
    ctx: WriteCtx,
    new: NewThreadCheckpoint,
) -> Result<PutThreadCheckpointResponse> {
    let lock = lock(&new.name.project, &ctx);
    let ran = write::run(store, lock, ctx, move |w, ctx| {
        Box::pin(async move {
            let name = new.name.clone();
            let (mut row, created) = match find(w, &name).await? {
                Some(row) => (row, false),
                None => (create(w, ctx, &name, &new.labels).await?, true),
            };
            status::check_open(&row.id, row.status(), row.resumed_by.as_deref())?;
            let (content, blobs) = encode(&row.id, &new)?;
            if !created && let Some(stored) = w.tx().keyed_checkpoint(&row.id, &new.key).await? {
                return same_again(&name, &stored, &content.digest, &new.parent_key, w).await;
            }
            let (parent, lacking) = check(w, &name, &row.id, &new).await?;
            store_carried(w, &new, &lacking);
            let id = new.id.to_string();
            if status::is_activity(&row.id, &ctx.actor.session_id) {
                session::touch(w, &mut row, &ctx.actor)?;
            }
            let (decided, conflict) = head_move(&row, parent.as_deref(), &id, ctx, w.now_us);
            if let (Decision::Rejected, Some(conflict)) = (decided.decision, &conflict) {
                return Err(w.rejected(conflict.clone()));
            }
            let revision = w.revision();
            let stored = stored_row(
                &name,
                &row.id,
                &id,
                parent.clone(),
                revision,
                w.now_us,
                ctx,
                content,
                blobs,
                &new,
            );
            let shown = shown(&name, &stored, (!new.parent_key.is_empty()).then(|| new.parent_key.clone()));
            w.apply(Change::InsertCheckpoint(Box::new(stored)));
            let is_head = decided.decision.applies();
            if is_head {
                set_head(&mut row, Some(id.clone()), revision, ctx, w.now_us);
            }
            w.apply(Change::PutSession(Box::new(row.clone())));
            let mut ev = event(EventKind::CheckpointCreated, "checkpoint", &id, &ctx.actor);
            ev.value = Some(baton_proto::v1::event::Value::Checkpoint(CheckpointRef {
                id: id.clone(),
                session_id: row.id.clone(),
                parent_id: parent.unwrap_or_default(),
                digest: shown.checkpoint.as_ref().map(|c| c.digest.clone()).unwrap_or_default(),
                kind: CheckpointKind::Auto as i32,
                is_head,
                key: new.key,
                parent_key: new.parent_key,
                metadata_json: new.metadata.json,
            }));
            ev.conflict = conflict;
            let conflict = w.emit(ev)?.conflict;
            let result = conflict::result(revision, decided.decision, conflict, ctx.writer());
            let reply = PutThreadCheckpointResponse {
                checkpoint: Some(shown),
                result: Some(result),
                created_session: created,
            };
            w.finish(ctx, &reply)?;
            Ok(reply)
        })
    });
    ran.await?.or_replayed(|r| r.result.as_mut())
}

/// The checkpoint's content as stored (digests over its session, key and metadata), and its
/// blob references as stored.
fn encode(session_id: &str, new: &NewThreadCheckpoint) -> Result<(checkpoint::StoredContent, Vec<u8>)> {
    let blobs = crate::core::blobs::encode(&new.blobs);
    let header = Header {
        session_id,
        kind: CheckpointKind::Auto as i32,
        reason: "",
        payload_content_type: &new.payload_content_type,
        blobs: std::borrow::Cow::Borrowed(&blobs),
        thread: Some(ThreadPart { key: &new.key, metadata: &new.metadata.json }),
    };
    let content = checkpoint::encode(&header, &new.state, &new.payload)
        .map_err(|e| Error::internal(format!("compressing a checkpoint: {e}")))?;
    Ok((content, crate::core::blobs::pack(blobs)))
}

/// The checkpoint as stored.
#[allow(clippy::too_many_arguments, reason = "the parts of one row, each from where the write found it")]
fn stored_row(
    name: &ThreadName,
    session_id: &str,
    id: &str,
    parent: Option<String>,
    revision: i64,
    now_us: i64,
    ctx: &WriteCtx,
    content: checkpoint::StoredContent,
    blobs: Vec<u8>,
    new: &NewThreadCheckpoint,
) -> Checkpoint {
    Checkpoint {
        id: id.to_owned(),
        session_id: session_id.to_owned(),
        project: name.project.clone(),
        parent_id: parent,
        kind: CheckpointKind::Auto as i32,
        reason: String::new(),
        state: content.state,
        payload: content.payload,
        payload_content_type: new.payload_content_type.clone(),
        compression: content.compression.as_str().to_owned(),
        size_bytes: content.size_bytes,
        digest: content.digest,
        state_digest: Some(content.state_digest),
        created_us: now_us,
        revision,
        author: encode_actor(&ctx.actor),
        blobs,
        ordered_key: Some(new.key.clone()),
        metadata: Some(new.metadata.json.clone()),
        run_id: new.metadata.run_id.clone(),
    }
}

/// Refuses a checkpoint whose parent, id or chunks are not there (chunks it carries count);
/// returns its parent's id and the chunks the project lacks.
async fn check<T: WriteTx + ThreadTx>(
    w: &mut write::Write<T>,
    name: &ThreadName,
    session_id: &str,
    new: &NewThreadCheckpoint,
) -> Result<(Option<String>, HashSet<String>)> {
    let parent = match new.parent_key.as_str() {
        "" => None,
        key => match w.tx().keyed_checkpoint(session_id, key).await? {
            Some(p) => Some(p.id),
            None => {
                return Err(Error::NotFound(format!(
                    "parent_key: no checkpoint {key:?} in {}",
                    name.describe()
                )));
            }
        },
    };
    let id = new.id.to_string();
    if new.id_given && w.tx().checkpoint_owner(&id).await?.is_some() {
        return Err(Error::AlreadyExists(format!(
            "checkpoint_id: checkpoint {id} already exists; use a new id (or none)"
        )));
    }
    let lacking: HashSet<String> = w.tx().missing_chunks(&new.chunk_digests).await?.into_iter().collect();
    let carried: HashSet<&str> = new.carried.iter().map(|c| c.digest.as_str()).collect();
    let missing: Vec<&String> = lacking.iter().filter(|d| !carried.contains(d.as_str())).collect();
    if let Some(first) = missing.first() {
        return Err(Error::FailedPrecondition(format!(
            "blobs: {} chunk(s) are not uploaded (first: {first}); upload them with PutChunks, then put the checkpoint",
            missing.len()
        )));
    }
    Ok((parent, lacking))
}

/// Stores the carried chunks the project lacks, in the write (as PutChunks would have).
fn store_carried<T: WriteTx>(w: &mut write::Write<T>, new: &NewThreadCheckpoint, lacking: &HashSet<String>) {
    for c in new.carried.iter().filter(|c| lacking.contains(&c.digest)) {
        w.apply(Change::Maintenance(crate::store::model::Maintenance::PutChunk {
            digest: c.digest.clone(),
            data: c.data.clone(),
            size_bytes: c.size_bytes,
            created_us: w.now_us,
        }));
    }
}

/// The same key again: the stored checkpoint when the content and parent are the same
/// (a retry without a request id; nothing is written), else ALREADY_EXISTS.
async fn same_again<T: WriteTx + ThreadTx>(
    name: &ThreadName,
    stored: &Checkpoint,
    digest: &str,
    parent_key: &str,
    w: &mut write::Write<T>,
) -> Result<PutThreadCheckpointResponse> {
    let stored_parent = match &stored.parent_id {
        Some(p) => w.tx().checkpoint(p).await?.and_then(|c| c.ordered_key),
        None => None,
    };
    let key = stored.ordered_key.clone().unwrap_or_default();
    if stored.digest != digest || stored_parent.as_deref().unwrap_or_default() != parent_key {
        return Err(Error::AlreadyExists(format!(
            "key: checkpoint {key:?} already exists in {} with other content; checkpoints are immutable, so put \
             this one under a new key",
            name.describe()
        )));
    }
    let result = WriteResult {
        revision: stored.revision,
        outcome: WriteOutcome::Applied as i32,
        replayed: true,
        ..Default::default()
    };
    Ok(PutThreadCheckpointResponse {
        checkpoint: Some(shown(name, stored, stored_parent)),
        result: Some(result),
        created_session: false,
    })
}
