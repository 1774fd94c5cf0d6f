//! The search index follows every write: `follow` turns a write's changes into the index's
//! changes, which the store applies in the same transaction, so a search never misses an
//! acknowledged write and never finds what a write removed. What of each record is
//! indexed is `core::search::doc`.

use std::collections::HashMap;

use crate::core::search::doc::{self, Kind};
use crate::store::model::{Change, Checkpoint, Entry, Index, Maintenance, SearchDoc, Session};
use crate::store::rows::decode_actor;

/// The index changes that follow `changes`.
pub fn follow(changes: &[Change]) -> Vec<Change> {
    // A checkpoint's branch is its session's, written in the same write when it is there.
    let sessions: HashMap<&str, &Session> = changes
        .iter()
        .filter_map(|c| match c {
            Change::InsertSession(s) | Change::PutSession(s) => Some((s.id.as_str(), &**s)),
            _ => None,
        })
        .collect();
    let mut out = Vec::new();
    for change in changes {
        match change {
            Change::InsertEntries { record, entries } => {
                out.extend(entries.iter().map(|e| put(entry_doc(record, e))));
            }
            Change::DeleteRecord { record } => {
                out.push(Change::Index(Index::DropRecord { record: record.clone() }));
            }
            Change::DeleteEntries { ids } => out.push(drop(Kind::Memory, ids.clone())),
            Change::InsertSession(s) | Change::PutSession(s) => out.push(session_change(s)),
            Change::InsertCheckpoint(c) => {
                let session = sessions.get(c.session_id.as_str()).copied();
                out.extend(checkpoint_doc(c, session).filter(|d| !d.words.is_empty()).map(put));
            }
            Change::Maintenance(m) => out.extend(maintenance(m)),
            Change::Evict { .. }
            | Change::PutRecordVersion { .. }
            | Change::SetMemoryCaps { .. }
            | Change::Index(_) => {}
        }
    }
    out
}

fn maintenance(m: &Maintenance) -> Vec<Change> {
    match m {
        Maintenance::DeleteCheckpoints { ids } => vec![drop(Kind::Checkpoint, ids.clone())],
        Maintenance::MaskSession(s) => vec![session_change(s)],
        Maintenance::MaskCheckpoint(c) => {
            // The masked text replaces the old; the rest of the document stays.
            checkpoint_doc(c, None).map_or_else(Vec::new, |d| {
                vec![Change::Index(Index::Retext {
                    kind: Kind::Checkpoint,
                    record_id: d.record_id,
                    body: d.body,
                    words: d.words,
                })]
            })
        }
        Maintenance::MaskEntry { id, content, rationale, .. } => {
            // The masked document leaves out the key, which a purge does not mask.
            let body = doc::memory("", content, rationale);
            let words = doc::words(&body);
            vec![Change::Index(Index::Retext { kind: Kind::Memory, record_id: id.clone(), body, words })]
        }
        _ => Vec::new(),
    }
}

fn put(doc: SearchDoc) -> Change {
    Change::Index(Index::Put(Box::new(doc)))
}

fn drop(kind: Kind, record_ids: Vec<String>) -> Change {
    Change::Index(Index::Drop { kind, record_ids })
}

fn entry_doc(record: &str, e: &Entry) -> SearchDoc {
    let body = doc::memory(&e.key, &e.content, &e.rationale);
    SearchDoc {
        kind: Kind::Memory,
        record_id: e.id.clone(),
        record: record.to_owned(),
        session_id: e.author.session_id.clone(),
        branch: e.branch.clone(),
        author: e.author.user.clone(),
        created_us: e.created_us,
        revision: e.revision,
        words: doc::words(&body),
        body,
    }
}

/// A session's document, or none when it has no goal or summary (yet, or any more).
fn session_change(s: &Session) -> Change {
    let doc = session_doc(s);
    if doc.words.is_empty() { drop(Kind::Session, vec![doc.record_id]) } else { put(doc) }
}

fn session_doc(s: &Session) -> SearchDoc {
    let body = doc::session(&s.goal, &s.summary);
    SearchDoc {
        kind: Kind::Session,
        record_id: s.id.clone(),
        record: String::new(),
        session_id: s.id.clone(),
        branch: s.branch.clone(),
        author: s.user_name.clone(),
        created_us: s.created_us,
        revision: s.revision,
        words: doc::words(&body),
        body,
    }
}

/// A checkpoint's document, with its session's branch and (when its writer gave none) user
/// when the write holds the session; none if its state cannot be read (it is then not
/// searchable, and the write goes on: a read of it reports the damage).
fn checkpoint_doc(c: &Checkpoint, session: Option<&Session>) -> Option<SearchDoc> {
    let state = match crate::core::checkpoint::decode_state_unverified(&c.state, &c.compression) {
        Ok(state) => state,
        Err(e) => {
            tracing::warn!(checkpoint = %c.id, error = %e, "a checkpoint's state does not decode: not indexed");
            return None;
        }
    };
    let body = doc::checkpoint(&state);
    let mut author = decode_actor(&c.author).user;
    if author.is_empty() {
        author = session.map(|s| s.user_name.clone()).unwrap_or_default();
    }
    Some(SearchDoc {
        kind: Kind::Checkpoint,
        record_id: c.id.clone(),
        record: String::new(),
        session_id: c.session_id.clone(),
        branch: session.map(|s| s.branch.clone()).unwrap_or_default(),
        author,
        created_us: c.created_us,
        revision: c.revision,
        words: doc::words(&body),
        body,
    })
}
