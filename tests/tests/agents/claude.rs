//! Claude Code: the brief reaches the model; tasks (TaskCreate/TaskUpdate), files and the
//! shell's deletes reach the checkpoint from the hook payloads, not the lagging transcript;
//! a refused write (no hook fires for it) from the transcript; task, recovery and
//! session-end checkpoints.

use baton_proto::v1::CheckpointKind;
use baton_tests::agents::{self, Machine};
use baton_tests::fake_model::{FakeModel, Script, Step};
use baton_tests::{Backend, Server};
use serde_json::{Value, json};

use crate::{checked, checkpoints, head, sessions, until_ended};

const ORIGIN: &str = "https://github.com/acme/claude-edge.git";
const PROJECT: &str = "github.com/acme/claude-edge";

fn claude_args<'a>(prompt: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["-p", prompt, "--dangerously-skip-permissions", "--output-format", "json"];
    args.extend_from_slice(extra);
    args
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_files_and_the_brief() {
    let Some(cli) = agents::cli("claude") else { return };
    let server = Server::start(Backend::Sqlite).await.unwrap();
    let m1 = Machine::new("machine-1", &server.url(), ORIGIN);
    let init = m1.baton(&["init", "claude"]);
    assert_eq!(init.code, 0, "{init:?}");
    std::fs::write(m1.repo.join("existing.txt"), "original\n").unwrap();
    std::fs::write(m1.repo.join("doomed.txt"), "bye\n").unwrap();
    let repo = m1.repo.display().to_string();
    let file = |name: &str| format!("{repo}/{name}");
    let model = FakeModel::start(Script::new(vec![
        Step::tool("TaskCreate", json!({"subject": "Write hello", "description": "Create hello.txt", "activeForm": "Writing hello"})),
        Step::tool("TaskCreate", json!({"subject": "Fuzz the parser", "description": "Later", "activeForm": "Fuzzing"})),
        Step::tool("TaskUpdate", json!({"taskId": "1", "status": "completed"})),
        Step::tool("Write", json!({"file_path": file("hello.txt"), "content": "hello\n"})),
        // Refused by Claude Code itself (not read first): no hook fires, only the transcript has it.
        Step::tool("Write", json!({"file_path": file("existing.txt"), "content": "blind\n"})),
        Step::tool("Read", json!({"file_path": file("existing.txt")})),
        Step::tool("Write", json!({"file_path": file("existing.txt"), "content": "updated\n"})),
        // A failure (PostToolUseFailure), then the same command succeeding: a recovery.
        Step::tool("Bash", json!({"command": "cat notes.txt", "description": "Read notes"})),
        Step::tool("Write", json!({"file_path": file("notes.txt"), "content": "notes\n"})),
        Step::tool("Bash", json!({"command": "cat notes.txt", "description": "Read notes"})),
        Step::tool("Bash", json!({"command": format!("rm {}", file("doomed.txt")), "description": "Delete doomed.txt"})),
        Step::text("All steps done. FINAL-TEXT-MARKER"),
    ]))
    .await
    .unwrap();
    let run = m1.agent(&cli, &model.url(), &claude_args("Do the scripted steps", &[]), &[]);
    assert_eq!(run.code, 0, "{run:?}");
    let result: Value = serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {run:?}"));
    let conversation = result["session_id"].as_str().expect("session_id").to_owned();

    // The model received the brief (SessionStart's additional context) and every step ran.
    let turns = model.turns();
    assert_eq!(turns.len(), 12, "one request per step");
    assert!(turns[0].text().contains("# Baton brief: github.com/acme/claude-edge"), "{}", turns[0].text());

    let mut c = server.clients().await;
    // SessionEnd's work is detached from the agent (it gives the hook 1.5 s): wait for it.
    let ended = until_ended(&mut c, PROJECT).await;
    assert!(ended.summary.contains("FINAL-TEXT-MARKER"), "{ended:?}");
    let all = sessions(&mut c, PROJECT).await;
    assert_eq!(all.len(), 1, "{all:?}");
    let session = &all[0];
    assert_eq!(
        (session.agent_session_id.as_str(), session.host.as_str()),
        (conversation.as_str(), "machine-1")
    );
    let state = head(&mut c, session).await.state.expect("state");
    let tasks: Vec<(&str, &str)> =
        state.active_tasks.iter().map(|t| (t.content.as_str(), t.status.as_str())).collect();
    assert_eq!(tasks, [("Write hello", "completed"), ("Fuzz the parser", "pending")]);
    assert_eq!(state.files_created, ["hello.txt", "notes.txt"]);
    assert_eq!(state.files_modified, ["existing.txt"], "an overwrite; the refused write changed nothing");
    assert_eq!(state.files_deleted, ["doomed.txt"]);
    assert!(state.last_answer.contains("FINAL-TEXT-MARKER"), "{state:?}");
    assert_eq!(state.last_prompt, "Do the scripted steps");
    assert!(state.errors.iter().any(|e| e.starts_with("Bash: Exit code 1")), "{:?}", state.errors);
    assert!(
        state.errors.iter().any(|e| e.starts_with("Write: File has not been read yet")),
        "{:?}",
        state.errors
    );
    assert_eq!(state.tool_count, 11);
    let kinds: Vec<CheckpointKind> =
        checkpoints(&mut c, session).await.iter().map(baton_proto::v1::Checkpoint::kind).collect();
    for kind in [CheckpointKind::Task, CheckpointKind::Recovery, CheckpointKind::SessionEnd] {
        assert!(kinds.contains(&kind), "no {kind:?} checkpoint: {kinds:?}");
    }
    checked(
        "claude",
        &[
            "brief in the first model request",
            "session and host",
            "tasks with status (TaskCreate/TaskUpdate)",
            "files created/modified/deleted by result",
            "a refused write and a failed command as errors",
            "task, recovery and session-end checkpoints",
            "prompt and answer",
        ],
    );
}

