//! Gemini CLI: SessionStart fires (Baton installs it without a matcher: Gemini compares
//! matchers by exact string) and the brief reaches the model; write_todos, write_file and
//! the shell reach the checkpoint; the prompt (without the hook context Gemini prepends)
//! and the answer.

use baton_tests::agents::{self, Machine};
use baton_tests::fake_model::{FakeModel, Script, Step};
use baton_tests::{Backend, Server};
use serde_json::{Value, json};

use crate::{checked, head, sessions, until_ended};

const ORIGIN: &str = "https://github.com/acme/gemini-edge.git";
const PROJECT: &str = "github.com/acme/gemini-edge";

/// Gemini's settings on a machine: API-key auth, a model that is offered write_todos
/// (non-preview Gemini 2), nothing phoning home.
pub fn configure(m: &Machine) {
    let dir = m.home.path().join(".gemini");
    std::fs::create_dir_all(&dir).unwrap();
    let settings = json!({
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "model": {"name": "gemini-2.5-pro"},
        "general": {"disableAutoUpdate": true, "disableUpdateNag": true},
        "privacy": {"usageStatisticsEnabled": false},
        "telemetry": {"enabled": false}
    });
    std::fs::write(dir.join("settings.json"), settings.to_string()).unwrap();
}

pub fn gemini_args<'a>(prompt: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["-p", prompt, "--yolo", "--skip-trust", "-o", "json"];
    args.extend_from_slice(extra);
    args
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn todos_files_and_the_brief() {
    let Some(cli) = agents::cli("gemini") else { return };
    let server = Server::start(Backend::Sqlite).await.unwrap();
    let m = Machine::new("machine-1", &server.url(), ORIGIN);
    configure(&m);
    let init = m.baton(&["init", "gemini"]);
    assert_eq!(init.code, 0, "{init:?}");
    std::fs::write(m.repo.join("doomed.txt"), "bye\n").unwrap();
    let repo = m.repo.display().to_string();
    let model = FakeModel::start(Script::new(vec![
        Step::tool("write_todos", json!({"todos": [{"description": "Write hello", "status": "in_progress"}, {"description": "Delete doomed", "status": "pending"}]})),
        Step::tool("write_file", json!({"file_path": format!("{repo}/hello.txt"), "content": "hello\n"})),
        Step::tool("run_shell_command", json!({"command": "rm doomed.txt", "description": "delete doomed"})),
        Step::tool("write_todos", json!({"todos": [{"description": "Write hello", "status": "completed"}, {"description": "Delete doomed", "status": "completed"}]})),
        Step::text("Done. GEMINI-FINAL"),
    ]))
    .await
    .unwrap();
    let run = m.agent(&cli, &model.url(), &gemini_args("Do the scripted steps", &[]), &[]);
    assert_eq!(run.code, 0, "{run:?}");
    let conversation = serde_json::from_str::<Value>(&run.stdout)
        .ok()
        .and_then(|v| v["session_id"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("no session id: {run:?}"));
    let turns = model.turns();
    assert!(
        turns[0].text().contains("<hook_context># Baton brief: github.com/acme/gemini-edge"),
        "{}",
        turns[0].text()
    );

    let mut c = server.clients().await;
    let ended = until_ended(&mut c, PROJECT).await;
    assert_eq!((ended.agent_session_id.as_str(), ended.host.as_str()), (conversation.as_str(), "machine-1"));
    assert_eq!(sessions(&mut c, PROJECT).await.len(), 1);
    let state = head(&mut c, &ended).await.state.unwrap();
    let tasks: Vec<(&str, &str)> =
        state.active_tasks.iter().map(|t| (t.content.as_str(), t.status.as_str())).collect();
    assert_eq!(tasks, [("Write hello", "completed"), ("Delete doomed", "completed")]);
    assert_eq!(state.files_created, ["hello.txt"]);
    assert_eq!(state.files_deleted, ["doomed.txt"]);
    assert_eq!(state.last_prompt, "Do the scripted steps");
    assert!(state.last_answer.contains("GEMINI-FINAL"), "{state:?}");
    checked(
        "gemini",
        &[
            "SessionStart fires (no matcher) and the brief reaches the model",
            "write_todos tasks, write_file, shell delete",
            "prompt without the hook context, and the answer",
        ],
    );
}

/// A Gemini conversation continued on another machine: `baton resume --restore` writes the
/// chat where Gemini finds it for the clone there (named by the id's first 8 characters),
/// and `gemini --resume` sends the model the earlier turns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_moves_to_another_machine() {
    let Some(cli) = agents::cli("gemini") else { return };
    let server = Server::start(Backend::Sqlite).await.unwrap();
    let model = FakeModel::start(Script::new(vec![
        Step::tool("write_file", json!({"file_path": "notes.txt", "content": "one\n"})),
        Step::text("First part done. HOP-1"),
        Step::text("Continued. HOP-2"),
    ]))
    .await
    .unwrap();
    let machines: Vec<Machine> =
        ["machine-1", "machine-2"].iter().map(|h| Machine::new(h, &server.url(), ORIGIN)).collect();
    for m in &machines {
        configure(m);
        let init = m.baton(&["init", "gemini", "--sync-transcripts"]);
        assert_eq!(init.code, 0, "{init:?}");
    }
    let first = machines[0].agent(&cli, &model.url(), &gemini_args("Start the work on machine 1", &[]), &[]);
    assert_eq!(first.code, 0, "{first:?}");
    let conversation =
        serde_json::from_str::<Value>(&first.stdout).unwrap()["session_id"].as_str().unwrap().to_owned();
    let mut c = server.clients().await;
    until_ended(&mut c, PROJECT).await;

    let m2 = &machines[1];
    let resume = m2.baton(&["resume", "--restore", "--agent", "gemini", "--json"]);
    assert_eq!(resume.code, 0, "{resume:?}");
    let reply: Value = serde_json::from_str(&resume.stdout).unwrap();
    assert_eq!(reply["resume_argv"], json!(["gemini", "--resume", conversation]), "{reply}");
    let seen = model.turns().len();
    let second = m2.agent(
        &cli,
        &model.url(),
        &gemini_args("continue on machine 2", &["--resume", &conversation]),
        &[],
    );
    assert_eq!(second.code, 0, "{second:?}");
    let turns = model.turns();
    assert!(turns.len() > seen, "machine 2 asked the model");
    let body = turns[seen].text();
    assert!(body.contains("Start the work on machine 1") && body.contains("continue on machine 2"), "{body}");
    until_ended(&mut c, PROJECT).await;
    let newest = sessions(&mut c, PROJECT).await.remove(0);
    assert_eq!(
        (newest.host.as_str(), newest.agent_session_id.as_str()),
        ("machine-2", conversation.as_str())
    );
    checked(
        "gemini",
        &[
            "chat restored on another machine; gemini --resume sends the earlier turns",
            "the successor records the conversation",
        ],
    );
}
