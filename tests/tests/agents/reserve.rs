//! Reservations at the real agents' own pre-tool hooks: another session (on another machine)
//! holds `src/auth`; with the project set to deny, the agent's edit of a file in it is
//! refused by its hook and the model receives the refusal naming the holder; the agent then
//! switches the project to warn (through its own shell), edits again, and the edit goes
//! through with the warning before the model; an edit of a file nobody holds is untouched.

use baton_proto::v1::{ReserveRequest, StartSessionRequest};
use baton_tests::agents::{self, Machine};
use baton_tests::fake_model::{FakeModel, Received, Script, Step};
use baton_tests::{Backend, Server};
use serde_json::json;

use crate::checked;

const REFUSED: &str = "Baton refused this edit";
const WARNED: &str = "another session has reserved";
const HOLDER_REASON: &str = "rewriting auth on machine 2";

/// A session of another machine that holds `src/auth` of `project`.
async fn held_elsewhere(server: &Server, project: &str) {
    let mut c = server.clients().await;
    let write = || {
        Some(baton_proto::v1::WriteOptions {
            request_id: uuid::Uuid::now_v7().to_string(),
            ..Default::default()
        })
    };
    let start = StartSessionRequest {
        project: project.into(),
        agent: baton_proto::v1::AgentKind::Codex as i32,
        host: "machine-2".into(),
        user: "ann".into(),
        write: write(),
        ..Default::default()
    };
    let session = c.sessions.start_session(start).await.unwrap().into_inner().session.unwrap();
    let ask = ReserveRequest {
        project: project.into(),
        session_id: session.id,
        paths: vec!["src/auth".into()],
        reason: HOLDER_REASON.into(),
        write: write(),
        ..Default::default()
    };
    assert!(c.reservations.reserve(ask).await.unwrap().into_inner().granted);
}

/// A machine whose repository has `src/auth`, held by another machine's session, with the
/// project set to deny.
async fn machine(server: &Server, origin: &str, project: &str) -> Machine {
    let m = Machine::new("machine-1", &server.url(), origin);
    std::fs::create_dir_all(m.repo.join("src/auth")).unwrap();
    held_elsewhere(server, project).await;
    let set = m.baton(&["reservations", "settings", "--enforce", "deny"]);
    assert_eq!(set.code, 0, "{set:?}");
    m
}

/// The shell command the agent runs between its two edits.
fn to_warn() -> String {
    format!("{} reservations settings --enforce warn", baton_tests::binary("baton").display())
}

/// What the model received after each step, and the files the run left.
fn assert_outcome(turns: &[Received], m: &Machine) {
    assert!(turns.len() >= 5, "{} turns", turns.len());
    let after_deny = turns[1].text();
    assert!(after_deny.contains(REFUSED) && after_deny.contains(HOLDER_REASON), "{after_deny}");
    assert!(after_deny.contains("machine-2") && after_deny.contains("--wait"), "{after_deny}");
    let after_warn = turns[3].text();
    assert!(after_warn.contains(WARNED) && after_warn.contains(HOLDER_REASON), "{after_warn}");
    let last = turns[4].text();
    assert_eq!(last.matches(WARNED).count(), 1, "the free file's edit drew no warning: {last}");
    let held = std::fs::read_to_string(m.repo.join("src/auth/a.rs")).unwrap_or_default();
    assert_eq!(held, "WARNED\n", "the refused write never happened; the warned one did");
    assert_eq!(std::fs::read_to_string(m.repo.join("free.txt")).unwrap_or_default(), "free\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_refuses_and_warns() {
    let Some(cli) = agents::cli("claude") else { return };
    let server = Server::start(Backend::Sqlite).await.unwrap();
    let m = machine(&server, "https://github.com/acme/claude-reserve.git", "github.com/acme/claude-reserve")
        .await;
    assert_eq!(m.baton(&["init", "claude"]).code, 0);
    let file = |name: &str| format!("{}/{name}", m.repo.display());
    let model = FakeModel::start(Script::new(vec![
        Step::tool("Write", json!({"file_path": file("src/auth/a.rs"), "content": "DENIED\n"})),
        Step::tool("Bash", json!({"command": to_warn(), "description": "warn only"})),
        Step::tool("Write", json!({"file_path": file("src/auth/a.rs"), "content": "WARNED\n"})),
        Step::tool("Write", json!({"file_path": file("free.txt"), "content": "free\n"})),
        Step::text("Done. RESERVE-FINAL"),
    ]))
    .await
    .unwrap();
    let args = ["-p", "Do the scripted steps", "--dangerously-skip-permissions", "--output-format", "json"];
    let run = m.agent(&cli, &model.url(), &args, &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_outcome(&model.turns(), &m);
    checked(
        "claude",
        &[
            "a Write into another session's reserved directory: refused (deny), warned (warn), a free file untouched",
        ],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_refuses_and_warns_after_the_tool() {
    let Some(cli) = agents::cli("gemini") else { return };
    let server = Server::start(Backend::Sqlite).await.unwrap();
    let m = machine(&server, "https://github.com/acme/gemini-reserve.git", "github.com/acme/gemini-reserve")
        .await;
    crate::gemini::configure(&m);
    assert_eq!(m.baton(&["init", "gemini"]).code, 0);
    let file = |name: &str| format!("{}/{name}", m.repo.display());
    let model = FakeModel::start(Script::new(vec![
        Step::tool("write_file", json!({"file_path": file("src/auth/a.rs"), "content": "DENIED\n"})),
        Step::tool("run_shell_command", json!({"command": to_warn(), "description": "warn only"})),
        Step::tool("write_file", json!({"file_path": file("src/auth/a.rs"), "content": "WARNED\n"})),
        Step::tool("write_file", json!({"file_path": file("free.txt"), "content": "free\n"})),
        Step::text("Done. RESERVE-FINAL"),
    ]))
    .await
    .unwrap();
    let run = m.agent(&cli, &model.url(), &crate::gemini::gemini_args("Do the scripted steps", &[]), &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_outcome(&model.turns(), &m);
    checked(
        "gemini",
        &[
            "write_file into another session's reserved directory: refused by BeforeTool (deny), warned with the result by AfterTool (warn), a free file untouched",
        ],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_refuses_and_warns_an_apply_patch() {
    let Some(cli) = agents::cli("codex") else { return };
    let server = Server::start(Backend::Sqlite).await.unwrap();
    let m =
        machine(&server, "https://github.com/acme/codex-reserve.git", "github.com/acme/codex-reserve").await;
    let repo = m.repo.display().to_string();
    let add = |name: &str, text: &str| json!({"input": format!("*** Begin Patch\n*** Add File: {repo}/{name}\n+{text}\n*** End Patch\n")});
    let model = FakeModel::start(Script::new(vec![
        Step::tool("apply_patch", add("src/auth/a.rs", "DENIED")),
        Step::tool("exec_command", json!({"cmd": to_warn(), "workdir": repo})),
        Step::tool("apply_patch", add("src/auth/a.rs", "WARNED")),
        Step::tool("apply_patch", add("free.txt", "free")),
        Step::text("Done. RESERVE-FINAL"),
    ]))
    .await
    .unwrap();
    crate::codex::configure(&m, &model.url());
    assert_eq!(m.baton(&["init", "codex", "--trust"]).code, 0);
    let run = m.agent(&cli, &model.url(), &crate::codex::exec_args("Do the scripted steps"), &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_outcome(&model.turns(), &m);
    checked(
        "codex",
        &[
            "apply_patch into another session's reserved directory: refused by PreToolUse (deny), warned as developer context (warn), a free file untouched",
        ],
    );
}
