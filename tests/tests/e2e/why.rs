//! `baton why` and `baton log` through the real client and real git: commits made by an
//! agent's tool call, by the person between hooks and through the post-commit hook are linked
//! to their sessions; then a rebase, a cherry-pick, a merge commit and a squash merge of two
//! sessions' branches (the branches deleted and collected, the squash message naming no
//! session), `baton why` run on another machine names the right session for each line and
//! says how it matched, and "no session recorded" for lines no session wrote. A commit made
//! while two conversations share a worktree goes to the one whose call made it, else to both,
//! marked ambiguous. Bad input: each a clear message.

use std::path::Path;
use std::process::Command;

use baton_proto::v1::{CommitMadeBy, CommitSeenBy, FindCommitsRequest};
use baton_tests::{Backend, ClientEnv, Server, both};
use serde_json::{Value, json};

const ORIGIN: &str = "git@github.com:acme/why.git";
const PROJECT: &str = "github.com/acme/why";

/// Runs git in `dir` as `who` (author and committer), with the client's environment (the
/// post-commit hook runs `baton`).
fn git_as(dir: &Path, who: &str, env: &ClientEnv, args: &[&str]) -> String {
    let out = git_env(Command::new("git").args(args).current_dir(dir), who, env).output().unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The person commits from their own terminal: git in a process of its own, not under the
/// test (which plays the agent: the hooks it runs record it as the agent's process, and the
/// post-commit hook looks for that process above git).
fn person_commits(dir: &Path, env: &ClientEnv, message: &str) -> String {
    let done = dir.join(".git/person-done");
    let _ = std::fs::remove_file(&done);
    let script = format!(
        "(git commit -q -m {} > /dev/null 2>&1; echo $? > {}) &",
        shlex_quote(message),
        shlex_quote(&done.display().to_string())
    );
    git_env(Command::new("sh").args(["-c", &script]), "ann", env).current_dir(dir).status().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::fs::read_to_string(&done).map_or(true, |s| s.trim().is_empty()) {
        assert!(std::time::Instant::now() < deadline, "the person's commit did not finish");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(std::fs::read_to_string(&done).unwrap().trim(), "0", "the person's commit failed");
    git_as(dir, "ann", env, &["rev-parse", "HEAD"])
}

fn shlex_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

fn git_env<'a>(cmd: &'a mut Command, who: &str, env: &ClientEnv) -> &'a mut Command {
    cmd.env("GIT_AUTHOR_NAME", who)
        .env("GIT_AUTHOR_EMAIL", format!("{who}@x"))
        .env("GIT_COMMITTER_NAME", who)
        .env("GIT_COMMITTER_EMAIL", format!("{who}@x"))
        .env("HOME", env.home.path())
        .env("BATON_HOME", env.baton_home())
        .env("BATON_SERVER", &env.server)
        .env("USER", "dev")
}

fn new_repo(dir: &Path, env: &ClientEnv) {
    git_as(dir, "ann", env, &["init", "-q", "-b", "main"]);
    git_as(dir, "ann", env, &["remote", "add", "origin", ORIGIN]);
    git_as(dir, "ann", env, &["config", "user.email", "ann@x"]);
    std::fs::write(dir.join("README"), "the why project\n").unwrap();
    git_as(dir, "ann", env, &["add", "."]);
    git_as(dir, "ann", env, &["commit", "-q", "-m", "init"]);
}

fn hook(env: &ClientEnv, dir: &Path, event: &str, payload: &Value) {
    let out = env.run(dir, &["hook", "claude", event], &payload.to_string());
    assert_eq!(out.code, 0, "{event}: {}", out.stderr);
}

fn start(env: &ClientEnv, dir: &Path, sid: &str) {
    hook(
        env,
        dir,
        "SessionStart",
        &json!({"session_id": sid, "cwd": dir, "hook_event_name": "SessionStart", "source": "startup"}),
    );
}

fn prompt(env: &ClientEnv, dir: &Path, sid: &str, text: &str) {
    hook(
        env,
        dir,
        "UserPromptSubmit",
        &json!({"session_id": sid, "cwd": dir, "hook_event_name": "UserPromptSubmit", "prompt": text}),
    );
}

