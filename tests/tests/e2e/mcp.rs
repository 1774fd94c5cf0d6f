//! `baton mcp` through a stock MCP client: the official Python SDK lists and calls every
//! tool (bad arguments included) from a subdirectory of the repository, with the hub up
//! and down; what it stored is read back over gRPC.

use std::process::Command;

use baton_proto::v1::{GetCheckpointRequest, ListCheckpointsRequest, ListMemoryRequest};
use baton_tests::{Backend, ClientEnv, Server, both, git_repo};
use serde_json::Value;

fn python_mcp(env: &ClientEnv, server: &str, workdir: &std::path::Path, mode: &str) -> Value {
    let python = baton_tests::python::python().unwrap();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let out = tempfile::NamedTempFile::new().unwrap();
    let run = Command::new(&python)
        .arg(root.join("tests/python/mcp_client.py"))
        .arg(baton_tests::binary("baton"))
        .arg(workdir)
        .arg(mode)
        .arg(out.path())
        .current_dir(workdir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", env.home.path())
        .env("BATON_HOME", env.baton_home())
        .env("BATON_SERVER", server)
        .env("USER", "dev")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success() && stdout.contains("mcp client ok"),
        "the MCP client failed ({mode}):\nstdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    serde_json::from_slice(&std::fs::read(out.path()).unwrap()).unwrap()
}

async fn stock_client_calls_every_tool(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let env = ClientEnv::new(&server.url());
    let repo = git_repo("git@github.com:acme/mcp.git");
    let deep = repo.path().join("src/deep");
    std::fs::create_dir_all(&deep).unwrap();
    let out = python_mcp(&env, &server.url(), &deep, "up");
    assert!(out["brief"].as_str().unwrap().contains("Use SQLite for the local cache"));
    let over = out["over_cap"].as_str().unwrap();
    assert!(over.contains("cap"), "the hub's refusal names the cap: {over}");

    // What it stored, read over gRPC: in the repository's project (started in a
    // subdirectory), written by the conversation's own session.
    let mut c = server.clients().await;
    let project = "github.com/acme/mcp";
    let sessions = crate::sessions_of(c.clone(), project).await;
    let own = sessions.iter().find(|s| s.agent_session_id == "mcp-up").expect("the hook's session");
    assert!(own.id.ends_with(out["own_session"].as_str().unwrap()), "{own:?} vs {out}");
    let held = c
        .reservations
        .list_reservations(baton_proto::v1::ListReservationsRequest {
            project: project.into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .reservations;
    let paths: Vec<(&str, &str)> = held.iter().map(|r| (r.path.as_str(), r.session_id.as_str())).collect();
    assert_eq!(
        paths,
        [("src/deep/lib.rs", own.id.as_str())],
        "the tool reserved for the conversation's session"
    );
    let memory = c
        .memory
        .list_memory(ListMemoryRequest {
            project: project.into(),
            category: "decision".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let decision = &memory.entries[0];
    assert_eq!(decision.content, "Use SQLite for the local cache");
    assert_eq!(decision.rationale, "one file, no server to run");
    assert_eq!(decision.author.as_ref().unwrap().session_id, own.id, "written as the conversation's session");
    let checkpoints = c
        .checkpoints
        .list_checkpoints(ListCheckpointsRequest { session_id: own.id.clone(), ..Default::default() })
        .await
        .unwrap()
        .into_inner()
        .checkpoints;
    let saved =
        checkpoints.iter().find(|k| k.reason == "before switching storage").expect("the tool's checkpoint");
    let saved = c
        .checkpoints
        .get_checkpoint(GetCheckpointRequest { checkpoint_id: saved.id.clone(), include_payload: false })
        .await
        .unwrap()
        .into_inner()
        .checkpoint
        .unwrap();
    let state = saved.state.as_ref().unwrap();
    let tasks: Vec<_> = state.active_tasks.iter().map(|t| (t.content.as_str(), t.status.as_str())).collect();
    assert_eq!(tasks, [("port the cache to SQLite", "in_progress"), ("write the migration", "pending")]);
    same_search_everywhere(&mut c, &env, &deep, &out).await;

    // The hub down: reads answer from the cached brief, marked; writes queue; no hang.
    let out = python_mcp(&env, "http://127.0.0.1:9", &deep, "down");
    let brief = out["brief"].as_str().unwrap();
    assert!(brief.contains("unreachable") && brief.contains("Use SQLite for the local cache"), "{brief}");
    let status = env.run(&deep, &["status", "--json"], "");
    let status: Value = serde_json::from_str(&status.stdout).unwrap();
    assert!(status["queue"]["pending"].as_u64().unwrap() >= 1, "{status}");
    let out = env.run(&deep, &["sync"], "");
    assert_eq!(out.code, 0, "{out:?}");
    let loops = env.run(&deep, &["memory", "list", "open_loop", "--json"], "");
    assert!(loops.stdout.contains("retry the flaky upload"), "{loops:?}");
}
both!(stock_client_calls_every_tool);

/// The MCP `search` tool and `baton search --json` give the RPC's hits, in its order.
async fn same_search_everywhere(
    c: &mut baton_tests::Clients,
    env: &ClientEnv,
    dir: &std::path::Path,
    mcp: &Value,
) {
    let rpc: Vec<String> = c
        .search
        .search(baton_proto::v1::SearchRequest {
            project: "github.com/acme/mcp".into(),
            query: "sqlite cache".into(),
            page_size: 20,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .hits
        .into_iter()
        .map(|h| h.record_id)
        .collect();
    assert!(rpc.len() >= 2, "the decision and the checkpoint: {rpc:?}");
    let cli = env.run(dir, &["search", "sqlite", "cache", "--limit", "20", "--json"], "");
    let cli: Value = serde_json::from_str(&cli.stdout).unwrap_or_else(|e| panic!("{e}: {cli:?}"));
    let cli: Vec<&str> =
        cli["hits"].as_array().unwrap().iter().map(|h| h["record_id"].as_str().unwrap()).collect();
    assert_eq!(cli, rpc, "baton search --json");
    let told = mcp["search"].as_str().unwrap();
    let shown: Vec<&str> = told.lines().filter_map(|l| l.split(" — id ").nth(1)).map(|r| &r[..8]).collect();
    let short: Vec<&str> = rpc.iter().map(|id| &id[id.len() - 8..]).collect();
    assert_eq!(shown, short, "the MCP search tool: {told}");
}
