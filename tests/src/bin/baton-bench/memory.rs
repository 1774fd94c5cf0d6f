//! The memory scenario: what a writer can plant within every limit, read back by readers
//! that ignore paging and by watchers that stop reading, while the server's peak resident
//! memory is measured. The server is one of its own, so the peak (VmHWM) is this load's.
//!
//! Planted: a session of 60 checkpoints of 7.5 MB (4 MB of state) and nine more unfinished
//! sessions with such a head; 40 memory writes of 100 × 15 KB items (1.5 MB events, whose
//! entries are evicted in turn); notes on 128 branches. Read at once: 4 callers of each of
//! ListCheckpoints with states, ListEvents with limit 10,000, ListMemory with evicted
//! entries, GetBrief on a random branch; 6 watchers replaying the log that never read.

use std::time::{Duration, Instant};

use baton_proto::v1::{
    AgentKind, CheckpointKind, CheckpointState, CreateCheckpointRequest, GetBriefRequest, HeartbeatRequest,
    ListCheckpointsRequest, ListEventsRequest, ListMemoryRequest, MemoryItem, MemoryOp, PutMemoryRequest,
    SessionStatus, StartSessionRequest, Task, WatchCursor, WatchRequest,
};
use baton_tests::{Backend, Clients, Server};

use crate::Row;
use crate::scenarios::checkpoint_text;
use crate::stats::rss_mib;

/// The target: the server's peak resident memory under this load.
const TARGET_MIB: f64 = 512.0;

/// How much is planted: full, or a fifth for `--quick`.
struct Plant {
    checkpoints: usize,
    memory_writes: usize,
    window: Duration,
}

pub async fn memory(backend: Backend, quick: bool) -> Row {
    let plant = if quick {
        Plant { checkpoints: 12, memory_writes: 8, window: Duration::from_secs(3) }
    } else {
        Plant { checkpoints: 60, memory_writes: 40, window: Duration::from_secs(15) }
    };
    let server = Server::start_with(backend, &["--log-level", "info"]).await.expect("start baton-server");
    let pid = server.pid().expect("server pid");
    let channel = server.channel().await;
    let c = clients(channel);
    let project = "bench/memory".to_owned();
    let planted_at = Instant::now();
    let planted = plant_all(&c, &project, &plant).await;
    eprintln!("  planted {planted} MB in {:.0?}", planted_at.elapsed());
    let after_planting = peak_mib(pid);

    // Watchers that never read: each replays from the start of the log. Each on a
    // connection of its own: on the readers' connection, their unread data would use up the
    // connection's HTTP/2 window and stall the readers' replies too (a client-side stall,
    // not the server's memory).
    let stalled = stalled_watchers(&server, &project).await;
    let session = first_session(&c, &project).await;
    let stop = Instant::now() + plant.window;
    let mut readers = Vec::new();
    for i in 0..16 {
        let c = c.clone();
        let (project, session) = (project.clone(), session.clone());
        readers.push(tokio::spawn(async move { read_until(&c, &project, &session, i, stop).await }));
    }
    let mut calls = 0;
    for r in readers {
        calls += r.await.unwrap();
    }
    let peak = peak_mib(pid);
    drop(stalled);
    eprintln!(
        "  {calls} reads in {:?}; peak RSS {after_planting:.0} MiB after planting, {peak:.0} MiB after reading",
        plant.window
    );
    Row {
        scenario: format!(
            "server peak RSS: {planted} MB planted; 16 readers ignoring paging (checkpoints with states, events, \
             memory with evicted, briefs over 128 branches) and 6 stalled watchers, {:?}",
            plant.window
        ),
        baton: format!("{peak:.0} MiB ({calls} reads)"),
        floor: format!("{after_planting:.0} MiB after planting"),
        ratio: format!("{:.0}% of target", peak / TARGET_MIB * 100.0),
        target: format!("< {TARGET_MIB:.0} MiB"),
        met: Some(peak < TARGET_MIB),
    }
}

/// Clients that take replies of any size (a first page may hold one 8 MB checkpoint).
fn clients(channel: tonic::transport::Channel) -> Clients {
    const MAX: usize = 256 * 1024 * 1024;
    let mut c = Clients::new(channel);
    c.checkpoints = c.checkpoints.max_decoding_message_size(MAX);
    c.events = c.events.max_decoding_message_size(MAX);
    c.memory = c.memory.max_decoding_message_size(MAX);
    c.brief = c.brief.max_decoding_message_size(MAX);
    c
}

/// The server's peak resident memory so far (VmHWM), in MiB.
fn peak_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kb = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<f64>().ok());
    kb.map_or_else(|| rss_mib(pid).unwrap_or(0.0), |kb| kb / 1024.0)
}

