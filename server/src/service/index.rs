//! The search index follows every write: `follow` turns a write's changes into the index's
//! changes, which the store applies in the same transaction, so a search never misses an
//! acknowledged write and never finds what a write removed. What of each record is
//! indexed is `core::search::doc`.

use std::collections::HashMap;

use baton_proto::v1::{EventKind, Maintenance as MaintenanceEvent};

use crate::core::search::doc::{self, Kind};
use crate::error::Result;
use crate::store::maintenance::MaintenanceTx as _;
use crate::store::model::{Change, Checkpoint, Entry, Index, Maintenance, SearchDoc, Session};
use crate::store::rows::decode_actor;
use crate::store::{Store, WriteCtx};

/// The index changes that follow `changes`; `read` are sessions the write read but did not
/// change.
pub fn follow(changes: &[Change], read: &[Session]) -> Vec<Change> {
    // A checkpoint's branch is its session's: as the same write writes it when it does,
    // else as the write read it.
    let written = changes.iter().filter_map(|c| match c {
        Change::InsertSession(s) | Change::PutSession(s) => Some(&**s),
        _ => None,
    });
    let sessions: HashMap<&str, &Session> = read.iter().chain(written).map(|s| (s.id.as_str(), s)).collect();
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
                let session =
                    sessions.get(c.session_id.as_str()).map(|s| (s.branch.as_str(), s.user_name.as_str()));
                out.extend(checkpoint_doc(c, session).filter(|d| !d.words.is_empty()).map(put));
            }
            Change::Maintenance(m) => out.extend(maintenance(m)),
            Change::Evict { .. }
            | Change::PutWrites(_)
            | Change::Items(_)
            | Change::Reservations(_)
            | Change::Commits(_)
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
        // Their checkpoints go by `DeleteCheckpoints`, which the write lists too.
        Maintenance::DeleteSessions { ids } => vec![drop(Kind::Session, ids.clone())],
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

/// A checkpoint's document, with its session's (branch, user) when known, the user as its
/// author when the writer gave none; none if its state cannot be read (it is then not
/// searchable, and the write goes on: a read of it reports the damage).
fn checkpoint_doc(c: &Checkpoint, session: Option<(&str, &str)>) -> Option<SearchDoc> {
    let state = match crate::core::checkpoint::decode_state_unverified(&c.stored()) {
        Ok(state) => state,
        Err(e) => {
            tracing::warn!(checkpoint = %c.id, error = %e, "a checkpoint's state does not decode: not indexed");
            return None;
        }
    };
    let body = doc::checkpoint(&state);
    let mut author = decode_actor(&c.author).user;
    if author.is_empty() {
        author = session.map(|(_, user)| user.to_owned()).unwrap_or_default();
    }
    Some(SearchDoc {
        kind: Kind::Checkpoint,
        record_id: c.id.clone(),
        record: String::new(),
        session_id: c.session_id.clone(),
        branch: session.map(|(branch, _)| branch.to_owned()).unwrap_or_default(),
        author,
        created_us: c.created_us,
        revision: c.revision,
        words: doc::words(&body),
        body,
    })
}

/// How far the indexing of a project's older records has come (`backfill_batch`).
#[derive(Debug, Default, Clone)]
pub struct Backfill {
    stage: Stage,
    after: String,
    /// Each session's (branch, user), for its checkpoints' documents.
    sessions: HashMap<String, (String, String)>,
    pub indexed: u64,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Stage {
    #[default]
    Sessions,
    Checkpoints,
    Memory,
    Done,
}

/// Records per batch: a batch is one write, holding the project's lock. Checkpoints are
/// read with their states, so fewer at a time.
const BATCH: i64 = 1000;
const CHECKPOINT_BATCH: i64 = 100;

/// Indexes the next batch of a project's records from before search, as a maintenance
/// write of its own (under the lock, so no write in between can leave the index behind);
/// the last one takes the project off the backfill list. True when done.
pub async fn backfill_batch<S: Store>(store: &S, project: &str, b: &mut Backfill) -> Result<bool> {
    let ctx = WriteCtx::default();
    // Advanced only once the batch is committed.
    let next = b.clone();
    let key = project.to_owned();
    let done = super::retention::run(store, project, ctx, false, move |w, ctx| {
        Box::pin(async move {
            let mut next = next;
            let b = &mut next;
            let project = key;
            let docs = match b.stage {
                Stage::Sessions => {
                    let rows = w.tx().sessions_after(&b.after, BATCH).await?;
                    for s in &rows {
                        b.sessions.insert(s.id.clone(), (s.branch.clone(), s.user_name.clone()));
                    }
                    advance(b, rows.last().map(|s| s.id.clone()), rows.len(), BATCH);
                    rows.iter().map(session_doc).filter(|d| !d.words.is_empty()).collect()
                }
                Stage::Checkpoints => {
                    let rows = w.tx().checkpoints_after(&b.after, CHECKPOINT_BATCH).await?;
                    advance(b, rows.last().map(|c| c.id.clone()), rows.len(), CHECKPOINT_BATCH);
                    rows.iter()
                        .filter_map(|c| {
                            let session =
                                b.sessions.get(&c.session_id).map(|(b, u)| (b.as_str(), u.as_str()));
                            checkpoint_doc(c, session)
                        })
                        .filter(|d| !d.words.is_empty())
                        .collect()
                }
                Stage::Memory => {
                    let rows = w.tx().entries_after(&b.after, BATCH).await?;
                    advance(b, rows.last().map(|e| e.id.clone()), rows.len(), BATCH);
                    rows.iter().map(|r| entry_doc(&r.record, &r.to_entry())).collect::<Vec<_>>()
                }
                Stage::Done => Vec::new(),
            };
            let indexed = docs.len();
            for d in docs {
                w.apply(put(d));
            }
            if b.stage == Stage::Done {
                w.apply(Change::Maintenance(Maintenance::SearchBackfilled));
            }
            let value = MaintenanceEvent {
                indexed_records: i64::try_from(indexed).unwrap_or(i64::MAX),
                ..Default::default()
            };
            let mut event = super::write::event(EventKind::SearchIndexed, "project", &project, &ctx.actor);
            event.value = Some(baton_proto::v1::event::Value::Maintenance(value));
            w.emit(event)?;
            w.finish(ctx, &baton_proto::v1::Maintenance::default())?;
            b.indexed += indexed as u64;
            Ok(next)
        })
    })
    .await?;
    *b = done;
    Ok(b.stage == Stage::Done)
}

/// Moves past a batch: to the next stage when it was the stage's last.
fn advance(b: &mut Backfill, last: Option<String>, read: usize, limit: i64) {
    match last {
        Some(last) if i64::try_from(read).unwrap_or(i64::MAX) >= limit => b.after = last,
        _ => {
            b.after.clear();
            b.stage = match b.stage {
                Stage::Sessions => Stage::Checkpoints,
                Stage::Checkpoints => Stage::Memory,
                Stage::Memory | Stage::Done => Stage::Done,
            };
        }
    }
}
