//! A project's sessions, filtered by status, agent, host, user and branch, paged, with their
//! status kept live: the table's body is fetched again when the project's stream reports a
//! session change.

use axum::extract::{Query, State};
use axum::response::Response;
use baton_proto::v1::session_service_server::SessionService;
use baton_proto::v1::{AgentKind, ListSessionsRequest, SessionStatus};

use crate::store::Store;
use crate::web::Web;
use crate::web::render::{self, Chrome, WebError, href, next_link};
use crate::web::signin::Viewer;
use crate::web::view::{SessionRow, agent_label, status_label};

const PAGE: i32 = 50;

const STATUSES: [SessionStatus; 6] = [
    SessionStatus::Active,
    SessionStatus::Idle,
    SessionStatus::Initializing,
    SessionStatus::Completed,
    SessionStatus::Crashed,
    SessionStatus::Resumed,
];
const AGENTS: [AgentKind; 5] =
    [AgentKind::ClaudeCode, AgentKind::Codex, AgentKind::Gemini, AgentKind::Cursor, AgentKind::Custom];

#[derive(Debug, Default, Clone, serde::Deserialize)]
#[serde(default)]
pub struct Filters {
    project: String,
    status: String,
    agent: String,
    host: String,
    user: String,
    branch: String,
    page: String,
}

impl Filters {
    fn query(&self) -> Vec<(&'static str, &str)> {
        vec![
            ("project", self.project.as_str()),
            ("status", &self.status),
            ("agent", &self.agent),
            ("host", &self.host),
            ("user", &self.user),
            ("branch", &self.branch),
        ]
    }

    fn request(&self) -> Result<ListSessionsRequest, WebError> {
        let status = if self.status.is_empty() {
            vec![]
        } else {
            let found = STATUSES.iter().find(|s| status_label(**s as i32) == self.status);
            vec![*found.ok_or_else(|| {
                WebError::BadRequest(format!("status {:?} is not a session status", self.status))
            })? as i32]
        };
        let agent = if self.agent.is_empty() {
            0
        } else {
            let found = AGENTS.iter().find(|a| agent_label(**a as i32) == self.agent);
            *found
                .ok_or_else(|| WebError::BadRequest(format!("agent {:?} is not an agent kind", self.agent)))?
                as i32
        };
        Ok(ListSessionsRequest {
            project: self.project.clone(),
            statuses: status,
            agent,
            host: self.host.clone(),
            user: self.user.clone(),
            branch: self.branch.clone(),
            page_size: PAGE,
            page_token: self.page.clone(),
            since: None,
        })
    }

    fn filtered(&self) -> bool {
        self.query().iter().skip(1).any(|(_, v)| !v.is_empty())
    }
}

struct Rows {
    rows: Vec<SessionRow>,
    next: String,
    as_of: i64,
}

async fn rows<S: Store>(web: &Web<S>, viewer: &Viewer, filters: &Filters) -> Result<Rows, WebError> {
    let request = filters.request()?;
    let reply = SessionService::list_sessions(&web.api, viewer.request(request)).await?.into_inner();
    let next = next_link("/sessions", &filters.query(), &reply.next_page_token);
    Ok(Rows { rows: reply.sessions.iter().map(SessionRow::of).collect(), next, as_of: reply.as_of_revision })
}

fn empty_text(filters: &Filters) -> String {
    if filters.filtered() {
        "No session matches these filters. Clear them to see every session of the project.".into()
    } else {
        "No sessions yet. A session appears here when an agent with Baton's hooks starts in this project \
         (baton init installs them), or when an orchestrator calls StartSession."
            .into()
    }
}

#[derive(askama::Template)]
#[template(path = "sessions.html")]
struct Page {
    chrome: Chrome,
    project: String,
    filters: Filters,
    statuses: Vec<&'static str>,
    agents: Vec<&'static str>,
    rows: Vec<SessionRow>,
    empty: String,
    caption: String,
    show_project: bool,
    next: String,
    stream: String,
    rows_href: String,
}

pub async fn page<S: Store>(
    State(web): State<Web<S>>,
    viewer: Viewer,
    Query(filters): Query<Filters>,
) -> Response {
    let found = match rows(&web, &viewer, &filters).await {
        Ok(found) => found,
        Err(e) => return axum::response::IntoResponse::into_response(e),
    };
    let as_of = found.as_of.to_string();
    let mut rows_query = filters.query();
    if !filters.page.is_empty() {
        rows_query.push(("page", &filters.page));
    }
    render::page(&Page {
        chrome: viewer.chrome(Some(&filters.project)),
        project: filters.project.clone(),
        statuses: STATUSES.iter().map(|s| status_label(*s as i32)).collect(),
        agents: AGENTS.iter().map(|a| agent_label(*a as i32)).collect(),
        empty: empty_text(&filters),
        caption: format!("Sessions of {}", filters.project),
        show_project: false,
        rows: found.rows,
        next: found.next,
        stream: href("/stream", &[("project", &filters.project), ("since", &as_of), ("kinds", "session")]),
        rows_href: href("/sessions/rows", &rows_query),
        filters,
    })
}

#[derive(askama::Template)]
#[template(path = "session_rows.html")]
struct RowsFragment {
    rows: Vec<SessionRow>,
    empty: String,
    show_project: bool,
}

/// The table's body alone, for the live refresh.
pub async fn fragment<S: Store>(
    State(web): State<Web<S>>,
    viewer: Viewer,
    Query(filters): Query<Filters>,
) -> Response {
    match rows(&web, &viewer, &filters).await {
        Ok(found) => {
            render::page(&RowsFragment { rows: found.rows, empty: empty_text(&filters), show_project: false })
        }
        Err(e) => axum::response::IntoResponse::into_response(e),
    }
}
