//! Search: a page of hits for a parsed query, each with a snippet of its record's text
//! (`core::search`), paged by count and bytes. Pages keep to the head revision the first
//! page saw, so later writes do not shift them.

use baton_proto::v1::{Highlight, SearchHit, SearchKind, SearchResponse};
use prost::Message as _;
use serde::{Deserialize, Serialize};

use crate::core::page::{Budget, token};
use crate::core::search::query::Query;
use crate::core::search::snippet;
use crate::core::time::ts;
use crate::error::Result;
use crate::store::Store;
use crate::store::model::{SearchQuery, SearchRow};

/// Where the next page starts: after `offset` hits of the results as of `revision`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct Position {
    pub offset: i64,
    pub revision: i64,
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
) -> Result<SearchResponse> {
    let position = match position {
        Some(p) => p,
        None => Position { offset: 0, revision: store.head_revision(search.project.clone()).await? },
    };
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
        max_revision: position.revision,
        offset: position.offset,
        // One more, to tell whether more follow.
        limit: page_size + 1,
    };
    let (rows, partial) = store.search(query).await?;
    let wanted: Vec<&str> = wanted.iter().map(String::as_str).collect();
    let mut budget = Budget::new(page_size);
    let mut hits = Vec::new();
    for row in &rows {
        let hit = hit(row, &wanted);
        if !budget.take(hit.encoded_len()) {
            break;
        }
        hits.push(hit);
    }
    let taken = i64::try_from(hits.len()).unwrap_or(i64::MAX);
    let next_page_token = if rows.len() > hits.len() {
        token(&Position { offset: position.offset + taken, revision: position.revision })
    } else {
        String::new()
    };
    Ok(SearchResponse { hits, next_page_token, partial })
}

fn hit(row: &SearchRow, wanted: &[&str]) -> SearchHit {
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
        score: row.score,
        matched_checkpoints: if row.kind == 2 { i32::try_from(row.matched).unwrap_or(i32::MAX) } else { 0 },
    }
}