/// Plants everything; returns the megabytes written.
async fn plant_all(c: &Clients, project: &str, plant: &Plant) -> usize {
    let mut bytes = 0;
    let mut sessions = Vec::new();
    for s in 0..10 {
        let started = c
            .sessions
            .clone()
            .start_session(StartSessionRequest {
                project: project.into(),
                agent: AgentKind::Custom as i32,
                host: format!("host{s}"),
                goal: "plant".into(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        sessions.push(started.session.unwrap().id);
    }
    for (s, session) in sessions.iter().enumerate() {
        let count = if s == 0 { plant.checkpoints } else { 1 };
        bytes += plant_session(c, session, s, count).await;
    }
    for w in 0..plant.memory_writes {
        let items = (0..100)
            .map(|i| MemoryItem {
                content: String::from_utf8(checkpoint_text(15_000, (w * 100 + i) as u64)).unwrap(),
                rationale: String::new(),
            })
            .collect();
        bytes += 1_500_000;
        c.memory
            .clone()
            .put_memory(PutMemoryRequest {
                project: project.into(),
                category: "decision".into(),
                op: MemoryOp::Append as i32,
                items,
                ..Default::default()
            })
            .await
            .unwrap();
    }
    for b in 0..128 {
        c.memory
            .clone()
            .put_memory(PutMemoryRequest {
                project: project.into(),
                category: "note".into(),
                branch: format!("b{b}"),
                key: "k".into(),
                op: MemoryOp::Upsert as i32,
                items: vec![MemoryItem { content: format!("branch {b}"), rationale: String::new() }],
                ..Default::default()
            })
            .await
            .unwrap();
    }
    bytes / 1_000_000
}

/// `count` checkpoints of about 7.5 MB in session number `s`, left idle; returns the bytes.
async fn plant_session(c: &Clients, session: &str, s: usize, count: usize) -> usize {
    let mut bytes = 0;
    for i in 0..count {
        let seed = (s * 1000 + i) as u64;
        let tasks = (0..400)
            .map(|t| Task {
                id: t.to_string(),
                content: String::from_utf8(checkpoint_text(10_000, seed * 1000 + t)).unwrap(),
                status: "pending".into(),
                progress: 0,
            })
            .collect();
        let payload = checkpoint_text(3_500_000, seed);
        bytes += 7_500_000;
        c.checkpoints
            .clone()
            .create_checkpoint(CreateCheckpointRequest {
                session_id: session.to_owned(),
                kind: CheckpointKind::Auto as i32,
                reason: "plant".into(),
                state: Some(CheckpointState { active_tasks: tasks, ..Default::default() }),
                payload,
                payload_content_type: "text/plain".into(),
                ..Default::default()
            })
            .await
            .unwrap();
    }
    // Unfinished: the brief shows these sessions and their heads.
    c.sessions
        .clone()
        .heartbeat(HeartbeatRequest {
            session_id: session.to_owned(),
            status: SessionStatus::Idle as i32,
            ..Default::default()
        })
        .await
        .unwrap();
    bytes
}

/// One reader: one kind of read (`which` of 4), ignoring paging, until `stop`; returns the
/// calls made.
async fn read_until(c: &Clients, project: &str, session: &str, which: usize, stop: Instant) -> u64 {
    let mut calls = 0u64;
    while Instant::now() < stop {
        let read = match which % 4 {
            0 => c
                .checkpoints
                .clone()
                .list_checkpoints(ListCheckpointsRequest {
                    session_id: session.to_owned(),
                    include_state: true,
                    ..Default::default()
                })
                .await
                .map(drop),
            1 => c
                .events
                .clone()
                .list_events(ListEventsRequest {
                    project: project.to_owned(),
                    limit: 10_000,
                    ..Default::default()
                })
                .await
                .map(drop),
            2 => c
                .memory
                .clone()
                .list_memory(ListMemoryRequest {
                    project: project.to_owned(),
                    include_evicted: true,
                    ..Default::default()
                })
                .await
                .map(drop),
            _ => c
                .brief
                .clone()
                .get_brief(GetBriefRequest {
                    project: project.to_owned(),
                    branch: format!("b{}", calls % 128),
                    ..Default::default()
                })
                .await
                .map(drop),
        };
        match read {
            Ok(()) => calls += 1,
            // The server sheds load when its pool stays exhausted (a slow machine's stall):
            // the read is tried again, and not counted.
            Err(status) if status.code() == tonic::Code::Unavailable => {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            Err(status) => panic!("read failed: {status:?}"),
        }
    }
    calls
}

/// Six watchers that never read, each replaying from the start of the log.
async fn stalled_watchers(server: &Server, project: &str) -> Vec<tonic::Streaming<baton_proto::v1::Event>> {
    let mut stalled = Vec::new();
    for _ in 0..6 {
        let mut events = clients(server.channel().await).events;
        let stream = events
            .watch(WatchRequest {
                cursors: vec![WatchCursor { project: project.to_owned(), after_revision: 0 }],
                kinds: vec![],
            })
            .await
            .unwrap()
            .into_inner();
        stalled.push(stream);
    }
    stalled
}

async fn first_session(c: &Clients, project: &str) -> String {
    let list = c
        .sessions
        .clone()
        .list_sessions(baton_proto::v1::ListSessionsRequest {
            project: project.into(),
            page_size: 1000,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    // The oldest: the one with the 60 checkpoints.
    list.sessions.last().unwrap().id.clone()
}
