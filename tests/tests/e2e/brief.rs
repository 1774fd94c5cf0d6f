//! The brief: sections in priority order, newest first, fitted to a budget by whole lines.

use baton_proto::v1::{
    AgentKind, BriefSectionKind, CheckpointKind, CheckpointState, ConflictPolicy, CreateCheckpointRequest,
    DeleteMemoryRequest, EndSessionRequest, GetBriefRequest, HeartbeatRequest, ListMemoryRequest, MemoryItem,
    MemoryOp, PurgeRequest, PutMemoryRequest, ResumeSessionRequest, SessionStatus, StartSessionRequest, Task,
    delete_memory_request, resume_session_request,
};
use baton_tests::{Backend, Clients, Server, both};

use crate::{based, brief_text, go_idle, project, put_branch_note, put_note, start, start_session, write};

async fn put(c: &mut Clients, p: &str, category: &str, texts: &[&str]) {
    let op = if matches!(category, "decision" | "session_summary") {
        MemoryOp::Append
    } else {
        MemoryOp::ReplaceSet
    };
    c.memory
        .put_memory(PutMemoryRequest {
            project: p.into(),
            category: category.into(),
            op: op as i32,
            items: texts.iter().map(|t| MemoryItem { content: (*t).into(), rationale: "r".into() }).collect(),
            write: write(),
            ..Default::default()
        })
        .await
        .unwrap();
}

