//! ListReservations: a project's live reservations (held, then waiting in queue order), or
//! those overlapping given paths and tasks, paged within the reply budget.

use baton_proto::v1::ListReservationsResponse;
use serde::{Deserialize, Serialize};

use super::{message, settings_message};
use crate::core::page::{self, Budget};
use crate::core::reservation::{Target, branches_meet, list_key, list_order};
use crate::core::time::now_us;
use crate::error::Result;
use crate::store::Store;

/// A listing, validated.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    pub project: String,
    pub targets: Vec<Target>,
    pub branch: String,
    pub session_id: Option<String>,
    pub page_size: i64,
    /// The place of the last row of the previous page (`list_key`).
    pub after: Option<Position>,
    pub max_live: usize,
}

/// Where a page ends: its last row's `list_key`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Position(pub (bool, i64, String, String, String));

/// ListReservations.
pub async fn list<S: Store>(store: &S, q: Listing) -> Result<ListReservationsResponse> {
    let as_of_revision = crate::store::head_revision(store, q.project.clone()).await?;
    let settings = store.reservation_settings(q.project.clone()).await?;
    let now = now_us();
    let read = if q.targets.is_empty() {
        store.live_reservations(q.project.clone()).await?
    } else {
        let (paths, tasks) = crate::core::reservation::split(&q.targets);
        store.overlapping_reservations(q.project.clone(), paths, tasks).await?
    };
    let mut rows: Vec<_> = read
        .into_iter()
        .filter(|r| r.live_at(now))
        .filter(|r| q.branch.is_empty() || branches_meet(&r.branch, &q.branch))
        .filter(|r| q.session_id.as_ref().is_none_or(|s| &r.session_id == s))
        .filter(|r| q.targets.is_empty() || q.targets.iter().any(|t| r.target().overlaps(t)))
        .collect();
    rows.sort_by(list_order);
    let start = match &q.after {
        Some(Position(after)) => rows.iter().position(|r| list_key(r) > *after).unwrap_or(rows.len()),
        None => 0,
    };
    let mut budget = Budget::new(q.page_size);
    let mut reservations = Vec::new();
    let mut last = None;
    for r in &rows[start..] {
        let m = message(&q.project, r, Some(now));
        if !budget.take(prost::Message::encoded_len(&m)) {
            break;
        }
        reservations.push(m);
        last = Some(r);
    }
    let end = start + reservations.len();
    let next_page_token = match last {
        Some(r) if end < rows.len() => page::token(&Position(list_key(r))),
        _ => String::new(),
    };
    Ok(ListReservationsResponse {
        reservations,
        next_page_token,
        settings: Some(settings_message(settings.as_ref(), q.max_live)),
        as_of_revision,
    })
}