fn stop(env: &ClientEnv, dir: &Path, sid: &str) {
    hook(
        env,
        dir,
        "Stop",
        &json!({"session_id": sid, "cwd": dir, "hook_event_name": "Stop", "transcript_path": "/nonexistent.jsonl"}),
    );
}

/// An agent's shell call that commits: its pre- and post-tool hooks around `git commit`.
fn agent_commits(env: &ClientEnv, dir: &Path, sid: &str, message: &str) -> String {
    agent_commits_as("ann", env, dir, sid, message)
}

/// The same, committing as `who` (the repository's own committer).
fn agent_commits_as(who: &str, env: &ClientEnv, dir: &Path, sid: &str, message: &str) -> String {
    let input = json!({"command": format!("git commit -qam {message:?}")});
    let payload = |event: &str| json!({"session_id": sid, "cwd": dir, "hook_event_name": event, "tool_name": "Bash", "tool_input": input, "tool_response": {"stdout": ""}});
    hook(env, dir, "PreToolUse", &payload("PreToolUse"));
    git_as(dir, who, env, &["add", "-A"]);
    git_as(dir, who, env, &["commit", "-q", "-m", message]);
    hook(env, dir, "PostToolUse", &payload("PostToolUse"));
    git_as(dir, who, env, &["rev-parse", "HEAD"])
}

fn write(dir: &Path, file: &str, lines: &[&str]) {
    std::fs::write(dir.join(file), lines.join("\n") + "\n").unwrap();
}

fn why(env: &ClientEnv, dir: &Path, spec: &str) -> Value {
    let out = env.run(dir, &["why", spec, "--json"], "");
    assert_eq!(out.code, 0, "why {spec}: {}", out.stderr);
    serde_json::from_str(&out.stdout).unwrap()
}

/// The session and the way found of each line of `spec` (None: no session).
fn by_line(env: &ClientEnv, dir: &Path, spec: &str) -> Vec<(Option<String>, String)> {
    let answer = why(env, dir, spec);
    let mut out = Vec::new();
    for b in answer["blocks"].as_array().unwrap() {
        let first = b["first_line"].as_u64().unwrap();
        let last = b["last_line"].as_u64().unwrap();
        let session = b["found"]["link"]["session_id"].as_str().map(str::to_owned);
        let how = b["matched_by"].as_str().unwrap().to_owned();
        for _ in first..=last {
            out.push((session.clone(), how.clone()));
        }
    }
    out
}

async fn session_of(server: &Server, agent_session: &str) -> String {
    let c = server.clients().await;
    let sessions = crate::sessions_of(c, PROJECT).await;
    sessions.into_iter().find(|s| s.agent_session_id == agent_session).unwrap().id
}

