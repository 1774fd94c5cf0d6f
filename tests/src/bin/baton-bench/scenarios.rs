//! The scenarios, each measured on Baton and on the floor in the same run.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use baton_proto::v1::{
    AgentKind, CheckpointKind, CheckpointState, CreateCheckpointRequest, Event, EventKind, GetBriefRequest,
    ListSessionsRequest, MemoryItem, MemoryOp, PutMemoryRequest, ResumeSessionRequest, SessionStatus,
    StartSessionRequest, WatchCursor, WatchRequest, WriteOptions, resume_session_request,
};
use baton_tests::{Backend, Clients, Server};
use prost::Message;
use tokio_stream::StreamExt as _;

use crate::floor::Floor;
use crate::stats::{Run, alternating, closed_loop, ms, rss_mib, sequential};
use crate::{Row, Sizes};

pub struct Results {
    pub table: Vec<Row>,
    /// Lines printed under the table (e.g. why the etcd rows are missing).
    pub notes: Vec<String>,
    pub scaling: Vec<String>,
}

fn write_opts() -> WriteOptions {
    WriteOptions { request_id: uuid::Uuid::new_v4().to_string(), ..Default::default() }
}

pub fn note(project: &str, key: String, content: String) -> PutMemoryRequest {
    PutMemoryRequest {
        project: project.into(),
        category: "note".into(),
        key,
        op: MemoryOp::Upsert as i32,
        items: vec![MemoryItem { content, rationale: String::new() }],
        write: Some(write_opts()),
        ..Default::default()
    }
}

fn summary(run: &Run) -> String {
    format!("p50 {} · p99 {} · {:.0}/s", ms(run.p50()), ms(run.p99()), run.throughput())
}

/// The project of a client's `i`th write in the spread scenarios: one of 100, drawn afresh
/// for every write (a mix of both numbers), the same draws for Baton and the floor.
///
/// Why not simply the next project each time: two clients that once wrote the same project
/// at the same moment finish in the same batch and then keep meeting on the next ones, until
/// all 16 move as one over the projects, one hot project at a time.
fn spread_project(client: usize, i: u64) -> String {
    let mut x = (client as u64) << 32 ^ i;
    // splitmix64's finalizer: every input bit moves every output bit.
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    format!("bench/p{}", x % 100)
}

/// Text that compresses like a real checkpoint's JSON (about 3:1), `len` bytes.
pub fn checkpoint_text(len: usize, seed: u64) -> Vec<u8> {
    let words =
        ["task", "file", "src/", "decision", "error", "fixed", "the", "store", "retry", "Baton", "{", "}"];
    let mut x = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407) | 1;
    let mut out = Vec::with_capacity(len + 16);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(words[(x % words.len() as u64) as usize].as_bytes());
        out.extend_from_slice(format!("{} ", x % 1000).as_bytes());
    }
    out.truncate(len);
    out
}

/// The scenarios' names, for `--only`.
pub const NAMES: [&str; 14] = [
    "rpc",
    "hot",
    "spread",
    "checkpoints",
    "resume",
    "fanout",
    "catchup",
    "search",
    "scaling",
    "memory",
    "web",
    "etcd",
    "reservations",
    "why",
];

/// The bench server's flags: room for every watcher, a fast reaper, and the server's default
/// log level (the harness's debug lines and spans are for test reports).
const SERVER_ARGS: [&str; 8] = [
    "--max-watches-per-token",
    "100000",
    "--max-watch-projects",
    "1000",
    "--reaper-interval",
    "200ms",
    "--log-level",
    "info",
];

