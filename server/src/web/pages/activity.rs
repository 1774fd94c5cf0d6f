//! A project's change stream: the newest events, paged back by revision, with new ones added
//! at the top as they happen (over the page's live stream).

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use baton_proto::v1::ListEventsRequest;
use baton_proto::v1::event_service_server::EventService;

use crate::store::Store;
use crate::web::Web;
use crate::web::render::{self, Chrome, WebError, href};
use crate::web::signin::Viewer;
use crate::web::view::EventLine;

const PAGE: i64 = 50;

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub struct ActivityQuery {
    project: String,
    /// Events below this revision (an older page); none: the newest.
    before: Option<i64>,
}

#[derive(askama::Template)]
#[template(path = "activity.html")]
struct Page {
    chrome: Chrome,
    project: String,
    events: Vec<EventLine>,
    /// The live stream, on the newest page only.
    stream: String,
    older: String,
    newer: String,
}

pub async fn page<S: Store>(
    State(web): State<Web<S>>,
    viewer: Viewer,
    Query(q): Query<ActivityQuery>,
) -> Response {
    match render_page(&web, &viewer, q).await {
        Ok(page) => page,
        Err(e) => e.into_response(),
    }
}

async fn render_page<S: Store>(
    web: &Web<S>,
    viewer: &Viewer,
    q: ActivityQuery,
) -> Result<Response, WebError> {
    if q.before.is_some_and(|b| b < 1) {
        return Err(WebError::BadRequest("before must be a revision (1 or more)".into()));
    }
    let list = |after: i64, limit: i64| {
        let request = ListEventsRequest {
            project: q.project.clone(),
            after_revision: after,
            limit: i32::try_from(limit).unwrap_or(1),
            ..Default::default()
        };
        EventService::list_events(&web.api, viewer.request(request))
    };
    let head = list(i64::MAX, 1).await?.into_inner().as_of_revision;
    let top = q.before.map_or(head, |b| (b - 1).min(head));
    let after = (top - PAGE).max(0);
    let mut events: Vec<EventLine> = if top == 0 {
        vec![]
    } else {
        list(after, top - after)
            .await?
            .into_inner()
            .events
            .iter()
            .filter(|e| e.revision <= top)
            .map(EventLine::of)
            .collect()
    };
    events.reverse();
    let project = q.project.as_str();
    let oldest = events.last().map_or(0, |e| e.revision);
    let older = if oldest > 1 {
        href("/activity", &[("project", project), ("before", &oldest.to_string())])
    } else {
        String::new()
    };
    let live = q.before.is_none();
    let newer = if live { String::new() } else { href("/activity", &[("project", project)]) };
    let stream = if live {
        href("/stream", &[("project", project), ("since", &head.to_string())])
    } else {
        String::new()
    };
    Ok(render::page(&Page {
        chrome: viewer.chrome(Some(project)),
        project: q.project.clone(),
        events,
        stream,
        older,
        newer,
    }))
}
