//! History check: concurrent clients record every operation and its reply; a checker then
//! replays the operations in revision order through the server's own core (`lww::decide`)
//! and verifies every reply (outcome, conflict, overwritten value) and every watch stream
//! against that one serial order.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use baton_proto::v1::{
    ConflictPolicy, Event, ListMemoryRequest, RecordValue, WatchCursor, WatchRequest, WriteOptions,
    WriteOutcome, record_value,
};
use baton_server::core::lww::{self, Decision, Policy, RecordVersion, WriteIntent};
use baton_tests::{Backend, Clients, Server, both};
use tokio_stream::StreamExt as _;
use tonic::Code;

use crate::{all_events, assert_gapless, project, put_note, req_id};

const KEYS: [&str; 3] = ["h0", "h1", "h2"];

#[derive(Debug, Clone)]
struct Op {
    key: String,
    content: String,
    base: Option<i64>,
    reject: bool,
    reply: Reply,
}

#[derive(Debug, Clone)]
enum Reply {
    Written { revision: i64, outcome: i32, overwritten: Option<String> },
    Rejected { current_revision: i64, current: Option<String> },
}

fn note_content(v: Option<&RecordValue>) -> Option<String> {
    match v.and_then(|v| v.value.as_ref()) {
        Some(record_value::Value::Note(n)) => Some(n.content.clone()),
        _ => None,
    }
}

