//! The storage conformance suite: the same cases, in-process, on SQLite and on a throwaway
//! Postgres, through the service layer and the `Store` trait (the batching writer included),
//! without gRPC in between. Where the backends could differ (SQL, the writer's batches, a
//! failed write beside others) the two must give the same answers.

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

mod schema;
mod writer;

use std::collections::HashSet;

use baton_proto::v1::{
    CreateCheckpointRequest, EndSessionRequest, MemoryItem, MemoryOp, PutMemoryRequest, ResumeSessionRequest,
    SessionStatus, StartSessionRequest, WriteOutcome, resume_session_request,
};
use baton_server::core::lww::Policy;
use baton_server::error::Error;
use baton_server::service;
use baton_server::store::model::LogTable;
use baton_server::store::transfer::{Cursor, Table};
use baton_server::store::{NewCheckpoint, Store, WriteCtx};

/// Runs a case on both backends, each on a database of its own.
macro_rules! on_both {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let dir = tempfile::tempdir().unwrap();
                let url = format!("sqlite://{}", dir.path().join("baton.db").display());
                let store = baton_server::store::SqliteStore::connect(&url, baton_server::events::Wakers::default()).await.unwrap();
                super::$case(&store).await;
                baton_server::store::Store::close(&store).await;
            })*
        }
        mod postgres {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let url = baton_tests::postgres::fresh_database().await.unwrap();
                let store = baton_server::store::PgStore::connect(&url, baton_server::events::Wakers::default()).await.unwrap();
                super::$case(&store).await;
                baton_server::store::Store::close(&store).await;
            })*
        }
    };
}

on_both!(
    revisions_are_gapless_under_concurrent_writers,
    a_repeated_request_id_gets_the_stored_reply,
    a_refused_write_in_a_batch_leaves_the_others_committed,
    a_stale_memory_write_is_reported_and_not_applied,
    checkpoints_fork_and_list_in_tree_order,
    only_one_of_concurrent_resumes_claims_a_session,
    maintenance_prunes_compacts_and_purges,
    export_pages_every_row,
    a_replaced_note_and_an_eviction_leave_the_rows_and_documents_they_should,
    a_record_written_again_under_the_same_ids_keeps_its_new_rows,
    a_search_stops_at_its_time_limit,
    reads_by_list_select_only_what_they_name,
    tokens_are_created_found_used_and_revoked,
    thread_checkpoints_order_by_bytes_and_filter_alike,
);

fn ctx(request_id: Option<&str>) -> WriteCtx {
    WriteCtx {
        request_id: request_id.map(str::to_owned),
        request_hash: request_id.map(|r| r.as_bytes().to_vec()).unwrap_or_default(),
        ..WriteCtx::default()
    }
}

async fn start<S: Store>(store: &S, project: &str) -> String {
    let req = StartSessionRequest {
        project: project.into(),
        agent_session_id: "conv".into(),
        ..Default::default()
    };
    let reply = service::session::start(store, ctx(None), req, uuid::Uuid::now_v7()).await.unwrap();
    reply.session.unwrap().id
}

fn note(project: &str, key: &str, content: &str) -> PutMemoryRequest {
    PutMemoryRequest {
        project: project.into(),
        category: "note".into(),
        key: key.into(),
        op: MemoryOp::Upsert as i32,
        items: vec![MemoryItem { content: content.into(), ..Default::default() }],
        ..Default::default()
    }
}

async fn put<S: Store>(
    store: &S,
    ctx: WriteCtx,
    req: PutMemoryRequest,
) -> baton_proto::v1::PutMemoryResponse {
    service::memory::put(store, ctx, req).await.unwrap()
}

/// The revisions of a project's events, in order.
async fn revisions<S: Store>(store: &S, project: &str) -> Vec<i64> {
    let head = baton_server::store::head_revision(store, project.into()).await.unwrap();
    let rows = store.log_rows(LogTable::Events, project.into(), 0, head, vec![]).await.unwrap();
    rows.into_iter().map(|r| r.revision).collect()
}

async fn revisions_are_gapless_under_concurrent_writers<S: Store>(store: &S) {
    // 8 writers on 4 projects: the writer batches projects together.
    let writes = (0..8).map(|w| async move {
        for i in 0..10 {
            put(store, ctx(None), note(&format!("p{}", w % 4), &format!("k{w}-{i}"), "v")).await;
        }
    });
    futures::future::join_all(writes).await;
    for p in 0..4 {
        let project = format!("p{p}");
        assert_eq!(revisions(store, &project).await, (1..=20).collect::<Vec<_>>(), "{project}");
        assert_eq!(baton_server::store::head_revision(store, project).await.unwrap(), 20);
    }
}

async fn a_repeated_request_id_gets_the_stored_reply<S: Store>(store: &S) {
    let first = put(store, ctx(Some("r1")), note("p", "k", "v")).await;
    let again = put(store, ctx(Some("r1")), note("p", "k", "v")).await;
    let (a, b) = (first.result.unwrap(), again.result.unwrap());
    assert!(!a.replayed && b.replayed);
    assert_eq!(a.revision, b.revision);
    assert_eq!(
        baton_server::store::head_revision(store, "p".into()).await.unwrap(),
        1,
        "a replay writes nothing"
    );
    // The same id for another request is refused, and writes nothing either.
    let misuse = WriteCtx { request_hash: b"other".to_vec(), ..ctx(Some("r1")) };
    let err = service::memory::put(store, misuse, note("p", "k", "w")).await.unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    assert_eq!(revisions(store, "p").await, [1]);
}

