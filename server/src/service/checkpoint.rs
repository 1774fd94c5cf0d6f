//! CreateCheckpoint: checkpoints are immutable, a tree per session; a new one moves its
//! session's head as `core::head` decides (a fork is reported as a conflict on the head,
//! both branches kept).

use std::collections::HashMap;

use baton_proto::v1::{
    Checkpoint as CheckpointMessage, CheckpointRef, Conflict, CreateCheckpointResponse, EventKind,
    GetCheckpointResponse, ListCheckpointsResponse, RecordValue, record_value,
};

use super::session::{self, project_of};
use super::write::{self, Write, event};
use crate::core::conflict::{self, Contested};
use crate::core::head;
use crate::core::lww::{Decision, RecordVersion};
use crate::core::page::{Budget, REPLY_BUDGET};
use crate::core::status;
use crate::core::tree;
use crate::error::{Error, Result};
use crate::store::model::{Change, Checkpoint, FirstRead, Lock, Node, Session};
use crate::store::rows::{decode_actor, encode_actor};
use crate::store::{Entity, NewCheckpoint, Store, Within, WriteCtx, WriteTx, is_within};

/// CreateCheckpoint.
#[tracing::instrument(level = "debug", skip_all)]
pub async fn create<S: Store>(
    store: &S,
    ctx: WriteCtx,
    new: NewCheckpoint,
    within: Within,
) -> Result<CreateCheckpointResponse> {
    let session_id = new.session_id.to_string();
    let id = new.id.to_string();
    let project = project_of(store, &session_id, &within).await?;
    let lock = Lock {
        project: project.clone(),
        request_id: ctx.request_id.clone(),
        memory: false,
        first_read: Some(FirstRead::Session(session_id.clone())),
        rewrites_log: false,
    };
    let ran = write::run(store, lock, ctx, move |w, ctx| {
        Box::pin(async move {
            let mut row = session::read(w, &session_id).await?;
            let parent = check(w, &row, &new, &id, &project).await?;
            let activity = status::is_activity(&row.id, &ctx.actor.session_id);
            if activity {
                session::touch(w, &mut row, &ctx.actor)?;
            }
            let (decided, conflict) = head_move(&row, parent.as_deref(), &id, ctx, w.now_us);
            if let (Decision::Rejected, Some(conflict)) = (decided.decision, &conflict) {
                return Err(w.rejected(conflict.clone()));
            }
            let revision = w.revision();
            let (kind, state_tool_count) = (new.request.kind, new.state_tool_count);
            let stored = stored(new, &id, &project, parent.clone(), revision, w.now_us, ctx);
            fail::fail_point!("checkpoint.insert", |_| Err(write::injected("checkpoint.insert")));
            let checkpoint = stored.to_meta();
            w.apply(Change::InsertCheckpoint(Box::new(stored)));
            let is_head = decided.decision.applies();
            if is_head {
                set_head(&mut row, Some(id.clone()), revision, ctx, w.now_us);
                row.tool_count = row.tool_count.max(state_tool_count);
            }
            if is_head || activity {
                w.apply(Change::PutSession(Box::new(row)));
            }
            let mut ev = event(EventKind::CheckpointCreated, "checkpoint", &id, &ctx.actor);
            ev.value = Some(baton_proto::v1::event::Value::Checkpoint(CheckpointRef {
                id: id.clone(),
                session_id: session_id.clone(),
                parent_id: parent.unwrap_or_default(),
                digest: checkpoint.digest.clone(),
                kind,
                is_head,
                ..Default::default()
            }));
            ev.conflict = conflict;
            let conflict = w.emit(ev)?.conflict;
            let result = conflict::result(revision, decided.decision, conflict, ctx.writer());
            let reply = CreateCheckpointResponse { checkpoint: Some(checkpoint), result: Some(result) };
            w.finish(ctx, &reply)?;
            Ok(reply)
        })
    });
    ran.await?.or_replayed(|r| r.result.as_mut())
}

