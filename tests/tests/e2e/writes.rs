//! The decision table (docs/architecture.md, Last-write-wins with conflict reporting), row
//! by row, and request idempotency.

use baton_proto::v1::{
    ConflictPolicy, GetSessionRequest, ListConflictsRequest, ListMemoryRequest, UpdateSessionRequest,
    WriteOptions, WriteOutcome, record_value,
};
use baton_tests::{Backend, Server, both};
use prost_types::Timestamp;
use tonic::Code;

use crate::{all_events, assert_gapless, based, code, project, put_note, start_session, write};

fn ts(secs: i64) -> Timestamp {
    Timestamp { seconds: secs, nanos: 0 }
}

fn now_secs() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64
}

async fn decision_table_on_a_note(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();

    // No base: APPLIED.
    let r = put_note(&mut c, &p, "arch", "v1", write()).await.unwrap().result.unwrap();
    assert_eq!((r.outcome, r.revision), (WriteOutcome::Applied as i32, 1));
    // Base = record's revision: APPLIED.
    let r = put_note(&mut c, &p, "arch", "v2", based(1, ConflictPolicy::Overwrite))
        .await
        .unwrap()
        .result
        .unwrap();
    assert_eq!((r.outcome, r.revision), (WriteOutcome::Applied as i32, 2));
    assert!(r.conflict.is_none());
    // Stale base, OVERWRITE: applied, conflict with the overwritten value and its author.
    let mut w = based(1, ConflictPolicy::Unspecified);
    w.as_mut().unwrap().host = "other-host".into();
    let r = put_note(&mut c, &p, "arch", "v3", w).await.unwrap().result.unwrap();
    assert_eq!((r.outcome, r.revision), (WriteOutcome::Overwritten as i32, 3));
    let conflict = r.conflict.unwrap();
    assert_eq!(conflict.record, "note/arch");
    assert_eq!((conflict.base_revision, conflict.current_revision), (Some(1), 2));
    assert_eq!(conflict.current_author.as_ref().unwrap().host, "test-host");
    assert_eq!(conflict.writer.as_ref().unwrap().host, "other-host");
    match conflict.current_value.unwrap().value.unwrap() {
        record_value::Value::Note(n) => assert_eq!(n.content, "v2"),
        other => panic!("{other:?}"),
    }
    // Stale base, REJECT: ABORTED, current value and revision in the details, nothing used.
    let status = put_note(&mut c, &p, "arch", "v4", based(2, ConflictPolicy::Reject)).await.unwrap_err();
    assert_eq!(status.code(), Code::Aborted, "{}", status.message());
    assert!(status.message().contains("note/arch"), "{}", status.message());
    // The standard error model: google.rpc.Status with an ErrorInfo and the RejectedWrite.
    let info = baton_proto::details::error_info(&status).unwrap();
    assert_eq!((info.reason.as_str(), info.domain.as_str()), ("WRITE_REJECTED", "baton.v1"));
    let details = baton_proto::details::rejected_write(&status).unwrap().conflict.unwrap();
    assert_eq!(details.outcome, WriteOutcome::Rejected as i32);
    assert_eq!(details.current_revision, 3);
    match details.current_value.unwrap().value.unwrap() {
        record_value::Value::Note(n) => assert_eq!(n.content, "v3"),
        other => panic!("{other:?}"),
    }
    // A queued write older than the record's last write: STALE, not applied, recorded.
    let t = now_secs();
    let queued = Some(WriteOptions {
        request_id: crate::req_id(),
        written_at: Some(ts(t - 3600)),
        client_now: Some(ts(t)),
        ..Default::default()
    });
    let r = put_note(&mut c, &p, "arch", "from-the-queue", queued).await.unwrap().result.unwrap();
    assert_eq!((r.outcome, r.revision), (WriteOutcome::Stale as i32, 4));
    // The clock offset is removed: a client whose clock is 2 h behind, sending a write it
    // just made, is not stale (uncorrected, its time would be 2 h old).
    let skewed = Some(WriteOptions {
        request_id: crate::req_id(),
        written_at: Some(ts(t - 7200)),
        client_now: Some(ts(t - 7200)),
        ..Default::default()
    });
    let r = put_note(&mut c, &p, "arch", "skewed-but-new", skewed).await.unwrap().result.unwrap();
    assert_eq!(r.outcome, WriteOutcome::Applied as i32);
    // A queued write whose base matches is never stale.
    let matching = Some(WriteOptions {
        request_id: crate::req_id(),
        base_revision: Some(5),
        written_at: Some(ts(t - 3600)),
        client_now: Some(ts(t)),
        ..Default::default()
    });
    let r = put_note(&mut c, &p, "arch", "old-but-based", matching).await.unwrap().result.unwrap();
    assert_eq!(r.outcome, WriteOutcome::Applied as i32);

    let list = c
        .memory
        .list_memory(ListMemoryRequest { project: p.clone(), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(list.entries.len(), 1);
    assert_eq!(list.entries[0].content, "old-but-based");
    assert_eq!(list.as_of_revision, 6);
    // Conflicts are stored (OVERWRITTEN and STALE; REJECTED used no revision).
    let conflicts = c
        .events
        .list_conflicts(ListConflictsRequest { project: p.clone(), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    let outcomes: Vec<i32> = conflicts.conflicts.iter().map(|c| c.outcome).collect();
    assert_eq!(outcomes, vec![WriteOutcome::Overwritten as i32, WriteOutcome::Stale as i32]);
    let events = all_events(&mut c, &p).await;
    assert_gapless(&events);
    assert_eq!(events.len(), 6);
    assert!(events[2].conflict.is_some() && events[3].conflict.is_some());
}
both!(decision_table_on_a_note);

async fn decision_table_on_a_session(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let s = start_session(&mut c, &p).await;
    let update = |goal: &str, w: Option<WriteOptions>| UpdateSessionRequest {
        session_id: s.id.clone(),
        goal: Some(goal.into()),
        write: w,
        ..Default::default()
    };
    let r = c
        .sessions
        .update_session(update("a", based(s.revision, ConflictPolicy::Reject)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.result.unwrap().outcome, WriteOutcome::Applied as i32);
    let r = c
        .sessions
        .update_session(update("b", based(s.revision, ConflictPolicy::Overwrite)))
        .await
        .unwrap()
        .into_inner();
    let result = r.result.unwrap();
    assert_eq!(result.outcome, WriteOutcome::Overwritten as i32);
    match result.conflict.unwrap().current_value.unwrap().value.unwrap() {
        record_value::Value::Session(old) => assert_eq!(old.goal, "a"),
        other => panic!("{other:?}"),
    }
    let (code, msg) =
        code(c.sessions.update_session(update("c", based(s.revision, ConflictPolicy::Reject))).await);
    assert_eq!(code, Code::Aborted, "{msg}");
    let now =
        c.sessions.get_session(GetSessionRequest { session_id: s.id.clone() }).await.unwrap().into_inner();
    assert_eq!(now.session.unwrap().goal, "b");
    assert_eq!(now.as_of_revision, 3);
}
both!(decision_table_on_a_session);

async fn idempotent_retries(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let w = write();
    let first = put_note(&mut c, &p, "k", "v", w.clone()).await.unwrap();
    // A retry (even with a new client_now, as a queue flush sends) returns the original
    // reply and writes nothing.
    let mut retry_w = w.clone();
    retry_w.as_mut().unwrap().client_now = None;
    let again = put_note(&mut c, &p, "k", "v", retry_w).await.unwrap();
    assert_eq!(again.entries, first.entries);
    let (a, b) = (first.result.unwrap(), again.result.unwrap());
    assert_eq!(a.revision, b.revision);
    assert!(!a.replayed && b.replayed);
    // Same id, different request: INVALID_ARGUMENT, nothing written.
    let (code, msg) = code(put_note(&mut c, &p, "k", "other", w).await);
    assert_eq!(code, Code::InvalidArgument);
    assert!(msg.contains("request_id") && msg.contains("different request"), "{msg}");
    let events = all_events(&mut c, &p).await;
    assert_eq!(events.len(), 1);
    // Session starts too: a retried StartSession does not start two sessions.
    let s = baton_proto::v1::StartSessionRequest {
        project: p.clone(),
        agent: baton_proto::v1::AgentKind::ClaudeCode as i32,
        write: write(),
        ..Default::default()
    };
    let one = c.sessions.start_session(s.clone()).await.unwrap().into_inner();
    let two = c.sessions.start_session(s).await.unwrap().into_inner();
    assert_eq!(one.session.unwrap().id, two.session.unwrap().id);
    assert_eq!(all_events(&mut c, &p).await.len(), 2);
}
both!(idempotent_retries);
