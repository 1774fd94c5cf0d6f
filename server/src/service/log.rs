//! The change log (events) and the conflicts log, read a page at a time: up to a count and
//! a byte budget of bodies (an only row may be larger), sizes read first so that bodies past
//! the page are never read. A revision's rows (conflicts may share one) stay in one page.
//!
//! An event's body may be stored packed (`core::packed`), smaller than the event it holds:
//! its stored size only bounds what is read, and the page ends where the events themselves
//! reach the budget, unpacked one at a time.

use baton_proto::v1::{Conflict, Event, ListConflictsResponse, ListEventsResponse};

use crate::core::page::{self, Budget, REPLY_BUDGET};
use crate::error::{Error, Result};
use crate::store::Store;
use crate::store::model::{LogRow, LogTable};
use crate::store::rows::{decode_conflict, decode_event};

/// Events after a revision, for watchers (no kind filter, no head read): up to `limit`
/// events and `budget` bytes, and whether more follow.
pub async fn events_after<S: Store>(
    store: &S,
    project: String,
    after: i64,
    limit: i64,
    budget: usize,
) -> Result<(Vec<Event>, bool)> {
    let (rows, more) = page(store, LogTable::Events, &project, after, limit, budget, &[]).await?;
    let (events, more) = events_within(&rows, budget, more)?;
    // Revisions are gapless, so a first event past after + 1 means compaction removed some
    // (the latest compaction's own event is always there to show it).
    if events.first().is_some_and(|e| e.revision > after + 1) {
        check_not_compacted(store, &project, after).await?;
    }
    Ok((events, more))
}

/// ListEvents.
#[tracing::instrument(level = "debug", skip_all, fields(project = %project))]
pub async fn list_events<S: Store>(
    store: &S,
    project: String,
    after: i64,
    limit: i64,
    kinds: Vec<i32>,
) -> Result<ListEventsResponse> {
    let as_of_revision = crate::store::head_revision(store, project.clone()).await?;
    check_not_compacted(store, &project, after).await?;
    let (rows, more) = page(store, LogTable::Events, &project, after, limit, REPLY_BUDGET, &kinds).await?;
    let (events, more) = events_within(&rows, REPLY_BUDGET, more)?;
    let next_page_token = next_token(events.last().map(|e| e.revision), more);
    Ok(ListEventsResponse { events, as_of_revision, next_page_token })
}

/// ListConflicts.
#[tracing::instrument(level = "debug", skip_all, fields(project = %project))]
pub async fn list_conflicts<S: Store>(
    store: &S,
    project: String,
    after: i64,
    limit: i64,
) -> Result<ListConflictsResponse> {
    let as_of_revision = crate::store::head_revision(store, project.clone()).await?;
    let (rows, more) = page(store, LogTable::Conflicts, &project, after, limit, REPLY_BUDGET, &[]).await?;
    let next_page_token = next_token(rows.last().map(|r| r.revision), more);
    let conflicts: Vec<Conflict> = rows.iter().map(|r| decode_conflict(&r.body)).collect::<Result<_>>()?;
    Ok(ListConflictsResponse { conflicts, as_of_revision, next_page_token })
}

/// One page of a log after `after`, and whether rows follow it.
async fn page<S: Store>(
    store: &S,
    table: LogTable,
    project: &str,
    after: i64,
    limit: i64,
    budget: usize,
    kinds: &[i32],
) -> Result<(Vec<LogRow>, bool)> {
    let sizes =
        store.log_sizes(table, project.to_owned(), after, limit.saturating_add(1), kinds.to_vec()).await?;
    let mut page = Budget::with_bytes(limit, budget);
    let taken =
        sizes.iter().take_while(|s| page.take(usize::try_from(s.bytes).unwrap_or(usize::MAX))).count();
    let Some(last) = taken.checked_sub(1).and_then(|i| sizes.get(i)).map(|s| s.revision) else {
        return Ok((Vec::new(), false));
    };
    let more = sizes[taken..].iter().any(|s| s.revision > last);
    let rows = store.log_rows(table, project.to_owned(), after, last, kinds.to_vec()).await?;
    Ok((rows, more))
}

/// The events of a page's rows that fit in `budget` bytes (the first always does), and
/// whether more follow them.
fn events_within(rows: &[LogRow], budget: usize, more: bool) -> Result<(Vec<Event>, bool)> {
    let mut page = Budget::with_bytes(i64::MAX, budget);
    let mut events = Vec::with_capacity(rows.len());
    for row in rows {
        let event = decode_event(&row.body)?;
        if !page.take(prost::Message::encoded_len(&event)) {
            return Ok((events, true));
        }
        events.push(event);
    }
    Ok((events, more))
}

/// The token of the page after one that ended at revision `last`, when another follows.
fn next_token(last: Option<i64>, more: bool) -> String {
    match last {
        Some(revision) if more => page::token(&revision),
        _ => String::new(),
    }
}

/// OUT_OF_RANGE when events after `after` were compacted away.
async fn check_not_compacted<S: Store>(store: &S, project: &str, after: i64) -> Result<()> {
    match crate::store::project(store, project.to_owned()).await?.map(|p| p.events_from) {
        Some(from) if from > 0 && after + 1 < from => Err(Error::OutOfRange(format!(
            "events of project {project:?} before revision {from} were compacted; the oldest kept is {from}: re-read \
             the state (replies carry as_of_revision) and list or watch from there"
        ))),
        _ => Ok(()),
    }
}
