//! Reservations through the real client: `baton reserve` and `baton reservations`, the
//! pre-tool hooks of each agent refusing or warning about edits of what another session
//! holds (file tools, apply_patch, shell writes), never about the holder's own; the hub down
//! (a warning from the last view, never a refusal); a holder told at its next hooks that it
//! lost a reservation.

use std::path::Path;

use baton_tests::{Backend, ClientEnv, Server, git_repo};
use serde_json::{Value, json};

use crate::sessions_of;

fn hook_payload(sid: &str, dir: &Path, event: &str, tool: &str, input: &Value) -> String {
    json!({
        "session_id": sid,
        "transcript_path": "/nonexistent.jsonl",
        "cwd": dir,
        "hook_event_name": event,
        "tool_name": tool,
        "tool_input": input,
        "tool_response": {"type": "update"},
    })
    .to_string()
}

fn parse(out: &str) -> Value {
    serde_json::from_str(out.trim()).unwrap_or(Value::Null)
}

/// The hook's output for `tool` with `input`, run by conversation `sid`.
fn pre(env: &ClientEnv, dir: &Path, agent: &str, sid: &str, tool: &str, input: &Value) -> Value {
    let event = if agent == "gemini" { "BeforeTool" } else { "PreToolUse" };
    let out = env.run(dir, &["hook", agent, event], &hook_payload(sid, dir, event, tool, input));
    assert_eq!(out.code, 0, "{}", out.stderr);
    parse(&out.stdout)
}

