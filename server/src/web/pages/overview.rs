//! The first page: the projects the viewer can see, the sessions working now and those that
//! stopped recently, and the latest changes; kept live by an all-project stream.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use baton_proto::v1::admin_service_server::AdminService;
use baton_proto::v1::event_service_server::EventService;
use baton_proto::v1::session_service_server::SessionService;
use baton_proto::v1::{GetStatsRequest, ListEventsRequest, ListSessionsRequest, ProjectStats, SessionStatus};

use crate::store::Store;
use crate::web::Web;
use crate::web::render::{self, Chrome, WebError, href};
use crate::web::signin::Viewer;
use crate::web::view::{EventLine, SessionRow};

/// Projects whose sessions and changes the overview gathers (the most changed first).
const BUSIEST: usize = 10;
const ROWS: usize = 20;

pub struct ProjectLine {
    pub key: String,
    pub sessions_href: String,
    pub activity_href: String,
    pub active: i64,
    pub sessions: i64,
    pub revision: i64,
}

impl ProjectLine {
    fn of(p: &ProjectStats) -> Self {
        Self {
            key: p.project.clone(),
            sessions_href: href("/sessions", &[("project", &p.project)]),
            activity_href: href("/activity", &[("project", &p.project)]),
            active: p.sessions.get("active").copied().unwrap_or(0),
            sessions: p.sessions.values().sum(),
            revision: p.head_revision,
        }
    }
}

#[derive(askama::Template)]
#[template(path = "overview_live.html")]
struct Live {
    working: Vec<SessionRow>,
    stopped: Vec<SessionRow>,
    events: Vec<EventLine>,
    empty: String,
    show_project: bool,
}

#[derive(askama::Template)]
#[template(path = "overview.html")]
struct Page {
    chrome: Chrome,
    projects: Vec<ProjectLine>,
    live: Live,
}

async fn projects<S: Store>(web: &Web<S>, viewer: &Viewer) -> Result<Vec<ProjectStats>, WebError> {
    let request = GetStatsRequest { sessions_only: true, ..Default::default() };
    let reply = AdminService::get_stats(&web.api, viewer.request(request)).await?;
    let mut projects = reply.into_inner().projects;
    // A scoped token's project is listed even before anything was written to it.
    if let Some(scope) = viewer.who.scope_project()
        && projects.is_empty()
    {
        projects.push(ProjectStats { project: scope.to_owned(), ..Default::default() });
    }
    projects.sort_by(|a, b| b.head_revision.cmp(&a.head_revision).then_with(|| a.project.cmp(&b.project)));
    Ok(projects)
}

async fn sessions<S: Store>(
    web: &Web<S>,
    viewer: &Viewer,
    projects: &[ProjectStats],
    statuses: &[SessionStatus],
) -> Result<Vec<SessionRow>, WebError> {
    let mut found = Vec::new();
    for p in projects.iter().take(BUSIEST) {
        let request = ListSessionsRequest {
            project: p.project.clone(),
            statuses: statuses.iter().map(|s| *s as i32).collect(),
            page_size: i32::try_from(ROWS).unwrap_or(20),
            ..Default::default()
        };
        found.extend(
            SessionService::list_sessions(&web.api, viewer.request(request)).await?.into_inner().sessions,
        );
    }
    found.sort_by(|a, b| {
        let seen = |s: &baton_proto::v1::Session| s.last_seen_at.as_ref().map_or(0, crate::core::time::us);
        seen(b).cmp(&seen(a))
    });
    Ok(found.iter().take(ROWS).map(SessionRow::of).collect())
}

async fn latest<S: Store>(
    web: &Web<S>,
    viewer: &Viewer,
    projects: &[ProjectStats],
) -> Result<Vec<EventLine>, WebError> {
    let mut found = Vec::new();
    for p in projects.iter().take(BUSIEST) {
        let after = (p.head_revision - 5).max(p.oldest_kept_revision.saturating_sub(1)).max(0);
        let request = ListEventsRequest {
            project: p.project.clone(),
            after_revision: after,
            limit: 5,
            ..Default::default()
        };
        found.extend(EventService::list_events(&web.api, viewer.request(request)).await?.into_inner().events);
    }
    found.sort_by(|a, b| {
        let at = |e: &baton_proto::v1::Event| e.at.as_ref().map_or(0, crate::core::time::us);
        at(b).cmp(&at(a))
    });
    Ok(found.iter().take(ROWS).map(EventLine::of).collect())
}

async fn live<S: Store>(web: &Web<S>, viewer: &Viewer, projects: &[ProjectStats]) -> Result<Live, WebError> {
    Ok(Live {
        working: sessions(web, viewer, projects, &[SessionStatus::Active, SessionStatus::Initializing]).await?,
        stopped: sessions(web, viewer, projects, &[SessionStatus::Idle, SessionStatus::Completed, SessionStatus::Crashed])
            .await?,
        events: latest(web, viewer, projects).await?,
        empty: "No agent is working now. Sessions appear here while an agent with Baton's hooks runs (baton init \
                installs them)."
            .into(),
        show_project: true,
    })
}

pub async fn page<S: Store>(State(web): State<Web<S>>, viewer: Viewer) -> Response {
    let built = async {
        let projects = projects(&web, &viewer).await?;
        let live = live(&web, &viewer, &projects).await?;
        Ok::<_, WebError>(Page {
            chrome: viewer.chrome(None),
            projects: projects.iter().map(ProjectLine::of).collect(),
            live,
        })
    };
    match built.await {
        Ok(page) => render::page(&page),
        Err(e) => e.into_response(),
    }
}

/// The live sections alone, fetched again as changes arrive.
pub async fn fragment<S: Store>(State(web): State<Web<S>>, viewer: Viewer) -> Response {
    let built = async {
        let projects = projects(&web, &viewer).await?;
        live(&web, &viewer, &projects).await
    };
    match built.await {
        Ok(live) => render::page(&live),
        Err(e) => e.into_response(),
    }
}
