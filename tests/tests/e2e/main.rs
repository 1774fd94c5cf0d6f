//! End-to-end tests: each starts the real `baton-server` binary on an ephemeral port, on
//! SQLite and on Postgres, and talks gRPC to it.

#![allow(clippy::unwrap_used, clippy::expect_used)]
// test code: a failure should panic loudly
// The pedantic lints that do not fit test code, each with its reason: a helper that fails
// panics, as the test must; counts and sizes here are small and known, so casts between
// integer widths are plain; a scenario names its clients `a`, `b`, `c`; an import is placed
// beside the step that needs it; and a scenario reads as one story, step after step (the
// helpers it calls are held to 80 lines like all code).
#![allow(
    clippy::missing_panics_doc,
    clippy::cast_possible_wrap,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::many_single_char_names,
    clippy::items_after_statements,
    clippy::too_many_lines
)]

mod access;
mod archive;
mod attacks;
mod bad_input;
mod batching;
mod brief;
mod checkpoints;
mod client;
mod commits;
mod concurrency;
mod crash;
mod durability;
mod faults;
mod fuzz;
mod history;
mod import_attacks;
mod instances;
mod items;
mod limits;
mod malformed;
mod mcp;
mod memory;
mod metrics;
mod newcomer;
mod paging;
mod powerloss;
mod protocol;
mod purge;
mod reservations;
mod reserve_hooks;
mod retention;
mod search;
mod search_attacks;
mod sessions;
mod sqlite_files;
mod threads;
mod tls;
mod watch;
mod web;
mod why;
mod writes;

use baton_proto::v1::{
    AgentKind, ConflictPolicy, Event, GetBriefRequest, ListEventsRequest, ListMemoryRequest, MemoryEntry,
    MemoryItem, MemoryOp, PutMemoryRequest, PutMemoryResponse, Session, StartSessionRequest, WriteOptions,
};
use baton_tests::Clients;
use tonic::{Code, Status};

/// A project key no other test uses.
pub fn project() -> String {
    format!("github.com/baton-tests/{}", uuid::Uuid::new_v4().simple())
}

pub fn req_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Write options with a fresh request id.
pub fn write() -> Option<WriteOptions> {
    Some(WriteOptions {
        request_id: req_id(),
        host: "test-host".into(),
        agent: AgentKind::Custom as i32,
        ..Default::default()
    })
}

/// Write options based on a revision.
pub fn based(base: i64, policy: ConflictPolicy) -> Option<WriteOptions> {
    let mut w = write();
    if let Some(w) = w.as_mut() {
        w.base_revision = Some(base);
        w.policy = policy as i32;
    }
    w
}

pub fn code<T: std::fmt::Debug>(r: Result<T, Status>) -> (Code, String) {
    let status = r.expect_err("expected an error");
    (status.code(), status.message().to_owned())
}

/// Starts a session as described.
pub async fn start(c: &mut Clients, request: StartSessionRequest) -> Session {
    c.sessions.start_session(request).await.unwrap().into_inner().session.unwrap()
}

pub async fn start_session(c: &mut Clients, project: &str) -> Session {
    start(
        c,
        StartSessionRequest {
            project: project.into(),
            agent: AgentKind::ClaudeCode as i32,
            agent_session_id: "agent-conv-1".into(),
            host: "laptop".into(),
            user: "dev".into(),
            cwd: "/src/app".into(),
            branch: "main".into(),
            goal: "ship the hub".into(),
            write: write(),
            ..Default::default()
        },
    )
    .await
}

/// A session as stored.
pub async fn stored_session(c: &Clients, id: &str) -> Session {
    let mut c = c.clone();
    let request = baton_proto::v1::GetSessionRequest { session_id: id.into() };
    c.sessions.get_session(request).await.unwrap().into_inner().session.unwrap()
}

/// The session reports itself idle.
pub async fn go_idle(c: &mut Clients, id: &str) {
    let request = baton_proto::v1::HeartbeatRequest {
        session_id: id.into(),
        status: baton_proto::v1::SessionStatus::Idle as i32,
        ..Default::default()
    };
    c.sessions.heartbeat(request).await.unwrap();
}