async fn a_refused_write_in_a_batch_leaves_the_others_committed<S: Store>(store: &S) {
    put(store, ctx(None), note("p", "k", "v1")).await;
    // Concurrent writers, one of which is refused (its base is stale and it asked to be):
    // the writer puts them in batches together, and the refused one must roll back alone.
    let stale = WriteCtx { base_revision: Some(0), policy: Policy::Reject, ..ctx(None) };
    let (refused, others) = tokio::join!(
        service::memory::put(store, stale, note("p", "k", "v2")),
        futures::future::join_all((0..6).map(|i| put(store, ctx(None), note(&format!("q{i}"), "k", "v"))))
    );
    assert!(matches!(refused, Err(Error::Rejected(_))), "{refused:?}");
    assert_eq!(others.len(), 6);
    assert_eq!(revisions(store, "p").await, [1], "the refused write took no revision");
    for i in 0..6 {
        assert_eq!(revisions(store, &format!("q{i}")).await, [1]);
    }
}

async fn a_stale_memory_write_is_reported_and_not_applied<S: Store>(store: &S) {
    let set = |items: &[&str]| PutMemoryRequest {
        project: "p".into(),
        category: "constraint".into(),
        op: MemoryOp::ReplaceSet as i32,
        items: items.iter().map(|c| MemoryItem { content: (*c).into(), ..Default::default() }).collect(),
        ..Default::default()
    };
    put(store, ctx(None), set(&["a"])).await;
    put(store, ctx(None), set(&["b"])).await;
    // Based on revision 1, overwriting: applied, with the conflict reported.
    let behind = WriteCtx { base_revision: Some(1), ..ctx(None) };
    let reply = put(store, behind, set(&["c"])).await;
    let result = reply.result.unwrap();
    assert_eq!(result.outcome, WriteOutcome::Overwritten as i32);
    assert!(result.conflict.is_some());
    let page = service::memory::list(store, list_all("p"), 100, None).await.unwrap();
    let contents: Vec<_> = page.entries.iter().map(|e| e.content.as_str()).collect();
    assert_eq!(contents, ["c"]);
}

fn list_all(project: &str) -> baton_proto::v1::ListMemoryRequest {
    baton_proto::v1::ListMemoryRequest { project: project.into(), ..Default::default() }
}

fn checkpoint(session: &str, parent: Option<&str>, summary: &str) -> NewCheckpoint {
    let state = baton_proto::v1::CheckpointState { summary: summary.into(), ..Default::default() };
    let request = CreateCheckpointRequest {
        session_id: session.into(),
        parent_id: parent.map(str::to_owned),
        state: Some(state.clone()),
        ..Default::default()
    };
    let header = baton_server::core::checkpoint::Header {
        session_id: session,
        kind: request.kind,
        reason: &request.reason,
        payload_content_type: &request.payload_content_type,
        blobs: std::borrow::Cow::Borrowed(&[]),
        thread: None,
    };
    let content = baton_server::core::checkpoint::encode(&header, &state, &[]).unwrap();
    NewCheckpoint {
        session_id: session.parse().unwrap(),
        id: uuid::Uuid::now_v7(),
        content,
        state_tool_count: 0,
        blobs: Vec::new(),
        chunk_digests: Vec::new(),
        request,
    }
}

/// The reads that bind a list (a JSON array on SQLite, an array on Postgres): each gives
/// what it names, in its project only.
async fn reads_by_list_select_only_what_they_name<S: Store>(store: &S) {
    use baton_server::store::model::Chunk;
    let session = start(store, "p").await;
    start(store, "q").await;
    let rows = store.projects(Some(vec!["p".into(), "nope".into()])).await.unwrap();
    assert_eq!(rows.iter().map(|r| r.key.as_str()).collect::<Vec<_>>(), ["p"]);
    assert_eq!(rows[0].head_revision, 1);
    let all = store.projects(None).await.unwrap();
    assert_eq!(all.iter().map(|r| r.key.as_str()).collect::<Vec<_>>(), ["p", "q"], "all, by key");
    assert!(store.projects(Some(vec![])).await.unwrap().is_empty(), "an empty list names none");

    let chunk = |digest: &str| Chunk { digest: digest.into(), data: b"packed".to_vec(), size_bytes: 9 };
    assert_eq!(store.put_chunks("p".into(), vec![chunk("a"), chunk("b")]).await.unwrap(), 2);
    assert_eq!(store.put_chunks("p".into(), vec![chunk("a")]).await.unwrap(), 0, "present: skipped");
    let sizes = store.chunks("p".into(), vec!["a".into(), "x".into()], false).await.unwrap();
    assert_eq!(sizes, [Chunk { digest: "a".into(), data: vec![], size_bytes: 9 }], "no data unless asked");
    let mut both = store.chunks("p".into(), vec!["b".into(), "a".into()], true).await.unwrap();
    both.sort_by(|x, y| x.digest.cmp(&y.digest));
    assert_eq!(both, [chunk("a"), chunk("b")]);
    assert!(store.chunks("q".into(), vec!["a".into()], true).await.unwrap().is_empty(), "another project's");
    let asked = ["y", "a", "x"].map(String::from).to_vec();
    let missing = baton_server::store::missing_chunks(store, "p".into(), asked).await.unwrap();
    assert_eq!(missing, ["y", "x"], "in the order asked");

    let query = |statuses: Vec<SessionStatus>| baton_server::store::SessionQuery {
        project: "p".into(),
        statuses,
        limit: 10,
        ..Default::default()
    };
    let found = store.sessions(query(vec![SessionStatus::Completed, SessionStatus::Active])).await.unwrap();
    assert_eq!(found.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(), [session.as_str()]);
    assert!(store.sessions(query(vec![SessionStatus::Completed])).await.unwrap().is_empty());

    let made =
        service::checkpoint::create(store, ctx(None), checkpoint(&session, None, "a"), None).await.unwrap();
    let id = made.checkpoint.unwrap().id;
    let read = store.checkpoints("p".into(), vec![id.clone(), "nope".into()]).await.unwrap();
    assert_eq!(read.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), [id.as_str()]);
    assert!(read[0].payload.is_empty(), "without its payload");
    assert!(store.checkpoints("q".into(), vec![id]).await.unwrap().is_empty(), "never across projects");

    let events = store.log_rows(LogTable::Events, "p".into(), 0, 100, vec![]).await.unwrap();
    let kind = |body: &[u8]| {
        let plain =
            baton_server::core::packed::unpack(body, baton_server::core::packed::MAX_RECORD_BYTES).unwrap();
        <baton_proto::v1::Event as prost::Message>::decode(plain.as_ref()).unwrap().kind
    };
    let first = kind(&events[0].body);
    let of_kind: Vec<i64> = events.iter().filter(|e| kind(&e.body) == first).map(|e| e.revision).collect();
    assert!(of_kind.len() < events.len(), "the case needs events of more than one kind");
    let rows = store.log_rows(LogTable::Events, "p".into(), 0, 100, vec![first]).await.unwrap();
    assert_eq!(rows.iter().map(|r| r.revision).collect::<Vec<_>>(), of_kind);
    let sizes = store.log_sizes(LogTable::Events, "p".into(), 0, 100, vec![first]).await.unwrap();
    assert_eq!(sizes.iter().map(|s| s.revision).collect::<Vec<_>>(), of_kind);
    assert!(sizes.iter().all(|s| s.bytes > 0));
}

