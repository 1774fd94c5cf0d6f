//! Project memory: goal, constraints, open loops, recent changes, decisions, notes, each
//! entry with who wrote it and when; edited and added with the API's rules. An edit carries
//! the revision it was made from and is written with the reject policy: if someone changed
//! the record meanwhile, the page shows the conflict (their value and yours) and overwrites
//! only when asked to.

use std::collections::BTreeMap;

use axum::Form;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use baton_proto::v1::memory_service_server::MemoryService;
use baton_proto::v1::{
    ConflictPolicy, ListMemoryRequest, MemoryEntry, MemoryItem, MemoryOp, PutMemoryRequest, WriteOptions,
};
use http::{HeaderMap, StatusCode};

use crate::store::Store;
use crate::web::Web;
use crate::web::render::{self, Chrome, WebError, When, clip, href, next_link};
use crate::web::signin::Viewer;
use crate::web::view::actor_line;

/// The categories in the order the page shows them, with their titles and whether they are
/// a current-state set (edited whole), a history (appended) or keyed notes.
const SECTIONS: [(&str, &str, Kind); 8] = [
    ("goal", "Goal", Kind::Set),
    ("constraint", "Constraints", Kind::Set),
    ("open_loop", "Open loops", Kind::Set),
    ("recent_change", "Recent changes", Kind::Set),
    ("decision", "Decisions", Kind::History),
    ("note", "Notes", Kind::Note),
    ("session_summary", "Session summaries", Kind::History),
    ("extracted_decision", "Decisions found in transcripts", Kind::History),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Set,
    History,
    Note,
}

pub struct Entry {
    pub content: String,
    pub rationale: String,
    pub by: String,
    pub at: When,
}

/// One record: a set (category and branch), a note (and its key), or a history.
pub struct Record {
    pub category: String,
    pub branch: String,
    pub key: String,
    pub revision: i64,
    pub entries: Vec<Entry>,
    /// The record's text as its edit form starts (a set's items one per line).
    pub text: String,
    /// Whether the whole record is on this page: a record at a page's edge may continue on
    /// the next (or have begun on the one before), and editing part of a set would replace
    /// all of it with that part.
    pub whole: bool,
}

pub struct Section {
    pub category: &'static str,
    pub title: &'static str,
    pub editable: bool,
    pub records: Vec<Record>,
}

