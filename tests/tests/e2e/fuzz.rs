//! Property tests of bad input (proptest): arbitrary requests (random text in every field,
//! huge and empty strings, invalid ids and enums, random clocks, deep checkpoint chains)
//! never panic the server, never corrupt what is stored, and always get a well-formed
//! answer: a reply, or a status other than INTERNAL/UNKNOWN with a message.
//! BATON_FUZZ_CASES sets the cases per request kind (default 150).

use std::collections::HashMap;

use baton_proto::v1::{
    CheckpointState, CreateCheckpointRequest, GetBriefRequest, ListCheckpointsRequest, ListEventsRequest,
    MemoryItem, PutMemoryRequest, StartSessionRequest, Task, WriteOptions,
};
use baton_tests::{Backend, Clients, Server};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use tonic::Code;

use crate::{all_events, assert_gapless, project, put_note, start_session, write};

/// Text as a careless or hostile client sends it.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => ".{0,24}",
        2 => any::<String>(),
        1 => Just(String::new()),
        1 => Just(" \t\n".to_owned()),
        1 => (1usize..3).prop_map(|n| "x".repeat(n * 20_000)),
        1 => Just("\u{0}\u{7}\u{1b}[2J\u{202e}".to_owned()),
    ]
}

/// Projects: mostly the control project and a few others, sometimes garbage.
fn project_of(control: String) -> impl Strategy<Value = String> {
    prop_oneof![3 => Just(control), 2 => "github.com/fuzz/[a-c]", 1 => text()]
}

fn timestamp() -> impl Strategy<Value = Option<prost_types::Timestamp>> {
    proptest::option::of(
        (any::<i64>(), any::<i32>()).prop_map(|(seconds, nanos)| prost_types::Timestamp { seconds, nanos }),
    )
}

fn write_options() -> impl Strategy<Value = Option<WriteOptions>> {
    proptest::option::of(
        (
            text(),
            proptest::option::of(any::<i64>()),
            any::<i32>(),
            any::<i32>(),
            text(),
            timestamp(),
            timestamp(),
            text(),
        )
            .prop_map(
                |(request_id, base_revision, policy, agent, host, written_at, client_now, session_id)| {
                    WriteOptions {
                        request_id,
                        base_revision,
                        policy,
                        agent,
                        host,
                        written_at,
                        client_now,
                        session_id,
                        ..Default::default()
                    }
                },
            ),
    )
}

/// One request, boxed so that every kind fits the same runner.
type Call = std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), tonic::Status>> + Send>>;

fn check(kind: &str, result: Result<(), tonic::Status>) -> Result<(), TestCaseError> {
    if let Err(status) = result {
        prop_assert!(
            !matches!(status.code(), Code::Internal | Code::Unknown | Code::DataLoss | Code::Unavailable),
            "{kind}: {status:?}"
        );
        prop_assert!(!status.message().is_empty(), "{kind}: a status without a message");
    }
    Ok(())
}