async fn tokens_are_created_found_used_and_revoked<S: Store>(store: &S) {
    use baton_server::store::TokenRow;
    use baton_server::store::model::{TokenKey, TokenWrite};
    assert!(!baton_server::store::any_tokens(store).await.unwrap());
    let token = TokenRow {
        id: "t1".into(),
        name: "ci".into(),
        role: "writer".into(),
        project: Some("p".into()),
        created_us: 1,
        last_used_us: None,
        revoked_us: None,
    };
    let create = TokenWrite::Create { token, secret_hash: "hash".into() };
    assert!(store.write_token(create).await.unwrap());
    assert!(baton_server::store::any_tokens(store).await.unwrap());
    let by_hash = store.tokens(TokenKey::SecretHash("hash".into())).await.unwrap();
    assert_eq!(by_hash.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["ci"]);
    assert!(store.tokens(TokenKey::SecretHash("other".into())).await.unwrap().is_empty());
    assert!(store.write_token(TokenWrite::Used { id: "t1".into(), now_us: 7 }).await.unwrap());
    let revoke = || TokenWrite::Revoke { name: "ci".into(), now_us: 9 };
    assert!(store.write_token(revoke()).await.unwrap());
    assert!(!store.write_token(revoke()).await.unwrap(), "revoked once");
    let named = store.tokens(TokenKey::Name("ci".into())).await.unwrap();
    assert_eq!((named[0].last_used_us, named[0].revoked_us), (Some(7), Some(9)));
    assert_eq!(store.tokens(TokenKey::All).await.unwrap().len(), 1, "revoked tokens are listed");
}

async fn checkpoints_fork_and_list_in_tree_order<S: Store>(store: &S) {
    let session = start(store, "p").await;
    let id = |r: &baton_proto::v1::CreateCheckpointResponse| r.checkpoint.as_ref().unwrap().id.clone();
    let within = None;
    let a = service::checkpoint::create(store, ctx(None), checkpoint(&session, None, "a"), within.clone())
        .await
        .unwrap();
    let b = service::checkpoint::create(store, ctx(None), checkpoint(&session, None, "b"), within.clone())
        .await
        .unwrap();
    assert!(b.result.as_ref().unwrap().conflict.is_none(), "on the head: no conflict");
    // A fork from a: both branches kept, the conflict on the head reported.
    let c = service::checkpoint::create(
        store,
        ctx(None),
        checkpoint(&session, Some(&id(&a)), "c"),
        within.clone(),
    )
    .await
    .unwrap();
    let conflict = c.result.as_ref().unwrap().conflict.clone().unwrap();
    assert!(conflict.detail.contains("fork"), "{conflict:?}");
    let listed =
        service::checkpoint::list(store, session.parse().unwrap(), true, 10, None, within).await.unwrap();
    let order: Vec<(String, i32)> = listed.checkpoints.iter().map(|c| (c.id.clone(), c.depth)).collect();
    assert_eq!(order, [(id(&a), 0), (id(&b), 1), (id(&c), 1)]);
    assert_eq!(listed.head_checkpoint_id, id(&c), "last write wins on the head");
}

async fn only_one_of_concurrent_resumes_claims_a_session<S: Store>(store: &S) {
    let session = start(store, "p").await;
    let end = EndSessionRequest { session_id: session.clone(), ..Default::default() };
    service::session::end(store, ctx(None), end, session.parse().unwrap(), SessionStatus::Crashed, None)
        .await
        .unwrap();
    let cache = baton_server::service::memory_cache::MemoryCache::default();
    let resume = || {
        let req = ResumeSessionRequest {
            project: "p".into(),
            target: Some(resume_session_request::Target::SessionId(session.clone())),
            ..Default::default()
        };
        service::resume::resume_with_brief(store, &cache, ctx(None), req, uuid::Uuid::now_v7(), 4000)
    };
    let results = futures::future::join_all((0..4).map(|_| resume())).await;
    let won: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    assert_eq!(won.len(), 1, "{results:?}");
    for lost in results.iter().filter_map(|r| r.as_ref().err()) {
        assert!(lost.to_string().contains("already resumed"), "{lost}");
    }
    let old = store.session(session).await.unwrap().unwrap();
    assert_eq!(old.status(), SessionStatus::Resumed);
    assert_eq!(old.resumed_by.as_deref(), won[0].session.as_ref().map(|s| s.id.as_str()));
}

