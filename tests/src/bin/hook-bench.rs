//! Hook latency, end to end: the real `baton` process as an agent runs it, against a real
//! `baton-server` on SQLite holding a project with 1,000 sessions and 10,000 memory
//! entries. Prints p50/p99 next to the floor (spawning `baton --version`, which does no
//! work), so the cost of Baton's own work is visible.
//!
//! cargo build --release --workspace && cargo run --release -p baton-tests --bin hook-bench
//! (`--quick` for a short run; BATON_BENCH_POSTGRES=1 to run the server on Postgres.)

#![allow(clippy::unwrap_used, clippy::expect_used)] // a bench: fail loudly
// A percentile's index is a float rounded to a position in a sorted sample.
#![allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]

use std::time::{Duration, Instant};

use baton_proto::v1::{
    AgentKind, EndSessionRequest, GetBriefRequest, MemoryItem, MemoryOp, PutMemoryRequest,
    StartSessionRequest, WriteOptions,
};
use baton_tests::{Backend, ClientEnv, Clients, Server, git_repo};
use serde_json::json;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn measure(n: usize, mut f: impl FnMut(usize) -> Duration) -> (Duration, Duration) {
    let mut samples: Vec<Duration> = (0..n).map(&mut f).collect();
    samples.sort();
    (percentile(&samples, 0.5), percentile(&samples, 0.99))
}

