//! A session: what it is, the chain of sessions it continues and that continued it (across
//! machines), its checkpoint tree with forks (paged), one checkpoint's state (the head's by
//! default), its carried transcript a part at a time, and its conflicts.

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use baton_proto::v1::checkpoint_service_server::CheckpointService;
use baton_proto::v1::session_service_server::SessionService;
use baton_proto::v1::{Checkpoint, GetCheckpointRequest, GetSessionRequest, ListCheckpointsRequest, Session};

use crate::store::Store;
use crate::web::checkpoint::{CheckpointView, kind_label};
use crate::web::render::{self, Chrome, WebError, When, clip, href};
use crate::web::signin::Viewer;
use crate::web::transcript::{self, Part};
use crate::web::view::{SessionRow, short};
use crate::web::{Web, conflicts};

const TREE_PAGE: i32 = 200;
/// Sessions followed each way along a resume chain.
const CHAIN: usize = 10;

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub struct SessionQuery {
    id: String,
    checkpoint: String,
    /// The tree's page token.
    tree: String,
    /// The transcript's part (1-based).
    part: usize,
}

pub struct Node {
    pub short: String,
    pub href: String,
    pub kind: &'static str,
    pub reason: String,
    pub created: When,
    pub depth: String,
    /// "head", "fork".
    pub badges: Vec<&'static str>,
    pub selected: bool,
    pub corrupt: bool,
    pub id: String,
}

pub struct Link {
    pub href: String,
    pub label: String,
}

#[derive(askama::Template)]
#[template(path = "session.html")]
struct Page {
    chrome: Chrome,
    s: SessionRow,
    cwd: String,
    summary: String,
    git: String,
    created: When,
    before: Vec<Link>,
    after: Vec<Link>,
    nodes: Vec<Node>,
    more_tree: String,
    checkpoint: Option<CheckpointView>,
    transcript: Option<Part>,
    part_prev: String,
    part_next: String,
    conflicts: Vec<conflicts::Line>,
    commits: Vec<super::commit::Row>,
    resume: String,
}

pub async fn page<S: Store>(
    State(web): State<Web<S>>,
    viewer: Viewer,
    Query(q): Query<SessionQuery>,
) -> Response {
    match render_page(&web, &viewer, q).await {
        Ok(page) => page,
        Err(e) => e.into_response(),
    }
}

async fn session<S: Store>(web: &Web<S>, viewer: &Viewer, id: &str) -> Result<Session, WebError> {
    let request = GetSessionRequest { session_id: id.to_owned() };
    let reply = SessionService::get_session(&web.api, viewer.request(request)).await?.into_inner();
    reply.session.ok_or_else(|| WebError::NotFound(format!("no session {id}")))
}

/// The sessions along a resume chain from `s`, `back` (what it continued) or forward.
async fn chain<S: Store>(web: &Web<S>, viewer: &Viewer, s: &Session, back: bool) -> Vec<Link> {
    let mut out = Vec::new();
    let mut next = if back { s.resumed_from.clone() } else { s.resumed_by.clone() };
    while !next.is_empty() && out.len() < CHAIN {
        let Ok(found) = session(web, viewer, &next).await else { break };
        out.push(Link {
            href: crate::web::view::session_href(&found.id),
            label: format!(
                "{} ({} on {})",
                short(&found.id),
                crate::web::view::agent_label(found.agent),
                clip(&found.host, 60)
            ),
        });
        next = if back { found.resumed_from } else { found.resumed_by };
    }
    if back {
        out.reverse();
    }
    out
}

