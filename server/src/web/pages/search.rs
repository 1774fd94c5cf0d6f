//! Search across a project: memory, checkpoints and sessions, with the CLI's and MCP's query
//! syntax (words, "phrases", -exclusions, OR), paged.

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use baton_proto::v1::search_service_server::SearchService;
use baton_proto::v1::{SearchHit, SearchKind, SearchRequest};

use crate::store::Store;
use crate::web::Web;
use crate::web::render::{self, Chrome, WebError, When, clip, href, next_link, visible};
use crate::web::signin::Viewer;
use crate::web::view::{session_href, short};

#[derive(Debug, Default, Clone, serde::Deserialize)]
#[serde(default)]
pub struct SearchQuery {
    project: String,
    q: String,
    kind: String,
    branch: String,
    author: String,
    page: String,
}

/// A piece of a snippet, marked when a query word matched it.
pub struct Piece {
    pub text: String,
    pub mark: bool,
}

pub struct Hit {
    pub kind: &'static str,
    pub href: String,
    pub label: String,
    pub pieces: Vec<Piece>,
    pub by: String,
    pub at: When,
}

#[derive(askama::Template)]
#[template(path = "search.html")]
struct Page {
    chrome: Chrome,
    query: SearchQuery,
    hits: Vec<Hit>,
    searched: bool,
    partial: bool,
    next: String,
}

const KINDS: [(&str, SearchKind); 3] = [
    ("memory", SearchKind::Memory),
    ("checkpoint", SearchKind::Checkpoint),
    ("session", SearchKind::Session),
];

/// A snippet cut at its highlights (UTF-8 byte offsets; any that do not fall on character
/// boundaries are ignored).
fn pieces(snippet: &str, hit: &SearchHit) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut at = 0;
    for h in &hit.highlights {
        let (Ok(start), Ok(end)) = (usize::try_from(h.start), usize::try_from(h.end)) else { continue };
        if start < at
            || end <= start
            || !snippet.is_char_boundary(start)
            || !snippet.is_char_boundary(end)
            || end > snippet.len()
        {
            continue;
        }
        out.push(Piece { text: visible(&snippet[at..start]), mark: false });
        out.push(Piece { text: visible(&snippet[start..end]), mark: true });
        at = end;
    }
    out.push(Piece { text: visible(&snippet[at..]), mark: false });
    out
}

fn hit_of(project: &str, h: &SearchHit) -> Hit {
    let kind = SearchKind::try_from(h.kind).unwrap_or_default();
    let (label, link) = match kind {
        SearchKind::Session => (format!("session {}", short(&h.record_id)), session_href(&h.record_id)),
        SearchKind::Checkpoint => (
            format!("checkpoint {} of session {}", short(&h.record_id), short(&h.session_id)),
            href("/session", &[("id", &h.session_id), ("checkpoint", &h.record_id)]),
        ),
        _ => ("memory".to_owned(), href("/memory", &[("project", project)])),
    };
    let label = if h.matched_checkpoints > 1 {
        format!("{label} (and {} more)", h.matched_checkpoints - 1)
    } else {
        label
    };
    Hit {
        kind: KINDS.iter().find(|(_, k)| *k == kind).map_or("record", |(n, _)| n),
        href: link,
        label,
        pieces: pieces(&h.snippet, h),
        by: clip(&h.author, 80),
        at: When::of(h.created_at.as_ref()),
    }
}

pub async fn page<S: Store>(
    State(web): State<Web<S>>,
    viewer: Viewer,
    Query(q): Query<SearchQuery>,
) -> Response {
    let chrome = viewer.chrome(Some(&q.project));
    if q.q.trim().is_empty() {
        return render::page(&Page {
            chrome,
            query: q,
            hits: vec![],
            searched: false,
            partial: false,
            next: String::new(),
        });
    }
    let kinds = match q.kind.as_str() {
        "" => vec![],
        name => match KINDS.iter().find(|(n, _)| *n == name) {
            Some((_, k)) => vec![*k as i32],
            None => {
                return WebError::BadRequest(format!("kind {name:?} is not memory, checkpoint or session"))
                    .into_response();
            }
        },
    };
    let request = SearchRequest {
        project: q.project.clone(),
        query: q.q.clone(),
        kinds,
        branch: q.branch.clone(),
        author: q.author.clone(),
        page_token: q.page.clone(),
        ..Default::default()
    };
    let reply = match SearchService::search(&web.api, viewer.request(request)).await {
        Ok(reply) => reply.into_inner(),
        Err(e) => return WebError::from(e).into_response(),
    };
    let query = [
        ("project", q.project.as_str()),
        ("q", &q.q),
        ("kind", &q.kind),
        ("branch", &q.branch),
        ("author", &q.author),
    ];
    let next = next_link("/search", &query, &reply.next_page_token);
    let hits = reply.hits.iter().map(|h| hit_of(&q.project, h)).collect();
    render::page(&Page { chrome, query: q, hits, searched: true, partial: reply.partial, next })
}