async fn maintenance_prunes_compacts_and_purges<S: Store>(store: &S) {
    let session = start(store, "p").await;
    put(store, ctx(None), note("p", "k", "the secret value sk-0123456789")).await;
    for i in 0..3 {
        service::checkpoint::create(store, ctx(None), checkpoint(&session, None, &format!("s{i}")), None)
            .await
            .unwrap();
    }
    let actor = baton_proto::v1::Actor::default();
    assert_eq!(search(store, "s0 OR s1 OR s2").await.hits[0].matched_checkpoints, 3);
    // Everything older than the far future, one ancestor kept: the head and its parent stay.
    let far = i64::MAX / 2;
    let pruned =
        service::retention::prune(store, "p".into(), far, 1, false, actor.clone()).await.unwrap().unwrap();
    assert_eq!(pruned.removed_checkpoints.len(), 1, "{pruned:?}");
    assert_eq!(search(store, "s0 OR s1 OR s2").await.hits[0].matched_checkpoints, 2, "pruned from the index");
    assert_eq!(store.checkpoint_nodes(session.clone()).await.unwrap().len(), 2);
    let head = baton_server::store::head_revision(store, "p".into()).await.unwrap();
    let compacted = service::retention::compact(store, "p".into(), head, actor.clone()).await.unwrap();
    assert_eq!(compacted.oldest_kept_revision, head);
    assert_eq!(
        baton_server::store::project(store, "p".into()).await.unwrap().map(|p| p.events_from),
        Some(head)
    );
    let purged =
        service::purge::purge(store, "p".into(), "sk-0123456789".into(), false, actor).await.unwrap();
    assert_eq!(purged.records, 1, "{purged:?}");
    let page = service::memory::list(store, list_all("p"), 100, None).await.unwrap();
    assert!(page.entries[0].content.ends_with("*************"), "{:?}", page.entries[0]);
    assert!(search(store, "0123456789").await.hits.is_empty(), "purged from the index");
    assert_eq!(search(store, "secret value").await.hits.len(), 1);
    // Maintenance never creates a project.
    let none =
        service::retention::prune(store, "none".into(), far, 1, false, baton_proto::v1::Actor::default())
            .await;
    assert!(matches!(none, Err(Error::NotFound(_))), "{none:?}");
}

/// Writes one after another, so that on Postgres each goes alone as one statement
/// (`store::postgres::alone`): a note written again leaves its new text only (the same
/// text again included), and an append beyond its cap evicts the oldest entry in the
/// database, which stays searchable.
async fn a_replaced_note_and_an_eviction_leave_the_rows_and_documents_they_should<S: Store>(store: &S) {
    put(store, ctx(None), note("p", "arch", "hexagonal ports")).await;
    put(store, ctx(None), note("p", "arch", "layered ports")).await;
    put(store, ctx(None), note("p", "arch", "layered ports")).await;
    assert_eq!(search(store, "hexagonal").await.hits.len(), 0, "the old text is gone");
    let hits = search(store, "ports").await.hits;
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert!(hits[0].snippet.contains("layered"), "{hits:?}");
    let req = baton_proto::v1::ListMemoryRequest {
        project: "p".into(),
        category: "note".into(),
        ..Default::default()
    };
    let listed = service::memory::list(store, req, 100, None).await.unwrap();
    assert_eq!(listed.entries.len(), 1, "{listed:?}");
    let append = |word: String| PutMemoryRequest {
        project: "p".into(),
        category: "decision".into(),
        op: MemoryOp::Append as i32,
        items: vec![MemoryItem { content: word, ..Default::default() }],
        ..Default::default()
    };
    let mut evicted = Vec::new();
    for i in 0..6 {
        evicted.extend(put(store, ctx(None), append(format!("choice{i} made"))).await.evicted);
    }
    let evicted: Vec<&str> = evicted.iter().map(|e| e.content.as_str()).collect();
    assert_eq!(evicted, ["choice0 made"]);
    let decisions = |include_evicted| baton_proto::v1::ListMemoryRequest {
        project: "p".into(),
        category: "decision".into(),
        include_evicted,
        ..Default::default()
    };
    let live = service::memory::list(store, decisions(false), 100, None).await.unwrap().entries;
    let live: Vec<&str> = live.iter().map(|e| e.content.as_str()).collect();
    assert_eq!(live, ["choice1 made", "choice2 made", "choice3 made", "choice4 made", "choice5 made"]);
    let all = service::memory::list(store, decisions(true), 100, None).await.unwrap().entries;
    assert_eq!(
        all.iter().filter(|e| e.evicted).map(|e| e.content.as_str()).collect::<Vec<_>>(),
        ["choice0 made"]
    );
    assert_eq!(search(store, "choice0").await.hits.len(), 1, "evicted entries stay searchable");
    assert_eq!(revisions(store, "p").await, (1..=9).collect::<Vec<_>>());
}

