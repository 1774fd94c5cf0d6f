//! Retention and compaction: old checkpoints pruned with each head and its nearest valid
//! ancestors kept and survivors re-parented, by the CLI (dry run and real) and by
//! AdminService; events below a compacted revision are OUT_OF_RANGE.

use baton_proto::v1::{
    BlobRef, CheckpointKind, Chunk, CompactEventsRequest, CreateCheckpointRequest, EventKind,
    GetCheckpointRequest, ListCheckpointsRequest, ListEventsRequest, MissingChunksRequest, PruneRequest,
    PutChunksRequest, WatchCursor, WatchRequest, event,
};
use baton_tests::{Backend, Server, both};
use tokio_stream::StreamExt as _;
use tonic::Code;

use crate::access::{token, with};
use crate::checkpoints::checkpoint;
use crate::{all_events, assert_gapless, code, project, put_note, start_session, write};

const HUNDRED_DAYS_US: i64 = 100 * 86_400_000_000;

async fn prunes_old_checkpoints(backend: Backend) {
    let server = Server::start_with(backend, &["--keep-ancestors", "2"]).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let a = start_session(&mut c, &p).await;
    let mut ids = Vec::new();
    for i in 0..10 {
        let made = checkpoint(&mut c, &a.id, None, &format!("a{i}")).await;
        ids.push(made.checkpoint.unwrap().id);
    }
    let b = start_session(&mut c, &p).await;
    let mut b_ids = Vec::new();
    for i in 0..3 {
        b_ids.push(checkpoint(&mut c, &b.id, None, &format!("b{i}")).await.checkpoint.unwrap().id);
    }
    // a0..a7 and all of b are from 100 days ago; a6 is corrupt.
    let old: Vec<String> = ids[..8].iter().chain(&b_ids).map(|id| format!("'{id}'")).collect();
    let n = server
        .execute(&format!(
            "UPDATE checkpoints SET created_us = created_us - {HUNDRED_DAYS_US} WHERE id IN ({})",
            old.join(", ")
        ))
        .await
        .unwrap();
    assert_eq!(n, 11);
    server.corrupt_checkpoint(&ids[6]).await.unwrap();
    let head_before = all_events(&mut c, &p).await.len();

    // Dry run from the command line: says what would go, changes nothing.
    let (ok, out, err) = server.admin_command(&["prune", "--dry-run"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("would remove 7 checkpoints") && out.contains(&ids[0]) && out.contains(&ids[6]),
        "{out}"
    );
    assert!(!out.contains(&format!("- {}", ids[7])) && !out.contains(&b_ids[0]), "{out}");
    assert!(out.contains(&format!("~ {} -> (root)", ids[7])), "{out}");
    assert_eq!(all_events(&mut c, &p).await.len(), head_before, "a dry run writes nothing");

    // For real, through AdminService. Head a9, a8 (young) and a7 (the 2nd valid ancestor)
    // stay; a6 (corrupt) does not count; b's head and its 2 ancestors all stay.
    let reply =
        c.admin.prune(PruneRequest { project: p.clone(), ..Default::default() }).await.unwrap().into_inner();
    assert_eq!(reply.projects.len(), 1);
    let pruned = &reply.projects[0];
    let mut expected: Vec<String> = ids[..7].to_vec();
    expected.sort();
    assert_eq!(pruned.removed_checkpoints, expected);
    assert_eq!(pruned.reparented.len(), 1);
    assert_eq!(
        (pruned.reparented[0].checkpoint_id.as_str(), pruned.reparented[0].parent_id.as_str()),
        (ids[7].as_str(), "")
    );

    let list = |session: String| {
        let mut c = c.clone();
        async move {
            c.checkpoints
                .list_checkpoints(ListCheckpointsRequest {
                    session_id: session,
                    include_state: false,
                    ..Default::default()
                })
                .await
                .unwrap()
                .into_inner()
        }
    };
    let left = list(a.id.clone()).await;
    let got: Vec<(&str, &str)> =
        left.checkpoints.iter().map(|c| (c.id.as_str(), c.parent_id.as_str())).collect();
    assert_eq!(
        got,
        [(ids[7].as_str(), ""), (ids[8].as_str(), ids[7].as_str()), (ids[9].as_str(), ids[8].as_str())]
    );
    assert_eq!(left.head_checkpoint_id, ids[9]);
    assert_eq!(list(b.id.clone()).await.checkpoints.len(), 3);

    // One event, carrying what changed; the log stays gapless.
    let events = all_events(&mut c, &p).await;
    assert_gapless(&events);
    let last = events.last().unwrap();
    assert_eq!(last.kind, EventKind::CheckpointsPruned as i32);
    assert_eq!(last.revision, pruned.revision);
    match &last.value {
        Some(event::Value::Maintenance(m)) => {
            assert_eq!(m.removed_checkpoints, expected);
            assert_eq!(m.reparented, pruned.reparented);
        }
        other => panic!("{other:?}"),
    }

    // The survivors still verify.
    for id in &ids[7..] {
        c.checkpoints
            .get_checkpoint(GetCheckpointRequest { checkpoint_id: id.clone(), include_payload: true })
            .await
            .unwrap();
    }

    // Nothing more to do: no event. The CLI says so.
    let (ok, out, _) = server.admin_command(&["prune"]);
    assert!(ok && out.contains("nothing to prune"), "{out}");
    assert_eq!(all_events(&mut c, &p).await.len(), events.len());

    // Bad input and access.
    let (status, message) =
        code(c.admin.prune(PruneRequest { keep_days: Some(-1), ..Default::default() }).await);
    assert_eq!(status, Code::InvalidArgument, "{message}");
    let (status, _) = code(
        c.admin.prune(PruneRequest { project: "github.com/nobody/none".into(), ..Default::default() }).await,
    );
    assert_eq!(status, Code::NotFound);
    let _admin = token(&server, &["create", "--name", "root", "--role", "admin"]);
    let writer = token(&server, &["create", "--name", "worker", "--role", "writer"]);
    let scoped = token(&server, &["create", "--name", "team-admin", "--role", "admin", "--project", &p]);
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    let status = c
        .admin
        .prune(with(PruneRequest { project: p.clone(), ..Default::default() }, &writer))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied);
    assert!(status.message().contains("admin token"), "{}", status.message());
    let status = c.admin.prune(with(PruneRequest::default(), &scoped)).await.unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied, "a project admin cannot prune every project");
    c.admin
        .prune(with(PruneRequest { project: p.clone(), dry_run: true, ..Default::default() }, &scoped))
        .await
        .unwrap();
}
both!(prunes_old_checkpoints);

