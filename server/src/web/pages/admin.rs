//! Administration, for admin tokens (and an open hub): tokens (create, scope, revoke, last
//! used), retention settings and what the next run would remove, the server's health.

use axum::Form;
use axum::extract::State;
use axum::response::{IntoResponse, Redirect, Response};
use baton_proto::v1::admin_service_server::AdminService;
use baton_proto::v1::{
    CreateTokenRequest, GetStatsRequest, ListTokensRequest, PruneRequest, RevokeTokenRequest,
};
use http::HeaderMap;

use crate::core::access::Need;
use crate::store::Store;
use crate::web::Web;
use crate::web::render::{self, Chrome, WebError, When, clip, size};
use crate::web::signin::Viewer;

pub struct TokenLine {
    pub name: String,
    pub role: String,
    pub project: String,
    pub created: When,
    pub used: When,
    pub revoked: Option<When>,
}

pub struct Health {
    pub version: &'static str,
    pub backend: &'static str,
    pub up: String,
    pub projects: usize,
    pub sessions: Vec<(String, i64)>,
}

#[derive(askama::Template)]
#[template(path = "admin.html")]
struct Page {
    chrome: Chrome,
    tokens: Vec<TokenLine>,
    keep_days: u32,
    keep_ancestors: usize,
    item_log_days: u32,
    interval: String,
    health: Health,
    /// A token just created: its name and secret, shown once.
    created: Option<(String, String)>,
}

fn admin_only(viewer: &Viewer) -> Result<(), WebError> {
    viewer.who.allow(Need::Admin).map_err(WebError::from)
}

async fn tokens<S: Store>(web: &Web<S>, viewer: &Viewer) -> Result<Vec<TokenLine>, WebError> {
    let reply = AdminService::list_tokens(&web.api, viewer.request(ListTokensRequest {})).await?.into_inner();
    Ok(reply
        .tokens
        .iter()
        .map(|t| TokenLine {
            name: clip(&t.name, 100),
            role: t.role.clone(),
            project: if t.project.is_empty() { "every project".into() } else { clip(&t.project, 200) },
            created: When::of(t.created_at.as_ref()),
            used: When::of(t.last_used_at.as_ref()),
            revoked: t.revoked_at.as_ref().map(|at| When::of(Some(at))),
        })
        .collect())
}

/// What every page load can afford: no counting of checkpoints or events (`storage` does).
async fn health<S: Store>(web: &Web<S>, viewer: &Viewer) -> Result<Health, WebError> {
    let request = GetStatsRequest { sessions_only: true, ..Default::default() };
    let stats = AdminService::get_stats(&web.api, viewer.request(request)).await?.into_inner();
    let mut sessions = std::collections::BTreeMap::<String, i64>::new();
    for p in &stats.projects {
        for (status, n) in &p.sessions {
            *sessions.entry(status.clone()).or_default() += n;
        }
    }
    let up = web.info.started.elapsed();
    Ok(Health {
        version: env!("CARGO_PKG_VERSION"),
        backend: web.info.backend,
        up: humantime::format_duration(std::time::Duration::from_secs(up.as_secs())).to_string(),
        projects: stats.projects.len(),
        sessions: sessions.into_iter().collect(),
    })
}

async fn render_page<S: Store>(
    web: &Web<S>,
    viewer: &Viewer,
    created: Option<(String, String)>,
) -> Result<Response, WebError> {
    admin_only(viewer)?;
    let policy = &web.api.limits.retention;
    let page = Page {
        chrome: viewer.chrome(None),
        tokens: tokens(web, viewer).await?,
        keep_days: policy.keep_days,
        keep_ancestors: policy.keep_ancestors,
        item_log_days: policy.item_log_days,
        interval: if web.info.retention_interval.is_zero() {
            "never (baton-server prune runs it by hand)".into()
        } else {
            format!("every {}", humantime::format_duration(web.info.retention_interval))
        },
        health: health(web, viewer).await?,
        created,
    };
    Ok(render::page(&page))
}