/// A write through the store that deletes a record and writes it again with an entry of the
/// same id and a search document of the same key: the old rows go before the new ones come
/// (on Postgres, a write alone is one statement whose parts wait for the ones they follow).
async fn a_record_written_again_under_the_same_ids_keeps_its_new_rows<S: Store>(store: &S) {
    use baton_server::store::model::{Change, Entry, Index, Lock, Log, LoggedEvent};
    let write = |content: &'static str, again: bool| async move {
        let lock = Lock {
            project: "p".into(),
            request_id: None,
            memory: true,
            first_read: None,
            rewrites_log: false,
        };
        write_changes(store, lock, move |locked| {
            let entry = Entry {
                id: "e1".into(),
                category: "note".into(),
                branch: String::new(),
                key: "arch".into(),
                content: content.into(),
                rationale: String::new(),
                author: baton_proto::v1::Actor::default(),
                revision: locked.revision,
                seq: 0,
                created_us: locked.now_us,
                evicted: false,
                record_revision: locked.revision,
            };
            let document = note_doc("e1", "arch", content, locked);
            let record = "note/arch".to_owned();
            let mut changes = Vec::new();
            if again {
                changes.push(Change::Index(Index::DropRecord { record: record.clone() }));
                changes.push(Change::DeleteRecord { record: record.clone() });
            }
            changes.push(Change::InsertEntries { record, entries: vec![entry] });
            changes.push(Change::Index(Index::Put(Box::new(document))));
            let event = LoggedEvent { revision: locked.revision, kind: 1, body: Vec::new() };
            let log = Log { events: vec![event], conflicts: Vec::new(), request: None, head: None };
            (changes, log)
        })
        .await;
    };
    write("hexagonal ports", false).await;
    write("layered ports", true).await;
    let notes = baton_proto::v1::ListMemoryRequest {
        project: "p".into(),
        category: "note".into(),
        ..Default::default()
    };
    let notes = service::memory::list(store, notes, 100, None).await.unwrap().entries;
    assert_eq!(
        notes.iter().map(|e| (e.id.as_str(), e.content.as_str())).collect::<Vec<_>>(),
        [("e1", "layered ports")]
    );
    assert_eq!(search(store, "hexagonal").await.hits.len(), 0);
    assert_eq!(search(store, "layered").await.hits.len(), 1);
}

/// The search document of note `key` (entry `record_id`) holding `content`, as a write
/// that holds `locked` makes it.
fn note_doc(
    record_id: &str,
    key: &str,
    content: &str,
    locked: &baton_server::store::model::Locked,
) -> baton_server::store::model::SearchDoc {
    use baton_server::core::search::doc;
    let body = doc::memory(key, content, "");
    baton_server::store::model::SearchDoc {
        kind: baton_server::store::model::Kind::Memory,
        record_id: record_id.into(),
        record: format!("note/{key}"),
        session_id: String::new(),
        branch: String::new(),
        author: String::new(),
        created_us: locked.now_us,
        revision: locked.revision,
        words: doc::words(&body),
        body,
    }
}

/// Writes `n` search documents holding `text` into `project`, in one write.
async fn plant_documents<S: Store>(store: &S, project: &str, n: usize, text: &str) {
    use baton_server::store::model::{Change, Index, Lock, Log, LoggedEvent};
    let lock = Lock {
        project: project.to_owned(),
        request_id: None,
        memory: true,
        first_read: None,
        rewrites_log: false,
    };
    let text = text.to_owned();
    write_changes(store, lock, move |locked| {
        let changes = (0..n)
            .map(|i| {
                Change::Index(Index::Put(Box::new(note_doc(
                    &format!("planted-{i}"),
                    &format!("k{i}"),
                    &text,
                    locked,
                ))))
            })
            .collect();
        let event = LoggedEvent { revision: locked.revision, kind: 1, body: Vec::new() };
        (changes, Log { events: vec![event], conflicts: Vec::new(), request: None, head: None })
    })
    .await;
}

/// Writes what `changes` makes of the lock's revision and time as one write of `lock`'s
/// project, straight through the store.
async fn write_changes<S, F>(store: &S, lock: baton_server::store::model::Lock, changes: F)
where
    S: Store,
    F: FnOnce(
            &baton_server::store::model::Locked,
        ) -> (Vec<baton_server::store::model::Change>, baton_server::store::model::Log)
        + Send
        + 'static,
{
    let body: baton_server::store::WriteBody<S::Tx, ()> = Box::new(move |tx, locked| {
        Box::pin(async move {
            let (changes, log) = changes(&locked);
            (
                tx,
                Ok(baton_server::store::Decided {
                    value: (),
                    kept: Some(baton_server::store::Kept { changes, log }),
                }),
            )
        })
    });
    store.write(lock, body).await.unwrap();
}

/// A search whose statements run past their time limit is stopped by the engine itself
/// (SQLite's progress handler, Postgres's statement_timeout) and answers RESOURCE_EXHAUSTED
/// saying how to narrow it; the connection it ran on serves the next search as usual.
async fn a_search_stops_at_its_time_limit<S: Store>(store: &S) {
    plant_documents(store, "p", 3000, "common words of a busy project").await;
    let query = |limit| search_within(store, "common words", limit);
    let err = query(std::time::Duration::from_millis(1)).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::ResourceExhausted, "{err}");
    assert!(err.to_string().contains("--search-time-limit"), "{err}");
    for _ in 0..3 {
        assert_eq!(query(std::time::Duration::from_secs(30)).await.unwrap().hits.len(), 20);
    }
}

/// A search of project "p", through the service.
async fn search<S: Store>(store: &S, query: &str) -> baton_proto::v1::SearchResponse {
    search_within(store, query, std::time::Duration::from_secs(10)).await.unwrap()
}

/// The same, with this time limit.
async fn search_within<S: Store>(
    store: &S,
    query: &str,
    limit: std::time::Duration,
) -> Result<baton_proto::v1::SearchResponse, baton_server::error::Error> {
    let search = service::search::Search {
        project: "p".into(),
        query: baton_server::core::search::query::parse(query).unwrap(),
        kinds: Vec::new(),
        session_id: String::new(),
        branch: String::new(),
        author: String::new(),
        after_us: i64::MIN,
        before_us: i64::MAX,
    };
    service::search::search(store, search, 20, None, limit).await
}

