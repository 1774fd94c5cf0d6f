//! A commit's page: the sessions that made it (agent, person, machine, when), how each saw it,
//! the prompt, task and decisions near it, the files it changed: what `baton why` says of its
//! lines. A session's page lists its commits (`commits_of`).

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use baton_proto::v1::commit_service_server::CommitService;
use baton_proto::v1::{
    CommitLink, CommitMadeBy, CommitSeenBy, FindCommitsRequest, ListCommitsRequest, Session,
};

use crate::store::Store;
use crate::web::Web;
use crate::web::render::{self, Chrome, WebError, When, clip, href};
use crate::web::signin::Viewer;
use crate::web::view::{agent_label, session_href, short};

/// A session's commits shown on its page, at most.
const SESSION_COMMITS: i32 = 50;

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub struct Which {
    project: String,
    id: String,
}

/// A commit in a list.
pub struct Row {
    pub short: String,
    pub href: String,
    pub subject: String,
    pub made_by: &'static str,
    pub committed: When,
    pub files: usize,
}

/// The href of a commit's page.
pub fn commit_href(project: &str, commit: &str) -> String {
    href("/commit", &[("project", project), ("id", commit)])
}

fn made_by(l: &CommitLink) -> &'static str {
    match (CommitMadeBy::try_from(l.made_by).unwrap_or_default(), l.ambiguous) {
        (CommitMadeBy::Agent, _) => "the agent",
        (_, true) => "the person (ambiguous)",
        _ => "the person",
    }
}

impl Row {
    fn of(project: &str, l: &CommitLink) -> Self {
        Self {
            short: l.commit_id.get(..12).unwrap_or(&l.commit_id).to_owned(),
            href: commit_href(project, &l.commit_id),
            subject: clip(&l.subject, 200),
            made_by: made_by(l),
            committed: When::of(l.committed_at.as_ref()),
            files: l.files.len(),
        }
    }
}

/// A session's commits, newest first (the first `SESSION_COMMITS`).
pub async fn commits_of<S: Store>(web: &Web<S>, viewer: &Viewer, s: &Session) -> Result<Vec<Row>, WebError> {
    let request = ListCommitsRequest {
        project: s.project.clone(),
        session_id: s.id.clone(),
        limit: SESSION_COMMITS,
        ..Default::default()
    };
    let reply = CommitService::list_commits(&web.api, viewer.request(request)).await?.into_inner();
    Ok(reply.links.iter().map(|l| Row::of(&s.project, l)).collect())
}

/// One session's link to the commit.
pub struct Linked {
    session: String,
    session_href: String,
    who: String,
    started: When,
    made_by: &'static str,
    seen_by: &'static str,
    others: usize,
    branch: String,
    prompt: String,
    tasks: Vec<String>,
    decisions: Vec<(String, String)>,
    gone: bool,
    summary: String,
    resume: String,
}

#[derive(askama::Template)]
#[template(path = "commit.html")]
struct Page {
    chrome: Chrome,
    id: String,
    short: String,
    subject: String,
    committed: When,
    files: Vec<String>,
    links: Vec<Linked>,
}

fn seen_by(l: &CommitLink) -> &'static str {
    match CommitSeenBy::try_from(l.seen_by).unwrap_or_default() {
        CommitSeenBy::ToolCall => "one of the agent's tool calls moved HEAD to it",
        CommitSeenBy::BetweenHooks => "HEAD moved to it between the agent's calls",
        CommitSeenBy::PostCommit => "git's post-commit hook",
        CommitSeenBy::Unspecified => "",
    }
}

pub async fn page<S: Store>(State(web): State<Web<S>>, viewer: Viewer, Query(q): Query<Which>) -> Response {
    match render_page(&web, &viewer, q).await {
        Ok(page) => page,
        Err(e) => e.into_response(),
    }
}

async fn render_page<S: Store>(web: &Web<S>, viewer: &Viewer, q: Which) -> Result<Response, WebError> {
    let request = FindCommitsRequest {
        project: q.project.clone(),
        commit_ids: vec![q.id.clone()],
        ..Default::default()
    };
    let reply = CommitService::find_commits(&web.api, viewer.request(request)).await?.into_inner();
    let found: Vec<_> =
        reply.links.iter().filter_map(|f| Some((f.link.as_ref()?, f.context.clone()?))).collect();
    let Some((first, _)) = found.first() else {
        return Err(WebError::NotFound(format!(
            "no session recorded commit {} in this project: the agents' hooks record the commits made while they \
             run, and `baton init AGENT --post-commit` every commit made in a repository",
            clip(&q.id, 64)
        )));
    };
    let n = found.len();
    let links = found
        .iter()
        .map(|(l, c)| {
            let s = reply.sessions.iter().find(|s| s.id == l.session_id);
            Linked {
                session: short(&l.session_id).to_owned(),
                session_href: session_href(&l.session_id),
                who: s.map_or_else(String::new, |s| {
                    clip(&format!("{} · {} @ {}", agent_label(s.agent), s.user, s.host), 200)
                }),
                started: When::of(s.and_then(|s| s.created_at.as_ref())),
                made_by: made_by(l),
                seen_by: seen_by(l),
                others: if l.ambiguous { n - 1 } else { 0 },
                branch: clip(&l.branch, 120),
                prompt: clip(&c.prompt, 2000),
                tasks: c.tasks.iter().map(|t| clip(&format!("{} ({})", t.content, t.status), 300)).collect(),
                decisions: c
                    .decisions
                    .iter()
                    .map(|d| (clip(&d.decision, 500), clip(&d.rationale, 500)))
                    .collect(),
                gone: c.checkpoint_gone,
                summary: s.map_or_else(String::new, |s| clip(&s.summary, 2000)),
                resume: format!("baton resume --session {}", l.session_id),
            }
        })
        .collect();
    let page = Page {
        chrome: viewer.chrome(Some(&q.project)),
        id: first.commit_id.clone(),
        short: first.commit_id.get(..12).unwrap_or(&first.commit_id).to_owned(),
        subject: clip(&first.subject, 300),
        committed: When::of(first.committed_at.as_ref()),
        files: first.files.iter().take(200).map(|f| clip(f, 300)).collect(),
        links,
    };
    Ok(render::page(&page))
}
