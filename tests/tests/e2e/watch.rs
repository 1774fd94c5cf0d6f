//! Watch: replay then live, in revision order, every revision exactly once, under
//! concurrent writers; several projects; kind filters; a watcher that falls behind is
//! caught up from the table.

use std::time::Duration;

use baton_proto::v1::{Event, EventKind, ListEventsRequest, WatchCursor, WatchRequest};
use baton_tests::{Backend, Clients, Server, both};
use futures::StreamExt;
use tonic::Streaming;

use crate::{project, put_note, start_session, write};

pub async fn open(c: &mut Clients, cursors: &[(&str, i64)], kinds: Vec<i32>) -> Streaming<Event> {
    let cursors =
        cursors.iter().map(|(p, r)| WatchCursor { project: (*p).into(), after_revision: *r }).collect();
    c.events.watch(WatchRequest { cursors, kinds }).await.unwrap().into_inner()
}

/// Reads until `project` reaches revision `until`; checks order and uniqueness on the way.
pub async fn collect(stream: &mut Streaming<Event>, project: &str, after: i64, until: i64) -> Vec<Event> {
    let mut got = Vec::new();
    let mut last = after;
    while last < until {
        let next = tokio::time::timeout(Duration::from_secs(30), stream.next()).await;
        let event = next.expect("watch stalled").expect("stream ended").expect("stream error");
        if event.project != project {
            continue;
        }
        assert!(event.revision > last, "out of order or duplicate: {} after {last}", event.revision);
        last = event.revision;
        got.push(event);
    }
    got
}

async fn replay_then_live_exactly_once(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    for i in 0..20 {
        put_note(&mut c, &p, &format!("pre{i}"), "x", write()).await.unwrap();
    }
    // Watchers from the start, from the middle, and from the head.
    let mut from_zero = open(&mut c, &[(&p, 0)], vec![]).await;
    let mut from_five = open(&mut c, &[(&p, 5)], vec![]).await;
    let mut from_head = open(&mut c, &[(&p, 20)], vec![]).await;
    let writers = (0..8).map(|w| {
        let mut c = c.clone();
        let p = p.clone();
        tokio::spawn(async move {
            for i in 0..25 {
                // Half on one hot key, half spread.
                let key = if i % 2 == 0 { "hot".to_owned() } else { format!("w{w}-{i}") };
                put_note(&mut c, &p, &key, &format!("{w}/{i}"), write()).await.unwrap();
            }
        })
    });
    let writers: Vec<_> = writers.collect();
    for w in writers {
        w.await.unwrap();
    }
    let head = 220;
    for (stream, after) in [(&mut from_zero, 0), (&mut from_five, 5), (&mut from_head, 20)] {
        let events = collect(stream, &p, after, head).await;
        let revisions: Vec<i64> = events.iter().map(|e| e.revision).collect();
        assert_eq!(revisions, ((after + 1)..=head).collect::<Vec<_>>());
    }
}
both!(replay_then_live_exactly_once);

