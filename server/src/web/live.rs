//! Live updates over server-sent events, fed by the watch machinery: `GET /stream?project=P`
//! streams a project's changes (every project the viewer may read without `project`), each
//! event named `change`, with its revision as its id and its line of the activity page as its
//! data. A reconnect resumes after the revision in `Last-Event-ID` or in `since` (the htmx
//! extension reopens a stream from its URL without the header; baton.js keeps the URL at the
//! last revision seen). When the viewer is signed out or their token revoked, the stream
//! sends `signed-out` and ends.

use std::convert::Infallible;
use std::pin::Pin;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use baton_proto::v1::event_service_server::EventService;
use baton_proto::v1::{Event, EventKind, ListEventsRequest, WatchCursor, WatchRequest};
use futures::{Stream, StreamExt};
use http::HeaderMap;

use super::Web;
use super::render::WebError;
use super::signin::Viewer;
use super::view::EventLine;
use crate::store::Store;

/// How often a stream checks that its viewer is still signed in.
const RECHECK: Duration = Duration::from_secs(1);

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub struct StreamQuery {
    project: String,
    since: Option<i64>,
    /// `session`: only session events; `reservations`: only reservation events; empty: all.
    kinds: String,
}

fn kinds_of(name: &str) -> Result<Vec<i32>, WebError> {
    match name {
        "" => Ok(vec![]),
        "session" => Ok(vec![
            EventKind::SessionStarted as i32,
            EventKind::SessionUpdated as i32,
            EventKind::SessionStatusChanged as i32,
        ]),
        "reservations" => Ok(vec![EventKind::ReservationsChanged as i32]),
        other => Err(WebError::BadRequest(format!(
            "kinds {other:?} is not known: use session or reservations, or leave it out"
        ))),
    }
}

#[derive(askama::Template)]
#[template(path = "event_line.html")]
pub struct EventFragment {
    pub e: EventLine,
}

/// The revision a project's stream starts after when the page gave none: its head now.
async fn head<S: Store>(web: &Web<S>, viewer: &Viewer, project: &str) -> Result<i64, WebError> {
    let probe = ListEventsRequest {
        project: project.to_owned(),
        after_revision: i64::MAX,
        limit: 1,
        ..Default::default()
    };
    Ok(EventService::list_events(&web.api, viewer.request(probe)).await?.into_inner().as_of_revision)
}

pub async fn stream<S: Store>(
    State(web): State<Web<S>>,
    viewer: Viewer,
    headers: HeaderMap,
    Query(query): Query<StreamQuery>,
) -> Response {
    let resumed =
        headers.get("last-event-id").and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse::<i64>().ok());
    let since = query.since.max(resumed);
    let kinds = match kinds_of(&query.kinds) {
        Ok(kinds) => kinds,
        Err(e) => return e.into_response(),
    };
    let cursors = if query.project.is_empty() {
        vec![]
    } else {
        let after = match since {
            Some(after) => after,
            None => match head(&web, &viewer, &query.project).await {
                Ok(head) => head,
                Err(e) => return e.into_response(),
            },
        };
        vec![WatchCursor { project: query.project.clone(), after_revision: after }]
    };
    let watched = EventService::watch(&web.api, viewer.request(WatchRequest { cursors, kinds })).await;
    let events = match watched {
        Ok(reply) => reply.into_inner(),
        Err(status) => return WebError::from(status).into_response(),
    };
    // Revisions are a project's own: an all-project stream's events carry no id to resume by.
    let ids = !query.project.is_empty();
    Sse::new(sse_events(web, viewer, events, ids)).keep_alive(KeepAlive::default()).into_response()
}

type Watched = Pin<Box<dyn Stream<Item = Result<Event, tonic::Status>> + Send>>;

fn signed_out() -> SseEvent {
    SseEvent::default().event("signed-out").data("signed out")
}

fn sse_events<S: Store>(
    web: Web<S>,
    viewer: Viewer,
    events: Watched,
    ids: bool,
) -> impl Stream<Item = Result<SseEvent, Infallible>> + Send + 'static {
    let mut every = tokio::time::interval(RECHECK);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    futures::stream::unfold(Some((events, every, web, viewer)), move |state| async move {
        let (mut events, mut every, web, viewer) = state?;
        loop {
            tokio::select! {
                next = events.next() => {
                    return match next {
                        Some(Ok(event)) => {
                            let line = askama::Template::render(&EventFragment { e: EventLine::of(&event) }).unwrap_or_default();
                            let mut sse = SseEvent::default().event("change").data(line);
                            if ids {
                                sse = sse.id(event.revision.to_string());
                            }
                            Some((Ok(sse), Some((events, every, web, viewer))))
                        }
                        Some(Err(status)) if status.code() == tonic::Code::Unauthenticated => Some((Ok(signed_out()), None)),
                        Some(Err(status)) => {
                            tracing::debug!(error = %status.message(), "web: a live stream ended");
                            None
                        }
                        None => None,
                    };
                }
                _ = every.tick() => {
                    if !viewer.still_signed_in(&web).await {
                        return Some((Ok(signed_out()), None));
                    }
                }
            }
        }
    })
}
