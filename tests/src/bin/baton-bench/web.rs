//! The web view's rows: each page timed from an HTTP client on its full response, with
//! 10,000 sessions and 100,000 checkpoints planted (a tenth with `--quick`), next to the gRPC
//! call the page reads through; a session of 1,000 checkpoints; a change reaching an open
//! activity stream beside the same change reaching a gRPC Watch; and small writes with ten
//! pages streaming next to the same writes without them, alternating in one run.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use baton_proto::v1::{
    AgentKind, CheckpointKind, CheckpointState, CreateCheckpointRequest, GetSessionRequest,
    ListCheckpointsRequest, ListEventsRequest, ListMemoryRequest, ListSessionsRequest, SearchRequest,
    StartSessionRequest, Task, WatchCursor, WatchRequest, WriteOptions,
};
use baton_tests::web::{Req, send, sign_in};
use baton_tests::{Backend, Clients, Server};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_stream::StreamExt as _;

use crate::scenarios::note;
use crate::stats::{Run, closed_loop, ms, sequential};
use crate::{Row, Sizes};

const PROJECT: &str = "bench/web";
const PAGE_P99: Duration = Duration::from_millis(50);
const BIG_SESSION_P99: Duration = Duration::from_millis(100);
/// The pace of the stream-latency scenario's writes.
const NOTE_EVERY: Duration = Duration::from_millis(20);

fn opts() -> WriteOptions {
    WriteOptions { request_id: uuid::Uuid::new_v4().to_string(), host: "bench".into(), ..Default::default() }
}

/// What was planted: a session with a few checkpoints and the one with many.
struct Planted {
    small: String,
    big: String,
}

async fn start(c: &Clients, i: usize) -> String {
    let request = StartSessionRequest {
        project: PROJECT.into(),
        agent: AgentKind::ClaudeCode as i32,
        host: format!("host-{}", i % 20),
        user: format!("user-{}", i % 50),
        branch: format!("branch-{}", i % 30),
        goal: format!("task number {i}: make the uploader retry with jitter"),
        write: Some(opts()),
        ..Default::default()
    };
    c.sessions.clone().start_session(request).await.unwrap().into_inner().session.unwrap().id
}

async fn checkpoint(c: &Clients, session: &str, i: usize) {
    let state = CheckpointState {
        active_tasks: vec![Task {
            content: format!("step {i}"),
            status: "in_progress".into(),
            ..Default::default()
        }],
        files_modified: vec![format!("src/file{}.rs", i % 40)],
        summary: format!("checkpoint {i} of the work"),
        ..Default::default()
    };
    let request = CreateCheckpointRequest {
        session_id: session.to_owned(),
        kind: CheckpointKind::Auto as i32,
        reason: format!("step {i}"),
        state: Some(state),
        write: Some(opts()),
        ..Default::default()
    };
    c.checkpoints.clone().create_checkpoint(request).await.unwrap();
}

/// `sessions` sessions of `per` checkpoints each, by 16 writers, and one of `big` checkpoints.
async fn plant(c: &Clients, sessions: usize, per: usize, big: usize) -> Planted {
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut writers = Vec::new();
    for _ in 0..16 {
        let (c, next) = (c.clone(), next.clone());
        writers.push(tokio::spawn(async move {
            let mut last = String::new();
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= sessions {
                    return last;
                }
                last = start(&c, i).await;
                for k in 0..per {
                    checkpoint(&c, &last, k).await;
                }
            }
        }));
    }
    let mut small = String::new();
    for w in writers {
        small = w.await.unwrap();
    }
    let big_session = start(c, sessions).await;
    for k in 0..big {
        checkpoint(c, &big_session, k).await;
    }
    for k in 0..20 {
        c.memory
            .clone()
            .put_memory(note(PROJECT, format!("note-{k}"), format!("retry with jitter, note {k}")))
            .await
            .unwrap();
    }
    Planted { small, big: big_session }
}