/// One conversation across three machines: started on machine 1, restored and continued on
/// machine 2 with `baton resume --restore` and `claude --resume`, then again on machine 3
/// from machine 2's session. Each hop's model requests hold the earlier turns, the task
/// files came along (TaskList on machine 2 lists machine 1's tasks), and each successor
/// session knows the conversation it carries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_conversation_over_three_machines() {
    let Some(cli) = agents::cli("claude") else { return };
    let server = Server::start(Backend::Sqlite).await.unwrap();
    let machines: Vec<Machine> = ["machine-1", "machine-2", "machine-3"]
        .iter()
        .map(|h| Machine::new(h, &server.url(), ORIGIN))
        .collect();
    for m in &machines {
        let init = m.baton(&["init", "claude", "--sync-transcripts"]);
        assert_eq!(init.code, 0, "{init:?}");
    }
    // One script for the whole conversation: a resumed request carries the earlier turns,
    // so each hop picks up at its own steps.
    let model = FakeModel::start(Script::new(vec![
        Step::tool(
            "TaskCreate",
            json!({"subject": "Port the lexer", "description": "first", "activeForm": "Porting"}),
        ),
        Step::tool(
            "TaskCreate",
            json!({"subject": "Port the parser", "description": "second", "activeForm": "Porting"}),
        ),
        Step::tool("TaskUpdate", json!({"taskId": "1", "status": "completed"})),
        Step::text("Lexer ported. HOP-1-DONE"),
        Step::tool("TaskList", json!({})),
        Step::text("Parser next. HOP-2-DONE"),
        Step::tool("TaskUpdate", json!({"taskId": "2", "status": "completed"})),
        Step::text("Parser ported. HOP-3-DONE"),
    ]))
    .await
    .unwrap();
    let first = machines[0].agent(&cli, &model.url(), &claude_args("Start the port", &[]), &[]);
    assert_eq!(first.code, 0, "{first:?}");
    let conversation =
        serde_json::from_str::<Value>(&first.stdout).unwrap()["session_id"].as_str().unwrap().to_owned();
    let mut c = server.clients().await;
    until_ended(&mut c, PROJECT).await;

    let mut seen = 4;
    for (hop, (m, prompt)) in
        machines[1..].iter().zip(["continue on machine 2", "continue on machine 3"]).enumerate()
    {
        let resume = m.baton(&["resume", "--restore", "--agent", "claude", "--json"]);
        assert_eq!(resume.code, 0, "hop {}: {resume:?}", hop + 2);
        let reply: Value = serde_json::from_str(&resume.stdout).unwrap_or_else(|e| panic!("{e}: {resume:?}"));
        assert_eq!(reply["resume_argv"], json!(["claude", "--resume", conversation]), "{reply}");
        let run = m.agent(&cli, &model.url(), &claude_args(prompt, &["--resume", &conversation]), &[]);
        assert_eq!(run.code, 0, "hop {}: {run:?}", hop + 2);
        let turns = model.turns();
        let hop_turns = &turns[seen..];
        seen = turns.len();
        assert!(hop_turns[0].text().contains("Start the port"), "hop {}: the earlier turns", hop + 2);
        assert!(
            hop_turns[0].text().contains("Where your last session stopped"),
            "hop {}: the brief of the resumed session: {}",
            hop + 2,
            hop_turns[0].text()
        );
        until_ended(&mut c, PROJECT).await;
        let newest = sessions(&mut c, PROJECT).await.remove(0);
        assert_eq!(newest.host, m.host);
        assert_eq!(newest.agent_session_id, conversation, "the successor knows the conversation it carries");
        if hop == 0 {
            // TaskList on machine 2 listed machine 1's tasks: the task files came along.
            assert!(hop_turns[1].text().contains("Port the parser"), "{}", hop_turns[1].text());
        }
    }
    let last = sessions(&mut c, PROJECT).await.remove(0);
    let state = head(&mut c, &last).await.state.unwrap();
    let tasks: Vec<(&str, &str)> =
        state.active_tasks.iter().map(|t| (t.content.as_str(), t.status.as_str())).collect();
    assert_eq!(tasks, [("Port the lexer", "completed"), ("Port the parser", "completed")]);
    assert_eq!(sessions(&mut c, PROJECT).await.len(), 3, "one session per hop, no orphans");
    checked(
        "claude",
        &[
            "three machines: --restore then claude --resume, twice",
            "earlier turns and the resumed session's brief reach the model on each hop",
            "task files carried (TaskList on machine 2)",
            "each successor records the conversation it carries",
        ],
    );
}

