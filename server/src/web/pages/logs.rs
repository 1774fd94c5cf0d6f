//! Agent logs: a project's item logs (the Claude and OpenAI agent SDK adapters' sessions) by
//! key with their last change, and one log's items, paged.

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use baton_proto::v1::item_log_service_server::ItemLogService;
use baton_proto::v1::{ListItemLogsRequest, ReadItemsRequest};

use crate::store::Store;
use crate::web::Web;
use crate::web::render::{self, Chrome, WebError, When, clip, href, next_link, size};
use crate::web::signin::Viewer;

const PAGE: i32 = 100;
/// Item text shown at most.
const MAX_ITEM: usize = 8 * 1024;

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub struct LogsQuery {
    project: String,
    key: String,
    page: String,
}

pub struct LogLine {
    pub key: String,
    pub href: String,
    pub items: i64,
    pub size: String,
    pub changed: When,
    pub by: String,
}

pub struct ItemLine {
    pub seq: i64,
    pub key: String,
    pub content_type: String,
    pub text: String,
    pub at: When,
}

#[derive(askama::Template)]
#[template(path = "logs.html")]
struct Page {
    chrome: Chrome,
    project: String,
    logs: Vec<LogLine>,
    next: String,
}

#[derive(askama::Template)]
#[template(path = "log.html")]
struct LogPage {
    chrome: Chrome,
    project: String,
    key: String,
    summary: String,
    items: Vec<ItemLine>,
    next: String,
    back: String,
}

/// An item's value as text: pretty JSON when it is JSON, else its UTF-8, else its size.
fn text_of(value: &[u8]) -> String {
    if let Ok(json) = serde_json::from_slice::<serde_json::Value>(value) {
        return clip(&serde_json::to_string_pretty(&json).unwrap_or_default(), MAX_ITEM);
    }
    match std::str::from_utf8(value) {
        Ok(text) => clip(text, MAX_ITEM),
        Err(_) => format!("({} of binary data)", size(i64::try_from(value.len()).unwrap_or(i64::MAX))),
    }
}

pub async fn page<S: Store>(
    State(web): State<Web<S>>,
    viewer: Viewer,
    Query(q): Query<LogsQuery>,
) -> Response {
    if !q.key.is_empty() {
        return log(web, viewer, q).await;
    }
    let request = ListItemLogsRequest {
        project: q.project.clone(),
        page_size: PAGE,
        page_token: q.page.clone(),
        ..Default::default()
    };
    let reply = match ItemLogService::list_item_logs(&web.api, viewer.request(request)).await {
        Ok(reply) => reply.into_inner(),
        Err(e) => return WebError::from(e).into_response(),
    };
    let logs = reply
        .logs
        .iter()
        .map(|l| LogLine {
            key: clip(&l.key, 200),
            href: href("/logs", &[("project", &q.project), ("key", &l.key)]),
            items: l.items,
            size: size(l.bytes),
            changed: When::of(l.updated_at.as_ref()),
            by: l.author.as_ref().map_or_else(String::new, |a| clip(&a.token, 80)),
        })
        .collect();
    let next = next_link("/logs", &[("project", &q.project)], &reply.next_page_token);
    render::page(&Page { chrome: viewer.chrome(Some(&q.project)), project: q.project, logs, next })
}

async fn log<S: Store>(web: Web<S>, viewer: Viewer, q: LogsQuery) -> Response {
    let request = ReadItemsRequest {
        project: q.project.clone(),
        key: q.key.clone(),
        page_size: PAGE,
        page_token: q.page.clone(),
        ..Default::default()
    };
    let reply = match ItemLogService::read_items(&web.api, viewer.request(request)).await {
        Ok(reply) => reply.into_inner(),
        Err(e) => return WebError::from(e).into_response(),
    };
    let Some(found) = reply.log else {
        return WebError::NotFound(format!("no agent log {:?} in this project", q.key)).into_response();
    };
    let items = reply
        .items
        .iter()
        .map(|i| ItemLine {
            seq: i.seq,
            key: clip(&i.key, 200),
            content_type: clip(&i.content_type, 100),
            text: text_of(&i.value),
            at: When::of(i.created_at.as_ref()),
        })
        .collect();
    let next = next_link("/logs", &[("project", &q.project), ("key", &q.key)], &reply.next_page_token);
    render::page(&LogPage {
        chrome: viewer.chrome(Some(&q.project)),
        summary: text_of(found.summary_json.as_bytes()),
        back: href("/logs", &[("project", &q.project)]),
        project: q.project,
        key: q.key,
        items,
        next,
    })
}