async fn compaction_is_out_of_range_below(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    for i in 0..10 {
        put_note(&mut c, &p, &format!("k{i}"), "v", write()).await.unwrap();
    }
    let done = c
        .admin
        .compact_events(CompactEventsRequest { project: p.clone(), below_revision: 6 })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((done.removed_events, done.oldest_kept_revision, done.revision), (5, 6, 11));

    let list = |after: i64| {
        let mut c = c.clone();
        let p = p.clone();
        async move {
            c.events
                .list_events(ListEventsRequest {
                    project: p,
                    after_revision: after,
                    limit: 100,
                    kinds: vec![],
                    ..Default::default()
                })
                .await
        }
    };
    for after in [0, 4] {
        let (status, message) = code(list(after).await);
        assert_eq!(status, Code::OutOfRange, "{message}");
        assert!(message.contains("oldest kept is 6") && message.contains("re-read"), "{message}");
    }
    let page = list(5).await.unwrap().into_inner();
    assert_eq!(page.events.iter().map(|e| e.revision).collect::<Vec<_>>(), [6, 7, 8, 9, 10, 11]);
    assert_eq!(page.events.last().unwrap().kind, EventKind::EventsCompacted as i32);

    // Watching from below: OUT_OF_RANGE on the stream; from the oldest kept: everything.
    let watch = |after: i64| {
        let mut events = c.events.clone();
        let p = p.clone();
        async move {
            events
                .watch(WatchRequest {
                    cursors: vec![WatchCursor { project: p, after_revision: after }],
                    kinds: vec![],
                })
                .await
                .unwrap()
                .into_inner()
        }
    };
    let mut below = watch(2).await;
    let status = below.next().await.unwrap().unwrap_err();
    assert_eq!(status.code(), Code::OutOfRange, "{status:?}");
    let mut ok = watch(5).await;
    for revision in 6..=11 {
        assert_eq!(ok.next().await.unwrap().unwrap().revision, revision);
    }

    // From the command line; and the bad cases.
    let (success, out, err) = server.admin_command(&["compact", "--project", &p, "--below-revision", "9"]);
    assert!(success, "{err}");
    assert!(out.contains("removed 3 events") && out.contains("oldest kept is revision 9"), "{out}");
    let (status, message) =
        code(c.admin.compact_events(CompactEventsRequest { project: p.clone(), below_revision: 7 }).await);
    assert_eq!(status, Code::FailedPrecondition, "{message}");
    let (status, message) =
        code(c.admin.compact_events(CompactEventsRequest { project: p.clone(), below_revision: 999 }).await);
    assert_eq!(status, Code::InvalidArgument, "{message}");
    assert!(message.contains("below_revision"), "{message}");
    let (status, _) = code(
        c.admin
            .compact_events(CompactEventsRequest {
                project: "github.com/nobody/none".into(),
                below_revision: 1,
            })
            .await,
    );
    assert_eq!(status, Code::NotFound);
    let (success, _, err) = server.admin_command(&["compact", "--project", &p, "--below-revision", "0"]);
    assert!(!success && err.contains("below_revision"), "{err}");
}
both!(compaction_is_out_of_range_below);

