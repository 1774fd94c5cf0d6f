//! Codex: its hooks run only once trusted (doctor says so; `baton init codex --trust`
//! records it as /hooks does, and the real CLI then runs them without a bypass); the brief
//! reaches the model as developer context; update_plan, the shell tool and apply_patch
//! reach the checkpoint.

use baton_tests::agents::{self, Machine};
use baton_tests::fake_model::{FakeModel, Script, Step};
use baton_tests::{Backend, Server};
use serde_json::{Value, json};

use crate::{checked, head, sessions, until_ended};

const ORIGIN: &str = "https://github.com/acme/codex-edge.git";
const PROJECT: &str = "github.com/acme/codex-edge";

/// Codex's config on a machine: the fake model as its provider (Responses over SSE).
pub fn configure(m: &Machine, model_url: &str) {
    let dir = m.home.path().join(".codex");
    std::fs::create_dir_all(&dir).unwrap();
    let config = format!(
        "model = \"gpt-5.5\"\nmodel_provider = \"fake\"\napproval_policy = \"never\"\nsandbox_mode = \"danger-full-access\"\n\n\
         [model_providers.fake]\nname = \"fake\"\nbase_url = \"{model_url}/v1\"\nwire_api = \"responses\"\n\
         env_key = \"FAKE_OPENAI_KEY\"\nrequest_max_retries = 0\nstream_max_retries = 0\n\n\
         [features]\nenable_request_compression = false\n"
    );
    std::fs::write(dir.join("config.toml"), config).unwrap();
}