async fn export_pages_every_row<S: Store>(store: &S) {
    for i in 0..5 {
        start(store, "p").await;
        put(store, ctx(None), note("p", &format!("k{i}"), "v")).await;
    }
    let mut seen = HashSet::new();
    for table in [Table::Sessions, Table::Memory, Table::Records] {
        let mut after = Cursor::default();
        let mut rows = 0;
        loop {
            let (lines, next) = service::export::page(store, "p".into(), table, after, 2).await.unwrap();
            rows += lines.len();
            for line in &lines {
                assert!(seen.insert(format!("{line:?}")), "a row exported twice: {line:?}");
            }
            match next {
                Some(cursor) => after = cursor,
                None => break,
            }
        }
        assert_eq!(rows, 5, "{table:?}");
    }
}

/// Postgres only: a write after the writer's connection broke while idle (a restart, an
/// idle timeout) runs on a new one; the client sees no error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_after_the_writers_connection_broke_while_idle_succeeds() {
    let url = baton_tests::postgres::fresh_database().await.unwrap();
    let store =
        baton_server::store::PgStore::connect(&url, baton_server::events::Wakers::default()).await.unwrap();
    put(&store, ctx(None), note("p", "a", "first")).await;
    let admin = sqlx::PgPool::connect(&url).await.unwrap();
    let killed = baton_tests::postgres::terminate_idle_after(&admin, "SELECT 1; COMMIT").await.unwrap();
    assert_eq!(killed, vec![true], "the writer's lane keeps its connection between batches");
    let reply = service::memory::put(&store, ctx(None), note("p", "b", "second")).await;
    assert!(reply.is_ok(), "the write ran on a new connection: {reply:?}");
    assert_eq!(revisions(&store, "p").await, vec![1, 2]);
    Store::close(&store).await;
}

/// Postgres only: a write that waited for its project's lock while another server's write
/// of the same project committed reads what that write made (its first read is read after
/// the wait, not with a snapshot taken before it): here the conflict with it is reported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_that_waited_for_the_lock_reads_what_committed_meanwhile() {
    let url = baton_tests::postgres::fresh_database().await.unwrap();
    let wakers = baton_server::events::Wakers::default;
    let (a, b) = (
        baton_server::store::PgStore::connect(&url, wakers()).await.unwrap(),
        baton_server::store::PgStore::connect(&url, wakers()).await.unwrap(),
    );
    let set = |item: &str| PutMemoryRequest {
        project: "p".into(),
        category: "constraint".into(),
        op: MemoryOp::ReplaceSet as i32,
        items: vec![MemoryItem { content: item.into(), ..Default::default() }],
        ..Default::default()
    };
    put(&a, ctx(None), set("first")).await;
    // A transaction outside Baton holds the row while both servers' writes queue for it, a
    // first, each based on revision 1.
    let admin = sqlx::PgPool::connect(&url).await.unwrap();
    let mut holder = admin.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM projects WHERE key = 'p' FOR UPDATE").execute(&mut *holder).await.unwrap();
    let behind = || WriteCtx { base_revision: Some(1), ..ctx(None) };
    let first = tokio::spawn({
        let a = a.clone();
        async move { service::memory::put(&a, behind(), set("from a")).await }
    });
    waiting_for_locks(&admin, 1).await;
    let second = tokio::spawn({
        let b = b.clone();
        async move { service::memory::put(&b, behind(), set("from b")).await }
    });
    waiting_for_locks(&admin, 2).await;
    holder.rollback().await.unwrap();
    let first = first.await.unwrap().unwrap().result.unwrap();
    assert_eq!((first.revision, first.outcome), (2, WriteOutcome::Applied as i32));
    let second = second.await.unwrap().unwrap().result.unwrap();
    assert_eq!(second.revision, 3);
    assert_eq!(second.outcome, WriteOutcome::Overwritten as i32, "b saw a's write, made while it waited");
    assert!(second.conflict.is_some());
    Store::close(&a).await;
    Store::close(&b).await;
}

/// Postgres only: a write in a batch whose changes the database refuses is undone alone:
/// it gets the error, the writes around it are kept, the log gapless, and a later write of
/// the batch reads what the earlier ones made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_refused_in_a_batch_is_undone_alone() {
    // The database refuses one entry, and says which statement it came with.
    let (store, admin, holder) = behind_a_held_row(
        "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
         IF NEW.content = 'refuse me' THEN RAISE EXCEPTION 'refused under %', current_query(); END IF; \
         RETURN NEW; END $$; \
         CREATE TRIGGER refuse BEFORE INSERT ON memory FOR EACH ROW EXECUTE FUNCTION refuse()",
    )
    .await;
    // Three writes queue behind a transaction that holds the project's row, in order.
    let spawn = |key, content| spawn_put(&store, ctx(None), key, content);
    let first = spawn("b", "kept");
    waiting_for_locks(&admin, 1).await;
    let refused = spawn("c", "refuse me");
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let last = spawn("d", "kept too");
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    // Based on revision 1, on d's record: it conflicts with d only if it sees d's write.
    let after = spawn_put(&store, WriteCtx { base_revision: Some(1), ..ctx(None) }, "d", "after d");
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    holder.rollback().await.unwrap();
    assert_eq!(first.await.unwrap().unwrap().result.unwrap().revision, 2);
    assert!(refused.await.unwrap().is_err());
    assert_eq!(last.await.unwrap().unwrap().result.unwrap().revision, 3);
    let after = after.await.unwrap().unwrap().result.unwrap();
    assert_eq!((after.revision, after.outcome), (4, WriteOutcome::Overwritten as i32), "it read d's write");
    assert_eq!(revisions(&store, "p").await, vec![1, 2, 3, 4]);
    let keys: Vec<String> = sqlx::query_scalar("SELECT key FROM memory WHERE project = 'p' ORDER BY key")
        .fetch_all(&admin)
        .await
        .unwrap();
    assert_eq!(keys, vec!["a", "b", "d"]);
    Store::close(&store).await;
}