async fn through_rebase_cherry_pick_and_squash(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let repo_a = tempfile::tempdir().unwrap();
    let a_dir = repo_a.path();
    let a = ClientEnv::new(&server.url());
    new_repo(a_dir, &a);
    let init = git_as(a_dir, "ann", &a, &["rev-parse", "HEAD"]);
    git_as(a_dir, "ann", &a, &["checkout", "-q", "-b", "feature"]);
    let out = a.run(a_dir, &["init", "claude", "--post-commit", "--no-mcp"], "");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("post-commit"), "{}", out.stdout);

    // Session A: the agent commits the parser by a tool call.
    start(&a, a_dir, "conv-a");
    prompt(&a, a_dir, "conv-a", "write the config parser");
    let parser = [
        "fn parse_config(text: &str) -> Config {",
        "    let mut config = Config::default();",
        "",
        "    config.apply(text);",
        "    config",
        "}",
    ];
    write(a_dir, "parser.rs", &parser);
    let agent_commit = agent_commits(&a, a_dir, "conv-a", "Add the config parser");
    // The person commits between the agent's hooks; the Stop hook sees it.
    write(a_dir, "util.rs", &["pub fn clamp_port(port: u32) -> u16 {", "    port.min(65535) as u16", "}"]);
    git_as(a_dir, "ann", &a, &["add", "util.rs"]);
    let person_commit = person_commits(a_dir, &a, "Add clamp_port");
    stop(&a, a_dir, "conv-a");
    let a_id = session_of(&server, "conv-a").await;

    // The links. The post-commit hook saw both commits first, as the person's (git ran
    // under the test, not under an agent's process); the agent's call then claimed its own.
    let mut c = server.clients().await;
    let request = FindCommitsRequest {
        project: PROJECT.into(),
        commit_ids: vec![agent_commit.clone(), person_commit.clone()],
        ..Default::default()
    };
    let found = c.commits.find_commits(request).await.unwrap().into_inner();
    let link = |commit: &str| {
        found.links.iter().map(|f| f.link.clone().unwrap()).find(|l| l.commit_id == commit).unwrap()
    };
    let agents = link(&agent_commit);
    assert_eq!(agents.session_id, a_id);
    assert_eq!(agents.made_by, CommitMadeBy::Agent as i32, "its call moved HEAD: {agents:?}");
    assert_eq!(agents.prompt, "write the config parser");
    assert_eq!(agents.files, vec!["parser.rs"]);
    assert!(!agents.patch_id.is_empty() && agents.lines == 4, "{agents:?}");
    let persons = link(&person_commit);
    assert_eq!(persons.made_by, CommitMadeBy::Person as i32);
    assert_eq!(persons.seen_by, CommitSeenBy::PostCommit as i32, "the post-commit hook saw it first");
    assert!(!persons.ambiguous);

    // Without the post-commit hook, the person's commit is seen between hooks.
    let out = a.run(a_dir, &["init", "claude", "--uninstall"], "");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!a_dir.join(".git/hooks/post-commit").exists());
    write(
        a_dir,
        "util.rs",
        &[
            "pub fn clamp_port(port: u32) -> u16 {",
            "    port.min(65535) as u16",
            "}",
            "pub const DEFAULT_PORT: u16 = 7437;",
        ],
    );
    git_as(a_dir, "ann", &a, &["add", "util.rs"]);
    let between = person_commits(a_dir, &a, "Add DEFAULT_PORT");
    prompt(&a, a_dir, "conv-a", "now document it");
    stop(&a, a_dir, "conv-a");
    let log = a.run(a_dir, &["log", "--session", &a_id, "--json"], "");
    assert_eq!(log.code, 0, "{}", log.stderr);
    let log: Value = serde_json::from_str(&log.stdout).unwrap();
    // Newest first by commit time (these three share a second).
    let mut subjects: Vec<&str> =
        log.as_array().unwrap().iter().map(|l| l["subject"].as_str().unwrap()).collect();
    subjects.sort_unstable();
    assert_eq!(subjects, ["Add DEFAULT_PORT", "Add clamp_port", "Add the config parser"], "{log}");
    let latest = log.as_array().unwrap().iter().find(|l| l["commit"] == between.as_str()).unwrap();
    assert_eq!(latest["made_by"], "person");
    let text = a.run(a_dir, &["log"], "");
    assert!(
        text.stdout.contains("Add the config parser") && text.stdout.contains("agent"),
        "{}",
        text.stdout
    );

    // Session B, on another machine, in its own clone: the agent writes b.rs.
    let repo_b = tempfile::tempdir().unwrap();
    let b_dir = repo_b.path();
    let b = ClientEnv::new(&server.url());
    git_as(b_dir, "bob", &b, &["clone", "-q", a_dir.to_str().unwrap(), "."]);
    git_as(b_dir, "bob", &b, &["remote", "set-url", "origin", ORIGIN]);
    git_as(b_dir, "bob", &b, &["config", "user.email", "bob@x"]);
    git_as(b_dir, "bob", &b, &["checkout", "-q", "-b", "feature-b", &init]);
    start(&b, b_dir, "conv-b");
    prompt(&b, b_dir, "conv-b", "add the retry helper");
    write(
        b_dir,
        "b.rs",
        &[
            "pub fn retry_with_backoff(tries: u32) {",
            "    for attempt in 0..tries {",
            "        sleep_for(attempt);",
            "    }",
            "}",
        ],
    );
    let b_commit = agent_commits_as("bob", &b, b_dir, "conv-b", "Add retry_with_backoff");
    let b_id = session_of(&server, "conv-b").await;
    git_as(a_dir, "ann", &a, &["fetch", "-q", b_dir.to_str().unwrap(), "feature-b:feature-b"]);

    // The plain answer: each line's own commit.
    let lines = by_line(&a, a_dir, "parser.rs");
    assert_eq!(lines.len(), 6);
    assert!(lines.iter().all(|(s, how)| s.as_deref() == Some(a_id.as_str()) && how == "commit"), "{lines:?}");
    let text = a.run(a_dir, &["why", "parser.rs:1-2"], "");
    assert!(
        text.stdout.contains("write the config parser") && text.stdout.contains("the agent"),
        "{}",
        text.stdout
    );
    assert!(text.stdout.contains(&format!("baton resume --session {a_id}")), "{}", text.stdout);
    let readme = by_line(&a, a_dir, "README");
    assert_eq!(readme, vec![(None, "no_session".to_owned())], "a line no session wrote");

    // main moves on; a rebase and a cherry-pick make new commits of the same changes.
    git_as(a_dir, "ann", &a, &["checkout", "-q", "main"]);
    write(a_dir, "NOTES", &["unrelated work on main"]);
    git_as(a_dir, "ann", &a, &["add", "NOTES"]);
    git_as(a_dir, "ann", &a, &["commit", "-q", "-m", "Notes"]);
    git_as(a_dir, "ann", &a, &["checkout", "-q", "-b", "rebased", "feature"]);
    git_as(a_dir, "ann", &a, &["rebase", "-q", "main"]);
    let rebased = by_line(&a, a_dir, "parser.rs");
    assert!(
        rebased.iter().all(|(s, how)| s.as_deref() == Some(a_id.as_str()) && how == "patch_id"),
        "{rebased:?}"
    );
    git_as(a_dir, "ann", &a, &["checkout", "-q", "-b", "picked", "main"]);
    git_as(a_dir, "ann", &a, &["cherry-pick", &b_commit]);
    let picked = by_line(&a, a_dir, "b.rs");
    assert!(
        picked.iter().all(|(s, how)| s.as_deref() == Some(b_id.as_str()) && how == "patch_id"),
        "{picked:?}"
    );

    // A merge commit: the merged lines keep their commits.
    git_as(a_dir, "ann", &a, &["checkout", "-q", "main"]);
    git_as(a_dir, "ann", &a, &["merge", "-q", "--no-ff", "feature", "-m", "Merge feature"]);
    let merged = by_line(&a, a_dir, "util.rs");
    assert!(
        merged.iter().all(|(s, how)| s.as_deref() == Some(a_id.as_str()) && how == "commit"),
        "{merged:?}"
    );
    git_as(a_dir, "ann", &a, &["reset", "-q", "--hard", "HEAD~1"]);

    // A squash merge of both sessions' branches into main, with a line the person changed
    // while squashing; the message names no session; every branch deleted and collected.
    git_as(a_dir, "ann", &a, &["checkout", "-q", "-b", "combo", "feature"]);
    git_as(a_dir, "ann", &a, &["merge", "-q", "--no-edit", "feature-b"]);
    git_as(a_dir, "ann", &a, &["checkout", "-q", "main"]);
    git_as(a_dir, "ann", &a, &["merge", "-q", "--squash", "combo"]);
    write(
        a_dir,
        "b.rs",
        &[
            "pub fn retry_with_backoff(tries: u32) {",
            "    for attempt in 0..tries {",
            "        sleep_for(attempt * 2);",
            "    }",
            "}",
        ],
    );
    git_as(a_dir, "ann", &a, &["add", "-A"]);
    git_as(a_dir, "ann", &a, &["commit", "-q", "-m", "Release 1.0"]);
    for branch in ["feature", "feature-b", "combo", "rebased", "picked"] {
        git_as(a_dir, "ann", &a, &["branch", "-q", "-D", branch]);
    }
    git_as(a_dir, "ann", &a, &["reflog", "expire", "--expire=now", "--all"]);
    git_as(a_dir, "ann", &a, &["gc", "-q", "--prune=now"]);
    let gone =
        Command::new("git").args(["cat-file", "-e", &agent_commit]).current_dir(a_dir).status().unwrap();
    assert!(!gone.success(), "the agent's commit is gone from the repository");

    // Asked on a third machine (no local records at all).
    let c_env = ClientEnv::new(&server.url());
    let parser_lines = by_line(&c_env, a_dir, "parser.rs");
    assert_eq!(parser_lines.len(), 6);
    assert!(
        parser_lines.iter().all(|(s, how)| s.as_deref() == Some(a_id.as_str()) && how == "line_fingerprints"),
        "the blank line and the brace take their neighbours' answer: {parser_lines:?}"
    );
    let util = by_line(&c_env, a_dir, "util.rs");
    assert!(util.iter().all(|(s, _)| s.as_deref() == Some(a_id.as_str())), "{util:?}");
    let b_lines = by_line(&c_env, a_dir, "b.rs");
    let expected_b: Vec<Option<&str>> = vec![Some(&b_id), Some(&b_id), None, Some(&b_id), Some(&b_id)];
    assert_eq!(b_lines.iter().map(|(s, _)| s.as_deref()).collect::<Vec<_>>(), expected_b, "{b_lines:?}");
    let answer = why(&c_env, a_dir, "b.rs:1");
    let found = &answer["blocks"][0]["found"];
    assert_eq!(found["original_commit"], b_commit, "{answer}");
    assert_eq!(found["context"]["prompt"], "add the retry helper");
    assert_eq!(found["session"]["id"], b_id, "{answer}");
    let text = c_env.run(a_dir, &["why", "b.rs"], "");
    assert!(
        text.stdout.contains("squash-merged") && text.stdout.contains("no session recorded"),
        "{}",
        text.stdout
    );
}
both!(through_rebase_cherry_pick_and_squash);

