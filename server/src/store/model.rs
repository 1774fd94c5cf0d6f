//! Baton's records as a write transaction reads and changes them: the vocabulary between
//! the service layer (which decides) and a backend (which applies). No API request or
//! reply crosses it; actors are kept as the API's `Actor` value, which is also how they
//! are stored (encoded).

use baton_proto::v1::{Actor, MemoryEntry};

use crate::core::lww::RecordVersion;
use crate::core::time::ts;

/// What a write locks, and what it reads first.
#[derive(Debug, Clone)]
pub struct Lock {
    pub project: String,
    /// The write's idempotency key: an earlier reply stored under it is read with the lock.
    pub request_id: Option<String>,
    /// The write may change the project's memory: its revision becomes the project's
    /// `memory_revision`, which tells briefs that a cached memory section is out of date.
    pub memory: bool,
    /// What the write reads first, once the lock is held (a backend may read it with the
    /// lock; see the backend's module header).
    pub first_read: Option<FirstRead>,
    /// The write rewrites or deletes events already written (a purge, retention): the
    /// backend holds the project's watch reader to the table until it ends
    /// (`events::Wakers::hold`).
    pub rewrites_log: bool,
}

/// A write's first read (`Lock::first_read`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FirstRead {
    /// A memory record's state (`WriteTx::record_state`).
    Record(String),
    /// A session (`WriteTx::session`).
    Session(String),
}

/// A first read as a backend read it with the lock, kept until the write asks for it.
#[derive(Debug)]
pub enum FirstReadDone {
    Record(String, RecordState),
    Session(String, Option<Box<Session>>),
}

impl FirstReadDone {
    /// The record's state, if this is what was read.
    pub fn record(first: &mut Option<Self>, record: &str) -> Option<RecordState> {
        match first.take() {
            Some(Self::Record(read, state)) if read == record => Some(state),
            _ => None,
        }
    }

    /// The session (or that there is none), if this is what was read.
    pub fn session(first: &mut Option<Self>, id: &str) -> Option<Option<Session>> {
        match first.take() {
            Some(Self::Session(read, session)) if read == id => Some(session.map(|s| *s)),
            _ => None,
        }
    }
}

/// A session as stored (read straight from its row).
pub use crate::store::rows::SessionRow as Session;

/// A checkpoint as stored, its state and payload encoded (read straight from its row).
pub use crate::store::rows::CheckpointRow as Checkpoint;

/// A checkpoint as a node of its session's tree, with the stored size of its state.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Node {
    pub id: String,
    pub parent_id: Option<String>,
    pub state_bytes: i64,
}

/// A memory entry as a read outside a write gives it, with its record's revision.
pub use crate::store::rows::MemoryRow as EntryRow;

/// What a memory list selects, in the order (category, branch, key, revision, seq).
#[derive(Debug, Clone, Default)]
pub struct MemoryQuery {
    pub project: String,
    /// One category ("" = all).
    pub category: String,
    /// One branch ("" = project-wide); `None` = every branch.
    pub branch: Option<String>,
    pub include_evicted: bool,
    /// Entries after this position only.
    pub after: Option<crate::store::MemoryPosition>,
    /// At most this many (and one more, to tell whether more follow).
    pub limit: i64,
}

/// The two logs, each a table of encoded messages by project and revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogTable {
    Events,
    Conflicts,
}

/// A project's counts, for GetStats.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProjectCounts {
    pub head_revision: i64,
    /// The oldest revision the event log keeps.
    pub events_from: i64,
    /// Sessions per status.
    pub statuses: Vec<StatusCount>,
    pub checkpoints: i64,
    pub checkpoint_bytes: i64,
    pub chunks: i64,
    pub chunk_bytes: i64,
    pub memory_entries: i64,
    pub events: i64,
    pub item_logs: i64,
    pub items: i64,
    pub item_bytes: i64,
}