pub fn exec_args(prompt: &str) -> Vec<&str> {
    vec![
        "exec",
        "--skip-git-repo-check",
        "--dangerously-bypass-approvals-and-sandbox",
        "--json",
        "-c",
        "tools.update_plan.enabled=true",
        prompt,
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trusted_hooks_plan_shell_and_patch() {
    let Some(cli) = agents::cli("codex") else { return };
    let server = Server::start(Backend::Sqlite).await.unwrap();
    let m = Machine::new("machine-1", &server.url(), ORIGIN);
    std::fs::write(m.repo.join("existing.txt"), "original\n").unwrap();
    std::fs::write(m.repo.join("doomed.txt"), "bye\n").unwrap();
    let repo = m.repo.display().to_string();
    let model = FakeModel::start(Script::new(vec![
        Step::tool("update_plan", json!({"plan": [{"step": "Create files", "status": "in_progress"}, {"step": "Delete doomed", "status": "pending"}]})),
        Step::tool(
            "apply_patch",
            json!({"input": format!("*** Begin Patch\n*** Add File: {repo}/hello.txt\n+hello\n*** Update File: {repo}/existing.txt\n@@\n-original\n+patched\n*** End Patch\n")}),
        ),
        Step::tool("exec_command", json!({"cmd": "rm doomed.txt", "workdir": repo})),
        Step::tool("update_plan", json!({"plan": [{"step": "Create files", "status": "completed"}, {"step": "Delete doomed", "status": "completed"}]})),
        Step::text("Done. CODEX-FINAL"),
    ]))
    .await
    .unwrap();
    configure(&m, &model.url());
    assert_eq!(m.baton(&["init", "codex"]).code, 0);
    let doctor = m.baton(&["doctor"]);
    assert!(
        doctor.stdout.contains("Codex skips 8 of them") && doctor.stdout.contains("baton init codex --trust"),
        "{doctor:?}"
    );
    let trust = m.baton(&["init", "codex", "--trust"]);
    assert!(trust.stdout.contains("Codex trusts Baton's hooks: recorded 8"), "{trust:?}");
    let doctor = m.baton(&["doctor"]);
    assert!(doctor.stdout.contains("trusted in Codex"), "{doctor:?}");

    // No --dangerously-bypass-hook-trust: the hooks run because Codex trusts them.
    let run = m.agent(&cli, &model.url(), &exec_args("Do the scripted steps"), &[]);
    assert_eq!(run.code, 0, "{run:?}");
    let thread = run
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "thread.started")
        .and_then(|v| v["thread_id"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("no thread id: {run:?}"));
    let turns = model.turns();
    assert!(
        turns[0].text().contains("# Baton brief: github.com/acme/codex-edge"),
        "the brief as developer context"
    );

    let mut c = server.clients().await;
    let ended = until_ended(&mut c, PROJECT).await;
    assert_eq!((ended.agent_session_id.as_str(), ended.host.as_str()), (thread.as_str(), "machine-1"));
    let all = sessions(&mut c, PROJECT).await;
    assert_eq!(all.len(), 1, "{all:?}");
    let state = head(&mut c, &all[0]).await.state.unwrap();
    let tasks: Vec<(&str, &str)> =
        state.active_tasks.iter().map(|t| (t.content.as_str(), t.status.as_str())).collect();
    assert_eq!(tasks, [("Create files", "completed"), ("Delete doomed", "completed")]);
    assert_eq!(state.files_created, ["hello.txt"]);
    assert_eq!(state.files_modified, ["existing.txt"]);
    assert_eq!(state.files_deleted, ["doomed.txt"]);
    assert_eq!(state.last_prompt, "Do the scripted steps");
    assert!(state.last_answer.contains("CODEX-FINAL"), "{state:?}");
    checked(
        "codex",
        &[
            "doctor names untrusted hooks; init --trust makes the real CLI run them",
            "brief as developer context",
            "update_plan tasks, apply_patch files, shell delete",
            "prompt and answer",
        ],
    );
}

/// A Codex conversation continued on another machine: `baton resume --restore` writes the
/// rollout where Codex finds it there (another HOME, the clone at another path), and
/// `codex exec resume` sends the model the earlier turns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_moves_to_another_machine() {
    let Some(cli) = agents::cli("codex") else { return };
    let server = Server::start(Backend::Sqlite).await.unwrap();
    let model = FakeModel::start(Script::new(vec![
        Step::tool("exec_command", json!({"cmd": "echo one > one.txt"})),
        Step::text("First part done. HOP-1"),
        Step::text("Continued. HOP-2"),
    ]))
    .await
    .unwrap();
    let machines: Vec<Machine> =
        ["machine-1", "machine-2"].iter().map(|h| Machine::new(h, &server.url(), ORIGIN)).collect();
    for m in &machines {
        configure(m, &model.url());
        let init = m.baton(&["init", "codex", "--trust", "--sync-transcripts"]);
        assert_eq!(init.code, 0, "{init:?}");
    }
    let first = machines[0].agent(&cli, &model.url(), &exec_args("Start the work on machine 1"), &[]);
    assert_eq!(first.code, 0, "{first:?}");
    let thread = first
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "thread.started")
        .and_then(|v| v["thread_id"].as_str().map(str::to_owned))
        .unwrap();
    let mut c = server.clients().await;
    until_ended(&mut c, PROJECT).await;

    let m2 = &machines[1];
    let resume = m2.baton(&["resume", "--restore", "--agent", "codex", "--json"]);
    assert_eq!(resume.code, 0, "{resume:?}");
    let reply: Value = serde_json::from_str(&resume.stdout).unwrap();
    assert_eq!(reply["resume_argv"], json!(["codex", "resume", thread]), "{reply}");
    let seen = model.turns().len();
    let args = [
        "exec",
        "resume",
        thread.as_str(),
        "--skip-git-repo-check",
        "--dangerously-bypass-approvals-and-sandbox",
        "--json",
        "continue on machine 2",
    ];
    let second = m2.agent(&cli, &model.url(), &args, &[]);
    assert_eq!(second.code, 0, "{second:?}");
    let turns = model.turns();
    assert!(turns.len() > seen, "machine 2 asked the model");
    let body = turns[seen].text();
    assert!(body.contains("Start the work on machine 1") && body.contains("continue on machine 2"), "{body}");
    until_ended(&mut c, PROJECT).await;
    let newest = sessions(&mut c, PROJECT).await.remove(0);
    assert_eq!((newest.host.as_str(), newest.agent_session_id.as_str()), ("machine-2", thread.as_str()));
    assert!(!newest.resumed_from.is_empty());
    checked(
        "codex",
        &[
            "rollout restored on another machine; codex exec resume sends the earlier turns",
            "the successor records the thread",
        ],
    );
}
