//! The `search` tool: `crate::hub::search`, the same request and hits as `baton search`, written
//! for a model.

use std::fmt::Write as _;

use super::params;
use super::tools::{Answer, Call, Failure, clip, status_words};
use crate::{hub::search, view};

pub async fn search(call: &Call<'_>, p: params::Search) -> Answer {
    let limit = match p.limit {
        Some(l) if !(1..=50).contains(&l) => {
            return Err(Failure::Arguments(format!("limit must be 1 to 50, not {l}")));
        }
        Some(l) => l as usize,
        None => 10,
    };
    let kinds = p
        .kinds
        .iter()
        .map(|k| search::parse_kind(k))
        .collect::<anyhow::Result<Vec<_>>>()
        .map_err(|e| Failure::Arguments(e.to_string()))?;
    let Some(mut hub) = call.hub().await else { return Ok(call.offline()) };
    let session_id = match p.session.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
        Some(s) => crate::usecase::sessions::resolve(&mut hub, &call.project.key, s)
            .await
            .map_err(|e| Failure::Arguments(format!("{e:#}")))?,
        None => String::new(),
    };
    let options = search::Options {
        query: p.query.clone(),
        kinds,
        session_id,
        branch: p.branch.unwrap_or_default(),
        limit,
        ..search::Options::default()
    };
    let (hits, partial) = match search::run(&mut hub, &call.project.key, &options).await {
        Ok(found) => found,
        Err(status) if status.code() == tonic::Code::InvalidArgument => {
            return Err(Failure::Arguments(status.message().to_owned()));
        }
        Err(status) => return Err(Failure::Tool(status_words(&status))),
    };
    let mut out = if hits.is_empty() {
        format!("No hits for {:?} in project {}.\n", p.query, call.project.key)
    } else {
        format!("Hits for {:?} in project {}, best first:\n", p.query, call.project.key)
    };
    for h in &hits {
        let _ = write!(out, "- [{}] {}", search::kind_name(h.kind), search::marked(h, "**", "**"));
        let _ = write!(out, " — id {}, {}", view::short(&h.record_id), view::age(h.created_at.as_ref()));
        if !h.author.is_empty() {
            let _ = write!(out, ", by {}", h.author);
        }
        if !h.branch.is_empty() {
            let _ = write!(out, ", on {}", h.branch);
        }
        if !h.session_id.is_empty() {
            let _ = write!(out, ", session {}", view::short(&h.session_id));
        }
        if h.matched_checkpoints > 1 {
            let _ = write!(
                out,
                " (the newest of {} checkpoints of that session that match)",
                h.matched_checkpoints
            );
        }
        out.push('\n');
    }
    if partial {
        out.push_str("Older records of this project are still being indexed: some may be missing.\n");
    }
    Ok(clip(&out))
}
