//! Bad input: each case answers the right status with a message naming the field (and the
//! limit), and nothing already stored changes.

use baton_proto::v1::{
    CheckpointKind, CheckpointState, CreateCheckpointRequest, GetBriefRequest, GetCheckpointRequest,
    GetSessionRequest, HeartbeatRequest, ListEventsRequest, ListMemoryRequest, ListSessionsRequest,
    MemoryItem, PutMemoryRequest, SessionStatus, StartSessionRequest, UpdateSessionRequest, WatchRequest,
    WriteOptions,
};
use baton_tests::{Backend, Server, both};
use tonic::Code;

use crate::{all_events, project, put_note, start_session, write};

fn check<T: std::fmt::Debug>(
    case: &str,
    r: Result<tonic::Response<T>, tonic::Status>,
    code: Code,
    needles: &[&str],
) {
    let status = match r {
        Ok(ok) => panic!("{case}: expected {code:?}, got {ok:?}"),
        Err(s) => s,
    };
    assert_eq!(status.code(), code, "{case}: {}", status.message());
    for n in needles {
        assert!(status.message().contains(n), "{case}: message {:?} lacks {n:?}", status.message());
    }
}

async fn refused_with_clear_messages(backend: Backend) {
    let server = Server::start_with(backend, &["--max-checkpoint-bytes", "100000"]).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let s = start_session(&mut c, &p).await;
    put_note(&mut c, &p, "keep", "original", write()).await.unwrap();
    let before = all_events(&mut c, &p).await;

    let start = |f: &dyn Fn(&mut StartSessionRequest)| {
        let mut r =
            StartSessionRequest { project: p.clone(), agent: 1, write: write(), ..Default::default() };
        f(&mut r);
        r
    };
    let ss = &mut c.sessions;
    check(
        "empty project",
        ss.start_session(start(&|r| r.project = String::new())).await,
        Code::InvalidArgument,
        &["project"],
    );
    check(
        "malformed id",
        ss.start_session(start(&|r| r.session_id = "nope".into())).await,
        Code::InvalidArgument,
        &["session_id", "nope"],
    );
    let v4 = uuid::Uuid::new_v4().to_string();
    check(
        "v4 id",
        ss.start_session(start(&|r| r.session_id.clone_from(&v4))).await,
        Code::InvalidArgument,
        &["uuid v7"],
    );
    check(
        "no agent",
        ss.start_session(start(&|r| r.agent = 0)).await,
        Code::InvalidArgument,
        &["agent", "required"],
    );
    check(
        "unknown agent",
        ss.start_session(start(&|r| r.agent = 99)).await,
        Code::InvalidArgument,
        &["agent", "99"],
    );
    check(
        "unknown status",
        ss.start_session(start(&|r| r.status = 42)).await,
        Code::InvalidArgument,
        &["status"],
    );
    check(
        "oversized goal",
        ss.start_session(start(&|r| r.goal = "x".repeat(20_000))).await,
        Code::InvalidArgument,
        &["goal", "20000", "16384"],
    );
    check(
        "newline in host",
        ss.start_session(start(&|r| r.host = "a\nb".into())).await,
        Code::InvalidArgument,
        &["host"],
    );
    check(
        "negative lease",
        ss.start_session(start(&|r| r.lease_ttl_ms = -1)).await,
        Code::InvalidArgument,
        &["lease_ttl_ms"],
    );
    check(
        "unknown policy",
        ss.start_session(start(&|r| r.write = Some(WriteOptions { policy: 7, ..Default::default() }))).await,
        Code::InvalidArgument,
        &["write.policy"],
    );
    check(
        "half a queue clock",
        ss.start_session(start(&|r| {
            r.write = Some(WriteOptions {
                written_at: Some(prost_types::Timestamp::default()),
                ..Default::default()
            });
        }))
        .await,
        Code::InvalidArgument,
        &["written_at", "client_now"],
    );
    let dup = s.id.clone();
    check(
        "existing id",
        ss.start_session(start(&|r| r.session_id.clone_from(&dup))).await,
        Code::AlreadyExists,
        &["session_id"],
    );
    let unknown = uuid::Uuid::now_v7().to_string();
    check(
        "unknown session",
        ss.get_session(GetSessionRequest { session_id: unknown.clone() }).await,
        Code::NotFound,
        &["session_id"],
    );
    check(
        "malformed session",
        ss.get_session(GetSessionRequest { session_id: "x".into() }).await,
        Code::InvalidArgument,
        &["session_id"],
    );
    check(
        "update unknown",
        ss.update_session(UpdateSessionRequest {
            session_id: unknown.clone(),
            goal: Some("g".into()),
            write: write(),
            ..Default::default()
        })
        .await,
        Code::NotFound,
        &["session_id"],
    );
    check(
        "heartbeat completed",
        ss.heartbeat(HeartbeatRequest {
            session_id: s.id.clone(),
            status: SessionStatus::Completed as i32,
            ..Default::default()
        })
        .await,
        Code::InvalidArgument,
        &["status", "EndSession"],
    );
    check(
        "page size",
        ss.list_sessions(ListSessionsRequest { project: p.clone(), page_size: 5000, ..Default::default() })
            .await,
        Code::InvalidArgument,
        &["page_size", "1000"],
    );

    let mem = &mut c.memory;
    let put = |category: &str, content: &str| PutMemoryRequest {
        project: p.clone(),
        category: category.into(),
        items: vec![MemoryItem { content: content.into(), ..Default::default() }],
        write: write(),
        ..Default::default()
    };
    check(
        "unknown category",
        mem.put_memory(put("gossip", "x")).await,
        Code::InvalidArgument,
        &["category", "gossip", "decision"],
    );
    check(
        "empty content",
        mem.put_memory(put("constraint", "")).await,
        Code::InvalidArgument,
        &["items[0].content"],
    );
    check("note without key", mem.put_memory(put("note", "x")).await, Code::InvalidArgument, &["key"]);
    check(
        "unknown op",
        mem.put_memory(PutMemoryRequest { op: 9, ..put("goal", "x") }).await,
        Code::InvalidArgument,
        &["op"],
    );
    check(
        "list unknown category",
        mem.list_memory(ListMemoryRequest {
            project: p.clone(),
            category: "nope".into(),
            ..Default::default()
        })
        .await,
        Code::InvalidArgument,
        &["category"],
    );

    let cps = &mut c.checkpoints;
    let cp = |f: &dyn Fn(&mut CreateCheckpointRequest)| {
        let mut r = CreateCheckpointRequest {
            session_id: s.id.clone(),
            kind: CheckpointKind::Manual as i32,
            write: write(),
            ..Default::default()
        };
        f(&mut r);
        r
    };
    check(
        "oversized payload",
        cps.create_checkpoint(cp(&|r| r.payload = vec![7; 200_000])).await,
        Code::ResourceExhausted,
        &["100000", "--max-checkpoint-bytes"],
    );
    check("no kind", cps.create_checkpoint(cp(&|r| r.kind = 0)).await, Code::InvalidArgument, &["kind"]);
    check(
        "unknown kind",
        cps.create_checkpoint(cp(&|r| r.kind = 77)).await,
        Code::InvalidArgument,
        &["kind", "77"],
    );
    let missing = uuid::Uuid::now_v7().to_string();
    check(
        "unknown parent",
        cps.create_checkpoint(cp(&|r| r.parent_id = Some(missing.clone()))).await,
        Code::NotFound,
        &["parent_id"],
    );
    check(
        "progress over 100",
        cps.create_checkpoint(cp(&|r| {
            r.state = Some(CheckpointState { progress: 101, ..Default::default() });
        }))
        .await,
        Code::InvalidArgument,
        &["state.progress", "0..=100"],
    );
    check(
        "too many errors",
        cps.create_checkpoint(cp(&|r| {
            r.state = Some(CheckpointState { errors: vec!["e".into(); 1001], ..Default::default() });
        }))
        .await,
        Code::InvalidArgument,
        &["state.errors", "1000"],
    );
    check(
        "unknown checkpoint",
        cps.get_checkpoint(GetCheckpointRequest { checkpoint_id: missing.clone(), include_payload: false })
            .await,
        Code::NotFound,
        &["checkpoint_id"],
    );

    let ev = &mut c.events;
    check(
        "negative cursor",
        ev.list_events(ListEventsRequest { project: p.clone(), after_revision: -1, ..Default::default() })
            .await,
        Code::InvalidArgument,
        &["after_revision"],
    );
    check(
        "unknown kind filter",
        ev.list_events(ListEventsRequest { project: p.clone(), kinds: vec![99], ..Default::default() }).await,
        Code::InvalidArgument,
        &["kinds"],
    );
    check(
        "watch everything, unknown kind",
        ev.watch(WatchRequest { cursors: vec![], kinds: vec![99] }).await,
        Code::InvalidArgument,
        &["kinds"],
    );
    check(
        "budget",
        c.brief
            .get_brief(GetBriefRequest { project: p.clone(), budget_chars: -5, ..Default::default() })
            .await,
        Code::InvalidArgument,
        &["budget_chars"],
    );

    // Nothing already stored changed, and no revision was used.
    let after = all_events(&mut c, &p).await;
    assert_eq!(before, after);
    let note = c
        .memory
        .list_memory(ListMemoryRequest { project: p.clone(), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(note.entries[0].content, "original");
}
both!(refused_with_clear_messages);

async fn secrets_are_redacted(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let r = crate::put_note(&mut c, &p, "deploy", "use AKIAIOSFODNN7EXAMPLE and password=hunter22", write())
        .await
        .unwrap();
    assert_eq!(r.result.unwrap().redacted, 2);
    let stored = &c
        .memory
        .list_memory(ListMemoryRequest { project: p.clone(), ..Default::default() })
        .await
        .unwrap()
        .into_inner()
        .entries[0];
    assert!(!stored.content.contains("AKIA") && !stored.content.contains("hunter22"), "{}", stored.content);
    assert!(stored.content.contains("[REDACTED:aws_access_key]"), "{}", stored.content);
}
both!(secrets_are_redacted);