async fn several_projects_and_kinds(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let (a, b) = (project(), project());
    let mut both_projects = open(&mut c, &[(&a, 0), (&b, 0)], vec![]).await;
    let mut sessions_only = open(&mut c, &[(&a, 0)], vec![EventKind::SessionStarted as i32]).await;
    put_note(&mut c, &a, "k", "1", write()).await.unwrap();
    start_session(&mut c, &a).await;
    put_note(&mut c, &b, "k", "1", write()).await.unwrap();
    put_note(&mut c, &a, "k", "2", write()).await.unwrap();
    let mut per_project: std::collections::HashMap<String, Vec<i64>> = std::collections::HashMap::default();
    while per_project.values().map(Vec::len).sum::<usize>() < 4 {
        let e = tokio::time::timeout(Duration::from_secs(30), both_projects.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        per_project.entry(e.project).or_default().push(e.revision);
    }
    assert_eq!(per_project[&a], vec![1, 2, 3]);
    assert_eq!(per_project[&b], vec![1]);
    let e =
        tokio::time::timeout(Duration::from_secs(30), sessions_only.next()).await.unwrap().unwrap().unwrap();
    assert_eq!((e.kind, e.revision), (EventKind::SessionStarted as i32, 2));
    assert!(matches!(e.value, Some(baton_proto::v1::event::Value::Session(_))));
}
both!(several_projects_and_kinds);

async fn slow_watcher_is_caught_up(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let mut slow = open(&mut c, &[(&p, 0)], vec![]).await;
    // Far more events than the feed and stream buffers hold, written while it reads nothing.
    let total = 3000;
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let mut c = c.clone();
            let p = p.clone();
            tokio::spawn(async move {
                for i in 0..total / 4 {
                    put_note(&mut c, &p, &format!("{w}-{}", i % 7), "v", write()).await.unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
    let events = collect(&mut slow, &p, 0, total).await;
    assert_eq!(events.len() as i64, total);
}
both!(slow_watcher_is_caught_up);

/// A write whose request is cancelled while its batch commits is kept, and its watchers get
/// it then: the wake-up runs in the writer (`writer::Done::on_commit`), not in the request, which is
/// gone. (The poll is off, and a fail point holds each commit's report for 3 s: the request
/// is cancelled once its write is in the table; a wake-up left to it never came.)
async fn a_write_cancelled_while_it_commits_reaches_watchers(backend: Backend) {
    let mut server = Server::start_with(backend, &["--watch-poll", "1h"]).await.unwrap();
    server.env = vec![("FAILPOINTS".into(), "writer.committed=return(3000)".into())];
    server.restart().unwrap();
    let mut c = server.clients().await;
    let p = project();
    put_note(&mut c, &p, "first", "before the watch", write()).await.unwrap();
    let mut stream = open(&mut c, &[(&p, 1)], vec![]).await;
    // The watcher follows live once its replay of the table is done (else the replay could
    // find the write below in the table).
    put_note(&mut c, &p, "ready", "the watcher is live", write()).await.unwrap();
    assert_eq!(next(&mut stream).await.revision, 2);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let cancelled = tokio::spawn({
        let (mut c, p) = (c.clone(), p.clone());
        async move { put_note(&mut c, &p, "cancelled", "cancelled while it commits", write()).await }
    });
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    loop {
        let request = ListEventsRequest { project: p.clone(), after_revision: 2, ..Default::default() };
        if !c.events.list_events(request).await.unwrap().into_inner().events.is_empty() {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the write never committed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    cancelled.abort();
    assert!(cancelled.await.is_err(), "the request was to be cancelled while its commit's report was held");
    let event = tokio::time::timeout(Duration::from_secs(10), stream.next()).await;
    let event = event.expect("the kept write's event never reached the watcher").unwrap().unwrap();
    assert_eq!((event.revision, event.entity_id.ends_with("/cancelled")), (3, true), "{event:?}");
}
both!(a_write_cancelled_while_it_commits_reaches_watchers);

/// The next event within a few seconds.
async fn next(stream: &mut Streaming<Event>) -> Event {
    tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("an event within 10 s")
        .expect("the stream is open")
        .expect("not an error")
}

async fn watching_every_project(backend: Backend) {
    let server = Server::start_with(backend, &["--watch-poll", "100ms"]).await.unwrap();
    let mut c = server.clients().await;
    let (a, b) = (project(), project());
    put_note(&mut c, &a, "old", "before the watch", write()).await.unwrap();
    put_note(&mut c, &b, "old", "before the watch", write()).await.unwrap();
    let mut all = open(&mut c, &[], vec![]).await;

    // Existing projects: from now on (revision 2), not their history.
    put_note(&mut c, &a, "k", "a2", write()).await.unwrap();
    let e = next(&mut all).await;
    assert_eq!((e.project.as_str(), e.revision), (a.as_str(), 2));
    put_note(&mut c, &b, "k", "b2", write()).await.unwrap();
    let e = next(&mut all).await;
    assert_eq!((e.project.as_str(), e.revision), (b.as_str(), 2));
    // A project created while watching: from its first revision.
    let fresh = project();
    put_note(&mut c, &fresh, "k", "new", write()).await.unwrap();
    put_note(&mut c, &fresh, "k", "newer", write()).await.unwrap();
    let got: Vec<(String, i64)> = vec![next(&mut all).await, next(&mut all).await]
        .into_iter()
        .map(|e| (e.project, e.revision))
        .collect();
    assert_eq!(got, [(fresh.clone(), 1), (fresh.clone(), 2)]);

    // A project-scoped token sees only its project.
    let scoped =
        crate::access::token(&server, &["create", "--name", "a-only", "--role", "reader", "--project", &a]);
    let writer = crate::access::token(&server, &["create", "--name", "w", "--role", "writer"]);
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let mut mine =
        c.events.watch(crate::access::with(WatchRequest::default(), &scoped)).await.unwrap().into_inner();
    for p in [&b, &a] {
        c.memory
            .put_memory(crate::access::with(
                baton_proto::v1::PutMemoryRequest {
                    project: p.clone(),
                    category: "note".into(),
                    key: "k".into(),
                    op: baton_proto::v1::MemoryOp::Upsert as i32,
                    items: vec![baton_proto::v1::MemoryItem {
                        content: "scoped".into(),
                        rationale: String::new(),
                    }],
                    write: write(),
                    ..Default::default()
                },
                &writer,
            ))
            .await
            .unwrap();
    }
    let e = next(&mut mine).await;
    assert_eq!(e.project, a, "only project a reaches the scoped watcher");
}
both!(watching_every_project);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watching_every_project_is_capped() {
    let server = Server::start_with(Backend::Sqlite, &["--max-watch-projects", "2"]).await.unwrap();
    let mut c = server.clients().await;
    for _ in 0..3 {
        put_note(&mut c, &project(), "k", "v", write()).await.unwrap();
    }
    let status = c.events.watch(WatchRequest::default()).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    assert!(status.message().contains("--max-watch-projects"), "{status:?}");
}
