//! Lists in pages by count and by bytes (issue 16, item 11): whatever others stored, one
//! reply stays within the reply budget, and following `next_page_token` reads every item
//! once, in the list's order. And the state digest: lists and the brief verify states
//! without reading payloads, and rows older than the digest get it at start-up.

use baton_proto::v1::{
    CheckpointKind, CheckpointState, ConflictPolicy, CreateCheckpointRequest, Event, GetCheckpointRequest,
    ListCheckpointsRequest, ListConflictsRequest, ListEventsRequest, ListMemoryRequest, MemoryItem, MemoryOp,
    PutMemoryRequest, Task, WatchCursor, WatchRequest,
};
use baton_tests::{Backend, Clients, Server, both};
use futures::StreamExt as _;
use prost::Message as _;
use tonic::Code;

use crate::checkpoints::checkpoint;
use crate::{
    all_events, assert_gapless, based, brief_text, code, go_idle, project, put_note, start_session, write,
};

/// What one reply may carry in items (besides one larger item alone), as the proto says.
const BUDGET: usize = 3 * 1024 * 1024;

/// `n` bytes of text that neither compresses to nothing nor looks like a secret.
fn text(seed: u64, n: usize) -> String {
    const WORDS: [&str; 16] = [
        "store", "page", "budget", "brief", "watch", "event", "memory", "session", "token", "revision",
        "digest", "state", "branch", "resume", "hook", "agent",
    ];
    let mut x = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
    let mut out = String::with_capacity(n + 16);
    while out.len() < n {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        out.push_str(WORDS[(x >> 60) as usize]);
        out.push(' ');
    }
    out.truncate(n);
    out
}

