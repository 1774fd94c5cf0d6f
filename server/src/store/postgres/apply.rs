//! A write's changes and log as the arguments of `baton_apply_lock` (the migration
//! `apply_lock_in_one`; its composite types declared by `begin_functions`, with checkpoints
//! since `apply_checkpoints` and the search index since `search`): the rows it adds or
//! writes back as arrays of those types, in their order.

use sqlx::Arguments as _;
use sqlx::error::BoxDynError;
use sqlx::postgres::PgArguments;

use crate::core::search::tokens::tsvector_literal;
use crate::store::model::{Change, Checkpoint, Index, Log, Maintenance, SearchDoc, Session};
use crate::store::rows::encode_actor;

/// What the lock gave the write, as `baton_apply_lock` records it on the project.
pub(super) struct Write<'a> {
    pub project: &'a str,
    /// The project's head after this write.
    pub head: i64,
    pub now_us: i64,
    /// The write's revision, if it may have changed memory (the brief's cache key).
    pub memory_revision: Option<i64>,
}

/// `baton_entry`.
#[derive(sqlx::Type)]
#[sqlx(type_name = "baton_entry")]
struct EntryArg {
    id: String,
    category: String,
    branch: String,
    key: String,
    record: String,
    content: String,
    rationale: String,
    author: Vec<u8>,
    revision: i64,
    seq: i64,
    created_us: i64,
    evicted: bool,
}

/// `baton_record_version`.
#[derive(sqlx::Type)]
#[sqlx(type_name = "baton_record_version")]
struct VersionArg {
    record: String,
    revision: i64,
    written_us: i64,
    author: Vec<u8>,
}

/// `baton_session`: a session's columns but its project (and start revision).
#[derive(sqlx::Type)]
#[sqlx(type_name = "baton_session")]
struct SessionArg {
    id: String,
    agent: i32,
    agent_session_id: String,
    host: String,
    user_name: String,
    cwd: String,
    branch: String,
    goal: String,
    status: i32,
    lease_ttl_ms: i64,
    last_seen_us: i64,
    head_checkpoint_id: Option<String>,
    git_base: String,
    git_head: String,
    summary: String,
    tool_count: i64,
    resumed_from: Option<String>,
    resumed_by: Option<String>,
    metadata: String,
    created_us: i64,
    updated_us: i64,
    revision: i64,
    written_us: i64,
    author: Vec<u8>,
    head_revision: i64,
    head_written_us: i64,
    head_author: Vec<u8>,
}

impl From<Session> for SessionArg {
    fn from(s: Session) -> Self {
        Self {
            id: s.id,
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
            revision: s.revision,
            written_us: s.written_us,
            author: s.author,
            head_revision: s.head_revision,
            head_written_us: s.head_written_us,
            head_author: s.head_author,
        }
    }
}

/// `baton_checkpoint`: a checkpoint's columns but its project.
#[derive(sqlx::Type)]
#[sqlx(type_name = "baton_checkpoint")]
struct CheckpointArg {
    id: String,
    session_id: String,
    parent_id: Option<String>,
    kind: i32,
    reason: String,
    state: Vec<u8>,
    payload: Vec<u8>,
    payload_content_type: String,
    compression: String,
    size_bytes: i64,
    digest: String,
    state_digest: Option<String>,
    created_us: i64,
    revision: i64,
    author: Vec<u8>,
    blobs: Vec<u8>,
}

impl From<Checkpoint> for CheckpointArg {
    fn from(c: Checkpoint) -> Self {
        Self {
            id: c.id,
            session_id: c.session_id,
            parent_id: c.parent_id,
            kind: c.kind,
            reason: c.reason,
            state: c.state,
            payload: c.payload,
            payload_content_type: c.payload_content_type,
            compression: c.compression,
            size_bytes: c.size_bytes,
            digest: c.digest,
            state_digest: c.state_digest,
            created_us: c.created_us,
            revision: c.revision,
            author: c.author,
            blobs: c.blobs,
        }
    }
}

/// `baton_search_doc`.
#[derive(sqlx::Type)]
#[sqlx(type_name = "baton_search_doc")]
struct SearchDocArg {
    kind: i16,
    record_id: String,
    record: String,
    session_id: String,
    branch: String,
    author: String,
    created_us: i64,
    revision: i64,
    body: String,
    words: String,
}

impl From<SearchDoc> for SearchDocArg {
    fn from(d: SearchDoc) -> Self {
        Self {
            kind: d.kind as i16,
            record_id: d.record_id,
            record: d.record,
            session_id: d.session_id,
            branch: d.branch,
            author: d.author,
            created_us: d.created_us,
            revision: d.revision,
            words: tsvector_literal(&d.words),
            body: d.body,
        }
    }
}

/// `baton_search_edit`: op 1 drops a document, 2 a memory record's, 3 replaces a text.
#[derive(sqlx::Type)]
#[sqlx(type_name = "baton_search_edit")]
struct SearchEditArg {
    op: i16,
    kind: i16,
    record_id: String,
    record: String,
    body: String,
    words: String,
}