pub async fn run_all(backend: Backend, sizes: Sizes, only: &[String]) -> Results {
    let run = |name: &str| only.is_empty() || only.iter().any(|o| o == name);
    let server = Server::start_with(backend, &SERVER_ARGS).await.expect("start baton-server");
    let dir = tempfile::tempdir().unwrap();
    let floor = Floor::open(backend, dir.path()).await;
    let targets = crate::targets::of(backend);
    let c = server.clients().await;
    let mut table = Vec::new();
    let mut notes = Vec::new();

    if run("rpc") {
        eprintln!("[{backend:?}] gRPC calls without storage");
        table.push(rpc_ceiling(&c, &floor, sizes).await);
    }
    if run("hot") {
        eprintln!("[{backend:?}] small writes, one hot project");
        let (name, hot) = ("small memory writes, one hot project", |_, _| "bench/hot".to_owned());
        table.push(small_writes(&c, &floor, sizes, hot, name, targets.hot).await);
    }
    if run("spread") {
        eprintln!("[{backend:?}] small writes over 100 projects");
        let name = "small writes over 100 projects";
        table.push(small_writes(&c, &floor, sizes, spread_project, name, targets.spread).await);
    }
    if run("checkpoints") {
        eprintln!("[{backend:?}] 50 KB checkpoints");
        table.push(checkpoints(&c, &floor, sizes, targets.checkpoint_p99).await);
    }
    if run("resume") {
        eprintln!("[{backend:?}] resume");
        table.push(resume(&c, &floor, sizes.resume_sessions, targets.resume_p99).await);
    }
    if run("fanout") {
        eprintln!("[{backend:?}] watch fan-out");
        let (row, _) = fan_out(&server, &c, sizes.watchers, sizes.watch_rate, sizes.window).await;
        table.push(row);
    }
    if run("catchup") {
        eprintln!("[{backend:?}] watch catch-up");
        table.push(catch_up(&server, &c, &floor, sizes.catch_up_events).await);
    }
    if run("search") {
        eprintln!("[{backend:?}] search");
        crate::search::rows(backend, &floor, sizes, &mut table).await;
    }
    if run("etcd") {
        eprintln!("[{backend:?}] Baton next to etcd (small writes, watch latency)");
        crate::etcd::rows(backend, &server, sizes, &mut table, &mut notes).await;
    }
    if run("reservations") {
        eprintln!("[{backend:?}] reservations: grants with 1,000 live");
        table.push(
            crate::reservations::grant(backend, &c, &floor, if sizes.quick { 100 } else { 1000 }).await,
        );
    }
    if run("why") {
        eprintln!("[{backend:?}] baton why next to git blame (a generated repository)");
        table.push(crate::why::row(&server, sizes.quick));
    }
    if run("web") {
        eprintln!("[{backend:?}] the web view (a server of its own, planted)");
        crate::web::rows(backend, sizes, &mut table).await;
    }
    if run("memory") {
        eprintln!("[{backend:?}] server memory under planted data (a server of its own)");
        table.push(crate::memory::memory(backend, sizes.quick).await);
    }
    let scaling = if run("scaling") {
        eprintln!("[{backend:?}] scaling");
        scaling(&server, &c, sizes).await
    } else {
        Vec::new()
    };
    Results { table, notes, scaling }
}

/// The ceiling the write scenarios live under on this machine: the same clients making a
/// gRPC call that touches no storage (the standard health check, through all of the
/// server's layers), next to the floor's small writes.
async fn rpc_ceiling(c: &Clients, floor: &Floor, sizes: Sizes) -> Row {
    let health = tonic_health::pb::health_client::HealthClient::new(c.channel.clone());
    let calls = closed_loop(sizes.clients, sizes.window, move |_, _| {
        let mut health = health.clone();
        async move {
            health.check(tonic_health::pb::HealthCheckRequest::default()).await.unwrap();
        }
    })
    .await;
    let f = floor.clone();
    let at_floor = closed_loop(sizes.clients, sizes.window, move |client, i| {
        let f = f.clone();
        async move {
            f.write(&spread_project(client, i), b"small write").await;
        }
    })
    .await;
    Row {
        scenario: format!(
            "gRPC health check, no storage (the ceiling of the rows below), {} clients",
            sizes.clients
        ),
        baton: summary(&calls),
        floor: summary(&at_floor),
        ratio: format!("{:.0}% of throughput", calls.throughput() / at_floor.throughput() * 100.0),
        target: "(informational)".into(),
        met: None,
    }
}