async fn a_shared_worktree(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let repo = tempfile::tempdir().unwrap();
    let dir = repo.path();
    let env = ClientEnv::new(&server.url());
    new_repo(dir, &env);
    start(&env, dir, "conv-1");
    start(&env, dir, "conv-2");
    let one = session_of(&server, "conv-1").await;
    let two = session_of(&server, "conv-2").await;

    // The person commits while both run: both get it, ambiguous.
    write(dir, "shared.rs", &["pub fn shared_helper() -> u32 {", "    42", "}"]);
    git_as(dir, "ann", &env, &["add", "shared.rs"]);
    person_commits(dir, &env, "Shared helper");
    stop(&env, dir, "conv-1");
    stop(&env, dir, "conv-2");
    let answer = why(&env, dir, "shared.rs:1");
    let found = &answer["blocks"][0]["found"];
    assert_eq!(found["link"]["ambiguous"], true, "{answer}");
    assert_eq!(found["also"].as_array().unwrap().len(), 1, "{answer}");
    let mut sessions =
        vec![found["link"]["session_id"].as_str().unwrap(), found["also"][0]["session_id"].as_str().unwrap()];
    sessions.sort_unstable();
    let mut expected = vec![one.as_str(), two.as_str()];
    expected.sort_unstable();
    assert_eq!(sessions, expected);
    let text = env.run(dir, &["why", "shared.rs:1"], "");
    assert!(text.stdout.contains("2 sessions were live"), "{}", text.stdout);

    // conv-2's call commits; conv-1 sees HEAD move at its next hook: only conv-2 keeps it.
    write(dir, "two.rs", &["pub fn made_by_two() {}"]);
    let commit = agent_commits(&env, dir, "conv-2", "Two's work");
    stop(&env, dir, "conv-1");
    let mut c = server.clients().await;
    let request =
        FindCommitsRequest { project: PROJECT.into(), commit_ids: vec![commit], ..Default::default() };
    let found = c.commits.find_commits(request).await.unwrap().into_inner();
    assert_eq!(found.links.len(), 1, "{found:?}");
    assert_eq!(found.links[0].link.as_ref().unwrap().session_id, two);
    assert_eq!(found.links[0].link.as_ref().unwrap().made_by, CommitMadeBy::Agent as i32);
}
both!(a_shared_worktree);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_told_clearly() {
    let server = Server::start(Backend::Sqlite).await.unwrap();
    let repo = tempfile::tempdir().unwrap();
    let dir = repo.path();
    let env = ClientEnv::new(&server.url());
    new_repo(dir, &env);
    std::fs::write(dir.join("blob.bin"), [0u8, 159, 146, 150, 0, 1]).unwrap();
    git_as(dir, "ann", &env, &["add", "blob.bin"]);
    git_as(dir, "ann", &env, &["commit", "-q", "-m", "binary"]);
    std::fs::write(dir.join("untracked.txt"), "not added\n").unwrap();
    let outside = tempfile::tempdir().unwrap();
    let fails = |args: &[&str], expect: &str| {
        let out = env.run(dir, args, "");
        assert_ne!(out.code, 0, "{args:?} should fail: {}", out.stdout);
        assert!(out.stderr.contains(expect), "{args:?}: {}", out.stderr);
    };
    fails(&["why", "../../etc/passwd"], "outside");
    fails(&["why", "README:5"], "has 1 lines: line 5 is past its end");
    fails(&["why", "README:0"], "counted from 1");
    fails(&["why", "README:3-2"], "comes before");
    fails(&["why", "untracked.txt"], "not in git");
    fails(&["why", "nothing.rs"], "no such file");
    fails(&["why", "blob.bin"], "binary file");
    let out = env.run(outside.path(), &["why", "x.rs"], "");
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("not in a git repository"), "{}", out.stderr);
    // A repository the hub has no links for: every line says so.
    let lines = by_line(&env, dir, "README");
    assert_eq!(lines, vec![(None, "no_session".to_owned())]);
    let log = env.run(dir, &["log", "--all"], "");
    assert_eq!(log.code, 0, "{}", log.stderr);
    assert!(log.stdout.contains("no commits recorded"), "{}", log.stdout);
}

