//! A project's reservations: who holds which paths and tasks, since when, until when and
//! why, and who waits for them in what order; kept live (the tables are fetched again when
//! the project's stream reports a reservation change).

use axum::extract::{Query, State};
use axum::response::Response;
use baton_proto::v1::reservation_service_server::ReservationService;
use baton_proto::v1::{ListReservationsRequest, Reservation, ReservationEnforcement, ReservationStatus};

use crate::store::Store;
use crate::web::Web;
use crate::web::render::{self, Chrome, WebError, When, clip, href, next_link};
use crate::web::signin::Viewer;
use crate::web::view::{agent_label, session_href, short};

const PAGE: i32 = 200;

#[derive(Debug, Default, Clone, serde::Deserialize)]
#[serde(default)]
pub struct Which {
    project: String,
    page: String,
}

/// A reservation as the page shows it.
pub struct Row {
    what: String,
    task: bool,
    branch: String,
    session: String,
    session_href: String,
    agent: String,
    user: String,
    host: String,
    since: When,
    until: When,
    reason: String,
}

impl Row {
    fn of(r: &Reservation) -> Self {
        let h = r.holder.clone().unwrap_or_default();
        let waiting = r.status == ReservationStatus::Waiting as i32;
        Self {
            what: clip(if r.path.is_empty() { &r.task } else { &r.path }, 200),
            task: r.path.is_empty(),
            branch: clip(&r.branch, 80),
            session: short(&r.session_id).to_owned(),
            session_href: session_href(&r.session_id),
            agent: agent_label(h.agent).to_owned(),
            user: clip(&h.user, 80),
            host: clip(&h.host, 80),
            since: When::of(if waiting { r.created_at.as_ref() } else { r.granted_at.as_ref() }),
            until: When::of(r.expires_at.as_ref()),
            reason: clip(&r.reason, 300),
        }
    }
}

struct Found {
    held: Vec<Row>,
    waiting: Vec<Row>,
    settings: String,
    next: String,
    as_of: i64,
}

async fn found<S: Store>(web: &Web<S>, viewer: &Viewer, q: &Which) -> Result<Found, WebError> {
    let request = ListReservationsRequest {
        project: q.project.clone(),
        page_size: PAGE,
        page_token: q.page.clone(),
        ..Default::default()
    };
    let reply = ReservationService::list_reservations(&web.api, viewer.request(request)).await?.into_inner();
    let (held, waiting): (Vec<&Reservation>, Vec<&Reservation>) =
        reply.reservations.iter().partition(|r| r.status == ReservationStatus::Held as i32);
    let s = reply.settings.unwrap_or_default();
    let enforcement = match ReservationEnforcement::try_from(s.enforcement).unwrap_or_default() {
        ReservationEnforcement::Deny => "refuse",
        ReservationEnforcement::Off => "do not check",
        _ => "warn about",
    };
    Ok(Found {
        held: held.into_iter().map(Row::of).collect(),
        waiting: waiting.into_iter().map(Row::of).collect(),
        settings: format!(
            "A reservation lives {} s after its holder's last renewal; the agents' hooks {enforcement} edits of \
             paths another session holds; auto-reservations are {}; at most {} live reservations.",
            s.ttl_seconds,
            if s.auto_reserve { "on" } else { "off" },
            s.max_live
        ),
        next: next_link("/reservations", &[("project", &q.project)], &reply.next_page_token),
        as_of: reply.as_of_revision,
    })
}

const EMPTY: &str = "Nobody holds anything. An agent reserves a path with its reserve tool (baton mcp) or \
    `baton reserve PATH` in its shell; the holder's name, host and reason then show here, and other agents' hooks \
    warn about (or refuse) edits of it.";

#[derive(askama::Template)]
#[template(path = "reservations.html")]
struct Page {
    chrome: Chrome,
    project: String,
    tables: Tables,
    settings: String,
    next: String,
    stream: String,
    tables_href: String,
}

#[derive(askama::Template)]
#[template(path = "reservation_tables.html")]
struct Tables {
    held: Vec<Row>,
    waiting: Vec<Row>,
    empty: &'static str,
}

pub async fn page<S: Store>(State(web): State<Web<S>>, viewer: Viewer, Query(q): Query<Which>) -> Response {
    let found = match found(&web, &viewer, &q).await {
        Ok(found) => found,
        Err(e) => return axum::response::IntoResponse::into_response(e),
    };
    let as_of = found.as_of.to_string();
    render::page(&Page {
        chrome: viewer.chrome(Some(&q.project)),
        project: q.project.clone(),
        tables: Tables { held: found.held, waiting: found.waiting, empty: EMPTY },
        settings: found.settings,
        next: found.next,
        stream: href("/stream", &[("project", &q.project), ("since", &as_of), ("kinds", "reservations")]),
        tables_href: href("/reservations/tables", &[("project", &q.project), ("page", &q.page)]),
    })
}

/// The tables alone, for the live refresh.
pub async fn fragment<S: Store>(
    State(web): State<Web<S>>,
    viewer: Viewer,
    Query(q): Query<Which>,
) -> Response {
    match found(&web, &viewer, &q).await {
        Ok(found) => render::page(&Tables { held: found.held, waiting: found.waiting, empty: EMPTY }),
        Err(e) => axum::response::IntoResponse::into_response(e),
    }
}