fn chunk(data: &[u8]) -> Chunk {
    use sha2::Digest as _;
    Chunk { digest: hex::encode(sha2::Sha256::digest(data)), data: data.to_vec() }
}

/// The periodic job: prunes by itself, collects chunks no checkpoint needs any more, and
/// forgets month-old idempotency replies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_runs_periodically() {
    let server =
        Server::start_with(Backend::Sqlite, &["--retention-interval", "200ms", "--keep-ancestors", "0"])
            .await
            .unwrap();
    let mut c = server.clients().await;
    let p = project();
    let s = start_session(&mut c, &p).await;
    let (old_chunk, kept_chunk, orphan) =
        (chunk(b"old transcript part"), chunk(b"current transcript"), chunk(b"orphan"));
    c.checkpoints
        .put_chunks(PutChunksRequest {
            project: p.clone(),
            chunks: vec![old_chunk.clone(), kept_chunk.clone(), orphan],
        })
        .await
        .unwrap();
    let with_blob = |chunk: &Chunk| {
        vec![BlobRef {
            role: "transcript".into(),
            digest: chunk.digest.clone(),
            size_bytes: chunk.data.len() as i64,
            chunks: vec![chunk.digest.clone()],
            content_type: "application/jsonl".into(),
            ..Default::default()
        }]
    };
    let mut ids = Vec::new();
    for blobs in [with_blob(&old_chunk), vec![], with_blob(&kept_chunk)] {
        let made = c
            .checkpoints
            .create_checkpoint(CreateCheckpointRequest {
                session_id: s.id.clone(),
                kind: CheckpointKind::Manual as i32,
                reason: "periodic".into(),
                blobs,
                write: write(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        ids.push(made.checkpoint.unwrap().id);
    }
    for table in ["checkpoints", "chunks", "requests"] {
        server
            .execute(&format!("UPDATE {table} SET created_us = created_us - {HUNDRED_DAYS_US}"))
            .await
            .unwrap();
    }

    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let pruned = loop {
        let events = all_events(&mut c, &p).await;
        if let Some(e) = events.iter().find(|e| e.kind == EventKind::CheckpointsPruned as i32) {
            break e.clone();
        }
        assert!(std::time::Instant::now() < deadline, "retention did not run");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    let mut removed = vec![ids[0].clone(), ids[1].clone()];
    removed.sort();
    match pruned.value {
        Some(event::Value::Maintenance(m)) => assert_eq!(m.removed_checkpoints, removed),
        other => panic!("{other:?}"),
    }
    assert_eq!(pruned.actor.unwrap().token, "retention");
    // Only the head's chunk is left; month-old replies are gone.
    assert_eq!(server.count_chunks().await.unwrap(), 1);
    let missing = c
        .checkpoints
        .missing_chunks(MissingChunksRequest { project: p.clone(), digests: vec![kept_chunk.digest.clone()] })
        .await
        .unwrap()
        .into_inner();
    assert!(missing.missing.is_empty(), "{missing:?}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    // (A no-op update counts the rows left.)
    while server.execute("UPDATE requests SET created_us = created_us").await.unwrap() > 0 {
        assert!(std::time::Instant::now() < deadline, "old idempotency replies were not forgotten");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
