//! Commit links with a real agent: Claude Code writes a file and commits it through its own
//! shell (Bash), with git's post-commit hook installed; the hook finds the agent above git
//! (process ancestry) and links the commit to the conversation's session as the agent's, its
//! prompt with it. Then the model asks the `why` MCP tool about the file and receives that
//! answer; `baton why` on the machine says the same.

use baton_proto::v1::{CommitMadeBy, CommitSeenBy, FindCommitsRequest};
use baton_tests::agents::{self, Machine};
use baton_tests::fake_model::{FakeModel, Script, Step};
use baton_tests::{Backend, Server};
use serde_json::json;

use crate::checked;

const ORIGIN: &str = "https://github.com/acme/claude-why.git";
const PROJECT: &str = "github.com/acme/claude-why";
const PROMPT: &str = "Add a retry helper and commit it";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_commit_is_linked_and_explained() {
    let Some(cli) = agents::cli("claude") else { return };
    let server = Server::start(Backend::Sqlite).await.unwrap();
    let m = Machine::new("machine-1", &server.url(), ORIGIN);
    let init = m.baton(&["init", "claude", "--post-commit"]);
    assert!(init.code == 0 && init.stdout.contains("post-commit"), "{init:?}");
    let file = m.repo.join("src/retry.rs");
    std::fs::create_dir_all(m.repo.join("src")).unwrap();
    let model = FakeModel::start(Script::new(vec![
        Step::tool(
            "Write",
            json!({"file_path": file.display().to_string(), "content": "pub fn retry_with_backoff(tries: u32) -> u32 {\n    tries * 2\n}\n"}),
        ),
        Step::tool(
            "Bash",
            json!({"command": "git add src/retry.rs && git commit -q -m 'Add retry_with_backoff'", "description": "commit"}),
        ),
        Step::tool("mcp__baton__why", json!({"file": "src/retry.rs", "first_line": 1})),
        Step::text("Committed and explained. WHY-DONE"),
    ]))
    .await
    .unwrap();
    let args = ["-p", PROMPT, "--dangerously-skip-permissions", "--output-format", "json"];
    let run = m.agent(&cli, &model.url(), &args, &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("WHY-DONE"), "{run:?}");

    let head =
        std::process::Command::new("git").args(["rev-parse", "HEAD"]).current_dir(&m.repo).output().unwrap();
    let head = String::from_utf8_lossy(&head.stdout).trim().to_owned();
    let mut c = server.clients().await;
    let request =
        FindCommitsRequest { project: PROJECT.into(), commit_ids: vec![head.clone()], ..Default::default() };
    let found = c.commits.find_commits(request).await.unwrap().into_inner();
    assert_eq!(found.links.len(), 1, "{found:?}");
    let link = found.links[0].link.clone().unwrap();
    assert_eq!(link.made_by, CommitMadeBy::Agent as i32, "{link:?}");
    assert_eq!(
        link.seen_by,
        CommitSeenBy::PostCommit as i32,
        "the post-commit hook found the agent above git: {link:?}"
    );
    assert_eq!(link.prompt, PROMPT);
    assert_eq!(link.files, vec!["src/retry.rs"]);
    assert!(link.lines >= 2 && !link.patch_id.is_empty(), "{link:?}");
    let session = &found.sessions[0];
    assert_eq!((session.id.as_str(), session.host.as_str()), (link.session_id.as_str(), "machine-1"));

    // The model read why the line is there before the run ended.
    let turns = model.turns();
    let after_why = turns[3].text();
    assert!(
        after_why.contains("its commit was recorded in the session") && after_why.contains("the agent"),
        "{after_why}"
    );
    assert!(after_why.contains(PROMPT), "{after_why}");
    let why = m.baton(&["why", "src/retry.rs"]);
    assert_eq!(why.code, 0, "{why:?}");
    assert!(why.stdout.contains(&link.session_id) && why.stdout.contains(PROMPT), "{}", why.stdout);
    checked(
        "claude",
        &[
            "a commit through its Bash tool linked by the post-commit hook (agent found above git) with its prompt; the why MCP tool's answer reached the model",
        ],
    );
}
