//! What a newcomer meets through the real `baton` binary (issue 38): hooks that start
//! nothing from input that is not a payload, refusals told apart from outages, writes that
//! queue with the hub down, short ids, the CLI's own words, evictions reported, server
//! addresses, and a manual checkpoint that holds the conversation's state.

use std::path::Path;

use baton_proto::v1::{
    AgentKind, CreateCheckpointRequest, EndSessionRequest, GetCheckpointRequest, ListSessionsRequest,
    SessionStatus,
};
use baton_tests::{Backend, ClientEnv, Server, both, git_repo};
use serde_json::{Value, json};

fn hook(env: &ClientEnv, dir: &Path, event: &str, payload: &Value) -> baton_tests::Output {
    let out = env.run(dir, &["hook", "claude", event], &payload.to_string());
    assert_eq!(out.code, 0, "{out:?}");
    out
}

fn context(out: &baton_tests::Output) -> String {
    let v: Value = serde_json::from_str(out.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    v["hookSpecificOutput"]["additionalContext"].as_str().unwrap_or_default().to_owned()
}

async fn sessions(server: &Server, project: &str) -> usize {
    let mut c = server.clients().await;
    let request = ListSessionsRequest { project: project.into(), ..Default::default() };
    c.sessions.list_sessions(request).await.unwrap().into_inner().sessions.len()
}

/// Input that is not a hook payload starts nothing; a payload the hub refuses says so.
async fn hooks_start_nothing_from_bad_input(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let env = ClientEnv::new(&server.url());
    let repo = git_repo("https://github.com/acme/newcomer.git");
    let dir = repo.path();
    for stdin in ["", "not json", "[1, 2]", r#"{"cwd": "/tmp", "source": "startup"}"#] {
        let out = env.run(dir, &["hook", "claude", "SessionStart"], stdin);
        assert_eq!((out.code, out.stdout.trim()), (0, ""), "{stdin:?}: {out:?}");
    }
    assert_eq!(sessions(&server, "github.com/acme/newcomer").await, 0, "no session from bad input");
    let log = std::fs::read_to_string(env.baton_home().join("data/hook.log")).unwrap_or_default();
    assert!(log.contains("nothing done: no payload") && log.contains("no session_id"), "{log}");

    let refused = json!({"session_id": "../../etc/passwd", "cwd": dir, "source": "startup"});
    let brief = context(&hook(&env, dir, "SessionStart", &refused));
    assert!(brief.contains("refused this session") && brief.contains("agent_session_id"), "{brief}");
    assert!(!brief.contains("unreachable"), "a refusal is not an outage: {brief}");
}
both!(hooks_start_nothing_from_bad_input);

/// `baton checkpoint` with a live conversation holds that conversation's state and is its
/// agent's; with the hub down it is queued, like `memory rm` of a full id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_checkpoint_is_the_conversations_and_queues_offline() {
    let server = Server::start(Backend::Sqlite).await.unwrap();
    let env = ClientEnv::new(&server.url());
    let repo = git_repo("https://github.com/acme/manual.git");
    let dir = repo.path();
    let sid = "5e551010-0000-4000-8000-000000000001";
    let base = |extra: Value| {
        let mut v = json!({"session_id": sid, "cwd": dir});
        v.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        v
    };
    hook(&env, dir, "SessionStart", &base(json!({"source": "startup"})));
    hook(&env, dir, "UserPromptSubmit", &base(json!({"prompt": "fix the login bug"})));
    let edit = json!({"tool_name": "Edit", "tool_input": {"file_path": dir.join("a.rs")}});
    hook(&env, dir, "PostToolUse", &base(edit));
    // The first prompt is the session's goal (a later one does not replace it).
    hook(&env, dir, "UserPromptSubmit", &base(json!({"prompt": "and add a test"})));
    let sessions = env.run(dir, &["sessions"], "");
    assert!(
        sessions.stdout.contains("fix the login bug") && !sessions.stdout.contains("add a test"),
        "{sessions:?}"
    );

    // No USER: the author is the account's name, the one `search --author` finds.
    let out = env.run_with_env(dir, &["--json", "checkpoint", "--reason", "by hand"], "", &[("USER", "")]);
    assert_eq!(out.code, 0, "{out:?}");
    let made: Value = serde_json::from_str(&out.stdout).unwrap();
    let mut c = server.clients().await;
    let id = made["checkpoint_id"].as_str().unwrap().to_owned();
    let request = GetCheckpointRequest { checkpoint_id: id.clone(), ..Default::default() };
    let cp = c.checkpoints.get_checkpoint(request).await.unwrap().into_inner().checkpoint.unwrap();
    let state = cp.state.unwrap();
    assert_eq!(state.last_prompt, "and add a test");
    assert_eq!(state.files_modified, ["a.rs"]);
    let author = cp.author.unwrap();
    assert_eq!(author.agent, AgentKind::ClaudeCode as i32);
    assert!(!author.user.is_empty(), "an author without USER: {author:?}");
    let found = env.run(dir, &["--json", "search", "add test", "--author", &author.user], "");
    assert!(
        found.stdout.contains(&id),
        "{author:?} {found:?} {:?}",
        env.run(dir, &["--json", "search", "add test"], "")
    );

    // The hub down: queued, for the conversation's session and for a named one.
    let down = ClientEnv { server: "http://127.0.0.1:1".into(), ..env };
    let out = down.run(dir, &["checkpoint", "--reason", "offline"], "");
    assert!(out.code == 0 && out.stdout.contains("queued"), "{out:?}");
    let session = made["session_id"].as_str().unwrap();
    let out = down.run(dir, &["checkpoint", "--reason", "named", "--session", session], "");
    assert!(out.code == 0 && out.stdout.contains("queued"), "{out:?}");
    let out = down.run(dir, &["memory", "rm", &uuid::Uuid::now_v7().to_string()], "");
    assert!(out.code == 0 && out.stdout.contains("queued"), "{out:?}");
    let out = down.run(dir, &["memory", "rm", "c4b15e80"], "");
    assert!(out.code != 0 && out.stderr.contains("full id"), "{out:?}");
    let up = ClientEnv { server: server.url(), ..down };
    let out = up.run(dir, &["sync"], "");
    assert!(out.stdout.contains("sent 2, refused 1"), "the unknown entry is refused: {out:?}");
}

