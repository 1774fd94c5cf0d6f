//! ItemLogService: ordered logs of items under a key — appends idempotent by item key, reads
//! of the newest N and by pages, atomic pops, listings grouped by a delimiter, deletes by key
//! and prefix, the summary under LWW — each change a revision and an event.

use baton_proto::v1::{
    AppendItemsRequest, AppendItemsResponse, ConflictPolicy, DeleteItemLogsRequest, DeleteItemLogsResponse,
    EventKind, Item, ItemsOp, ListItemLogsRequest, NewItem, PopItemRequest, ReadItemsRequest,
    ReadItemsResponse, WriteOutcome, event,
};
use baton_tests::{Backend, Clients, Server, both};
use tonic::Code;

use crate::access::with;
use crate::{all_events, assert_gapless, based, code, project, write};

fn item(key: &str, value: &str) -> NewItem {
    NewItem { key: key.into(), content_type: String::new(), value: value.as_bytes().to_vec() }
}

fn append_request(p: &str, key: &str, items: Vec<NewItem>) -> AppendItemsRequest {
    AppendItemsRequest { project: p.into(), key: key.into(), items, summary_json: None, write: write() }
}

async fn append(c: &mut Clients, p: &str, key: &str, items: Vec<NewItem>) -> AppendItemsResponse {
    c.items.append_items(append_request(p, key, items)).await.unwrap().into_inner()
}

fn values(items: &[Item]) -> Vec<String> {
    items.iter().map(|i| String::from_utf8_lossy(&i.value).into_owned()).collect()
}

/// Every item a read selects, pages of `page_size`, following tokens.
async fn read_all(c: &mut Clients, mut request: ReadItemsRequest, page_size: i32) -> (Vec<Item>, usize) {
    request.page_size = page_size;
    let (mut out, mut pages) = (Vec::new(), 0);
    loop {
        let page: ReadItemsResponse = c.items.read_items(request.clone()).await.unwrap().into_inner();
        pages += 1;
        out.extend(page.items);
        if page.next_page_token.is_empty() {
            return (out, pages);
        }
        request.page_token = page.next_page_token;
        request.last = None;
    }
}

fn reading(p: &str, key: &str, last: Option<u32>) -> ReadItemsRequest {
    ReadItemsRequest { project: p.into(), key: key.into(), last, ..Default::default() }
}

async fn pop(c: &mut Clients, p: &str, key: &str) -> Option<Item> {
    let request = PopItemRequest { project: p.into(), key: key.into(), write: write() };
    c.items.pop_item(request).await.unwrap().into_inner().item
}