/// What the project lock gives a write.
#[derive(Debug, Clone)]
pub struct Locked {
    /// The revision allocated to the write (the project's new head).
    pub revision: i64,
    /// The write's time by the database clock (µs), never before the project's last write.
    pub now_us: i64,
    /// The project's memory caps (a JSON object of category → cap).
    pub memory_caps: String,
    /// The stored hash and reply of an earlier request with the write's request id.
    pub earlier: Option<EarlierRequest>,
}

#[derive(Debug, Clone)]
pub struct EarlierRequest {
    pub request_hash: Vec<u8>,
    pub reply: Vec<u8>,
}

/// A memory entry as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub id: String,
    pub category: String,
    pub branch: String,
    pub key: String,
    pub content: String,
    pub rationale: String,
    pub author: Actor,
    /// The revision that wrote the entry, and its place among that write's entries.
    pub revision: i64,
    pub seq: i64,
    pub created_us: i64,
    pub evicted: bool,
    /// The revision of its record's last write (its own revision for history entries).
    pub record_revision: i64,
}

impl Entry {
    pub fn to_proto(&self, project: &str) -> MemoryEntry {
        MemoryEntry {
            id: self.id.clone(),
            project: project.to_owned(),
            category: self.category.clone(),
            branch: self.branch.clone(),
            key: self.key.clone(),
            content: self.content.clone(),
            rationale: self.rationale.clone(),
            author: Some(self.author.clone()),
            revision: self.revision,
            record_revision: self.record_revision,
            created_at: Some(ts(self.created_us)),
            evicted: self.evicted,
        }
    }
}

/// A memory record (a set or a note): its last write and its live entries in order.
#[derive(Debug, Clone, Default)]
pub struct RecordState {
    pub version: Option<(RecordVersion, Actor)>,
    pub entries: Vec<Entry>,
}

/// A change a write applies to its project, decided before any is applied. A write's
/// changes are applied in order, and no two of them touch the same row, so a backend may
/// send them as one statement.
#[derive(Debug, Clone)]
pub enum Change {
    /// Drops every entry of a memory record.
    DeleteRecord { record: String },
    /// Drops memory entries by id.
    DeleteEntries { ids: Vec<String> },
    /// Marks memory entries evicted (history beyond its cap).
    Evict { ids: Vec<String> },
    /// Adds entries to a memory record.
    InsertEntries { record: String, entries: Vec<Entry> },
    /// Sets a memory record's LWW version.
    PutRecordVersion { record: String, revision: i64, written_us: i64, author: Actor },
    /// Replaces the project's memory caps (a JSON object).
    SetMemoryCaps { json: String },
    /// Adds a session (its `revision` is also its start revision).
    InsertSession(Box<Session>),
    /// Adds a checkpoint (before any `PutSession`, which may make it the head).
    InsertCheckpoint(Box<Checkpoint>),
    /// Writes back a session read in this write: every field a write may change, its
    /// liveness (`last_seen_us`, `tool_count`) only forward, as heartbeats move it without
    /// the project's lock.
    PutSession(Box<Session>),
    /// Maintenance (retention, compaction, purge, import): rare and bulky, so a backend may
    /// apply it as plain statements in the write's own savepoint.
    Maintenance(Maintenance),
    /// The search index following the write's other changes (`service::index`).
    Index(Index),
    /// Stores a thread's pending writes (after the checkpoints they belong to), each
    /// replacing any stored under its (checkpoint, task, index).
    PutWrites(Vec<PendingWrite>),
    /// An item log's change (`service::items`): plain statements on both backends.
    Items(ItemChange),
    /// Reservations' changes (`service::reservation`): plain statements on both backends.
    Reservations(ReservationChange),
    /// Commit links' changes (`service::commit`): plain statements on both backends.
    Commits(CommitChange),
}

/// A change of the commit links.
#[derive(Debug, Clone)]
pub enum CommitChange {
    /// Writes links, new or changed (every column), each with fingerprints to add.
    Put(Vec<(crate::core::commit::Link, Vec<String>)>),
    /// Drops links (commit, session) with their fingerprints.
    Remove(Vec<(String, String)>),
}

