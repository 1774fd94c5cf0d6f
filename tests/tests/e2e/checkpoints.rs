//! Checkpoints: immutable tree, head moves, forks reported, compression, integrity, and
//! resume falling back past corrupt checkpoints.

use baton_proto::v1::{
    AgentKind, CheckpointKind, CheckpointState, CreateCheckpointRequest, CreateCheckpointResponse, Decision,
    EndSessionRequest, GetCheckpointRequest, GetSessionRequest, HeartbeatRequest, ListCheckpointsRequest,
    ResumeSessionRequest, SessionStatus, StartSessionRequest, Task, UpdateSessionRequest, WriteOutcome,
    resume_session_request,
};
use baton_tests::{Backend, Clients, Server, both};
use tonic::Code;

use crate::{all_events, assert_gapless, code, project, start_session, write};

fn state(phase: &str) -> CheckpointState {
    CheckpointState {
        active_tasks: vec![
            Task {
                id: "1".into(),
                content: "write the store".into(),
                status: "in_progress".into(),
                progress: 50,
            },
            Task { id: "2".into(), content: "write docs".into(), status: "completed".into(), progress: 100 },
        ],
        open_questions: vec!["group commit?".into()],
        decisions: vec![Decision {
            decision: "sqlx".into(),
            rationale: "both backends".into(),
            impact: "architectural".into(),
        }],
        files_modified: vec!["server/src/lib.rs".into()],
        tool_count: 12,
        phase: phase.into(),
        git_head: "abc".into(),
        ..Default::default()
    }
}

