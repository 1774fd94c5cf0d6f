//! Search (`SearchService.Search`): one shared list of queries with their expected hits, run
//! on both backends; filters, collapsing a session's checkpoints, snippets, paging, the index
//! following deletes and purges, queries that are refused with what is wrong, and text
//! written without spaces between words.

use std::collections::{BTreeSet, HashMap};

use baton_proto::v1::{
    CheckpointKind, CheckpointState, CreateCheckpointRequest, Decision, DeleteMemoryRequest, MemoryItem,
    MemoryOp, PutMemoryRequest, SearchHit, SearchKind, SearchRequest, StartSessionRequest, Task,
    WriteOptions, WriteOutcome, delete_memory_request,
};
use baton_tests::{Backend, Clients, Server, both};
use tonic::Code;

use crate::{AgentKind, code, project, start, write};

/// What the project holds, by a label per record id.
struct Planted {
    project: String,
    labels: HashMap<String, &'static str>,
    s1: String,
    s1_checkpoints: Vec<String>,
}

async fn memory(
    c: &mut Clients,
    p: &str,
    category: &str,
    key: &str,
    content: &str,
    rationale: &str,
) -> String {
    let op = if key.is_empty() { MemoryOp::Append } else { MemoryOp::Upsert };
    let reply = c
        .memory
        .put_memory(PutMemoryRequest {
            project: p.into(),
            category: category.into(),
            key: key.into(),
            op: op as i32,
            items: vec![MemoryItem { content: content.into(), rationale: rationale.into() }],
            write: write(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    reply.entries.last().unwrap().id.clone()
}

async fn checkpoint(c: &mut Clients, session: &str, state: CheckpointState) -> String {
    let reply = c
        .checkpoints
        .create_checkpoint(CreateCheckpointRequest {
            session_id: session.into(),
            kind: CheckpointKind::Auto as i32,
            reason: "test".into(),
            state: Some(state),
            write: write(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    reply.checkpoint.unwrap().id
}

async fn session(c: &mut Clients, p: &str, branch: &str, user: &str, goal: &str) -> String {
    let request = StartSessionRequest {
        project: p.into(),
        agent: AgentKind::ClaudeCode as i32,
        host: "laptop".into(),
        user: user.into(),
        branch: branch.into(),
        goal: goal.into(),
        write: write(),
        ..Default::default()
    };
    start(c, request).await.id
}

async fn plant(c: &mut Clients) -> Planted {
    let p = project();
    let mut labels = HashMap::new();
    let first = memory(c, &p, "decision", "", "The first decision, evicted later", "").await;
    labels.insert(first, "first-decision");
    let backoff = memory(
        c,
        &p,
        "decision",
        "",
        "Use exponential backoff for the retry policy",
        "the RetryPolicy in server/src/auth.rs hammered the hub",
    )
    .await;
    labels.insert(backoff, "backoff");
    // Five more decisions: the first one is evicted (decision's cap is 5), still found.
    for i in 0..4 {
        memory(c, &p, "decision", "", &format!("filler decision {i}"), "").await;
    }
    let db = memory(c, &p, "note", "db", "SQLite by default, Postgres for teams", "").await;
    labels.insert(db, "db-note");
    let s1 = session(c, &p, "main", "dev", "Fix the flaky migration test").await;
    labels.insert(s1.clone(), "s1");
    let mut s1_checkpoints = Vec::new();
    for step in 0..3 {
        let state = CheckpointState {
            active_tasks: vec![Task {
                content: "Write the retry_policy docs".into(),
                status: "pending".into(),
                ..Default::default()
            }],
            errors: vec![format!("error: relation \"search_docs\" does not exist (step {step})")],
            files_modified: vec!["server/src/auth.rs".into()],
            last_prompt: "where did that migration error come from?".into(),
            ..Default::default()
        };
        let id = checkpoint(c, &s1, state).await;
        labels.insert(id.clone(), "s1-checkpoint");
        s1_checkpoints.push(id);
    }
    let s2 = session(c, &p, "feature-x", "ana", "").await;
    let state = CheckpointState {
        decisions: vec![Decision {
            decision: "Serve it from the HTTPServer".into(),
            rationale: "café au lait".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let s2_checkpoint = checkpoint(c, &s2, state).await;
    labels.insert(s2_checkpoint, "s2-checkpoint");
    Planted { project: p, labels, s1, s1_checkpoints }
}

/// The reply to `ask` once the project's background indexing is done (within 30 s).
async fn once_indexed(c: &mut Clients, ask: &SearchRequest) -> baton_proto::v1::SearchResponse {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let reply = c.search.search(ask.clone()).await.unwrap().into_inner();
        if !reply.partial {
            return reply;
        }
        assert!(std::time::Instant::now() < deadline, "still partial after 30 s");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

async fn search(c: &mut Clients, request: SearchRequest) -> Vec<SearchHit> {
    c.search.search(request).await.unwrap_or_else(|e| panic!("{e:?}")).into_inner().hits
}

fn labelled(planted: &Planted, hits: &[SearchHit]) -> BTreeSet<&'static str> {
    hits.iter().map(|h| *planted.labels.get(&h.record_id).unwrap_or(&"unknown")).collect()
}

/// The shared list: a query, the kinds it is limited to (none: all), and the hits expected.
const QUERIES: &[(&str, &[SearchKind], &[&str])] = &[
    ("retry policy", &[], &["backoff", "s1-checkpoint"]),
    ("RetryPolicy", &[], &["backoff", "s1-checkpoint"]),
    ("retry_policy", &[], &["backoff", "s1-checkpoint"]),
    ("\"retry policy\"", &[], &["backoff", "s1-checkpoint"]),
    ("retrypolicy", &[], &["backoff"]),
    ("sqlite", &[], &["db-note"]),
    ("\"SQLite by default\"", &[], &["db-note"]),
    ("auth.rs", &[], &["backoff", "s1-checkpoint"]),
    ("\"server/src/auth.rs\"", &[], &["backoff", "s1-checkpoint"]),
    ("src auth", &[], &["backoff", "s1-checkpoint"]),
    ("\"auth src\"", &[], &[]),
    ("migration", &[], &["s1", "s1-checkpoint"]),
    ("migration -flaky", &[], &["s1-checkpoint"]),
    ("sqlite OR teams", &[], &["db-note"]),
    ("sqlite OR nothing-here", &[], &["db-note"]),
    ("postgres hub", &[], &[]),
    ("café", &[], &["s2-checkpoint"]),
    ("CAFÉ", &[], &["s2-checkpoint"]),
    ("http server", &[], &["s2-checkpoint"]),
    ("HttpServer", &[], &["s2-checkpoint"]),
    ("backoff", &[SearchKind::Memory], &["backoff"]),
    ("backoff", &[SearchKind::Checkpoint, SearchKind::Session], &[]),
    ("flaky", &[SearchKind::Session], &["s1"]),
    ("\"first decision\"", &[], &["first-decision"]),
    ("search_docs", &[], &["s1-checkpoint"]),
    ("NEAR(retry policy) AND 'x':* \\", &[], &[]),
];

async fn the_shared_query_list(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let planted = plant(&mut c).await;
    for (query, kinds, expected) in QUERIES {
        let request = SearchRequest {
            project: planted.project.clone(),
            query: (*query).into(),
            kinds: kinds.iter().map(|k| *k as i32).collect(),
            ..Default::default()
        };
        let hits = search(&mut c, request).await;
        let expected: BTreeSet<&str> = expected.iter().copied().collect();
        assert_eq!(labelled(&planted, &hits), expected, "{backend:?}: {query:?}");
        assert_eq!(hits.len(), expected.len(), "{backend:?}: {query:?}: one hit per record");
    }
}
both!(the_shared_query_list);

/// Filters, a session's checkpoints as one hit (the newest), snippets, paging.
async fn filters_collapsing_snippets_and_pages(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let planted = plant(&mut c).await;
    let ask = |query: &str| SearchRequest {
        project: planted.project.clone(),
        query: query.into(),
        ..Default::default()
    };
    // Three checkpoints of s1 match: one hit, the newest, saying how many matched.
    let hits = search(
        &mut c,
        SearchRequest { kinds: vec![SearchKind::Checkpoint as i32], ..ask("retry_policy docs") },
    )
    .await;
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(hits[0].record_id, *planted.s1_checkpoints.last().unwrap());
    assert_eq!((hits[0].matched_checkpoints, hits[0].session_id.as_str()), (3, planted.s1.as_str()));
    assert_eq!(hits[0].kind, SearchKind::Checkpoint as i32);
    assert!(hits[0].revision > 0 && hits[0].created_at.is_some() && hits[0].author == "dev", "{:?}", hits[0]);
    // The snippet holds the words, highlighted where they are.
    let marked: Vec<&str> =
        hits[0].highlights.iter().map(|h| &hits[0].snippet[h.start as usize..h.end as usize]).collect();
    assert!(
        marked.contains(&"retry") && marked.contains(&"policy") && marked.contains(&"docs"),
        "{:?}",
        hits[0]
    );
    // Filters: session, branch, author, time, kinds.
    let by_session = search(&mut c, SearchRequest { session_id: planted.s1.clone(), ..ask("auth.rs") }).await;
    assert_eq!(labelled(&planted, &by_session), BTreeSet::from(["s1-checkpoint"]));
    let feature =
        search(&mut c, SearchRequest { branch: "feature-x".into(), ..ask("café OR migration") }).await;
    assert_eq!(labelled(&planted, &feature), BTreeSet::from(["s2-checkpoint"]));
    let main = search(&mut c, SearchRequest { branch: "main".into(), ..ask("café OR migration") }).await;
    assert_eq!(labelled(&planted, &main), BTreeSet::from(["s1", "s1-checkpoint"]));
    let ana = search(&mut c, SearchRequest { author: "ana".into(), ..ask("café OR migration") }).await;
    assert_eq!(labelled(&planted, &ana), BTreeSet::from(["s2-checkpoint"]));
    let future = prost_types::Timestamp { seconds: 4_000_000_000, nanos: 0 };
    let none = search(&mut c, SearchRequest { after: Some(future), ..ask("migration") }).await;
    assert!(none.is_empty());
    let past = prost_types::Timestamp { seconds: 1_000_000_000, nanos: 0 };
    let all =
        search(&mut c, SearchRequest { after: Some(past), before: Some(future), ..ask("migration") }).await;
    assert_eq!(all.len(), 2);
    // Pages of one: every hit once, in the order of one page of all.
    let whole = search(&mut c, ask("decision OR retry OR migration OR café")).await;
    assert!(whole.len() >= 6, "{whole:?}");
    let mut paged = Vec::new();
    let mut token = String::new();
    loop {
        let reply = c
            .search
            .search(SearchRequest {
                page_size: 1,
                page_token: token,
                ..ask("decision OR retry OR migration OR café")
            })
            .await
            .unwrap()
            .into_inner();
        assert!(reply.hits.len() <= 1 && !reply.partial);
        paged.extend(reply.hits);
        // A write between pages does not shift them.
        memory(&mut c, &planted.project, "decision", "", "another decision, written between pages", "").await;
        if reply.next_page_token.is_empty() {
            break;
        }
        token = reply.next_page_token;
    }
    let ids = |hits: &[SearchHit]| hits.iter().map(|h| h.record_id.clone()).collect::<Vec<_>>();
    assert_eq!(ids(&paged), ids(&whole));
}
both!(filters_collapsing_snippets_and_pages);

/// The index follows every write: a deleted note, a purged value and a new goal are found
/// (or not) at once; a project no one wrote has no hits.
async fn the_index_follows_writes(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let planted = plant(&mut c).await;
    let ask = |query: &str| SearchRequest {
        project: planted.project.clone(),
        query: query.into(),
        ..Default::default()
    };
    // A note written again: its old text is gone, its new text found.
    memory(&mut c, &planted.project, "note", "db", "DuckDB by default", "").await;
    assert!(search(&mut c, ask("teams")).await.is_empty(), "a note's old text is not found");
    assert_eq!(search(&mut c, ask("duckdb")).await.len(), 1, "a note's new text is");
    c.memory
        .delete_memory(DeleteMemoryRequest {
            project: planted.project.clone(),
            target: Some(delete_memory_request::Target::Record(baton_proto::v1::RecordRef {
                category: "note".into(),
                key: "db".into(),
                ..Default::default()
            })),
            write: write(),
        })
        .await
        .unwrap();
    assert!(search(&mut c, ask("duckdb")).await.is_empty(), "a deleted note is not found");
    // A new goal replaces the session's document.
    c.sessions
        .update_session(baton_proto::v1::UpdateSessionRequest {
            session_id: planted.s1.clone(),
            goal: Some("Rewrite the indexer".into()),
            write: write(),
            ..Default::default()
        })
        .await
        .unwrap();
    let sessions = vec![SearchKind::Session as i32];
    assert!(search(&mut c, SearchRequest { kinds: sessions.clone(), ..ask("flaky") }).await.is_empty());
    assert_eq!(search(&mut c, SearchRequest { kinds: sessions, ..ask("indexer") }).await.len(), 1);
    // A purged value is gone from the index too.
    const LEAK: &str = "hunter2-leaked-value";
    memory(&mut c, &planted.project, "decision", "", &format!("the password is {LEAK}"), "").await;
    assert_eq!(search(&mut c, ask(LEAK)).await.len(), 1);
    c.admin
        .purge(baton_proto::v1::PurgeRequest {
            project: planted.project.clone(),
            value: LEAK.into(),
            dry_run: false,
        })
        .await
        .unwrap();
    assert!(search(&mut c, ask(LEAK)).await.is_empty(), "a purged value is not found");
    assert!(search(&mut c, ask("leaked")).await.is_empty());
    assert_eq!(search(&mut c, ask("password")).await.len(), 1, "the rest of the entry still is");
    let nobody = SearchRequest {
        project: "github.com/nobody/none".into(),
        query: "retry".into(),
        ..Default::default()
    };
    assert!(search(&mut c, nobody).await.is_empty());
}
both!(the_index_follows_writes);

/// Every query is valid for the engine or refused with what is wrong: never INTERNAL.
async fn bad_queries_say_what_is_wrong(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let planted = plant(&mut c).await;
    let ask = |query: &str| SearchRequest {
        project: planted.project.clone(),
        query: query.into(),
        ..Default::default()
    };
    for (query, says) in [
        ("", "no words"),
        ("\"open", "never closed"),
        ("-flaky", "only excludes"),
        ("a OR", "ends with OR"),
        ("OR a", "OR without"),
        ("\"!!\"", "phrase with no words"),
    ] {
        let (status, message) = code(c.search.search(ask(query)).await);
        assert_eq!(status, Code::InvalidArgument, "{query:?}: {message}");
        assert!(message.contains("query") && message.contains(says), "{query:?}: {message}");
    }
    for (request, field) in [
        (SearchRequest { kinds: vec![9], ..ask("x") }, "kinds[0]"),
        (SearchRequest { session_id: "not-a-uuid".into(), ..ask("x") }, "session_id"),
        (SearchRequest { page_size: 101, ..ask("x") }, "page_size"),
        (SearchRequest { page_token: "garbage".into(), ..ask("x") }, "page_token"),
        (SearchRequest { branch: "a\nb".into(), ..ask("x") }, "branch"),
        (SearchRequest { project: String::new(), ..ask("x") }, "project"),
    ] {
        let (status, message) = code(c.search.search(request).await);
        assert_eq!(status, Code::InvalidArgument, "{field}: {message}");
        assert!(message.contains(field), "{field}: {message}");
    }
    // Anything else goes: engine syntax and odd characters are only text to search for.
    let mut seed = 7u64;
    let pieces = [
        "retry", "\"", "-", "OR", "AND", "NOT", "*", "^", ":", "'", "\\", "(", ")", "&", "|", "!", "<->",
        "é", "NEAR", "{", "}", "\0", " ",
    ];
    for _ in 0..300 {
        let mut query = String::new();
        for _ in 0..6 {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            query.push_str(pieces[(seed >> 33) as usize % pieces.len()]);
            if seed.is_multiple_of(3) {
                query.push(' ');
            }
        }
        match c.search.search(ask(&query)).await {
            Ok(_) => {}
            Err(status) => assert_eq!(status.code(), Code::InvalidArgument, "{query:?}: {status:?}"),
        }
    }
}
both!(bad_queries_say_what_is_wrong);

/// A token scoped to one project cannot search another.
#[tokio::test]
async fn search_is_scoped_by_token() {
    let server = Server::start(Backend::Sqlite).await.unwrap();
    let mut c = server.clients().await;
    let planted = plant(&mut c).await;
    let scoped = crate::access::token(
        &server,
        &["create", "--name", "w", "--role", "reader", "--project", "github.com/other/one"],
    );
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await; // past the "no tokens yet" cache
    let request =
        SearchRequest { project: planted.project.clone(), query: "retry".into(), ..Default::default() };
    let status = c.search.search(crate::access::with(request.clone(), &scoped)).await.unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    let other = SearchRequest { project: "github.com/other/one".into(), ..request };
    assert!(c.search.search(crate::access::with(other, &scoped)).await.is_ok());
}

/// A database from before search: its records are indexed in the background after start-up
/// (the server answers at once), searches say `partial` until then, and each batch is a
/// SEARCH_INDEXED event.
async fn older_records_are_indexed_after_an_upgrade(backend: Backend) {
    let mut server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let planted = plant(&mut c).await;
    server.kill9();
    // As a database of the previous version holds it: nothing indexed, the project listed.
    let sql = [
        "DELETE FROM search_docs".to_owned(),
        format!("INSERT INTO search_backfill (project) VALUES ('{}')", planted.project),
    ];
    for statement in &sql {
        server.execute(statement).await.unwrap();
    }
    server.restart().unwrap();
    let mut c = server.clients().await;
    let ask = SearchRequest {
        project: planted.project.clone(),
        query: "retry policy".into(),
        ..Default::default()
    };
    let reply = once_indexed(&mut c, &ask).await;
    assert_eq!(labelled(&planted, &reply.hits), BTreeSet::from(["backoff", "s1-checkpoint"]));
    let all = QUERIES.iter().find(|(q, ..)| *q == "café").unwrap();
    let hits = search(&mut c, SearchRequest { query: all.0.into(), ..ask.clone() }).await;
    assert_eq!(labelled(&planted, &hits), BTreeSet::from(["s2-checkpoint"]));
    assert_eq!((hits[0].branch.as_str(), hits[0].author.as_str()), ("feature-x", "ana"), "its session's");
    let events = crate::all_events(&mut c, &planted.project).await;
    crate::assert_gapless(&events);
    let indexed: i64 = events
        .iter()
        .filter(|e| e.kind == baton_proto::v1::EventKind::SearchIndexed as i32)
        .map(|e| match &e.value {
            Some(baton_proto::v1::event::Value::Maintenance(m)) => m.indexed_records,
            _ => 0,
        })
        .sum();
    // 7 memory entries, 4 checkpoints, 1 session with a goal.
    assert_eq!(indexed, 12, "{events:?}");
}
both!(older_records_are_indexed_after_an_upgrade);

/// Text without spaces between words (Chinese, Japanese, Korean) is found by a word inside a
/// sentence, as the phrase of its character pairs.
async fn text_without_spaces_is_found_by_its_words(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let id = memory(&mut c, &p, "decision", "", "我们决定修改重试策略", "ネットワークの設定を変更する").await;
    // A document that none of the queries below may find.
    memory(&mut c, &p, "decision", "", "English only, nothing else", "").await;
    let found = |hits: &[SearchHit]| hits.iter().map(|h| h.record_id == id).collect::<Vec<_>>();
    let queries = [
        ("策略", true),
        ("重试策略", true),
        ("\"修改重试\"", true),
        ("設定", true),
        ("策重", false),
        ("设置", false),
        ("策略 -重试", false),
        ("决定 OR 没有", true),
    ];
    for (query, expected) in queries {
        let hits =
            search(&mut c, SearchRequest { project: p.clone(), query: query.into(), ..Default::default() })
                .await;
        let expected = if expected { vec![true] } else { vec![] };
        assert_eq!(found(&hits), expected, "{backend:?}: {query:?}");
    }
}
both!(text_without_spaces_is_found_by_its_words);

/// `baton search`: hits as text, filters as flags, and what is wrong said plainly.
#[tokio::test]
async fn the_cli_searches_and_says_what_is_wrong() {
    let server = Server::start(Backend::Sqlite).await.unwrap();
    let mut c = server.clients().await;
    let planted = plant(&mut c).await;
    let env = baton_tests::ClientEnv::new(&server.url());
    let repo = baton_tests::git_repo(&format!("https://{}.git", planted.project));
    let dir = repo.path();
    let out = env.run(dir, &["search", "retry", "policy"], "");
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.contains("(2 hits, best first)") && out.stdout.contains("«retry» «policy»"),
        "{out:?}"
    );
    assert!(out.stdout.contains("checkpoint (of 3)"), "{out:?}");
    let out = env.run(
        dir,
        &["search", "café", "--branch", "feature-x", "--kind", "checkpoint", "--since", "1h"],
        "",
    );
    assert!(out.stdout.contains("(1 hit, best first)") && out.stdout.contains("«café»"), "{out:?}");
    assert!(out.stdout.contains("ana") && out.stdout.contains("feature-x"), "{out:?}");
    let out = env.run(dir, &["search", "café", "--until", "2020-01-01"], "");
    assert!(out.code == 0 && out.stdout.contains("no hits"), "{out:?}");
    for (args, says) in [
        (vec!["search", "\"open"], "never closed"),
        (vec!["search", "x", "--kind", "wish"], "unknown kind"),
        (vec!["search", "x", "--since", "last tuesday"], "neither an age"),
        (vec!["search", "x", "--session", "nope"], "session"),
    ] {
        let out = env.run(dir, &args, "");
        assert!(out.code != 0 && out.stderr.contains(says), "{args:?}: {out:?}");
    }
}

/// A checkpoint's state holding one decision, for `word`.
fn chose(word: &str) -> CheckpointState {
    CheckpointState {
        decisions: vec![Decision { decision: format!("Chose the {word}"), ..Default::default() }],
        ..Default::default()
    }
}

/// An import batch can hold checkpoints whose session is already in the database (it came in
/// an earlier batch, or an earlier import): their documents still carry the session's
/// branch, and its user as their author.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imported_checkpoints_keep_their_sessions_branch() {
    let laptop = Server::start(Backend::Sqlite).await.unwrap();
    let mut c = laptop.clients().await;
    let p = project();
    let s = session(&mut c, &p, "feature-x", "ana", "").await;
    checkpoint(&mut c, &s, chose("zeppelin")).await;
    let dir = tempfile::tempdir().unwrap();
    let export = |name: &str| {
        let path = dir.path().join(name).display().to_string();
        let (ok, _, err) = laptop.admin_command(&["export", "--output", &path]);
        assert!(ok, "{err}");
        path
    };
    let first = export("first.baton");
    let later = checkpoint(&mut c, &s, chose("dirigible")).await;
    let second = export("second.baton");

    let team = Server::start(Backend::Sqlite).await.unwrap();
    for archive in [&first, &second] {
        let (ok, _, err) = team.admin_command(&["import", "--input", archive]);
        assert!(ok, "{err}");
    }
    let mut t = team.clients().await;
    let ask = |branch: &str| SearchRequest {
        project: p.clone(),
        query: "dirigible".into(),
        branch: branch.into(),
        ..Default::default()
    };
    let hits = search(&mut t, ask("feature-x")).await;
    assert_eq!(hits.len(), 1, "{hits:?}");
    let hit = &hits[0];
    assert_eq!(
        (hit.record_id.as_str(), hit.branch.as_str(), hit.author.as_str()),
        (later.as_str(), "feature-x", "ana")
    );
    assert!(search(&mut t, ask("main")).await.is_empty());
}

/// A checkpoint that neither moves its session's head (an older fork, STALE) nor counts as
/// the session's activity (written on behalf of another session) leaves the session
/// unchanged: its document still carries the session's branch and user.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoint_that_leaves_its_session_unchanged_keeps_its_branch() {
    let server = Server::start(Backend::Sqlite).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let s = session(&mut c, &p, "feature-x", "ana", "").await;
    let other = session(&mut c, &p, "main", "bo", "").await;
    let first = checkpoint(&mut c, &s, chose("zeppelin")).await;
    checkpoint(&mut c, &s, chose("balloon")).await;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let at = |secs: u64| prost_types::Timestamp { seconds: i64::try_from(secs).unwrap(), nanos: 0 };
    let reply = c
        .checkpoints
        .create_checkpoint(CreateCheckpointRequest {
            session_id: s.clone(),
            parent_id: Some(first),
            kind: CheckpointKind::Auto as i32,
            reason: "saved by the next session".into(),
            state: Some(chose("dirigible")),
            write: Some(WriteOptions {
                session_id: other,
                written_at: Some(at(now - 3600)),
                client_now: Some(at(now)),
                ..write().unwrap()
            }),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(reply.result.unwrap().outcome, WriteOutcome::Stale as i32, "an older fork: not the head");
    let fork = reply.checkpoint.unwrap().id;
    let ask = SearchRequest {
        project: p.clone(),
        query: "dirigible".into(),
        branch: "feature-x".into(),
        ..Default::default()
    };
    let hits = search(&mut c, ask).await;
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!((hits[0].record_id.as_str(), hits[0].author.as_str()), (fork.as_str(), "ana"));
}
