//! ThreadService: a thread's namespaces as sessions found by key, checkpoints under the
//! orchestrator's ordered keys with metadata, pending writes, forks reported, and deleting,
//! copying and pruning by a caller allowed to write — each a revision and an event.

use baton_proto::v1::{
    ConflictPolicy, CopyThreadRequest, DeleteThreadRunsRequest, DeleteThreadsRequest, EventKind,
    GetThreadCheckpointRequest, ListThreadCheckpointsRequest, OpenThreadRequest, PendingWrite,
    PruneThreadsRequest, PutThreadCheckpointRequest, PutThreadCheckpointResponse, PutThreadWritesRequest,
    ThreadCheckpoint, ThreadWrites, WriteOutcome, event,
};
use baton_tests::{Backend, Clients, Server, both};
use tonic::Code;

use crate::access::with;
use crate::{all_events, assert_gapless, code, project, write};

fn put_request(
    p: &str,
    thread: &str,
    ns: &str,
    key: &str,
    parent: &str,
    metadata: &str,
) -> PutThreadCheckpointRequest {
    PutThreadCheckpointRequest {
        project: p.into(),
        thread: thread.into(),
        namespace: ns.into(),
        key: key.into(),
        parent_key: parent.into(),
        metadata_json: metadata.into(),
        payload: format!("payload of {key}").into_bytes(),
        payload_content_type: "application/x-test".into(),
        write: write(),
        ..Default::default()
    }
}

async fn put(
    c: &mut Clients,
    p: &str,
    thread: &str,
    key: &str,
    parent: &str,
    metadata: &str,
) -> PutThreadCheckpointResponse {
    c.threads
        .put_thread_checkpoint(put_request(p, thread, "", key, parent, metadata))
        .await
        .unwrap()
        .into_inner()
}

async fn get(c: &mut Clients, p: &str, thread: &str, ns: &str, key: &str) -> Option<ThreadCheckpoint> {
    let request = GetThreadCheckpointRequest {
        project: p.into(),
        thread: thread.into(),
        namespace: ns.into(),
        key: key.into(),
    };
    c.threads.get_thread_checkpoint(request).await.unwrap().into_inner().checkpoint
}

/// Every checkpoint a list selects, a few per page: (thread, namespace, key).
async fn list(c: &mut Clients, mut request: ListThreadCheckpointsRequest) -> Vec<(String, String, String)> {
    request.page_size = 2;
    let mut out = Vec::new();
    loop {
        let page = c.threads.list_thread_checkpoints(request.clone()).await.unwrap().into_inner();
        assert!(page.checkpoints.len() <= 2);
        out.extend(page.checkpoints.into_iter().map(|t| (t.thread, t.namespace, t.key)));
        if page.next_page_token.is_empty() {
            return out;
        }
        request.page_token = page.next_page_token;
    }
}

fn keys(listed: &[(String, String, String)]) -> Vec<&str> {
    listed.iter().map(|(_, _, k)| k.as_str()).collect()
}

fn in_thread(p: &str, thread: &str, ns: Option<&str>) -> ListThreadCheckpointsRequest {
    ListThreadCheckpointsRequest {
        project: p.into(),
        thread: thread.into(),
        namespace: ns.map(str::to_owned),
        ..Default::default()
    }
}