impl SearchEditArg {
    fn of(index: Index) -> Vec<Self> {
        let edit = |op, kind: crate::store::model::Kind, record_id: String| Self {
            op,
            kind: kind as i16,
            record_id,
            record: String::new(),
            body: String::new(),
            words: String::new(),
        };
        match index {
            Index::Put(_) => Vec::new(),
            Index::Drop { kind, record_ids } => record_ids.into_iter().map(|id| edit(1, kind, id)).collect(),
            Index::DropRecord { record } => {
                vec![Self { record, ..edit(2, crate::store::model::Kind::Memory, String::new()) }]
            }
            Index::Retext { kind, record_id, body, words } => {
                vec![Self { body, words: tsvector_literal(&words), ..edit(3, kind, record_id) }]
            }
        }
    }
}

/// `baton_event`.
#[derive(sqlx::Type)]
#[sqlx(type_name = "baton_event")]
struct EventArg {
    revision: i64,
    kind: i32,
    body: Vec<u8>,
}

/// `baton_conflict`.
#[derive(sqlx::Type)]
#[sqlx(type_name = "baton_conflict")]
struct ConflictArg {
    id: String,
    revision: i64,
    body: Vec<u8>,
}

/// A write's changes, by kind, as `baton_apply_lock` takes them.
#[derive(Default)]
pub(super) struct Changes {
    caps: Option<String>,
    deleted_records: Vec<String>,
    deleted_entries: Vec<String>,
    evicted: Vec<String>,
    entries: Vec<EntryArg>,
    versions: Vec<VersionArg>,
    added_sessions: Vec<SessionArg>,
    put_sessions: Vec<SessionArg>,
    checkpoints: Vec<CheckpointArg>,
    search_edits: Vec<SearchEditArg>,
    search_docs: Vec<SearchDocArg>,
}

impl Changes {
    /// The changes `baton_apply_lock` makes, and the maintenance ones it does not.
    pub(super) fn of(changes: Vec<Change>) -> (Self, Vec<Maintenance>) {
        let mut c = Self::default();
        let mut maintenance = Vec::new();
        for change in changes {
            match change {
                Change::DeleteRecord { record } => c.deleted_records.push(record),
                Change::DeleteEntries { ids } => c.deleted_entries.extend(ids),
                Change::Evict { ids } => c.evicted.extend(ids),
                Change::InsertEntries { record, entries } => {
                    c.entries.extend(entries.into_iter().map(|e| EntryArg {
                        id: e.id,
                        category: e.category,
                        branch: e.branch,
                        key: e.key,
                        record: record.clone(),
                        content: e.content,
                        rationale: e.rationale,
                        author: encode_actor(&e.author),
                        revision: e.revision,
                        seq: e.seq,
                        created_us: e.created_us,
                        evicted: e.evicted,
                    }));
                }
                Change::PutRecordVersion { record, revision, written_us, author } => {
                    c.versions.push(VersionArg {
                        record,
                        revision,
                        written_us,
                        author: encode_actor(&author),
                    });
                }
                Change::SetMemoryCaps { json } => c.caps = Some(json),
                Change::InsertSession(session) => c.added_sessions.push((*session).into()),
                Change::PutSession(session) => c.put_sessions.push((*session).into()),
                Change::InsertCheckpoint(checkpoint) => c.checkpoints.push((*checkpoint).into()),
                Change::Maintenance(m) => maintenance.push(m),
                Change::Index(Index::Put(doc)) => c.search_docs.push((*doc).into()),
                Change::Index(index) => c.search_edits.extend(SearchEditArg::of(index)),
            }
        }
        (c, maintenance)
    }
}

/// `baton_apply_lock`'s arguments for a write's changes, in order (`sql::APPLY` adds no
/// lock after them).
pub(super) fn arguments(write: &Write<'_>, c: Changes, log: Log) -> Result<PgArguments, BoxDynError> {
    let events: Vec<EventArg> = log
        .events
        .into_iter()
        .map(|e| EventArg { revision: e.revision, kind: e.kind, body: e.body })
        .collect();
    let conflicts: Vec<ConflictArg> = log
        .conflicts
        .into_iter()
        .map(|c| ConflictArg { id: c.id, revision: c.revision, body: c.body })
        .collect();
    let request = log.request;
    let mut args = PgArguments::default();
    args.add(write.project)?;
    args.add(write.head)?;
    args.add(write.now_us)?;
    args.add(write.memory_revision)?;
    args.add(c.caps)?;
    args.add(c.deleted_records)?;
    args.add(c.deleted_entries)?;
    args.add(c.evicted)?;
    args.add(c.entries)?;
    args.add(c.versions)?;
    args.add(c.added_sessions)?;
    args.add(c.put_sessions)?;
    args.add(events)?;
    args.add(conflicts)?;
    args.add(request.as_ref().map(|r| r.request_id.clone()))?;
    args.add(request.as_ref().map(|r| r.request_hash.clone()))?;
    args.add(request.map(|r| r.reply))?;
    args.add(c.checkpoints)?;
    args.add(c.search_edits)?;
    args.add(c.search_docs)?;
    Ok(args)
}