/// The session ends crashed.
pub async fn end_crashed(c: &mut Clients, id: &str) {
    let request = baton_proto::v1::EndSessionRequest {
        session_id: id.into(),
        status: baton_proto::v1::SessionStatus::Crashed as i32,
        write: write(),
        ..Default::default()
    };
    c.sessions.end_session(request).await.unwrap();
}

/// Upserts a project-wide note.
pub fn note_request(project: &str, key: &str, content: &str, w: Option<WriteOptions>) -> PutMemoryRequest {
    PutMemoryRequest {
        project: project.into(),
        category: "note".into(),
        key: key.into(),
        op: MemoryOp::Upsert as i32,
        items: vec![MemoryItem { content: content.into(), rationale: String::new() }],
        write: w,
        ..Default::default()
    }
}

pub async fn put_note(
    c: &mut Clients,
    project: &str,
    key: &str,
    content: &str,
    w: Option<WriteOptions>,
) -> Result<PutMemoryResponse, Status> {
    c.memory.put_memory(note_request(project, key, content, w)).await.map(tonic::Response::into_inner)
}

/// A project's sessions, newest first (the first page).
pub async fn sessions_of(mut c: Clients, project: &str) -> Vec<Session> {
    c.sessions
        .list_sessions(baton_proto::v1::ListSessionsRequest { project: project.into(), ..Default::default() })
        .await
        .unwrap()
        .into_inner()
        .sessions
}

/// Every event of a project, in order.
pub async fn all_events(c: &mut Clients, project: &str) -> Vec<Event> {
    events_after(c, project, 0).await
}

/// Every event of a project after revision `from`, in order.
pub async fn events_after(c: &mut Clients, project: &str, from: i64) -> Vec<Event> {
    let mut out = Vec::new();
    loop {
        let after = out.last().map_or(from, |e: &Event| e.revision);
        let page = c
            .events
            .list_events(ListEventsRequest {
                project: project.into(),
                after_revision: after,
                limit: 1000,
                kinds: vec![],
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        if page.events.is_empty() {
            return out;
        }
        out.extend(page.events);
    }
}

/// Every entry a memory list names, following its pages to the end.
pub async fn all_memory(c: &mut Clients, request: ListMemoryRequest) -> Vec<MemoryEntry> {
    let mut out = Vec::new();
    let mut page_token = String::new();
    loop {
        let page = c
            .memory
            .list_memory(ListMemoryRequest { page_size: 1000, page_token, ..request.clone() })
            .await
            .unwrap()
            .into_inner();
        out.extend(page.entries);
        if page.next_page_token.is_empty() {
            return out;
        }
        page_token = page.next_page_token;
    }
}

/// The notes a log leaves (key → content), its events replayed in order.
pub fn replay_notes(events: &[Event]) -> std::collections::HashMap<String, String> {
    let mut notes = std::collections::HashMap::new();
    for e in events {
        if let Some(baton_proto::v1::event::Value::Memory(m)) = &e.value
            && m.category == "note"
            && let Some(entry) = m.entries.first()
        {
            notes.insert(m.key.clone(), entry.content.clone());
        }
    }
    notes
}

/// Revisions are 1..=n, each with exactly one event.
pub fn assert_gapless(events: &[Event]) {
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e.revision, i as i64 + 1, "event {i} has revision {}", e.revision);
    }
}

/// The text of the project's brief on `branch` ("" = none).
pub async fn brief_text(c: &mut Clients, p: &str, branch: &str) -> String {
    c.brief
        .get_brief(GetBriefRequest { project: p.into(), branch: branch.into(), ..Default::default() })
        .await
        .unwrap()
        .into_inner()
        .brief
        .unwrap()
        .text
}

/// Upserts a note scoped to `branch`.
pub async fn put_branch_note(c: &mut Clients, p: &str, branch: &str, key: &str, text: &str) {
    c.memory
        .put_memory(PutMemoryRequest {
            project: p.into(),
            category: "note".into(),
            branch: branch.into(),
            key: key.into(),
            op: MemoryOp::Upsert as i32,
            items: vec![MemoryItem { content: text.into(), ..Default::default() }],
            write: write(),
        })
        .await
        .unwrap();
}