#[derive(askama::Template)]
#[template(path = "memory.html")]
struct Page {
    chrome: Chrome,
    project: String,
    sections: Vec<Section>,
    next: String,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub struct MemoryQuery {
    project: String,
    page: String,
}

/// A record's identity: category, branch, key.
type RecordKey = (String, String, String);

fn key_of(e: &MemoryEntry) -> RecordKey {
    (e.category.clone(), e.branch.clone(), e.key.clone())
}

/// The page's entries by record; `continued` and `continues`: whether the page follows
/// another and is followed by one (its first and last records may be cut).
fn sections(entries: &[MemoryEntry], continued: bool, continues: bool) -> Vec<Section> {
    let mut grouped: BTreeMap<RecordKey, Vec<&MemoryEntry>> = BTreeMap::new();
    for e in entries {
        grouped.entry(key_of(e)).or_default().push(e);
    }
    let first = entries.first().map(key_of).filter(|_| continued);
    let last = entries.last().map(key_of).filter(|_| continues);
    SECTIONS
        .iter()
        .map(|(category, title, kind)| Section {
            category,
            title,
            editable: *kind != Kind::History || *category == "decision",
            records: grouped
                .iter()
                .filter(|((c, _, _), _)| c == category)
                .map(|(record, list)| {
                    (record, list, Some(record) != first.as_ref() && Some(record) != last.as_ref())
                })
                .map(|((c, branch, key), list, whole)| Record {
                    whole,
                    category: c.clone(),
                    branch: branch.clone(),
                    key: key.clone(),
                    revision: list.iter().map(|e| e.record_revision).max().unwrap_or(0),
                    text: list.iter().map(|e| e.content.as_str()).collect::<Vec<_>>().join("\n"),
                    entries: list
                        .iter()
                        .map(|e| Entry {
                            content: clip(&e.content, 16 * 1024),
                            rationale: clip(&e.rationale, 4096),
                            by: clip(&actor_line(e.author.as_ref()), 120),
                            at: When::of(e.created_at.as_ref()),
                        })
                        .collect(),
                })
                .collect(),
        })
        .collect()
}

pub async fn page<S: Store>(
    State(web): State<Web<S>>,
    viewer: Viewer,
    Query(q): Query<MemoryQuery>,
) -> Response {
    let request =
        ListMemoryRequest { project: q.project.clone(), page_token: q.page.clone(), ..Default::default() };
    let reply = match MemoryService::list_memory(&web.api, viewer.request(request)).await {
        Ok(reply) => reply.into_inner(),
        Err(e) => return WebError::from(e).into_response(),
    };
    let next = next_link("/memory", &[("project", &q.project)], &reply.next_page_token);
    render::page(&Page {
        chrome: viewer.chrome(Some(&q.project)),
        sections: sections(&reply.entries, !q.page.is_empty(), !reply.next_page_token.is_empty()),
        project: q.project,
        next,
    })
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub struct MemoryForm {
    #[serde(rename = "_csrf")]
    csrf: String,
    project: String,
    category: String,
    branch: String,
    key: String,
    content: String,
    rationale: String,
    /// The record's revision the form was made from (edits); absent for additions.
    base: Option<i64>,
}

#[derive(askama::Template)]
#[template(path = "memory_conflict.html")]
struct ConflictPage {
    chrome: Chrome,
    form: MemoryForm,
    theirs: String,
    current: i64,
    back: String,
    message: String,
}

/// Adds an item (to a set as it is now, or a decision, or a new note) or saves an edit.
pub async fn save<S: Store>(
    State(web): State<Web<S>>,
    viewer: Viewer,
    headers: HeaderMap,
    Form(mut form): Form<MemoryForm>,
) -> Response {
    if let Err(e) = viewer.check_csrf(&headers, Some(&form.csrf)) {
        return e.into_response();
    }
    // Browsers send a form's line breaks as CRLF.
    form.content = form.content.replace("\r\n", "\n");
    let kind = SECTIONS.iter().find(|(c, _, _)| *c == form.category).map(|(_, _, k)| *k);
    let (op, items) = match (kind, form.base) {
        (Some(Kind::Set), Some(_)) => (
            MemoryOp::ReplaceSet,
            form.content
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(|l| MemoryItem { content: l.to_owned(), rationale: String::new() })
                .collect(),
        ),
        (Some(Kind::Set), None) => (
            MemoryOp::AddItem,
            vec![MemoryItem { content: form.content.trim().to_owned(), rationale: String::new() }],
        ),
        (Some(Kind::History), _) => (
            MemoryOp::Append,
            vec![MemoryItem {
                content: form.content.trim().to_owned(),
                rationale: form.rationale.trim().to_owned(),
            }],
        ),
        (Some(Kind::Note), _) => {
            (MemoryOp::Upsert, vec![MemoryItem { content: form.content.clone(), rationale: String::new() }])
        }
        (None, _) => {
            return WebError::BadRequest(format!("category {:?} is not a memory category", form.category))
                .into_response();
        }
    };
    // A new note must not replace one of the same key written meanwhile: its base is "absent".
    let base = match (kind, form.base) {
        (Some(Kind::Note), None) => Some(0),
        (_, base) => base,
    };
    let write = WriteOptions {
        request_id: uuid::Uuid::new_v4().to_string(),
        base_revision: base,
        policy: ConflictPolicy::Reject as i32,
        host: "web".into(),
        ..Default::default()
    };
    let request = PutMemoryRequest {
        project: form.project.clone(),
        category: form.category.clone(),
        branch: form.branch.clone(),
        key: form.key.clone(),
        op: op as i32,
        items,
        write: Some(write),
    };
    let back = href("/memory", &[("project", &form.project)]) + "#" + &form.category;
    match MemoryService::put_memory(&web.api, viewer.request(request)).await {
        Ok(_) => Redirect::to(&back).into_response(),
        Err(status) if status.code() == tonic::Code::Aborted => {
            conflict(&web, &viewer, form, back, status.message()).await
        }
        Err(status) => WebError::from(status).into_response(),
    }
}

/// The record as it is now, beside what the form tried to write.
async fn conflict<S: Store>(
    web: &Web<S>,
    viewer: &Viewer,
    form: MemoryForm,
    back: String,
    message: &str,
) -> Response {
    let request = ListMemoryRequest {
        project: form.project.clone(),
        category: form.category.clone(),
        branch: Some(form.branch.clone()),
        ..Default::default()
    };
    let reply = match MemoryService::list_memory(&web.api, viewer.request(request)).await {
        Ok(reply) => reply.into_inner(),
        Err(e) => return WebError::from(e).into_response(),
    };
    let entries: Vec<&MemoryEntry> = reply.entries.iter().filter(|e| e.key == form.key).collect();
    let page = ConflictPage {
        chrome: viewer.chrome(Some(&form.project)),
        theirs: entries.iter().map(|e| e.content.as_str()).collect::<Vec<_>>().join("\n"),
        current: entries.iter().map(|e| e.record_revision).max().unwrap_or(0),
        back,
        message: message.to_owned(),
        form,
    };
    (StatusCode::CONFLICT, render::page(&page)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(category: &str, content: &str) -> MemoryEntry {
        MemoryEntry { category: category.into(), content: content.into(), ..Default::default() }
    }

    #[test]
    fn records_cut_by_a_page_edge_are_not_offered_for_editing() {
        let page =
            [entry("constraint", "a"), entry("constraint", "b"), entry("goal", "g"), entry("open_loop", "x")];
        let whole = |sections: &[Section], category: &str| {
            sections.iter().find(|s| s.category == category).map(|s| s.records[0].whole)
        };
        let alone = sections(&page, false, false);
        assert_eq!(
            [whole(&alone, "constraint"), whole(&alone, "goal"), whole(&alone, "open_loop")],
            [Some(true); 3]
        );
        let middle = sections(&page, true, true);
        assert_eq!(
            [whole(&middle, "constraint"), whole(&middle, "goal"), whole(&middle, "open_loop")],
            [Some(false), Some(true), Some(false)]
        );
    }
}