/// A page's latency over `n` requests, one after another, each on a new connection.
async fn page(addr: SocketAddr, cookie: &str, path: &str, n: usize) -> Run {
    let req = Req::get(path).cookie(cookie);
    let first = send(addr, &req).await;
    assert_eq!(first.status, 200, "{path}: {}", first.body.chars().take(300).collect::<String>());
    sequential(n, |_| {
        let req = req.clone();
        async move {
            let reply = send(addr, &req).await;
            assert_eq!(reply.status, 200);
        }
    })
    .await
}

fn row(name: String, baton: &Run, floor: &Run, target: Duration) -> Row {
    Row {
        scenario: name,
        baton: format!("p50 {} · p99 {}", ms(baton.p50()), ms(baton.p99())),
        floor: format!("p50 {} · p99 {}", ms(floor.p50()), ms(floor.p99())),
        ratio: format!("{:.1}× p99", baton.p99().as_secs_f64() / floor.p99().as_secs_f64().max(1e-9)),
        target: format!("p99 ≤ {}", ms(target)),
        met: Some(baton.p99() <= target),
    }
}

pub async fn rows(backend: Backend, sizes: Sizes, table: &mut Vec<Row>) {
    let (sessions, per, big, n) = if sizes.quick { (1000, 10, 1000, 20) } else { (10_000, 10, 1000, 200) };
    let server = Server::start_with(backend, &["--log-level", "info", "--rate-limit", "0"])
        .await
        .expect("start baton-server");
    let c = server.clients().await;
    let planted_at = Instant::now();
    let planted = plant(&c, sessions, per, big).await;
    eprintln!(
        "  planted {sessions} sessions, {} checkpoints in {:.0?}",
        sessions * per + big,
        planted_at.elapsed()
    );
    let addr = server.addr;
    let cookie = sign_in(addr, "").await;
    let scale = format!("{sessions} sessions, {} checkpoints", sessions * per + big);
    let p = format!("project={PROJECT}");
    let grpc = GrpcFloor { c: c.clone(), planted: &planted };
    let pages: [(&str, String, Floor); 9] = [
        ("overview", "/".into(), Floor::Overview),
        ("sessions", format!("/sessions?{p}"), Floor::Sessions),
        ("a session (10 checkpoints)", format!("/session?id={}", planted.small), Floor::Session(false)),
        ("activity", format!("/activity?{p}"), Floor::Events),
        ("memory", format!("/memory?{p}"), Floor::Memory),
        ("brief", format!("/brief?{p}"), Floor::Brief),
        ("search", format!("/search?{p}&q=jitter"), Floor::Search),
        ("agent logs", format!("/logs?{p}"), Floor::Logs),
        ("admin", "/admin".into(), Floor::Overview),
    ];
    for (name, path, floor) in pages {
        let baton = page(addr, &cookie, &path, n).await;
        let under = grpc.run(floor, n).await;
        table.push(row(
            format!("web page: {name} (`{}`), {scale}", path.split('?').next().unwrap_or("")),
            &baton,
            &under,
            PAGE_P99,
        ));
    }
    let baton = page(addr, &cookie, &format!("/session?id={}", planted.big), n).await;
    let under = grpc.run(Floor::Session(true), n).await;
    table.push(row(
        format!("web page: a session of {big} checkpoints (`/session`)"),
        &baton,
        &under,
        BIG_SESSION_P99,
    ));
    table.push(stream_latency(&server, &c, &cookie, sizes).await);
    table.push(writes_while_streaming(&server, &c, &cookie, sizes).await);
}

#[derive(Clone, Copy)]
enum Floor {
    Overview,
    Sessions,
    Session(bool),
    Events,
    Memory,
    Brief,
    Search,
    Logs,
}

/// The gRPC call a page reads through, timed the same way: the page's floor.
struct GrpcFloor<'a> {
    c: Clients,
    planted: &'a Planted,
}

