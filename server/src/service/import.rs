//! Import (`baton-server import`): a batch of an archive's lines for one project, its
//! revisioned rows in one write with one event each (revisions renumbered, ids kept). Rows
//! whose id the target already has, in any project, are skipped, so an interrupted import
//! can simply be run again.

use std::collections::{HashMap, HashSet};

use baton_proto::v1::{Actor, CheckpointRef, CommitsChange, Event, EventKind, MemoryChange, MemoryOp};

use super::write::{self, Write};
use crate::core::checkpoint::state_digest_of_stored;
use crate::core::commit::Link;
use crate::error::{Error, Result};
use crate::service::commit::link_message;
use crate::service::items::Imports;
use crate::store::commit_links::CommitTx;
use crate::store::items::ItemTx;
use crate::store::maintenance::{MaintenanceTx, RecordRevisions, Table};
use crate::store::model::{Change, Checkpoint, CommitChange, Entry, Lock, Session};
use crate::store::rows::decode_actor;
use crate::store::threads::ThreadTx;
use crate::store::transfer::{
    CheckpointLine, CommitLinkLine, ImportCounts, Line, MemoryLine, RecordLine, SessionLine, WriteLine,
};
use crate::store::{Store, WriteCtx, WriteTx};

/// Imports one batch of a project's lines: chunks and settings first (they carry no
/// revision), then the rest in one write.
#[tracing::instrument(level = "debug", skip_all, fields(project = %project))]
pub async fn batch<S: Store>(
    store: &S,
    project: String,
    memory_caps: Option<String>,
    lines: Vec<Line>,
) -> Result<ImportCounts> {
    let (chunks, lines): (Vec<Line>, Vec<Line>) =
        lines.into_iter().partition(|l| matches!(l, Line::Chunk(_)));
    let chunks: Vec<_> =
        chunks.into_iter().filter_map(|l| if let Line::Chunk(c) = l { Some(c) } else { None }).collect();
    for c in &chunks {
        // An archive is not trusted more than a client: what it stores must unpack to its
        // declared size and digest.
        if let Err(e) = crate::core::chunk::unpack(&c.digest, &c.data, c.size_bytes) {
            return Err(Error::InvalidArgument(format!(
                "archive: chunk {} of project {project:?}: {e}",
                c.digest
            )));
        }
    }
    let mut counts = store.import_unrevisioned(project.clone(), memory_caps, chunks).await?;
    let actor = Actor { token: "baton-server import".into(), ..Actor::default() };
    let ctx = WriteCtx { actor, ..WriteCtx::default() };
    let lock = Lock {
        project: project.clone(),
        request_id: None,
        memory: true,
        first_read: None,
        rewrites_log: false,
    };
    let ran = write::run(store, lock, ctx, move |w, ctx| {
        Box::pin(async move {
            let mut import =
                Import { w, project: &project, seen: Seen::default(), events: 0, items: Imports::default() };
            for line in lines {
                let imported = match line {
                    Line::Header { .. } | Line::Project { .. } | Line::Chunk(_) => continue,
                    Line::Session(s) => import.session(*s).await?,
                    Line::Checkpoint(c) => import.checkpoint(*c).await?,
                    Line::Memory(m) => import.memory(m).await?,
                    Line::Record(r) => import.record(r).await?,
                    Line::Write(w) => import.write(w).await?,
                    Line::ItemLog(l) => import.counted(|items, w| Box::pin(items.log(w, l))).await?,
                    Line::Item(i) => import.counted(|items, w| Box::pin(items.item(w, i))).await?,
                    Line::CommitLink(l) => import.commit_link(*l).await?,
                };
                if imported {
                    counts.imported += 1;
                } else {
                    counts.skipped += 1;
                }
            }
            let Import { w, items, events, .. } = import;
            items.finish(w);
            // Nothing revisioned: no revision used (the write is not finished, so undone).
            if events > 0 {
                w.finish(ctx, &baton_proto::v1::ListEventsResponse::default())?;
            }
            Ok(counts)
        })
    });
    ran.await?.done()
}