async fn append_read_pop(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let first =
        append(&mut c, &p, "conv", vec![item("u1", "one"), item("", "two"), item("u3", "three")]).await;
    assert_eq!(first.seqs, [1, 2, 3]);
    let log = first.log.unwrap();
    assert_eq!((log.items, log.bytes, log.last_seq), (3, 11, 3));
    assert_eq!(first.result.unwrap().outcome, WriteOutcome::Applied as i32);
    // The same keys again (a retried append with a new request id) add nothing and write nothing;
    // a key repeated within one append is stored once.
    let again = append(&mut c, &p, "conv", vec![item("u1", "one"), item("u3", "three")]).await;
    assert_eq!((again.seqs.clone(), again.result), (vec![0, 0], None));
    let mixed =
        append(&mut c, &p, "conv", vec![item("u3", "x"), item("u4", "four"), item("u4", "dup")]).await;
    assert_eq!(mixed.seqs, [0, 4, 0]);

    let (all, _) = read_all(&mut c, reading(&p, "conv", None), 0).await;
    assert_eq!(values(&all), ["one", "two", "three", "four"]);
    assert_eq!(all.iter().map(|i| i.seq).collect::<Vec<_>>(), [1, 2, 3, 4]);
    assert_eq!((all[0].key.as_str(), all[0].content_type.as_str()), ("u1", "application/json"));
    let (newest, _) = read_all(&mut c, reading(&p, "conv", Some(2)), 0).await;
    assert_eq!(values(&newest), ["three", "four"], "the newest N, oldest first");
    let (none, _) = read_all(&mut c, reading(&p, "conv", Some(0)), 0).await;
    assert!(none.is_empty());
    let (more_than_all, _) = read_all(&mut c, reading(&p, "conv", Some(99)), 0).await;
    assert_eq!(more_than_all.len(), 4);
    let after = ReadItemsRequest { after_seq: 2, ..reading(&p, "conv", None) };
    assert_eq!(values(&read_all(&mut c, after, 0).await.0), ["three", "four"]);
    // Pages of one: the read sees the log as its first page did, whatever is appended between.
    let mut request = ReadItemsRequest { page_size: 1, ..reading(&p, "conv", Some(3)) };
    let page = c.items.read_items(request.clone()).await.unwrap().into_inner();
    assert_eq!(values(&page.items), ["two"]);
    append(&mut c, &p, "conv", vec![item("", "five")]).await;
    request.page_token = page.next_page_token;
    let (rest, pages) = read_all(&mut c, request, 1).await;
    assert_eq!((values(&rest), pages), (vec!["three".to_owned(), "four".to_owned()], 2));

    // Pops take the newest; a popped seq is never given again; an empty log pops nothing.
    assert_eq!(pop(&mut c, &p, "conv").await.map(|i| i.value), Some(b"five".to_vec()));
    let after_pop = append(&mut c, &p, "conv", vec![item("", "six")]).await;
    assert_eq!(after_pop.seqs, [6]);
    let mut popped = Vec::new();
    while let Some(i) = pop(&mut c, &p, "conv").await {
        popped.push(String::from_utf8(i.value).unwrap());
    }
    assert_eq!(popped, ["six", "four", "three", "two", "one"]);
    let empty = c
        .items
        .pop_item(PopItemRequest { project: p.clone(), key: "conv".into(), write: write() })
        .await
        .unwrap()
        .into_inner();
    assert!(empty.item.is_none() && empty.result.is_none());
    assert_eq!(empty.log.map(|l| (l.items, l.bytes, l.last_seq)), Some((0, 0, 6)));
    assert!(pop(&mut c, &p, "never-written").await.is_none());
    let missing = c.items.read_items(reading(&p, "never-written", None)).await.unwrap().into_inner();
    assert!(missing.log.is_none() && missing.items.is_empty());

    // Each change one revision and one event, carrying what changed.
    let events = all_events(&mut c, &p).await;
    assert_gapless(&events);
    assert!(events.iter().all(|e| e.kind == EventKind::ItemsChanged as i32 && e.entity == "item_log"));
    let Some(event::Value::Items(first_change)) = &events[0].value else { panic!("{:?}", events[0]) };
    assert_eq!((first_change.key.as_str(), first_change.op), ("conv", ItemsOp::Append as i32));
    assert_eq!(values(&first_change.items), ["one", "two", "three"]);
    let Some(event::Value::Items(pop_change)) = &events[3].value else { panic!("{:?}", events[3]) };
    assert_eq!((pop_change.op, pop_change.items[0].seq), (ItemsOp::Pop as i32, 5));
}
both!(append_read_pop);

/// The same request id again gets the stored reply (replayed), nothing appended twice.
async fn replays_and_pages_by_bytes(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let request = append_request(&p, "k", vec![item("", "a"), item("", "b")]);
    let once = c.items.append_items(request.clone()).await.unwrap().into_inner();
    let twice = c.items.append_items(request).await.unwrap().into_inner();
    assert_eq!(once.seqs, twice.seqs);
    assert!(twice.result.unwrap().replayed);
    assert_eq!(read_all(&mut c, reading(&p, "k", None), 0).await.0.len(), 2);
    // Five 1 MiB items: pages stop before 3 MiB, and a whole read gets every item.
    let big: Vec<NewItem> = (0..5)
        .map(|i| NewItem {
            key: format!("big{i}"),
            content_type: "application/octet-stream".into(),
            value: vec![i; 1 << 20],
        })
        .collect();
    for chunk in big.chunks(2) {
        append(&mut c, &p, "big", chunk.to_vec()).await;
    }
    let (all, pages) = read_all(&mut c, reading(&p, "big", None), 0).await;
    assert_eq!(all.len(), 5);
    assert!(pages >= 2, "{pages} pages");
    assert!(all.iter().enumerate().all(|(i, it)| it.value == vec![i as u8; 1 << 20]));
}
both!(replays_and_pages_by_bytes);