/// The revision a client last saw for a key (its base), from a fresh read.
async fn read_base(c: &mut Clients, p: &str, key: &str) -> Option<i64> {
    let listed = c
        .memory
        .list_memory(ListMemoryRequest { project: p.into(), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    Some(listed.entries.iter().find(|e| e.key == key).map_or(0, |e| e.record_revision))
}

async fn serial_history(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let c = server.clients().await;
    let p = project();
    // Watchers from the start, and one that joins late from revision 0.
    let watch = |c: &Clients| {
        let mut events = c.events.clone();
        let p = p.clone();
        tokio::spawn(async move {
            let mut stream = events
                .watch(WatchRequest {
                    cursors: vec![WatchCursor { project: p, after_revision: 0 }],
                    kinds: vec![],
                })
                .await
                .unwrap()
                .into_inner();
            let mut got: Vec<Event> = Vec::new();
            while let Ok(Some(Ok(e))) =
                tokio::time::timeout(std::time::Duration::from_secs(3), stream.next()).await
            {
                got.push(e);
            }
            got
        })
    };
    let early = watch(&c);

    let ops = Arc::new(Mutex::new(Vec::<Op>::new()));
    let clients: Vec<_> = (0..8)
        .map(|w| {
            let (mut c, p, ops) = (c.clone(), p.clone(), ops.clone());
            tokio::spawn(async move {
                for i in 0..12 {
                    let key = KEYS[(w + i) % KEYS.len()].to_owned();
                    let content = format!("w{w}-{i}");
                    // A fresh base, a stale one, or none; either policy.
                    let base = match (w + i * 3) % 4 {
                        0 => None,
                        1 => Some(0),
                        _ => read_base(&mut c, &p, &key).await,
                    };
                    let reject = (w * 7 + i) % 3 == 0;
                    let write = Some(WriteOptions {
                        request_id: req_id(),
                        base_revision: base,
                        policy: if reject { ConflictPolicy::Reject } else { ConflictPolicy::Overwrite }
                            as i32,
                        ..Default::default()
                    });
                    let reply = match put_note(&mut c, &p, &key, &content, write).await {
                        Ok(r) => {
                            let r = r.result.unwrap();
                            Reply::Written {
                                revision: r.revision,
                                outcome: r.outcome,
                                overwritten: r
                                    .conflict
                                    .as_ref()
                                    .and_then(|c| note_content(c.current_value.as_ref())),
                            }
                        }
                        Err(s) => {
                            assert_eq!(s.code(), Code::Aborted, "{s:?}");
                            let rejected =
                                baton_proto::details::rejected_write(&s).unwrap().conflict.unwrap();
                            Reply::Rejected {
                                current_revision: rejected.current_revision,
                                current: note_content(rejected.current_value.as_ref()),
                            }
                        }
                    };
                    ops.lock().unwrap().push(Op { key, content, base, reject, reply });
                }
            })
        })
        .collect();
    for t in clients {
        t.await.unwrap();
    }
    let late = watch(&c);
    let mut c = c.clone();
    let events = all_events(&mut c, &p).await;
    assert_gapless(&events);
    let ops = ops.lock().unwrap().clone();
    let written: HashMap<i64, &Op> = ops
        .iter()
        .filter_map(|o| match o.reply {
            Reply::Written { revision, .. } => Some((revision, o)),
            Reply::Rejected { .. } => None,
        })
        .collect();
    assert_eq!(written.len(), events.len(), "every applied write has exactly one revision, and only they do");

    // Replay in revision order through the core; remember every state each record went through.
    let mut state: HashMap<String, (i64, String)> = HashMap::new();
    let mut seen: Vec<(String, i64, String)> = Vec::new();
    for e in &events {
        let op =
            written.get(&e.revision).unwrap_or_else(|| panic!("revision {} has no operation", e.revision));
        let current = state.get(&op.key).cloned();
        let decision = lww::decide(
            current.as_ref().map(|(revision, _)| RecordVersion { revision: *revision, written_us: 0 }),
            WriteIntent {
                base_revision: op.base,
                policy: if op.reject { Policy::Reject } else { Policy::Overwrite },
                queued_at_us: None,
            },
        );
        let Reply::Written { outcome, overwritten, .. } = &op.reply else { unreachable!() };
        let expected = match decision {
            Decision::Applied => WriteOutcome::Applied,
            Decision::Overwritten => WriteOutcome::Overwritten,
            other => panic!("revision {}: the core says {other:?}, but the write was applied", e.revision),
        };
        assert_eq!(*outcome, expected as i32, "revision {}: {op:?}", e.revision);
        if expected == WriteOutcome::Overwritten {
            assert_eq!(
                overwritten,
                &current.as_ref().map(|(_, v)| v.clone()),
                "revision {}: overwritten value",
                e.revision
            );
            let conflict = e.conflict.as_ref().expect("the event carries the conflict");
            assert_eq!(note_content(conflict.current_value.as_ref()), *overwritten);
        } else {
            assert!(e.conflict.is_none(), "revision {}: a conflict on an applied write", e.revision);
        }
        state.insert(op.key.clone(), (e.revision, op.content.clone()));
        seen.push((op.key.clone(), e.revision, op.content.clone()));
    }
    // Each rejected write saw a real state of its record, one its base did not match.
    for op in ops.iter().filter(|o| matches!(o.reply, Reply::Rejected { .. })) {
        let Reply::Rejected { current_revision, current } = &op.reply else { unreachable!() };
        assert!(op.reject && op.base != Some(*current_revision), "{op:?}");
        let existed = if *current_revision == 0 {
            current.is_none()
        } else {
            seen.iter().any(|(k, r, v)| k == &op.key && r == current_revision && Some(v) == current.as_ref())
        };
        assert!(existed, "rejected write saw a state that never existed: {op:?}");
    }
    // The history exercised every outcome (else this check proves little).
    let count = |o: WriteOutcome| {
        ops.iter()
            .filter(|op| matches!(op.reply, Reply::Written { outcome, .. } if outcome == o as i32))
            .count()
    };
    let rejected = ops.iter().filter(|o| matches!(o.reply, Reply::Rejected { .. })).count();
    assert!(
        count(WriteOutcome::Applied) > 0 && count(WriteOutcome::Overwritten) > 0 && rejected > 0,
        "applied {}, overwritten {}, rejected {rejected}",
        count(WriteOutcome::Applied),
        count(WriteOutcome::Overwritten)
    );
    // The final stored values are the replay's.
    let stored = c
        .memory
        .list_memory(ListMemoryRequest { project: p.clone(), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    for (key, (_, value)) in &state {
        let e = stored.entries.iter().find(|e| &e.key == key).unwrap();
        assert_eq!(&e.content, value, "{key}");
    }
    // Both watch streams show the same serial order.
    for (who, got) in [("early", early.await.unwrap()), ("late", late.await.unwrap())] {
        let revisions: Vec<i64> = got.iter().map(|e| e.revision).collect();
        assert_eq!(revisions, events.iter().map(|e| e.revision).collect::<Vec<_>>(), "{who} watcher");
        assert_eq!(got, events, "{who} watcher saw different events");
    }
}
both!(serial_history);