/// What this batch imported so far: its changes are applied only when it commits, so the
/// store cannot tell of them yet.
#[derive(Default)]
struct Seen {
    /// Sessions, with their head checkpoint: imported, or read for a checkpoint of theirs.
    sessions: HashMap<String, Option<String>>,
    checkpoints: HashSet<String>,
    entries: HashSet<String>,
    records: HashSet<String>,
    /// The newest revision among a record's imported entries.
    record_revision: HashMap<String, i64>,
    /// Pending writes by checkpoint: the keys it has (stored, or imported by this batch).
    writes: HashMap<String, HashSet<(String, i32)>>,
    /// Commit links imported: (commit, session).
    links: HashSet<(String, String)>,
}

struct Import<'a, 'w, T> {
    w: &'w mut Write<T>,
    project: &'a str,
    seen: Seen,
    events: usize,
    items: Imports,
}

impl<T: WriteTx + MaintenanceTx + ThreadTx + ItemTx + CommitTx> Import<'_, '_, T> {
    /// Whether a row with this id exists, here or in any project.
    async fn exists(&mut self, table: Table, id: &str) -> Result<bool> {
        let seen = match table {
            Table::Sessions => self.seen.sessions.contains_key(id),
            Table::Checkpoints => self.seen.checkpoints.contains(id),
            Table::Memory => self.seen.entries.contains(id),
        };
        Ok(seen || self.w.tx().owner(table, id).await?.is_some())
    }

    /// An item log's line or an item, imported (with its event) by `Imports`.
    async fn counted<F>(&mut self, step: F) -> Result<bool>
    where
        F: for<'x> FnOnce(&'x mut Imports, &'x mut Write<T>) -> futures::future::BoxFuture<'x, Result<bool>>,
    {
        let imported = step(&mut self.items, &mut *self.w).await?;
        self.events += usize::from(imported);
        Ok(imported)
    }

    /// A commit link, unless the project has it; its session must be the project's.
    async fn commit_link(&mut self, l: CommitLinkLine) -> Result<bool> {
        let key = (l.commit_id.clone(), l.session_id.clone());
        if !self.seen.sessions.contains_key(&l.session_id) && self.w.session(&l.session_id).await?.is_none() {
            return Err(Error::InvalidArgument(format!(
                "archive: the link of commit {} names session {}, which project {:?} does not have",
                l.commit_id, l.session_id, self.project
            )));
        }
        let stored = self.w.tx().commit_links(std::slice::from_ref(&l.commit_id)).await?;
        if self.seen.links.contains(&key) || stored.iter().any(|s| s.session_id == l.session_id) {
            return Ok(false);
        }
        let revision = self.w.revision();
        let link = Link {
            commit_id: l.commit_id,
            session_id: l.session_id,
            checkpoint_id: l.checkpoint_id,
            patch_id: l.patch_id,
            made_by: l.made_by,
            seen_by: l.seen_by,
            ambiguous: l.ambiguous,
            branch: l.branch,
            subject: l.subject,
            committed_us: l.committed_us,
            files: l.files,
            prompt: l.prompt,
            task: l.task,
            lines: i64::try_from(l.fingerprints.len()).unwrap_or(i64::MAX),
            lines_truncated: l.lines_truncated,
            created_us: l.created_us,
            revision,
            author: l.author,
        };
        let change = CommitsChange { links: vec![link_message(&link)], removed: Vec::new() };
        let mut ev =
            write::event(EventKind::CommitsChanged, "commit", &link.commit_id, &decode_actor(&link.author));
        ev.value = Some(baton_proto::v1::event::Value::Commits(change));
        self.w.apply(Change::Commits(CommitChange::Put(vec![(link, l.fingerprints)])));
        self.emit(ev)?;
        self.seen.links.insert(key);
        Ok(true)
    }

