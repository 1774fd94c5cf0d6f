//! Search: a page of hits for a parsed query, each with a snippet of its record's text
//! (`core::search`), paged by count and bytes. Pages keep to the head revision and newest
//! document the first page saw, so later writes do not shift them.

use std::collections::HashMap;

use baton_proto::v1::{Highlight, SearchHit, SearchKind, SearchResponse};
use prost::Message as _;
use serde::{Deserialize, Serialize};

use crate::core::page::{Budget, token};
use crate::core::search::doc::Kind;
use crate::core::search::query::Query;
use crate::core::search::rank::{self, Ranked};
use crate::core::search::snippet;
use crate::core::time::ts;
use crate::error::Result;
use crate::store::Store;
use crate::store::model::{SearchQuery, SearchRow};

/// Where the next page starts: after `offset` hits of the results as of `revision` and
/// search document `max_id`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct Position {
    pub offset: i64,
    pub revision: i64,
    pub max_id: i64,
}

/// What to search, validated.
#[derive(Debug, Clone)]
pub struct Search {
    pub project: String,
    pub query: Query,
    pub kinds: Vec<SearchKind>,
    pub session_id: String,
    pub branch: String,
    pub author: String,
    pub after_us: i64,
    pub before_us: i64,
}

pub async fn search<S: Store>(
    store: &S,
    search: Search,
    page_size: i64,
    position: Option<Position>,
    time_limit: std::time::Duration,
) -> Result<SearchResponse> {
    let offset = usize::try_from(position.map_or(0, |p| p.offset)).unwrap_or(usize::MAX);
    let wanted: Vec<String> = search.query.wanted().into_iter().map(str::to_owned).collect();
    let query = SearchQuery {
        project: search.project,
        query: search.query,
        kinds: search.kinds.iter().fold(0, |mask, k| mask | (1 << *k as i64)),
        session_id: search.session_id,
        branch: search.branch,
        author: search.author,
        after_us: search.after_us,
        before_us: search.before_us,
        bounds: position.map(|p| (p.revision, p.max_id)),
        ranked: crate::core::search::RANKED,
        time_limit,
    };
    let found = store.search(query).await?;
    let ranked = rank::collapse(found.candidates);
    let page: Vec<&Ranked> =
        ranked.iter().skip(offset).take(usize::try_from(page_size).unwrap_or(0)).collect();
    let rows: HashMap<i64, SearchRow> = store
        .search_rows(page.iter().map(|r| r.id).collect())
        .await?
        .into_iter()
        .map(|r| (r.id, r))
        .collect();
    let wanted: Vec<&str> = wanted.iter().map(String::as_str).collect();
    let mut budget = Budget::new(page_size);
    let mut hits = Vec::new();
    for r in &page {
        // Dropped since the candidates were read (a write in between): not a hit any more.
        let Some(row) = rows.get(&r.id) else { continue };
        let hit = hit(row, r, &wanted);
        if !budget.take(hit.encoded_len()) {
            break;
        }
        hits.push(hit);
    }
    let next = offset + hits.len();
    let next_page_token = if ranked.len() > next && !page.is_empty() {
        let (revision, max_id) = found.bounds;
        token(&Position { offset: i64::try_from(next).unwrap_or(i64::MAX), revision, max_id })
    } else {
        String::new()
    };
    Ok(SearchResponse { hits, next_page_token, partial: found.partial })
}

fn hit(row: &SearchRow, ranked: &Ranked, wanted: &[&str]) -> SearchHit {
    let snippet = snippet::of(&row.body, wanted);
    let offset = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
    SearchHit {
        kind: i32::try_from(row.kind).unwrap_or_default(),
        record_id: row.record_id.clone(),
        session_id: row.session_id.clone(),
        revision: row.revision,
        author: row.author.clone(),
        created_at: Some(ts(row.created_us)),
        branch: row.branch.clone(),
        highlights: snippet
            .highlights
            .iter()
            .map(|r| Highlight { start: offset(r.start), end: offset(r.end) })
            .collect(),
        snippet: snippet.text,
        score: ranked.score,
        matched_checkpoints: if row.kind == Kind::Checkpoint as i64 {
            i32::try_from(ranked.matched).unwrap_or(i32::MAX)
        } else {
            0
        },
    }
}