async fn render_page<S: Store>(web: &Web<S>, viewer: &Viewer, q: SessionQuery) -> Result<Response, WebError> {
    let s = session(web, viewer, &q.id).await?;
    let tree = ListCheckpointsRequest {
        session_id: s.id.clone(),
        page_size: TREE_PAGE,
        page_token: q.tree.clone(),
        ..Default::default()
    };
    let listed = CheckpointService::list_checkpoints(&web.api, viewer.request(tree)).await?.into_inner();
    let selected = [&q.checkpoint, &listed.head_checkpoint_id]
        .into_iter()
        .find(|c| !c.is_empty())
        .cloned()
        .or_else(|| listed.checkpoints.last().map(|c| c.id.clone()))
        .unwrap_or_default();
    let checkpoint = if selected.is_empty() {
        None
    } else {
        let request = GetCheckpointRequest { checkpoint_id: selected.clone(), include_payload: true };
        CheckpointService::get_checkpoint(&web.api, viewer.request(request)).await?.into_inner().checkpoint
    };
    let (transcript, part_prev, part_next) =
        transcript_part(web, viewer, &s, checkpoint.as_ref(), &q).await?;
    let nodes = nodes(&s.id, &listed.checkpoints, &listed.head_checkpoint_id, &selected);
    let more_tree = if listed.next_page_token.is_empty() {
        String::new()
    } else {
        href("/session", &[("id", &s.id), ("tree", &listed.next_page_token)])
    };
    let conflicts = conflicts::of_session(web, viewer, &s).await?;
    let commits = super::commit::commits_of(web, viewer, &s).await?;
    let page = Page {
        chrome: viewer.chrome(Some(&s.project)),
        cwd: clip(&s.cwd, 300),
        summary: clip(&s.summary, 4000),
        git: [s.git_base.as_str(), s.git_head.as_str()]
            .iter()
            .filter(|g| !g.is_empty())
            .map(|g| short(g))
            .collect::<Vec<_>>()
            .join(" → "),
        created: When::of(s.created_at.as_ref()),
        before: chain(web, viewer, &s, true).await,
        after: chain(web, viewer, &s, false).await,
        nodes,
        more_tree,
        checkpoint: checkpoint.as_ref().map(CheckpointView::of),
        transcript,
        part_prev,
        part_next,
        conflicts,
        commits,
        resume: format!("baton resume {}", short(&s.id)),
        s: SessionRow::of(&s),
    };
    Ok(render::page(&page))
}

fn nodes(session: &str, checkpoints: &[Checkpoint], head: &str, selected: &str) -> Vec<Node> {
    checkpoints
        .iter()
        .map(|c| Node {
            short: short(&c.id).to_owned(),
            href: href("/session", &[("id", session), ("checkpoint", &c.id)]),
            kind: kind_label(c.kind),
            reason: clip(&c.reason, 120),
            created: When::of(c.created_at.as_ref()),
            depth: format!("d{}", c.depth.clamp(0, 12)),
            badges: [
                (c.id == head).then_some("head"),
                (checkpoints.iter().filter(|o| o.parent_id == c.id).count() > 1).then_some("fork"),
            ]
            .into_iter()
            .flatten()
            .collect(),
            selected: c.id == selected,
            corrupt: c.corrupt,
            id: c.id.clone(),
        })
        .collect()
}

type TranscriptPart = (Option<Part>, String, String);

async fn transcript_part<S: Store>(
    web: &Web<S>,
    viewer: &Viewer,
    s: &Session,
    checkpoint: Option<&Checkpoint>,
    q: &SessionQuery,
) -> Result<TranscriptPart, WebError> {
    let Some(c) = checkpoint else { return Ok((None, String::new(), String::new())) };
    let Some(blob) = c.blobs.iter().find(|b| b.role == "transcript") else {
        return Ok((None, String::new(), String::new()));
    };
    let part = transcript::read(web, viewer, &s.project, blob, q.part.max(1)).await?;
    let link = |n: usize| {
        href("/session", &[("id", &s.id), ("checkpoint", &c.id), ("part", &n.to_string())]) + "#transcript"
    };
    let prev = if part.part > 1 { link(part.part - 1) } else { String::new() };
    let next = if part.part < part.parts { link(part.part + 1) } else { String::new() };
    Ok((Some(part), prev, next))
}
