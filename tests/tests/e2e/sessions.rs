//! Sessions: start, get, list (filters, pagination), update, heartbeat, end, transitions,
//! idleness and lease expiry.

use std::time::Duration;

use baton_proto::v1::{
    AgentKind, EndSessionRequest, EventKind, GetSessionRequest, HeartbeatRequest, ListSessionsRequest,
    SessionStatus, StartSessionRequest, UpdateSessionRequest,
};
use baton_tests::{Backend, Server, both};
use tonic::Code;

use crate::{all_events, assert_gapless, code, project, start_session, write};

async fn lifecycle(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();

    // A client-made uuid v7 id is kept.
    let id = uuid::Uuid::now_v7().to_string();
    let started = c
        .sessions
        .start_session(StartSessionRequest {
            project: p.clone(),
            session_id: id.clone(),
            agent: AgentKind::Codex as i32,
            host: "desk".into(),
            status: SessionStatus::Initializing as i32,
            write: write(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let s = started.session.unwrap();
    assert_eq!(s.id, id);
    assert_eq!(s.status, SessionStatus::Initializing as i32);
    assert_eq!(started.result.unwrap().revision, 1);

    // Liveness: first activity moves initializing -> active (a status event)...
    let hb = c
        .sessions
        .heartbeat(HeartbeatRequest { session_id: id.clone(), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(hb.status, SessionStatus::Active as i32);
    assert_eq!(hb.revision, 2);
    // ...and a plain heartbeat is not a write: no revision, no event.
    let hb = c
        .sessions
        .heartbeat(HeartbeatRequest { session_id: id.clone(), tool_count: Some(7), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(hb.revision, 0);
    let got =
        c.sessions.get_session(GetSessionRequest { session_id: id.clone() }).await.unwrap().into_inner();
    assert_eq!(got.as_of_revision, 2);
    assert_eq!(got.session.as_ref().unwrap().tool_count, 7);

    // Update the editable fields.
    let up = c
        .sessions
        .update_session(UpdateSessionRequest {
            session_id: id.clone(),
            goal: Some("new goal".into()),
            branch: Some("feature/x".into()),
            metadata: [("ticket".to_owned(), "B-1".to_owned())].into(),
            write: write(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let s = up.session.unwrap();
    assert_eq!((s.goal.as_str(), s.branch.as_str()), ("new goal", "feature/x"));
    assert_eq!(s.metadata["ticket"], "B-1");
    assert_eq!(s.revision, 3);

    // Idle on request, active on the next activity.
    let hb = c
        .sessions
        .heartbeat(HeartbeatRequest {
            session_id: id.clone(),
            status: SessionStatus::Idle as i32,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(hb.status, SessionStatus::Idle as i32);
    let hb = c
        .sessions
        .heartbeat(HeartbeatRequest { session_id: id.clone(), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(hb.status, SessionStatus::Active as i32);

    // End: completed with summary and git head; then fenced.
    let end = c
        .sessions
        .end_session(EndSessionRequest {
            session_id: id.clone(),
            summary: "done".into(),
            git_head: "abc123".into(),
            write: write(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let s = end.session.unwrap();
    assert_eq!(s.status, SessionStatus::Completed as i32);
    assert_eq!((s.summary.as_str(), s.git_head.as_str()), ("done", "abc123"));
    let (c1, msg) = code(
        c.sessions
            .update_session(UpdateSessionRequest {
                session_id: id.clone(),
                goal: Some("x".into()),
                write: write(),
                ..Default::default()
            })
            .await,
    );
    assert_eq!(c1, Code::FailedPrecondition, "{msg}");
    assert!(msg.contains("completed"), "{msg}");
    let (c2, _) =
        code(c.sessions.heartbeat(HeartbeatRequest { session_id: id.clone(), ..Default::default() }).await);
    assert_eq!(c2, Code::FailedPrecondition);
    let (c3, msg) = code(
        c.sessions
            .end_session(EndSessionRequest { session_id: id.clone(), write: write(), ..Default::default() })
            .await,
    );
    assert_eq!(c3, Code::FailedPrecondition, "{msg}");

    let events = all_events(&mut c, &p).await;
    assert_gapless(&events);
    let kinds: Vec<i32> = events.iter().map(|e| e.kind).collect();
    use EventKind::*;
    // The kind filter of ListEvents.
    let status_only = c
        .events
        .list_events(baton_proto::v1::ListEventsRequest {
            project: p.clone(),
            kinds: vec![SessionStatusChanged as i32, SessionUpdated as i32],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status_only.events.iter().map(|e| e.revision).collect::<Vec<_>>(), vec![2, 3, 4, 5, 6]);
    assert_eq!(status_only.as_of_revision, 6);
    assert_eq!(
        kinds,
        [
            SessionStarted,
            SessionStatusChanged,
            SessionUpdated,
            SessionStatusChanged,
            SessionStatusChanged,
            SessionStatusChanged
        ]
        .map(|k| k as i32)
    );
}
both!(lifecycle);

async fn invalid_transitions(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let s = crate::start(
        &mut c,
        StartSessionRequest {
            project: p.clone(),
            agent: AgentKind::Custom as i32,
            status: SessionStatus::Initializing as i32,
            write: write(),
            ..Default::default()
        },
    )
    .await;
    // initializing -> completed is not in the table.
    let (c1, msg) = code(
        c.sessions
            .end_session(EndSessionRequest { session_id: s.id.clone(), write: write(), ..Default::default() })
            .await,
    );
    assert_eq!(c1, Code::FailedPrecondition);
    assert!(msg.contains("cannot go from initializing to completed"), "{msg}");
    // initializing -> idle neither.
    let (c2, _) = code(
        c.sessions
            .heartbeat(HeartbeatRequest {
                session_id: s.id.clone(),
                status: SessionStatus::Idle as i32,
                ..Default::default()
            })
            .await,
    );
    assert_eq!(c2, Code::FailedPrecondition);
    // Nothing was written by the refusals.
    assert_eq!(all_events(&mut c, &p).await.len(), 1);
}
both!(invalid_transitions);

async fn list_filters_and_pages(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let mut ids = Vec::new();
    for i in 0..7 {
        let s = crate::start(
            &mut c,
            StartSessionRequest {
                project: p.clone(),
                agent: if i % 2 == 0 { AgentKind::ClaudeCode as i32 } else { AgentKind::Gemini as i32 },
                host: format!("host-{}", i % 3),
                write: write(),
                ..Default::default()
            },
        )
        .await;
        ids.push(s.id);
    }
    c.sessions
        .end_session(EndSessionRequest { session_id: ids[0].clone(), write: write(), ..Default::default() })
        .await
        .unwrap();
    // Another project's sessions never show.
    start_session(&mut c, &project()).await;

    let list = |req: ListSessionsRequest| {
        let mut c = c.clone();
        async move { c.sessions.list_sessions(req).await.unwrap().into_inner() }
    };
    let all = list(ListSessionsRequest { project: p.clone(), ..Default::default() }).await;
    assert_eq!(all.sessions.len(), 7);
    assert_eq!(all.as_of_revision, 8);
    // Newest first.
    assert_eq!(all.sessions[0].id, ids[6]);

    let claude = list(ListSessionsRequest {
        project: p.clone(),
        agent: AgentKind::ClaudeCode as i32,
        ..Default::default()
    })
    .await;
    assert_eq!(claude.sessions.len(), 4);
    let host0 =
        list(ListSessionsRequest { project: p.clone(), host: "host-0".into(), ..Default::default() }).await;
    assert_eq!(host0.sessions.len(), 3);
    let done = list(ListSessionsRequest {
        project: p.clone(),
        statuses: vec![SessionStatus::Completed as i32],
        ..Default::default()
    })
    .await;
    assert_eq!(done.sessions.iter().map(|s| s.id.clone()).collect::<Vec<_>>(), vec![ids[0].clone()]);

    // Pages of 3 cover everything once, in order.
    let mut seen = Vec::new();
    let mut token = String::new();
    loop {
        let page = list(ListSessionsRequest {
            project: p.clone(),
            page_size: 3,
            page_token: token.clone(),
            ..Default::default()
        })
        .await;
        assert!(page.sessions.len() <= 3);
        seen.extend(page.sessions.into_iter().map(|s| s.id));
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    let mut expected = ids.clone();
    expected.reverse();
    assert_eq!(seen, expected);
}
both!(list_filters_and_pages);

async fn idle_and_lease_expiry(backend: Backend) {
    let server =
        Server::start_with(backend, &["--idle-after", "1s", "--reaper-interval", "100ms"]).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let hooked = start_session(&mut c, &p).await; // no lease: goes idle
    let worker = crate::start(
        &mut c,
        StartSessionRequest {
            project: p.clone(),
            agent: AgentKind::Custom as i32,
            lease_ttl_ms: 600,
            write: write(),
            ..Default::default()
        },
    )
    .await;
    let status = |id: String| {
        let c = c.clone();
        async move { crate::stored_session(&c, &id).await.status }
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (a, b) = (status(hooked.id.clone()).await, status(worker.id.clone()).await);
        if a == SessionStatus::Idle as i32 && b == SessionStatus::Crashed as i32 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "hooked {a}, worker {b}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Exactly once each, with an event; the crashed worker is fenced.
    let events = all_events(&mut c, &p).await;
    assert_gapless(&events);
    let changes: Vec<_> =
        events.iter().filter(|e| e.kind == EventKind::SessionStatusChanged as i32).collect();
    assert_eq!(changes.len(), 2, "{changes:?}");
    let (code_hb, msg) = code(
        c.sessions.heartbeat(HeartbeatRequest { session_id: worker.id.clone(), ..Default::default() }).await,
    );
    assert_eq!(code_hb, Code::FailedPrecondition);
    assert!(msg.contains("crashed"), "{msg}");
    // The idle session comes back on its next activity.
    let hb = c
        .sessions
        .heartbeat(HeartbeatRequest { session_id: hooked.id.clone(), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(hb.status, SessionStatus::Active as i32);
}
both!(idle_and_lease_expiry);