/// Short ids, the CLI's words for the hub's refusals, evictions, plurals and empty tables.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_speaks_the_users_language() {
    let server = Server::start(Backend::Sqlite).await.unwrap();
    let env = ClientEnv::new(&server.url());
    let repo = git_repo("https://github.com/acme/words.git");
    let dir = repo.path();
    let run = |args: &[&str]| env.run(dir, args, "");
    let out = run(&["sessions"]);
    assert!(
        out.stdout.contains("(0 sessions") && out.stdout.contains("none") && !out.stdout.contains('┌'),
        "{out:?}"
    );

    // A checkpoint resumed by the 8 characters the table shows.
    let mut c = server.clients().await;
    let p = "github.com/acme/words";
    let session = crate::start_session(&mut c, p).await;
    let request = CreateCheckpointRequest {
        session_id: session.id.clone(),
        kind: baton_proto::v1::CheckpointKind::Manual as i32,
        write: crate::write(),
        ..Default::default()
    };
    let cp = c.checkpoints.create_checkpoint(request).await.unwrap().into_inner().checkpoint.unwrap();
    let end = EndSessionRequest {
        session_id: session.id.clone(),
        status: SessionStatus::Completed as i32,
        write: crate::write(),
        ..Default::default()
    };
    c.sessions.end_session(end).await.unwrap();
    assert!(run(&["sessions"]).stdout.contains("(1 session,"));
    let short = &cp.id[cp.id.len() - 8..];
    let out = run(&["--json", "resume", "--checkpoint", short]);
    assert_eq!(out.code, 0, "{out:?}");
    let resumed: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(resumed["checkpoint"]["id"], cp.id.as_str());

    // The CLI's flags and commands, not the RPC's.
    let out = run(&["memory", "add", "note", "text"]);
    assert!(out.code != 0 && out.stderr.contains("--key"), "{out:?}");
    assert_eq!(run(&["memory", "caps", "goal", "1"]).code, 0);
    assert_eq!(run(&["memory", "set", "goal", "ship v1"]).code, 0);
    let out = run(&["memory", "set", "goal", "ship v2"]);
    assert!(out.stdout.contains("goal replaced"), "{out:?}");
    let out = run(&["memory", "add", "goal", "another"]);
    assert!(out.stderr.contains("`baton memory caps") && !out.stderr.contains("SetMemoryCaps"), "{out:?}");
    assert!(out.stderr.contains("at most 1 item and"), "{out:?}");
    let out = run(&["memory", "add", "note", "v", "--key", "k", "--if-revision", "1"]);
    assert!(out.stderr.contains("--if-revision") && !out.stderr.contains("base_revision"), "{out:?}");

    // A sixth decision evicts the oldest, and says which.
    for i in 1..=6 {
        let out = run(&["memory", "add", "decision", &format!("choice {i}")]);
        assert_eq!(out.stdout.contains("evicted the oldest, \"choice 1\""), i == 6, "{i}: {out:?}");
    }
}