/// `/compact` on a conversation whose session ended: resuming it links a successor (not an
/// unrelated session), PreCompact checkpoints before, PostCompact after with the summary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_and_resume_on_the_same_machine() {
    let Some(cli) = agents::cli("claude") else { return };
    let server = Server::start(Backend::Sqlite).await.unwrap();
    let m = Machine::new("machine-1", &server.url(), ORIGIN);
    assert_eq!(m.baton(&["init", "claude"]).code, 0);
    let model = FakeModel::start(Script::new(vec![
        Step::tool(
            "TaskCreate",
            json!({"subject": "Keep going", "description": "after compaction", "activeForm": "Going"}),
        ),
        Step::text("Started. FIRST-TURN"),
    ]))
    .await
    .unwrap();
    let first = m.agent(&cli, &model.url(), &claude_args("Start", &[]), &[]);
    assert_eq!(first.code, 0, "{first:?}");
    let conversation =
        serde_json::from_str::<Value>(&first.stdout).unwrap()["session_id"].as_str().unwrap().to_owned();
    let mut c = server.clients().await;
    let ended = until_ended(&mut c, PROJECT).await;
    let compact = m.agent(&cli, &model.url(), &claude_args("/compact", &["--resume", &conversation]), &[]);
    assert_eq!(compact.code, 0, "{compact:?}");
    assert!(
        model.received().iter().any(|r| r.kind == baton_tests::fake_model::Kind::Summary),
        "a compaction ran"
    );
    let newest = until_ended(&mut c, PROJECT).await;
    assert_ne!(newest.id, ended.id);
    assert_eq!(
        (newest.resumed_from.as_str(), newest.agent_session_id.as_str()),
        (ended.id.as_str(), conversation.as_str())
    );
    let all = checkpoints(&mut c, &newest).await;
    let kinds: Vec<CheckpointKind> = all.iter().map(baton_proto::v1::Checkpoint::kind).collect();
    assert!(kinds.contains(&CheckpointKind::PreCompact), "{kinds:?}");
    let after =
        all.iter().find(|c| c.reason.starts_with("after compaction")).unwrap_or_else(|| panic!("{all:?}"));
    let state = after.state.clone().unwrap();
    assert!(state.summary.contains("FAKE-COMPACT-SUMMARY"), "{state:?}");
    assert_eq!(state.active_tasks[0].content, "Keep going", "the successor carries the task");
    checked(
        "claude",
        &[
            "/compact: PreCompact and PostCompact checkpoints, the summary kept",
            "resume after the session ended links a successor",
        ],
    );
}