/// A prompt longer than the hub keeps (in bytes, of characters of two bytes) still links the
/// commit, clipped; a teammate's commit a `git pull` brings in during the agent's call is not
/// the session's, while the agent's own commit in the same call is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_prompts_and_pulled_commits() {
    let server = Server::start(Backend::Sqlite).await.unwrap();
    let upstream = tempfile::tempdir().unwrap();
    let up = upstream.path();
    let env = ClientEnv::new(&server.url());
    new_repo(up, &env);
    let mine = tempfile::tempdir().unwrap();
    let dir = mine.path();
    git_as(dir, "ann", &env, &["clone", "-q", up.to_str().unwrap(), "."]);
    git_as(dir, "ann", &env, &["remote", "set-url", "origin", ORIGIN]);
    git_as(dir, "ann", &env, &["remote", "add", "up", up.to_str().unwrap()]);
    git_as(dir, "ann", &env, &["config", "user.email", "ann@x"]);
    start(&env, dir, "conv-long");
    prompt(&env, dir, "conv-long", &"é".repeat(3000));
    // Bob pushes upstream; the agent's one call pulls it and commits its own work.
    write(up, "bob.rs", &["pub fn bobs_feature() {}"]);
    git_as(up, "bob", &env, &["add", "bob.rs"]);
    git_as(up, "bob", &env, &["commit", "-q", "-m", "Bob's feature"]);
    let bobs = git_as(up, "bob", &env, &["rev-parse", "HEAD"]);
    let call = json!({"command": "git pull up main && git commit -qam 'Mine'"});
    let payload = |event: &str| json!({"session_id": "conv-long", "cwd": dir, "hook_event_name": event, "tool_name": "Bash", "tool_input": call, "tool_response": {"stdout": ""}});
    hook(&env, dir, "PreToolUse", &payload("PreToolUse"));
    git_as(dir, "ann", &env, &["pull", "-q", "--ff-only", "up", "main"]);
    write(dir, "mine.rs", &["pub fn my_feature() {}"]);
    git_as(dir, "ann", &env, &["add", "mine.rs"]);
    git_as(dir, "ann", &env, &["commit", "-q", "-m", "Mine"]);
    let my_commit = git_as(dir, "ann", &env, &["rev-parse", "HEAD"]);
    hook(&env, dir, "PostToolUse", &payload("PostToolUse"));
    let mut c = server.clients().await;
    let request = FindCommitsRequest {
        project: PROJECT.into(),
        commit_ids: vec![my_commit, bobs],
        ..Default::default()
    };
    let found = c.commits.find_commits(request).await.unwrap().into_inner();
    assert_eq!(found.links.len(), 1, "only the agent's own commit: {found:?}");
    let link = found.links[0].link.clone().unwrap();
    assert_eq!(link.subject, "Mine");
    assert!(
        link.prompt.len() <= 4000 && link.prompt.starts_with("éé") && link.prompt.ends_with('…'),
        "{}",
        link.prompt.len()
    );
}
