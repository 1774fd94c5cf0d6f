//! Several `baton-server` processes on one Postgres: gapless revisions across instances,
//! watchers on one instance see writes made through the other, leases expire exactly once
//! with two reapers racing, and a Postgres restart under load is ridden out.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use baton_proto::v1::{
    AgentKind, Event, EventKind, GetSessionRequest, ListMemoryRequest, SessionStatus, StartSessionRequest,
    WatchCursor, WatchRequest,
};
use baton_tests::postgres::Cluster;
use baton_tests::{Backend, Clients, Server};
use tokio_stream::StreamExt as _;
use tonic::Code;

use crate::{all_events, assert_gapless, brief_text, project, put_note, write};

/// A watch on one project from revision 0.
async fn watch_from_start(c: &Clients, project: &str) -> tonic::Streaming<Event> {
    let mut events = c.events.clone();
    events
        .watch(WatchRequest {
            cursors: vec![WatchCursor { project: project.to_owned(), after_revision: 0 }],
            kinds: vec![],
        })
        .await
        .unwrap()
        .into_inner()
}

/// Collects a watch stream's events from revision 0 until `until` events arrived.
fn watch_all(c: &Clients, project: &str, until: usize) -> tokio::task::JoinHandle<Vec<Event>> {
    let c = c.clone();
    let project = project.to_owned();
    tokio::spawn(async move {
        let mut stream = watch_from_start(&c, &project).await;
        let mut got = Vec::new();
        while got.len() < until {
            match tokio::time::timeout(Duration::from_mins(1), stream.next()).await {
                Ok(Some(Ok(event))) => got.push(event),
                other => panic!("watch ended after {} events: {other:?}", got.len()),
            }
        }
        got
    })
}