/// Server addresses as the server prints them, a TLS client at a plain hub, a missing -C
/// directory and a budget too small for a brief.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_addresses_and_arguments() {
    let server = Server::start(Backend::Sqlite).await.unwrap();
    let repo = git_repo("https://github.com/acme/address.git");
    let dir = repo.path();
    let plain = ClientEnv::new(&server.addr.to_string());
    let out = plain.run(dir, &["status"], "");
    assert!(out.code == 0 && out.stdout.contains("serving"), "{out:?}");
    let tls = ClientEnv::new(&format!("https://{}", server.addr));
    let out = tls.run(dir, &["status"], "");
    assert!(out.code != 0 && out.stderr.contains("does not answer TLS"), "{out:?}");
    let out = plain.run(dir, &["-C", "/nonexistent/baton", "status"], "");
    assert!(out.code != 0 && out.stderr.contains("no such directory"), "{out:?}");
    let out = plain.run(dir, &["warmup", "--budget", "10"], "");
    assert!(out.code != 0 && out.stderr.contains("500"), "{out:?}");
    let out = plain.run(dir, &["--server", "grpc://x:1", "status"], "");
    assert!(out.code != 0 && out.stderr.contains("http:// or https://"), "{out:?}");
}

/// A server that is not Baton (a web server on the port) gets a sentence saying so, not
/// HTTP/2's internals.
#[test]
fn a_server_that_is_not_baton_is_named_as_such() {
    use std::io::{Read as _, Write as _};
    let web = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = web.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut stream in web.incoming().flatten() {
            let mut buf = [0u8; 1024];
            let _ = stream.read(&mut buf);
            let _ = stream
                .write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        }
    });
    let env = ClientEnv::new(&format!("http://{addr}"));
    let repo = git_repo("https://github.com/acme/web.git");
    for args in [&["status"][..], &["memory", "list"], &["sessions"]] {
        let out = env.run(repo.path(), args, "");
        assert!(out.code != 0, "{args:?}: {out:?}");
        let said = format!("{}{}", out.stdout, out.stderr);
        assert!(said.contains("Baton hub"), "{args:?}: {said}");
        assert!(
            !said.contains("grpc-status header missing")
                && !said.contains("h2 protocol error: http2 error\n"),
            "{said}"
        );
    }
}

/// doctor and init speak plainly: the project's source without Rust's debug form, a second
/// `init` that had nothing to register says so; `baton session` leaves out empty fields;
/// `memory list --wide` shows a long rationale whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_init_and_views_speak_plainly() {
    let server = Server::start(Backend::Sqlite).await.unwrap();
    let env = ClientEnv::new(&server.url());
    let repo = git_repo("https://github.com/acme/plain.git");
    let dir = repo.path();
    let doctor = env.run(dir, &["doctor"], "");
    assert!(doctor.stdout.contains("(from git remote github.com/acme/plain)"), "{doctor:?}");
    assert!(!doctor.stdout.contains("GitRemote("), "{doctor:?}");
    env.run(dir, &["init", "claude"], "");
    let again = env.run(dir, &["init", "claude"], "");
    assert!(
        again.stdout.contains("were registered already") && !again.stdout.contains(" in \n"),
        "{again:?}"
    );
    // A project's MCP file names `baton` by command: doctor says when none is on PATH.
    env.run(dir, &["init", "claude", "--scope", "project"], "");
    let mcp: Value = serde_json::from_str(&std::fs::read_to_string(dir.join(".mcp.json")).unwrap()).unwrap();
    assert_eq!(mcp["mcpServers"]["baton"]["command"], "baton");
    let doctor = env.run_with_env(dir, &["doctor"], "", &[("PATH", "/usr/bin:/bin")]);
    assert!(doctor.stdout.contains("no `baton` is on PATH here"), "{doctor:?}");

    let mut c = server.clients().await;
    let session = crate::start(
        &mut c,
        baton_proto::v1::StartSessionRequest {
            project: "github.com/acme/plain".into(),
            agent: AgentKind::Codex as i32,
            host: "laptop".into(),
            write: crate::write(),
            ..Default::default()
        },
    )
    .await;
    let shown = env.run(dir, &["session", &session.id[session.id.len() - 8..]], "");
    assert!(
        shown.stdout.contains("laptop")
            && !shown.stdout.contains("goal")
            && !shown.stdout.contains("resumed"),
        "{shown:?}"
    );
    assert!(!shown.stdout.contains(" / ") && !shown.stdout.contains(" → "), "{shown:?}");

    let why = "because ".repeat(20) + "the end";
    env.run(dir, &["memory", "add", "decision", "use sqlx", "--rationale", &why], "");
    let narrow = env.run(dir, &["memory", "list", "decision"], "");
    assert!(!narrow.stdout.contains("the end"), "{narrow:?}");
    let wide = env.run(dir, &["memory", "list", "decision", "--wide"], "");
    assert!(wide.stdout.contains("the end"), "{wide:?}");
}
