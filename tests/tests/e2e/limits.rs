//! Limits: request size per message kind (checked before the message is read), request
//! rate per token, watch streams per token; each RESOURCE_EXHAUSTED naming the limit, and
//! none affects another token.

use std::time::{Duration, Instant};

use baton_proto::v1::{
    CheckpointKind, CreateCheckpointRequest, ListMemoryRequest, StartSessionRequest, WatchCursor,
    WatchRequest,
};
use baton_tests::{Backend, Server};
use tonic::Code;

use crate::access::{token, with};
use crate::{code, project, put_note, start_session, write};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_sizes_per_message_kind() {
    let server = Server::start_with(
        Backend::Sqlite,
        &[
            "--max-memory-request-bytes",
            "20000",
            "--max-request-bytes",
            "8000",
            "--max-checkpoint-bytes",
            "100000",
        ],
    )
    .await
    .unwrap();
    let mut c = server.clients().await;
    let p = project();

    // Memory: a 15 KB note fits the memory limit although it is over the general one.
    put_note(&mut c, &p, "fits", &"m".repeat(15_000), write()).await.unwrap();
    let (status, message) = code(put_note(&mut c, &p, "big", &"m".repeat(30_000), write()).await);
    assert_eq!(status, Code::ResourceExhausted, "{message}");
    assert!(
        message.contains("PutMemory")
            && message.contains("20000")
            && message.contains("--max-memory-request-bytes"),
        "{message}"
    );

    // Everything else: the general limit.
    let (status, message) = code(
        c.sessions
            .start_session(StartSessionRequest {
                project: p.clone(),
                goal: "g".repeat(10_000),
                write: write(),
                ..Default::default()
            })
            .await,
    );
    assert_eq!(status, Code::ResourceExhausted, "{message}");
    assert!(message.contains("StartSession") && message.contains("--max-request-bytes"), "{message}");

    // Checkpoints: their own limit (plus room for the envelope), far above the general one.
    let s = start_session(&mut c, &p).await;
    let checkpoint = |payload: usize| CreateCheckpointRequest {
        session_id: s.id.clone(),
        kind: CheckpointKind::Manual as i32,
        reason: "size test".into(),
        payload: vec![7; payload],
        payload_content_type: "application/octet-stream".into(),
        write: write(),
        ..Default::default()
    };
    c.checkpoints.create_checkpoint(checkpoint(90_000)).await.unwrap();
    let (status, message) = code(c.checkpoints.create_checkpoint(checkpoint(3 * 1024 * 1024)).await);
    assert_eq!(status, Code::ResourceExhausted, "{message}");
    assert!(message.contains("--max-checkpoint-bytes"), "{message}");

    // Nothing of the refused requests was stored, and the server goes on serving.
    let listed = c
        .memory
        .list_memory(ListMemoryRequest { project: p.clone(), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.entries.iter().map(|e| e.key.as_str()).collect::<Vec<_>>(), ["fits"]);
    put_note(&mut c, &p, "after", "still serving", write()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limits_are_per_token() {
    let server =
        Server::start_with(Backend::Sqlite, &["--rate-limit", "5", "--rate-burst", "5"]).await.unwrap();
    let greedy = token(&server, &["create", "--name", "greedy", "--role", "writer"]);
    let polite = token(&server, &["create", "--name", "polite", "--role", "writer"]);
    let mut c = server.clients().await;
    let p = project();
    let list = || ListMemoryRequest { project: p.clone(), ..Default::default() };

    let mut limited = None;
    for _ in 0..40 {
        if let Err(status) = c.memory.list_memory(with(list(), &greedy)).await {
            limited = Some(status);
            break;
        }
    }
    let status = limited.expect("40 quick requests at 5/s must hit the limit");
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(
        status.message().contains("5 requests/s") && status.message().contains("--rate-limit"),
        "{status:?}"
    );

    // The other token is not affected while the first is throttled.
    for _ in 0..5 {
        c.memory.list_memory(with(list(), &polite)).await.unwrap();
    }
    // And the throttled one recovers once its bucket refills.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match c.memory.list_memory(with(list(), &greedy)).await {
            Ok(_) => break,
            Err(s) if s.code() == Code::ResourceExhausted && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(s) => panic!("greedy did not recover: {s:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_streams_are_capped_per_token() {
    let server = Server::start_with(Backend::Sqlite, &["--max-watches-per-token", "2"]).await.unwrap();
    let orchestrator = token(&server, &["create", "--name", "orchestrator", "--role", "reader"]);
    let dashboard = token(&server, &["create", "--name", "dashboard", "--role", "reader"]);
    let c = server.clients().await;
    let p = project();
    let watch = |secret: &str| {
        let mut events = c.events.clone();
        let request = with(
            WatchRequest {
                cursors: vec![WatchCursor { project: p.clone(), after_revision: 0 }],
                kinds: vec![],
            },
            secret,
        );
        async move { events.watch(request).await }
    };
    let first = watch(&orchestrator).await.unwrap();
    let _second = watch(&orchestrator).await.unwrap();
    let status = watch(&orchestrator).await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(
        status.message().contains("orchestrator") && status.message().contains("--max-watches-per-token 2"),
        "{status:?}"
    );
    // Another token still gets its streams.
    let _other = watch(&dashboard).await.unwrap();

    // Closing a stream frees its slot.
    drop(first);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match watch(&orchestrator).await {
            Ok(_) => break,
            Err(s) if s.code() == Code::ResourceExhausted && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(s) => panic!("the slot was not freed: {s:?}"),
        }
    }
}
