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
    let Some(cli) = agents::cli("claude") else { return };
    let server = Server::start(Backend::Sqlite).await.unwrap();
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
            "init registers the MCP server and its allow rule",
            "default permission mode, from a subdirectory: mcp__baton__remember stored a decision as the conversation's session",
            "the brief names the tools",
            "the next session's brief on another machine holds the decision",
            "--uninstall removes the server and the rule",
        ],
    );
}