    fn emit(&mut self, event: Event) -> Result<()> {
        self.w.emit(event)?;
        self.events += 1;
        Ok(())
    }

    async fn session(&mut self, s: SessionLine) -> Result<bool> {
        if self.exists(Table::Sessions, &s.id).await? {
            return Ok(false);
        }
        let revision = self.w.revision();
        let row = Session {
            id: s.id,
            project: self.project.to_owned(),
            agent: s.agent,
            agent_session_id: s.agent_session_id,
            host: s.host,
            user_name: s.user_name,
            cwd: s.cwd,
            branch: s.branch,
            goal: s.goal,
            status: s.status,
            lease_ttl_ms: s.lease_ttl_ms,
            last_seen_us: s.last_seen_us,
            head_checkpoint_id: s.head_checkpoint_id,
            git_base: s.git_base,
            git_head: s.git_head,
            summary: s.summary,
            tool_count: s.tool_count,
            resumed_from: s.resumed_from,
            resumed_by: s.resumed_by,
            metadata: s.metadata,
            created_us: s.created_us,
            updated_us: s.updated_us,
            revision,
            written_us: s.written_us,
            author: s.author,
            head_revision: revision,
            head_written_us: s.head_written_us,
            head_author: s.head_author,
            thread_key: s.thread_key,
            thread_ns: s.thread_ns,
            start_revision: revision,
        };
        let mut ev = write::event(EventKind::SessionStarted, "session", &row.id, &decode_actor(&row.author));
        ev.value = Some(baton_proto::v1::event::Value::Session(row.to_proto()));
        self.seen.sessions.insert(row.id.clone(), row.head_checkpoint_id.clone());
        self.w.apply(Change::InsertSession(Box::new(row)));
        self.emit(ev)?;
        Ok(true)
    }

    async fn checkpoint(&mut self, c: CheckpointLine) -> Result<bool> {
        if self.exists(Table::Checkpoints, &c.id).await? {
            return Ok(false);
        }
        let head = match self.seen.sessions.get(&c.session_id) {
            Some(head) => head.clone(),
            None => match self.w.session(&c.session_id).await? {
                Some(session) => {
                    // Read once per batch (`Write::session` keeps it for the index).
                    let head = session.head_checkpoint_id;
                    self.seen.sessions.insert(c.session_id.clone(), head.clone());
                    head
                }
                None => {
                    return Err(Error::InvalidArgument(format!(
                        "checkpoint {} belongs to session {}, which is neither in the export nor in project {:?}",
                        c.id, c.session_id, self.project
                    )));
                }
            },
        };
        let revision = self.w.revision();
        // Not carried by the archive: computed from what it carries, and only if that verifies.
        let state_digest = state_digest_of_stored(&c.header(), &c.stored(), &c.digest);
        let mut ev =
            write::event(EventKind::CheckpointCreated, "checkpoint", &c.id, &decode_actor(&c.author));
        ev.value = Some(baton_proto::v1::event::Value::Checkpoint(CheckpointRef {
            id: c.id.clone(),
            session_id: c.session_id.clone(),
            parent_id: c.parent_id.clone().unwrap_or_default(),
            digest: c.digest.clone(),
            kind: c.kind,
            is_head: head.as_deref() == Some(c.id.as_str()),
            key: c.ordered_key.clone().unwrap_or_default(),
            metadata_json: c.metadata.clone().unwrap_or_default(),
            ..Default::default()
        }));
        self.seen.checkpoints.insert(c.id.clone());
        self.w.apply(Change::InsertCheckpoint(Box::new(Checkpoint {
            id: c.id,
            session_id: c.session_id,
            project: self.project.to_owned(),
            parent_id: c.parent_id,
            kind: c.kind,
            reason: c.reason,
            state: c.state,
            payload: c.payload,
            payload_content_type: c.payload_content_type,
            compression: c.compression,
            size_bytes: c.size_bytes,
            digest: c.digest,
            state_digest: Some(state_digest),
            created_us: c.created_us,
            revision,
            author: c.author,
            blobs: c.blobs,
            ordered_key: c.ordered_key,
            metadata: c.metadata,
            run_id: c.run_id,
        })));
        self.emit(ev)?;
        Ok(true)
    }

