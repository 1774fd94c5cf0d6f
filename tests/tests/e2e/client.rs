//! The `baton` client end to end: the real binary in temporary git repositories with a
//! fake HOME, against a real server. Payloads are shaped like the agents' own (fixtures
//! from their documentation, AGENT_HOOKS.md).

use std::path::Path;
use std::time::{Duration, Instant};

use baton_proto::v1::{
    CheckpointKind, GetCheckpointRequest, ListCheckpointsRequest, ListSessionsRequest, SessionStatus,
};
use baton_tests::{Backend, ClientEnv, Clients, Server, both, git, git_repo};
use serde_json::{Value, json};

use crate::sessions_of;

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures").join(name).display().to_string()
}

fn payload(event: &str, session: &str, cwd: &Path, extra: Value) -> String {
    let mut v = json!({
        "session_id": session,
        "transcript_path": fixture("claude-transcript.jsonl"),
        "cwd": cwd,
        "hook_event_name": event,
    });
    if let (Some(obj), Value::Object(more)) = (v.as_object_mut(), extra) {
        obj.extend(more);
    }
    v.to_string()
}

fn context(out: &str) -> String {
    let v: Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"));
    v["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .map_or_else(|| panic!("no additionalContext: {out}"), str::to_owned)
}

/// The project's sessions, newest first.
async fn wait_for<F: std::future::Future<Output = bool>>(mut f: impl FnMut() -> F) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f().await {
        assert!(Instant::now() < deadline, "condition not reached in 20 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn claude_hooks_end_to_end(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let env = ClientEnv::new(&server.url());
    std::fs::create_dir_all(env.baton_home().join("config")).unwrap();
    std::fs::write(env.baton_home().join("config/config.toml"), "checkpoint_every = 3\n").unwrap();
    let repo = git_repo("git@github.com:acme/widget.git");
    let dir = repo.path();
    let sid = "c0ffee00-1111-2222-3333-444455556666";

    // SessionStart: a session, and the brief in Claude Code's JSON form.
    let out = env.run(
        dir,
        &["hook", "claude", "SessionStart"],
        &payload("SessionStart", sid, dir, json!({"source": "startup", "model": "claude-sonnet-4-6"})),
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert!(context(&out.stdout).starts_with("# Baton brief: github.com/acme/widget"), "{}", out.stdout);
    let sessions = c
        .sessions
        .list_sessions(ListSessionsRequest { project: "github.com/acme/widget".into(), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(sessions.sessions.len(), 1);
    let session = sessions.sessions[0].clone();
    assert_eq!(
        (session.agent_session_id.as_str(), session.branch.as_str(), session.user.as_str()),
        (sid, "main", "dev")
    );
    assert_eq!(session.git_base, git(dir, &["rev-parse", "HEAD"]));

    // The hooks carry what happened, as Claude Code's do: a task list (one task completed:
    // a task checkpoint), a file written, an edit that failed (PostToolUseFailure) and its
    // retry (a recovery checkpoint), a shell delete; every 3rd call an automatic checkpoint.
    let tool = |event: &str, extra: Value| {
        let out = env.run(dir, &["hook", "claude", event], &payload(event, sid, dir, extra));
        assert_eq!((out.code, out.stdout.as_str()), (0, ""), "{out:?}");
    };
    let main_rs = dir.join("src/main.rs").display().to_string();
    tool(
        "PostToolUse",
        json!({"tool_name": "TodoWrite", "tool_input": {"todos": [
            {"content": "Add JWT middleware", "status": "completed", "activeForm": "Adding"},
            {"content": "Write auth tests", "status": "in_progress", "activeForm": "Writing"},
            {"content": "Document auth", "status": "pending", "activeForm": "Documenting"}]},
            "tool_response": {"oldTodos": [], "newTodos": []}}),
    );
    tool(
        "PostToolUse",
        json!({"tool_name": "Write", "tool_input": {"file_path": "src/auth.rs", "content": "pub fn verify() {}"},
            "tool_response": {"type": "create", "filePath": "src/auth.rs"}}),
    );
    tool(
        "PostToolUseFailure",
        json!({"tool_name": "Edit", "tool_input": {"file_path": main_rs, "old_string": "a", "new_string": "b"},
            "error": "String to replace not found in file."}),
    );
    tool(
        "PostToolUse",
        json!({"tool_name": "Edit", "tool_input": {"file_path": main_rs, "old_string": "fn", "new_string": "fn"},
            "tool_response": {"filePath": main_rs}}),
    );
    tool(
        "PostToolUse",
        json!({"tool_name": "Bash", "tool_input": {"command": "rm src/legacy_auth.rs && cargo build"},
            "tool_response": {"stdout": "Compiling", "stderr": ""}}),
    );
    // PreToolUse on a risky command: a risk checkpoint; on a harmless one: nothing.
    env.run(
        dir,
        &["hook", "claude", "PreToolUse"],
        &payload("PreToolUse", sid, dir, json!({"tool_name": "Bash", "tool_input": {"command": "ls"}})),
    );
    env.run(
        dir,
        &["hook", "claude", "PreToolUse"],
        &payload(
            "PreToolUse",
            sid,
            dir,
            json!({"tool_name": "Bash", "tool_input": {"command": "git push --force origin main"}}),
        ),
    );
    // Stop: a checkpoint from the transcript.
    let out = env.run(dir, &["hook", "claude", "Stop"], &payload("Stop", sid, dir, json!({"stop_hook_active": false, "last_assistant_message": "JWT middleware is in; auth tests are next."})));
    assert_eq!((out.code, out.stdout.as_str()), (0, ""), "Stop must print nothing: {out:?}");
    env.run(
        dir,
        &["hook", "claude", "PreCompact"],
        &payload("PreCompact", sid, dir, json!({"trigger": "auto", "custom_instructions": null})),
    );

    let list = c
        .checkpoints
        .list_checkpoints(ListCheckpointsRequest {
            session_id: session.id.clone(),
            include_state: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let kinds: Vec<i32> = list.checkpoints.iter().map(|c| c.kind).collect();
    use CheckpointKind as K;
    assert_eq!(
        kinds,
        [K::Task, K::Recovery, K::Risk, K::Auto, K::PreCompact].map(|k| k as i32).to_vec(),
        "{list:?}"
    );
    assert_eq!(list.checkpoints[0].reason, "task completed: Add JWT middleware");
    // Every 3 calls since the last checkpoint: due with the recovery, which names both.
    assert_eq!(list.checkpoints[1].reason, "recovered after a failure: Edit src/main.rs; every 3 tool calls");
    assert!(list.checkpoints[2].reason.contains("force push"), "{}", list.checkpoints[2].reason);
    let stop = list.checkpoints[3].state.clone().unwrap();
    let tasks: Vec<(String, String)> =
        stop.active_tasks.iter().map(|t| (t.content.clone(), t.status.clone())).collect();
    assert_eq!(tasks[1], ("Write auth tests".to_owned(), "in_progress".to_owned()));
    assert_eq!(stop.files_created, vec!["src/auth.rs"]);
    assert_eq!(stop.files_modified, vec!["src/main.rs"]);
    assert_eq!(stop.files_deleted, vec!["src/legacy_auth.rs"]);
    // The hooks' failure, and one only the transcript has (no hook fires for a call Claude
    // Code's own validation refuses).
    assert_eq!(
        stop.errors,
        vec![
            "Edit: String to replace not found in file.",
            "Write: File has not been read yet. Read it first before writing to it."
        ]
    );
    assert_eq!(stop.tool_count, 5);
    assert_eq!(stop.progress, 33);
    assert_eq!(stop.last_answer, "JWT middleware is in; auth tests are next.");
    // The secret in the last prompt never left the machine.
    assert!(
        stop.last_prompt.contains("[REDACTED:aws_access_key]") && !stop.last_prompt.contains("AKIA"),
        "{}",
        stop.last_prompt
    );
    assert_eq!(stop.git_head, session.git_base);

    // SessionEnd returns at once (the work is detached) and completes the session.
    let out = env.run(
        dir,
        &["hook", "claude", "SessionEnd"],
        &payload("SessionEnd", sid, dir, json!({"reason": "prompt_input_exit"})),
    );
    assert_eq!(out.code, 0);
    assert!(out.elapsed < Duration::from_secs(1), "SessionEnd took {:?}", out.elapsed);
    let id = session.id.clone();
    wait_for(|| {
        let mut c = c.clone();
        let id = id.clone();
        async move {
            let s = c
                .sessions
                .get_session(baton_proto::v1::GetSessionRequest { session_id: id })
                .await
                .unwrap()
                .into_inner()
                .session
                .unwrap();
            s.status == SessionStatus::Completed as i32
        }
    })
    .await;
    let s = c
        .sessions
        .get_session(baton_proto::v1::GetSessionRequest { session_id: id.clone() })
        .await
        .unwrap()
        .into_inner()
        .session
        .unwrap();
    assert_eq!(s.summary, "JWT middleware is in; auth tests are next.");
    let head = c
        .checkpoints
        .get_checkpoint(GetCheckpointRequest {
            checkpoint_id: s.head_checkpoint_id.clone(),
            include_payload: false,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(head.checkpoint.unwrap().kind, K::SessionEnd as i32);
}
both!(claude_hooks_end_to_end);

async fn offline_queue_flushes_once_in_order(backend: Backend) {
    let mut server = Server::start(backend).await.unwrap();
    let env = ClientEnv::new(&server.url());
    let repo = git_repo("https://github.com/acme/queue.git");
    let dir = repo.path();
    let sid = "0ff11ne0-0000-0000-0000-000000000001";
    // A brief is cached while the hub is up.
    env.run(dir, &["memory", "add", "goal", "survive outages"], "");
    let warm = env.run(dir, &["warmup"], "");
    assert!(warm.stdout.contains("survive outages"), "{warm:?}");

    server.kill9();
    let out = env.run(
        dir,
        &["hook", "claude", "SessionStart"],
        &payload("SessionStart", sid, dir, json!({"source": "startup"})),
    );
    assert_eq!(out.code, 0);
    assert!(
        out.elapsed < Duration::from_millis(1500),
        "SessionStart with the hub down took {:?}",
        out.elapsed
    );
    let brief = context(&out.stdout);
    assert!(
        brief.contains("hub unreachable") && brief.contains("cached") && brief.contains("survive outages"),
        "{brief}"
    );
    env.run(dir, &["hook", "claude", "Stop"], &payload("Stop", sid, dir, json!({})));
    env.run(dir, &["memory", "add", "decision", "queue everything"], "");
    let status = env.run(dir, &["status", "--json"], "");
    let status: Value = serde_json::from_str(&status.stdout).unwrap();
    assert_eq!(status["queue"]["pending"], 3, "{status}");

    server.restart().unwrap();
    let env = ClientEnv { server: server.url(), ..env };
    let out = env.run(dir, &["sync"], "");
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("sent 3"), "{out:?}");
    // A second sync has nothing to send; nothing was duplicated.
    assert!(env.run(dir, &["sync"], "").stdout.contains("nothing queued"));
    let mut c = server.clients().await;
    let events = crate::all_events(&mut c, "github.com/acme/queue").await;
    crate::assert_gapless(&events);
    use baton_proto::v1::EventKind as E;
    let kinds: Vec<i32> = events.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [E::MemoryChanged, E::SessionStarted, E::CheckpointCreated, E::MemoryChanged]
            .map(|k| k as i32)
            .to_vec()
    );
}
both!(offline_queue_flushes_once_in_order);

/// A write another process is sending right now (its queue entry claimed) is not queued:
/// a write made meanwhile is sent at once, neither waiting behind it nor sending it in its
/// place (hooks running at once used to flush each other's writes and queue on the lock).
/// Once its process is gone, unsent, it is an ordinary queued write and goes first.
#[tokio::test]
async fn writes_in_flight_elsewhere_are_left_to_their_process() {
    let server = Server::start(Backend::Sqlite).await.unwrap();
    let env = ClientEnv::new(&server.url());
    let repo = git_repo("https://github.com/acme/inflight.git");
    let dir = repo.path();
    let down = [("BATON_SERVER", "http://127.0.0.1:9")];
    let out = env.run_with_env(dir, &["memory", "add", "decision", "made elsewhere"], "", &down);
    assert!(out.stdout.contains("queued"), "{out:?}");
    let pending = env.baton_home().join("data").join("queue").join("pending");
    let entry = std::fs::read_dir(&pending).unwrap().flatten().map(|e| e.path()).next().unwrap();
    // This test process stands for the one sending it (a lock is per open file).
    let claim = std::fs::File::open(&entry).unwrap();
    claim.lock().unwrap();

    let out = env.run(dir, &["memory", "add", "decision", "made here"], "");
    assert!(out.code == 0 && !out.stdout.contains("queued"), "sent, not queued behind it: {out:?}");
    let decisions = |env: &ClientEnv| {
        let out = env.run(dir, &["memory", "list", "decision", "--json"], "");
        let v: Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
        v["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["content"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(decisions(&env), ["made here"], "the claimed write was left to its process");
    assert!(entry.exists());

    drop(claim);
    let out = env.run(dir, &["memory", "add", "decision", "made last"], "");
    assert!(out.code == 0 && !out.stdout.contains("queued"), "{out:?}");
    let mut held = decisions(&env);
    held.sort();
    assert_eq!(held, ["made elsewhere", "made here", "made last"]);
    assert!(!entry.exists() && std::fs::read_dir(&pending).unwrap().count() == 0);
}

/// `baton sync` empties the queue: a write another process was sending when it looked
/// (claimed) is waited for, and sent by `sync` once its process lets go without an answer
/// (a hook out of time), instead of "still queued 0" over a queue that is not empty.
#[tokio::test]
async fn sync_sends_what_another_process_gave_up_on() {
    let server = Server::start(Backend::Sqlite).await.unwrap();
    let env = ClientEnv::new(&server.url());
    let repo = git_repo("https://github.com/acme/gaveup.git");
    let dir = repo.path();
    let down = [("BATON_SERVER", "http://127.0.0.1:9")];
    for note in ["queued first", "given up on"] {
        let out = env.run_with_env(dir, &["memory", "add", "decision", note], "", &down);
        assert!(out.stdout.contains("queued"), "{out:?}");
    }
    let pending = env.baton_home().join("data").join("queue").join("pending");
    let mut entries: Vec<_> = std::fs::read_dir(&pending).unwrap().flatten().map(|e| e.path()).collect();
    entries.sort();
    // This test process stands for a hook sending the second one, which gives up after
    // `sync` has looked at the queue.
    let claim = std::fs::File::open(&entries[1]).unwrap();
    claim.lock().unwrap();
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(800));
        drop(claim);
    });
    let out = env.run(dir, &["sync"], "");
    release.join().unwrap();
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("sent 2") && out.stdout.contains("still queued 0"), "{out:?}");
    assert!(out.stderr.contains("another baton process is sending"), "{out:?}");
    assert_eq!(std::fs::read_dir(&pending).unwrap().count(), 0);
    let listed = env.run(dir, &["memory", "list", "decision", "--json"], "");
    assert!(listed.stdout.contains("queued first") && listed.stdout.contains("given up on"), "{listed:?}");
}

/// A write a kill or power cut stopped between writing its temporary file and renaming it
/// leaves that file: `sync` removes those in Baton's folders, `init` those beside the settings
/// it writes, once older than any live writer's.
#[test]
fn sync_and_init_remove_stale_temporary_files() {
    let env = ClientEnv::new("http://127.0.0.1:1");
    let repo = git_repo("git@github.com:acme/temps.git");
    let old = std::time::SystemTime::now() - Duration::from_hours(3);
    let place = |path: std::path::PathBuf, aged: bool| {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "{\"half\":").unwrap();
        if aged {
            std::fs::File::options().write(true).open(&path).unwrap().set_modified(old).unwrap();
        }
        path
    };
    let data = env.baton_home().join("data");
    let stale = [
        place(data.join("queue/pending/0001-a.json.11-aa.baton-tmp"), true),
        place(data.join("sessions/c.json.12-bb.baton-tmp"), true),
        place(env.baton_home().join("config/config.toml.13-cc.baton-tmp"), true),
    ];
    let fresh = place(data.join("queue/pending/0002-b.json.14-dd.baton-tmp"), false);
    let out = env.run(repo.path(), &["sync"], "");
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("removed 3 temporary files left by interrupted writes"), "{out:?}");
    assert!(out.stdout.contains("nothing queued"), "{out:?}");
    assert!(stale.iter().all(|p| !p.exists()) && fresh.exists());

    let beside = place(env.home.path().join(".claude/settings.json.15-ee.baton-tmp"), true);
    let out = env.run(repo.path(), &["init", "claude"], "");
    assert_eq!(out.code, 0, "{out:?}");
    assert!(!beside.exists() && env.home.path().join(".claude/settings.json").exists());
}

async fn stale_queued_write_is_reported(backend: Backend) {
    let mut server = Server::start(backend).await.unwrap();
    let env = ClientEnv::new(&server.url());
    let repo = git_repo("https://github.com/acme/stale.git");
    let dir = repo.path();
    let url = server.url();
    server.kill9();
    env.run(dir, &["memory", "add", "note", "from the laptop (offline)", "--key", "deploy"], "");
    server.restart().unwrap();
    // Meanwhile someone else wrote the same note, later.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut c = server.clients().await;
    crate::put_note(&mut c, "github.com/acme/stale", "deploy", "from the desktop", crate::write())
        .await
        .unwrap();
    let env = ClientEnv { server: server.url(), ..env };
    assert_ne!(url, server.url());
    let out = env.run(dir, &["sync"], "");
    assert!(out.stdout.contains("conflict: PutMemory note/deploy (Stale)"), "{out:?}");
    let notes = env.run(dir, &["memory", "list", "note", "--json"], "");
    let notes: Value = serde_json::from_str(&notes.stdout).unwrap();
    assert_eq!(notes["entries"][0]["content"], "from the desktop");
    let conflicts = env.run(dir, &["conflicts", "--json"], "");
    assert!(conflicts.stdout.contains("\"outcome\":\"stale\""), "{conflicts:?}");
}
both!(stale_queued_write_is_reported);

/// Every memory write works offline: items added to and removed from current-state sets
/// are queued and applied to the set as it is when they arrive (never STALE); one over the
/// cap is refused on arrival and kept with the dead letters, saying which cap.
async fn offline_set_items(backend: Backend) {
    let mut server = Server::start(backend).await.unwrap();
    let env = ClientEnv::new(&server.url());
    let repo = git_repo("https://github.com/acme/sets.git");
    let dir = repo.path();
    env.run(dir, &["memory", "add", "constraint", "no new deps"], "");
    env.run(dir, &["memory", "add", "constraint", "keep it small"], "");
    let again = env.run(dir, &["memory", "add", "constraint", "no new deps"], "");
    assert!(again.stdout.contains("already holds that item"), "{again:?}");
    let missing = env.run(dir, &["memory", "remove", "constraint", "never said"], "");
    assert!(missing.code != 0 && missing.stderr.contains("holds no item"), "{missing:?}");
    let wrong = env.run(dir, &["memory", "remove", "decision", "x"], "");
    assert!(wrong.code != 0 && wrong.stderr.contains("baton memory rm ID"), "{wrong:?}");

    server.kill9();
    for args in [
        ["memory", "add", "constraint", "offline one"].as_slice(),
        &["memory", "remove", "constraint", "keep it small"],
        &["memory", "add", "open_loop", "flaky test"],
        &["memory", "add", "goal", "ship v1"],
        &["memory", "add", "goal", "ship v2"],
    ] {
        let out = env.run(dir, args, "");
        assert!(out.code == 0 && out.stdout.contains("queued"), "{args:?}: {out:?}");
    }
    // Meanwhile, on the hub, someone else adds a constraint.
    server.restart().unwrap();
    let env = ClientEnv { server: server.url(), ..env };
    let mut c = server.clients().await;
    c.memory
        .put_memory(baton_proto::v1::PutMemoryRequest {
            project: "github.com/acme/sets".into(),
            category: "constraint".into(),
            op: baton_proto::v1::MemoryOp::AddItem as i32,
            items: vec![baton_proto::v1::MemoryItem {
                content: "from the desktop".into(),
                ..Default::default()
            }],
            write: crate::write(),
            ..Default::default()
        })
        .await
        .unwrap();
    let out = env.run(dir, &["sync"], "");
    assert!(out.stdout.contains("sent 4, refused 1"), "{out:?}");
    let list = env.run(dir, &["memory", "list", "--json"], "");
    let list: Value = serde_json::from_str(&list.stdout).unwrap();
    let mut held: Vec<(String, String)> = list["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["category"].as_str().unwrap().to_owned(), e["content"].as_str().unwrap().to_owned()))
        .collect();
    held.sort();
    let want: Vec<(String, String)> = [
        ("constraint", "from the desktop"),
        ("constraint", "no new deps"),
        ("constraint", "offline one"),
        ("goal", "ship v1"),
        ("open_loop", "flaky test"),
    ]
    .iter()
    .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
    .collect();
    assert_eq!(held, want, "every queued item applied to the set as it was; the second goal refused");
    let status = env.run(dir, &["status", "--json"], "");
    let status: Value = serde_json::from_str(&status.stdout).unwrap();
    let dead = status["queue"]["dead"].as_array().unwrap();
    assert_eq!(dead.len(), 1, "{status}");
    assert!(dead[0]["error"].as_str().unwrap().contains("memory/goal holds at most 1"), "{status}");
}
both!(offline_set_items);

async fn warmup_sections_and_git_changes(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let env = ClientEnv::new(&server.url());
    let repo = git_repo("git@github.com:acme/brief.git");
    let dir = repo.path();
    for args in [
        ["memory", "add", "goal", "ship v1"].as_slice(),
        &["memory", "add", "open_loop", "flaky test"],
        &["memory", "add", "constraint", "no new deps"],
        &["memory", "add", "decision", "use sqlx", "--rationale", "both backends"],
        &["memory", "add", "note", "hexagonal", "--key", "arch"],
    ] {
        let out = env.run(dir, args, "");
        assert_eq!(out.code, 0, "{args:?}: {out:?}");
    }
    // A session that ends on the current commit…
    let sid = "5e55104a-0000-0000-0000-000000000001";
    env.run(
        dir,
        &["hook", "claude", "SessionStart"],
        &payload("SessionStart", sid, dir, json!({"source": "startup"})),
    );
    env.run(
        dir,
        &["hook", "claude", "SessionEnd"],
        &payload("SessionEnd", sid, dir, json!({"reason": "other"})),
    );
    let mut c = server.clients().await;
    wait_for(|| {
        let mut c = c.clone();
        async move {
            let l = c
                .sessions
                .list_sessions(ListSessionsRequest {
                    project: "github.com/acme/brief".into(),
                    statuses: vec![SessionStatus::Completed as i32],
                    ..Default::default()
                })
                .await
                .unwrap()
                .into_inner();
            !l.sessions.is_empty()
        }
    })
    .await;
    // …then work happens in git.
    std::fs::write(dir.join("new.rs"), "fn main() {}").unwrap();
    std::fs::write(dir.join("README"), "changed").unwrap();
    git(dir, &["add", "."]);
    git(dir, &["commit", "-q", "-m", "work"]);
    let out = env.run(
        dir,
        &["hook", "claude", "SessionStart"],
        &payload("SessionStart", "5e55104a-0000-0000-0000-000000000002", dir, json!({"source": "startup"})),
    );
    let brief = context(&out.stdout);
    let order = [
        "## Goal",
        "## Open loops",
        "## Constraints",
        "## Recent decisions",
        "## Changes since the last session",
        "## Notes",
    ];
    let positions: Vec<usize> =
        order.iter().map(|h| brief.find(h).unwrap_or_else(|| panic!("{h} missing:\n{brief}"))).collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{brief}");
    assert!(brief.contains("- A new.rs") && brief.contains("- M README"), "{brief}");
    assert!(brief.contains("use sqlx (why: both backends)"), "{brief}");
    // A budget is kept, whole lines only.
    let small = env.run(dir, &["warmup", "--budget", "500"], "");
    assert!(small.stdout.chars().count() <= 500, "{}", small.stdout);
    assert!(small.stdout.contains("## Goal"), "{}", small.stdout);
    // The last session's commit missing from this clone degrades to a note.
    let clone = tempfile::tempdir().unwrap();
    git(clone.path(), &["init", "-q", "-b", "main"]);
    git(clone.path(), &["remote", "add", "origin", "https://github.com/acme/brief"]);
    std::fs::write(clone.path().join("x"), "x").unwrap();
    git(clone.path(), &["add", "."]);
    git(clone.path(), &["commit", "-q", "-m", "other history"]);
    let out = env.run(clone.path(), &["warmup"], "");
    assert!(out.stdout.contains("is not in this clone"), "{out:?}");
    let _ = c.sessions.list_sessions(ListSessionsRequest::default()).await;
}
both!(warmup_sections_and_git_changes);

async fn one_project_across_clones_and_agents(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let env = ClientEnv::new(&server.url());
    let a = git_repo("git@github.com:Acme/Shared.git");
    let b = git_repo("https://github.com/Acme/Shared");
    let key = |dir: &Path| -> String {
        let out = env.run(dir, &["status", "--json"], "");
        serde_json::from_str::<Value>(&out.stdout).unwrap()["project"].as_str().unwrap().to_owned()
    };
    assert_eq!(key(a.path()), "github.com/Acme/Shared");
    assert_eq!(key(a.path()), key(b.path()));
    // A .baton.toml names the project, wherever the directory is: in the directory itself
    // outside a repository, never in a parent such as /tmp (attacks.rs).
    let plain = tempfile::tempdir().unwrap();
    std::fs::write(plain.path().join(".baton.toml"), "project = \"team/widget\"\n").unwrap();
    std::fs::create_dir_all(plain.path().join("sub")).unwrap();
    assert_eq!(key(plain.path()), "team/widget");
    assert!(key(&plain.path().join("sub")).starts_with("path:/"));
    // In a repository, at its root, also from a subdirectory.
    std::fs::write(a.path().join(".baton.toml"), "project = \"team/gadget\"\n").unwrap();
    std::fs::create_dir_all(a.path().join("src")).unwrap();
    assert_eq!(key(&a.path().join("src")), "team/gadget");
    std::fs::remove_file(a.path().join(".baton.toml")).unwrap();
    // Neither: the path.
    let bare = tempfile::tempdir().unwrap();
    assert!(key(bare.path()).starts_with("path:/"));

    // Cursor: no cwd in its payload (workspace roots), and its own output form.
    let out = env.run(
        bare.path(),
        &["hook", "cursor", "sessionStart"],
        &json!({"session_id": "cur-1", "conversation_id": "cur-1", "workspace_roots": [a.path()], "hook_event_name": "sessionStart", "is_background_agent": false}).to_string(),
    );
    let v: Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert!(v["additional_context"].as_str().unwrap().contains("github.com/Acme/Shared"), "{out:?}");
    // Gemini and Codex: the hookSpecificOutput form; Gemini's AfterAgent prints "{}".
    let out = env.run(a.path(), &["hook", "gemini", "SessionStart"], &json!({"session_id": "g-1", "cwd": a.path(), "hook_event_name": "SessionStart", "timestamp": "2026-11-01T10:00:00Z", "source": "startup"}).to_string());
    assert!(context(&out.stdout).contains("# Baton brief"), "{out:?}");
    let out = env.run(a.path(), &["hook", "gemini", "AfterAgent"], &json!({"session_id": "g-1", "cwd": a.path(), "prompt": "hi", "prompt_response": "done", "stop_hook_active": false}).to_string());
    assert_eq!(out.stdout.trim(), "{}");
    // Garbage on stdin never breaks the agent.
    let out = env.run(a.path(), &["hook", "codex", "Stop"], "not json at all");
    assert_eq!((out.code, out.stdout.as_str()), (0, ""));
}
both!(one_project_across_clones_and_agents);

async fn init_merges_and_uninstalls(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let env = ClientEnv::new(&server.url());
    let repo = git_repo("git@github.com:acme/init.git");
    let home = env.home.path();
    std::fs::create_dir_all(home.join(".claude")).unwrap();
    let original = json!({"model": "opus", "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]}});
    std::fs::write(home.join(".claude/settings.json"), serde_json::to_string_pretty(&original).unwrap())
        .unwrap();
    for agent in ["claude", "codex", "gemini", "cursor"] {
        let out = env.run(repo.path(), &["init", agent], "");
        assert_eq!(out.code, 0, "{out:?}");
        let again = env.run(repo.path(), &["init", agent], "");
        assert!(again.stdout.contains("updated "), "{again:?}");
        if agent == "codex" {
            assert!(out.stdout.contains("/hooks"), "{out:?}");
        }
    }
    let claude: Value =
        serde_json::from_str(&std::fs::read_to_string(home.join(".claude/settings.json")).unwrap()).unwrap();
    assert_eq!(claude["model"], "opus");
    assert_eq!(claude["hooks"]["Stop"].as_array().unwrap().len(), 2);
    let gemini: Value =
        serde_json::from_str(&std::fs::read_to_string(home.join(".gemini/settings.json")).unwrap()).unwrap();
    assert_eq!(gemini["hooksConfig"]["enabled"], true);
    assert!(home.join(".codex/hooks.json").exists() && home.join(".cursor/hooks.json").exists());
    // An agent with hooks that is not installed here is reported, not "ok".
    let doctor = env.run_with_env(repo.path(), &["doctor"], "", &[("PATH", "/usr/bin:/bin")]);
    assert!(
        doctor.code != 0 && doctor.stdout.contains("FAIL claude is not installed here (no `claude` on PATH)"),
        "{doctor:?}"
    );
    // The agents on the PATH, as the suite proved them.
    let bin = tempfile::tempdir().unwrap();
    for covered in baton_proto::agent::COVERED {
        let fake = bin.path().join(covered.command);
        std::fs::write(&fake, format!("#!/bin/sh\necho '{}'\n", covered.version)).unwrap();
        std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
    let path = format!("{}:{}", bin.path().display(), std::env::var("PATH").unwrap_or_default());
    let env_path = [("PATH", path.as_str())];
    // Codex skips hooks it has not trusted: doctor fails and says what to do, until the
    // trust is recorded.
    let doctor = env.run_with_env(repo.path(), &["doctor"], "", &env_path);
    assert!(
        doctor.code != 0
            && doctor.stdout.contains("claude hooks in")
            && doctor.stdout.contains("Codex skips 8 of them"),
        "{doctor:?}"
    );
    let trusted = env.run(repo.path(), &["init", "codex", "--trust"], "");
    assert!(trusted.stdout.contains("Codex trusts Baton's hooks"), "{trusted:?}");
    let doctor = env.run_with_env(repo.path(), &["doctor"], "", &env_path);
    assert!(doctor.code == 0 && doctor.stdout.contains("trusted in Codex"), "{doctor:?}");
    let refused = env.run(repo.path(), &["init", "claude", "--trust"], "");
    assert!(refused.code != 0 && refused.stderr.contains("baton init codex"), "{refused:?}");
    // A Gemini SessionStart matcher as older Batons installed it never fires: doctor says so.
    let gemini_file = home.join(".gemini/settings.json");
    let mut old: Value = serde_json::from_str(&std::fs::read_to_string(&gemini_file).unwrap()).unwrap();
    old["hooks"]["SessionStart"][0]["matcher"] = json!("startup|resume|clear");
    std::fs::write(&gemini_file, old.to_string()).unwrap();
    let doctor = env.run_with_env(repo.path(), &["doctor"], "", &env_path);
    assert!(doctor.code != 0 && doctor.stdout.contains("never matches"), "{doctor:?}");
    env.run(repo.path(), &["init", "gemini"], "");
    // Project scope goes to the repository.
    env.run(repo.path(), &["init", "claude", "--scope", "project"], "");
    assert!(repo.path().join(".claude/settings.local.json").exists());
    for agent in ["claude", "codex", "gemini", "cursor"] {
        let out = env.run(repo.path(), &["init", agent, "--uninstall"], "");
        // Every event each agent gives state in (AGENT_HOOKS.md, tests/agents/FINDINGS.md).
        let installed = match agent {
            "claude" => 11,
            "codex" => 8,
            // Cursor's preToolUse for its edit tools (reservations) besides the shell's.
            "cursor" => 7,
            _ => 6,
        };
        assert!(out.stdout.contains(&format!("removed {installed} ")), "{agent}: {out:?}");
    }
    let back: Value =
        serde_json::from_str(&std::fs::read_to_string(home.join(".claude/settings.json")).unwrap()).unwrap();
    assert_eq!(back, original);
    assert!(!home.join(".codex/hooks.json").exists(), "a file Baton created is removed again");
    // Baton wrote these twice (hooks, then its MCP server): still Baton's own, removed with
    // their backups, which held nothing of Baton's.
    for file in [".gemini/settings.json", ".cursor/mcp.json", ".claude.json"] {
        let backup = home.join(format!("{file}.baton-backup"));
        assert!(!home.join(file).exists() && !backup.exists(), "{file} left behind");
    }
}
both!(init_merges_and_uninstalls);

async fn resume_with_and_without_the_conversation(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let env = ClientEnv::new(&server.url());
    let repo = git_repo("git@github.com:acme/resume.git");
    let dir = repo.path();
    let sid = "0e5e0000-aaaa-bbbb-cccc-000000000001";
    env.run(
        dir,
        &["hook", "claude", "SessionStart"],
        &payload("SessionStart", sid, dir, json!({"source": "startup"})),
    );
    env.run(dir, &["hook", "claude", "Stop"], &payload("Stop", sid, dir, json!({})));
    let mut c = server.clients().await;
    let list = c
        .sessions
        .list_sessions(ListSessionsRequest { project: "github.com/acme/resume".into(), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    let old = list.sessions[0].id.clone();
    c.sessions
        .heartbeat(baton_proto::v1::HeartbeatRequest {
            session_id: old.clone(),
            status: SessionStatus::Idle as i32,
            ..Default::default()
        })
        .await
        .unwrap();
    // The conversation is not on this machine: a fresh session plus the brief.
    let out = env.run(dir, &["resume"], "");
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.contains("# Baton brief") && out.stdout.contains("Start a new claude session"),
        "{out:?}"
    );
    assert!(!out.stdout.contains("claude --resume"), "{out:?}");
    // The next new conversation continues the successor rather than starting another.
    env.run(
        dir,
        &["hook", "claude", "SessionStart"],
        &payload("SessionStart", "0e5e0000-aaaa-bbbb-cccc-000000000002", dir, json!({"source": "startup"})),
    );
    let list = c
        .sessions
        .list_sessions(ListSessionsRequest { project: "github.com/acme/resume".into(), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(list.sessions.len(), 2, "{list:?}");
    assert_eq!(list.sessions[0].resumed_from, old);

    // With the transcript where Claude Code keeps it, the agent's own resume command.
    let second = list.sessions[0].id.clone();
    c.sessions
        .heartbeat(baton_proto::v1::HeartbeatRequest {
            session_id: second.clone(),
            status: SessionStatus::Idle as i32,
            ..Default::default()
        })
        .await
        .unwrap();
    let projects = env.home.path().join(".claude/projects/-tmp-repo");
    std::fs::create_dir_all(&projects).unwrap();
    std::fs::write(projects.join("0e5e0000-aaaa-bbbb-cccc-000000000002.jsonl"), "{}\n").unwrap();
    let out = env.run(dir, &["resume", "--session", &old], "");
    assert_ne!(out.code, 0, "the old session was already resumed: {out:?}");
    assert!(out.stderr.contains("already resumed"), "{out:?}");
    let out = env.run(dir, &["resume", "--json"], "");
    let v: Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    assert_eq!(v["resumed_from"]["id"], second);
    assert_eq!(v["resume_command"], "claude --resume 0e5e0000-aaaa-bbbb-cccc-000000000002");
}
both!(resume_with_and_without_the_conversation);

/// `baton resume` run twice makes one successor: the second run finds the first one's
/// successor still waiting for its conversation and continues it. A successor nobody takes
/// up goes idle like any session, and the next conversation here still adopts it.
async fn resume_twice_makes_one_successor(backend: Backend) {
    let server =
        Server::start_with(backend, &["--idle-after", "1s", "--reaper-interval", "100ms"]).await.unwrap();
    let env = ClientEnv::new(&server.url());
    let repo = git_repo("git@github.com:acme/twice.git");
    let dir = repo.path();
    let project = "github.com/acme/twice";
    let sid = "7e1ce000-aaaa-bbbb-cccc-000000000001";
    env.run(
        dir,
        &["hook", "claude", "SessionStart"],
        &payload("SessionStart", sid, dir, json!({"source": "startup"})),
    );
    let mut c = server.clients().await;
    let sessions = |c: &mut Clients| sessions_of(c.clone(), project);
    // The first session goes idle on its own (no activity for the window).
    let first = sessions(&mut c).await[0].id.clone();
    wait_for(|| {
        let mut c = c.clone();
        async move { sessions(&mut c).await[0].status == SessionStatus::Idle as i32 }
    })
    .await;
    let out = env.run(dir, &["resume"], "");
    assert_eq!(out.code, 0, "{out:?}");
    let again = env.run(dir, &["resume"], "");
    assert_eq!(again.code, 0, "{again:?}");
    assert!(
        again.stdout.contains("still waiting for its conversation") && again.stdout.contains("# Baton brief"),
        "{again:?}"
    );
    let json = env.run(dir, &["resume", "--json"], "");
    let v: Value = serde_json::from_str(&json.stdout).unwrap_or_else(|e| panic!("{e}: {json:?}"));
    assert_eq!((v["reused"].as_bool(), v["resumed_from"]["id"].as_str()), (Some(true), Some(first.as_str())));
    let all = sessions(&mut c).await;
    assert_eq!(all.len(), 2, "one successor: {all:?}");
    let successor = all[0].id.clone();
    assert_eq!(v["session"]["id"], successor);
    // Nobody took it up: it goes idle like any session.
    wait_for(|| {
        let mut c = c.clone();
        async move { sessions(&mut c).await[0].status == SessionStatus::Idle as i32 }
    })
    .await;
    // The next conversation here adopts it all the same.
    let next = "7e1ce000-aaaa-bbbb-cccc-000000000002";
    env.run(
        dir,
        &["hook", "claude", "SessionStart"],
        &payload("SessionStart", next, dir, json!({"source": "startup"})),
    );
    let all = sessions(&mut c).await;
    assert_eq!(all.len(), 2, "{all:?}");
    assert_eq!((all[0].id.as_str(), all[0].agent_session_id.as_str()), (successor.as_str(), next));
    assert_eq!(all[0].resumed_from, first);
}
both!(resume_twice_makes_one_successor);

/// The agent resumes, on the same machine, a conversation whose session ended: the new
/// session is its successor (`resumed_from`), carrying its tasks. `baton resume`'s brief
/// holds the git changes since that session's last commit, as `baton warmup`'s does.
async fn resuming_an_ended_conversation_links_it(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let env = ClientEnv::new(&server.url());
    let repo = git_repo("git@github.com:acme/linked.git");
    let dir = repo.path();
    let project = "github.com/acme/linked";
    let sid = "11ced000-aaaa-bbbb-cccc-000000000001";
    env.run(
        dir,
        &["hook", "claude", "SessionStart"],
        &payload("SessionStart", sid, dir, json!({"source": "startup"})),
    );
    env.run(
        dir,
        &["hook", "claude", "PostToolUse"],
        &payload(
            "PostToolUse",
            sid,
            dir,
            json!({"tool_name": "TaskCreate", "tool_input": {"subject": "Finish the port"},
            "tool_response": {"task": {"id": "1", "subject": "Finish the port"}}}),
        ),
    );
    env.run(
        dir,
        &["hook", "claude", "SessionEnd"],
        &payload("SessionEnd", sid, dir, json!({"reason": "other"})),
    );
    let mut c = server.clients().await;
    let sessions = |c: &mut Clients| sessions_of(c.clone(), project);
    wait_for(|| {
        let mut c = c.clone();
        async move { sessions(&mut c).await[0].status == SessionStatus::Completed as i32 }
    })
    .await;
    let ended = sessions(&mut c).await[0].id.clone();
    // The agent's own resume of that conversation.
    let out = env.run(
        dir,
        &["hook", "claude", "SessionStart"],
        &payload("SessionStart", sid, dir, json!({"source": "resume"})),
    );
    assert!(context(&out.stdout).contains("Where your last session stopped"), "{out:?}");
    assert!(context(&out.stdout).contains("[pending] Finish the port"), "{out:?}");
    let all = sessions(&mut c).await;
    assert_eq!(all.len(), 2, "{all:?}");
    assert_eq!((all[0].resumed_from.as_str(), all[0].agent_session_id.as_str()), (ended.as_str(), sid));
    env.run(
        dir,
        &["hook", "claude", "Stop"],
        &payload("Stop", sid, dir, json!({"last_assistant_message": "more"})),
    );
    let head_id = sessions(&mut c).await[0].head_checkpoint_id.clone();
    let head = c
        .checkpoints
        .get_checkpoint(GetCheckpointRequest { checkpoint_id: head_id, include_payload: false })
        .await
        .unwrap()
        .into_inner()
        .checkpoint
        .unwrap();
    assert_eq!(
        head.state.unwrap().active_tasks[0].content,
        "Finish the port",
        "the successor carries the tasks"
    );

    // `baton resume` after new commits: the changes since the resumed session's last one.
    env.run(
        dir,
        &["hook", "claude", "SessionEnd"],
        &payload("SessionEnd", sid, dir, json!({"reason": "other"})),
    );
    wait_for(|| {
        let mut c = c.clone();
        async move { sessions(&mut c).await[0].status == SessionStatus::Completed as i32 }
    })
    .await;
    std::fs::write(dir.join("NEW.md"), "new\n").unwrap();
    git(dir, &["add", "NEW.md"]);
    git(dir, &["commit", "-q", "-m", "add NEW.md"]);
    let out = env.run(dir, &["resume"], "");
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.contains("## Changes since the last session") && out.stdout.contains("NEW.md"),
        "{out:?}"
    );
}
both!(resuming_an_ended_conversation_links_it);

/// Each agent's hooks fit what that agent shows inline, most important sections first:
/// Claude Code 9,000 characters (it moves more than 10,000 to a file), Codex 6,000 (it does
/// past 2,500 tokens); `brief_budgets` in the config sets one agent's.
async fn briefs_fit_each_agents_limit(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let env = ClientEnv::new(&server.url());
    let repo = git_repo("git@github.com:acme/budgets.git");
    let dir = repo.path();
    let mut c = server.clients().await;
    env.run(dir, &["memory", "add", "goal", "ship the budgets"], "");
    for i in 0..150 {
        crate::put_note(
            &mut c,
            "github.com/acme/budgets",
            &format!("note-{i:03}"),
            &"context ".repeat(15),
            crate::write(),
        )
        .await
        .unwrap();
    }
    let brief_of = |agent: &str, sid: &str| {
        let out = env.run(
            dir,
            &["hook", agent, "SessionStart"],
            &payload("SessionStart", sid, dir, json!({"source": "startup"})),
        );
        context(&out.stdout)
    };
    let claude = brief_of("claude", "b0d9e700-0000-0000-0000-000000000001");
    let codex = brief_of("codex", "b0d9e700-0000-0000-0000-000000000002");
    for (agent, brief, cap) in [("claude", &claude, 9_000), ("codex", &codex, 6_000)] {
        let n = brief.chars().count();
        assert!(n <= cap && n > cap - 1_000, "{agent}: {n} characters");
        assert!(brief.contains("ship the budgets"), "{agent}: the goal comes first");
        assert!(brief.contains("more"), "{agent}: the notes were cut, and say so");
    }
    std::fs::create_dir_all(env.baton_home().join("config")).unwrap();
    std::fs::write(env.baton_home().join("config/config.toml"), "brief_budgets = { codex = 3000 }\n")
        .unwrap();
    let smaller = brief_of("codex", "b0d9e700-0000-0000-0000-000000000003");
    assert!(
        smaller.chars().count() <= 3_000 && smaller.contains("ship the budgets"),
        "{}",
        smaller.chars().count()
    );
}
both!(briefs_fit_each_agents_limit);

/// `baton doctor --try <agent>` shows what the agent's model would receive, within the
/// agent's budget, and starts no session; doctor notes an installed agent whose version the
/// agent suite has not proved.
async fn doctor_tries_an_agent_and_checks_versions(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let env = ClientEnv::new(&server.url());
    let repo = git_repo("git@github.com:acme/try.git");
    let dir = repo.path();
    env.run(dir, &["memory", "add", "goal", "try the brief"], "");
    let out = env.run(dir, &["doctor", "--try", "codex", "--json"], "");
    assert_eq!(out.code, 0, "{out:?}");
    let v: Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    let hook: Value = serde_json::from_str(v["hook_output"].as_str().unwrap()).unwrap();
    assert!(
        hook["hookSpecificOutput"]["additionalContext"].as_str().unwrap().contains("try the brief"),
        "{v}"
    );
    assert_eq!(v["budget"], 6000);
    assert!(v["delivery"].as_str().unwrap().contains("developer message"), "{v}");
    let text = env.run(dir, &["doctor", "--try", "gemini"], "");
    assert!(text.stdout.contains("try the brief") && text.stdout.contains("<hook_context>"), "{text:?}");
    let c = server.clients().await;
    assert!(sessions_of(c, "github.com/acme/try").await.is_empty(), "--try starts no session");

    // A claude on the PATH that is not the version the suite proved.
    let bin = tempfile::tempdir().unwrap();
    let fake = bin.path().join("claude");
    std::fs::write(&fake, "#!/bin/sh\necho '9.9.9 (Claude Code)'\n").unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    env.run(dir, &["init", "claude"], "");
    let path = format!("{}:{}", bin.path().display(), std::env::var("PATH").unwrap_or_default());
    let doctor = env.run_with_env(dir, &["doctor"], "", &[("PATH", &path)]);
    let covered = baton_proto::agent::COVERED.iter().find(|c| c.agent == "claude").unwrap();
    assert!(
        doctor.stdout.contains(&format!(
            "claude 9.9.9 is installed; Baton's agent suite last proved claude {}",
            covered.version
        )),
        "{doctor:?}"
    );
}
both!(doctor_tries_an_agent_and_checks_versions);

/// After `checkpoint_minutes` of activity since the last checkpoint, the next tool call
/// makes a `time` checkpoint; a conversation's record untouched for 30 days is forgotten at
/// a SessionStart (records are looked over at most once a day).
async fn time_checkpoints_and_expiry(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let env = ClientEnv::new(&server.url());
    let repo = git_repo("git@github.com:acme/time.git");
    let dir = repo.path();
    let sid = "71e00000-aaaa-bbbb-cccc-000000000001";
    env.run(
        dir,
        &["hook", "claude", "SessionStart"],
        &payload("SessionStart", sid, dir, json!({"source": "startup"})),
    );
    let record = env.baton_home().join(format!("data/sessions/claude-{sid}.json"));
    let mut state: Value = serde_json::from_str(&std::fs::read_to_string(&record).unwrap()).unwrap();
    // The last checkpoint, 31 minutes ago.
    let now_us =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_micros() as i64;
    state["last_checkpoint_us"] = json!(now_us - 31 * 60 * 1_000_000);
    std::fs::write(&record, state.to_string()).unwrap();
    let read = json!({"tool_name": "Read", "tool_input": {"file_path": "README"}, "tool_response": {"type": "text"}});
    env.run(dir, &["hook", "claude", "PostToolUse"], &payload("PostToolUse", sid, dir, read.clone()));
    env.run(dir, &["hook", "claude", "PostToolUse"], &payload("PostToolUse", sid, dir, read));
    let mut c = server.clients().await;
    let sessions = sessions_of(c.clone(), "github.com/acme/time").await;
    let list = c
        .checkpoints
        .list_checkpoints(ListCheckpointsRequest { session_id: sessions[0].id.clone(), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    let kinds: Vec<(i32, String)> = list.checkpoints.iter().map(|c| (c.kind, c.reason.clone())).collect();
    assert_eq!(
        kinds,
        [(CheckpointKind::Time as i32, "30 minutes of activity".to_owned())],
        "one, not one per call"
    );

    // Untouched for 31 days: forgotten at the next SessionStart (another conversation's).
    let old = std::time::SystemTime::now() - Duration::from_hours(744);
    std::fs::File::options().write(true).open(&record).unwrap().set_modified(old).unwrap();
    // Records are looked over at most once a day: the last look was a day ago.
    let stamp = env.baton_home().join("data/sessions/.swept");
    std::fs::File::options().write(true).open(&stamp).unwrap().set_modified(old).unwrap();
    env.run(
        dir,
        &["hook", "claude", "SessionStart"],
        &payload("SessionStart", "71e00000-aaaa-bbbb-cccc-000000000002", dir, json!({"source": "startup"})),
    );
    assert!(!record.exists(), "the stale record was forgotten");
}
both!(time_checkpoints_and_expiry);

/// A burst of tool calls heartbeats once (at most every 10 s), and later hooks of the
/// conversation take its project from its record instead of asking git again.
async fn tool_calls_heartbeat_at_most_every_ten_seconds(backend: Backend) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let listen = format!("127.0.0.1:{port}");
    let server = Server::start_with(backend, &["--metrics-listen", &listen]).await.unwrap();
    let env = ClientEnv::new(&server.url());
    let repo = git_repo("git@github.com:acme/beats.git");
    let dir = repo.path();
    let sid = "bea70000-aaaa-bbbb-cccc-000000000001";
    env.run(
        dir,
        &["hook", "claude", "SessionStart"],
        &payload("SessionStart", sid, dir, json!({"source": "startup"})),
    );
    let read = json!({"tool_name": "Read", "tool_input": {"file_path": "README"}, "tool_response": {"type": "text"}});
    for _ in 0..5 {
        env.run(dir, &["hook", "claude", "PostToolUse"], &payload("PostToolUse", sid, dir, read.clone()));
    }
    let text = crate::metrics::scrape(port);
    assert_eq!(
        crate::metrics::value(&text, "baton_requests_total{rpc=\"Heartbeat\",code=\"Ok\"}"),
        Some(1.0),
        "{text}"
    );
    // The calls were all counted (the record holds them; the checkpoint carries the count).
    let out = env.run(dir, &["hook", "claude", "Stop"], &payload("Stop", sid, dir, json!({})));
    assert_eq!(out.code, 0);
    let mut c = server.clients().await;
    let s = sessions_of(c.clone(), "github.com/acme/beats").await.remove(0);
    let head = c
        .checkpoints
        .get_checkpoint(GetCheckpointRequest { checkpoint_id: s.head_checkpoint_id, include_payload: false })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(head.checkpoint.unwrap().state.unwrap().tool_count, 5);
}
both!(tool_calls_heartbeat_at_most_every_ten_seconds);

async fn transcripts_carry_over_to_another_machine(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let c = server.clients().await;
    let laptop = ClientEnv::new(&server.url());
    let desktop = ClientEnv::new(&server.url());
    let repo_a = git_repo("git@github.com:acme/carry.git");
    let repo_b = git_repo("https://github.com/acme/carry");
    let (a, b) = (repo_a.path(), repo_b.path());
    let out = laptop.run(a, &["init", "claude", "--sync-transcripts"], "");
    assert!(out.stdout.contains("transcripts are uploaded"), "{out:?}");

    // A transcript over two chunks, mentioning the laptop's path and a secret.
    let sid = "ca551e00-0000-4000-8000-000000000001";
    let transcript = laptop.home.path().join("t.jsonl");
    let line = |i: usize| {
        json!({"type": "user", "cwd": a, "message": {"role": "user", "content": format!("step {i} in {} {}", a.display(), "x".repeat(200))}}).to_string()
    };
    let mut text: String = (0..5000).map(|i| line(i) + "\n").collect();
    text.push_str(&json!({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": "token ghp_abcdefghijklmnopqrstuvwxyz0123456789 used"}]}}).to_string());
    text.push('\n');
    std::fs::write(&transcript, &text).unwrap();
    assert!(text.len() > 2 * 512 * 1024);
    let p = |event: &str, extra: Value| {
        let mut v =
            json!({"session_id": sid, "transcript_path": transcript, "cwd": a, "hook_event_name": event});
        v.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        v.to_string()
    };
    laptop.run(a, &["hook", "claude", "SessionStart"], &p("SessionStart", json!({"source": "startup"})));
    let out = laptop.run(a, &["hook", "claude", "Stop"], &p("Stop", json!({})));
    assert!(out.elapsed < Duration::from_secs(1), "Stop with an upload took {:?}", out.elapsed);
    let project = "github.com/acme/carry";
    let session = || {
        let mut c = c.clone();
        async move {
            c.sessions
                .list_sessions(ListSessionsRequest { project: project.into(), ..Default::default() })
                .await
                .unwrap()
                .into_inner()
                .sessions[0]
                .clone()
        }
    };
    let first = session().await;
    let checkpoint_with_blob = |id: String| {
        let mut c = c.clone();
        async move {
            let l = c
                .checkpoints
                .list_checkpoints(ListCheckpointsRequest {
                    session_id: id,
                    include_state: false,
                    ..Default::default()
                })
                .await
                .unwrap()
                .into_inner();
            l.checkpoints.iter().filter(|c| !c.blobs.is_empty()).count()
        }
    };
    wait_for(|| {
        let f = checkpoint_with_blob(first.id.clone());
        async move { f.await == 1 }
    })
    .await;
    let chunks_once = server.count_chunks().await.unwrap();
    // The transcript grows; the next upload sends only its new tail.
    std::fs::write(&transcript, format!("{text}{}\n", line(9999))).unwrap();
    laptop.run(
        a,
        &["hook", "claude", "SessionEnd"],
        &p("SessionEnd", json!({"reason": "prompt_input_exit"})),
    );
    wait_for(|| {
        let f = checkpoint_with_blob(first.id.clone());
        async move { f.await == 2 }
    })
    .await;
    let chunks_twice = server.count_chunks().await.unwrap();
    assert_eq!(chunks_once, 3);
    assert_eq!(chunks_twice, 4, "earlier chunks are stored once");
    wait_for(|| {
        let s = session();
        async move { s.await.status == SessionStatus::Completed as i32 }
    })
    .await;

    // On the desktop, at another path: restore and resume the same conversation.
    let out = desktop.run(b, &["resume", "--restore", "--json"], "");
    assert_eq!(out.code, 0, "{out:?}");
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    let restored = std::path::PathBuf::from(v["restored"].as_str().unwrap());
    let expected_dir = desktop
        .home
        .path()
        .join(".claude/projects")
        .join(b.display().to_string().replace(|c: char| !c.is_ascii_alphanumeric(), "-"));
    assert_eq!(restored, expected_dir.join(format!("{sid}.jsonl")));
    let back = std::fs::read_to_string(&restored).unwrap();
    assert!(
        back.contains(&b.display().to_string()) && !back.contains(&a.display().to_string()),
        "project path rewritten"
    );
    assert!(back.contains("[REDACTED:github_token]") && !back.contains("ghp_"), "secrets never uploaded");
    assert_eq!(back.lines().count(), 5002);
    assert_eq!(v["resume_command"], format!("claude --resume {sid}"));
}
both!(transcripts_carry_over_to_another_machine);

async fn human_commands_and_dead_letters(backend: Backend) {
    let mut server = Server::start(backend).await.unwrap();
    let env = ClientEnv::new(&server.url());
    let repo = git_repo("git@github.com:acme/human.git");
    let dir = repo.path();
    let sid = "4a11a000-0000-4000-8000-000000000001";
    env.run(
        dir,
        &["hook", "claude", "SessionStart"],
        &payload("SessionStart", sid, dir, json!({"source": "startup"})),
    );

    // Config precedence: file < BATON_SERVER < --server.
    std::fs::create_dir_all(env.baton_home().join("config")).unwrap();
    std::fs::write(env.baton_home().join("config/config.toml"), "server = \"http://127.0.0.1:1\"\n").unwrap();
    assert_eq!(env.run(dir, &["status"], "").code, 0, "BATON_SERVER beats the file");
    let out = env.run(dir, &["status", "--server", "http://127.0.0.1:1"], "");
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("cannot reach the Baton hub at http://127.0.0.1:1"), "{out:?}");

    let sessions: Value =
        serde_json::from_str(&env.run(dir, &["sessions", "--json", "--status", "active"], "").stdout)
            .unwrap();
    let id = sessions["sessions"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(sessions["sessions"][0]["agent"], "claude-code");
    let short = &id[id.len() - 8..];
    let one = env.run(dir, &["session", short], "");
    assert!(one.stdout.contains(&id) && one.stdout.contains("active"), "{one:?}");
    let cp = env.run(dir, &["checkpoint", "--reason", "before the refactor"], "");
    assert!(cp.stdout.contains(&format!("of session {id}")), "{cp:?}");
    let tree = env.run(dir, &["checkpoints", "--tree"], "");
    assert!(
        tree.stdout.contains("manual")
            && tree.stdout.contains("before the refactor")
            && tree.stdout.contains("← head"),
        "{tree:?}"
    );
    let table = env.run(dir, &["sessions"], "");
    assert!(table.stdout.contains(short) && table.stdout.contains("claude-code"), "{table:?}");
    let events = env.run(dir, &["events", "--json"], "");
    let kinds: Vec<String> = events
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["kind"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(kinds, vec!["session_started", "checkpoint_created"]);
    // watch replays from a revision and follows; stop it after what we expect.
    let mut watch = std::process::Command::new(baton_tests::binary("baton"))
        .args(["watch", "--after", "0"])
        .current_dir(dir)
        .env("HOME", env.home.path())
        .env("BATON_HOME", env.baton_home())
        .env("BATON_SERVER", server.url())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    env.run(dir, &["memory", "add", "open_loop", "watch me"], "");
    let stdout = watch.stdout.take().unwrap();
    let lines: Vec<String> = tokio::task::spawn_blocking(move || {
        use std::io::BufRead;
        std::io::BufReader::new(stdout).lines().map_while(Result::ok).take(3).collect()
    })
    .await
    .unwrap();
    let _ = watch.kill();
    let _ = watch.wait();
    assert!(lines[0].starts_with("r1 ") && lines[2].contains("memory_changed"), "{lines:?}");

    // A queued write the hub refuses for good goes to the dead letters and does not block
    // the writes queued after it.
    server.kill9();
    env.run(dir, &["memory", "add", "gossip", "not a category"], "");
    env.run(dir, &["memory", "add", "decision", "still delivered"], "");
    server.restart().unwrap();
    let env = ClientEnv { server: server.url(), ..env };
    let out = env.run(dir, &["sync"], "");
    assert!(out.stdout.contains("sent 1, refused 1"), "{out:?}");
    let status = env.run(dir, &["status"], "");
    assert!(status.stdout.contains("dead     1") && status.stdout.contains("gossip"), "{status:?}");
    let list = env.run(dir, &["memory", "list", "decision"], "");
    assert!(list.stdout.contains("still delivered"), "{list:?}");
}
both!(human_commands_and_dead_letters);

/// A hub that accepts connections and never answers: the hooks must still return within
/// their budget, exit 0, and queue what they could not send; nothing is lost once a real
/// hub is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_under_a_hub_that_never_answers() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in silent.incoming().flatten() {
            held.push(stream); // accepted, never read or answered
        }
    });
    let env = ClientEnv::new(&format!("http://{addr}"));
    let repo = git_repo("https://github.com/acme/silent.git");
    let dir = repo.path();
    let sid = "51e47000-0000-0000-0000-000000000001";
    let mut events = vec![("SessionStart", json!({"source": "startup"}))];
    events.extend(
        (0..3).map(|_| ("PostToolUse", json!({"tool_name": "Edit", "tool_input": {"file_path": "a.rs"}}))),
    );
    events.push(("Stop", json!({})));
    for (event, extra) in events {
        let out = env.run(dir, &["hook", "claude", event], &payload(event, sid, dir, extra));
        assert_eq!(out.code, 0, "{event}: {out:?}");
        assert!(
            out.elapsed < Duration::from_millis(3500),
            "{event} took {:?} against a silent hub",
            out.elapsed
        );
        if event == "SessionStart" {
            assert!(context(&out.stdout).contains("unreachable"), "{out:?}");
        }
    }
    let status: Value = serde_json::from_str(&env.run(dir, &["status", "--json"], "").stdout).unwrap();
    let pending = status["queue"]["pending"].as_u64().unwrap();
    assert!(pending >= 2, "the session start and the Stop checkpoint are queued: {status}");

    // A real hub appears at another address: everything queued arrives, once.
    let server = Server::start(Backend::Sqlite).await.unwrap();
    let env = ClientEnv { server: server.url(), ..env };
    let out = env.run(dir, &["sync"], "");
    assert!(out.stdout.contains(&format!("sent {pending}")), "{out:?}");
    let mut c = server.clients().await;
    let events = crate::all_events(&mut c, "github.com/acme/silent").await;
    crate::assert_gapless(&events);
    use baton_proto::v1::EventKind as E;
    assert_eq!(events.first().map(|e| e.kind), Some(E::SessionStarted as i32));
    let status = env.run(dir, &["status", "--json"], "");
    assert!(
        events.iter().any(|e| e.kind == E::CheckpointCreated as i32),
        "the Stop checkpoint arrived: {out:?} {status:?} {events:?}"
    );
}

/// The agent's hooks for one working session: 40 tool calls with a Stop every 10 (a
/// checkpoint every 5 calls by config), each exiting 0 within its budget.
fn work(env: &ClientEnv, dir: &Path, sid: &str) {
    for i in 0..40 {
        let edit = json!({"tool_name": "Edit", "tool_input": {"file_path": format!("src/f{i}.rs")}});
        let mut calls = vec![("PostToolUse", edit)];
        if i % 10 == 9 {
            calls.push(("Stop", json!({})));
        }
        for (event, extra) in calls {
            let out = env.run(dir, &["hook", "claude", event], &payload(event, sid, dir, extra));
            assert_eq!(out.code, 0, "{event} {i}: {out:?}");
            assert!(out.elapsed < Duration::from_millis(3500), "{event} {i} took {:?}", out.elapsed);
        }
        std::thread::sleep(Duration::from_millis(40));
    }
}

async fn checkpoints_of(server: &Server, project: &str) -> usize {
    let mut c = server.clients().await;
    let sessions = sessions_of(c.clone(), project).await;
    let mut n = 0;
    for s in sessions {
        n += c
            .checkpoints
            .list_checkpoints(ListCheckpointsRequest {
                session_id: s.id,
                include_state: false,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .checkpoints
            .len();
    }
    n
}

/// The hub restarts while an agent works: every hook returns promptly with exit 0, and
/// after a sync the hub holds exactly what a run against a steady hub holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_while_the_hub_restarts() {
    let setup = |env: &ClientEnv| {
        std::fs::create_dir_all(env.baton_home().join("config")).unwrap();
        std::fs::write(env.baton_home().join("config/config.toml"), "checkpoint_every = 5\n").unwrap();
    };
    let start = json!({"source": "startup"});

    // Against a steady hub.
    let steady = Server::start(Backend::Sqlite).await.unwrap();
    let env = ClientEnv::new(&steady.url());
    setup(&env);
    let repo = git_repo("https://github.com/acme/steady.git");
    let sid = "57ead700-0000-0000-0000-000000000001";
    env.run(
        repo.path(),
        &["hook", "claude", "SessionStart"],
        &payload("SessionStart", sid, repo.path(), start.clone()),
    );
    work(&env, repo.path(), sid);
    let expected = checkpoints_of(&steady, "github.com/acme/steady").await;
    assert!(expected >= 8, "{expected} checkpoints");

    // The same work while the hub is killed and comes back on the same address.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let listen = format!("127.0.0.1:{port}");
    let mut server = Server::start_with(Backend::Sqlite, &["--listen", &listen]).await.unwrap();
    let env = ClientEnv::new(&server.url());
    setup(&env);
    let repo = git_repo("https://github.com/acme/restarts.git");
    let sid = "2e57a270-0000-0000-0000-000000000001";
    let out = env.run(
        repo.path(),
        &["hook", "claude", "SessionStart"],
        &payload("SessionStart", sid, repo.path(), start),
    );
    assert_eq!(out.code, 0, "{out:?}");
    let chaos = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(500));
        server.kill9();
        std::thread::sleep(Duration::from_millis(1500));
        server.restart().unwrap();
        server
    });
    work(&env, repo.path(), sid);
    let server = chaos.join().unwrap();
    let out = env.run(repo.path(), &["sync"], "");
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(
        checkpoints_of(&server, "github.com/acme/restarts").await,
        expected,
        "checkpoints lost or doubled across the restart"
    );
    let mut c = server.clients().await;
    crate::assert_gapless(&crate::all_events(&mut c, "github.com/acme/restarts").await);
}

/// Settings shared by every agent follow the last of them: transcript sync goes off with
/// the last agent's hooks, and the brief's MCP line stays while the server is registered in
/// another scope.
#[tokio::test]
async fn uninstalling_one_agent_leaves_what_others_still_use() {
    let server = Server::start(Backend::Sqlite).await.unwrap();
    let env = ClientEnv::new(&server.url());
    let repo = git_repo("https://github.com/acme/uninstall.git");
    let dir = repo.path();
    let config = env.baton_home().join("config/config.toml");
    let sync_on = || std::fs::read_to_string(&config).unwrap_or_default().contains("sync_transcripts = true");
    assert_eq!(env.run(dir, &["init", "claude", "--sync-transcripts"], "").code, 0);
    assert_eq!(env.run(dir, &["init", "codex"], "").code, 0);
    assert!(sync_on());
    assert_eq!(env.run(dir, &["init", "claude", "--uninstall"], "").code, 0);
    assert!(sync_on(), "codex's hooks still use it");
    let out = env.run(dir, &["init", "codex", "--uninstall"], "");
    assert!(out.stdout.contains("transcript sync turned off"), "{out:?}");
    assert!(!sync_on());

    let marker = env.baton_home().join("data/mcp/claude");
    assert_eq!(env.run(dir, &["init", "claude"], "").code, 0);
    assert_eq!(env.run(dir, &["init", "claude", "--scope", "project"], "").code, 0);
    assert_eq!(env.run(dir, &["init", "claude", "--scope", "project", "--uninstall"], "").code, 0);
    assert!(marker.exists(), "still registered for the user");
    assert_eq!(env.run(dir, &["init", "claude", "--uninstall"], "").code, 0);
    assert!(!marker.exists());
}