/// Postgres only: a write whose changes the database refuses is rolled back alone: the
/// log stays gapless, and the writer's lane goes on with the same connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_write_rolls_back_alone_and_the_lane_keeps_its_connection() {
    let url = baton_tests::postgres::fresh_database().await.unwrap();
    let store =
        baton_server::store::PgStore::connect(&url, baton_server::events::Wakers::default()).await.unwrap();
    let admin = sqlx::PgPool::connect(&url).await.unwrap();
    // The database refuses one entry, says which statement it came with, and notes which
    // connection wrote each entry it kept.
    sqlx::raw_sql(
        "CREATE TABLE written_by (content TEXT, pid INTEGER); \
         CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
         IF NEW.content = 'refuse me' THEN RAISE EXCEPTION 'refused under %', current_query(); END IF; \
         INSERT INTO written_by VALUES (NEW.content, pg_backend_pid()); RETURN NEW; END $$; \
         CREATE TRIGGER refuse BEFORE INSERT ON memory FOR EACH ROW EXECUTE FUNCTION refuse()",
    )
    .execute(&admin)
    .await
    .unwrap();
    put(&store, ctx(None), note("p", "a", "first")).await;
    let refused = service::memory::put(&store, ctx(None), note("p", "b", "refuse me")).await;
    assert!(refused.is_err(), "{refused:?}");
    let reply = put(&store, ctx(None), note("p", "c", "kept")).await;
    assert_eq!(reply.result.unwrap().revision, 2);
    assert_eq!(revisions(&store, "p").await, vec![1, 2]);
    let written: Vec<(String, i32)> = sqlx::query_as("SELECT content, pid FROM written_by ORDER BY content")
        .fetch_all(&admin)
        .await
        .unwrap();
    assert_eq!(written.len(), 2, "{written:?}");
    assert_eq!((written[0].0.as_str(), written[1].0.as_str()), ("first", "kept"));
    assert_eq!(written[0].1, written[1].1, "the lane kept its connection: {written:?}");
    Store::close(&store).await;
}

/// Postgres only: a write whose request is cancelled while its batch runs is made all the
/// same (the writer runs it to its end), and every other write of the batch is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_cancelled_while_its_batch_runs_is_made_and_the_batch_kept() {
    // The database takes half a second over one entry.
    let (store, admin, holder) = behind_a_held_row(
        "CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
         IF NEW.content = 'slow' THEN PERFORM pg_sleep(0.5); END IF; RETURN NEW; END $$; \
         CREATE TRIGGER slow BEFORE INSERT ON memory FOR EACH ROW EXECUTE FUNCTION slow()",
    )
    .await;
    let spawn = |key, content| spawn_put(&store, ctx(None), key, content);
    let first = spawn("b", "kept");
    waiting_for_locks(&admin, 1).await;
    let slow = spawn("c", "slow");
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    // Queued behind c, and cancelled while c's changes are made.
    let cancelled = spawn("d", "cancelled");
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    holder.rollback().await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    cancelled.abort();
    assert_eq!(first.await.unwrap().unwrap().result.unwrap().revision, 2);
    assert_eq!(slow.await.unwrap().unwrap().result.unwrap().revision, 3);
    assert!(cancelled.await.unwrap_err().is_cancelled());
    assert_eq!(put(&store, ctx(None), note("p", "e", "after")).await.result.unwrap().revision, 5);
    assert_eq!(revisions(&store, "p").await, vec![1, 2, 3, 4, 5]);
    Store::close(&store).await;
}

/// Postgres only: a repeated request id answered from a write of the same batch (its reply
/// read in the batch's transaction) is answered once that write is durable: when the batch's
/// commit fails, the repeat fails too, never a reply for a write that was not kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeat_answered_from_its_own_batch_waits_for_the_commit() {
    // The database refuses one entry at COMMIT.
    let (store, admin, holder) = behind_a_held_row(
        "CREATE FUNCTION fail_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
         RAISE EXCEPTION 'refused at commit'; END $$; \
         CREATE CONSTRAINT TRIGGER fail_at_commit AFTER INSERT ON memory DEFERRABLE INITIALLY DEFERRED \
         FOR EACH ROW WHEN (NEW.content = 'fails at commit') EXECUTE FUNCTION fail_at_commit()",
    )
    .await;
    let spawn = || spawn_put(&store, ctx(Some("r1")), "k", "fails at commit");
    let original = spawn();
    waiting_for_locks(&admin, 1).await;
    let repeat = spawn();
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    holder.rollback().await.unwrap();
    assert!(original.await.unwrap().is_err(), "its batch did not commit");
    let repeat = repeat.await.unwrap();
    assert!(repeat.is_err(), "answered with a reply that was never kept: {repeat:?}");
    assert_eq!(revisions(&store, "p").await, vec![1]);
    Store::close(&store).await;
}

/// Postgres only: a store on a new database whose project `p` has one write, `sql` run
/// there (the trigger a case needs), and a transaction outside Baton that holds `p`'s row,
/// so that writes queue behind it in the order they come.
async fn behind_a_held_row(
    sql: &'static str,
) -> (baton_server::store::PgStore, sqlx::PgPool, sqlx::Transaction<'static, sqlx::Postgres>) {
    let url = baton_tests::postgres::fresh_database().await.unwrap();
    let store =
        baton_server::store::PgStore::connect(&url, baton_server::events::Wakers::default()).await.unwrap();
    put(&store, ctx(None), note("p", "a", "first")).await;
    let admin = sqlx::PgPool::connect(&url).await.unwrap();
    sqlx::raw_sql(sql).execute(&admin).await.unwrap();
    let mut holder = admin.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM projects WHERE key = 'p' FOR UPDATE").execute(&mut *holder).await.unwrap();
    (store, admin, holder)
}