/// Refuses a checkpoint its session, its id, its parent or its chunks do not allow; returns
/// its parent.
async fn check<T: WriteTx>(
    w: &mut Write<T>,
    row: &Session,
    new: &NewCheckpoint,
    id: &str,
    project: &str,
) -> Result<Option<String>> {
    status::check_open(&row.id, row.status(), row.resumed_by.as_deref())?;
    if w.tx().checkpoint_owner(id).await?.is_some() {
        return Err(Error::AlreadyExists(format!(
            "checkpoint_id: checkpoint {id} already exists; use a new id (or none)"
        )));
    }
    let parent =
        head::parent(new.request.parent_id.as_deref(), row.head_checkpoint_id.as_deref()).map(str::to_owned);
    if let Some(p) = new.request.parent_id.as_deref().filter(|p| !p.is_empty()) {
        check_parent(w, p, project, &row.id).await?;
    }
    let missing = w.tx().missing_chunks(&new.chunk_digests).await?;
    if let Some(first) = missing.first() {
        return Err(Error::FailedPrecondition(format!(
            "blobs: {} chunk(s) are not uploaded (first: {first}); upload them with PutChunks, then create the \
             checkpoint",
            missing.len()
        )));
    }
    Ok(parent)
}

/// What the checkpoint does to its session's head (`core::head`), and the conflict it
/// reports.
pub(crate) fn head_move(
    row: &Session,
    parent: Option<&str>,
    id: &str,
    ctx: &WriteCtx,
    now_us: i64,
) -> (head::Move, Option<Conflict>) {
    let head = row.head_checkpoint_id.as_deref();
    let current = RecordVersion { revision: row.head_revision, written_us: row.head_written_us };
    let decided = head::decide(parent, head, current, ctx.intent(now_us));
    let value = |id: Option<&str>| RecordValue {
        value: id.map(|i| record_value::Value::HeadCheckpointId(i.to_owned())),
    };
    let conflict = decided.decision.is_conflict().then(|| {
        let contested = Contested {
            record: format!("session/{}/head", row.id),
            current: Some((current, decode_actor(&row.head_author))),
            current_value: Some(value(head)),
            written_value: Some(value(Some(id))),
            detail: decided.detail.clone(),
        };
        conflict::conflict(decided.decision, ctx.writer(), contested)
    });
    (decided, conflict)
}

/// Moves a session's head, and its last-write-wins version with it: this write's revision,
/// time and author.
pub(crate) fn set_head(row: &mut Session, head: Option<String>, revision: i64, ctx: &WriteCtx, now_us: i64) {
    row.head_checkpoint_id = head;
    row.head_revision = revision;
    row.head_written_us = ctx.written_us(now_us);
    row.head_author = encode_actor(&ctx.actor);
    row.updated_us = now_us;
}

/// A named parent must be a checkpoint of the same session; another project's is answered
/// as one that does not exist.
async fn check_parent<T: WriteTx>(
    w: &mut Write<T>,
    parent: &str,
    project: &str,
    session_id: &str,
) -> Result<()> {
    match w.tx().checkpoint_owner(parent).await? {
        Some(owner) if owner.project == project && owner.session_id == session_id => Ok(()),
        Some(owner) if owner.project == project => Err(Error::InvalidArgument(format!(
            "parent_id: checkpoint {parent} belongs to session {}, not {session_id}",
            owner.session_id
        ))),
        _ => Err(Error::NotFound(format!("parent_id: no checkpoint {parent}"))),
    }
}

/// The checkpoint as stored.
fn stored(
    new: NewCheckpoint,
    id: &str,
    project: &str,
    parent_id: Option<String>,
    revision: i64,
    now_us: i64,
    ctx: &WriteCtx,
) -> Checkpoint {
    let NewCheckpoint { request, session_id, content, blobs, .. } = new;
    Checkpoint {
        id: id.to_owned(),
        session_id: session_id.to_string(),
        project: project.to_owned(),
        parent_id,
        kind: request.kind,
        reason: request.reason,
        state: content.state,
        payload: content.payload,
        payload_content_type: request.payload_content_type,
        compression: content.compression.as_str().to_owned(),
        size_bytes: content.size_bytes,
        digest: content.digest,
        state_digest: Some(content.state_digest),
        created_us: now_us,
        revision,
        author: encode_actor(&ctx.actor),
        blobs,
        ordered_key: None,
        metadata: None,
        run_id: None,
    }
}

