//! CommitService through gRPC: links recorded (a revision and an event each, none for a
//! repeat), a person's ambiguous links dropped when an agent's call is known to have made the
//! commit, found by commit, patch id and line fingerprints in one call with their session and
//! context (the checkpoint before, decisions of the next; the session's latest when retention
//! pruned the one before), listed by session and paged, access and bad input.

use baton_proto::v1::{
    CheckpointKind, CheckpointState, CommitLink, CommitMadeBy, CommitSeenBy, CreateCheckpointRequest,
    Decision, EventKind, FindCommitsRequest, FindCommitsResponse, ListCommitsRequest, NewCommitLink,
    PruneRequest, RecordCommitsRequest, RecordCommitsResponse, Task, event,
};
use baton_tests::{Backend, Clients, Server, both};
use tonic::Code;

use crate::access::{token, with};
use crate::{all_events, assert_gapless, code, project, start_session, write};

const HUNDRED_DAYS_US: i64 = 100 * 86_400_000_000;

/// A made-up object name or fingerprint of `len` hex digits, the same for the same seed.
fn hex(seed: &str, len: usize) -> String {
    use sha2::Digest as _;
    let mut out = hex::encode(sha2::Sha256::digest(seed.as_bytes()));
    out.truncate(len);
    out
}

fn link(commit: &str, session: &str, made_by: CommitMadeBy) -> CommitLink {
    CommitLink {
        commit_id: hex(commit, 40),
        session_id: session.into(),
        patch_id: hex(&format!("patch {commit}"), 40),
        made_by: made_by as i32,
        seen_by: if made_by == CommitMadeBy::Agent {
            CommitSeenBy::ToolCall as i32
        } else {
            CommitSeenBy::BetweenHooks as i32
        },
        branch: "feature".into(),
        subject: format!("commit {commit}"),
        committed_at: Some(prost_types::Timestamp { seconds: 1_800_000_000, nanos: 0 }),
        files: vec!["src/lib.rs".into()],
        prompt: "make the fetcher retry".into(),
        task: "Add retries".into(),
        ..Default::default()
    }
}

fn new(link: CommitLink, lines: &[&str]) -> NewCommitLink {
    NewCommitLink {
        link: Some(link),
        line_fingerprints: lines.iter().map(|l| hex(l, 16)).collect(),
        lines_truncated: false,
    }
}

async fn record(c: &mut Clients, p: &str, links: Vec<NewCommitLink>) -> RecordCommitsResponse {
    let request = RecordCommitsRequest { project: p.into(), links, write: write() };
    c.commits.record_commits(request).await.unwrap().into_inner()
}

async fn find(
    c: &mut Clients,
    p: &str,
    commits: &[String],
    patches: &[String],
    lines: &[&str],
) -> FindCommitsResponse {
    let request = FindCommitsRequest {
        project: p.into(),
        commit_ids: commits.to_vec(),
        patch_ids: patches.to_vec(),
        line_fingerprints: lines.iter().map(|l| hex(l, 16)).collect(),
    };
    c.commits.find_commits(request).await.unwrap().into_inner()
}

