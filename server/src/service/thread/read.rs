//! GetThreadCheckpoint and ListThreadCheckpoints: a thread's checkpoints newest (greatest
//! key) first, each verified by its digest, with its pending writes, read in one statement
//! per page (and one for the page's writes).

use std::collections::HashMap;

use baton_proto::v1::{GetThreadCheckpointResponse, ListThreadCheckpointsResponse, ThreadCheckpoint};

use super::{ThreadName, write_message};
use crate::core::page::{self, Budget, REPLY_BUDGET};
use crate::error::Result;
use crate::store::Store;
use crate::store::model::{PendingWrite, ThreadQuery, ThreadRow};

/// What a list selects (validated).
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    pub project: String,
    /// "" = every thread.
    pub thread: String,
    pub namespace: Option<String>,
    pub key: Option<String>,
    pub before_key: Option<String>,
    pub after: Option<(String, String)>,
    pub filter: Vec<(String, String)>,
    pub page_size: i64,
    pub metadata_only: bool,
}

/// Where a page of ListThreadCheckpoints ends: the last checkpoint's key and id.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Position {
    pub key: String,
    pub id: String,
}

/// GetThreadCheckpoint.
#[tracing::instrument(level = "debug", skip_all)]
pub async fn get<S: Store>(
    store: &S,
    name: ThreadName,
    key: Option<String>,
) -> Result<GetThreadCheckpointResponse> {
    let query = ListQuery {
        project: name.project.clone(),
        thread: name.thread.clone(),
        namespace: Some(name.namespace.clone()),
        key,
        page_size: 1,
        ..ListQuery::default()
    };
    let listed = list(store, query).await?;
    Ok(GetThreadCheckpointResponse {
        checkpoint: listed.checkpoints.into_iter().next(),
        as_of_revision: listed.as_of_revision,
    })
}

/// ListThreadCheckpoints: one page.
#[tracing::instrument(level = "debug", skip_all)]
pub async fn list<S: Store>(store: &S, q: ListQuery) -> Result<ListThreadCheckpointsResponse> {
    // Head revision first, then the data: what is read is at least as new as as_of.
    let as_of_revision = crate::store::head_revision(store, q.project.clone()).await?;
    let empty = || ListThreadCheckpointsResponse { as_of_revision, ..Default::default() };
    let sessions = if q.thread.is_empty() {
        None
    } else {
        let sessions = store.thread_sessions(q.project.clone(), q.thread.clone()).await?;
        let ids: Vec<String> = sessions
            .into_iter()
            .filter(|s| q.namespace.as_ref().is_none_or(|ns| s.thread_ns.as_ref() == Some(ns)))
            .map(|s| s.id)
            .collect();
        if ids.is_empty() {
            return Ok(empty());
        }
        Some(ids)
    };
    // The page's rows without their payloads first: a page reads the payloads and writes of
    // only the checkpoints that fit its reply, so memory is that of one reply.
    let light = ThreadQuery {
        project: q.project.clone(),
        namespace: if sessions.is_none() { q.namespace.clone() } else { None },
        sessions,
        key: q.key,
        before_key: q.before_key,
        after: q.after,
        filter: q.filter,
        limit: q.page_size,
        ..ThreadQuery::default()
    };
    // A page of one (a get) always fits: it is read whole at once.
    let first = ThreadQuery { payload: !q.metadata_only && q.page_size == 1, ..light.clone() };
    let rows = store.thread_checkpoints(first).await?;
    let mut more = i64::try_from(rows.len()).unwrap_or(i64::MAX) > q.page_size;
    let mut rows: Vec<ThreadRow> = rows.into_iter().take(usize::try_from(q.page_size).unwrap_or(0)).collect();
    if !q.metadata_only && q.page_size > 1 && !rows.is_empty() {
        let ids: Vec<String> = rows.iter().map(|r| r.checkpoint.id.clone()).collect();
        let sizes: HashMap<String, i64> =
            store.pending_write_sizes(q.project.clone(), ids).await?.into_iter().collect();
        let fits = fitting(&rows, &sizes);
        if fits < rows.len() {
            rows.truncate(fits);
            more = true;
        }
        let ids: Vec<String> = rows.iter().map(|r| r.checkpoint.id.clone()).collect();
        let full = ThreadQuery { ids: Some(ids), payload: true, limit: q.page_size, ..light };
        rows = store.thread_checkpoints(full).await?;
    }
    let mut writes: HashMap<String, Vec<PendingWrite>> = HashMap::new();
    if !q.metadata_only && !rows.is_empty() {
        let ids = rows.iter().map(|r| r.checkpoint.id.clone()).collect();
        for w in store.pending_writes(q.project.clone(), ids).await? {
            writes.entry(w.checkpoint_id.clone()).or_default().push(w);
        }
    }
    let mut budget = Budget::new(q.page_size);
    let mut checkpoints = Vec::new();
    let mut cut = false;
    for row in rows {
        let shown = shown(&row, q.metadata_only, &mut writes);
        if !budget.take(prost::Message::encoded_len(&shown)) {
            cut = true;
            break;
        }
        checkpoints.push(shown);
    }
    let next_page_token = match checkpoints.last() {
        Some(last) if more || cut => page::token(&Position {
            key: last.key.clone(),
            id: last.checkpoint.as_ref().map(|c| c.id.clone()).unwrap_or_default(),
        }),
        _ => String::new(),
    };
    Ok(ListThreadCheckpointsResponse { checkpoints, next_page_token, as_of_revision })
}

/// How many of a page's first rows fit one reply, by their stored sizes and their writes'
/// (at least one: a page always makes progress).
fn fitting(rows: &[ThreadRow], write_sizes: &HashMap<String, i64>) -> usize {
    let mut left = i64::try_from(REPLY_BUDGET).unwrap_or(i64::MAX);
    rows.iter()
        .enumerate()
        .take_while(|(n, r)| {
            let c = &r.checkpoint;
            left -= c.size_bytes + write_sizes.get(&c.id).copied().unwrap_or(0) + 512;
            *n == 0 || left >= 0
        })
        .count()
}

/// A listed checkpoint, verified: with its payload by the full digest, or by the state
/// digest alone when payloads are left out; one that fails is marked `corrupt` (its
/// payload and state left out) for the caller to skip or report.
fn shown(
    row: &ThreadRow,
    metadata_only: bool,
    writes: &mut HashMap<String, Vec<PendingWrite>>,
) -> ThreadCheckpoint {
    let c = &row.checkpoint;
    let verified = if metadata_only { c.verified_state() } else { c.verified(true) };
    let checkpoint =
        verified.unwrap_or_else(|_| baton_proto::v1::Checkpoint { corrupt: true, ..c.to_meta() });
    ThreadCheckpoint {
        thread: row.thread_key.clone().unwrap_or_default(),
        namespace: row.thread_ns.clone().unwrap_or_default(),
        key: c.ordered_key.clone().unwrap_or_default(),
        parent_key: row.parent_key.clone().unwrap_or_default(),
        metadata_json: c.metadata.clone().unwrap_or_default(),
        writes: writes.remove(&c.id).unwrap_or_default().into_iter().map(write_message).collect(),
        checkpoint: Some(checkpoint),
    }
}