    /// A pending write, unless its checkpoint has one of that key (its checkpoint is the
    /// project's: the import's first pass checked that).
    async fn write(&mut self, line: WriteLine) -> Result<bool> {
        if !self.seen.writes.contains_key(&line.checkpoint_id) {
            let stored = self.w.tx().checkpoint_writes(&line.checkpoint_id).await?;
            let keys = stored.into_iter().map(|w| (w.task_id, w.idx)).collect();
            self.seen.writes.insert(line.checkpoint_id.clone(), keys);
        }
        let keys = self.seen.writes.entry(line.checkpoint_id.clone()).or_default();
        if !keys.insert((line.task_id.clone(), line.idx)) {
            return Ok(false);
        }
        let revision = self.w.revision();
        let write = crate::store::model::PendingWrite {
            checkpoint_id: line.checkpoint_id,
            task_id: line.task_id,
            idx: line.idx,
            channel: line.channel,
            task_path: line.task_path,
            value_type: line.value_type,
            value: line.value,
            revision,
        };
        let actor = Actor { token: "baton-server import".into(), ..Actor::default() };
        let mut ev = write::event(EventKind::ThreadWrites, "checkpoint", &write.checkpoint_id, &actor);
        ev.value = Some(baton_proto::v1::event::Value::ThreadWrites(baton_proto::v1::ThreadWrites {
            session_id: String::new(),
            checkpoint_id: write.checkpoint_id.clone(),
            key: String::new(),
            writes: vec![crate::service::thread::write_ref(&write)],
        }));
        self.w.apply(Change::PutWrites(vec![write]));
        self.emit(ev)?;
        Ok(true)
    }

    async fn memory(&mut self, m: MemoryLine) -> Result<bool> {
        if self.exists(Table::Memory, &m.id).await? {
            return Ok(false);
        }
        let revision = self.w.revision();
        let entry = Entry {
            id: m.id,
            category: m.category,
            branch: m.branch,
            key: m.key,
            content: m.content,
            rationale: m.rationale,
            author: decode_actor(&m.author),
            revision,
            seq: m.seq,
            created_us: m.created_us,
            evicted: m.evicted,
            record_revision: revision,
        };
        let op =
            if entry.category == crate::core::memory::NOTE { MemoryOp::Upsert } else { MemoryOp::Append };
        let mut ev = write::event(EventKind::MemoryChanged, "memory", &m.record, &entry.author);
        ev.value = Some(baton_proto::v1::event::Value::Memory(MemoryChange {
            category: entry.category.clone(),
            branch: entry.branch.clone(),
            key: entry.key.clone(),
            op: op as i32,
            entries: vec![entry.to_proto(self.project)],
            ..Default::default()
        }));
        self.seen.entries.insert(entry.id.clone());
        self.seen.record_revision.insert(m.record.clone(), revision);
        self.w.apply(Change::InsertEntries { record: m.record, entries: vec![entry] });
        self.emit(ev)?;
        Ok(true)
    }

    /// A record's LWW version, if the target has none: its revision is that of the latest
    /// entry of the record.
    async fn record(&mut self, r: RecordLine) -> Result<bool> {
        if self.seen.records.contains(&r.record) {
            return Ok(false);
        }
        let RecordRevisions { record: exists, newest_entry: stored } =
            self.w.tx().record_revisions(&r.record).await?;
        let latest = stored.max(self.seen.record_revision.get(&r.record).copied());
        let (None, Some(revision)) = (exists, latest) else { return Ok(false) };
        self.seen.records.insert(r.record.clone());
        self.w.apply(Change::PutRecordVersion {
            record: r.record,
            revision,
            written_us: r.written_us,
            author: decode_actor(&r.author),
        });
        Ok(true)
    }
}