fn assert_in_order(events: &[Event], n: usize, who: &str) {
    let revisions: Vec<i64> = events.iter().map(|e| e.revision).collect();
    assert_eq!(revisions, (1..=n as i64).collect::<Vec<_>>(), "{who} saw a gap, a duplicate or disorder");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_share_one_postgres() {
    let a = Server::start(Backend::Postgres).await.unwrap();
    let b = Server::start_on(Backend::Postgres, &a.database_url, &[]).unwrap();
    let (ca, cb) = (a.clients().await, b.clients().await);
    let p = project();
    const WRITERS: usize = 8;
    const EACH: usize = 15;
    let total = WRITERS * EACH;
    let on_a = watch_all(&ca, &p, total);
    let on_b = watch_all(&cb, &p, total);

    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let mut c = if w % 2 == 0 { ca.clone() } else { cb.clone() };
        let p = p.clone();
        writers.push(tokio::spawn(async move {
            for i in 0..EACH {
                // Half on one shared key (conflicts across instances), half on own keys.
                let key = if i % 2 == 0 { "shared".to_owned() } else { format!("w{w}") };
                put_note(&mut c, &p, &key, &format!("writer {w} round {i}"), write()).await.unwrap();
            }
        }));
    }
    for w in writers {
        w.await.unwrap();
    }
    let mut c = ca.clone();
    let events = all_events(&mut c, &p).await;
    assert_eq!(events.len(), total);
    assert_gapless(&events);
    // Each watcher got every event, including those written through the other instance.
    assert_in_order(&on_a.await.unwrap(), total, "the watcher on instance A");
    assert_in_order(&on_b.await.unwrap(), total, "the watcher on instance B");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_expire_exactly_once_with_two_reapers() {
    let args = ["--reaper-interval", "20ms"];
    let a = Server::start_with(Backend::Postgres, &args).await.unwrap();
    let b = Server::start_on(Backend::Postgres, &a.database_url, &args).unwrap();
    let mut c = a.clients().await;
    let p = project();
    let mut ids = Vec::new();
    for _ in 0..12 {
        let s = crate::start(
            &mut c,
            StartSessionRequest {
                project: p.clone(),
                agent: AgentKind::Custom as i32,
                lease_ttl_ms: 300,
                write: write(),
                ..Default::default()
            },
        )
        .await;
        ids.push(s.id);
    }
    let mut cb = b.clients().await;
    let deadline = Instant::now() + Duration::from_secs(20);
    for id in &ids {
        loop {
            let s = cb
                .sessions
                .get_session(GetSessionRequest { session_id: id.clone() })
                .await
                .unwrap()
                .into_inner()
                .session
                .unwrap();
            if s.status == SessionStatus::Crashed as i32 {
                break;
            }
            assert!(Instant::now() < deadline, "session {id} not marked crashed: {s:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    // Give both reapers more turns to get it wrong.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let events = all_events(&mut c, &p).await;
    assert_gapless(&events);
    for id in &ids {
        let crashes = events
            .iter()
            .filter(|e| e.kind == EventKind::SessionStatusChanged as i32 && &e.entity_id == id)
            .count();
        assert_eq!(crashes, 1, "session {id} was marked {crashes} times");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_restart_under_load() {
    let mut cluster = Cluster::create().unwrap();
    let url = cluster.fresh_database().await.unwrap();
    let server = Server::start_on(Backend::Postgres, &url, &[]).unwrap();
    let c = server.clients().await;
    let p = project();

    // A watcher connected before the outage.
    let mut stream = watch_from_start(&c, &p).await;

    // Writers that keep going through the outage, recording what was acknowledged.
    let acked = Arc::new(Mutex::new(Vec::<String>::new()));
    let refusals = Arc::new(Mutex::new(Vec::<(Code, String)>::new()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..4 {
        let (mut c, p, acked, refusals, stop) =
            (c.clone(), p.clone(), acked.clone(), refusals.clone(), stop.clone());
        writers.push(tokio::spawn(async move {
            let mut i = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let key = format!("w{w}-{i}");
                match put_note(&mut c, &p, &key, "written", write()).await {
                    Ok(_) => acked.lock().unwrap().push(key),
                    Err(s) => {
                        refusals.lock().unwrap().push((s.code(), s.message().to_owned()));
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
                i += 1;
            }
        }));
    }
    let wait_acks = |n: usize| {
        let acked = acked.clone();
        async move {
            let deadline = Instant::now() + Duration::from_mins(1);
            while acked.lock().unwrap().len() < n {
                assert!(Instant::now() < deadline, "writes did not get through");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    wait_acks(20).await;
    cluster.stop(true);
    let during = acked.lock().unwrap().len();
    // While Postgres is down, requests answer UNAVAILABLE (after the pool's wait).
    let deadline = Instant::now() + Duration::from_secs(30);
    while refusals.lock().unwrap().is_empty() {
        assert!(Instant::now() < deadline, "no request was refused while Postgres was down");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    cluster.start().unwrap();
    // No server restart: writes get through again by themselves.
    wait_acks(during + 20).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for w in writers {
        w.await.unwrap();
    }
    for (code, message) in refusals.lock().unwrap().iter() {
        assert_eq!(*code, Code::Unavailable, "{message}");
        assert!(
            !message.contains("postgres") && !message.contains("sqlx"),
            "internal detail leaked: {message}"
        );
    }

    // Every acknowledged write is stored; revisions are gapless.
    let mut c = c.clone();
    let stored: HashSet<String> = c
        .memory
        .list_memory(ListMemoryRequest { project: p.clone(), include_evicted: true, ..Default::default() })
        .await
        .unwrap()
        .into_inner()
        .entries
        .into_iter()
        .map(|e| e.key)
        .collect();
    for key in acked.lock().unwrap().iter() {
        assert!(stored.contains(key), "acknowledged write {key} is missing");
    }
    let all = all_events(&mut c, &p).await;
    assert_gapless(&all);

    // The watch stream opened before the outage carried on: every event, in order.
    let mut seen = Vec::new();
    while seen.len() < all.len() {
        match tokio::time::timeout(Duration::from_secs(30), stream.next()).await {
            Ok(Some(Ok(e))) => seen.push(e),
            other => panic!("watch stream broke after {} of {} events: {other:?}", seen.len(), all.len()),
        }
    }
    assert_in_order(&seen, all.len(), "the watcher");
}

/// Another instance's commits wake this instance's watchers through NOTIFY (sent after the
/// commit, coalesced): with polling set to an hour, only the notification can deliver.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_on_one_instance_wake_watchers_on_another() {
    let a = Server::start(Backend::Postgres).await.unwrap();
    let b = Server::start_on(Backend::Postgres, &a.database_url, &["--watch-poll", "1h"]).unwrap();
    let (ca, cb) = (a.clients().await, b.clients().await);
    let p = project();
    let mut writer = ca.clone();
    put_note(&mut writer, &p, "first", "before the watch", write()).await.unwrap();
    let mut stream = watch_from_start(&cb, &p).await;
    // The first comes from the table (catch-up); then B follows the project.
    let first = tokio::time::timeout(Duration::from_secs(30), stream.next()).await.unwrap().unwrap().unwrap();
    assert_eq!(first.revision, 1);
    for i in 2..=4 {
        put_note(&mut writer, &p, &format!("k{i}"), "through instance A", write()).await.unwrap();
        let next = tokio::time::timeout(Duration::from_secs(30), stream.next())
            .await
            .unwrap_or_else(|_| panic!("revision {i} written through A never reached the watcher on B"))
            .unwrap()
            .unwrap();
        assert_eq!(next.revision, i);
    }
}

/// Each instance keeps briefs' memory sections, keyed by the project's memory revision in
/// the database: a note written through one instance is in the next brief of the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_written_on_one_instance_is_in_the_others_next_brief() {
    let a = Server::start(Backend::Postgres).await.unwrap();
    let b = Server::start_on(Backend::Postgres, &a.database_url, &[]).unwrap();
    let (mut ca, mut cb) = (a.clients().await, b.clients().await);
    let p = project();
    put_note(&mut cb, &p, "arch", "hub and spokes", write()).await.unwrap();
    assert!(brief_text(&mut cb, &p, "").await.contains("arch: hub and spokes"));
    put_note(&mut ca, &p, "arch", "layers", write()).await.unwrap();
    let text = brief_text(&mut cb, &p, "").await;
    assert!(text.contains("arch: layers") && !text.contains("hub and spokes"), "{text}");
}