fn run<S: Strategy>(name: &str, cases: u32, strategy: S, test: impl Fn(S::Value) -> Result<(), TestCaseError>)
where
    S::Value: std::fmt::Debug,
{
    let mut runner = TestRunner::new(Config { cases, failure_persistence: None, ..Config::default() });
    if let Err(e) = runner.run(&strategy, test) {
        panic!("{name}: {e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arbitrary_requests_never_hurt() {
    let cases: u32 = std::env::var("BATON_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(150);
    let server = Server::start(Backend::Sqlite).await.unwrap();
    let mut c = server.clients().await;
    let control = project();
    let session = start_session(&mut c, &control).await;
    put_note(&mut c, &control, "control", "must survive", write()).await.unwrap();
    // A deep chain of checkpoints.
    for i in 0..200 {
        c.checkpoints
            .create_checkpoint(CreateCheckpointRequest {
                session_id: session.id.clone(),
                kind: baton_proto::v1::CheckpointKind::Manual as i32,
                reason: format!("depth {i}"),
                write: write(),
                ..Default::default()
            })
            .await
            .unwrap();
    }
    let block = |c: &Clients, f: &dyn Fn(Clients) -> Call| {
        tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(f(c.clone())))
    };

    let memory = (
        project_of(control.clone()),
        prop_oneof![Just("note".to_owned()), Just("goal".to_owned()), Just("decision".to_owned()), text()],
        text(),
        any::<i32>(),
        text(),
        proptest::collection::vec((text(), text()), 0..4),
        write_options(),
    );
    run("PutMemory", cases, memory, |(project, category, key, op, branch, items, write)| {
        let request = PutMemoryRequest {
            project,
            category,
            key,
            op,
            branch,
            items: items.into_iter().map(|(content, rationale)| MemoryItem { content, rationale }).collect(),
            write,
        };
        check(
            "PutMemory",
            block(&c, &move |mut c| {
                let r = request.clone();
                Box::pin(async move { c.memory.put_memory(r).await.map(|_| ()) })
            }),
        )
    });

    let start = (
        project_of(control.clone()),
        any::<i32>(),
        text(),
        text(),
        text(),
        any::<i64>(),
        proptest::collection::hash_map(text(), text(), 0..4),
        write_options(),
    );
    run(
        "StartSession",
        cases,
        start,
        |(project, agent, agent_session_id, goal, cwd, lease_ttl_ms, metadata, write)| {
            let request = StartSessionRequest {
                project,
                agent,
                agent_session_id,
                goal,
                cwd,
                lease_ttl_ms,
                metadata: metadata.into_iter().collect::<HashMap<_, _>>(),
                write,
                ..Default::default()
            };
            check(
                "StartSession",
                block(&c, &move |mut c| {
                    let r = request.clone();
                    Box::pin(async move { c.sessions.start_session(r).await.map(|_| ()) })
                }),
            )
        },
    );

    let sid = session.id.clone();
    let checkpoint = (
        prop_oneof![Just(sid), text()],
        proptest::option::of(text()),
        any::<i32>(),
        text(),
        proptest::collection::vec((text(), text(), any::<i32>()), 0..4),
        proptest::collection::vec(any::<u8>(), 0..2048),
        write_options(),
    );
    run(
        "CreateCheckpoint",
        cases,
        checkpoint,
        |(session_id, parent_id, kind, reason, tasks, payload, write)| {
            let request = CreateCheckpointRequest {
                session_id,
                parent_id,
                kind,
                reason,
                state: Some(CheckpointState {
                    active_tasks: tasks
                        .into_iter()
                        .map(|(content, status, progress)| Task {
                            content,
                            status,
                            progress,
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                }),
                payload,
                write,
                ..Default::default()
            };
            check(
                "CreateCheckpoint",
                block(&c, &move |mut c| {
                    let r = request.clone();
                    Box::pin(async move { c.checkpoints.create_checkpoint(r).await.map(|_| ()) })
                }),
            )
        },
    );

    let reads = (
        project_of(control.clone()),
        any::<i64>(),
        any::<i32>(),
        proptest::collection::vec(any::<i32>(), 0..4),
        any::<i32>(),
        text(),
    );
    run("reads", cases, reads, |(project, after_revision, limit, kinds, budget_chars, branch)| {
        let events = ListEventsRequest {
            project: project.clone(),
            after_revision,
            limit,
            kinds,
            ..Default::default()
        };
        let brief = GetBriefRequest { project, budget_chars, branch, ..Default::default() };
        check(
            "ListEvents",
            block(&c, &move |mut c| {
                let r = events.clone();
                Box::pin(async move { c.events.list_events(r).await.map(|_| ()) })
            }),
        )?;
        check(
            "GetBrief",
            block(&c, &move |mut c| {
                let r = brief.clone();
                Box::pin(async move { c.brief.get_brief(r).await.map(|_| ()) })
            }),
        )
    });

    // Nothing panicked, and what was stored is intact.
    assert!(!server.log().contains("panicked"), "{}", server.log());
    let events = all_events(&mut c, &control).await;
    assert_gapless(&events);
    let listed = c
        .checkpoints
        .list_checkpoints(ListCheckpointsRequest {
            session_id: session.id.clone(),
            include_state: true,
            page_size: 1000,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(listed.checkpoints.len() >= 200);
    assert!(listed.checkpoints.iter().all(|cp| !cp.corrupt), "a checkpoint fails its digest");
    let depth = listed.checkpoints.iter().filter(|cp| cp.reason.starts_with("depth ")).count();
    assert_eq!(depth, 200);
}