/// A checkpoint whose state is about `bytes` long.
async fn big_checkpoint(
    c: &mut Clients,
    session: &str,
    parent: Option<String>,
    seed: u64,
    bytes: usize,
) -> String {
    let tasks = (0..bytes / 10_000)
        .map(|i| Task {
            id: i.to_string(),
            content: text(seed * 1000 + i as u64, 10_000),
            status: "pending".into(),
            progress: 0,
        })
        .collect();
    c.checkpoints
        .create_checkpoint(CreateCheckpointRequest {
            session_id: session.into(),
            parent_id: parent,
            kind: CheckpointKind::Manual as i32,
            reason: format!("big {seed}"),
            state: Some(CheckpointState {
                active_tasks: tasks,
                phase: format!("big {seed}"),
                ..Default::default()
            }),
            write: write(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .checkpoint
        .unwrap()
        .id
}

fn within_budget<M: prost::Message>(what: &str, items: &[M]) {
    let bytes: usize = items.iter().map(M::encoded_len).sum();
    assert!(
        items.len() == 1 || bytes <= BUDGET,
        "{what}: {} items of {bytes} bytes in one reply",
        items.len()
    );
}

async fn checkpoint_lists_are_paged_by_count_and_bytes(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let s = start_session(&mut c, &p).await;
    // A tree with a fork, and states of about 1.2 MB: at most two fit a page.
    let root = checkpoint(&mut c, &s.id, None, "root").await.checkpoint.unwrap().id;
    let mut ids = vec![root.clone()];
    for seed in 1..=4 {
        ids.push(big_checkpoint(&mut c, &s.id, None, seed, 1_200_000).await);
    }
    let fork = checkpoint(&mut c, &s.id, Some(root.clone()), "fork").await.checkpoint.unwrap().id;
    let after_fork = checkpoint(&mut c, &s.id, Some(fork.clone()), "after fork").await.checkpoint.unwrap().id;

    let list = |page_size: i32, include_state: bool, page_token: String| ListCheckpointsRequest {
        session_id: s.id.clone(),
        include_state,
        page_size,
        page_token,
    };
    // Metadata only: one page holds them all, in tree order (the fork after the main line).
    let whole = c.checkpoints.list_checkpoints(list(0, false, String::new())).await.unwrap().into_inner();
    assert!(whole.next_page_token.is_empty());
    let order: Vec<(String, i32)> = whole.checkpoints.iter().map(|c| (c.id.clone(), c.depth)).collect();
    assert_eq!(order.len(), 7);
    assert_eq!(order[5..], [(fork.clone(), 1), (after_fork.clone(), 2)]);

    for (page_size, include_state) in [(1000, true), (2, false), (3, true), (1, false)] {
        let mut got = Vec::new();
        let mut token = String::new();
        let mut replies = 0;
        loop {
            let reply = c
                .checkpoints
                .list_checkpoints(list(page_size, include_state, token.clone()))
                .await
                .unwrap()
                .into_inner();
            replies += 1;
            assert!(reply.checkpoints.len() <= page_size as usize && !reply.checkpoints.is_empty());
            within_budget("ListCheckpoints", &reply.checkpoints);
            assert_eq!(reply.head_checkpoint_id, whole.head_checkpoint_id);
            for cp in &reply.checkpoints {
                assert_eq!(cp.state.is_some(), include_state);
                assert!(!cp.corrupt);
            }
            got.extend(reply.checkpoints.iter().map(|c| (c.id.clone(), c.depth)));
            if reply.next_page_token.is_empty() {
                break;
            }
            token = reply.next_page_token;
        }
        assert_eq!(got, order, "page_size {page_size}, include_state {include_state}");
        if include_state {
            assert!(replies >= 2, "4 states of 1.2 MB came in {replies} reply");
        }
    }

    // What a client that ignores paging sees: the first page, and a token.
    let first = c.checkpoints.list_checkpoints(list(0, true, String::new())).await.unwrap().into_inner();
    assert!(first.checkpoints.len() < 7 && !first.next_page_token.is_empty());

    // Tokens are checked: garbage, another session's checkpoint.
    let (code1, msg) = code(c.checkpoints.list_checkpoints(list(0, false, "nonsense".into())).await);
    assert_eq!(code1, Code::InvalidArgument, "{msg}");
    assert!(msg.contains("page_token"), "{msg}");
    let other = start_session(&mut c, &p).await;
    let theirs = checkpoint(&mut c, &other.id, None, "theirs").await.checkpoint.unwrap().id;
    let stranger = c
        .checkpoints
        .list_checkpoints(ListCheckpointsRequest {
            session_id: other.id.clone(),
            page_size: 1,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(stranger.checkpoints[0].id, theirs);
    let token = c
        .checkpoints
        .list_checkpoints(list(1, false, String::new()))
        .await
        .unwrap()
        .into_inner()
        .next_page_token;
    let (code2, msg) = code(
        c.checkpoints
            .list_checkpoints(ListCheckpointsRequest {
                session_id: other.id.clone(),
                page_token: token,
                ..Default::default()
            })
            .await,
    );
    assert_eq!(code2, Code::FailedPrecondition, "{msg}");
    let (code3, msg) = code(c.checkpoints.list_checkpoints(list(1001, false, String::new())).await);
    assert_eq!(code3, Code::InvalidArgument, "{msg}");
}
both!(checkpoint_lists_are_paged_by_count_and_bytes);

/// A decision write of 100 items of 15 KB: one event of about 1.5 MB.
async fn big_memory_write(c: &mut Clients, p: &str, seed: u64) {
    c.memory
        .put_memory(PutMemoryRequest {
            project: p.into(),
            category: "decision".into(),
            op: MemoryOp::Append as i32,
            items: (0..100)
                .map(|i| MemoryItem { content: text(seed * 100 + i, 15_000), rationale: String::new() })
                .collect(),
            write: write(),
            ..Default::default()
        })
        .await
        .unwrap();
}

async fn event_lists_are_paged_by_bytes(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    for seed in 0..4 {
        put_note(&mut c, &p, &format!("small{seed}"), "small", write()).await.unwrap();
        big_memory_write(&mut c, &p, seed).await;
    }
    let head = 8;
    let mut got: Vec<Event> = Vec::new();
    let mut token = String::new();
    let mut replies = 0;
    loop {
        let reply = c
            .events
            .list_events(ListEventsRequest {
                project: p.clone(),
                limit: 10_000,
                page_token: token.clone(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        replies += 1;
        within_budget("ListEvents", &reply.events);
        assert_eq!(reply.as_of_revision, head);
        got.extend(reply.events);
        if reply.next_page_token.is_empty() {
            break;
        }
        token = reply.next_page_token;
    }
    assert_gapless(&got);
    assert_eq!(got.len(), head as usize);
    assert!(replies >= 2, "6 MB of events in {replies} reply");
    // A client that continues after its last revision, ignoring tokens, reads the same.
    assert_eq!(all_events(&mut c, &p).await, got);
    // The count still applies, and a kind filter pages the same way.
    let two = c
        .events
        .list_events(ListEventsRequest { project: p.clone(), limit: 1, ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(two.events.len(), 1);
    assert!(!two.next_page_token.is_empty());
    let (code1, msg) = code(
        c.events
            .list_events(ListEventsRequest {
                project: p.clone(),
                page_token: "%%".into(),
                ..Default::default()
            })
            .await,
    );
    assert_eq!(code1, Code::InvalidArgument, "{msg}");

    // Conflicts page the same way: three stale writes, one a page.
    for _ in 0..3 {
        put_note(&mut c, &p, "small0", "stale", based(0, ConflictPolicy::Overwrite)).await.unwrap();
    }
    let mut conflicts = Vec::new();
    let mut token = String::new();
    loop {
        let reply = c
            .events
            .list_conflicts(ListConflictsRequest {
                project: p.clone(),
                limit: 1,
                page_token: token.clone(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert!(reply.conflicts.len() <= 1);
        conflicts.extend(reply.conflicts);
        if reply.next_page_token.is_empty() {
            break;
        }
        token = reply.next_page_token;
    }
    assert_eq!(conflicts.len(), 3);
    assert!(conflicts.windows(2).all(|w| w[0].revision < w[1].revision));
}
both!(event_lists_are_paged_by_bytes);

async fn memory_lists_are_paged_with_evicted_entries(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    // Three 1.5 MB writes to a capped history category: all but its cap evicted.
    for seed in 0..3 {
        big_memory_write(&mut c, &p, seed).await;
    }
    for key in ["a", "b", "c"] {
        put_note(&mut c, &p, key, key, write()).await.unwrap();
    }
    let request = |page_size: i32, page_token: String| ListMemoryRequest {
        project: p.clone(),
        include_evicted: true,
        page_size,
        page_token,
        ..Default::default()
    };
    let mut expected = None;
    for page_size in [1000, 7, 250] {
        let mut got = Vec::new();
        let mut token = String::new();
        loop {
            let reply = c.memory.list_memory(request(page_size, token.clone())).await.unwrap().into_inner();
            assert!(reply.entries.len() <= page_size as usize);
            within_budget("ListMemory", &reply.entries);
            // Each page carries the revisions of its own notes' records (a history category
            // such as decisions has none).
            for e in reply.entries.iter().filter(|e| e.category == "note") {
                let record = format!("note/{}", e.key);
                assert!(
                    reply.record_revisions.contains_key(&record),
                    "{record} missing from {:?}",
                    reply.record_revisions
                );
            }
            got.extend(reply.entries.iter().map(|e| (e.id.clone(), e.evicted)));
            if reply.next_page_token.is_empty() {
                break;
            }
            token = reply.next_page_token;
        }
        assert_eq!(got.len(), 303, "page size {page_size}");
        assert!(got.iter().filter(|(_, evicted)| *evicted).count() >= 200);
        match &expected {
            None => expected = Some(got),
            Some(e) => assert_eq!(&got, e, "page size {page_size}"),
        }
    }
    // Ignoring paging: the first page.
    let first = c.memory.list_memory(request(0, String::new())).await.unwrap().into_inner();
    assert!(first.entries.len() <= 500 && !first.next_page_token.is_empty());
    let (code1, msg) = code(c.memory.list_memory(request(0, "eyJ4IjoxfQ".into())).await);
    assert_eq!(code1, Code::InvalidArgument, "{msg}");
    assert!(msg.contains("page_token"), "{msg}");
}
both!(memory_lists_are_paged_with_evicted_entries);

/// Events too large for the shared feed reach a live watcher whole and in order.
async fn watchers_get_large_events_whole_and_in_order(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    put_note(&mut c, &p, "first", "first", write()).await.unwrap();
    let mut stream = c
        .events
        .watch(WatchRequest {
            cursors: vec![WatchCursor { project: p.clone(), after_revision: 1 }],
            kinds: vec![],
        })
        .await
        .unwrap()
        .into_inner();
    // Let the watcher reach the live feed before the writes.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    for seed in 0..3 {
        big_memory_write(&mut c, &p, seed).await;
        put_note(&mut c, &p, &format!("n{seed}"), "small", write()).await.unwrap();
    }
    let mut got = Vec::new();
    while got.len() < 6 {
        let next = tokio::time::timeout(std::time::Duration::from_secs(20), stream.next()).await;
        got.push(next.expect("the watcher got every event in time").unwrap().unwrap());
    }
    let stored = all_events(&mut c, &p).await;
    assert_eq!(got, stored[1..], "the watcher's events are the log's");
    assert!(got.iter().any(|e| e.encoded_len() > 1_000_000));
}
both!(watchers_get_large_events_whole_and_in_order);

/// Lists and the brief verify a checkpoint by its state digest: a damaged payload does not
/// mark it (only reads of the payload see it), a damaged state does. Rows from before the
/// digest get it at start-up, and one whose payload no longer verifies reads as corrupt.
async fn states_are_verified_without_payloads(backend: Backend) {
    let mut server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let s = start_session(&mut c, &p).await;
    let old_valid = checkpoint(&mut c, &s.id, None, "old valid").await.checkpoint.unwrap().id;
    let old_broken = checkpoint(&mut c, &s.id, None, "old broken").await.checkpoint.unwrap().id;
    let payload_damaged = checkpoint(&mut c, &s.id, None, "payload damaged").await.checkpoint.unwrap().id;
    server.corrupt_checkpoint_column(&payload_damaged, "payload").await.unwrap();
    server.corrupt_checkpoint_column(&old_broken, "payload").await.unwrap();
    // As a database written before the column: no state digests.
    let n = server
        .execute(&format!(
            "UPDATE checkpoints SET state_digest = NULL WHERE id IN ('{old_valid}', '{old_broken}')"
        ))
        .await;
    assert_eq!(n.unwrap(), 2);
    server.restart().unwrap();
    let mut c = server.clients().await;
    let missing =
        server.execute("UPDATE checkpoints SET kind = kind WHERE state_digest IS NULL").await.unwrap();
    assert_eq!(missing, 0, "every row has its state digest after start-up");

    let list = c
        .checkpoints
        .list_checkpoints(ListCheckpointsRequest {
            session_id: s.id.clone(),
            include_state: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let marks: Vec<(&str, bool)> = list.checkpoints.iter().map(|c| (c.id.as_str(), c.corrupt)).collect();
    assert_eq!(
        marks,
        [(old_valid.as_str(), false), (old_broken.as_str(), true), (payload_damaged.as_str(), false)]
    );
    // Reads that return the payload verify it.
    let get =
        |id: &str, include_payload: bool| GetCheckpointRequest { checkpoint_id: id.into(), include_payload };
    let (code1, msg) = code(c.checkpoints.get_checkpoint(get(&payload_damaged, true)).await);
    assert_eq!(code1, Code::DataLoss, "{msg}");
    let state = c.checkpoints.get_checkpoint(get(&payload_damaged, false)).await.unwrap().into_inner();
    assert_eq!(state.checkpoint.unwrap().state.unwrap().phase, "payload damaged");
    assert!(c.checkpoints.get_checkpoint(get(&old_valid, true)).await.is_ok());

    // The brief shows the head's state while only its payload is damaged; not once its
    // state is.
    go_idle(&mut c, &s.id).await;
    let brief = brief_text(&mut c, &p, "").await;
    assert!(brief.contains("write the store"), "{brief}");
    server.corrupt_checkpoint(&payload_damaged).await.unwrap();
    let brief = brief_text(&mut c, &p, "").await;
    assert!(!brief.contains("write the store"), "{brief}");
}
both!(states_are_verified_without_payloads);