async fn small_writes(
    c: &Clients,
    floor: &Floor,
    sizes: Sizes,
    project: impl Fn(usize, u64) -> String + Send + Sync + Clone + 'static,
    name: &str,
    target: f64,
) -> Row {
    let memory = c.memory.clone();
    let p = project.clone();
    let p2 = project.clone();
    let f = floor.clone();
    let (baton, at_floor) = alternating(
        sizes.clients,
        sizes.window,
        move |client, i| {
            let mut memory = memory.clone();
            let request = note(
                &p(client, i),
                format!("c{client}-{i}"),
                format!("small write {i} from client {client}"),
            );
            async move {
                memory.put_memory(request).await.unwrap();
            }
        },
        move |client, i| {
            let f = f.clone();
            let project = project(client, i);
            async move {
                f.write(&project, format!("small write {i} from client {client}").as_bytes()).await;
            }
        },
    )
    .await;
    let indexed = index_cost(floor, sizes, move |client, i| {
        let text = format!("small write {i} from client {client}");
        (p2(client, i), text.clone().into_bytes(), text)
    })
    .await;
    let ratio = baton.throughput() / at_floor.throughput();
    Row {
        scenario: format!("{name}, {} clients", sizes.clients),
        baton: summary(&baton),
        floor: format!("{} · {indexed}", summary(&at_floor)),
        ratio: format!("{:.0}% of throughput", ratio * 100.0),
        target: format!("≥ {:.0}% of the floor's throughput", target * 100.0),
        met: Some(ratio >= target),
    }
}

/// What Baton's search index costs the floor's writes: the floor without and with each
/// record's search document (`Floor::write_indexed`), alternating; `write` gives a
/// write's project, body and indexed text.
async fn index_cost(
    floor: &Floor,
    sizes: Sizes,
    write: impl Fn(usize, u64) -> (String, Vec<u8>, String) + Send + Sync + Clone + 'static,
) -> String {
    let (f, g, w) = (floor.clone(), floor.clone(), write.clone());
    let (plain, indexed) = alternating(
        sizes.clients,
        sizes.window,
        move |client, i| {
            let f = f.clone();
            let (project, body, _) = w(client, i);
            async move { f.write(&project, &body).await }
        },
        move |client, i| {
            let g = g.clone();
            let (project, body, text) = write(client, i);
            async move { g.write_indexed(&project, &body, &text).await }
        },
    )
    .await;
    format!(
        "with the search index {:.0}/s, p99 {:.2} ms ({:+.0}% throughput)",
        indexed.throughput(),
        indexed.p99().as_secs_f64() * 1000.0,
        (indexed.throughput() / plain.throughput() - 1.0) * 100.0
    )
}

