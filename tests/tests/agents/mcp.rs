//! Baton's MCP tools in the real Claude Code: registered by `baton init claude`, called in
//! Claude Code's default permission mode from a subdirectory of the repository; the
//! decision the model stored reaches the next session's brief on another machine.

use baton_proto::v1::ListMemoryRequest;
use baton_tests::agents::{self, Machine};
use baton_tests::fake_model::{FakeModel, Script, Step};
use baton_tests::{Backend, Server};
use serde_json::json;

use crate::{checked, sessions};

const ORIGIN: &str = "https://github.com/acme/claude-mcp.git";
const PROJECT: &str = "github.com/acme/claude-mcp";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_remembers_through_the_mcp_server() {
    claude_remembers(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_remembers_through_the_mcp_server_on_postgres() {
    claude_remembers(Backend::Postgres).await;
}

async fn claude_remembers(backend: Backend) {
    let Some(cli) = agents::cli("claude") else { return };
    let server = Server::start(backend).await.unwrap();
    let m1 = Machine::new("machine-1", &server.url(), ORIGIN);
    let init = m1.baton(&["init", "claude"]);
    assert!(init.code == 0 && init.stdout.contains("registered Baton's MCP tools"), "{init:?}");
    let doctor = m1.baton(&["doctor"]);
    assert!(doctor.stdout.contains("claude can call Baton's MCP tools"), "{doctor:?}");
    let sub = m1.repo.join("src/app");
    std::fs::create_dir_all(&sub).unwrap();

    let decision = "Retry uploads three times";
    let model = FakeModel::start(Script::new(vec![
        Step::tool(
            "mcp__baton__remember",
            json!({"category": "decision", "text": decision, "rationale": "the storage API drops 1% of writes"}),
        ),
        Step::text("Remembered. MCP-DONE"),
    ]))
    .await
    .unwrap();
    // Claude Code's default permission mode: no --dangerously-skip-permissions.
    let run = m1.agent_in(
        &sub,
        &cli,
        &model.url(),
        &["-p", "Remember the retry decision", "--output-format", "json"],
        &[],
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("MCP-DONE"), "{run:?}");
    let turns = model.turns();
    assert_eq!(turns.len(), 2, "{turns:?}");
    let first = turns[0].text();
    assert!(first.contains("Baton's tools are connected"), "the brief names the tools: {first}");
    assert!(first.contains("mcp__baton__remember"), "the model was offered the tool: {first}");
    let second = turns[1].text();
    assert!(second.contains("Remembered as a decision"), "the tool's answer reached the model: {second}");

    let mut c = server.clients().await;
    let memory = c
        .memory
        .list_memory(ListMemoryRequest {
            project: PROJECT.into(),
            category: "decision".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(memory.entries.len(), 1, "{memory:?}");
    let stored = &memory.entries[0];
    assert_eq!(
        (stored.content.as_str(), stored.rationale.as_str()),
        (decision, "the storage API drops 1% of writes")
    );
    let session = sessions(&mut c, PROJECT).await.into_iter().next().expect("the conversation's session");
    assert_eq!(
        stored.author.as_ref().unwrap().session_id,
        session.id,
        "written as the conversation's session"
    );

    // The next session, on another machine: its brief holds the decision.
    let m2 = Machine::new("machine-2", &server.url(), ORIGIN);
    assert_eq!(m2.baton(&["init", "claude"]).code, 0);
    model.set_script(Script::new(vec![Step::text("Read the brief. NEXT-DONE")]));
    let before = model.turns().len();
    let run = m2.agent(&cli, &model.url(), &["-p", "What did we decide?", "--output-format", "json"], &[]);
    assert_eq!(run.code, 0, "{run:?}");
    let next = model.turns()[before].text();
    assert!(next.contains(decision) && next.contains("drops 1% of writes"), "the next brief: {next}");

    // Removed again by --uninstall, exactly.
    let out = m1.baton(&["init", "claude", "--uninstall"]);
    assert_eq!(out.code, 0, "{out:?}");
    let claude_json = std::fs::read_to_string(m1.home.path().join(".claude.json")).unwrap_or_default();
    assert!(!claude_json.contains("\"baton\""), "{claude_json}");
    let settings = std::fs::read_to_string(m1.home.path().join(".claude/settings.json")).unwrap_or_default();
    assert!(!settings.contains("mcp__baton"), "{settings}");
    checked(
        "claude",
        &[
            if backend == Backend::Sqlite { "hub on SQLite" } else { "hub on Postgres" },
            "init registers the MCP server and its allow rule",
            "default permission mode, from a subdirectory: mcp__baton__remember stored a decision as the conversation's session",
            "the brief names the tools",
            "the next session's brief on another machine holds the decision",
            "--uninstall removes the server and the rule",
        ],
    );
}

/// Codex: `baton init codex` adds `[mcp_servers.baton]` to the config the user already has;
/// with a read-only sandbox (where Codex asks before an MCP call, and `codex exec` refuses)
/// the tool runs because Baton set its approval mode, and finds the hub although Codex
/// passes servers only a few variables.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_remembers_through_the_mcp_server() {
    let Some(cli) = agents::cli("codex") else { return };
    let server = Server::start(Backend::Sqlite).await.unwrap();
    let m = Machine::new("machine-1", &server.url(), "https://github.com/acme/codex-mcp.git");
    let model = FakeModel::start(Script::new(vec![
        Step::tool("tool_search", json!({"query": "baton remember", "limit": 8})),
        Step::tool("mcp__baton::remember", json!({"category": "constraint", "text": "Never log tokens"})),
        Step::text("Done. CODEX-MCP-DONE"),
    ]))
    .await
    .unwrap();
    crate::codex::configure(&m, &model.url());
    let init = m.baton(&["init", "codex", "--trust"]);
    assert!(init.code == 0 && init.stdout.contains("registered Baton's MCP tools"), "{init:?}");
    let config = std::fs::read_to_string(m.home.path().join(".codex/config.toml")).unwrap();
    assert!(config.contains("[model_providers.fake]") && config.contains("[mcp_servers.baton]"), "{config}");
    let doctor = m.baton(&["doctor"]);
    assert!(doctor.stdout.contains("codex can call Baton's MCP tools"), "{doctor:?}");
    let run = m.agent(
        &cli,
        &model.url(),
        // Codex 0.169 defers MCP tools: the model finds them with tool_search first.
        &["exec", "--skip-git-repo-check", "-s", "read-only", "--json", "Remember the logging rule"],
        &[],
    );
    assert_eq!(run.code, 0, "{run:?}");
    let turns = model.turns();
    let first = turns[0].text();
    assert!(first.contains("Baton's tools are connected"), "{first}");
    let last = turns.last().map(baton_tests::fake_model::Received::text).unwrap_or_default();
    assert_eq!(turns.len(), 3, "tool_search, the MCP call, the answer");
    assert!(
        last.contains("Remembered as a constraint"),
        "the tool's answer reached the model: {last}\n{run:?}"
    );
    let listed = m.baton(&["memory", "list", "constraint", "--json"]);
    assert!(listed.stdout.contains("Never log tokens"), "{listed:?}");
    checked(
        "codex",
        &[
            "init adds [mcp_servers.baton] beside the user's config",
            "found by tool_search, mcp__baton remember ran in a read-only sandbox without a prompt and stored the constraint",
        ],
    );
}

/// Gemini CLI: headless, without --yolo, a server it does not trust has its tools left out;
/// `baton init gemini` trusts Baton's, so the model gets and calls them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_remembers_through_the_mcp_server() {
    let Some(cli) = agents::cli("gemini") else { return };
    let server = Server::start(Backend::Sqlite).await.unwrap();
    let m = Machine::new("machine-1", &server.url(), "https://github.com/acme/gemini-mcp.git");
    crate::gemini::configure(&m);
    let init = m.baton(&["init", "gemini"]);
    assert!(init.code == 0 && init.stdout.contains("registered Baton's MCP tools"), "{init:?}");
    let doctor = m.baton(&["doctor"]);
    assert!(doctor.stdout.contains("gemini can call Baton's MCP tools"), "{doctor:?}");
    let model = FakeModel::start(Script::new(vec![
        Step::tool("mcp_baton_remember", json!({"category": "open_loop", "text": "Flaky upload test on CI"})),
        Step::text("Done. GEMINI-MCP-DONE"),
    ]))
    .await
    .unwrap();
    let run = m.agent(&cli, &model.url(), &["-p", "Note the open loop", "--skip-trust", "-o", "json"], &[]);
    assert_eq!(run.code, 0, "{run:?}");
    let turns = model.turns();
    let first = turns[0].text();
    assert!(first.contains("mcp_baton_remember"), "the model was offered the tool: {first}");
    let last = turns.last().map(baton_tests::fake_model::Received::text).unwrap_or_default();
    assert!(last.contains("Remembered as an open loop"), "the tool's answer reached the model: {last}");
    let listed = m.baton(&["memory", "list", "open_loop", "--json"]);
    assert!(listed.stdout.contains("Flaky upload test on CI"), "{listed:?}");
    checked(
        "gemini",
        &[
            "init trusts Baton's MCP server",
            "mcp_baton_remember ran headless without --yolo and stored the open loop",
        ],
    );
}
