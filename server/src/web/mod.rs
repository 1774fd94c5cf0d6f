//! The web view: pages for people, served by baton-server on the gRPC port (HTTP/1 and
//! HTTP/2; `split` sends gRPC to the services and the rest here). Pages are rendered on the
//! server from askama templates (`server/templates`, checked at compile time), with htmx and
//! its SSE extension (vendored, embedded: `assets`) for the live parts; each page reads
//! through the gRPC services' own handlers on behalf of its signed-in viewer, so access,
//! validation and paging are the API's.
//!
//! Adding a page: a template, a handler in `pages/` and a route below.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};

use crate::api::Api;
use crate::store::Store;

mod assets;
mod checkpoint;
mod conflicts;
pub mod guard;
mod live;
mod pages;
pub mod render;
pub mod signin;
pub mod split;
mod transcript;
mod view;

pub use split::Split;

/// What the web view's handlers share.
#[derive(Clone)]
pub struct Web<S: Store> {
    pub api: Api<S>,
    /// How long a sign-in lasts.
    pub session_ttl: Duration,
    /// Whether the server speaks TLS (the cookie is then `Secure`).
    pub secure: bool,
    pub info: Arc<Info>,
    sessions: signin::Sessions,
}

/// What the admin page says about the server.
#[derive(Debug)]
pub struct Info {
    /// "SQLite" or "Postgres".
    pub backend: &'static str,
    pub retention_interval: Duration,
    pub started: std::time::Instant,
}

impl<S: Store> Web<S> {
    pub fn new(api: Api<S>, session_ttl: Duration, secure: bool, info: Info) -> Self {
        Self { api, session_ttl, secure, info: Arc::new(info), sessions: Arc::default() }
    }
}

/// Longest form a page posts (a memory note with its fields).
const MAX_FORM_BYTES: usize = 1024 * 1024;

/// The web view's routes, behind its guard.
pub fn router<S: Store>(web: Web<S>, hosts: guard::Hosts) -> Router {
    Router::new()
        .route("/", get(pages::overview::page::<S>))
        .route("/overview/live", get(pages::overview::fragment::<S>))
        .route("/signin", get(signin::page::<S>).post(signin::sign_in::<S>))
        .route("/signout", post(signin::sign_out::<S>))
        .route("/sessions", get(pages::sessions::page::<S>))
        .route("/sessions/rows", get(pages::sessions::fragment::<S>))
        .route("/activity", get(pages::activity::page::<S>))
        .route("/reservations", get(pages::reservations::page::<S>))
        .route("/reservations/tables", get(pages::reservations::fragment::<S>))
        .route("/session", get(pages::session::page::<S>))
        .route("/compare", get(pages::compare::page::<S>))
        .route("/commit", get(pages::commit::page::<S>))
        .route("/memory", get(pages::memory::page::<S>).post(pages::memory::save::<S>))
        .route("/brief", get(pages::brief::page::<S>))
        .route("/search", get(pages::search::page::<S>))
        .route("/logs", get(pages::logs::page::<S>))
        .route("/admin", get(pages::admin::page::<S>))
        .route("/admin/tokens", post(pages::admin::create::<S>))
        .route("/admin/revoke", post(pages::admin::revoke::<S>))
        .route("/admin/retention", get(pages::admin::retention::<S>))
        .route("/admin/storage", get(pages::admin::storage::<S>))
        .route("/stream", get(live::stream::<S>))
        .route("/assets/{name}", get(assets::serve))
        .route("/favicon.ico", get(|| async { axum::response::Redirect::permanent("/assets/favicon.svg") }))
        .fallback(not_found)
        .layer(axum::extract::DefaultBodyLimit::max(MAX_FORM_BYTES))
        .with_state(web)
        .layer(axum::middleware::from_fn_with_state(Arc::new(hosts), guard::guard))
}

async fn not_found() -> axum::response::Response {
    axum::response::IntoResponse::into_response(render::WebError::NotFound(
        "there is no page at this address".into(),
    ))
}