/// `kill -9` mid-session: what the hooks recorded up to then is in the session's last
/// checkpoint (the transcript alone left an empty one), and the next conversation's brief —
/// what the model receives — says where it stopped, with the unfinished task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_mid_session() {
    let Some(cli) = agents::cli("claude") else { return };
    let server = Server::start_with(Backend::Sqlite, &["--idle-after", "1s", "--reaper-interval", "100ms"])
        .await
        .unwrap();
    let m = Machine::new("machine-1", &server.url(), ORIGIN);
    assert_eq!(m.baton(&["init", "claude"]).code, 0);
    std::fs::create_dir_all(m.baton_home().join("config")).unwrap();
    std::fs::write(m.baton_home().join("config/config.toml"), "checkpoint_every = 2\n").unwrap();
    let repo = m.repo.display().to_string();
    let model = FakeModel::start(Script::new(vec![
        Step::tool(
            "TaskCreate",
            json!({"subject": "Write hello", "description": "-", "activeForm": "Writing"}),
        ),
        Step::tool(
            "TaskCreate",
            json!({"subject": "Survive the crash", "description": "-", "activeForm": "Surviving"}),
        ),
        Step::tool("TaskUpdate", json!({"taskId": "1", "status": "completed"})),
        Step::tool("Write", json!({"file_path": format!("{repo}/hello.txt"), "content": "hello\n"})),
        Step::tool("Bash", json!({"command": "sleep 60", "description": "a long build"})),
        Step::text("never reached"),
    ]))
    .await
    .unwrap();
    let mut child = m.spawn_agent(&cli, &model.url(), &claude_args("Start", &[]));
    // Killed while the long command runs (the model has been asked for it).
    let deadline = std::time::Instant::now() + std::time::Duration::from_mins(1);
    while model.turns().len() < 5 {
        assert!(std::time::Instant::now() < deadline, "the session never reached the long command");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    child.kill().unwrap();
    child.wait().unwrap();

    let mut c = server.clients().await;
    let killed = sessions(&mut c, PROJECT).await.remove(0);
    // Its checkpoints so far (the task's, every 2 calls) hold the state, not an empty one.
    let state = head(&mut c, &killed).await.state.unwrap();
    let tasks: Vec<(&str, &str)> =
        state.active_tasks.iter().map(|t| (t.content.as_str(), t.status.as_str())).collect();
    assert_eq!(tasks, [("Write hello", "completed"), ("Survive the crash", "pending")]);

    // Nothing more from it: it goes idle (the test's window is 1 s).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while sessions(&mut c, PROJECT).await[0].status != baton_proto::v1::SessionStatus::Idle as i32 {
        assert!(std::time::Instant::now() < deadline, "the killed session never went idle");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // The next conversation here saves what the hooks recorded after that checkpoint (the
    // write), and its model receives where the killed one stopped.
    model.set_script(Script::new(vec![Step::text("Picking up. NEXT")]));
    let next = m.agent(&cli, &model.url(), &claude_args("What next?", &[]), &[]);
    assert_eq!(next.code, 0, "{next:?}");
    let body = model.turns().last().unwrap().text();
    assert!(
        body.contains("Where your last session stopped") && body.contains("[pending] Survive the crash"),
        "{body}"
    );
    let killed = c
        .sessions
        .get_session(baton_proto::v1::GetSessionRequest { session_id: killed.id.clone() })
        .await
        .unwrap()
        .into_inner()
        .session
        .unwrap();
    let state = head(&mut c, &killed).await.state.unwrap();
    assert_eq!(state.files_created, ["hello.txt"], "every call the hooks saw before the kill");
    // Saving for it was not its activity: it never became active again.
    let revived = c
        .events
        .list_events(baton_proto::v1::ListEventsRequest {
            project: PROJECT.into(),
            limit: 1000,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .events
        .into_iter()
        .filter(|e| {
            e.entity_id == killed.id && e.kind == baton_proto::v1::EventKind::SessionStatusChanged as i32
        })
        .map(|e| match e.value {
            Some(baton_proto::v1::event::Value::Session(s)) => s.status,
            _ => 0,
        })
        .collect::<Vec<i32>>();
    assert_eq!(revived, [baton_proto::v1::SessionStatus::Idle as i32], "only its going idle");
    checked(
        "claude",
        &[
            "kill -9 mid-session: the checkpoints hold the tasks; the next session saves the calls after the last one",
            "the next conversation's model receives where it stopped",
        ],
    );
}

/// The hub down for a whole session: the model gets the cached brief marked as such, the
/// hooks queue what they record, and `baton sync` delivers it once the hub is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hub_down_and_back() {
    let Some(cli) = agents::cli("claude") else { return };
    let mut server = Server::start(Backend::Sqlite).await.unwrap();
    let mut m = Machine::new("machine-1", &server.url(), ORIGIN);
    assert_eq!(m.baton(&["init", "claude"]).code, 0);
    assert_eq!(m.baton(&["memory", "add", "goal", "ship offline"]).code, 0);
    assert_eq!(m.baton(&["warmup"]).code, 0, "caches the brief");
    server.kill9();
    let model = FakeModel::start(Script::new(vec![
        Step::tool(
            "TaskCreate",
            json!({"subject": "Work offline", "description": "-", "activeForm": "Working"}),
        ),
        Step::text("Done offline. OFFLINE-DONE"),
    ]))
    .await
    .unwrap();
    let run = m.agent(&cli, &model.url(), &claude_args("Work while the hub is down", &[]), &[]);
    assert_eq!(run.code, 0, "{run:?}");
    let body = model.turns()[0].text();
    assert!(body.contains("Baton hub unreachable") && body.contains("ship offline"), "{body}");

    // SessionEnd's work is detached from the agent: the hub comes back once it is queued,
    // as a user's would come back after the session (a write queued later goes with the
    // next hook, not this `sync`).
    let queue = m.baton_home().join("data/queue/pending");
    let queued_end =
        || {
            std::fs::read_dir(&queue).into_iter().flatten().flatten().any(|e| {
                std::fs::read_to_string(e.path()).is_ok_and(|t| t.contains("\"rpc\":\"EndSession\""))
            })
        };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !queued_end() {
        assert!(std::time::Instant::now() < deadline, "SessionEnd was not queued");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    server.restart().unwrap();
    m.server = server.url();
    let sync = m.baton(&["sync"]);
    assert_eq!(sync.code, 0, "{sync:?}");
    let mut c = server.clients().await;
    let ended = until_ended(&mut c, PROJECT).await;
    let state = head(&mut c, &ended).await.state.unwrap();
    assert_eq!(state.active_tasks[0].content, "Work offline");
    assert!(ended.summary.contains("OFFLINE-DONE"), "{ended:?}");
    checked(
        "claude",
        &[
            "hub down: the cached brief reaches the model",
            "queued session, checkpoints and end delivered by baton sync",
        ],
    );
}