fn listing(p: &str, prefix: &str, delimiter: &str, page_size: i32) -> ListItemLogsRequest {
    ListItemLogsRequest {
        project: p.into(),
        prefix: prefix.into(),
        delimiter: delimiter.into(),
        with_summaries: false,
        page_size,
        page_token: String::new(),
    }
}

/// Every log and common prefix of a listing, following tokens.
async fn list_all(c: &mut Clients, mut request: ListItemLogsRequest) -> (Vec<String>, Vec<String>) {
    let (mut logs, mut common) = (Vec::new(), Vec::new());
    loop {
        let page = c.items.list_item_logs(request.clone()).await.unwrap().into_inner();
        let n = page.logs.len() + page.common_prefixes.len();
        assert!(request.page_size == 0 || n <= request.page_size as usize);
        logs.extend(page.logs.into_iter().map(|l| l.key));
        common.extend(page.common_prefixes);
        if page.next_page_token.is_empty() {
            return (logs, common);
        }
        request.page_token = page.next_page_token;
    }
}

async fn delete(c: &mut Clients, p: &str, keys: &[&str], prefixes: &[&str]) -> DeleteItemLogsResponse {
    let request = DeleteItemLogsRequest {
        project: p.into(),
        keys: keys.iter().map(|k| (*k).to_owned()).collect(),
        prefixes: prefixes.iter().map(|k| (*k).to_owned()).collect(),
        write: write(),
    };
    c.items.delete_item_logs(request).await.unwrap().into_inner()
}