/// A note upsert in `p`, under way.
fn spawn_put<S: Store + Clone + 'static>(
    store: &S,
    ctx: WriteCtx,
    key: &'static str,
    content: &'static str,
) -> tokio::task::JoinHandle<Result<baton_proto::v1::PutMemoryResponse, Error>> {
    let store = store.clone();
    tokio::spawn(async move { service::memory::put(&store, ctx, note("p", key, content)).await })
}

/// Waits until `n` connections of the database wait for a lock.
async fn waiting_for_locks(admin: &sqlx::PgPool, n: i64) {
    for _ in 0..500 {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()",
        )
        .fetch_one(admin)
        .await
        .unwrap();
        if waiting >= n {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("{n} connections never waited for a lock");
}

/// A thread's checkpoints: keys ordered by their bytes (whatever the database's collation),
/// metadata filters meaning the same on both backends, pending writes by key.
async fn thread_checkpoints_order_by_bytes_and_filter_alike<S: Store>(store: &S) {
    use baton_server::core::thread::{filter, metadata};
    use baton_server::service::thread::{self, Labels, NewThreadCheckpoint, ThreadName};
    let name = ThreadName { project: "p".into(), thread: "t".into(), namespace: String::new() };
    let docs = [
        ("B-2", r#"{"flag": true, "n": 1, "dotted.key": "x", "o": {"b": [1, 2], "a": null}}"#),
        ("a-1", r#"{"flag": 1, "n": 1.5, "text": "żółw 🐢", "with space": "y"}"#),
        ("a_1", r#"{"flag": false, "n": -1, "o": {"a": null, "b": [1, 2]}}"#),
        ("Z", r#"{"none": null}"#),
    ];
    for (key, doc) in docs {
        let new = NewThreadCheckpoint {
            name: name.clone(),
            key: key.into(),
            parent_key: String::new(),
            metadata: metadata("metadata_json", doc, |_| {}).unwrap(),
            state: baton_proto::v1::CheckpointState::default(),
            payload: key.as_bytes().to_vec(),
            payload_content_type: String::new(),
            blobs: Vec::new(),
            chunk_digests: Vec::new(),
            carried: Vec::new(),
            id: uuid::Uuid::now_v7(),
            id_given: false,
            labels: Labels::default(),
        };
        thread::put(store, ctx(None), new).await.unwrap();
    }
    let listed = |text: &str| {
        let query = thread::ListQuery {
            project: "p".into(),
            filter: filter("f", text).unwrap(),
            page_size: 100,
            ..thread::ListQuery::default()
        };
        async move {
            let page = thread::list(store, query).await.unwrap();
            page.checkpoints.into_iter().map(|c| c.key).collect::<Vec<_>>()
        }
    };
    // Byte order: 'B' < 'Z' < 'a'; '-' < '_'.
    assert_eq!(listed("").await, ["a_1", "a-1", "Z", "B-2"]);
    assert_eq!(listed(r#"{"flag": true}"#).await, ["B-2"], "true is not 1");
    assert_eq!(listed(r#"{"flag": 1}"#).await, ["a-1"]);
    assert_eq!(listed(r#"{"flag": false}"#).await, ["a_1"]);
    assert_eq!(listed(r#"{"n": 1}"#).await, ["B-2"]);
    assert_eq!(listed(r#"{"n": 1.5}"#).await, ["a-1"]);
    assert_eq!(
        listed(r#"{"o": {"a": null, "b": [1, 2]}}"#).await,
        ["a_1", "B-2"],
        "key order does not matter"
    );
    assert!(listed(r#"{"o": {"b": [2, 1], "a": null}}"#).await.is_empty(), "array order does");
    assert_eq!(listed(r#"{"none": null}"#).await, ["Z"], "null matches a present null only");
    assert_eq!(listed(r#"{"dotted.key": "x"}"#).await, ["B-2"]);
    assert_eq!(listed(r#"{"with space": "y", "text": "żółw 🐢"}"#).await, ["a-1"]);
    assert!(listed(r#"{"text": "zolw"}"#).await.is_empty());
    // Pending writes: by task path, task and index; the first regular write of a key kept.
    let write = |task: &str, idx: i32, value: &str| baton_server::store::model::PendingWrite {
        checkpoint_id: String::new(),
        task_id: task.into(),
        idx,
        channel: "c".into(),
        task_path: String::new(),
        value_type: "bytes".into(),
        value: value.as_bytes().to_vec(),
        revision: 0,
    };
    let writes = vec![write("b", 0, "1"), write("a", 1, "2"), write("a", -1, "3")];
    thread::put_writes(store, ctx(None), name.clone(), "Z".into(), writes, 1 << 20).await.unwrap();
    let again = vec![write("b", 0, "other"), write("a", -1, "4")];
    thread::put_writes(store, ctx(None), name.clone(), "Z".into(), again, 1 << 20).await.unwrap();
    let got = thread::get(store, name, Some("Z".into())).await.unwrap().checkpoint.unwrap();
    let shown: Vec<(String, i32, Vec<u8>)> =
        got.writes.into_iter().map(|w| (w.task_id, w.index, w.value)).collect();
    assert_eq!(
        shown,
        [("a".into(), -1, b"4".to_vec()), ("a".into(), 1, b"2".to_vec()), ("b".into(), 0, b"1".to_vec())]
    );
}
