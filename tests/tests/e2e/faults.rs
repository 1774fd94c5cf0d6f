//! Fault injection (the `fail` crate, FAILPOINTS in the server's environment): a storage
//! error at each step of a write leaves no partial write and answers UNAVAILABLE, without
//! a panic; a fault after the commit (a lost reply) is healed by retrying the request id.

use baton_proto::v1::{
    AgentKind, CheckpointKind, CreateCheckpointRequest, ListCheckpointsRequest, ListMemoryRequest,
    StartSessionRequest,
};
use baton_tests::{Backend, Clients, Server, both};
use tonic::Code;

use crate::{all_events, assert_gapless, project, put_note, req_id, start_session, write};

/// What is stored, in a form that shows any partial write.
async fn snapshot(c: &mut Clients, p: &str, session: &str) -> (usize, Vec<String>, usize) {
    let events = all_events(c, p).await;
    assert_gapless(&events);
    let mut keys: Vec<String> = c
        .memory
        .list_memory(ListMemoryRequest { project: p.into(), include_evicted: true, ..Default::default() })
        .await
        .unwrap()
        .into_inner()
        .entries
        .into_iter()
        .map(|e| format!("{}={}", e.key, e.content))
        .collect();
    keys.sort();
    let checkpoints = c
        .checkpoints
        .list_checkpoints(ListCheckpointsRequest {
            session_id: session.into(),
            include_state: false,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .checkpoints
        .len();
    (events.len(), keys, checkpoints)
}

async fn every_write_step(backend: Backend) {
    let mut server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let session = start_session(&mut c, &p).await;
    put_note(&mut c, &p, "base", "before any fault", write()).await.unwrap();

    for point in [
        "write.after_lock",
        "write.before_event",
        "write.before_reply",
        "write.before_commit",
        "memory.insert",
        "checkpoint.insert",
        "session.insert",
    ] {
        let before = snapshot(&mut c, &p, &session.id).await;
        server.env = vec![("FAILPOINTS".into(), format!("{point}=return"))];
        server.restart().unwrap();
        let mut f = server.clients().await;
        let id = req_id();
        let mut options = write();
        options.as_mut().unwrap().request_id.clone_from(&id);
        let result = match point {
            "checkpoint.insert" => f
                .checkpoints
                .create_checkpoint(CreateCheckpointRequest {
                    session_id: session.id.clone(),
                    kind: CheckpointKind::Manual as i32,
                    reason: "fault".into(),
                    write: options.clone(),
                    ..Default::default()
                })
                .await
                .map(|_| ()),
            "session.insert" => f
                .sessions
                .start_session(StartSessionRequest {
                    project: p.clone(),
                    agent: AgentKind::Custom as i32,
                    write: options.clone(),
                    ..Default::default()
                })
                .await
                .map(|_| ()),
            _ => put_note(&mut f, &p, "faulty", "must not be stored", options.clone()).await.map(|_| ()),
        };
        let status = result.expect_err(point);
        assert_eq!(status.code(), Code::Unavailable, "{point}: {status:?}");
        assert!(
            status.message().contains("try again") && !status.message().contains("injected"),
            "{point}: the detail stays in the log: {}",
            status.message()
        );
        // Still serving (no panic), and nothing of the write is visible.
        assert_eq!(snapshot(&mut f, &p, &session.id).await, before, "{point} left a partial write");
        assert!(!server.log().contains("panicked"), "{point}:\n{}", server.log());

        // Without the fault the same request goes through, once.
        server.env.clear();
        server.restart().unwrap();
        c = server.clients().await;
        let retry = match point {
            "checkpoint.insert" | "session.insert" => None,
            _ => Some(put_note(&mut c, &p, "faulty", "must not be stored", options).await.unwrap()),
        };
        if let Some(reply) = retry {
            assert!(!reply.result.unwrap().replayed, "{point}: nothing was stored, so nothing to replay");
            let after = snapshot(&mut c, &p, &session.id).await;
            assert_eq!(after.0, before.0 + 1, "{point}: exactly one new revision");
            // Back to the old state for the next point.
            put_note(&mut c, &p, "faulty", "cleared", write()).await.unwrap();
        }
    }

    // A fault after the commit: the client sees UNAVAILABLE, the write is stored; the retry
    // with the same request id gets the stored reply and writes nothing more.
    let before = snapshot(&mut c, &p, &session.id).await;
    server.env = vec![("FAILPOINTS".into(), "write.after_commit=return".into())];
    server.restart().unwrap();
    let mut f = server.clients().await;
    let mut options = write();
    options.as_mut().unwrap().request_id = req_id();
    let status = put_note(&mut f, &p, "lost-reply", "stored", options.clone()).await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable);
    server.env.clear();
    server.restart().unwrap();
    let mut c = server.clients().await;
    let reply = put_note(&mut c, &p, "lost-reply", "stored", options).await.unwrap();
    assert!(reply.result.unwrap().replayed);
    let after = snapshot(&mut c, &p, &session.id).await;
    assert_eq!(after.0, before.0 + 1, "one revision for the write and its retry");
}
both!(every_write_step);