/// GetCheckpoint: verified, with its payload if asked (without it, verified by its state's
/// digest, as lists are: the payload, maybe megabytes, is neither read nor hashed).
#[tracing::instrument(level = "debug", skip_all)]
pub async fn get<S: Store>(
    store: &S,
    id: uuid::Uuid,
    include_payload: bool,
    within: Within,
) -> Result<GetCheckpointResponse> {
    let id = id.to_string();
    let missing = || Error::NotFound(format!("checkpoint_id: no checkpoint {id}"));
    let project = store.project_of(Entity::Checkpoint, id.clone()).await?.filter(|p| is_within(p, &within));
    let project = project.ok_or_else(missing)?;
    let as_of_revision = crate::store::head_revision(store, project).await?;
    let row = store.checkpoint(id.clone(), include_payload).await?.ok_or_else(missing)?;
    let checkpoint = if include_payload { row.verified(true)? } else { row.verified_state()? };
    Ok(GetCheckpointResponse { checkpoint: Some(checkpoint), as_of_revision })
}

/// ListCheckpoints: one page of a session's checkpoints in tree order (`core::tree`), after
/// the checkpoint `after` when given. Payloads are never read; states are read a batch at a
/// time, each batch's stored bytes within the reply budget, so memory is that of a page.
#[tracing::instrument(level = "debug", skip_all)]
pub async fn list<S: Store>(
    store: &S,
    session_id: uuid::Uuid,
    include_state: bool,
    page_size: i64,
    after: Option<String>,
    within: Within,
) -> Result<ListCheckpointsResponse> {
    let session_id = session_id.to_string();
    let missing = || Error::NotFound(format!("session_id: no session {session_id}"));
    let project =
        store.project_of(Entity::Session, session_id.clone()).await?.filter(|p| is_within(p, &within));
    let project = project.ok_or_else(missing)?;
    // Head revision first, then the data: what is read is at least as new as as_of.
    let as_of_revision = crate::store::head_revision(store, project.clone()).await?;
    let head = store.session(session_id.clone()).await?.ok_or_else(missing)?.head_checkpoint_id;
    let nodes = store.checkpoint_nodes(session_id).await?;
    let order = tree::order(nodes.iter().map(|n| (n.id.as_str(), n.parent_id.as_deref())));
    let next = match &after {
        None => 0,
        Some(id) => match order.iter().position(|(i, _)| &nodes[*i].id == id) {
            Some(at) => at + 1,
            None => {
                return Err(Error::FailedPrecondition(format!(
                    "page_token: checkpoint {id} is no longer in this session's list (retention pruned it since the \
                     previous page, or the token is another list's); list again from the first page"
                )));
            }
        },
    };
    let (checkpoints, more) = page(store, &project, &nodes, &order[next..], include_state, page_size).await?;
    let next_page_token = match checkpoints.last() {
        Some(last) if more => crate::core::page::token(&last.id),
        _ => String::new(),
    };
    Ok(ListCheckpointsResponse {
        checkpoints,
        head_checkpoint_id: head.unwrap_or_default(),
        as_of_revision,
        next_page_token,
    })
}

/// The checkpoints of a page, from `order` on, and whether any follow it.
async fn page<S: Store>(
    store: &S,
    project: &str,
    nodes: &[Node],
    order: &[(usize, i32)],
    include_state: bool,
    page_size: i64,
) -> Result<(Vec<CheckpointMessage>, bool)> {
    const BATCH: usize = 64;
    let mut page = Budget::new(page_size);
    let mut checkpoints = Vec::new();
    let mut next = 0;
    while next < order.len() {
        let mut stored = 0usize;
        let batch: Vec<&(usize, i32)> = order[next..]
            .iter()
            .take(BATCH)
            .enumerate()
            .take_while(|(n, (i, _))| {
                stored = stored.saturating_add(usize::try_from(nodes[*i].state_bytes).unwrap_or(usize::MAX));
                *n == 0 || stored <= REPLY_BUDGET
            })
            .map(|(_, node)| node)
            .collect();
        let ids = batch.iter().map(|(i, _)| nodes[*i].id.clone()).collect();
        let mut rows: HashMap<String, Checkpoint> = store
            .checkpoints(project.to_owned(), ids)
            .await?
            .into_iter()
            .map(|r| (r.id.clone(), r))
            .collect();
        for (i, depth) in batch {
            // Gone since the shape was read (retention): not listed.
            if let Some(row) = rows.remove(&nodes[*i].id) {
                let mut cp = row
                    .verified_state()
                    .unwrap_or_else(|_| CheckpointMessage { corrupt: true, ..row.to_meta() });
                if !include_state {
                    cp.state = None;
                }
                cp.depth = *depth;
                if !page.take(prost::Message::encoded_len(&cp)) {
                    return Ok((checkpoints, true));
                }
                checkpoints.push(cp);
            }
            next += 1;
        }
    }
    Ok((checkpoints, false))
}