/// `n` runs spread over `threads` threads running at once (hooks of parallel tool calls).
fn measure_parallel(n: usize, threads: usize, f: impl Fn(usize) -> Duration + Sync) -> (Duration, Duration) {
    let mut samples: Vec<Duration> = std::thread::scope(|scope| {
        let f = &f;
        let handles: Vec<_> = (0..threads)
            .map(|t| scope.spawn(move || (t..n).step_by(threads).map(f).collect::<Vec<_>>()))
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    samples.sort();
    (percentile(&samples, 0.5), percentile(&samples, 0.99))
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// Seeds the project: `sessions` sessions (most completed) by 8 writers, and `notes` memory
/// entries (notes, decisions).
async fn plant(c: &Clients, project: &'static str, sessions: usize, notes: usize) {
    let tasks: Vec<_> = (0..8)
        .map(|w| {
            let mut c = c.clone();
            tokio::spawn(async move {
                for i in (w..sessions).step_by(8) {
                    let s = c
                        .sessions
                        .start_session(StartSessionRequest {
                            project: project.into(),
                            agent: AgentKind::ClaudeCode as i32,
                            host: format!("host-{}", i % 7),
                            goal: format!("task {i}"),
                            ..Default::default()
                        })
                        .await
                        .unwrap()
                        .into_inner()
                        .session
                        .unwrap();
                    if i % 10 != 0 {
                        let _ = c
                            .sessions
                            .end_session(EndSessionRequest {
                                session_id: s.id,
                                summary: format!("did {i}"),
                                ..Default::default()
                            })
                            .await;
                    }
                }
                for i in (w..notes).step_by(8) {
                    let (category, key, op) = match i % 4 {
                        0 => ("decision", String::new(), MemoryOp::Append),
                        _ => ("note", format!("key-{i}"), MemoryOp::Upsert),
                    };
                    c.memory
                        .put_memory(PutMemoryRequest {
                            project: project.into(),
                            category: category.into(),
                            key,
                            op: op as i32,
                            items: vec![MemoryItem {
                                content: format!("entry {i}: some context a later agent needs"),
                                rationale: "bench".into(),
                            }],
                            write: Some(WriteOptions::default()),
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

/// The server's share of a SessionStart: its two RPCs, from a client already connected.
/// Another session of the project holds 999 paths (`held/0.rs` …), a reservation short of
/// the server's default cap.
async fn plant_reservations(c: &Clients, project: &str) {
    let mut c = c.clone();
    let write = || Some(WriteOptions { request_id: uuid::Uuid::now_v7().to_string(), ..Default::default() });
    let holder = c
        .sessions
        .start_session(StartSessionRequest {
            project: project.into(),
            agent: AgentKind::Codex as i32,
            host: "other-machine".into(),
            write: write(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .session
        .unwrap();
    for batch in 0..10 {
        let paths = (batch * 100..(batch * 100 + 100).min(999)).map(|i| format!("held/{i}.rs")).collect();
        let ask = baton_proto::v1::ReserveRequest {
            project: project.into(),
            session_id: holder.id.clone(),
            paths,
            reason: "bench".into(),
            write: write(),
            ..Default::default()
        };
        assert!(c.reservations.reserve(ask).await.unwrap().into_inner().granted);
    }
}

/// The pre-tool hook with reservations checked: an Edit of a file in a project where another
/// session holds 999 reservations, this file among them (warned). Returns its latency and
/// the payload (for the hub-down run).
async fn pre_tool(
    c: &Clients,
    env: &ClientEnv,
    dir: &std::path::Path,
    project: &str,
    runs: usize,
) -> ((Duration, Duration), String) {
    plant_reservations(c, project).await;
    let edit =
        json!({"session_id": "bench-edit", "cwd": dir, "hook_event_name": "PreToolUse", "tool_name": "Edit",
        "tool_input": {"file_path": dir.join("held/7.rs"), "old_string": "a", "new_string": "b"}})
        .to_string();
    let renew =
        json!({"session_id": "bench-edit", "cwd": dir, "hook_event_name": "PostToolUse", "tool_name": "Read",
        "tool_input": {"file_path": "README"}, "tool_response": {}})
        .to_string();
    // Its first PostToolUse starts the session, renews, and keeps the project's view.
    env.run(dir, &["hook", "claude", "PostToolUse"], &renew);
    let pre = measure(runs, |_| {
        let out = env.run(dir, &["hook", "claude", "PreToolUse"], &edit);
        assert!(out.stdout.contains("reserved by"), "{out:?}");
        out.elapsed
    });
    (pre, edit)
}

/// The report's first lines: what ran, on what, and the table's head.
fn header(what: &str) {
    println!("{what}");
    println!(
        "machine: {} cores, {}",
        std::thread::available_parallelism().map_or(0, std::num::NonZero::get),
        std::env::consts::ARCH
    );
    println!();
    println!("| scenario | p50 | p99 | target | p50 − floor |");
    println!("| --- | --- | --- | --- | --- |");
}

fn rpc_share(c: &Clients, project: &str, runs: usize) -> ((Duration, Duration), (Duration, Duration)) {
    let mut rpc = c.clone();
    let rt = tokio::runtime::Handle::current();
    let start_rpc = measure(runs, |i| {
        let t = Instant::now();
        tokio::task::block_in_place(|| {
            rt.block_on(rpc.sessions.start_session(StartSessionRequest {
                project: project.into(),
                agent: AgentKind::ClaudeCode as i32,
                host: "bench-host".into(),
                goal: format!("rpc {i}"),
                ..Default::default()
            }))
        })
        .unwrap();
        t.elapsed()
    });
    let brief_rpc = measure(runs, |_| {
        let t = Instant::now();
        tokio::task::block_in_place(|| {
            rt.block_on(rpc.brief.get_brief(GetBriefRequest {
                project: project.into(),
                branch: "main".into(),
                budget_chars: 9000,
                ..Default::default()
            }))
        })
        .unwrap();
        t.elapsed()
    });
    (start_rpc, brief_rpc)
}

#[tokio::main]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (sessions, notes, runs) = if quick { (100, 1000, 30) } else { (1000, 10_000, 300) };
    let backend =
        if std::env::var_os("BATON_BENCH_POSTGRES").is_some() { Backend::Postgres } else { Backend::Sqlite };
    let server = Server::start_with(backend, &["--log-level", "info"]).await.expect("start server");
    let c = server.clients().await;
    let project = "github.com/bench/widget";

    // Seed: sessions (most completed), memory entries (notes, decisions, loops).
    let seed = Instant::now();
    plant(&c, project, sessions, notes).await;
    let seeded = seed.elapsed();

    let env = ClientEnv::new(&server.url());
    let repo = git_repo("git@github.com:bench/widget.git");
    let dir = repo.path();
    let payload = |event: &str, i: usize| {
        json!({"session_id": format!("bench-{i}"), "cwd": dir, "hook_event_name": event, "source": "startup", "tool_name": "Read", "tool_input": {"file_path": "README"}})
            .to_string()
    };
    let floor = measure(runs, |_| env.run(dir, &["--version"], "").elapsed);
    let start = measure(runs, |i| {
        let out = env.run(dir, &["hook", "claude", "SessionStart"], &payload("SessionStart", i));
        assert!(out.stdout.contains("additionalContext"), "{out:?}");
        out.elapsed
    });
    let brief_len =
        env.run(dir, &["hook", "claude", "SessionStart"], &payload("SessionStart", 0)).stdout.len();
    // One conversation after 1,000 tool calls with 100 KB tool responses (its journal at
    // its caps), then 4 hooks at once, as parallel tool calls run them (checkpoint every 20
    // included).
    let big = "x".repeat(100 * 1024);
    let tool = |i: usize| {
        json!({"session_id": "bench-tools", "cwd": dir, "hook_event_name": "PostToolUse", "tool_name": "Bash",
            "tool_input": {"command": format!("cargo test --package part-{i}")},
            "tool_response": {"stdout": big, "stderr": ""}})
        .to_string()
    };
    let history = if quick { 50 } else { 1000 };
    for i in 0..history {
        env.run(dir, &["hook", "claude", "PostToolUse"], &tool(i));
    }
    let post =
        measure_parallel(runs, 4, |i| env.run(dir, &["hook", "claude", "PostToolUse"], &tool(i)).elapsed);
    let start_parallel = measure_parallel(runs, 4, |i| {
        env.run(dir, &["hook", "claude", "SessionStart"], &payload("SessionStart", 20_000 + i)).elapsed
    });
    let (start_rpc, brief_rpc) = rpc_share(&c, project, runs);
    let (pre, edit) = pre_tool(&c, &env, dir, project, runs).await;
    let mut server = server;
    server.kill9();
    let down = measure(runs.min(100), |i| {
        env.run(dir, &["hook", "claude", "SessionStart"], &payload("SessionStart", 10_000 + i)).elapsed
    });
    let pre_down = measure(runs.min(100), |_| {
        let out = env.run(dir, &["hook", "claude", "PreToolUse"], &edit);
        assert!(out.stdout.contains("cannot be reached"), "{out:?}");
        out.elapsed
    });
    let queued = env.run(dir, &["status", "--json"], "").stdout;

    header(&format!(
        "hook-bench: {backend:?} server, project with {sessions} sessions and {notes} memory entries (seeded in {seeded:.1?}), {runs} runs each"
    ));
    println!("| floor: `baton --version` (process start, no work) | {} | {} | | |", ms(floor.0), ms(floor.1));
    let row = |name: &str, (p50, p99): (Duration, Duration), target: &str| {
        println!("| {name} | {} | {} | {target} | {} |", ms(p50), ms(p99), ms(p50.saturating_sub(floor.0)));
    };
    row("`baton hook claude SessionStart` (session + brief)", start, "p50 ≤ 15 ms, p99 ≤ 40 ms");
    row(
        &format!("`baton hook claude PostToolUse`, 4 at once, after {history} calls with 100 KB responses"),
        post,
        "p50 ≤ 15 ms, p99 ≤ 40 ms",
    );
    row("`baton hook claude SessionStart`, 4 at once", start_parallel, "p50 ≤ 15 ms, p99 ≤ 40 ms");
    let part =
        |name: &str, (p50, p99): (Duration, Duration)| println!("| {name} | {} | {} | | |", ms(p50), ms(p99));
    part("… its `StartSession` alone, over gRPC from a connected client", start_rpc);
    part("… its `GetBrief` alone, over gRPC from a connected client", brief_rpc);
    row("SessionStart, hub down (cached brief + queue write)", down, "≤ 150 ms");
    row("`baton hook claude PreToolUse` (an Edit), 999 reservations held", pre, "p50 ≤ 15 ms, p99 ≤ 40 ms");
    row("… the same, hub down (warned from the last view)", pre_down, "p50 ≤ 15 ms, p99 ≤ 40 ms");
    println!();
    println!("brief output: {brief_len} bytes; queue after the hub-down runs: {}", queued.trim());
}
