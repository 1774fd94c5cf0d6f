//! Many clients writing the same note and the same session at once: revisions gapless,
//! exactly one current value, every overwrite reported to its writer and on the watch
//! stream, and the event log replayed in order reproduces the stored state.

use std::collections::{BTreeMap, HashMap, HashSet};

use baton_proto::v1::{
    ConflictPolicy, Event, GetSessionRequest, ListConflictsRequest, ListMemoryRequest, MemoryOp,
    UpdateSessionRequest, WriteOutcome, event,
};
use baton_tests::{Backend, Server, both};

use crate::watch::{collect, open};
use crate::{all_events, assert_gapless, based, project, put_note, start_session};

/// Folds memory events into (record → contents), as a client mirroring the log would.
pub fn replay_memory(events: &[Event]) -> BTreeMap<String, Vec<String>> {
    let mut records: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for e in events {
        let Some(event::Value::Memory(m)) = &e.value else { continue };
        let record = e.entity_id.clone();
        let entry = records.entry(record).or_default();
        match MemoryOp::try_from(m.op).unwrap() {
            // Item operations carry the whole set after them, as REPLACE_SET does.
            MemoryOp::ReplaceSet | MemoryOp::Upsert | MemoryOp::AddItem | MemoryOp::RemoveItem => {
                *entry = m.entries.iter().map(|x| (x.id.clone(), x.content.clone())).collect();
            }
            MemoryOp::Append => {
                entry.extend(
                    m.entries.iter().filter(|x| !x.evicted).map(|x| (x.id.clone(), x.content.clone())),
                );
                entry.retain(|(id, _)| !m.evicted_ids.contains(id) && !m.deleted_ids.contains(id));
            }
            MemoryOp::Unspecified => panic!("event without op"),
        }
    }
    records
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| (k, v.into_iter().map(|(_, c)| c).collect()))
        .collect()
}

async fn same_note_and_session(backend: Backend) {
    let server = Server::start(backend).await.unwrap();
    let mut c = server.clients().await;
    let p = project();
    let session = start_session(&mut c, &p).await;
    let mut watcher = open(&mut c, &[(&p, 0)], vec![]).await;
    let clients = 16;
    let rounds = 10;
    let tasks: Vec<_> = (0..clients)
        .map(|w| {
            let mut c = c.clone();
            let p = p.clone();
            let sid = session.id.clone();
            tokio::spawn(async move {
                let mut replies = Vec::new();
                for i in 0..rounds {
                    // Each writer bases its write on what it last saw: often stale.
                    let note_base =
                        replies.last().map_or(0, |(_, r): &(bool, baton_proto::v1::WriteResult)| r.revision);
                    let r = put_note(
                        &mut c,
                        &p,
                        "shared",
                        &format!("{w}/{i}"),
                        based(note_base, ConflictPolicy::Overwrite),
                    )
                    .await
                    .unwrap()
                    .result
                    .unwrap();
                    replies.push((true, r));
                    let s = c
                        .sessions
                        .update_session(UpdateSessionRequest {
                            session_id: sid.clone(),
                            goal: Some(format!("goal {w}/{i}")),
                            write: based(note_base, ConflictPolicy::Overwrite),
                            ..Default::default()
                        })
                        .await
                        .unwrap()
                        .into_inner()
                        .result
                        .unwrap();
                    replies.push((false, s));
                }
                replies
            })
        })
        .collect();
    let mut replies = Vec::new();
    for t in tasks {
        replies.extend(t.await.unwrap());
    }
    let events = all_events(&mut c, &p).await;
    assert_gapless(&events);
    let head = events.last().unwrap().revision;
    assert_eq!(head, 1 + 2 * i64::from(clients * rounds));

    // Every reply's revision is distinct; every overwrite carries its conflict, and the
    // same conflict is in the event of that revision and on the watch stream.
    let revisions: HashSet<i64> = replies.iter().map(|(_, r)| r.revision).collect();
    assert_eq!(revisions.len(), replies.len());
    let by_revision: HashMap<i64, &Event> = events.iter().map(|e| (e.revision, e)).collect();
    let streamed = collect(&mut watcher, &p, 0, head).await;
    let streamed: HashMap<i64, &Event> = streamed.iter().map(|e| (e.revision, e)).collect();
    let mut overwritten = 0;
    for (_, r) in &replies {
        let event = by_revision[&r.revision];
        if r.outcome == WriteOutcome::Overwritten as i32 {
            overwritten += 1;
            let conflict = r.conflict.as_ref().expect("overwrite without conflict");
            assert_eq!(event.conflict.as_ref(), Some(conflict));
            assert_eq!(streamed[&r.revision].conflict.as_ref(), Some(conflict));
        } else {
            assert_eq!(r.outcome, WriteOutcome::Applied as i32);
            assert!(event.conflict.is_none());
        }
    }
    assert!(overwritten > 0, "the test should provoke conflicts");
    let conflicts = c
        .events
        .list_conflicts(ListConflictsRequest { project: p.clone(), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(conflicts.conflicts.len(), overwritten);

    // Exactly one current value, and the log replays to it.
    let stored = c
        .memory
        .list_memory(ListMemoryRequest { project: p.clone(), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(stored.entries.len(), 1);
    let replayed = replay_memory(&events);
    assert_eq!(
        replayed,
        BTreeMap::from([("note/shared".to_owned(), vec![stored.entries[0].content.clone()])])
    );
    let last_session_value = events
        .iter()
        .rev()
        .find_map(|e| match &e.value {
            Some(event::Value::Session(s)) => Some(s.clone()),
            _ => None,
        })
        .unwrap();
    let current = c
        .sessions
        .get_session(GetSessionRequest { session_id: session.id.clone() })
        .await
        .unwrap()
        .into_inner()
        .session
        .unwrap();
    assert_eq!(last_session_value, current);
}
both!(same_note_and_session);
