//! The brief: what an agent is told when a session starts or resumes, read from the store
//! and fitted to a budget by `core::brief`.

use std::collections::HashMap;
use std::sync::Arc;

use baton_proto::v1::{Brief, CheckpointState, Conflict, MemoryEntry};

use super::memory_cache::MemoryCache;
use crate::core::brief::{self, PreviousBy};
use crate::error::{Error, Result};
use crate::store::brief::BriefKeys;
use crate::store::model::{Checkpoint, EntryRow, Session};
use crate::store::rows::decode_conflict;
use crate::store::{BriefData, BriefFor, Store};

/// Reads what the brief is made of and fits it to `budget` characters.
pub async fn build_brief<S: Store>(
    store: &S,
    cache: &MemoryCache,
    q: BriefFor,
    budget: usize,
    changes: &[String],
) -> Result<Brief> {
    let project = q.project.clone();
    Ok(fit_brief(&project, data(store, cache, q).await?, budget, changes))
}

/// Fits what was read to `budget` characters.
pub fn fit_brief(project: &str, data: BriefData, budget: usize, changes: &[String]) -> Brief {
    let mut out = brief::fit(project, brief::sections(&data, changes), budget);
    out.as_of_revision = data.as_of_revision;
    out.last_git_head = data.previous.map(|p| p.git_head).unwrap_or_default();
    out
}

/// The brief's memory section at most: the newest live entries.
const MEMORY_LIMIT: i64 = 500;

/// What a brief is made of, read by `store::brief`'s statements: the head first, so that
/// everything read after it is at least as new as `as_of_revision` (and the memory section
/// at least as new as its cache key).
#[tracing::instrument(level = "debug", skip_all, fields(project = %q.project))]
pub async fn data<S: Store>(store: &S, cache: &MemoryCache, q: BriefFor) -> Result<BriefData> {
    let caller = q.session_id.map(|s| s.to_string()).unwrap_or_default();
    let keys = BriefKeys {
        project: q.project.clone(),
        // Whose previous session: the resumed one, else the caller's.
        me: if q.resuming.is_some() { String::new() } else { caller.clone() },
        caller,
        resuming: q.resuming.clone().unwrap_or_default(),
    };
    let rows = store.brief_rows(keys).await?;
    let head = rows.head.ok_or_else(|| Error::internal("the brief's head read returned no row"))?;
    let memory = memory(store, cache, &q, head.memory_revision, head.branch).await?;
    let mut heads: HashMap<String, Checkpoint> = rows.heads.into_iter().map(|r| (r.id.clone(), r)).collect();
    // The head checkpoints were read by a statement of their own: a checkpoint written
    // between the two reads moved a session's head, and the one its row names is read now.
    let missing: Vec<String> = rows
        .unfinished
        .iter()
        .filter_map(|r| r.head_checkpoint_id.clone())
        .filter(|id| !heads.contains_key(id))
        .collect();
    if !missing.is_empty() {
        heads.extend(
            store.checkpoints(q.project.clone(), missing).await?.into_iter().map(|r| (r.id.clone(), r)),
        );
    }
    let unfinished = rows
        .unfinished
        .into_iter()
        .map(|row| {
            // A corrupt head checkpoint gives no state (verified by its state digest: the
            // payload, maybe megabytes, is neither read nor hashed).
            let state =
                row.head_checkpoint_id.as_ref().and_then(|h| heads.remove(h)).and_then(|c| state_of(&c));
            (row.to_proto(), state)
        })
        .collect();
    // The previous session: the candidate the rule of `core::brief::previous` prefers; the
    // conflicts were read since the earliest candidate's start, and are cut to those since
    // the one chosen.
    let candidates: Vec<(PreviousBy, (i64, Session))> = rows
        .previous
        .into_iter()
        .filter_map(|p| PreviousBy::from_pick(p.pick).map(|by| (by, (p.start_revision, p.session))))
        .collect();
    let chosen = brief::previous(candidates);
    let since = chosen.as_ref().map_or(0, |(_, (start, _))| *start);
    let mut conflicts: Vec<Conflict> =
        rows.conflicts.iter().map(|b| decode_conflict(b)).collect::<Result<_>>()?;
    conflicts.retain(|c| c.revision > since);
    let previous_state = chosen
        .as_ref()
        .and_then(|(_, (_, s))| s.head_checkpoint_id.as_ref())
        .and_then(|h| rows.previous_heads.iter().find(|c| &c.id == h))
        .and_then(state_of);
    let reservations = held_reservations(store, &q.project, head.now_us).await?;
    let mut mine: Vec<String> = q.session_id.iter().map(ToString::to_string).collect();
    mine.extend(q.resuming.clone());
    Ok(BriefData {
        reservations,
        mine,
        as_of_revision: head.head_revision.unwrap_or(0),
        now_us: head.now_us,
        unfinished,
        memory,
        active: rows.active.iter().map(Session::to_proto).collect(),
        conflicts,
        previous_by: chosen.as_ref().map(|(by, _)| *by),
        previous: chosen.map(|(_, (_, s))| s.to_proto()),
        previous_state,
    })
}

/// The reservations held in a project at `now_us`, in the order lists show them.
async fn held_reservations<S: Store>(
    store: &S,
    project: &str,
    now_us: i64,
) -> Result<Vec<baton_proto::v1::Reservation>> {
    let mut rows: Vec<_> = store
        .live_reservations(project.to_owned())
        .await?
        .into_iter()
        .filter(|r| r.is(baton_proto::v1::ReservationStatus::Held) && r.live_at(now_us))
        .collect();
    rows.sort_by(crate::core::reservation::list_order);
    Ok(rows.iter().map(|r| crate::service::reservation::message(project, r, None)).collect())
}

/// A checkpoint's state, if it verifies.
fn state_of(checkpoint: &Checkpoint) -> Option<CheckpointState> {
    checkpoint.verified_state().ok().and_then(|c| c.state)
}

/// The brief's memory section: the newest live entries, project-wide and of the branch
/// (when resuming with no branch given, the resumed session's), from the server's cache
/// while the project's memory is unchanged (`MemoryCache`).
async fn memory<S: Store>(
    store: &S,
    cache: &MemoryCache,
    q: &BriefFor,
    memory_revision: Option<i64>,
    resumed_branch: Option<String>,
) -> Result<Arc<Vec<MemoryEntry>>> {
    let branch = match (&q.resuming, q.branch.is_empty()) {
        (Some(_), true) => resumed_branch.unwrap_or_default(),
        _ => q.branch.clone(),
    };
    if let Some(entries) = memory_revision.and_then(|m| cache.get(&q.project, &branch, m)) {
        return Ok(entries);
    }
    let rows = store.newest_memory(q.project.clone(), branch.clone(), MEMORY_LIMIT).await?;
    let entries = Arc::new(rows.iter().map(EntryRow::to_proto).collect::<Vec<_>>());
    if let Some(m) = memory_revision {
        cache.put(&q.project, &branch, m, entries.clone());
    }
    Ok(entries)
}