/// A change of the reservations.
#[derive(Debug, Clone)]
pub enum ReservationChange {
    /// Writes rows, new or changed (every column but the id's project).
    Put(Vec<crate::core::reservation::Row>),
    /// Writes the project's settings row.
    Settings(ReservationSettingsRow),
}

/// A project's reservation settings as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, sqlx::FromRow)]
pub struct ReservationSettingsRow {
    pub ttl_seconds: i64,
    /// `ReservationEnforcement` as a number.
    pub enforcement: i64,
    /// 0 or 1.
    pub auto_reserve: i64,
    pub revision: i64,
}

/// A change of the item logs, in the order a write makes them.
#[derive(Debug, Clone)]
pub enum ItemChange {
    /// Writes a log's row, new or changed.
    PutLog(Box<ItemLog>),
    /// Adds items to a log whose row is written (`PutLog`) before.
    Insert(Vec<Item>),
    /// Drops one item of a log.
    Remove { log_key: String, seq: i64 },
    /// Drops logs with their items.
    DeleteLogs { keys: Vec<String> },
    /// An item's value, as masked by a purge.
    MaskItem(Box<Item>),
}

/// An item log's row (`ItemLogService`).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ItemLog {
    pub key: String,
    pub items: i64,
    pub bytes: i64,
    pub last_seq: i64,
    pub created_us: i64,
    pub updated_us: i64,
    pub revision: i64,
    /// Encoded `Actor` (`rows::encode_actor`).
    pub author: Vec<u8>,
    pub summary: Option<String>,
    pub summary_revision: i64,
    pub summary_us: i64,
}

/// An item as stored.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Item {
    pub log_key: String,
    pub seq: i64,
    pub item_key: Option<String>,
    pub content_type: String,
    pub value: Vec<u8>,
    pub revision: i64,
    pub created_us: i64,
}

/// What a list of thread checkpoints selects, newest (greatest key) first.
#[derive(Debug, Clone, Default)]
pub struct ThreadQuery {
    pub project: String,
    /// Checkpoints of these sessions (a thread's namespaces); `None`: every thread's.
    pub sessions: Option<Vec<String>>,
    /// Only the checkpoints of threads' namespaces of this name.
    pub namespace: Option<String>,
    /// Only the checkpoint with this key.
    pub key: Option<String>,
    /// Only these checkpoints (by Baton id).
    pub ids: Option<Vec<String>>,
    /// Only keys below this one.
    pub before_key: Option<String>,
    /// A page's continuation: after this (key, id), in the list's order.
    pub after: Option<(String, String)>,
    /// Top-level metadata keys and the canonical JSON their value must equal.
    pub filter: Vec<(String, String)>,
    /// At most this many (and one more, to tell whether more follow).
    pub limit: i64,
    pub payload: bool,
}

/// A thread's checkpoint as a list reads it, with its parent's key.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ThreadRow {
    #[sqlx(flatten)]
    pub checkpoint: Checkpoint,
    pub parent_key: Option<String>,
    /// Its session's thread and namespace.
    pub thread_key: Option<String>,
    pub thread_ns: Option<String>,
}

/// A pending write as stored (`service::thread`).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct PendingWrite {
    pub checkpoint_id: String,
    pub task_id: String,
    pub idx: i32,
    pub channel: String,
    pub task_path: String,
    pub value_type: String,
    pub value: Vec<u8>,
    pub revision: i64,
}

/// A change of the search index.
#[derive(Debug, Clone)]
pub enum Index {
    /// Adds a record's document, or replaces it when its text or branch changed.
    Put(Box<SearchDoc>),
    /// A document's text, as masked by a purge.
    Retext { kind: Kind, record_id: String, body: String, words: Vec<String> },
    /// Drops documents by record id.
    Drop { kind: Kind, record_ids: Vec<String> },
    /// Drops the documents of every entry a memory record has (evicted ones included),
    /// found through the entries: it comes before any change that removes them.
    DropRecord { record: String },
}

pub use crate::core::search::doc::Kind;