fn start(env: &ClientEnv, dir: &Path, sid: &str) {
    let payload = json!({"session_id": sid, "transcript_path": "/nonexistent.jsonl", "cwd": dir, "hook_event_name": "SessionStart", "source": "startup"});
    assert_eq!(env.run(dir, &["hook", "claude", "SessionStart"], &payload.to_string()).code, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_refuse_or_warn_about_what_others_hold() {
    let mut server = Server::start(Backend::Sqlite).await.unwrap();
    let repo = git_repo("git@github.com:acme/reserved.git");
    let dir = repo.path();
    std::fs::create_dir_all(dir.join("src/auth")).unwrap();
    // Two machines: each its own HOME, one project.
    let (a, b) = (ClientEnv::new(&server.url()), ClientEnv::new(&server.url()));
    start(&a, dir, "conv-a");
    start(&b, dir, "conv-b");
    let c = server.clients().await;
    let sessions = sessions_of(c.clone(), "github.com/acme/reserved").await;
    let a_id = sessions.last().unwrap().id.clone();

    let out = a.run(
        &dir.join("src"),
        &["reserve", "auth", "--reason", "rewriting JWT auth", "--session", &a_id],
        "",
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("reserved src/auth"), "{}", out.stdout);
    let listed = b.run(dir, &["reservations", "--json"], "");
    let listed = parse(&listed.stdout);
    assert_eq!(listed["reservations"][0]["path"], "src/auth");
    assert_eq!(listed["settings"]["enforcement"], "warn");

    // Warn (the default): the edit goes ahead, the model reads who holds it.
    let edit = json!({"file_path": dir.join("src/auth/jwt.rs"), "old_string": "a", "new_string": "b"});
    let warned = pre(&b, dir, "claude", "conv-b", "Edit", &edit);
    let text = warned["hookSpecificOutput"]["additionalContext"].as_str().unwrap_or_default();
    assert!(
        text.contains("src/auth/jwt.rs (within src/auth)") && text.contains("rewriting JWT auth"),
        "{warned}"
    );
    assert!(
        warned["hookSpecificOutput"].get("permissionDecision").is_none(),
        "a warning never allows: {warned}"
    );
    // The holder itself, and a file nobody holds: nothing.
    assert_eq!(pre(&a, dir, "claude", "conv-a", "Edit", &edit), Value::Null);
    let free = json!({"file_path": dir.join("README.md"), "content": "x"});
    assert_eq!(pre(&b, dir, "claude", "conv-b", "Write", &free), Value::Null);

    // Deny: each agent's own shape, the reason naming the holder and the way on.
    let out = a.run(dir, &["reservations", "settings", "--enforce", "deny"], "");
    assert_eq!(out.code, 0, "{}", out.stderr);
    let denied =
        pre(&b, dir, "claude", "conv-b", "Write", &json!({"file_path": "src/auth/new.rs", "content": "x"}));
    assert_eq!(denied["hookSpecificOutput"]["permissionDecision"], "deny", "{denied}");
    let reason = denied["hookSpecificOutput"]["permissionDecisionReason"].as_str().unwrap_or_default();
    assert!(reason.contains("baton reserve src/auth/new.rs --wait 5m") && reason.contains("dev"), "{reason}");
    let gemini = pre(
        &b,
        dir,
        "gemini",
        "conv-g",
        "replace",
        &json!({"file_path": "src/auth/jwt.rs", "old_string": "a", "new_string": "b"}),
    );
    assert_eq!(gemini["decision"], "deny", "{gemini}");
    let patch = format!(
        "*** Begin Patch\n*** Update File: {}\n@@\n-a\n+b\n*** End Patch\n",
        dir.join("src/auth/jwt.rs").display()
    );
    let codex = pre(&b, dir, "codex", "conv-c", "apply_patch", &json!({"command": patch}));
    assert_eq!(codex["hookSpecificOutput"]["permissionDecision"], "deny", "{codex}");
    let shell = pre(
        &b,
        dir,
        "claude",
        "conv-b",
        "Bash",
        &json!({"command": "sed -i s/a/b/ src/auth/jwt.rs && cargo test"}),
    );
    assert_eq!(shell["hookSpecificOutput"]["permissionDecision"], "deny", "{shell}");
    let reading =
        pre(&b, dir, "claude", "conv-b", "Bash", &json!({"command": "cat src/auth/jwt.rs > /tmp/copy"}));
    assert_eq!(reading, Value::Null, "reading is not writing");

    // The hub down: the last view kept by a renewal warns, marked with its age; never refuses.
    let post = hook_payload("conv-b", dir, "PostToolUse", "Read", &json!({"file_path": "README.md"}));
    assert_eq!(b.run(dir, &["hook", "claude", "PostToolUse"], &post).code, 0);
    server.kill9();
    let stale = pre(&b, dir, "claude", "conv-b", "Edit", &edit);
    let text = stale["hookSpecificOutput"]["additionalContext"].as_str().unwrap_or_default();
    assert!(
        text.contains("as of") && text.contains("cannot be reached") && text.contains("src/auth"),
        "{stale}"
    );
    assert!(stale["hookSpecificOutput"].get("permissionDecision").is_none(), "{stale}");
}

/// A holder whose reservation was taken over is told at its next renewal (PostToolUse, at
/// most every 10 s), in its agent's shape.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_is_told_it_lost_a_reservation() {
    let server = Server::start(Backend::Sqlite).await.unwrap();
    let repo = git_repo("git@github.com:acme/lost.git");
    let dir = repo.path();
    let (a, b) = (ClientEnv::new(&server.url()), ClientEnv::new(&server.url()));
    start(&a, dir, "conv-a");
    start(&b, dir, "conv-b");
    let sessions = sessions_of(server.clients().await, "github.com/acme/lost").await;
    let (b_id, a_id) = (sessions[0].id.clone(), sessions[1].id.clone());
    assert_eq!(a.run(dir, &["reserve", "--task", "#7", "--session", &a_id], "").code, 0);
    let post = hook_payload("conv-a", dir, "PostToolUse", "Read", &json!({"file_path": "README.md"}));
    let first = a.run(dir, &["hook", "claude", "PostToolUse"], &post);
    assert_eq!(first.stdout.trim(), "", "nothing lost yet: {}", first.stdout);
    // Another session takes it over (an open hub: anyone may).
    let out = b.run(dir, &["reserve", "--task", "#7", "--steal", "--session", &b_id], "");
    assert!(out.stdout.contains("took over task \"#7\""), "{}{}", out.stdout, out.stderr);
    tokio::time::sleep(std::time::Duration::from_millis(10_300)).await;
    let told = parse(&a.run(dir, &["hook", "claude", "PostToolUse"], &post).stdout);
    let text = told["hookSpecificOutput"]["additionalContext"].as_str().unwrap_or_default();
    assert!(
        text.contains("task \"#7\" was taken over by session") && text.contains(&b_id[b_id.len() - 8..]),
        "{told}"
    );
}

/// `baton mcp` renews its conversation's reservations between hooks, for as long as it runs
/// (as long as the agent that started it); killed, its reservations lapse within their time
/// to live and go to the first waiter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn baton_mcp_keeps_them_while_the_agent_lives() {
    use std::process::{Command, Stdio};
    let server = Server::start(Backend::Sqlite).await.unwrap();
    let repo = git_repo("git@github.com:acme/renewed.git");
    let dir = repo.path();
    let (a, b) = (ClientEnv::new(&server.url()), ClientEnv::new(&server.url()));
    // This test process plays the agent: it runs the hook and starts `baton mcp`.
    start(&a, dir, "conv-a");
    start(&b, dir, "conv-b");
    assert_eq!(a.run(dir, &["reservations", "settings", "--ttl", "3s"], "").code, 0);
    let sessions = sessions_of(server.clients().await, "github.com/acme/renewed").await;
    let (b_id, a_id) = (sessions[0].id.clone(), sessions[1].id.clone());
    let mut mcp = Command::new(baton_tests::binary("baton"))
        .args(["mcp", "--agent", "claude"])
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", a.home.path())
        .env("BATON_HOME", a.baton_home())
        .env("BATON_SERVER", server.url())
        .env("USER", "dev")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert_eq!(a.run(dir, &["reserve", "docs", "--session", &a_id], "").code, 0);
    tokio::time::sleep(std::time::Duration::from_secs(7)).await;
    let held = parse(&b.run(dir, &["reservations", "--json"], "").stdout);
    assert_eq!(held["reservations"][0]["path"], "docs", "renewed past its 3 s: {held}");

    // The agent dies with its MCP server: the reservation lapses, the waiter gets it.
    mcp.kill().unwrap();
    let _ = mcp.wait();
    let started = std::time::Instant::now();
    let got = b.run(dir, &["reserve", "docs/guide.md", "--wait", "20s", "--session", &b_id], "");
    assert_eq!(got.code, 0, "{}{}", got.stdout, got.stderr);
    assert!(started.elapsed() < std::time::Duration::from_secs(6), "lapsed within its time to live");
}