async fn sections_and_budget(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    // An unfinished (idle) session with open tasks in its last checkpoint.
    let old = start_session(&mut c, &p).await;
    c.checkpoints
        .create_checkpoint(CreateCheckpointRequest {
            session_id: old.id.clone(),
            kind: CheckpointKind::PreCompact as i32,
            state: Some(CheckpointState {
                active_tasks: vec![
                    Task {
                        content: "finish the watch".into(),
                        status: "in_progress".into(),
                        ..Default::default()
                    },
                    Task { content: "done already".into(), status: "completed".into(), ..Default::default() },
                ],
                ..Default::default()
            }),
            write: write(),
            ..Default::default()
        })
        .await
        .unwrap();
    c.sessions
        .heartbeat(HeartbeatRequest {
            session_id: old.id.clone(),
            status: SessionStatus::Idle as i32,
            ..Default::default()
        })
        .await
        .unwrap();
    put(&mut c, &p, "goal", &["ship baton v1"]).await;
    put(&mut c, &p, "open_loop", &["docs", "bench"]).await;
    put(&mut c, &p, "constraint", &["no cloud"]).await;
    put(&mut c, &p, "decision", &["use sqlx"]).await;
    put(&mut c, &p, "decision", &["use tonic"]).await;
    put(&mut c, &p, "recent_change", &["M server/src/lib.rs"]).await;
    put_note(&mut c, &p, "arch", "hub and spokes", write()).await.unwrap();
    // A conflict, and another active session.
    let r = put_note(&mut c, &p, "arch", "layers", based(1, ConflictPolicy::Overwrite)).await.unwrap();
    assert!(r.result.unwrap().conflict.is_some());
    // A teammate's session (another user and host): active, so listed.
    let other = c
        .sessions
        .start_session(baton_proto::v1::StartSessionRequest {
            project: p.clone(),
            agent: baton_proto::v1::AgentKind::Codex as i32,
            host: "desk".into(),
            user: "teammate".into(),
            write: write(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .session
        .unwrap();
    // My new session: my previous one is `old` (same user and host), so conflicts since
    // then are shown.
    let me = start_session(&mut c, &p).await;

    let brief = c
        .brief
        .get_brief(GetBriefRequest {
            project: p.clone(),
            session_id: me.id.clone(),
            changes: vec!["A client/src/main.rs".into()],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .brief
        .unwrap();
    use BriefSectionKind as K;
    let kinds: Vec<i32> = brief.sections.iter().map(|s| s.kind).collect();
    assert_eq!(
        kinds,
        [
            K::PreviousSession,
            K::Goal,
            K::OpenLoops,
            K::Constraints,
            K::Decisions,
            K::Changes,
            K::ActiveSessions,
            K::Conflicts,
            K::Notes
        ]
        .map(|k| k as i32)
    );
    let section = |k: K| brief.sections.iter().find(|s| s.kind == k as i32).unwrap().lines.clone();
    // My previous session is idle: where it stopped, in a section of its own (not also
    // among the unfinished sessions).
    let unfinished = section(K::PreviousSession);
    assert!(unfinished[0].starts_with("idle claude-code"), "{unfinished:?}");
    assert!(
        unfinished.iter().any(|l| l.contains("finish the watch"))
            && !unfinished.iter().any(|l| l.contains("done already"))
    );
    // Newest first.
    assert_eq!(section(K::Decisions), vec!["use tonic (why: r)", "use sqlx (why: r)"]);
    assert_eq!(section(K::Changes), vec!["A client/src/main.rs", "M server/src/lib.rs"]);
    let active = section(K::ActiveSessions);
    assert!(active.iter().any(|l| l.contains(&other.id[other.id.len() - 8..])), "{active:?}");
    assert!(!active.iter().any(|l| l.contains(&me.id[me.id.len() - 8..])), "own session listed: {active:?}");
    assert!(section(K::Conflicts)[0].contains("note/arch overwritten"), "{:?}", section(K::Conflicts));
    assert!(!brief.truncated);

    // A tight budget keeps the top, drops from the bottom, whole lines only.
    for budget in [200, 350, 600] {
        let small = c
            .brief
            .get_brief(GetBriefRequest {
                project: p.clone(),
                session_id: me.id.clone(),
                budget_chars: budget,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .brief
            .unwrap();
        assert!(small.truncated);
        assert!(small.text.chars().count() <= budget as usize, "{budget}: {}", small.text);
        assert_eq!(small.sections[0].kind, K::PreviousSession as i32, "{budget}: {}", small.text);
        for line in small.text.lines().filter(|l| l.starts_with("- ")) {
            let line = &line[2..];
            let whole =
                small.sections.iter().any(|s| s.lines.iter().any(|x| x == line)) || line.ends_with(" more");
            assert!(whole, "{budget}: cut line {line:?}");
        }
        assert!(!small.sections.iter().any(|s| s.kind == K::Notes as i32));
    }
}
both!(sections_and_budget);

/// The server keeps a brief's memory section while the project's memory is unchanged: every
/// kind of memory change (upsert, append, delete, a branch's note, a purge) must reach the
/// next brief, and writes that leave memory alone must not hide it.
async fn memory_changes_reach_the_next_brief(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    put_note(&mut c, &p, "arch", "hub and spokes", write()).await.unwrap();
    assert!(brief_text(&mut c, &p, "").await.contains("arch: hub and spokes"));
    // Kept across writes that do not touch memory.
    start_session(&mut c, &p).await;
    assert!(brief_text(&mut c, &p, "").await.contains("arch: hub and spokes"));

    put_note(&mut c, &p, "arch", "layers", write()).await.unwrap();
    let text = brief_text(&mut c, &p, "").await;
    assert!(text.contains("arch: layers") && !text.contains("hub and spokes"), "{text}");

    put(&mut c, &p, "decision", &["use sqlx"]).await;
    assert!(brief_text(&mut c, &p, "").await.contains("use sqlx"));

    let entry = c
        .memory
        .list_memory(ListMemoryRequest { project: p.clone(), category: "note".into(), ..Default::default() })
        .await
        .unwrap()
        .into_inner()
        .entries
        .remove(0);
    c.memory
        .delete_memory(DeleteMemoryRequest {
            project: p.clone(),
            target: Some(delete_memory_request::Target::EntryId(entry.id)),
            write: write(),
        })
        .await
        .unwrap();
    assert!(!brief_text(&mut c, &p, "").await.contains("arch:"));

    // A branch's note shows in that branch's brief only, each cached on its own.
    assert!(!brief_text(&mut c, &p, "feat").await.contains("flag:"));
    put_branch_note(&mut c, &p, "feat", "flag", "behind a flag").await;
    assert!(brief_text(&mut c, &p, "feat").await.contains("flag @feat: behind a flag"));
    assert!(!brief_text(&mut c, &p, "").await.contains("flag @feat"));

    // A purge rewrites memory outside the memory API: the cached section must not outlive it.
    const LEAK: &str = "corp-vault-passphrase-9c2e";
    put_note(&mut c, &p, "db", &format!("the db password is {LEAK}"), write()).await.unwrap();
    assert!(brief_text(&mut c, &p, "").await.contains(LEAK));
    c.admin.purge(PurgeRequest { project: p.clone(), value: LEAK.into(), dry_run: false }).await.unwrap();
    let text = brief_text(&mut c, &p, "").await;
    assert!(!text.contains(LEAK) && text.contains(&"*".repeat(LEAK.len())), "{text}");
}
both!(memory_changes_reach_the_next_brief);

fn section_lines(brief: &baton_proto::v1::Brief, kind: BriefSectionKind) -> Vec<String> {
    brief.sections.iter().filter(|s| s.kind == kind as i32).flat_map(|s| s.lines.clone()).collect()
}

/// A resume's brief is the new session's: the resumed session is no longer unfinished and
/// is the previous one (its last commit, its branch's memory), the new session is not
/// listed as another active one; the same for a replayed resume.
async fn a_resumes_brief_is_the_new_sessions(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let session = |goal: &str, branch: &str| StartSessionRequest {
        project: p.clone(),
        agent: AgentKind::ClaudeCode as i32,
        host: "laptop".into(),
        user: "dev".into(),
        branch: branch.into(),
        goal: goal.into(),
        write: write(),
        ..Default::default()
    };
    let other = start(&mut c, session("the other unfinished one", "main")).await;
    let old = start(&mut c, session("the one to resume", "feat")).await;
    // One goes idle, the other ends crashed on a commit.
    c.sessions
        .heartbeat(HeartbeatRequest {
            session_id: other.id.clone(),
            status: SessionStatus::Idle as i32,
            ..Default::default()
        })
        .await
        .unwrap();
    c.sessions
        .end_session(EndSessionRequest {
            session_id: old.id.clone(),
            status: SessionStatus::Crashed as i32,
            git_head: "c0ffee0123456789".into(),
            write: write(),
            ..Default::default()
        })
        .await
        .unwrap();
    put_branch_note(&mut c, &p, "feat", "flag", "behind a flag").await;
    let request = ResumeSessionRequest {
        project: p.clone(),
        target: Some(resume_session_request::Target::SessionId(old.id.clone())),
        write: write(),
        ..Default::default()
    };
    let first = c.sessions.resume_session(request.clone()).await.unwrap().into_inner();
    let replayed = c.sessions.resume_session(request).await.unwrap().into_inner();
    assert!(replayed.result.as_ref().unwrap().replayed);
    for reply in [first, replayed] {
        let new = reply.session.unwrap();
        let brief = reply.brief.unwrap();
        let unfinished = section_lines(&brief, BriefSectionKind::UnfinishedSessions);
        assert!(unfinished.iter().any(|l| l.contains("the other unfinished one")), "{}", brief.text);
        assert!(!unfinished.iter().any(|l| l.contains("the one to resume")), "{}", brief.text);
        assert_eq!(brief.last_git_head, "c0ffee0123456789");
        // No branch asked: the new session is on the resumed one's, and so is the memory.
        assert_eq!(new.branch, "feat");
        assert!(brief.text.contains("flag @feat: behind a flag"), "{}", brief.text);
        let active = section_lines(&brief, BriefSectionKind::ActiveSessions);
        assert!(!active.iter().any(|l| l.contains(&new.id[new.id.len() - 8..])), "{}", brief.text);
        assert!(brief.as_of_revision > 0);
    }
}
both!(a_resumes_brief_is_the_new_sessions);

/// The brief's previous session (its last commit is `last_git_head`) is the first that
/// exists of: the session the caller resumed; the latest earlier session of the caller's
/// user on any host (of its host when it has no user name); the project's latest completed
/// session. With no caller, or one that does not exist, the latest completed one.
async fn the_previous_session_is_the_first_that_applies(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let on = |host: &str, user: &str| StartSessionRequest {
        project: p.clone(),
        agent: AgentKind::Codex as i32,
        host: host.into(),
        user: user.into(),
        write: write(),
        ..Default::default()
    };
    let end = async |c: &mut Clients, id: &str, head: &str| {
        c.sessions
            .end_session(EndSessionRequest {
                session_id: id.into(),
                status: SessionStatus::Completed as i32,
                git_head: head.into(),
                write: write(),
                ..Default::default()
            })
            .await
            .unwrap();
    };
    let mine = start(&mut c, on("laptop", "dev")).await;
    end(&mut c, &mine.id, "aaaa1111").await;
    let theirs = start(&mut c, on("desk", "ops")).await;
    end(&mut c, &theirs.id, "bbbb2222").await;
    let previous_head = async |c: &mut Clients, session_id: &str| {
        let request =
            GetBriefRequest { project: p.clone(), session_id: session_id.into(), ..Default::default() };
        c.brief.get_brief(request).await.unwrap().into_inner().brief.unwrap().last_git_head
    };
    // No caller, or an unknown one: the latest completed session.
    assert_eq!(previous_head(&mut c, "").await, "bbbb2222");
    assert_eq!(previous_head(&mut c, &uuid::Uuid::now_v7().to_string()).await, "bbbb2222");
    // The same user on another machine: their own earlier session, though another ended later.
    let next = start(&mut c, on("second-machine", "dev")).await;
    assert_eq!(previous_head(&mut c, &next.id).await, "aaaa1111");
    // No user name: the same host's earlier session, else the latest completed.
    let nameless = start(&mut c, on("ci", "")).await;
    end(&mut c, &nameless.id, "dddd4444").await;
    let later = start(&mut c, on("tablet", "ops")).await;
    end(&mut c, &later.id, "cccc3333").await;
    let again = start(&mut c, on("ci", "")).await;
    assert_eq!(previous_head(&mut c, &again.id).await, "dddd4444");
    let elsewhere = start(&mut c, on("runner", "")).await;
    assert_eq!(previous_head(&mut c, &elsewhere.id).await, "cccc3333");
    // A session that resumed the desk's, on the laptop: the one it resumed, though another
    // ended later.
    let resumed = c
        .sessions
        .resume_session(ResumeSessionRequest {
            project: p.clone(),
            target: Some(resume_session_request::Target::SessionId(theirs.id.clone())),
            host: "laptop".into(),
            user: "dev".into(),
            write: write(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .session
        .unwrap();
    assert_eq!(previous_head(&mut c, &resumed.id).await, "bbbb2222");
}
both!(the_previous_session_is_the_first_that_applies);

/// The caller's previous session has a section of its own: where it stopped (summary,
/// phase, last prompt and answer) and its unfinished tasks with their status, from its head
/// checkpoint, whatever its status, on whichever machine the same user starts next; a
/// resumed session gets the one it resumes. Another user's session is not "yours".
async fn where_your_last_session_stopped(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let on = |host: &str, user: &str| StartSessionRequest {
        project: p.clone(),
        agent: AgentKind::ClaudeCode as i32,
        host: host.into(),
        user: user.into(),
        goal: "port the parser".into(),
        write: write(),
        ..Default::default()
    };
    let first = start(&mut c, on("machine-1", "dev")).await;
    let task = |id: &str, content: &str, status: &str| Task {
        id: id.into(),
        content: content.into(),
        status: status.into(),
        progress: 0,
    };
    c.checkpoints
        .create_checkpoint(CreateCheckpointRequest {
            session_id: first.id.clone(),
            kind: CheckpointKind::SessionEnd as i32,
            reason: "session end".into(),
            state: Some(CheckpointState {
                active_tasks: vec![
                    task("1", "write the lexer", "completed"),
                    task("2", "write the parser", "in_progress"),
                    task("3", "fuzz it", "pending"),
                ],
                phase: "parser half done".into(),
                last_prompt: "now the parser".into(),
                last_answer: "The lexer is done; the parser handles expressions.".into(),
                blockers: vec!["no grammar for macros".into()],
                ..Default::default()
            }),
            write: write(),
            ..Default::default()
        })
        .await
        .unwrap();
    c.sessions
        .end_session(EndSessionRequest {
            session_id: first.id.clone(),
            status: SessionStatus::Completed as i32,
            write: write(),
            ..Default::default()
        })
        .await
        .unwrap();
    let section = async |c: &mut Clients, session_id: &str| {
        let request =
            GetBriefRequest { project: p.clone(), session_id: session_id.into(), ..Default::default() };
        let brief = c.brief.get_brief(request).await.unwrap().into_inner().brief.unwrap();
        let lines = brief
            .sections
            .iter()
            .find(|s| s.kind == BriefSectionKind::PreviousSession as i32)
            .map(|s| s.lines.clone());
        (lines, brief.text)
    };
    let second = start(&mut c, on("machine-2", "dev")).await;
    let (lines, text) = section(&mut c, &second.id).await;
    let lines = lines.unwrap_or_else(|| panic!("no previous-session section: {text}"));
    assert!(
        lines[0].starts_with("completed claude-code") && lines[0].ends_with(": port the parser"),
        "{lines:?}"
    );
    for want in [
        "stopped at: parser half done",
        "last asked: now the parser",
        "last answer: The lexer is done; the parser handles expressions.",
        "[in_progress] write the parser",
        "[pending] fuzz it",
        "blocker: no grammar for macros",
    ] {
        assert!(lines.iter().any(|l| l == want), "{want:?} missing: {lines:?}");
    }
    assert!(!text.contains("write the lexer"), "a completed task is not open: {text}");
    assert!(
        text.starts_with(&format!("# Baton brief: {p}\n\n## Where your last session stopped\n")),
        "{text}"
    );

    // Another user: the project's latest completed session is not theirs.
    let teammate = start(&mut c, on("desk", "ops")).await;
    assert_eq!(section(&mut c, &teammate.id).await.0, None);

    // Resuming it (crashed or not): the brief of the successor carries it.
    let resumed = c
        .sessions
        .resume_session(ResumeSessionRequest {
            project: p.clone(),
            target: Some(resume_session_request::Target::SessionId(first.id.clone())),
            host: "machine-3".into(),
            user: "dev".into(),
            write: write(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let text = resumed.brief.unwrap().text;
    assert!(
        text.contains("## Where your last session stopped") && text.contains("[pending] fuzz it"),
        "{text}"
    );
}
both!(where_your_last_session_stopped);

/// "Where your last session stopped" is the user's latest session that did work and is
/// neither the caller nor still running; a successor `baton resume` made that no
/// conversation took up stands for the session it resumed (its "last asked" line is kept).
async fn the_previous_session_did_work_and_is_not_running(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let asked = async |c: &mut Clients, id: &str, prompt: &str| {
        let state = CheckpointState { last_prompt: prompt.into(), ..Default::default() };
        let request = CreateCheckpointRequest {
            session_id: id.into(),
            kind: CheckpointKind::Auto as i32,
            state: Some(state),
            write: write(),
            ..Default::default()
        };
        c.checkpoints.create_checkpoint(request).await.unwrap();
    };
    let previous = async |c: &mut Clients, id: &str| {
        let request = GetBriefRequest { project: p.clone(), session_id: id.into(), ..Default::default() };
        let brief = c.brief.get_brief(request).await.unwrap().into_inner().brief.unwrap();
        section_lines(&brief, BriefSectionKind::PreviousSession).join("\n")
    };
    let done = start_session(&mut c, &p).await;
    asked(&mut c, &done.id, "fix the login bug").await;
    let end = EndSessionRequest {
        session_id: done.id.clone(),
        status: SessionStatus::Completed as i32,
        write: write(),
        ..Default::default()
    };
    c.sessions.end_session(end).await.unwrap();
    // Another conversation of the same user, still running, and one that did nothing.
    let running = start_session(&mut c, &p).await;
    asked(&mut c, &running.id, "still going").await;
    let idle = start_session(&mut c, &p).await;
    go_idle(&mut c, &idle.id).await;
    let me = start_session(&mut c, &p).await;
    let lines = previous(&mut c, &me.id).await;
    assert!(lines.contains("last asked: fix the login bug"), "{lines}");

    // Then another session of the user did work and ended; `baton resume` of the first,
    // taken up by no conversation, is the user's latest: it stands for the session it
    // resumed, not for the one before it.
    let other = start_session(&mut c, &p).await;
    asked(&mut c, &other.id, "fix the signup bug").await;
    let end = EndSessionRequest {
        session_id: other.id.clone(),
        status: SessionStatus::Completed as i32,
        write: write(),
        ..Default::default()
    };
    c.sessions.end_session(end).await.unwrap();
    let resumed = ResumeSessionRequest {
        project: p.clone(),
        target: Some(resume_session_request::Target::SessionId(done.id.clone())),
        host: "laptop".into(),
        user: "dev".into(),
        write: write(),
        ..Default::default()
    };
    c.sessions.resume_session(resumed).await.unwrap();
    let next = start_session(&mut c, &p).await;
    let lines = previous(&mut c, &next.id).await;
    assert!(lines.contains("last asked: fix the login bug"), "{lines}");
}
both!(the_previous_session_did_work_and_is_not_running);