async fn checkpoint(c: &mut Clients, session: &str, prompt: &str, decisions: &[&str]) -> String {
    let state = CheckpointState {
        last_prompt: prompt.into(),
        active_tasks: vec![Task {
            content: "Add retries".into(),
            status: "in_progress".into(),
            ..Default::default()
        }],
        decisions: decisions
            .iter()
            .map(|d| Decision {
                decision: (*d).into(),
                rationale: format!("because of {d}"),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    let request = CreateCheckpointRequest {
        session_id: session.into(),
        kind: CheckpointKind::Manual as i32,
        reason: "test".into(),
        state: Some(state),
        write: write(),
        ..Default::default()
    };
    c.checkpoints.create_checkpoint(request).await.unwrap().into_inner().checkpoint.unwrap().id
}

async fn record_find_and_context(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let a = start_session(&mut c, &p).await.id;
    let b = start_session(&mut c, &p).await.id;
    let before = checkpoint(&mut c, &a, "retry on 503", &["retry only GETs"]).await;

    let mut one = link("one", &a, CommitMadeBy::Agent);
    one.checkpoint_id = before.clone();
    one.prompt = String::new();
    let reply = record(&mut c, &p, vec![new(one, &["fn retry()", "let tries = 3;"])]).await;
    let rev = reply.result.unwrap().revision;
    assert!(rev > 0);
    assert_eq!(reply.links[0].lines, 2);
    assert_eq!(reply.links[0].revision, rev);
    let after = checkpoint(&mut c, &a, "and log them", &["retry only GETs", "log each retry"]).await;

    // The same link again: nothing changes, no revision.
    let mut again = link("one", &a, CommitMadeBy::Person);
    again.prompt = String::new();
    let reply = record(&mut c, &p, vec![new(again, &[])]).await;
    assert!(reply.result.is_none(), "a repeat writes nothing");
    assert_eq!(reply.links[0].made_by, CommitMadeBy::Agent as i32, "the stored link stands");

    // A person's commit while both sessions were live: linked to each, ambiguous; then one
    // session's call is known to have made it: the other's link goes.
    let mut amb_a = link("two", &a, CommitMadeBy::Person);
    amb_a.ambiguous = true;
    let mut amb_b = link("two", &b, CommitMadeBy::Person);
    amb_b.ambiguous = true;
    record(&mut c, &p, vec![new(amb_a, &["shared line"]), new(amb_b, &["shared line"])]).await;
    let found = find(&mut c, &p, &[hex("two", 40)], &[], &[]).await;
    assert_eq!(found.links.len(), 2);
    assert!(found.links.iter().all(|f| f.link.as_ref().unwrap().ambiguous));
    let claim = record(&mut c, &p, vec![new(link("two", &b, CommitMadeBy::Agent), &[])]).await;
    assert!(!claim.links[0].ambiguous && claim.links[0].made_by == CommitMadeBy::Agent as i32);
    let found = find(&mut c, &p, &[hex("two", 40)], &[], &["shared line"]).await;
    assert_eq!(found.links.len(), 1);
    assert_eq!(found.links[0].link.as_ref().unwrap().session_id, b);
    assert_eq!(found.fingerprints.len(), 1, "the line's fingerprint leads to b's link only");

    // One call: by commit, by patch id (a rebase), by line fingerprint (a squash).
    let found = find(&mut c, &p, &[hex("nothing", 40)], &[hex("patch one", 40)], &["let tries = 3;"]).await;
    assert_eq!(found.links.len(), 1);
    let f = &found.links[0];
    let l = f.link.as_ref().unwrap();
    assert_eq!(l.commit_id, hex("one", 40));
    assert_eq!(l.files, vec!["src/lib.rs"]);
    let ctx = f.context.as_ref().unwrap();
    assert!(!ctx.checkpoint_gone);
    assert_eq!(ctx.prompt, "retry on 503", "the checkpoint's prompt when the link has none");
    assert_eq!(ctx.tasks[0].content, "Add retries");
    let decisions: Vec<&str> = ctx.decisions.iter().map(|d| d.decision.as_str()).collect();
    assert_eq!(decisions, ["retry only GETs", "log each retry"], "the next checkpoint's decisions too");
    assert_eq!(found.fingerprints[0].fingerprint, hex("let tries = 3;", 16));
    assert_eq!(found.fingerprints[0].links, vec![0]);
    assert_eq!(found.sessions.len(), 1);
    assert_eq!(found.sessions[0].id, a);
    assert!(found.as_of_revision >= rev);

    // Nothing matches: an empty answer, not an error.
    let none = find(&mut c, &p, &[hex("zzz", 40)], &[], &["no such line"]).await;
    assert!(none.links.is_empty() && none.fingerprints.is_empty() && !none.truncated);

    // Retention prunes the checkpoint before the commit: the link stays, its context says so
    // and shows the session's latest.
    for id in [&before, &after] {
        server
            .execute(&format!(
                "UPDATE checkpoints SET created_us = created_us - {HUNDRED_DAYS_US} WHERE id = '{id}'"
            ))
            .await
            .unwrap();
    }
    let pruned = PruneRequest {
        project: p.clone(),
        keep_days: Some(30),
        keep_ancestors: Some(0),
        ..Default::default()
    };
    c.admin.prune(pruned).await.unwrap();
    let found = find(&mut c, &p, &[hex("one", 40)], &[], &[]).await;
    let ctx = found.links[0].context.as_ref().unwrap();
    assert!(ctx.checkpoint_gone);
    assert_eq!(ctx.decisions.len(), 2, "the latest checkpoint's decisions");

    // Every write an event, gapless; the commit events carry the links.
    let events = all_events(&mut c, &p).await;
    assert_gapless(&events);
    let commits: Vec<_> = events.iter().filter(|e| e.kind == EventKind::CommitsChanged as i32).collect();
    assert_eq!(commits.len(), 3, "one, two (both sessions), b's claim");
    let Some(event::Value::Commits(last)) = &commits[2].value else { panic!("no commits value") };
    assert_eq!(last.removed.len(), 1);
    assert_eq!(last.removed[0].session_id, a);

    // Retention keeps links by default (the prune above ran with the server's 0); with
    // --commit-link-days, those recorded before go, with an event naming them.
    server
        .execute(&format!(
            "UPDATE commit_links SET created_us = created_us - {HUNDRED_DAYS_US} WHERE commit_id = '{}'",
            hex("one", 40)
        ))
        .await
        .unwrap();
    let dry =
        PruneRequest { project: p.clone(), commit_link_days: Some(30), dry_run: true, ..Default::default() };
    let report = c.admin.prune(dry).await.unwrap().into_inner();
    assert_eq!(report.projects[0].removed_commit_links, 1);
    assert_eq!(
        find(&mut c, &p, &[hex("one", 40)], &[], &[]).await.links.len(),
        1,
        "a dry run removes nothing"
    );
    let (ok, out, err) = server.admin_command(&["prune", "--project", &p, "--commit-link-days", "30"]);
    assert!(ok, "{err}");
    assert!(out.contains("removed 1 commit links recorded more than 30 days ago"), "{out}");
    let found = find(&mut c, &p, &[hex("one", 40)], &[], &["let tries = 3;"]).await;
    assert!(found.links.is_empty() && found.fingerprints.is_empty(), "{found:?}");
    assert_eq!(find(&mut c, &p, &[hex("two", 40)], &[], &[]).await.links.len(), 1, "a young link stays");
    let events = all_events(&mut c, &p).await;
    assert_gapless(&events);
    let Some(event::Value::Commits(gone)) = &events.last().unwrap().value else { panic!("no commits value") };
    assert_eq!(gone.removed[0].commit_id, hex("one", 40));
}
both!(record_find_and_context);

async fn list_pages_and_refusals(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let admin = token(&server, &["create", "--name", "admin", "--role", "admin"]);
    let reader = token(&server, &["create", "--name", "reader", "--role", "reader"]);
    let other = token(
        &server,
        &["create", "--name", "other", "--role", "writer", "--project", "github.com/else/where"],
    );
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await; // past the "no tokens yet" cache
    let mut c = server.clients().await;
    let p = project();
    let session = {
        let request = baton_proto::v1::StartSessionRequest {
            project: p.clone(),
            agent: baton_proto::v1::AgentKind::ClaudeCode as i32,
            write: write(),
            ..Default::default()
        };
        c.sessions.start_session(with(request, &admin)).await.unwrap().into_inner().session.unwrap().id
    };
    for i in 0..25 {
        let mut l = link(&format!("c{i}"), &session, CommitMadeBy::Agent);
        l.committed_at = Some(prost_types::Timestamp { seconds: 1_800_000_000 + i, nanos: 0 });
        let request = RecordCommitsRequest { project: p.clone(), links: vec![new(l, &[])], write: write() };
        c.commits.record_commits(with(request, &admin)).await.unwrap();
    }
    let mut seen = Vec::new();
    let mut token_ = String::new();
    loop {
        let request = ListCommitsRequest {
            project: p.clone(),
            session_id: session.clone(),
            limit: 10,
            page_token: token_.clone(),
        };
        let page = c.commits.list_commits(with(request, &admin)).await.unwrap().into_inner();
        seen.extend(page.links.into_iter().map(|l| l.subject));
        if page.next_page_token.is_empty() {
            break;
        }
        token_ = page.next_page_token;
    }
    let expected: Vec<String> = (0..25).rev().map(|i| format!("commit c{i}")).collect();
    assert_eq!(seen, expected, "newest first, each once");

    // A reader may find but not record; a token of another project finds nothing of it.
    let request = RecordCommitsRequest {
        project: p.clone(),
        links: vec![new(link("x", &session, CommitMadeBy::Agent), &[])],
        write: write(),
    };
    assert_eq!(code(c.commits.record_commits(with(request, &reader)).await).0, Code::PermissionDenied);
    let request =
        FindCommitsRequest { project: p.clone(), commit_ids: vec![hex("c1", 40)], ..Default::default() };
    let (status, _) = code(c.commits.find_commits(with(request, &other)).await);
    assert!(matches!(status, Code::NotFound | Code::PermissionDenied), "{status:?}");

    // Bad input: each a clear INVALID_ARGUMENT naming the field, or NOT_FOUND for a session
    // the project does not have.
    let bad = |l: CommitLink, lines: Vec<String>| RecordCommitsRequest {
        project: p.clone(),
        links: vec![NewCommitLink { link: Some(l), line_fingerprints: lines, lines_truncated: false }],
        write: write(),
    };
    let mut short = link("s", &session, CommitMadeBy::Agent);
    short.commit_id = "abc123".into();
    let (status, message) = code(c.commits.record_commits(with(bad(short, vec![]), &admin)).await);
    assert_eq!(status, Code::InvalidArgument);
    assert!(message.contains("links[0].link.commit_id") && message.contains("40 or 64 hex"), "{message}");
    let unset = CommitLink { made_by: 0, ..link("s", &session, CommitMadeBy::Agent) };
    let (status, message) = code(c.commits.record_commits(with(bad(unset, vec![]), &admin)).await);
    assert_eq!(status, Code::InvalidArgument, "{message}");
    let fine = link("s", &session, CommitMadeBy::Agent);
    let (status, message) =
        code(c.commits.record_commits(with(bad(fine.clone(), vec!["xyz".into()]), &admin)).await);
    assert_eq!(status, Code::InvalidArgument);
    assert!(message.contains("line_fingerprints[0]"), "{message}");
    let stranger = CommitLink { session_id: uuid::Uuid::now_v7().to_string(), ..fine };
    let (status, message) = code(c.commits.record_commits(with(bad(stranger, vec![]), &admin)).await);
    assert_eq!(status, Code::NotFound, "{message}");
    let empty = RecordCommitsRequest { project: p.clone(), links: vec![], write: write() };
    assert_eq!(code(c.commits.record_commits(with(empty, &admin)).await).0, Code::InvalidArgument);
    let request =
        FindCommitsRequest { project: p.clone(), patch_ids: vec!["nope".into()], ..Default::default() };
    let (status, message) = code(c.commits.find_commits(with(request, &admin)).await);
    assert_eq!(status, Code::InvalidArgument);
    assert!(message.contains("patch_ids[0]"), "{message}");
    let request =
        ListCommitsRequest { project: p.clone(), page_token: "garbage".into(), ..Default::default() };
    assert_eq!(code(c.commits.list_commits(with(request, &admin)).await).0, Code::InvalidArgument);
}
both!(list_pages_and_refusals);

/// A thread's deletion takes its session's commit links (and their fingerprints) with it.
async fn deleted_threads_take_their_links(backend: Backend) {
    use baton_proto::v1::{DeleteThreadsRequest, OpenThreadRequest};
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let open =
        OpenThreadRequest { project: p.clone(), thread: "t-1".into(), write: write(), ..Default::default() };
    let session = c.threads.open_thread(open).await.unwrap().into_inner().session.unwrap().id;
    record(&mut c, &p, vec![new(link("th", &session, CommitMadeBy::Agent), &["thread line"])]).await;
    assert_eq!(find(&mut c, &p, &[hex("th", 40)], &[], &["thread line"]).await.links.len(), 1);
    let delete = DeleteThreadsRequest { project: p.clone(), threads: vec!["t-1".into()], write: write() };
    c.threads.delete_threads(delete).await.unwrap();
    let found = find(&mut c, &p, &[hex("th", 40)], &[], &["thread line"]).await;
    assert!(found.links.is_empty() && found.fingerprints.is_empty(), "{found:?}");
}
both!(deleted_threads_take_their_links);