/// `baton mcp` with no conversation to renew for (yet) waits between passes: it stays idle,
/// and exits as soon as its client closes stdin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn baton_mcp_idles_without_a_conversation() {
    use std::process::{Command, Stdio};
    let env = ClientEnv::new("http://127.0.0.1:9");
    let repo = git_repo("git@github.com:acme/idle.git");
    let mut mcp = Command::new(baton_tests::binary("baton"))
        .args(["mcp", "--agent", "gemini"])
        .current_dir(repo.path())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", env.home.path())
        .env("BATON_HOME", env.baton_home())
        .env("BATON_SERVER", "http://127.0.0.1:9")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    // utime + stime, in clock ticks (100 per second here): a busy loop would use ~200.
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", mcp.id())).unwrap();
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    assert!(ticks < 50, "baton mcp used {ticks} ticks of CPU in 2 s while idle");
    drop(mcp.stdin.take());
    let started = std::time::Instant::now();
    while mcp.try_wait().unwrap().is_none() {
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "baton mcp did not exit");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

fn git_in(env: &ClientEnv, dir: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", env.home.path())
        .env("BATON_HOME", env.baton_home())
        .env("BATON_SERVER", &env.server)
        .env("USER", "dev")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .unwrap()
}

/// The git pre-commit hook `baton init --pre-commit` installs: a commit touching another
/// session's files is refused (deny) with the holder named, or warned about (warn); free
/// files commit; a pre-commit hook of the user's own is left alone; uninstall removes ours.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pre_commit_hook_refuses_commits_of_reserved_files() {
    let server = Server::start(Backend::Sqlite).await.unwrap();
    let repo = git_repo("git@github.com:acme/commits.git");
    let dir = repo.path();
    std::fs::create_dir_all(dir.join("src/auth")).unwrap();
    let (a, b) = (ClientEnv::new(&server.url()), ClientEnv::new(&server.url()));
    let payload =
        json!({"session_id": "conv-a", "cwd": dir, "hook_event_name": "SessionStart", "source": "startup"});
    let started = a.run_with_env(
        dir,
        &["hook", "claude", "SessionStart"],
        &payload.to_string(),
        &[("BATON_HOST", "far-away")],
    );
    assert_eq!(started.code, 0);
    let a_id = sessions_of(server.clients().await, "github.com/acme/commits").await.remove(0).id;
    let out = a.run(dir, &["reserve", "src/auth", "--reason", "auth rewrite", "--session", &a_id], "");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(a.run(dir, &["reservations", "settings", "--enforce", "deny"], "").code, 0);

    let init = b.run(dir, &["init", "claude", "--pre-commit"], "");
    assert_eq!(init.code, 0, "{}", init.stderr);
    assert!(init.stdout.contains("git pre-commit hook"), "{}", init.stdout);
    std::fs::write(dir.join("src/auth/jwt.rs"), "x\n").unwrap();
    git_in(&b, dir, &["add", "src/auth/jwt.rs"]);
    let refused = git_in(&b, dir, &["commit", "-q", "-m", "touches auth"]);
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "the commit went through: {said}");
    assert!(
        said.contains("refused this commit") && said.contains("auth rewrite") && said.contains("far-away"),
        "{said}"
    );
    assert!(said.contains("--no-verify"), "{said}");
    // Warn: the commit goes through, the warning on stderr.
    assert_eq!(a.run(dir, &["reservations", "settings", "--enforce", "warn"], "").code, 0);
    let warned = git_in(&b, dir, &["commit", "-q", "-m", "touches auth"]);
    assert!(warned.status.success(), "{warned:?}");
    assert!(String::from_utf8_lossy(&warned.stderr).contains("reserved by"), "{warned:?}");
    // A free file commits quietly, whatever the setting.
    assert_eq!(a.run(dir, &["reservations", "settings", "--enforce", "deny"], "").code, 0);
    std::fs::write(dir.join("free.txt"), "x\n").unwrap();
    git_in(&b, dir, &["add", "free.txt"]);
    let free = git_in(&b, dir, &["commit", "-q", "-m", "free"]);
    assert!(free.status.success() && free.stderr.is_empty(), "{free:?}");

    // Uninstall removes exactly ours; another pre-commit hook is never replaced.
    assert_eq!(b.run(dir, &["init", "claude", "--uninstall"], "").code, 0);
    assert!(!dir.join(".git/hooks/pre-commit").exists());
    std::fs::write(dir.join(".git/hooks/pre-commit"), "#!/bin/sh\nexit 0\n").unwrap();
    let init = b.run(dir, &["init", "claude", "--pre-commit"], "");
    assert!(
        init.stdout.contains("another pre-commit hook") && init.stdout.contains("pre-commit || exit 1"),
        "{}",
        init.stdout
    );
    assert_eq!(std::fs::read_to_string(dir.join(".git/hooks/pre-commit")).unwrap(), "#!/bin/sh\nexit 0\n");
}

