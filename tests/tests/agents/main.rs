//! The agent edge, proven with the real CLIs: Claude Code, Codex and Gemini CLI (pinned in
//! `baton_proto::agent::COVERED`, installed from npm on first use) run offline against the
//! fake model with Baton's hooks installed by `baton init`, on simulated machines. Each test
//! asserts what Baton stored and what the model received, and prints what it checked.

#![allow(clippy::unwrap_used, clippy::expect_used)]
// test code: a failure should panic loudly
// The pedantic lints that do not fit test code, each with its reason: a helper that fails
// panics, as the test must; counts and sizes here are small and known, so casts between
// integer widths are plain; a scenario names its clients `a`, `b`, `c`; an import is placed
// beside the step that needs it; and a scenario reads as one story, step after step (the
// helpers it calls are held to 80 lines like all code).
#![allow(
    clippy::missing_panics_doc,
    clippy::cast_possible_wrap,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::many_single_char_names,
    clippy::items_after_statements,
    clippy::too_many_lines
)]

mod claude;
pub mod codex;
pub mod gemini;
mod mcp;
mod reserve;
mod summary;
mod why;

use baton_proto::v1::{Checkpoint, GetCheckpointRequest, ListSessionsRequest, Session};
use baton_tests::Clients;

/// Every session of the project, newest first.
pub async fn sessions(c: &mut Clients, project: &str) -> Vec<Session> {
    c.sessions
        .list_sessions(ListSessionsRequest { project: project.into(), ..Default::default() })
        .await
        .expect("list sessions")
        .into_inner()
        .sessions
}

/// The project's newest session once it is completed (SessionEnd's work is detached from
/// the agent): panics after 20 s.
pub async fn until_ended(c: &mut Clients, project: &str) -> Session {
    until_ended_within(c, project, 20).await
}

/// `until_ended`, waiting at most `seconds`.
pub async fn until_ended_within(c: &mut Clients, project: &str, seconds: u64) -> Session {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
    loop {
        let newest = sessions(c, project).await.into_iter().next();
        if let Some(s) = newest.filter(|s| s.status == baton_proto::v1::SessionStatus::Completed as i32) {
            return s;
        }
        assert!(std::time::Instant::now() < deadline, "no completed session in {project} after {seconds} s");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// A session's head checkpoint, with its state.
pub async fn head(c: &mut Clients, session: &Session) -> Checkpoint {
    assert!(!session.head_checkpoint_id.is_empty(), "session {} has no checkpoint", session.id);
    c.checkpoints
        .get_checkpoint(GetCheckpointRequest {
            checkpoint_id: session.head_checkpoint_id.clone(),
            include_payload: false,
        })
        .await
        .expect("get checkpoint")
        .into_inner()
        .checkpoint
        .expect("a checkpoint")
}

/// A session's checkpoints, oldest first, with their states.
pub async fn checkpoints(c: &mut Clients, session: &Session) -> Vec<Checkpoint> {
    c.checkpoints
        .list_checkpoints(baton_proto::v1::ListCheckpointsRequest {
            session_id: session.id.clone(),
            include_state: true,
            page_size: 1000,
            ..Default::default()
        })
        .await
        .expect("list checkpoints")
        .into_inner()
        .checkpoints
}

/// Reports what a test checked, per agent: on stderr, and appended to
/// `target/tmp/agents-report.txt`, which `.ci/run` prints after the tests (a passing test's
/// output is captured).
pub fn checked(agent: &str, what: &[&str]) {
    use std::io::Write as _;
    let line = format!("agents: {agent} ({}): checked {}", version(agent), what.join("; "));
    eprintln!("{line}");
    let report = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("agents-report.txt");
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(report) {
        let _ = writeln!(f, "{line}");
    }
}

fn version(agent: &str) -> &'static str {
    baton_proto::agent::COVERED.iter().find(|c| c.agent == agent).map_or("?", |c| c.version)
}
