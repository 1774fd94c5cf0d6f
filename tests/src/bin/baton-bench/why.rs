//! `baton why FILE` next to plain `git blame` of the same file: a generated repository whose
//! 2,000-line file comes from 200 commits of 20 sessions, each commit made by a session's
//! shell call between its real hooks (so the links are the ones the client records). Both
//! are timed as processes, end to end; `baton why` asks the hub once for every commit, patch
//! id and line of the file.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use baton_tests::{ClientEnv, Server};
use serde_json::{Value, json};

use crate::Row;
use crate::stats::ms;

const SESSIONS: usize = 20;
const COMMITS_PER_SESSION: usize = 10;
const LINES_PER_COMMIT: usize = 10;
const FILE: &str = "src/generated.rs";

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.com")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.com")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

fn hook(env: &ClientEnv, dir: &Path, event: &str, payload: &Value) {
    let out = env.run(dir, &["hook", "claude", event], &payload.to_string());
    assert_eq!(out.code, 0, "{event}: {}", out.stderr);
}

/// The repository: each session's conversation starts, then commits its lines through its
/// shell calls, ten commits each.
fn generate(env: &ClientEnv, dir: &Path) {
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["remote", "add", "origin", "https://github.com/bench/why.git"]);
    git(dir, &["config", "user.email", "bench@example.com"]);
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(dir.join("README"), "bench\n").unwrap();
    git(dir, &["add", "."]);
    git(dir, &["commit", "-q", "-m", "start"]);
    let mut text = String::new();
    for s in 0..SESSIONS {
        let sid = format!("bench-conversation-{s}");
        hook(
            env,
            dir,
            "SessionStart",
            &json!({"session_id": sid, "cwd": dir, "hook_event_name": "SessionStart", "source": "startup"}),
        );
        let prompt = format!("write part {s} of the generated module");
        hook(
            env,
            dir,
            "UserPromptSubmit",
            &json!({"session_id": sid, "cwd": dir, "hook_event_name": "UserPromptSubmit", "prompt": prompt}),
        );
        for c in 0..COMMITS_PER_SESSION {
            let n = s * COMMITS_PER_SESSION + c;
            for l in 0..LINES_PER_COMMIT {
                let _ = writeln!(text, "    let value_{n}_{l} = compute({n}, {l}); // part {s}");
            }
            std::fs::write(dir.join(FILE), &text).unwrap();
            let call = json!({"command": format!("git commit -qam 'Part {n}'")});
            let payload = |event: &str| json!({"session_id": sid, "cwd": dir, "hook_event_name": event, "tool_name": "Bash", "tool_input": call, "tool_response": {"stdout": ""}});
            hook(env, dir, "PreToolUse", &payload("PreToolUse"));
            git(dir, &["add", FILE]);
            git(dir, &["commit", "-q", "-m", &format!("Part {n}")]);
            hook(env, dir, "PostToolUse", &payload("PostToolUse"));
        }
    }
}

fn timed(n: usize, mut run: impl FnMut()) -> Vec<Duration> {
    let mut took: Vec<Duration> = (0..n)
        .map(|_| {
            let started = Instant::now();
            run();
            started.elapsed()
        })
        .collect();
    took.sort();
    took
}

fn pct(took: &[Duration], q: f64) -> Duration {
    took[((took.len() as f64 - 1.0) * q).round() as usize]
}

pub fn row(server: &Server, quick: bool) -> Row {
    let env = ClientEnv::new(&server.url());
    let repo = tempfile::tempdir().unwrap();
    let dir = repo.path();
    let started = Instant::now();
    generate(&env, dir);
    eprintln!(
        "  generated {} commits of {SESSIONS} sessions in {:.1} s",
        SESSIONS * COMMITS_PER_SESSION,
        started.elapsed().as_secs_f64()
    );

    // What it answers: every line found by its own commit, 20 sessions.
    let out = env.run(dir, &["why", FILE, "--json"], "");
    assert_eq!(out.code, 0, "baton why: {}", out.stderr);
    let answer: Value = serde_json::from_str(&out.stdout).unwrap();
    let blocks = answer["blocks"].as_array().unwrap();
    let lines: u64 =
        blocks.iter().map(|b| b["last_line"].as_u64().unwrap() - b["first_line"].as_u64().unwrap() + 1).sum();
    assert_eq!(lines as usize, SESSIONS * COMMITS_PER_SESSION * LINES_PER_COMMIT);
    assert!(blocks.iter().all(|b| b["matched_by"] == "commit"), "every line by its commit");
    let sessions: std::collections::HashSet<&str> =
        blocks.iter().filter_map(|b| b["found"]["link"]["session_id"].as_str()).collect();
    assert_eq!(sessions.len(), SESSIONS);

    let n = if quick { 5 } else { 30 };
    // Warm the page cache and the hub's connections alike.
    let blame = || {
        let out = Command::new("git")
            .args(["blame", "--line-porcelain", "--", FILE])
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(out.status.success());
    };
    let why = || {
        let out = env.run(dir, &["why", FILE], "");
        assert_eq!(out.code, 0, "{}", out.stderr);
    };
    blame();
    why();
    let blamed = timed(n, blame);
    let explained = timed(n, why);
    let (b50, w50) = (pct(&blamed, 0.5), pct(&explained, 0.5));
    let over = w50.saturating_sub(b50);
    Row {
        scenario: format!(
            "`baton why` of a 2,000-line file from 200 commits of 20 sessions ({n} runs each, as processes)"
        ),
        baton: format!("p50 {} · p99 {}", ms(w50), ms(pct(&explained, 0.99))),
        floor: format!("git blame p50 {} · p99 {}", ms(b50), ms(pct(&blamed, 0.99))),
        ratio: format!("+{} (p50)", ms(over)),
        target: "≤ git blame + 200 ms (p50)".into(),
        met: Some(over <= Duration::from_millis(200)),
    }
}
