//! Conflicts as the pages show them: which record, what happened, both values.

use baton_proto::v1::event_service_server::EventService;
use baton_proto::v1::{Conflict, ListConflictsRequest, RecordValue, Session, WriteOutcome, record_value};

use super::Web;
use super::render::{WebError, When, clip};
use super::signin::Viewer;
use super::view::actor_line;
use crate::store::Store;

/// Conflicts read for one session's page (pages of the project's log after its start).
const SCAN_PAGES: usize = 5;
const SHOWN: usize = 50;

pub struct Line {
    pub record: String,
    pub outcome: &'static str,
    pub detail: String,
    pub current: String,
    pub written: String,
    pub by: String,
    pub at: When,
}

fn outcome(o: i32) -> &'static str {
    match WriteOutcome::try_from(o).unwrap_or_default() {
        WriteOutcome::Overwritten => "overwritten",
        WriteOutcome::Stale => "stale (not applied)",
        WriteOutcome::Rejected => "rejected",
        WriteOutcome::Applied | WriteOutcome::Unspecified => "conflict",
    }
}

/// A record value in a line of text.
pub fn value_text(v: Option<&RecordValue>) -> String {
    let text = match v.and_then(|v| v.value.as_ref()) {
        None => "(none)".to_owned(),
        Some(record_value::Value::Session(s)) => {
            format!("goal: {} · branch: {} · summary: {}", s.goal, s.branch, s.summary)
        }
        Some(record_value::Value::MemorySet(set)) => {
            set.entries.iter().map(|e| e.content.as_str()).collect::<Vec<_>>().join(" | ")
        }
        Some(record_value::Value::Note(n)) => n.content.clone(),
        Some(record_value::Value::HeadCheckpointId(id)) => format!("head {id}"),
        Some(record_value::Value::SummaryJson(j)) => j.clone(),
    };
    clip(&text, 2000)
}

impl Line {
    pub fn of(c: &Conflict) -> Self {
        let by = actor_line(c.writer.as_ref());
        Self {
            record: clip(&c.record, 200),
            outcome: outcome(c.outcome),
            detail: clip(&c.detail, 500),
            current: value_text(c.current_value.as_ref()),
            written: value_text(c.written_value.as_ref()),
            by: clip(&by, 120),
            at: When::of(c.at.as_ref()),
        }
    }
}

/// The conflicts on a session's records (its fields and its head), newest first.
pub async fn of_session<S: Store>(web: &Web<S>, viewer: &Viewer, s: &Session) -> Result<Vec<Line>, WebError> {
    let prefix = format!("session/{}", s.id);
    let mut after = (s.start_revision - 1).max(0);
    let mut found = Vec::new();
    for _ in 0..SCAN_PAGES {
        let request = ListConflictsRequest {
            project: s.project.clone(),
            after_revision: after,
            limit: 1000,
            ..Default::default()
        };
        let reply = EventService::list_conflicts(&web.api, viewer.request(request)).await?.into_inner();
        found.extend(reply.conflicts.iter().filter(|c| c.record.starts_with(&prefix)).map(Line::of));
        match reply.conflicts.last() {
            Some(last) if !reply.next_page_token.is_empty() => after = last.revision,
            _ => break,
        }
    }
    found.reverse();
    found.truncate(SHOWN);
    Ok(found)
}
