//! Memory: REPLACE_SET with caps, APPEND with eviction, UPSERT notes, branch scope,
//! per-project caps, deletes, authors.

use baton_proto::v1::{
    ConflictPolicy, DeleteMemoryRequest, ListMemoryRequest, MemoryItem, MemoryOp, PutMemoryRequest,
    RecordRef, SetMemoryCapsRequest, WriteOutcome, delete_memory_request,
};
use baton_tests::{Backend, Clients, Server, both};
use tonic::Code;

use crate::{all_events, assert_gapless, based, code, project, put_note, write};

fn items(texts: &[&str]) -> Vec<MemoryItem> {
    texts.iter().map(|t| MemoryItem { content: (*t).into(), rationale: format!("because {t}") }).collect()
}

async fn put(
    c: &mut Clients,
    p: &str,
    category: &str,
    branch: &str,
    op: MemoryOp,
    texts: &[&str],
) -> Result<baton_proto::v1::PutMemoryResponse, tonic::Status> {
    c.memory
        .put_memory(PutMemoryRequest {
            project: p.into(),
            category: category.into(),
            branch: branch.into(),
            op: op as i32,
            items: items(texts),
            write: write(),
            ..Default::default()
        })
        .await
        .map(tonic::Response::into_inner)
}

async fn list(c: &mut Clients, p: &str, category: &str, evicted: bool) -> Vec<baton_proto::v1::MemoryEntry> {
    c.memory
        .list_memory(ListMemoryRequest {
            project: p.into(),
            category: category.into(),
            include_evicted: evicted,
            branch: None,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .entries
}

fn contents(entries: &[baton_proto::v1::MemoryEntry]) -> Vec<String> {
    entries.iter().map(|e| e.content.clone()).collect()
}

async fn categories(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();

    // Current-state: the whole set is replaced; over the cap is refused.
    put(&mut c, &p, "constraint", "", MemoryOp::ReplaceSet, &["no cloud", "fast"]).await.unwrap();
    put(&mut c, &p, "constraint", "", MemoryOp::ReplaceSet, &["only this"]).await.unwrap();
    assert_eq!(contents(&list(&mut c, &p, "constraint", false).await), ["only this"]);
    let (code1, msg) = code(put(&mut c, &p, "goal", "", MemoryOp::ReplaceSet, &["a", "b"]).await);
    assert_eq!(code1, Code::InvalidArgument);
    assert!(msg.contains("at most 1") && msg.contains("goal"), "{msg}");
    let (code2, msg) = code(put(&mut c, &p, "goal", "", MemoryOp::Append, &["a"]).await);
    assert_eq!(code2, Code::InvalidArgument);
    assert!(msg.contains("REPLACE_SET"), "{msg}");

    // History: appends; beyond the cap (decision: 5) the oldest are evicted, named in the
    // reply, still listable.
    for i in 0..5 {
        let r = put(&mut c, &p, "decision", "", MemoryOp::Append, &[&format!("d{i}")]).await.unwrap();
        assert!(r.evicted.is_empty());
    }
    let r = put(&mut c, &p, "decision", "", MemoryOp::Append, &["d5", "d6"]).await.unwrap();
    assert_eq!(contents(&r.evicted), ["d0", "d1"]);
    assert_eq!(contents(&list(&mut c, &p, "decision", false).await), ["d2", "d3", "d4", "d5", "d6"]);
    let all = list(&mut c, &p, "decision", true).await;
    assert_eq!(all.len(), 7);
    assert!(all.iter().filter(|e| e.evicted).count() == 2);
    assert_eq!(all[0].rationale, "because d0");
    // session_summary keeps 1.
    put(&mut c, &p, "session_summary", "", MemoryOp::Append, &["s1"]).await.unwrap();
    let r = put(&mut c, &p, "session_summary", "", MemoryOp::Append, &["s2"]).await.unwrap();
    assert_eq!(contents(&r.evicted), ["s1"]);

    // Caps are per project.
    let caps = c
        .memory
        .set_memory_caps(SetMemoryCapsRequest {
            project: p.clone(),
            caps: [("decision".to_owned(), 2)].into(),
            write: write(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(caps.caps["decision"], 2);
    assert_eq!(caps.caps["constraint"], 5);
    let r = put(&mut c, &p, "decision", "", MemoryOp::Append, &["d7"]).await.unwrap();
    assert_eq!(contents(&r.evicted), ["d2", "d3", "d4", "d5"]);
    let other = project();
    assert_eq!(put(&mut c, &other, "decision", "", MemoryOp::Append, &["x"]).await.unwrap().evicted.len(), 0);

    // Notes: one value per key; branch scope keeps records apart; authors recorded.
    put_note(&mut c, &p, "arch", "hexagonal", write()).await.unwrap();
    put_note(&mut c, &p, "arch", "layered", write()).await.unwrap();
    put(&mut c, &p, "open_loop", "feature/x", MemoryOp::ReplaceSet, &["branch loop"]).await.unwrap();
    put(&mut c, &p, "open_loop", "", MemoryOp::ReplaceSet, &["main loop"]).await.unwrap();
    let notes = list(&mut c, &p, "note", false).await;
    assert_eq!(contents(&notes), ["layered"]);
    assert_eq!(notes[0].author.as_ref().unwrap().host, "test-host");
    let scoped = c
        .memory
        .list_memory(ListMemoryRequest {
            project: p.clone(),
            category: "open_loop".into(),
            branch: Some("feature/x".into()),
            include_evicted: false,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(contents(&scoped.entries), ["branch loop"]);
    assert_eq!(list(&mut c, &p, "open_loop", false).await.len(), 2);
    assert!(
        scoped.record_revisions.contains_key("memory/open_loop@feature/x"),
        "{:?}",
        scoped.record_revisions
    );

    assert_gapless(&all_events(&mut c, &p).await);
}
both!(categories);

async fn deletes_and_concurrent_adds(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    put(&mut c, &p, "open_loop", "", MemoryOp::ReplaceSet, &["a", "b", "c"]).await.unwrap();
    let entries = list(&mut c, &p, "open_loop", false).await;
    let rev = entries[0].record_revision;
    // "memory add" = read the set, write set + item with the read revision as base: two
    // concurrent adds from the same read are detected, never silently lost.
    let add = |extra: &'static str| {
        let mut c = c.clone();
        let p = p.clone();
        let mut texts: Vec<String> = contents(&entries);
        texts.push(extra.into());
        async move {
            c.memory
                .put_memory(PutMemoryRequest {
                    project: p,
                    category: "open_loop".into(),
                    op: MemoryOp::ReplaceSet as i32,
                    items: texts
                        .iter()
                        .map(|t| MemoryItem { content: t.clone(), ..Default::default() })
                        .collect(),
                    write: based(rev, ConflictPolicy::Reject),
                    ..Default::default()
                })
                .await
        }
    };
    let first = add("d").await.unwrap().into_inner();
    assert_eq!(first.result.unwrap().outcome, WriteOutcome::Applied as i32);
    let second = add("e").await.unwrap_err();
    assert_eq!(second.code(), Code::Aborted);

    // Delete one entry of a set; then a whole note; unknown ids are NOT_FOUND.
    let b = list(&mut c, &p, "open_loop", false).await.into_iter().find(|e| e.content == "b").unwrap();
    let del = c
        .memory
        .delete_memory(DeleteMemoryRequest {
            project: p.clone(),
            target: Some(delete_memory_request::Target::EntryId(b.id.clone())),
            write: write(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(del.deleted_ids, vec![b.id]);
    assert_eq!(contents(&list(&mut c, &p, "open_loop", false).await), ["a", "c", "d"]);
    put_note(&mut c, &p, "conv", "snake_case", write()).await.unwrap();
    c.memory
        .delete_memory(DeleteMemoryRequest {
            project: p.clone(),
            target: Some(delete_memory_request::Target::Record(RecordRef {
                category: "note".into(),
                key: "conv".into(),
                branch: String::new(),
            })),
            write: write(),
        })
        .await
        .unwrap();
    assert!(list(&mut c, &p, "note", false).await.is_empty());
    let (code1, _) = code(
        c.memory
            .delete_memory(DeleteMemoryRequest {
                project: p.clone(),
                target: Some(delete_memory_request::Target::EntryId(uuid::Uuid::now_v7().to_string())),
                write: write(),
            })
            .await,
    );
    assert_eq!(code1, Code::NotFound);
    // History: one entry, then the whole record; never a conflict.
    put(&mut c, &p, "decision", "", MemoryOp::Append, &["x", "y", "z"]).await.unwrap();
    let x = list(&mut c, &p, "decision", false).await.into_iter().find(|e| e.content == "x").unwrap();
    c.memory
        .delete_memory(DeleteMemoryRequest {
            project: p.clone(),
            target: Some(delete_memory_request::Target::EntryId(x.id)),
            write: write(),
        })
        .await
        .unwrap();
    assert_eq!(contents(&list(&mut c, &p, "decision", false).await), ["y", "z"]);
    let all = c
        .memory
        .delete_memory(DeleteMemoryRequest {
            project: p.clone(),
            target: Some(delete_memory_request::Target::Record(RecordRef {
                category: "decision".into(),
                ..Default::default()
            })),
            write: write(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(all.deleted_ids.len(), 2);
    assert!(list(&mut c, &p, "decision", true).await.is_empty());
    // And the log still replays to what is stored.
    let events = all_events(&mut c, &p).await;
    assert_gapless(&events);
    let stored = c
        .memory
        .list_memory(ListMemoryRequest { project: p.clone(), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    let mut expected: std::collections::BTreeMap<String, Vec<String>> = std::collections::BTreeMap::default();
    for e in &stored.entries {
        let record =
            if e.category == "note" { format!("note/{}", e.key) } else { format!("memory/{}", e.category) };
        expected.entry(record).or_default().push(e.content.clone());
    }
    assert_eq!(crate::concurrency::replay_memory(&events), expected);
}
both!(deletes_and_concurrent_adds);

/// Quotes, backslashes, SQL and non-ASCII text in a project key, a note's key and a request
/// id (values the Postgres writer sends as literals, `lock_project`) are stored and matched
/// exactly: the note is written, replayed by its request id, overwritten, listed, deleted.
async fn quoted_names(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = format!("{}/it's \\ a \"quoted\" ' OR '1'='1 \\'; -- ü/プロジェクト", project());
    let key = "x'); DROP TABLE memory; --\\";
    let mut w = write();
    if let Some(w) = w.as_mut() {
        w.request_id = format!("req-'\\'-{}", w.request_id);
    }
    let first = put_note(&mut c, &p, key, "first 'value' \\", w.clone()).await.unwrap();
    let first_result = first.result.clone().unwrap();
    assert_eq!(first_result.outcome, WriteOutcome::Applied as i32);
    let replay = put_note(&mut c, &p, key, "first 'value' \\", w).await.unwrap().result.unwrap();
    assert!(replay.replayed, "the same request id is recognised");
    assert_eq!(replay.revision, first_result.revision);
    let second = put_note(&mut c, &p, key, "second", write()).await.unwrap();
    assert_eq!(second.result.unwrap().outcome, WriteOutcome::Applied as i32);
    let notes = list(&mut c, &p, "note", false).await;
    assert_eq!(contents(&notes), vec!["second"]);
    assert_eq!(notes[0].key, key);
    assert_eq!(notes[0].project, p);
    let deleted = c
        .memory
        .delete_memory(DeleteMemoryRequest {
            project: p.clone(),
            target: Some(delete_memory_request::Target::Record(RecordRef {
                category: "note".into(),
                branch: String::new(),
                key: key.into(),
            })),
            write: write(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(deleted.deleted_ids, vec![notes[0].id.clone()]);
    assert!(list(&mut c, &p, "note", false).await.is_empty());
    assert_gapless(&all_events(&mut c, &p).await);
}
both!(quoted_names);

/// ADD_ITEM / REMOVE_ITEM: one item into or out of a current-state set as it is when the
/// write arrives. Concurrent adds all land; a queued one is never STALE (a REPLACE_SET
/// queued as long ago is); over the cap is FAILED_PRECONDITION naming the cap; a base that
/// is not the set's revision is reported (or refused with REJECT); history and notes refuse.
async fn set_items(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let first = put(&mut c, &p, "constraint", "", MemoryOp::AddItem, &["a"]).await.unwrap();
    assert_eq!(contents(&first.entries), vec!["a"]);
    assert_eq!(first.result.unwrap().outcome, WriteOutcome::Applied as i32);
    let adds: Vec<_> = ["b", "c", "d", "e"]
        .into_iter()
        .map(|t| {
            let mut c = c.clone();
            let p = p.clone();
            tokio::spawn(async move { put(&mut c, &p, "constraint", "", MemoryOp::AddItem, &[t]).await })
        })
        .collect();
    for add in adds {
        let reply = add.await.unwrap().unwrap();
        assert_eq!(reply.result.unwrap().outcome, WriteOutcome::Applied as i32, "no base: no conflict");
    }
    let mut held = contents(&list(&mut c, &p, "constraint", false).await);
    held.sort();
    assert_eq!(held, vec!["a", "b", "c", "d", "e"], "every concurrent add landed");

    let (status, message) = code(put(&mut c, &p, "constraint", "", MemoryOp::AddItem, &["f"]).await);
    assert_eq!(status, Code::FailedPrecondition, "{message}");
    assert!(message.contains("memory/constraint holds at most 5"), "{message}");
    let again = put(&mut c, &p, "constraint", "", MemoryOp::AddItem, &[" a "]).await.unwrap();
    assert!(again.entries.is_empty(), "an item already there is not added twice (nor over the cap)");

    let removed = put(&mut c, &p, "constraint", "", MemoryOp::RemoveItem, &["b", "zzz"]).await.unwrap();
    assert_eq!(contents(&removed.removed), vec!["b"]);
    let mut held = contents(&list(&mut c, &p, "constraint", false).await);
    held.sort();
    assert_eq!(held, vec!["a", "c", "d", "e"]);

    // A base the set has moved past: applied and reported, or refused under REJECT.
    let revision = |c: &mut Clients| {
        let mut c = c.clone();
        let p = p.clone();
        async move {
            c.memory
                .list_memory(ListMemoryRequest {
                    project: p,
                    category: "constraint".into(),
                    ..Default::default()
                })
                .await
                .unwrap()
                .into_inner()
                .record_revisions["memory/constraint"]
        }
    };
    let now = revision(&mut c).await;
    let item_with = |content: &str, w| PutMemoryRequest {
        project: p.clone(),
        category: "constraint".into(),
        op: MemoryOp::AddItem as i32,
        items: items(&[content]),
        write: w,
        ..Default::default()
    };
    let refused = c.memory.put_memory(item_with("g", based(now - 1, ConflictPolicy::Reject))).await;
    assert_eq!(code(refused).0, Code::Aborted);
    let reported = c
        .memory
        .put_memory(item_with("g", based(now - 1, ConflictPolicy::Overwrite)))
        .await
        .unwrap()
        .into_inner();
    let result = reported.result.unwrap();
    assert_eq!(result.outcome, WriteOutcome::Overwritten as i32);
    let conflict = result.conflict.expect("the conflict is reported");
    assert_eq!((conflict.record.as_str(), conflict.base_revision), ("memory/constraint", Some(now - 1)));
    let applied = c.memory.put_memory(item_with("h", based(result.revision, ConflictPolicy::Reject))).await;
    assert_eq!(code(applied).0, Code::FailedPrecondition, "based right, but the set is full");

    // Queued long ago (written a day before the set's last write): still applied.
    let queued = |content: &str, op: MemoryOp| {
        let mut w = write();
        if let Some(w) = w.as_mut() {
            let now = std::time::SystemTime::now();
            w.written_at = Some((now - std::time::Duration::from_hours(24)).into());
            w.client_now = Some(now.into());
        }
        PutMemoryRequest {
            project: p.clone(),
            category: "open_loop".into(),
            op: op as i32,
            items: items(&[content]),
            write: w,
            ..Default::default()
        }
    };
    put(&mut c, &p, "open_loop", "", MemoryOp::ReplaceSet, &["live"]).await.unwrap();
    let stale = c.memory.put_memory(queued("old set", MemoryOp::ReplaceSet)).await.unwrap().into_inner();
    assert_eq!(
        stale.result.unwrap().outcome,
        WriteOutcome::Stale as i32,
        "a queued REPLACE_SET is last-write-wins"
    );
    let added = c.memory.put_memory(queued("offline item", MemoryOp::AddItem)).await.unwrap().into_inner();
    assert_eq!(added.result.unwrap().outcome, WriteOutcome::Applied as i32);
    let removed = c.memory.put_memory(queued("live", MemoryOp::RemoveItem)).await.unwrap().into_inner();
    assert_eq!(removed.result.unwrap().outcome, WriteOutcome::Applied as i32);
    assert_eq!(contents(&list(&mut c, &p, "open_loop", false).await), vec!["offline item"]);

    for (category, key) in [("decision", ""), ("note", "k")] {
        let r = c
            .memory
            .put_memory(PutMemoryRequest {
                project: p.clone(),
                category: category.into(),
                key: key.into(),
                op: MemoryOp::AddItem as i32,
                items: items(&["x"]),
                write: write(),
                ..Default::default()
            })
            .await;
        let (status, message) = code(r);
        assert_eq!(status, Code::InvalidArgument, "{message}");
        assert!(message.contains("current-state"), "{message}");
    }
    let (status, _) = code(put(&mut c, &p, "constraint", "", MemoryOp::RemoveItem, &[]).await);
    assert_eq!(status, Code::InvalidArgument);

    // The log carries the whole set after each item operation.
    let events = all_events(&mut c, &p).await;
    assert_gapless(&events);
    let last = events.last().unwrap();
    match &last.value {
        Some(baton_proto::v1::event::Value::Memory(m)) => {
            assert_eq!(m.op, MemoryOp::RemoveItem as i32);
            assert_eq!(contents(&m.entries), vec!["offline item"]);
            assert_eq!(m.deleted_ids.len(), 1);
        }
        other => panic!("expected a memory event, got {other:?}"),
    }
    let replayed = crate::concurrency::replay_memory(&events);
    for category in ["constraint", "open_loop"] {
        let mut stored = contents(&list(&mut c, &p, category, false).await);
        let mut from_log = replayed[&format!("memory/{category}")].clone();
        stored.sort();
        from_log.sort();
        assert_eq!(from_log, stored, "the log replays to {category}");
    }
}
both!(set_items);

/// Decisions a model extracted from sessions (`extracted_decision`) are a history of their
/// own: however many arrive, the decisions recorded on purpose stay, and the brief shows
/// both, the extracted ones marked.
async fn extracted_decisions_never_evict_deliberate_ones(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    for i in 0..5 {
        put(&mut c, &p, "decision", "", MemoryOp::Append, &[&format!("deliberate {i}")]).await.unwrap();
    }
    for i in 0..12 {
        put(&mut c, &p, "extracted_decision", "", MemoryOp::Append, &[&format!("extracted {i}")])
            .await
            .unwrap();
    }
    let deliberate = list(&mut c, &p, "decision", false).await;
    assert_eq!(deliberate.len(), 5, "{deliberate:?}");
    let extracted = list(&mut c, &p, "extracted_decision", false).await;
    assert_eq!(extracted.len(), 10, "its own cap: {extracted:?}");
    assert!(
        extracted.iter().all(|e| e.content != "extracted 0" && e.content != "extracted 1"),
        "oldest evicted"
    );
    let (code, msg) = code(put(&mut c, &p, "extracted_decision", "", MemoryOp::ReplaceSet, &["x"]).await);
    assert_eq!(code, Code::InvalidArgument, "{msg}");
    let brief = crate::brief_text(&mut c, &p, "").await;
    assert!(brief.contains("- deliberate 4 (why: because deliberate 4)"), "{brief}");
    assert!(brief.contains("- (machine-written) extracted 11 (why: because extracted 11)"), "{brief}");
    let deliberate_at = brief.find("deliberate 4").unwrap();
    assert!(brief.find("(machine-written) extracted 11").unwrap() > deliberate_at, "deliberate ones first");
}
both!(extracted_decisions_never_evict_deliberate_ones);