/// A record's search document: its body (for snippets), the words indexed from it, and
/// what hits are filtered and shown by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchDoc {
    pub kind: Kind,
    pub record_id: String,
    /// The memory record (set or note) an entry belongs to; "" for other kinds.
    pub record: String,
    /// The session it belongs to (a memory entry: the session that wrote it, if any).
    pub session_id: String,
    pub branch: String,
    /// The user who wrote it.
    pub author: String,
    pub created_us: i64,
    pub revision: i64,
    pub body: String,
    pub words: Vec<String>,
}

/// The changes only maintenance writes make.
#[derive(Debug, Clone)]
pub enum Maintenance {
    /// Checkpoints, with their pending writes.
    DeleteCheckpoints {
        ids: Vec<String>,
    },
    /// Sessions, with their checkpoints and pending writes (a thread deleted by its caller).
    DeleteSessions {
        ids: Vec<String>,
    },
    SetParent {
        checkpoint: String,
        parent: Option<String>,
    },
    /// A chunk, unless the project has one with its digest.
    PutChunk {
        digest: String,
        data: Vec<u8>,
        size_bytes: i64,
        created_us: i64,
    },
    DeleteChunks {
        digests: Vec<String>,
    },
    /// Drops the events below a revision, and says so on the project.
    CompactEvents {
        below: i64,
    },
    /// A session's text, authors included, as masked by a purge.
    MaskSession(Box<Session>),
    /// A checkpoint's content, as masked by a purge (with new digests where it verified).
    MaskCheckpoint(Box<Checkpoint>),
    /// A pending write's value and labels, as masked by a purge.
    MaskWrite(Box<PendingWrite>),
    /// A memory entry's text and author (encoded), as masked by a purge.
    MaskEntry {
        id: String,
        content: String,
        rationale: String,
        author: Vec<u8>,
    },
    SetRecordAuthor {
        record: String,
        author: Vec<u8>,
    },
    SetEventBody {
        revision: i64,
        body: Vec<u8>,
    },
    SetConflictBody {
        id: String,
        body: Vec<u8>,
    },
    SetReply {
        request_id: String,
        reply: Vec<u8>,
    },
    /// The project's records from before search are all indexed (`service::index`).
    SearchBackfilled,
}

/// What every write logs with its changes: one event per revision, the conflicts it
/// reported, its reply (for idempotency) and, if it took more than one revision, the
/// project's new head.
#[derive(Debug, Clone, Default)]
pub struct Log {
    pub events: Vec<LoggedEvent>,
    pub conflicts: Vec<LoggedConflict>,
    pub request: Option<StoredRequest>,
    /// The project's head when it is past the revision the lock allocated.
    pub head: Option<i64>,
}

/// An event as stored: its body is the encoded `baton.v1.Event`.
#[derive(Debug, Clone)]
pub struct LoggedEvent {
    pub revision: i64,
    pub kind: i32,
    pub body: Vec<u8>,
}

/// A conflict as stored: its body is the encoded `baton.v1.Conflict`.
#[derive(Debug, Clone)]
pub struct LoggedConflict {
    pub id: String,
    pub revision: i64,
    pub body: Vec<u8>,
}

/// A write's reply, kept under its request id.
#[derive(Debug, Clone)]
pub struct StoredRequest {
    pub request_id: String,
    pub request_hash: Vec<u8>,
    pub reply: Vec<u8>,
    pub created_us: i64,
}

/// What a search reads: the matches of `query` in a project, filtered, a checkpoint hit per session (its newest match), best first.
#[derive(Debug, Clone)]
pub struct SearchQuery {
    pub project: String,
    /// Written by each backend in its engine's syntax (`Query::fts5`, `Query::tsquery`).
    pub query: crate::core::search::query::Query,
    /// Kinds as a bit mask (bit n: kind n); 0 for all.
    pub kinds: i64,
    /// "" for any.
    pub session_id: String,
    pub branch: String,
    pub author: String,
    /// Created in [after_us, before_us).
    pub after_us: i64,
    pub before_us: i64,
    /// Documents written up to this revision and with ids up to this one: the first page's
    /// head and newest document, so later pages agree (`None` on the first page).
    pub bounds: Option<(i64, i64)>,
    /// The newest this many matches are ranked (`core::search::RANKED`).
    pub ranked: i64,
    /// How long the search's statements may run: then the engine stops them
    /// (`Error::over_time_limit`).
    pub time_limit: std::time::Duration,
}