pub async fn page<S: Store>(State(web): State<Web<S>>, viewer: Viewer) -> Response {
    render_page(&web, &viewer, None).await.unwrap_or_else(IntoResponse::into_response)
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub struct TokenForm {
    #[serde(rename = "_csrf")]
    csrf: String,
    name: String,
    role: String,
    project: String,
}

/// Creates a token; the answer shows its secret once (never in a URL, never logged).
pub async fn create<S: Store>(
    State(web): State<Web<S>>,
    viewer: Viewer,
    headers: HeaderMap,
    Form(form): Form<TokenForm>,
) -> Response {
    let made = async {
        viewer.check_csrf(&headers, Some(&form.csrf))?;
        admin_only(&viewer)?;
        let request = CreateTokenRequest {
            name: form.name.trim().to_owned(),
            role: form.role.clone(),
            project: form.project.trim().to_owned(),
        };
        let reply = AdminService::create_token(&web.api, viewer.request(request)).await?.into_inner();
        let name = reply.token.map(|t| t.name).unwrap_or_default();
        render_page(&web, &viewer, Some((name, reply.secret))).await
    };
    made.await.unwrap_or_else(IntoResponse::into_response)
}

pub async fn revoke<S: Store>(
    State(web): State<Web<S>>,
    viewer: Viewer,
    headers: HeaderMap,
    Form(form): Form<TokenForm>,
) -> Response {
    let done = async {
        viewer.check_csrf(&headers, Some(&form.csrf))?;
        admin_only(&viewer)?;
        AdminService::revoke_token(&web.api, viewer.request(RevokeTokenRequest { name: form.name.clone() }))
            .await?;
        Ok::<_, WebError>(Redirect::to("/admin").into_response())
    };
    done.await.unwrap_or_else(IntoResponse::into_response)
}

pub struct Removal {
    pub project: String,
    pub checkpoints: usize,
    pub item_logs: usize,
    pub chunks: i64,
}

#[derive(askama::Template)]
#[template(path = "retention.html")]
struct Preview {
    chrome: Chrome,
    removals: Vec<Removal>,
}

/// What the next retention run would remove (a dry run: nothing changes).
pub async fn retention<S: Store>(State(web): State<Web<S>>, viewer: Viewer) -> Response {
    let shown = async {
        admin_only(&viewer)?;
        let request = PruneRequest { dry_run: true, ..Default::default() };
        let reply = AdminService::prune(&web.api, viewer.request(request)).await?.into_inner();
        let removals = reply
            .projects
            .iter()
            .map(|p| Removal {
                project: clip(&p.project, 200),
                checkpoints: p.removed_checkpoints.len(),
                item_logs: p.removed_item_logs.len(),
                chunks: p.removed_chunks,
            })
            .collect();
        Ok::<_, WebError>(render::page(&Preview { chrome: viewer.chrome(None), removals }))
    };
    shown.await.unwrap_or_else(IntoResponse::into_response)
}

pub struct ProjectStorage {
    pub project: String,
    pub sessions: i64,
    pub checkpoints: i64,
    pub stored: String,
    pub memory: i64,
    pub logs: i64,
    pub events: i64,
}

#[derive(askama::Template)]
#[template(path = "storage.html")]
struct Storage {
    chrome: Chrome,
    projects: Vec<ProjectStorage>,
}

/// What each project holds, counted (it reads every project's rows: a page of its own).
pub async fn storage<S: Store>(State(web): State<Web<S>>, viewer: Viewer) -> Response {
    let shown = async {
        admin_only(&viewer)?;
        let stats =
            AdminService::get_stats(&web.api, viewer.request(GetStatsRequest::default())).await?.into_inner();
        let projects = stats
            .projects
            .iter()
            .map(|p| ProjectStorage {
                project: clip(&p.project, 200),
                sessions: p.sessions.values().sum(),
                checkpoints: p.checkpoints,
                stored: size(p.checkpoint_bytes + p.chunk_bytes + p.item_bytes),
                memory: p.memory_entries,
                logs: p.item_logs,
                events: p.events,
            })
            .collect();
        Ok::<_, WebError>(render::page(&Storage { chrome: viewer.chrome(None), projects }))
    };
    shown.await.unwrap_or_else(IntoResponse::into_response)
}