impl GrpcFloor<'_> {
    async fn run(&self, floor: Floor, n: usize) -> Run {
        let c = self.c.clone();
        let (small, big) = (self.planted.small.clone(), self.planted.big.clone());
        sequential(n, move |_| {
            let mut c = c.clone();
            let (small, big) = (small.clone(), big.clone());
            async move {
                match floor {
                    Floor::Overview => {
                        let r =
                            baton_proto::v1::GetStatsRequest { sessions_only: true, ..Default::default() };
                        drop(c.admin.get_stats(r).await.unwrap());
                    }
                    Floor::Sessions => {
                        let r = ListSessionsRequest {
                            project: PROJECT.into(),
                            page_size: 50,
                            ..Default::default()
                        };
                        drop(c.sessions.list_sessions(r).await.unwrap());
                    }
                    Floor::Session(is_big) => {
                        let id = if is_big { big } else { small };
                        c.sessions.get_session(GetSessionRequest { session_id: id.clone() }).await.unwrap();
                        let r =
                            ListCheckpointsRequest { session_id: id, page_size: 200, ..Default::default() };
                        drop(c.checkpoints.list_checkpoints(r).await.unwrap());
                    }
                    Floor::Events => {
                        let r =
                            ListEventsRequest { project: PROJECT.into(), limit: 50, ..Default::default() };
                        drop(c.events.list_events(r).await.unwrap());
                    }
                    Floor::Memory => drop(
                        c.memory
                            .list_memory(ListMemoryRequest { project: PROJECT.into(), ..Default::default() })
                            .await
                            .unwrap(),
                    ),
                    Floor::Brief => {
                        let r = baton_proto::v1::GetBriefRequest {
                            project: PROJECT.into(),
                            budget_chars: 9000,
                            ..Default::default()
                        };
                        drop(c.brief.get_brief(r).await.unwrap());
                    }
                    Floor::Logs => {
                        let r = baton_proto::v1::ListItemLogsRequest {
                            project: PROJECT.into(),
                            page_size: 100,
                            ..Default::default()
                        };
                        drop(c.items.list_item_logs(r).await.unwrap());
                    }
                    Floor::Search => {
                        let r = SearchRequest {
                            project: PROJECT.into(),
                            query: "jitter".into(),
                            ..Default::default()
                        };
                        drop(c.search.search(r).await.unwrap());
                    }
                }
            }
        })
        .await
    }
}

/// Reads a page's live stream, noting when each revision arrived.
async fn read_stream(
    addr: SocketAddr,
    cookie: String,
    path: String,
    seen: Arc<Mutex<HashMap<i64, Instant>>>,
) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nhost: {addr}\r\ncookie: {cookie}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    let mut carry = String::new();
    loop {
        let Ok(n) = stream.read(&mut buf).await else { return };
        if n == 0 {
            return;
        }
        let now = Instant::now();
        carry.push_str(&String::from_utf8_lossy(&buf[..n]));
        while let Some(at) = carry.find('\n') {
            let line: String = carry.drain(..=at).collect();
            if let Some(id) = line.trim().strip_prefix("id: ").and_then(|v| v.parse::<i64>().ok()) {
                seen.lock().unwrap().insert(id, now);
            }
        }
    }
}