async fn checkpoints_by_key(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    // Get-or-create: the first call creates, the second finds it and writes nothing.
    let open = |ns: &str| OpenThreadRequest {
        project: p.clone(),
        thread: "t1".into(),
        namespace: ns.into(),
        host: "worker-1".into(),
        write: write(),
        ..Default::default()
    };
    let first = c.threads.open_thread(open("")).await.unwrap().into_inner();
    assert!(first.created && first.result.is_some());
    let session = first.session.unwrap();
    assert_eq!((session.thread.as_str(), session.thread_namespace.as_str()), ("t1", ""));
    let again = c.threads.open_thread(open("")).await.unwrap().into_inner();
    assert!(!again.created && again.result.is_none());
    assert_eq!(again.session.unwrap().id, session.id);

    // A chain in the root namespace, a checkpoint in a child namespace.
    let a = put(&mut c, &p, "t1", "k1", "", r#"{"source": "input", "step": -1, "run_id": "r1"}"#).await;
    assert!(!a.created_session);
    assert_eq!(a.result.unwrap().outcome, WriteOutcome::Applied as i32);
    put(&mut c, &p, "t1", "k2", "k1", r#"{"step": 0, "source": "loop"}"#).await;
    put(&mut c, &p, "t1", "k3", "k2", r#"{"source": "loop", "step": 1, "score": {"b": 2, "a": 1}}"#).await;
    let child = c
        .threads
        .put_thread_checkpoint(put_request(&p, "t1", "child:1", "c1", "", r#"{"source": "loop", "step": 1}"#))
        .await
        .unwrap()
        .into_inner();
    assert!(child.created_session);
    let other = put(&mut c, &p, "t2", "k9", "", "{}").await;
    assert!(other.created_session);

    // The newest of a namespace, or one by key, with its payload, parent and metadata.
    let latest = get(&mut c, &p, "t1", "", "").await.unwrap();
    assert_eq!((latest.key.as_str(), latest.parent_key.as_str()), ("k3", "k2"));
    assert_eq!(latest.metadata_json, r#"{"score":{"a":1,"b":2},"source":"loop","step":1}"#);
    assert_eq!(latest.checkpoint.as_ref().unwrap().payload, b"payload of k3");
    assert_eq!(latest.checkpoint.unwrap().session_id, session.id);
    let first_one = get(&mut c, &p, "t1", "", "k1").await.unwrap();
    assert_eq!(first_one.parent_key, "");
    assert_eq!(get(&mut c, &p, "t1", "child:1", "").await.unwrap().key, "c1");
    assert!(get(&mut c, &p, "t1", "", "nope").await.is_none());
    assert!(get(&mut c, &p, "t1", "child:2", "").await.is_none());
    assert!(get(&mut c, &p, "no-such-thread", "", "").await.is_none());

    // Lists: newest first, by namespace, thread or project, filtered, before a key, paged.
    assert_eq!(keys(&list(&mut c, in_thread(&p, "t1", Some(""))).await), ["k3", "k2", "k1"]);
    assert_eq!(keys(&list(&mut c, in_thread(&p, "t1", None)).await), ["k3", "k2", "k1", "c1"]);
    assert_eq!(keys(&list(&mut c, in_thread(&p, "", None)).await), ["k9", "k3", "k2", "k1", "c1"]);
    assert_eq!(keys(&list(&mut c, in_thread(&p, "", Some("child:1"))).await), ["c1"]);
    let filtered = |thread: &str, filter: &str| ListThreadCheckpointsRequest {
        metadata_filter_json: filter.into(),
        ..in_thread(&p, thread, None)
    };
    assert_eq!(keys(&list(&mut c, filtered("t1", r#"{"source": "loop"}"#)).await), ["k3", "k2", "c1"]);
    assert_eq!(keys(&list(&mut c, filtered("t1", r#"{"source": "loop", "step": 1}"#)).await), ["k3", "c1"]);
    assert_eq!(keys(&list(&mut c, filtered("", r#"{"step": -1}"#)).await), ["k1"]);
    assert_eq!(keys(&list(&mut c, filtered("", r#"{"score": {"a": 1, "b": 2}}"#)).await), ["k3"]);
    assert_eq!(keys(&list(&mut c, filtered("", r#"{"run_id": "r1"}"#)).await), ["k1"]);
    assert!(list(&mut c, filtered("", r#"{"source": "update", "step": 99}"#)).await.is_empty());
    assert!(list(&mut c, filtered("", r#"{"step": "1"}"#)).await.is_empty(), "a string is not a number");
    let before = ListThreadCheckpointsRequest { before_key: "k3".into(), ..in_thread(&p, "t1", Some("")) };
    assert_eq!(keys(&list(&mut c, before).await), ["k2", "k1"]);
    let one = ListThreadCheckpointsRequest { key: "k2".into(), ..in_thread(&p, "t1", None) };
    assert_eq!(keys(&list(&mut c, one).await), ["k2"]);

    // The same key again: the same content is answered as stored (nothing written), other
    // content is refused, a parent that is not there is NOT_FOUND.
    let head = crate::all_events(&mut c, &p).await.len();
    let same = put(&mut c, &p, "t1", "k2", "k1", r#"{"source": "loop", "step": 0}"#).await;
    assert!(same.result.unwrap().replayed);
    assert_eq!(all_events(&mut c, &p).await.len(), head);
    let (got, msg) = code(c.threads.put_thread_checkpoint(put_request(&p, "t1", "", "k2", "k1", "{}")).await);
    assert_eq!(got, Code::AlreadyExists, "{msg}");
    let (got, msg) = code(c.threads.put_thread_checkpoint(put_request(&p, "t1", "", "k4", "k0", "{}")).await);
    assert_eq!(got, Code::NotFound, "{msg}");
    assert!(msg.contains("parent_key") && msg.contains("k0"), "{msg}");

    // Every change an event: sessions started, checkpoints with their keys and metadata.
    let events = all_events(&mut c, &p).await;
    assert_gapless(&events);
    let started = events.iter().filter(|e| e.kind == EventKind::SessionStarted as i32).count();
    assert_eq!(started, 3);
    let created: Vec<(String, String)> = events
        .iter()
        .filter_map(|e| match &e.value {
            Some(event::Value::Checkpoint(r)) => Some((r.key.clone(), r.parent_key.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        created[..3],
        [("k1".into(), String::new()), ("k2".into(), "k1".into()), ("k3".into(), "k2".into())]
    );
}
both!(checkpoints_by_key);

/// Two workers continuing one thread from the same checkpoint: the second is told.
async fn two_workers_one_thread(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    put(&mut c, &p, "t", "k1", "", "{}").await;
    let (mut w1, mut w2) = (server.clients().await, server.clients().await);
    let (r1, r2) = tokio::join!(
        w1.threads.put_thread_checkpoint(put_request(&p, "t", "", "k2-a", "k1", "{}")),
        w2.threads.put_thread_checkpoint(put_request(&p, "t", "", "k2-b", "k1", "{}")),
    );
    let mut outcomes: Vec<i32> =
        [r1, r2].into_iter().map(|r| r.unwrap().into_inner().result.unwrap().outcome).collect();
    outcomes.sort_unstable();
    assert_eq!(outcomes, [WriteOutcome::Applied as i32, WriteOutcome::Overwritten as i32]);
    // Both branches kept; the conflict is recorded on the thread's head.
    assert_eq!(keys(&list(&mut c, in_thread(&p, "t", Some(""))).await), ["k2-b", "k2-a", "k1"]);
    let conflicts = c
        .events
        .list_conflicts(baton_proto::v1::ListConflictsRequest { project: p.clone(), ..Default::default() })
        .await
        .unwrap()
        .into_inner()
        .conflicts;
    assert_eq!(conflicts.len(), 1);
    assert!(
        conflicts[0].record.ends_with("/head") && conflicts[0].detail.contains("fork"),
        "{:?}",
        conflicts[0]
    );
    // Under CONFLICT_POLICY_REJECT a third is refused with the current head, and nothing is written.
    let mut reject = put_request(&p, "t", "", "k2-c", "k1", "{}");
    if let Some(w) = reject.write.as_mut() {
        w.policy = ConflictPolicy::Reject as i32;
    }
    let status = c.threads.put_thread_checkpoint(reject).await.unwrap_err();
    assert_eq!(status.code(), Code::Aborted);
    let rejected = baton_proto::details::rejected_write(&status).unwrap().conflict.unwrap();
    assert_eq!(rejected.outcome, WriteOutcome::Rejected as i32);
    assert!(get(&mut c, &p, "t", "", "k2-c").await.is_none());
}
both!(two_workers_one_thread);

fn pending(task: &str, index: i32, channel: &str, value: &str) -> PendingWrite {
    PendingWrite {
        task_id: task.into(),
        index,
        channel: channel.into(),
        task_path: "a:b".into(),
        value_type: "json".into(),
        value: value.as_bytes().to_vec(),
    }
}

async fn put_writes(c: &mut Clients, p: &str, ns: &str, key: &str, writes: Vec<PendingWrite>) -> i32 {
    let request = PutThreadWritesRequest {
        project: p.into(),
        thread: "t".into(),
        namespace: ns.into(),
        key: key.into(),
        writes,
        write: write(),
    };
    c.threads.put_thread_writes(request).await.unwrap().into_inner().stored
}

fn written(t: &ThreadCheckpoint) -> Vec<(String, i32, String)> {
    t.writes
        .iter()
        .map(|w| (w.task_id.clone(), w.index, String::from_utf8_lossy(&w.value).into_owned()))
        .collect()
}

/// Pending writes: the first of a key kept, special channels replaced, per checkpoint.
async fn pending_writes(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    put(&mut c, &p, "t", "k1", "", "{}").await;
    c.threads.put_thread_checkpoint(put_request(&p, "t", "child", "k1", "", "{}")).await.unwrap();
    let stored = put_writes(
        &mut c,
        &p,
        "",
        "k1",
        vec![pending("a", 0, "ch", "1"), pending("a", -1, "__error__", "e1")],
    )
    .await;
    assert_eq!(stored, 2);
    let again = put_writes(
        &mut c,
        &p,
        "",
        "k1",
        vec![pending("a", 0, "ch", "2"), pending("a", -1, "__error__", "e2")],
    )
    .await;
    assert_eq!(again, 1, "the regular write is kept, the error replaced");
    put_writes(&mut c, &p, "child", "k1", vec![pending("b", 0, "ch", "child")]).await;
    let root = get(&mut c, &p, "t", "", "k1").await.unwrap();
    assert_eq!(written(&root), [("a".into(), -1, "e2".into()), ("a".into(), 0, "1".into())]);
    assert_eq!(root.writes[0].task_path, "a:b");
    assert_eq!(written(&get(&mut c, &p, "t", "child", "").await.unwrap()), [("b".into(), 0, "child".into())]);
    // A new checkpoint starts with none; lists carry each one's writes.
    put(&mut c, &p, "t", "k2", "k1", "{}").await;
    assert!(get(&mut c, &p, "t", "", "").await.unwrap().writes.is_empty());
    let page = c.threads.list_thread_checkpoints(in_thread(&p, "t", Some(""))).await.unwrap().into_inner();
    assert_eq!(page.checkpoints.iter().map(|t| t.writes.len()).collect::<Vec<_>>(), [0, 2]);
    // Writes to a checkpoint that is not there are NOT_FOUND; each stored batch is an event.
    let request = PutThreadWritesRequest {
        project: p.clone(),
        thread: "t".into(),
        key: "k7".into(),
        writes: vec![pending("a", 0, "ch", "x")],
        ..Default::default()
    };
    assert_eq!(code(c.threads.put_thread_writes(request).await).0, Code::NotFound);
    let events = all_events(&mut c, &p).await;
    assert_gapless(&events);
    let batches: Vec<&ThreadWrites> = events
        .iter()
        .filter_map(|e| match &e.value {
            Some(event::Value::ThreadWrites(w)) => Some(w),
            _ => None,
        })
        .collect();
    assert_eq!(batches.iter().map(|w| w.writes.len()).collect::<Vec<_>>(), [2, 1, 1]);
    // Events name the writes; their values are read with the checkpoint.
    let named: Vec<(&str, i32, &str, &[u8])> = batches[1]
        .writes
        .iter()
        .map(|w| (w.task_id.as_str(), w.index, w.channel.as_str(), w.value.as_slice()))
        .collect();
    assert_eq!(named, [("a", -1, "__error__", &b""[..])]);
}
both!(pending_writes);

/// Deleting runs, copying, pruning and deleting threads: each one write and one event.
async fn delete_copy_prune(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    put(&mut c, &p, "t", "k1", "", r#"{"run_id": "r1"}"#).await;
    put(&mut c, &p, "t", "k2", "k1", r#"{"run_id": "r1"}"#).await;
    put(&mut c, &p, "t", "k3", "k2", r#"{"run_id": "r2"}"#).await;
    c.threads
        .put_thread_checkpoint(put_request(&p, "t", "sub", "s1", "", r#"{"run_id": "r1"}"#))
        .await
        .unwrap();
    put_writes(&mut c, &p, "", "k3", vec![pending("a", 0, "ch", "v")]).await;

    // A copy: every namespace, key, metadata and write, under new ids; the source unchanged.
    let copied = c
        .threads
        .copy_thread(CopyThreadRequest {
            project: p.clone(),
            source_thread: "t".into(),
            target_thread: "u".into(),
            write: write(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((copied.copied_checkpoints, copied.copied_writes), (4, 1));
    assert_eq!(keys(&list(&mut c, in_thread(&p, "u", None)).await), ["s1", "k3", "k2", "k1"]);
    let copy = get(&mut c, &p, "u", "", "").await.unwrap();
    let source = get(&mut c, &p, "t", "", "").await.unwrap();
    assert_eq!(
        (copy.parent_key.as_str(), copy.metadata_json.as_str()),
        ("k2", source.metadata_json.as_str())
    );
    assert_eq!(copy.checkpoint.as_ref().unwrap().payload, source.checkpoint.as_ref().unwrap().payload);
    assert_eq!(written(&copy), [("a".into(), 0, "v".into())]);
    assert_ne!(copy.checkpoint.unwrap().id, source.checkpoint.unwrap().id);
    let again = CopyThreadRequest {
        project: p.clone(),
        source_thread: "t".into(),
        target_thread: "u".into(),
        write: write(),
    };
    assert_eq!(code(c.threads.copy_thread(again).await).0, Code::AlreadyExists);
    let none = CopyThreadRequest {
        project: p.clone(),
        source_thread: "x".into(),
        target_thread: "y".into(),
        write: write(),
    };
    assert_eq!(code(c.threads.copy_thread(none).await).0, Code::NotFound);

    // Runs: in every thread; a survivor whose parent went points at its nearest kept ancestor.
    let runs = DeleteThreadRunsRequest { project: p.clone(), run_ids: vec!["r1".into()], write: write() };
    let removed = c.threads.delete_thread_runs(runs).await.unwrap().into_inner();
    assert_eq!(removed.removed_checkpoints, 6);
    assert_eq!(keys(&list(&mut c, in_thread(&p, "t", None)).await), ["k3"]);
    assert_eq!(get(&mut c, &p, "t", "", "k3").await.unwrap().parent_key, "");
    assert!(get(&mut c, &p, "t", "sub", "").await.is_none());
    let nothing = DeleteThreadRunsRequest { project: p.clone(), run_ids: vec!["r9".into()], write: write() };
    assert!(c.threads.delete_thread_runs(nothing).await.unwrap().into_inner().result.is_none());

    // Prune: the newest per namespace stays, with its writes.
    for (key, parent) in [("k4", "k3"), ("k5", "k4")] {
        put(&mut c, &p, "u", key, parent, "{}").await;
    }
    let prune =
        PruneThreadsRequest { project: p.clone(), threads: vec!["u".into()], keep_latest: 1, write: write() };
    let pruned = c.threads.prune_threads(prune).await.unwrap().into_inner();
    assert_eq!((pruned.removed_checkpoints, pruned.removed_sessions), (2, 0));
    assert_eq!(keys(&list(&mut c, in_thread(&p, "u", Some(""))).await), ["k5"]);

    // Deleting threads: every namespace, sessions too; unknown threads are skipped.
    let delete = DeleteThreadsRequest {
        project: p.clone(),
        threads: vec!["t".into(), "u".into(), "zzz".into()],
        write: write(),
    };
    let deleted = c.threads.delete_threads(delete).await.unwrap().into_inner();
    assert_eq!((deleted.removed_sessions, deleted.removed_checkpoints), (4, 2));
    assert!(list(&mut c, in_thread(&p, "", None)).await.is_empty());
    let events = all_events(&mut c, &p).await;
    assert_gapless(&events);
    let deletions: Vec<(usize, usize)> = events
        .iter()
        .filter(|e| e.kind == EventKind::CheckpointsDeleted as i32)
        .filter_map(|e| match &e.value {
            Some(event::Value::Maintenance(m)) => {
                Some((m.removed_checkpoints.len(), m.removed_sessions.len()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(deletions, [(6, 0), (2, 0), (2, 4)]);
}
both!(delete_copy_prune);

/// What the server refuses, and a token scoped to one project reaching for another's thread.
async fn thread_bad_input_and_scope(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    put(&mut c, &p, "t", "k1", "", "{}").await;
    for (metadata, says) in [("[1]", "JSON object"), ("{", "not valid JSON"), (r#"{"a": "\u0000"}"#, "NUL")] {
        let (got, msg) =
            code(c.threads.put_thread_checkpoint(put_request(&p, "t", "", "k2", "k1", metadata)).await);
        assert_eq!(got, Code::InvalidArgument, "{msg}");
        assert!(msg.contains("metadata_json") && msg.contains(says), "{msg}");
    }
    let mut long = put_request(&p, &"t".repeat(600), "", "k2", "", "{}");
    assert_eq!(code(c.threads.put_thread_checkpoint(long.clone()).await).0, Code::InvalidArgument);
    long.thread = "t".into();
    long.key = String::new();
    assert_eq!(code(c.threads.put_thread_checkpoint(long).await).0, Code::InvalidArgument);
    let mut big = put_request(&p, "t", "", "k2", "k1", "{}");
    big.payload = vec![7; 9 * 1024 * 1024];
    let (got, msg) = code(c.threads.put_thread_checkpoint(big).await);
    assert_eq!(got, Code::ResourceExhausted, "{msg}");
    let bad_filter = ListThreadCheckpointsRequest {
        metadata_filter_json: r#"{"a": 1"#.into(),
        ..in_thread(&p, "t", None)
    };
    let (got, msg) = code(c.threads.list_thread_checkpoints(bad_filter).await);
    assert_eq!(got, Code::InvalidArgument);
    assert!(msg.contains("metadata_filter_json"), "{msg}");
    let bad_token = ListThreadCheckpointsRequest { page_token: "garbage".into(), ..in_thread(&p, "t", None) };
    assert_eq!(code(c.threads.list_thread_checkpoints(bad_token).await).0, Code::InvalidArgument);
    let no_writes = PutThreadWritesRequest {
        project: p.clone(),
        thread: "t".into(),
        key: "k1".into(),
        ..Default::default()
    };
    assert_eq!(code(c.threads.put_thread_writes(no_writes).await).0, Code::InvalidArgument);
    let negative = PruneThreadsRequest {
        project: p.clone(),
        threads: vec!["t".into()],
        keep_latest: -1,
        write: write(),
    };
    assert_eq!(code(c.threads.prune_threads(negative).await).0, Code::InvalidArgument);

    // A token of another project cannot read or change this one's threads; a reader cannot write.
    let other = project();
    let scoped =
        crate::access::token(&server, &["create", "--name", "lg", "--role", "writer", "--project", &other]);
    let reader = crate::access::token(&server, &["create", "--name", "ro", "--role", "reader"]);
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await; // past the "no tokens yet" cache
    let get_request =
        GetThreadCheckpointRequest { project: p.clone(), thread: "t".into(), ..Default::default() };
    let denied = c.threads.get_thread_checkpoint(with(get_request.clone(), &scoped)).await.unwrap_err();
    assert_eq!(denied.code(), Code::PermissionDenied, "{denied:?}");
    let delete = DeleteThreadsRequest { project: p.clone(), threads: vec!["t".into()], write: write() };
    assert_eq!(
        c.threads.delete_threads(with(delete.clone(), &scoped)).await.unwrap_err().code(),
        Code::PermissionDenied
    );
    assert_eq!(
        c.threads.delete_threads(with(delete, &reader)).await.unwrap_err().code(),
        Code::PermissionDenied
    );
    let found = c.threads.get_thread_checkpoint(with(get_request, &reader)).await.unwrap().into_inner();
    assert_eq!(found.checkpoint.unwrap().key, "k1");
    // Its own project works.
    let mut own = put_request(&other, "t", "", "k1", "", "{}");
    own.write = write();
    c.threads.put_thread_checkpoint(with(own, &scoped)).await.unwrap();
}
both!(thread_bad_input_and_scope);

/// A listed checkpoint's namespace, key, parent's key, metadata and writes.
type Shape = (String, String, String, String, Vec<(String, i32, String)>);

/// A laptop's threads move to a team server: keys, metadata, parents and pending writes,
/// digests verifying; importing again changes nothing; a thread key taken there is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threads_export_and_import() {
    let laptop = Server::start(Backend::Sqlite).await.unwrap();
    let mut c = laptop.clients().await;
    let p = project();
    put(&mut c, &p, "t", "k1", "", r#"{"run_id": "r1", "step": 0}"#).await;
    put(&mut c, &p, "t", "k2", "k1", r#"{"run_id": "r1", "step": 1}"#).await;
    c.threads.put_thread_checkpoint(put_request(&p, "t", "sub", "s1", "", "{}")).await.unwrap();
    put_writes(
        &mut c,
        &p,
        "",
        "k2",
        vec![pending("a", 0, "ch", "v"), pending("a", -3, "__interrupt__", "i")],
    )
    .await;
    let before = c.threads.list_thread_checkpoints(in_thread(&p, "t", None)).await.unwrap().into_inner();

    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("threads.baton").display().to_string();
    let (ok, _, err) = laptop.admin_command(&["export", "--output", &archive]);
    assert!(ok, "{err}");
    let team = Server::start(Backend::Postgres).await.unwrap();
    let mut t = team.clients().await;
    let (ok, out, err) = team.admin_command(&["import", "--input", &archive]);
    assert!(ok, "{err}");
    // 2 sessions, 3 checkpoints, 2 pending writes.
    assert!(out.contains(&format!("{p}: imported 7, already present 0")), "{out}");
    let after = t.threads.list_thread_checkpoints(in_thread(&p, "t", None)).await.unwrap().into_inner();
    let shape = |page: &baton_proto::v1::ListThreadCheckpointsResponse| -> Vec<Shape> {
        page.checkpoints
            .iter()
            .map(|c| {
                (
                    c.namespace.clone(),
                    c.key.clone(),
                    c.parent_key.clone(),
                    c.metadata_json.clone(),
                    written(c),
                )
            })
            .collect()
    };
    assert_eq!(shape(&after), shape(&before));
    assert!(after.checkpoints.iter().all(|c| !c.checkpoint.as_ref().unwrap().corrupt));
    let filtered = ListThreadCheckpointsRequest {
        metadata_filter_json: r#"{"step": 1}"#.into(),
        ..in_thread(&p, "t", None)
    };
    assert_eq!(keys(&list(&mut t, filtered).await), ["k2"]);
    let runs = DeleteThreadRunsRequest { project: p.clone(), run_ids: vec!["r1".into()], write: write() };
    assert_eq!(t.threads.delete_thread_runs(runs).await.unwrap().into_inner().removed_checkpoints, 2);
    assert_gapless(&all_events(&mut t, &p).await);

    // Again: nothing new. Into a server where the thread key is another session's: refused.
    let (ok, out, err) = laptop.admin_command(&["import", "--input", &archive]);
    assert!(ok, "{err}");
    assert!(out.contains(&format!("{p}: imported 0, already present 7")), "{out}");
    let other = Server::start(Backend::Sqlite).await.unwrap();
    let mut o = other.clients().await;
    put(&mut o, &p, "t", "x", "", "{}").await;
    let (ok, _, err) = other.admin_command(&["import", "--input", &archive]);
    assert!(!ok);
    assert!(err.contains("thread \"t\"") && err.contains("already"), "{err}");
}

/// A purge reaches a thread's metadata and pending writes, and its checkpoints still verify.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purge_reaches_threads() {
    let server = Server::start(Backend::Sqlite).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let secret = "hunter2-leaked-value";
    put(&mut c, &p, "t", "k1", "", &format!(r#"{{"run_id": "r1", "note": "key {secret} here"}}"#)).await;
    put_writes(&mut c, &p, "", "k1", vec![pending("a", 0, "ch", &format!("msg {secret}"))]).await;
    let purged = c
        .admin
        .purge(baton_proto::v1::PurgeRequest { project: p.clone(), value: secret.into(), dry_run: false })
        .await
        .unwrap()
        .into_inner();
    // The checkpoint and the write, and the events and stored replies that carried them.
    assert_eq!(purged.records, 2, "{purged:?}");
    let got = get(&mut c, &p, "t", "", "").await.unwrap();
    assert!(!got.checkpoint.as_ref().unwrap().corrupt);
    assert!(
        !got.metadata_json.contains(secret) && got.metadata_json.contains("key ****"),
        "{}",
        got.metadata_json
    );
    assert_eq!(written(&got)[0].2, format!("msg {}", "*".repeat(secret.len())));
    let filtered = ListThreadCheckpointsRequest {
        metadata_filter_json: r#"{"run_id": "r1"}"#.into(),
        ..in_thread(&p, "t", None)
    };
    assert_eq!(keys(&list(&mut c, filtered).await), ["k1"]);
    for e in all_events(&mut c, &p).await {
        assert!(!format!("{e:?}").contains(secret), "{e:?}");
    }
}

/// `baton threads`: a project's thread checkpoints newest first, filtered; and delete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_lists_and_deletes_threads() {
    let server = Server::start(Backend::Sqlite).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    put(&mut c, &p, "support-42", "k1", "", r#"{"source": "input", "step": -1}"#).await;
    put(&mut c, &p, "support-42", "k2", "k1", r#"{"source": "loop", "step": 0}"#).await;
    put(&mut c, &p, "billing-7", "k3", "", r#"{"source": "loop", "step": 0}"#).await;
    let env = baton_tests::ClientEnv::new(&server.url());
    let dir = tempfile::tempdir().unwrap();
    let out = env.run(dir.path(), &["threads", "--project", &p], "");
    assert_eq!(out.code, 0, "{out:?}");
    let rows: Vec<&str> =
        out.stdout.lines().filter(|l| l.contains("support-42") || l.contains("billing-7")).collect();
    assert_eq!(rows.len(), 3, "{}", out.stdout);
    assert!(rows[0].contains("billing-7") && rows[0].contains("k3"), "newest key first: {}", out.stdout);
    let out =
        env.run(dir.path(), &["threads", "--project", &p, "--filter", r#"{"source": "loop"}"#, "--json"], "");
    assert_eq!(out.code, 0, "{out:?}");
    let listed: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let keys: Vec<&str> =
        listed["checkpoints"].as_array().unwrap().iter().map(|c| c["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["k3", "k2"]);
    assert_eq!(listed["checkpoints"][1]["metadata"]["step"], 0);
    let out = env.run(dir.path(), &["threads", "--project", &p, "--filter", "[1]"], "");
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("metadata_filter_json"), "{out:?}");
    let out = env.run(dir.path(), &["threads", "delete", "support-42", "--project", &p], "");
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("deleted 1 namespace(s) with 2 checkpoint(s)"), "{}", out.stdout);
    assert_eq!(keys_of(&mut c, &p).await, ["k3"]);
}

async fn keys_of(c: &mut Clients, p: &str) -> Vec<String> {
    list(c, in_thread(p, "", None)).await.into_iter().map(|(_, _, k)| k).collect()
}

/// A thread's session is its orchestrator's: a resume never takes it (a fenced thread
/// could take no more checkpoints); its pending writes stay within a checkpoint's size;
/// a page of large checkpoints ends within the reply budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threads_are_not_resumed_and_stay_within_limits() {
    let server = Server::start(Backend::Sqlite).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let thread =
        put(&mut c, &p, "t", "k1", "", "{}").await.checkpoint.unwrap().checkpoint.unwrap().session_id;
    crate::go_idle(&mut c, &thread).await;
    let resume = |target| baton_proto::v1::ResumeSessionRequest {
        project: p.clone(),
        target,
        write: write(),
        ..Default::default()
    };
    // The project's latest idle session is the thread's, and it is not taken.
    let (got, msg) = code(c.sessions.resume_session(resume(None)).await);
    assert_eq!(got, Code::NotFound, "{msg}");
    let named = Some(baton_proto::v1::resume_session_request::Target::SessionId(thread.clone()));
    let (got, msg) = code(c.sessions.resume_session(resume(named)).await);
    assert_eq!(got, Code::FailedPrecondition, "{msg}");
    assert!(msg.contains("thread"), "{msg}");
    put(&mut c, &p, "t", "k2", "k1", "{}").await;

    // Writes: over the checkpoint limit in all is refused, replacing a special one is not.
    let big = |task: &str, index: i32| PendingWrite {
        value: vec![b'x'; 5 * 1024 * 1024],
        ..pending(task, index, "ch", "")
    };
    put_writes(&mut c, &p, "", "k2", vec![big("a", -1)]).await;
    put_writes(&mut c, &p, "", "k2", vec![big("a", -1)]).await;
    let request = PutThreadWritesRequest {
        project: p.clone(),
        thread: "t".into(),
        key: "k2".into(),
        writes: vec![big("b", 0)],
        write: write(),
        ..Default::default()
    };
    let (got, msg) = code(c.threads.put_thread_writes(request).await);
    assert_eq!(got, Code::ResourceExhausted, "{msg}");

    // Checkpoints of 2 MiB each: a page holds what fits 3 MiB, the rest follow.
    let mut parent = "k2".to_owned();
    for i in 3..7 {
        let key = format!("k{i}");
        let mut request = put_request(&p, "t", "", &key, &parent, "{}");
        request.payload =
            (0..2 * 1024 * 1024).map(|n: u32| (n.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
        c.threads.put_thread_checkpoint(request).await.unwrap();
        parent = key;
    }
    let mut request = in_thread(&p, "t", Some(""));
    let mut pages = Vec::new();
    loop {
        let page = c.threads.list_thread_checkpoints(request.clone()).await.unwrap().into_inner();
        pages.push(page.checkpoints.iter().map(|t| t.key.clone()).collect::<Vec<_>>());
        if page.next_page_token.is_empty() {
            break;
        }
        request.page_token = page.next_page_token;
    }
    assert_eq!(pages.concat(), ["k6", "k5", "k4", "k3", "k2", "k1"]);
    assert!(pages.iter().all(|p| p.len() <= 2), "{pages:?}");
}

/// A checkpoint can carry its new chunks: its write stores them (as PutChunks would), so its
/// blobs resolve in the same call; a chunk whose digest is not its data's, or that none of its
/// blobs lists, is refused, and a blob whose chunk was neither sent nor stored is refused as
/// before.
async fn a_checkpoint_carries_its_chunks(backend: Backend) {
    use baton_proto::v1::{BlobRef, Chunk, GetChunksRequest};
    use sha2::{Digest as _, Sha256};
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let pieces = [b"first piece of a channel".to_vec(), b"second".to_vec()];
    let chunks: Vec<Chunk> =
        pieces.iter().map(|d| Chunk { digest: hex::encode(Sha256::digest(d)), data: d.clone() }).collect();
    let whole = pieces.concat();
    let blob = BlobRef {
        role: "langgraph-channel".into(),
        digest: hex::encode(Sha256::digest(&whole)),
        size_bytes: whole.len() as i64,
        chunks: chunks.iter().map(|c| c.digest.clone()).collect(),
        content_type: "msgpack".into(),
        ..Default::default()
    };
    let mut request = put_request(&p, "t", "", "k1", "", "{}");
    request.blobs = vec![blob.clone()];
    let (got, msg) = code(c.threads.put_thread_checkpoint(request.clone()).await);
    assert_eq!(got, Code::FailedPrecondition, "{msg}");
    let mut lying = request.clone();
    lying.chunks = vec![Chunk { digest: chunks[0].digest.clone(), data: b"other bytes".to_vec() }];
    let (got, msg) = code(c.threads.put_thread_checkpoint(lying).await);
    assert_eq!(got, Code::InvalidArgument, "{msg}");
    assert!(msg.contains("chunks[0].digest"), "{msg}");
    let mut stray = request.clone();
    stray.chunks = vec![Chunk { digest: hex::encode(Sha256::digest(b"x")), data: b"x".to_vec() }];
    let (got, msg) = code(c.threads.put_thread_checkpoint(stray).await);
    assert_eq!(got, Code::InvalidArgument, "{msg}");
    assert!(msg.contains("chunks[0]") && msg.contains("not a chunk of"), "{msg}");
    request.chunks = chunks.clone();
    c.threads.put_thread_checkpoint(request).await.unwrap();
    let stored = c
        .checkpoints
        .get_chunks(GetChunksRequest { project: p.clone(), digests: blob.chunks.clone() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(stored.chunks.iter().map(|c| c.data.clone()).collect::<Vec<_>>(), pieces);
    // Sent again with the next checkpoint: skipped, nothing doubled.
    let mut next = put_request(&p, "t", "", "k2", "k1", "{}");
    next.blobs = vec![blob];
    next.chunks = chunks;
    c.threads.put_thread_checkpoint(next).await.unwrap();
    let stats = c
        .admin
        .get_stats(baton_proto::v1::GetStatsRequest { project: p.clone(), ..Default::default() })
        .await
        .unwrap();
    assert_eq!(stats.into_inner().projects[0].chunks, 2);
}
both!(a_checkpoint_carries_its_chunks);
