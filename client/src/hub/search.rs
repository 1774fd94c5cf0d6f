//! Search, shared by `baton search` and the MCP `search` tool so both give what the RPC
//! gives: the request from the options, pages read up to a limit, and a hit shown with its
//! highlights. A hit's text and offsets come from the hub: the offsets are checked before
//! use, and the text is printed only through `crate::safe`.

use baton_proto::v1::{SearchHit, SearchKind, SearchRequest};

use crate::hub::remote::Hub;
use crate::view;

/// What to search for, and how many hits to read at most.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub query: String,
    pub kinds: Vec<SearchKind>,
    pub session_id: String,
    pub branch: String,
    pub author: String,
    pub after: Option<prost_types::Timestamp>,
    pub before: Option<prost_types::Timestamp>,
    pub limit: usize,
}

pub fn parse_kind(s: &str) -> anyhow::Result<SearchKind> {
    Ok(match s.trim() {
        "memory" => SearchKind::Memory,
        "checkpoint" | "checkpoints" => SearchKind::Checkpoint,
        "session" | "sessions" => SearchKind::Session,
        other => anyhow::bail!("unknown kind {other:?}: use memory, checkpoint or session"),
    })
}

/// A time given as an age (`2h`, `3days`) or a date (`2026-11-20`, RFC 3339).
pub fn parse_time(s: &str) -> anyhow::Result<prost_types::Timestamp> {
    let s = s.trim();
    let at = if let Ok(age) = humantime::parse_duration(s) {
        chrono::Utc::now() - chrono::Duration::from_std(age)?
    } else if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
        t.with_timezone(&chrono::Utc)
    } else if let Ok(d) = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        d.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc()
    } else {
        anyhow::bail!("{s:?} is neither an age (2h, 3days) nor a date (2026-11-20, or RFC 3339)");
    };
    Ok(prost_types::Timestamp { seconds: at.timestamp(), nanos: 0 })
}

/// Up to `limit` hits, best first, and whether the project's older records are still being
/// indexed.
pub async fn run(hub: &mut Hub, project: &str, o: &Options) -> Result<(Vec<SearchHit>, bool), tonic::Status> {
    let mut hits = Vec::new();
    let mut page_token = String::new();
    let mut partial = false;
    loop {
        let left = o.limit.saturating_sub(hits.len());
        let reply = hub
            .search
            .search(SearchRequest {
                project: project.to_owned(),
                query: o.query.clone(),
                kinds: o.kinds.iter().map(|k| *k as i32).collect(),
                session_id: o.session_id.clone(),
                branch: o.branch.clone(),
                author: o.author.clone(),
                after: o.after,
                before: o.before,
                page_size: i32::try_from(left.min(100)).unwrap_or(100),
                page_token: page_token.clone(),
            })
            .await?
            .into_inner();
        partial |= reply.partial;
        let got = reply.hits.len();
        hits.extend(reply.hits.into_iter().take(left));
        // A hub is not trusted to end its pages: a repeated token or an empty page ends them.
        if hits.len() >= o.limit
            || got == 0
            || reply.next_page_token.is_empty()
            || reply.next_page_token == page_token
        {
            return Ok((hits, partial));
        }
        page_token = reply.next_page_token;
    }
}

/// The snippet on one line, its highlights between `open` and `close` (those the hub gave
/// that fall on the text's characters; others are ignored).
pub fn marked(h: &SearchHit, open: &str, close: &str) -> String {
    let text = &h.snippet;
    let mut out = String::new();
    let mut at = 0;
    for r in &h.highlights {
        let (Ok(start), Ok(end)) = (usize::try_from(r.start), usize::try_from(r.end)) else { continue };
        let (Some(before), Some(word)) = (text.get(at..start), text.get(start..end)) else { continue };
        if start < at || word.is_empty() {
            continue;
        }
        out.push_str(&crate::safe::line(before));
        out.push_str(open);
        out.push_str(&crate::safe::line(word));
        out.push_str(close);
        at = end;
    }
    out.push_str(&crate::safe::line(text.get(at..).unwrap_or_default()));
    out
}

pub fn kind_name(kind: i32) -> &'static str {
    match SearchKind::try_from(kind).unwrap_or_default() {
        SearchKind::Memory => "memory",
        SearchKind::Checkpoint => "checkpoint",
        SearchKind::Session => "session",
        SearchKind::Unspecified => "?",
    }
}

pub fn hit_json(h: &SearchHit) -> serde_json::Value {
    serde_json::json!({
        "kind": kind_name(h.kind),
        "record_id": h.record_id,
        "session_id": h.session_id,
        "revision": h.revision,
        "author": h.author,
        "branch": h.branch,
        "created_at": view::time(h.created_at.as_ref()),
        "snippet": h.snippet,
        "highlights": h.highlights.iter().map(|r| [r.start, r.end]).collect::<Vec<_>>(),
        "score": h.score,
        "matched_checkpoints": h.matched_checkpoints,
    })
}