pub async fn checkpoint(
    c: &mut Clients,
    session: &str,
    parent: Option<String>,
    phase: &str,
) -> CreateCheckpointResponse {
    c.checkpoints
        .create_checkpoint(CreateCheckpointRequest {
            session_id: session.into(),
            parent_id: parent,
            kind: CheckpointKind::Manual as i32,
            reason: format!("at {phase}"),
            state: Some(state(phase)),
            payload: b"{\"orchestrator\":1}".to_vec(),
            payload_content_type: "application/json".into(),
            write: write(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
}

async fn tree_and_forks(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let s = start_session(&mut c, &p).await;
    let a = checkpoint(&mut c, &s.id, None, "a").await;
    let a_id = a.checkpoint.as_ref().unwrap().id.clone();
    assert_eq!(a.result.unwrap().outcome, WriteOutcome::Applied as i32);
    let b = checkpoint(&mut c, &s.id, None, "b").await; // child of a (the head)
    let b_id = b.checkpoint.as_ref().unwrap().id.clone();
    assert_eq!(b.checkpoint.as_ref().unwrap().parent_id, a_id);
    // Another child of a: a fork. Both kept, head moves, reported as a conflict on the head.
    let f = checkpoint(&mut c, &s.id, Some(a_id.clone()), "fork").await;
    let f_id = f.checkpoint.as_ref().unwrap().id.clone();
    let r = f.result.unwrap();
    assert_eq!(r.outcome, WriteOutcome::Overwritten as i32);
    let conflict = r.conflict.unwrap();
    assert_eq!(conflict.record, format!("session/{}/head", s.id));
    assert!(conflict.detail.contains("fork"), "{}", conflict.detail);
    let session = c
        .sessions
        .get_session(GetSessionRequest { session_id: s.id.clone() })
        .await
        .unwrap()
        .into_inner()
        .session
        .unwrap();
    assert_eq!(session.head_checkpoint_id, f_id);
    assert_eq!(session.tool_count, 12);

    // Tree order: a, then its children oldest first, with depths.
    let list = c
        .checkpoints
        .list_checkpoints(ListCheckpointsRequest {
            session_id: s.id.clone(),
            include_state: false,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let order: Vec<(String, i32)> = list.checkpoints.iter().map(|c| (c.id.clone(), c.depth)).collect();
    assert_eq!(order, vec![(a_id.clone(), 0), (b_id, 1), (f_id.clone(), 1)]);
    assert_eq!(list.head_checkpoint_id, f_id);

    // Full read: state and (asked-for) payload round-trip, digest present.
    let got = c
        .checkpoints
        .get_checkpoint(GetCheckpointRequest { checkpoint_id: a_id.clone(), include_payload: true })
        .await
        .unwrap()
        .into_inner();
    let cp = got.checkpoint.unwrap();
    assert_eq!(cp.state.unwrap(), state("a"));
    assert_eq!(cp.payload, b"{\"orchestrator\":1}");
    assert_eq!(cp.digest.len(), 64);
    // Parent from another session is refused.
    let other = start_session(&mut c, &p).await;
    let (code1, msg) = code(
        c.checkpoints
            .create_checkpoint(CreateCheckpointRequest {
                session_id: other.id.clone(),
                parent_id: Some(a_id),
                kind: CheckpointKind::Auto as i32,
                write: write(),
                ..Default::default()
            })
            .await,
    );
    assert_eq!(code1, Code::InvalidArgument, "{msg}");
    assert_gapless(&all_events(&mut c, &p).await);
}
both!(tree_and_forks);

async fn compression_and_corruption(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let s = start_session(&mut c, &p).await;
    let small = checkpoint(&mut c, &s.id, None, "small").await.checkpoint.unwrap().id;
    let big = c
        .checkpoints
        .create_checkpoint(CreateCheckpointRequest {
            session_id: s.id.clone(),
            kind: CheckpointKind::Auto as i32,
            state: Some(CheckpointState { summary: "lorem ipsum ".repeat(2000), ..state("big") }),
            write: write(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .checkpoint
        .unwrap();
    assert!(big.size_bytes > 20_000);
    assert_eq!(server.checkpoint_compression(&small).await.unwrap(), "none");
    assert_eq!(server.checkpoint_compression(&big.id).await.unwrap(), "zstd");
    let third = checkpoint(&mut c, &s.id, None, "third").await.checkpoint.unwrap().id;

    // Flip bytes of the two newest: reads answer DATA_LOSS, the list marks them.
    server.corrupt_checkpoint(&third).await.unwrap();
    server.corrupt_checkpoint(&big.id).await.unwrap();
    let (code1, msg) = code(
        c.checkpoints
            .get_checkpoint(GetCheckpointRequest { checkpoint_id: third.clone(), include_payload: false })
            .await,
    );
    assert_eq!(code1, Code::DataLoss, "{msg}");
    assert!(msg.contains(&third), "{msg}");
    let list = c
        .checkpoints
        .list_checkpoints(ListCheckpointsRequest {
            session_id: s.id.clone(),
            include_state: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let corrupt: Vec<bool> = list.checkpoints.iter().map(|c| c.corrupt).collect();
    assert_eq!(corrupt, vec![false, true, true]);

    // Resume falls back to the nearest valid ancestor and names what it skipped.
    c.sessions
        .heartbeat(HeartbeatRequest {
            session_id: s.id.clone(),
            status: SessionStatus::Idle as i32,
            ..Default::default()
        })
        .await
        .unwrap();
    let resumed = c
        .sessions
        .resume_session(ResumeSessionRequest {
            project: p.clone(),
            target: Some(resume_session_request::Target::SessionId(s.id.clone())),
            agent: AgentKind::ClaudeCode as i32,
            host: "desktop".into(),
            write: write(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let skipped: Vec<String> = resumed.skipped.iter().map(|k| k.checkpoint_id.clone()).collect();
    assert_eq!(skipped, vec![third, big.id]);
    assert_eq!(resumed.checkpoint.unwrap().id, small);
    assert_eq!(resumed.resume_command, "claude --resume agent-conv-1");
    let new = resumed.session.unwrap();
    assert_eq!(new.resumed_from, s.id);
    assert_eq!(new.host, "desktop");
    let old = resumed.resumed_from.unwrap();
    assert_eq!((old.status, old.resumed_by.as_str()), (SessionStatus::Resumed as i32, new.id.as_str()));
    assert!(resumed.brief.unwrap().text.contains("# Baton brief"));
}
both!(compression_and_corruption);

async fn resume_claims_once_and_fences(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let worker = crate::start(
        &mut c,
        StartSessionRequest {
            project: p.clone(),
            agent: AgentKind::Custom as i32,
            lease_ttl_ms: 60_000,
            write: write(),
            ..Default::default()
        },
    )
    .await;
    checkpoint(&mut c, &worker.id, None, "w1").await;
    // Active sessions cannot be resumed.
    let resume = |c: &mut Clients| {
        let mut c = c.clone();
        let p = p.clone();
        let id = worker.id.clone();
        async move {
            c.sessions
                .resume_session(ResumeSessionRequest {
                    project: p,
                    target: Some(resume_session_request::Target::SessionId(id)),
                    write: write(),
                    ..Default::default()
                })
                .await
        }
    };
    let (code1, msg) = code(resume(&mut c).await);
    assert_eq!(code1, Code::FailedPrecondition);
    assert!(msg.contains("still active"), "{msg}");
    c.sessions
        .end_session(EndSessionRequest {
            session_id: worker.id.clone(),
            status: SessionStatus::Crashed as i32,
            write: write(),
            ..Default::default()
        })
        .await
        .unwrap();
    // Two orchestrators race to claim it: exactly one wins, the other is told who.
    let (r1, r2) = tokio::join!(resume(&mut c), resume(&mut c));
    let (winner, loser) = match (r1, r2) {
        (Ok(w), Err(l)) | (Err(l), Ok(w)) => (w.into_inner(), l),
        other => panic!("expected one winner: {other:?}"),
    };
    let new_id = winner.session.unwrap().id;
    assert_eq!(loser.code(), Code::FailedPrecondition);
    assert!(loser.message().contains(&new_id), "{}", loser.message());
    // The old worker is fenced off.
    let (code2, msg) = code(
        c.sessions
            .update_session(UpdateSessionRequest {
                session_id: worker.id.clone(),
                summary: Some("late".into()),
                write: write(),
                ..Default::default()
            })
            .await,
    );
    assert_eq!(code2, Code::FailedPrecondition);
    assert!(msg.contains("fenced") && msg.contains(&new_id), "{msg}");
    let (code3, _) = code(
        c.checkpoints
            .create_checkpoint(CreateCheckpointRequest {
                session_id: worker.id.clone(),
                kind: CheckpointKind::Auto as i32,
                write: write(),
                ..Default::default()
            })
            .await,
    );
    assert_eq!(code3, Code::FailedPrecondition);
    // Resuming a completed session starts a new one and leaves the old as it is.
    let done = start_session(&mut c, &p).await;
    c.sessions
        .end_session(EndSessionRequest { session_id: done.id.clone(), write: write(), ..Default::default() })
        .await
        .unwrap();
    let r = c
        .sessions
        .resume_session(ResumeSessionRequest { project: p.clone(), write: write(), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.resumed_from.unwrap().status, SessionStatus::Completed as i32);
    assert_eq!(r.session.unwrap().resumed_from, done.id);
    assert_gapless(&all_events(&mut c, &p).await);
}
both!(resume_claims_once_and_fences);

/// Every kind of resume target, found or not: by session, by one of its checkpoints (which
/// is where it starts, not the head), the project's latest; and the claimed session as the
/// reply, the stored row and its event tell it are the same.
async fn resume_targets(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let (p, other, empty) = (project(), project(), project());
    let s = start_session(&mut c, &p).await;
    let first = checkpoint(&mut c, &s.id, None, "first").await.checkpoint.unwrap().id;
    let head = checkpoint(&mut c, &s.id, None, "head").await.checkpoint.unwrap().id;
    crate::end_crashed(&mut c, &s.id).await;
    let request = |project: &str, target: Option<resume_session_request::Target>| ResumeSessionRequest {
        project: project.into(),
        target,
        write: write(),
        ..Default::default()
    };
    let unknown = uuid::Uuid::new_v4().to_string();
    let cases = [
        (
            request(&p, Some(resume_session_request::Target::SessionId(unknown.clone()))),
            Code::NotFound,
            "session_id",
        ),
        (
            request(&p, Some(resume_session_request::Target::CheckpointId(unknown.clone()))),
            Code::NotFound,
            "checkpoint_id",
        ),
        (request(&empty, None), Code::NotFound, "no crashed, idle or completed session"),
        // Another project's ids are answered as ids that do not exist (attacks.rs).
        (
            request(&other, Some(resume_session_request::Target::SessionId(s.id.clone()))),
            Code::NotFound,
            "session_id",
        ),
        (
            request(&other, Some(resume_session_request::Target::CheckpointId(head.clone()))),
            Code::NotFound,
            "checkpoint_id",
        ),
    ];
    for (req, want, says) in cases {
        let (got, msg) = code(c.sessions.resume_session(req.clone()).await);
        assert_eq!(got, want, "{req:?}: {msg}");
        assert!(msg.contains(says), "{req:?}: {msg}");
    }
    // None of these changed anything.
    assert_eq!(crate::stored_session(&c, &s.id).await.status, SessionStatus::Crashed as i32);

    // From a checkpoint that is not the head: that one, and its session is claimed.
    let req = request(&p, Some(resume_session_request::Target::CheckpointId(first.clone())));
    let resumed = c.sessions.resume_session(req.clone()).await.unwrap().into_inner();
    assert_eq!(resumed.checkpoint.as_ref().unwrap().id, first);
    assert!(resumed.skipped.is_empty());
    let claimed = resumed.resumed_from.clone().unwrap();
    let new = resumed.session.clone().unwrap();
    assert_eq!(
        (claimed.status, claimed.resumed_by.as_str()),
        (SessionStatus::Resumed as i32, new.id.as_str())
    );
    assert_eq!(crate::stored_session(&c, &s.id).await, claimed);
    assert_eq!(crate::stored_session(&c, &new.id).await, new);
    let events = all_events(&mut c, &p).await;
    assert_gapless(&events);
    let told: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.value {
            Some(baton_proto::v1::event::Value::Session(v))
                if e.revision > resumed.result.as_ref().unwrap().revision - 2 =>
            {
                Some(v.clone())
            }
            _ => None,
        })
        .collect();
    assert_eq!(told, vec![claimed.clone(), new.clone()]);
    // The same request again: the same reply; another one: the claim is taken.
    let again = c.sessions.resume_session(req).await.unwrap().into_inner();
    assert_eq!((again.session, again.resumed_from), (Some(new.clone()), Some(claimed)));
    let (got, msg) = code(
        c.sessions
            .resume_session(request(&p, Some(resume_session_request::Target::SessionId(s.id.clone()))))
            .await,
    );
    assert_eq!(got, Code::FailedPrecondition, "{msg}");
    assert!(msg.contains(&new.id), "{msg}");

    // The latest: an idle session goes before a completed one, and starts from its head.
    crate::go_idle(&mut c, &new.id).await;
    let newest = checkpoint(&mut c, &new.id, None, "newest").await.checkpoint.unwrap().id;
    crate::go_idle(&mut c, &new.id).await;
    let done = start_session(&mut c, &p).await;
    c.sessions
        .end_session(EndSessionRequest { session_id: done.id.clone(), write: write(), ..Default::default() })
        .await
        .unwrap();
    let latest = c.sessions.resume_session(request(&p, None)).await.unwrap().into_inner();
    assert_eq!(latest.resumed_from.unwrap().id, new.id);
    assert_eq!(latest.checkpoint.unwrap().id, newest);
    // Between an idle and a crashed session, the one changed last, whichever its status.
    let idle = start_session(&mut c, &p).await;
    crate::go_idle(&mut c, &idle.id).await;
    let crashed = start_session(&mut c, &p).await;
    crate::end_crashed(&mut c, &crashed.id).await;
    let latest = c.sessions.resume_session(request(&p, None)).await.unwrap().into_inner();
    assert_eq!(latest.resumed_from.unwrap().id, crashed.id);
    assert!(latest.checkpoint.is_none());
    let latest = c.sessions.resume_session(request(&p, None)).await.unwrap().into_inner();
    assert_eq!(latest.resumed_from.unwrap().id, idle.id);
    assert_gapless(&all_events(&mut c, &p).await);
}
both!(resume_targets);