async fn checkpoints(c: &Clients, floor: &Floor, sizes: Sizes, target: f64) -> Row {
    let mut sessions = Vec::new();
    for _ in 0..sizes.clients {
        let mut s = c.sessions.clone();
        let session = s
            .start_session(StartSessionRequest {
                project: "bench/checkpoints".into(),
                agent: AgentKind::Custom as i32,
                write: Some(write_opts()),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .session
            .unwrap();
        sessions.push(session.id);
    }
    let sessions = Arc::new(sessions);
    let checkpoints = c.checkpoints.clone();
    let f = floor.clone();
    let (baton, at_floor) = alternating(
        sizes.clients,
        sizes.window,
        move |client, i| {
            let mut checkpoints = checkpoints.clone();
            let request = CreateCheckpointRequest {
                session_id: sessions[client].clone(),
                kind: CheckpointKind::Auto as i32,
                reason: "bench".into(),
                state: Some(CheckpointState { phase: format!("step {i}"), ..Default::default() }),
                payload: checkpoint_text(50 * 1024, i * 31 + client as u64),
                payload_content_type: "application/json".into(),
                write: Some(write_opts()),
                ..Default::default()
            };
            async move {
                checkpoints.create_checkpoint(request).await.unwrap();
            }
        },
        move |client, i| {
            let f = f.clone();
            async move {
                f.write("bench/checkpoints", &checkpoint_text(50 * 1024, i * 31 + client as u64)).await;
            }
        },
    )
    .await;
    // Baton indexes a checkpoint's state, not its payload.
    let indexed = index_cost(floor, sizes, |client, i| {
        (
            "bench/checkpoints".to_owned(),
            checkpoint_text(50 * 1024, i * 31 + client as u64),
            format!("step {i}"),
        )
    })
    .await;
    let ratio = baton.p99().as_secs_f64() / at_floor.p99().as_secs_f64();
    Row {
        scenario: format!("50 KB checkpoint create, {} clients", sizes.clients),
        baton: summary(&baton),
        floor: format!("{} · {indexed}", summary(&at_floor)),
        ratio: format!("{ratio:.2}× the p99"),
        target: format!("p99 ≤ {target:.2}× the floor's"),
        met: Some(ratio <= target),
    }
}

/// Sessions with a checkpoint each, all crashed (lease run out), then each resumed once.
async fn seed_crashed(c: &Clients, project: &str, n: usize) -> Vec<String> {
    let counter = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..8)
        .map(|w| {
            let c = c.clone();
            let project = project.to_owned();
            let counter = counter.clone();
            tokio::spawn(async move {
                let (mut sessions, mut checkpoints) = (c.sessions.clone(), c.checkpoints.clone());
                let mut ids = Vec::new();
                for i in (w..n).step_by(8) {
                    let s = sessions
                        .start_session(StartSessionRequest {
                            project: project.clone(),
                            agent: AgentKind::ClaudeCode as i32,
                            goal: format!("task {i}"),
                            // Long enough to outlast its own seeding, short enough to wait for.
                            lease_ttl_ms: 5000,
                            write: Some(write_opts()),
                            ..Default::default()
                        })
                        .await
                        .unwrap()
                        .into_inner()
                        .session
                        .unwrap();
                    checkpoints
                        .create_checkpoint(CreateCheckpointRequest {
                            session_id: s.id.clone(),
                            kind: CheckpointKind::Auto as i32,
                            reason: "seed".into(),
                            state: Some(CheckpointState { phase: format!("task {i}"), ..Default::default() }),
                            write: Some(write_opts()),
                            ..Default::default()
                        })
                        .await
                        .unwrap();
                    counter.fetch_add(1, Ordering::Relaxed);
                    ids.push(s.id);
                }
                ids
            })
        })
        .collect();
    let mut ids = Vec::new();
    for t in tasks {
        ids.extend(t.await.unwrap());
    }
    let mut sessions = c.sessions.clone();
    let deadline = Instant::now() + Duration::from_mins(2);
    loop {
        let active = sessions
            .list_sessions(ListSessionsRequest {
                project: project.into(),
                statuses: vec![SessionStatus::Active as i32],
                page_size: 1,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        if active.sessions.is_empty() || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    ids
}

/// Resumes run before the measured ones (see `resume`).
const RESUME_WARMUP: usize = 20;

async fn resume(c: &Clients, floor: &Floor, n: usize, target: Duration) -> Row {
    let project = "bench/resume";
    let mut memory = c.memory.clone();
    for i in 0..50 {
        memory
            .put_memory(note(project, format!("k{i}"), format!("context a resumed agent needs, {i}")))
            .await
            .unwrap();
    }
    // The first resumes after the server starts are not the steady state the target is
    // about: each pool connection prepares every statement on its first use. They run
    // first, and are reported on their own; the floor warms up the same way.
    let ids = seed_crashed(c, project, n + RESUME_WARMUP).await;
    let sessions = c.sessions.clone();
    let ids = Arc::new(ids);
    let resume_one = |i: usize| {
        let mut sessions = sessions.clone();
        let id = ids[i].clone();
        async move {
            let reply = sessions
                .resume_session(ResumeSessionRequest {
                    project: project.into(),
                    target: Some(resume_session_request::Target::SessionId(id)),
                    agent: AgentKind::ClaudeCode as i32,
                    write: Some(write_opts()),
                    ..Default::default()
                })
                .await
                .unwrap()
                .into_inner();
            assert!(reply.checkpoint.is_some() && reply.brief.is_some());
        }
    };
    let warmup = sequential(RESUME_WARMUP, resume_one).await;
    eprintln!(
        "  the first {RESUME_WARMUP}, not counted: {} · slowest {}",
        summary(&warmup),
        ms(warmup.percentile(1.0))
    );
    let baton = sequential(n, |i| resume_one(RESUME_WARMUP + i)).await;
    // What a resume's brief costs on its own (a resume is the claim, a write, plus this).
    let brief = c.brief.clone();
    let briefs = sequential(200, |_| {
        let mut brief = brief.clone();
        async move {
            brief.get_brief(GetBriefRequest { project: project.into(), ..Default::default() }).await.unwrap();
        }
    })
    .await;
    eprintln!("  of which the brief alone: {}", summary(&briefs));
    for i in 0..n + RESUME_WARMUP {
        floor.write(project, format!("session {i} checkpoint").as_bytes()).await;
    }
    sequential(RESUME_WARMUP, |i| floor.resume_reads(project, i as i64 + 1)).await;
    let at_floor = sequential(n, |i| floor.resume_reads(project, (RESUME_WARMUP + i) as i64 + 1)).await;
    Row {
        scenario: format!(
            "resume (latest valid checkpoint + brief), project with {} sessions",
            n + RESUME_WARMUP
        ),
        baton: summary(&baton),
        floor: summary(&at_floor),
        ratio: format!("{:.1}× the p99", baton.p99().as_secs_f64() / at_floor.p99().as_secs_f64()),
        target: format!("p99 ≤ {}", ms(target)),
        met: Some(baton.p99() <= target),
    }
}

fn event_age(e: &Event) -> Duration {
    let at = e.at.as_ref().map_or(SystemTime::UNIX_EPOCH, |t| {
        SystemTime::UNIX_EPOCH + Duration::new(t.seconds.max(0) as u64, t.nanos.max(0) as u32)
    });
    SystemTime::now().duration_since(at).unwrap_or_default()
}

/// `watchers` streams on one project while a writer writes `rate` per second for `window`.
/// Returns the row and (delivery p99, server RSS growth in MiB).
async fn fan_out(
    server: &Server,
    c: &Clients,
    watchers: usize,
    rate: u32,
    window: Duration,
) -> (Row, (Duration, f64)) {
    let project = format!("bench/fanout-{watchers}-{}", uuid::Uuid::new_v4().simple());
    let pid = server.pid().unwrap_or_default();
    let rss_before = rss_mib(pid).unwrap_or(0.0);
    let writes = (f64::from(rate) * window.as_secs_f64()) as usize;
    // 100 streams per HTTP/2 connection.
    let mut channels = Vec::new();
    for _ in 0..watchers.div_ceil(100) {
        channels.push(server.clients().await);
    }
    let ready = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for w in 0..watchers {
        let mut events = channels[w / 100].events.clone();
        let project = project.clone();
        let ready = ready.clone();
        tasks.push(tokio::spawn(async move {
            let mut stream = events
                .watch(WatchRequest {
                    cursors: vec![WatchCursor { project, after_revision: 0 }],
                    kinds: vec![],
                })
                .await
                .unwrap()
                .into_inner();
            ready.fetch_add(1, Ordering::Relaxed);
            let mut ages = Vec::with_capacity(writes);
            let mut last = 0;
            while ages.len() < writes {
                match tokio::time::timeout(Duration::from_secs(30), stream.next()).await {
                    Ok(Some(Ok(e))) => {
                        assert_eq!(e.revision, last + 1, "a gap or a duplicate");
                        last = e.revision;
                        ages.push(event_age(&e));
                    }
                    other => panic!("watcher {w} stopped after {} of {writes} events: {other:?}", ages.len()),
                }
            }
            ages
        }));
    }
    while (ready.load(Ordering::Relaxed) as usize) < watchers {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let rss_watching = rss_mib(pid).unwrap_or(0.0);
    let mut memory = c.memory.clone();
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / f64::from(rate)));
    for i in 0..writes {
        tick.tick().await;
        memory.put_memory(note(&project, format!("k{}", i % 50), format!("update {i}"))).await.unwrap();
    }
    let rss_peak = rss_mib(pid).unwrap_or(0.0).max(rss_watching);
    let mut all = Run::default();
    for t in tasks {
        all.latencies.extend(t.await.unwrap());
    }
    let p99 = all.p99();
    let row = Row {
        scenario: format!("watch fan-out: {watchers} watchers, {rate} writes/s"),
        baton: format!(
            "every watcher got all {writes} events · delivery p50 {} · p99 {} · server RSS {:.0} → {:.0} MiB",
            ms(all.p50()),
            ms(p99),
            rss_before,
            rss_peak
        ),
        floor: "—".into(),
        ratio: "—".into(),
        target: "all events to all; delivery p99 ≤ 50 ms".into(),
        met: Some(p99 <= Duration::from_millis(50)),
    };
    (row, (p99, rss_peak - rss_before))
}

/// `n` events written straight into the server's database, then watched from revision 0.
async fn catch_up(server: &Server, c: &Clients, floor: &Floor, n: usize) -> Row {
    let project = "bench/catch-up";
    let bodies: Vec<Vec<u8>> = (1..=n as i64)
        .map(|revision| {
            Event {
                project: project.into(),
                revision,
                kind: EventKind::MemoryChanged as i32,
                entity: "memory".into(),
                entity_id: format!("note/k{}", revision % 100),
                at: Some(prost_types::Timestamp { seconds: 1_700_000_000 + revision, nanos: 0 }),
                ..Default::default()
            }
            .encode_to_vec()
        })
        .collect();
    server.seed_events(project, &bodies).await.unwrap();
    let mut events = c.events.clone();
    let started = Instant::now();
    let mut stream = events
        .watch(WatchRequest {
            cursors: vec![WatchCursor { project: project.into(), after_revision: 0 }],
            kinds: vec![],
        })
        .await
        .unwrap()
        .into_inner();
    let mut got = 0;
    while got < n {
        stream.next().await.unwrap().unwrap();
        got += 1;
    }
    let baton = started.elapsed();
    drop(stream);

    floor.seed_events(project, &bodies).await;
    let started = Instant::now();
    let (mut after, mut read) = (0, 0);
    while read < n {
        let (count, last) = floor.read_events(project, after, 1000).await;
        read += count;
        after = last;
    }
    let at_floor = started.elapsed();
    let rate = |d: Duration| n as f64 / d.as_secs_f64();
    Row {
        scenario: format!("watch catch-up of {n} events from revision 0"),
        baton: format!("{:.0} events/s", rate(baton)),
        floor: format!("{:.0} events/s (paged reads)", rate(at_floor)),
        ratio: format!("{:.0}%", rate(baton) / rate(at_floor) * 100.0),
        target: "≥ 100k events/s".into(),
        met: Some(rate(baton) >= 100_000.0),
    }
}

/// Grows `project` from `have` to `target` sessions, with 8 writers.
async fn grow(c: &Clients, project: &str, have: usize, target: usize) {
    let tasks: Vec<_> = (0..8)
        .map(|w| {
            let mut sessions = c.sessions.clone();
            let project = project.to_owned();
            tokio::spawn(async move {
                for i in (have + w..target).step_by(8) {
                    sessions
                        .start_session(StartSessionRequest {
                            project: project.clone(),
                            agent: AgentKind::ClaudeCode as i32,
                            goal: format!("session {i}"),
                            write: Some(write_opts()),
                            ..Default::default()
                        })
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
}

/// Latency and memory as sessions per project and watchers grow.
async fn scaling(server: &Server, c: &Clients, sizes: Sizes) -> Vec<String> {
    let pid = server.pid().unwrap_or_default();
    let mut out = vec![
        "| sessions in the project | StartSession p50 / p99 | GetBrief p50 / p99 | server RSS |".to_owned(),
        "| --- | --- | --- | --- |".to_owned(),
    ];
    let project = format!("bench/scale-{}", uuid::Uuid::new_v4().simple());
    let mut have = 0;
    for &target in sizes.scale_sessions {
        grow(c, &project, have, target).await;
        have = target;
        let sessions = c.sessions.clone();
        let p = project.clone();
        let start = sequential(50, |i| {
            let mut sessions = sessions.clone();
            let p = p.clone();
            async move {
                sessions
                    .start_session(StartSessionRequest {
                        project: p,
                        agent: AgentKind::ClaudeCode as i32,
                        goal: format!("probe {i}"),
                        write: Some(write_opts()),
                        ..Default::default()
                    })
                    .await
                    .unwrap();
            }
        })
        .await;
        have += 50;
        let brief = c.brief.clone();
        let brief = sequential(50, |_| {
            let mut brief = brief.clone();
            let p = project.clone();
            async move {
                brief
                    .get_brief(GetBriefRequest { project: p, budget_chars: 9000, ..Default::default() })
                    .await
                    .unwrap();
            }
        })
        .await;
        out.push(format!(
            "| {target} | {} / {} | {} / {} | {:.0} MiB |",
            ms(start.p50()),
            ms(start.p99()),
            ms(brief.p50()),
            ms(brief.p99()),
            rss_mib(pid).unwrap_or(0.0)
        ));
    }
    out.push(String::new());
    out.push("| watchers (100 writes/s, 2 s) | delivery p99 | server RSS growth |".to_owned());
    out.push("| --- | --- | --- |".to_owned());
    for &watchers in sizes.scale_watchers {
        let (_, (p99, grew)) = fan_out(server, c, watchers, 100, Duration::from_secs(2)).await;
        out.push(format!("| {watchers} | {} | {grew:+.1} MiB |", ms(p99)));
    }
    out
}