/// Auto-reservations (a project's opt-in): a file the agent starts editing, and a task it
/// marks in progress, are reserved for its session; the finished task is released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_reservations_follow_the_agent() {
    let server = Server::start(Backend::Sqlite).await.unwrap();
    let repo = git_repo("git@github.com:acme/auto.git");
    let dir = repo.path();
    let a = ClientEnv::new(&server.url());
    start(&a, dir, "conv-a");
    assert_eq!(a.run(dir, &["reservations", "settings", "--auto", "on"], "").code, 0);
    let todo = |status: &str| {
        hook_payload(
            "conv-a",
            dir,
            "PostToolUse",
            "TodoWrite",
            &json!({"todos": [{"content": "Fix the login test", "status": status, "activeForm": "Fixing"}]}),
        )
    };
    assert_eq!(a.run(dir, &["hook", "claude", "PostToolUse"], &todo("in_progress")).code, 0);
    let edit = json!({"file_path": dir.join("src/login.rs"), "content": "x"});
    assert_eq!(pre(&a, dir, "claude", "conv-a", "Write", &edit), Value::Null, "its own: nothing to say");
    let held = parse(&a.run(dir, &["reservations", "--json"], "").stdout);
    let what: Vec<String> = held["reservations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["path"].as_str().or(r["task"].as_str()).unwrap_or_default().to_owned())
        .collect();
    assert!(
        what.contains(&"src/login.rs".to_owned()) && what.contains(&"Fix the login test".to_owned()),
        "{held}"
    );
    assert_eq!(a.run(dir, &["hook", "claude", "PostToolUse"], &todo("completed")).code, 0);
    let held = parse(&a.run(dir, &["reservations", "--json"], "").stdout);
    assert!(!held.to_string().contains("Fix the login test"), "the finished task is released: {held}");
}