/// A search's candidates as read, whether the project's older records are still being
/// indexed, and the pages' bounds (`SearchQuery::bounds`).
#[derive(Debug, Clone)]
pub struct SearchPage {
    pub candidates: Vec<crate::core::search::rank::Candidate>,
    pub partial: bool,
    pub bounds: (i64, i64),
}

/// A search document as a hit shows it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct SearchRow {
    pub id: i64,
    pub kind: i64,
    pub record_id: String,
    pub session_id: String,
    pub branch: String,
    pub author: String,
    pub created_us: i64,
    pub revision: i64,
    pub body: String,
}

/// A session's liveness after a heartbeat (`Store::touch_session`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, sqlx::FromRow)]
pub struct Liveness {
    pub status: i32,
    pub last_seen_us: i64,
}

/// A session whose liveness ran out, as the reaper finds it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ExpiredSession {
    pub id: String,
    pub project: String,
    pub status: i32,
    pub last_seen_us: i64,
}

/// A log row's revision and the stored size of its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, sqlx::FromRow)]
pub struct LogSize {
    pub revision: i64,
    pub bytes: i64,
}

/// A log row: its revision and encoded body.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct LogRow {
    pub revision: i64,
    pub body: Vec<u8>,
}

/// A transcript chunk as stored: compressed bytes (empty when not asked for) and the
/// declared size of what they hold.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Chunk {
    pub digest: String,
    #[sqlx(default)]
    pub data: Vec<u8>,
    pub size_bytes: i64,
}

/// A project as the read paths see it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ProjectRow {
    pub key: String,
    /// The project's current revision.
    pub head_revision: i64,
    /// The oldest revision its event log keeps (0: none compacted).
    pub events_from: i64,
    /// Its memory caps (a JSON object).
    pub memory_caps: String,
    /// Whether its records from before search are still to be indexed.
    pub indexing: bool,
}

/// Which tokens to read.
#[derive(Debug, Clone)]
pub enum TokenKey {
    /// Every token, revoked ones too, oldest first.
    All,
    /// The token of that name, revoked or not.
    Name(String),
    /// The token whose secret has that hash.
    SecretHash(String),
}

/// A change to the token table.
#[derive(Debug, Clone)]
pub enum TokenWrite {
    /// Adds a token (`service::tokens::create` checks its name is free).
    Create { token: crate::store::TokenRow, secret_hash: String },
    /// Revokes the live token of that name (false: there was none).
    Revoke { name: String, now_us: i64 },
    /// Records a token's use.
    Used { id: String, now_us: i64 },
}

/// A signed-in browser of the web view (`web_sessions`).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct WebSessionRow {
    /// The hash of the token it signed in with (`None`: an open hub's).
    pub token_hash: Option<String>,
    pub created_us: i64,
    pub expires_us: i64,
}

/// A change to the web sessions.
#[derive(Debug, Clone)]
pub enum WebSessionWrite {
    /// A new sign-in, by the hash of its cookie's secret.
    Create { secret_hash: String, token_hash: Option<String>, created_us: i64, expires_us: i64 },
    /// A sign-out.
    Delete { secret_hash: String },
    /// Removes the sessions expired by then.
    Expire { now_us: i64 },
}

/// What the metrics read of the store.
#[derive(Debug)]
pub struct StoreMetrics {
    /// Sessions per status, all projects (the connections are known even when the
    /// database cannot be read).
    pub sessions: crate::error::Result<Vec<StatusCount>>,
    /// Database connections open, and idle among them.
    pub connections: u32,
    pub idle_connections: usize,
}

/// How many sessions are in a status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, sqlx::FromRow)]
pub struct StatusCount {
    pub status: i32,
    pub count: i64,
}

/// The project and session of a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct CheckpointOwner {
    pub project: String,
    pub session_id: String,
}