/// Notes written at a steady rate (`NOTE_EVERY`): their delivery to an open activity stream
/// and to a gRPC Watch, each from the moment the write was sent.
async fn stream_latency(server: &Server, c: &Clients, cookie: &str, sizes: Sizes) -> Row {
    let project = format!("bench/web-live-{}", uuid::Uuid::new_v4().simple());
    let writes = if sizes.quick { 100 } else { 500 };
    let sse = Arc::new(Mutex::new(HashMap::new()));
    let reader = tokio::spawn(read_stream(
        server.addr,
        cookie.to_owned(),
        format!("/stream?project={project}&since=0"),
        sse.clone(),
    ));
    let watch = Arc::new(Mutex::new(HashMap::new()));
    let mut events = c.events.clone();
    let w = watch.clone();
    let cursors = vec![WatchCursor { project: project.clone(), after_revision: 0 }];
    let mut stream = events.watch(WatchRequest { cursors, kinds: vec![] }).await.unwrap().into_inner();
    let watcher = tokio::spawn(async move {
        while let Some(Ok(e)) = stream.next().await {
            w.lock().unwrap().insert(e.revision, Instant::now());
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut sent = HashMap::new();
    let mut tick = tokio::time::interval(NOTE_EVERY);
    for i in 0..writes {
        tick.tick().await;
        let t = Instant::now();
        let reply = c
            .memory
            .clone()
            .put_memory(note(&project, format!("k{}", i % 10), format!("v{i}")))
            .await
            .unwrap();
        sent.insert(reply.into_inner().result.map_or(0, |r| r.revision), t);
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    reader.abort();
    watcher.abort();
    let delays = |seen: &Arc<Mutex<HashMap<i64, Instant>>>| {
        let seen = seen.lock().unwrap();
        let latencies: Vec<Duration> = sent
            .iter()
            .filter_map(|(rev, t)| seen.get(rev).map(|at| at.saturating_duration_since(*t)))
            .collect();
        assert_eq!(latencies.len(), sent.len(), "a change never reached a stream");
        Run { latencies, elapsed: Duration::from_secs(1), server_cpu: None }
    };
    let (page, grpc) = (delays(&sse), delays(&watch));
    Row {
        scenario: format!(
            "a change reaching an open activity page (server-sent events), {writes} notes at {:.0}/s",
            1.0 / NOTE_EVERY.as_secs_f64()
        ),
        baton: format!("p50 {} · p99 {}", ms(page.p50()), ms(page.p99())),
        floor: format!("gRPC Watch: p50 {} · p99 {}", ms(grpc.p50()), ms(grpc.p99())),
        ratio: format!("{:.2}× p99", page.p99().as_secs_f64() / grpc.p99().as_secs_f64().max(1e-9)),
        target: "within the Watch's p99 (+2 ms)".into(),
        met: Some(page.p99() <= grpc.p99() + Duration::from_millis(2)),
    }
}

/// Small writes over 100 projects, 16 clients: with ten activity pages open and streaming
/// every change, next to the same writes without them, alternating three times.
async fn writes_while_streaming(server: &Server, c: &Clients, cookie: &str, sizes: Sizes) -> Row {
    let window = sizes.window / 2;
    let load = |c: Clients| {
        closed_loop(16, window, move |client, i| {
            let mut memory = c.memory.clone();
            async move {
                let project = format!("bench/web-w{}", (client as u64 * 7919 + i) % 10);
                memory.put_memory(note(&project, format!("k{}", i % 20), format!("v{i}"))).await.unwrap();
            }
        })
    };
    let (mut alone, mut watched) = (Run::default(), Run::default());
    for _ in 0..3 {
        let quiet = load(c.clone()).await;
        alone.latencies.extend(quiet.latencies);
        alone.elapsed += quiet.elapsed;
        let seen = Arc::new(Mutex::new(HashMap::new()));
        let pages: Vec<_> = (0..10)
            .map(|k| {
                tokio::spawn(read_stream(
                    server.addr,
                    cookie.to_owned(),
                    format!("/stream?project=bench/web-w{k}"),
                    seen.clone(),
                ))
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let busy = load(c.clone()).await;
        watched.latencies.extend(busy.latencies);
        watched.elapsed += busy.elapsed;
        pages.iter().for_each(tokio::task::JoinHandle::abort);
        assert!(!seen.lock().unwrap().is_empty(), "the pages' streams received nothing");
    }
    let ratio = watched.throughput() / alone.throughput();
    Row {
        scenario: "small writes (16 clients, 10 projects) with ten activity pages streaming every change"
            .into(),
        baton: format!("{:.0}/s · p99 {}", watched.throughput(), ms(watched.p99())),
        floor: format!("without pages: {:.0}/s · p99 {}", alone.throughput(), ms(alone.p99())),
        ratio: format!("{ratio:.2}× throughput"),
        target: "≥ 0.90×".into(),
        met: Some(ratio >= 0.9),
    }
}