/// Listings group keys by a delimiter after the prefix (S3-style), in byte order, in pages of
/// any size; deletes take logs by key and by prefix (a main log with its sub-logs).
async fn list_and_delete(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let keys = [
        "c/pk/s1",
        "c/pk/s1/sub/a",
        "c/pk/s1/sub/b",
        "c/pk/s10",
        "c/pk/s2",
        "c/pk/s2/x",
        "c/pk2/s3",
        "d",
        "é/1",
    ];
    for key in keys {
        append(&mut c, &p, key, vec![item("", key)]).await;
    }
    let want_logs = ["c/pk/s1", "c/pk/s10", "c/pk/s2"].map(str::to_owned).to_vec();
    let want_common = ["c/pk/s1/", "c/pk/s2/"].map(str::to_owned).to_vec();
    for page_size in [0, 1, 2, 3] {
        assert_eq!(
            list_all(&mut c, listing(&p, "c/pk/", "/", page_size)).await,
            (want_logs.clone(), want_common.clone())
        );
    }
    let (subs, none) = list_all(&mut c, listing(&p, "c/pk/s1/", "", 1)).await;
    assert_eq!((subs, none.len()), (vec!["c/pk/s1/sub/a".to_owned(), "c/pk/s1/sub/b".to_owned()], 0));
    let (top, groups) = list_all(&mut c, listing(&p, "", "/", 0)).await;
    assert_eq!((top, groups), (vec!["d".to_owned()], vec!["c/".to_owned(), "é/".to_owned()]));
    assert_eq!(list_all(&mut c, listing(&p, "", "", 4)).await.0, keys.to_vec());
    assert_eq!(list_all(&mut c, listing(&p, "zzz", "/", 0)).await, (vec![], vec![]));
    let stats = c
        .admin
        .get_stats(baton_proto::v1::GetStatsRequest { project: p.clone(), ..Default::default() })
        .await
        .unwrap();
    let stats = &stats.into_inner().projects[0];
    let bytes: usize = keys.iter().map(|k| k.len()).sum();
    assert_eq!((stats.item_logs, stats.items, stats.item_bytes), (9, 9, bytes as i64));
    // Summaries only when asked; last change and counts always.
    let page = c.items.list_item_logs(listing(&p, "d", "", 0)).await.unwrap().into_inner();
    let d = &page.logs[0];
    assert_eq!((d.items, d.bytes, d.last_seq, d.revision), (1, 1, 1, 8));
    assert!(d.updated_at.is_some() && d.author.as_ref().is_some_and(|a| a.host == "test-host"));

    // A main log and its sub-logs, by key and prefix; "c/pk/s10" shares the text but not the prefix.
    let gone = delete(&mut c, &p, &["c/pk/s1", "nothing-here"], &["c/pk/s1/"]).await;
    assert_eq!(gone.deleted, ["c/pk/s1", "c/pk/s1/sub/a", "c/pk/s1/sub/b"]);
    assert_eq!((gone.deleted_items, gone.more), (3, false));
    assert_eq!(list_all(&mut c, listing(&p, "c/pk/", "/", 0)).await.0, ["c/pk/s10", "c/pk/s2"]);
    assert!(c.items.read_items(reading(&p, "c/pk/s1/sub/a", None)).await.unwrap().into_inner().log.is_none());
    let nothing = delete(&mut c, &p, &["c/pk/s1"], &[]).await;
    assert!(nothing.deleted.is_empty() && nothing.result.is_none());
    // A deleted key starts again from seq 1.
    assert_eq!(append(&mut c, &p, "c/pk/s1", vec![item("", "again")]).await.seqs, [1]);
    let events = all_events(&mut c, &p).await;
    assert_gapless(&events);
    let deletes: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.value {
            Some(event::Value::Items(i)) if i.op == ItemsOp::Delete as i32 => Some(i.deleted_keys.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(deletes, [gone.deleted]);
}
both!(list_and_delete);

fn with_summary(
    p: &str,
    key: &str,
    items: Vec<NewItem>,
    summary: &str,
    base: Option<i64>,
) -> AppendItemsRequest {
    let write = match base {
        Some(base) => based(base, ConflictPolicy::Reject),
        None => write(),
    };
    AppendItemsRequest {
        project: p.into(),
        key: key.into(),
        items,
        summary_json: Some(summary.into()),
        write,
    }
}

/// The summary is a record of its own: a stale base is refused under REJECT with nothing
/// appended, or overwritten and reported; a summary alone is a write too.
async fn summaries(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let first = c
        .items
        .append_items(with_summary(&p, "s", vec![item("", "a")], r#"{"n":1}"#, Some(0)))
        .await
        .unwrap();
    let log = first.into_inner().log.unwrap();
    assert_eq!((log.summary_json.as_str(), log.summary_revision), (r#"{"n":1}"#, 1));
    // Another writer folded from "no summary": refused, and its item is not stored.
    let (got, msg) =
        code(c.items.append_items(with_summary(&p, "s", vec![item("", "b")], r#"{"n":9}"#, Some(0))).await);
    assert_eq!(got, Code::Aborted, "{msg}");
    assert!(msg.contains("items/s/summary"), "{msg}");
    assert_eq!(values(&read_all(&mut c, reading(&p, "s", None), 0).await.0), ["a"]);
    // From the current one: applied. Items alone leave the summary as it is.
    c.items.append_items(with_summary(&p, "s", vec![item("", "b")], r#"{"n":2}"#, Some(1))).await.unwrap();
    let plain = append(&mut c, &p, "s", vec![item("", "c")]).await.log.unwrap();
    assert_eq!((plain.summary_json.as_str(), plain.summary_revision), (r#"{"n":2}"#, 2));
    // A stale base without REJECT overwrites, and says what it overwrote.
    let mut stale = with_summary(&p, "s", vec![], r#"{"n":3}"#, Some(1));
    stale.write.as_mut().unwrap().policy = ConflictPolicy::Unspecified as i32;
    let result = c.items.append_items(stale).await.unwrap().into_inner().result.unwrap();
    assert_eq!(result.outcome, WriteOutcome::Overwritten as i32);
    let conflict = result.conflict.unwrap();
    assert_eq!((conflict.record.as_str(), conflict.current_revision), ("items/s/summary", 2));
    // Read back by ReadItems (last = 0: the log alone) and by a listing that asks for it.
    let alone = c.items.read_items(reading(&p, "s", Some(0))).await.unwrap().into_inner();
    assert_eq!(alone.log.unwrap().summary_json, r#"{"n":3}"#);
    let mut request = listing(&p, "s", "", 0);
    assert_eq!(c.items.list_item_logs(request.clone()).await.unwrap().into_inner().logs[0].summary_json, "");
    request.with_summaries = true;
    assert_eq!(
        c.items.list_item_logs(request).await.unwrap().into_inner().logs[0].summary_json,
        r#"{"n":3}"#
    );
    // A retry of an append that landed (its items stored, its summary the stored one) writes nothing.
    let head = all_events(&mut c, &p).await.len();
    let retry = with_summary(&p, "s", vec![item("u-x", "x")], r#"{"n":3}"#, None);
    c.items.append_items(retry.clone()).await.unwrap();
    let again = AppendItemsRequest { write: write(), ..retry };
    let replied = c.items.append_items(again).await.unwrap().into_inner();
    assert_eq!((replied.seqs, replied.result), (vec![0], None));
    assert_eq!(all_events(&mut c, &p).await.len(), head + 1);
    // "" clears it.
    let cleared = c.items.append_items(with_summary(&p, "s", vec![], "", None)).await.unwrap().into_inner();
    assert_eq!(cleared.log.unwrap().summary_json, "");
}
both!(summaries);

/// Concurrent pops from many clients each get a different item, together every one; appends
/// racing on one log get distinct seqs and lose nothing.
async fn concurrent_pops_and_appends(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let c = server.clients().await;
    let p = project();
    let appenders: Vec<_> = (0..4)
        .map(|w| {
            let (mut c, p) = (c.clone(), p.clone());
            tokio::spawn(async move {
                for i in 0..10 {
                    let batch = vec![
                        item(&format!("{w}-{i}-a"), &format!("{w}-{i}-a")),
                        item("", &format!("{w}-{i}-b")),
                    ];
                    append(&mut c, &p, "hot", batch).await;
                }
            })
        })
        .collect();
    for a in appenders {
        a.await.unwrap();
    }
    let (all, _) = read_all(&mut c.clone(), reading(&p, "hot", None), 0).await;
    assert_eq!(all.len(), 80);
    assert_eq!(all.iter().map(|i| i.seq).collect::<Vec<_>>(), (1..=80).collect::<Vec<_>>());
    // Each append's two items are adjacent: appends are whole.
    for pair in all.chunks(2) {
        assert_eq!(values(pair)[0].trim_end_matches("-a"), values(pair)[1].trim_end_matches("-b"));
    }
    let poppers: Vec<_> = (0..8)
        .map(|_| {
            let (mut c, p) = (c.clone(), p.clone());
            tokio::spawn(async move {
                let mut got = Vec::new();
                while let Some(i) = pop(&mut c, &p, "hot").await {
                    got.push(i.seq);
                }
                got
            })
        })
        .collect();
    let mut popped = Vec::new();
    for popper in poppers {
        popped.extend(popper.await.unwrap());
    }
    popped.sort_unstable();
    assert_eq!(popped, (1..=80).collect::<Vec<_>>(), "every item popped exactly once");
    let mut c = c.clone();
    assert_gapless(&all_events(&mut c, &p).await);
}
both!(concurrent_pops_and_appends);

/// What the server refuses, with the field it is about; a token of another project, or a
/// reader writing, is denied.
async fn item_bad_input_and_scope(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let cases: Vec<(AppendItemsRequest, &str)> = vec![
        (append_request(&p, "", vec![item("", "x")]), "key"),
        (append_request(&p, &"k".repeat(1025), vec![item("", "x")]), "key"),
        (append_request(&p, "a\nb", vec![item("", "x")]), "key"),
        (append_request(&p, "k", vec![]), "items"),
        (append_request(&p, "k", vec![item("", "x"); 1001]), "items"),
        (append_request(&p, "k", vec![item("bad\tkey", "x")]), "items[0].key"),
        (
            append_request(&p, "k", vec![NewItem { content_type: "tëxt".into(), ..item("", "x") }]),
            "items[0].content_type",
        ),
        (with_summary(&p, "k", vec![], "{not json", None), "summary_json"),
    ];
    for (request, field) in cases {
        let (got, msg) = code(c.items.append_items(request).await);
        assert_eq!(got, Code::InvalidArgument, "{field}: {msg}");
        assert!(msg.contains(field), "{field}: {msg}");
    }
    let big = append_request(&p, "k", vec![NewItem { value: vec![1; 9 << 20], ..item("", "") }]);
    assert_eq!(code(c.items.append_items(big).await).0, Code::ResourceExhausted);
    let bad_reads = [
        ReadItemsRequest { page_token: "garbage".into(), ..reading(&p, "k", None) },
        ReadItemsRequest { after_seq: -1, ..reading(&p, "k", None) },
        ReadItemsRequest { page_size: 5000, ..reading(&p, "k", None) },
    ];
    for request in bad_reads {
        assert_eq!(code(c.items.read_items(request).await).0, Code::InvalidArgument);
    }
    for (delimiter, token) in [("//", ""), ("/", "garbage")] {
        let request = ListItemLogsRequest { page_token: token.into(), ..listing(&p, "", delimiter, 0) };
        assert_eq!(code(c.items.list_item_logs(request).await).0, Code::InvalidArgument);
    }
    let everything =
        DeleteItemLogsRequest { project: p.clone(), prefixes: vec![String::new()], ..Default::default() };
    let (got, msg) = code(c.items.delete_item_logs(everything).await);
    assert_eq!(got, Code::InvalidArgument);
    assert!(msg.contains("prefixes[0]"), "{msg}");
    let nothing = DeleteItemLogsRequest { project: p.clone(), ..Default::default() };
    assert_eq!(code(c.items.delete_item_logs(nothing).await).0, Code::InvalidArgument);
    assert!(all_events(&mut c, &p).await.is_empty(), "nothing refused was written");

    append(&mut c, &p, "k", vec![item("", "x")]).await;
    let other = project();
    let scoped =
        crate::access::token(&server, &["create", "--name", "sdk", "--role", "writer", "--project", &other]);
    let reader = crate::access::token(&server, &["create", "--name", "ro", "--role", "reader"]);
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await; // past the "no tokens yet" cache
    let denied = c.items.read_items(with(reading(&p, "k", None), &scoped)).await.unwrap_err();
    assert_eq!(denied.code(), Code::PermissionDenied, "{denied:?}");
    let pop_request = PopItemRequest { project: p.clone(), key: "k".into(), write: write() };
    assert_eq!(
        c.items.pop_item(with(pop_request.clone(), &scoped)).await.unwrap_err().code(),
        Code::PermissionDenied
    );
    assert_eq!(
        c.items.pop_item(with(pop_request, &reader)).await.unwrap_err().code(),
        Code::PermissionDenied
    );
    let read = c.items.read_items(with(reading(&p, "k", None), &reader)).await.unwrap().into_inner();
    assert_eq!(values(&read.items), ["x"]);
    let own = append_request(&other, "k", vec![item("", "mine")]);
    c.items.append_items(with(own, &scoped)).await.unwrap();
}
both!(item_bad_input_and_scope);

/// Retention deletes logs idle past --item-log-days (a dry run first, from the command line
/// and through AdminService), with one ITEMS_CHANGED event; younger logs stay; 0 keeps all.
async fn idle_logs_expire(backend: Backend) {
    let server = Server::start_with(backend, &["--item-log-days", "30"]).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    for key in ["old/a", "old/b", "young"] {
        append(&mut c, &p, key, vec![item("", key)]).await;
    }
    let forty_days_us: i64 = 40 * 86_400_000_000;
    let n = server
        .execute(&format!(
            "UPDATE item_logs SET updated_us = updated_us - {forty_days_us} WHERE key LIKE 'old/%'"
        ))
        .await
        .unwrap();
    assert_eq!(n, 2);
    let before = all_events(&mut c, &p).await.len();
    let (ok, out, err) = server.admin_command(&["prune", "--dry-run", "--item-log-days", "0"]);
    assert!(ok && !out.contains("item logs"), "0 keeps them: {out} {err}");
    let (ok, out, err) = server.admin_command(&["prune", "--dry-run"]);
    assert!(ok, "{err}");
    assert!(out.contains("would remove 2 item logs") && out.contains("\"old/a\""), "{out}");
    assert_eq!(all_events(&mut c, &p).await.len(), before, "a dry run writes nothing");

    let request = baton_proto::v1::PruneRequest { project: p.clone(), ..Default::default() };
    let pruned = c.admin.prune(request).await.unwrap().into_inner();
    assert_eq!(pruned.projects.len(), 1);
    let report = &pruned.projects[0];
    assert_eq!(report.removed_item_logs, ["old/a", "old/b"]);
    assert!(report.removed_checkpoints.is_empty() && report.item_logs_revision > 0);
    assert_eq!(list_all(&mut c, listing(&p, "", "", 0)).await.0, ["young"]);
    let events = all_events(&mut c, &p).await;
    assert_gapless(&events);
    let last = events.last().unwrap();
    assert_eq!(
        (last.revision, last.actor.as_ref().map(|a| a.token.as_str())),
        (report.item_logs_revision, Some(""))
    );
    let Some(event::Value::Items(change)) = &last.value else { panic!("{last:?}") };
    assert_eq!((change.op, change.deleted_keys.len()), (ItemsOp::Delete as i32, 2));
}
both!(idle_logs_expire);

/// A purge reaches item values and summaries, and the events that carried them; counts and
/// seqs stay as they were.
async fn purge_reaches_item_logs(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let secret = "hunter2-leaked-value";
    let summary = format!(r#"{{"first_prompt": "use {secret}"}}"#);
    let request = with_summary(
        &p,
        "conv",
        vec![item("", "clean"), item("u2", &format!(r#"{{"text": "{secret}"}}"#))],
        &summary,
        None,
    );
    c.items.append_items(request).await.unwrap();
    let purged = c
        .admin
        .purge(baton_proto::v1::PurgeRequest { project: p.clone(), value: secret.into(), dry_run: false })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(purged.records, 2, "the log's summary and one item: {purged:?}");
    let read = c.items.read_items(reading(&p, "conv", None)).await.unwrap().into_inner();
    let masked = "*".repeat(secret.len());
    assert_eq!(values(&read.items), ["clean".to_owned(), format!(r#"{{"text": "{masked}"}}"#)]);
    let log = read.log.unwrap();
    assert_eq!(log.summary_json, format!(r#"{{"first_prompt": "use {masked}"}}"#));
    assert_eq!((log.items, log.last_seq), (2, 2));
    for e in all_events(&mut c, &p).await {
        assert!(!format!("{e:?}").contains(secret), "{e:?}");
    }
}
both!(purge_reaches_item_logs);

/// A laptop's item logs move to a team server: keys, seqs, item keys, values and summaries;
/// importing again changes nothing, and finishes one cut short; an import into a server where
/// one of the keys is another log is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_logs_export_and_import() {
    let laptop = Server::start(Backend::Sqlite).await.unwrap();
    let mut c = laptop.clients().await;
    let p = project();
    let first =
        with_summary(&p, "claude/pk/s1", vec![item("u1", "one"), item("u2", "two")], r#"{"n":2}"#, None);
    c.items.append_items(first).await.unwrap();
    append(&mut c, &p, "claude/pk/s1", vec![item("", "three")]).await;
    pop(&mut c, &p, "claude/pk/s1").await;
    append(&mut c, &p, "claude/pk/s1", vec![item("u4", "four")]).await;
    append(&mut c, &p, "claude/pk/s1/subagents/a", vec![item("", "sub")]).await;
    let before = read_all(&mut c, reading(&p, "claude/pk/s1", None), 0).await.0;

    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("items.baton").display().to_string();
    let (ok, _, err) = laptop.admin_command(&["export", "--output", &archive]);
    assert!(ok, "{err}");
    let team = Server::start(Backend::Postgres).await.unwrap();
    let mut t = team.clients().await;
    let (ok, out, err) = team.admin_command(&["import", "--input", &archive, "--dry-run"]);
    assert!(ok && out.contains(&format!("{p}: would import 6")), "{out} {err}");
    let (ok, out, err) = team.admin_command(&["import", "--input", &archive]);
    assert!(ok, "{err}");
    // 2 logs, 4 items.
    assert!(out.contains(&format!("{p}: imported 6, already present 0")), "{out}");
    let after = read_all(&mut t, reading(&p, "claude/pk/s1", None), 0).await.0;
    let shape = |items: &[Item]| -> Vec<(i64, String, String, Vec<u8>)> {
        items.iter().map(|i| (i.seq, i.key.clone(), i.content_type.clone(), i.value.clone())).collect()
    };
    assert_eq!(shape(&after), shape(&before));
    assert_eq!(after.iter().map(|i| i.seq).collect::<Vec<_>>(), [1, 2, 4]);
    let log =
        t.items.read_items(reading(&p, "claude/pk/s1", Some(0))).await.unwrap().into_inner().log.unwrap();
    assert_eq!((log.items, log.bytes, log.last_seq, log.summary_json.as_str()), (3, 10, 4, r#"{"n":2}"#));
    // The item keys came along: a retried append of u4 adds nothing; a new item follows seq 4.
    assert_eq!(
        append(&mut t, &p, "claude/pk/s1", vec![item("u4", "x"), item("", "five")]).await.seqs,
        [0, 5]
    );
    assert_eq!(list_all(&mut t, listing(&p, "claude/", "", 0)).await.0.len(), 2);
    assert_gapless(&all_events(&mut t, &p).await);

    // Again: nothing new. Into a server where one key is another log: refused, nothing written.
    let (ok, out, err) = team.admin_command(&["import", "--input", &archive]);
    assert!(ok, "{err}");
    assert!(out.contains(&format!("{p}: imported 0, already present 6")), "{out}");
    // An import cut short after a log's first items (as its batch boundary would leave it)
    // adds the rest when run again.
    let cut = Server::start(Backend::Sqlite).await.unwrap();
    let mut k = cut.clients().await;
    let (ok, _, err) = cut.admin_command(&["import", "--input", &archive]);
    assert!(ok, "{err}");
    cut.execute("DELETE FROM items WHERE seq = 4").await.unwrap();
    cut.execute("UPDATE item_logs SET items = 2, bytes = 6, last_seq = 2 WHERE key = 'claude/pk/s1'")
        .await
        .unwrap();
    let (ok, out, err) = cut.admin_command(&["import", "--input", &archive]);
    assert!(ok && out.contains(&format!("{p}: imported 1, already present 5")), "{out} {err}");
    assert_eq!(shape(&read_all(&mut k, reading(&p, "claude/pk/s1", None), 0).await.0), shape(&before));
    let other = Server::start(Backend::Sqlite).await.unwrap();
    let mut o = other.clients().await;
    append(&mut o, &p, "claude/pk/s1/subagents/a", vec![item("", "someone else's")]).await;
    let (ok, _, err) = other.admin_command(&["import", "--input", &archive]);
    assert!(!ok);
    assert!(err.contains("item log \"claude/pk/s1/subagents/a\" exists"), "{err}");
    assert!(o.items.read_items(reading(&p, "claude/pk/s1", None)).await.unwrap().into_inner().log.is_none());
}
