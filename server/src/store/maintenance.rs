//! The reads of maintenance writes (retention, compaction, purge, import): whole tables of
//! one project, which no request path reads, implemented once for both backends on the
//! write's transaction (each statement one text, `$n`). Their changes are
//! `model::Maintenance`, which each backend applies.

use std::future::Future;

use sqlx::{Database, Encode, Executor, FromRow, IntoArguments, Type};

use super::model::{Checkpoint, LogRow, PendingWrite, Session};
use super::rows::MemoryRow;
use super::sql::{CHECKPOINT_PROJECT, ENTRY_PROJECT, SESSION_PROJECT};
use super::writer::{Backend, Tx};
use crate::error::Result;

/// Tables whose ids are unique across projects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    Sessions,
    Checkpoints,
    Memory,
}

/// A memory entry's text and author (encoded), as a purge reads and writes it back.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct EntryText {
    pub id: String,
    pub content: String,
    pub rationale: String,
    pub author: Vec<u8>,
}

/// A checkpoint as a node of its project's tree.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct TreeRow {
    pub id: String,
    pub parent_id: Option<String>,
    pub created_us: i64,
}

/// A checkpoint's encoded `BlobRefs`.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct BlobsRow {
    pub id: String,
    pub blobs: Vec<u8>,
}

/// A memory record's encoded author.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct RecordAuthor {
    pub record: String,
    pub author: Vec<u8>,
}

/// A chunk's data as stored (compressed).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ChunkData {
    pub digest: String,
    pub data: Vec<u8>,
}

/// A conflict's encoded body.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ConflictBody {
    pub id: String,
    pub body: Vec<u8>,
}

/// A stored reply to a request id.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct StoredReply {
    pub request_id: String,
    pub reply: Vec<u8>,
}

/// A memory record's LWW revision, and the newest revision among its entries.
#[derive(Debug, Clone, Copy, sqlx::FromRow)]
pub struct RecordRevisions {
    pub record: Option<i64>,
    pub newest_entry: Option<i64>,
}

/// A write's reads for maintenance, all within its project unless said otherwise.
pub trait MaintenanceTx: Send {
    /// Every checkpoint.
    fn checkpoint_tree(&mut self) -> impl Future<Output = Result<Vec<TreeRow>>> + Send;
    /// The head checkpoint of every session that has one.
    fn session_heads(&mut self) -> impl Future<Output = Result<Vec<String>>> + Send;
    /// Every checkpoint with transcripts.
    fn checkpoint_blobs(&mut self) -> impl Future<Output = Result<Vec<BlobsRow>>> + Send;
    /// The digests of chunks stored before a time (µs).
    fn chunks_before(&mut self, before_us: i64) -> impl Future<Output = Result<Vec<String>>> + Send;
    /// The oldest revision the event log keeps.
    fn events_from(&mut self) -> impl Future<Output = Result<i64>> + Send;
    /// How many events are below a revision.
    fn events_below(&mut self, revision: i64) -> impl Future<Output = Result<i64>> + Send;
    /// Every session.
    fn sessions(&mut self) -> impl Future<Output = Result<Vec<Session>>> + Send;
    /// Every memory entry's text as stored.
    fn entry_texts(&mut self) -> impl Future<Output = Result<Vec<EntryText>>> + Send;
    /// Every memory record's author.
    fn record_authors(&mut self) -> impl Future<Output = Result<Vec<RecordAuthor>>> + Send;
    /// A chunk's data as stored (compressed).
    fn chunk(&mut self, digest: &str) -> impl Future<Output = Result<Option<Vec<u8>>>> + Send;
    /// Every chunk.
    fn chunks(&mut self) -> impl Future<Output = Result<Vec<ChunkData>>> + Send;
    /// Every event.
    fn event_bodies(&mut self) -> impl Future<Output = Result<Vec<LogRow>>> + Send;
    /// Every conflict.
    fn conflict_bodies(&mut self) -> impl Future<Output = Result<Vec<ConflictBody>>> + Send;
    /// Every stored reply.
    fn replies(&mut self) -> impl Future<Output = Result<Vec<StoredReply>>> + Send;
    /// The project of a row, of any project.
    fn owner(&mut self, table: Table, id: &str) -> impl Future<Output = Result<Option<String>>> + Send;
    /// Up to `limit` sessions after an id, by id.
    fn sessions_after(
        &mut self,
        after: &str,
        limit: i64,
    ) -> impl Future<Output = Result<Vec<Session>>> + Send;
    /// Up to `limit` checkpoints after an id, by id, without their payloads.
    fn checkpoints_after(
        &mut self,
        after: &str,
        limit: i64,
    ) -> impl Future<Output = Result<Vec<Checkpoint>>> + Send;
    /// Up to `limit` memory entries (evicted ones too) after an id, by id, with their record.
    fn entries_after(
        &mut self,
        after: &str,
        limit: i64,
    ) -> impl Future<Output = Result<Vec<MemoryRow>>> + Send;
    /// Every pending write.
    fn pending_writes(&mut self) -> impl Future<Output = Result<Vec<PendingWrite>>> + Send;
    /// A memory record's LWW revision, and the newest revision among its entries.
    fn record_revisions(&mut self, record: &str) -> impl Future<Output = Result<RecordRevisions>> + Send;
}

/// $1 project, $2 after id, $3 limit.
const SESSIONS_AFTER: &str = concat!(
    "SELECT ",
    crate::store::rows::session_columns!(),
    " FROM sessions WHERE project = $1 AND id > $2 ORDER BY id LIMIT $3"
);
const CHECKPOINTS_AFTER: &str = concat!(
    "SELECT ",
    crate::store::rows::checkpoint_light_columns!(),
    " FROM checkpoints WHERE project = $1 AND id > $2 ORDER BY id LIMIT $3"
);
const ENTRIES_AFTER: &str = concat!(
    crate::store::rows::entry_columns!(),
    " WHERE m.project = $1 AND m.id > $2 ORDER BY m.id LIMIT $3"
);
/// $1 project.
const SESSIONS: &str =
    concat!("SELECT ", crate::store::rows::session_columns!(), " FROM sessions WHERE project = $1");
const CHECKPOINT_TREE: &str = "SELECT id, parent_id, created_us FROM checkpoints WHERE project = $1";
const SESSION_HEADS: &str =
    "SELECT head_checkpoint_id FROM sessions WHERE project = $1 AND head_checkpoint_id IS NOT NULL";
const CHECKPOINT_BLOBS: &str = "SELECT id, blobs FROM checkpoints WHERE project = $1 AND length(blobs) > 0";
const EVENTS_FROM: &str = "SELECT events_from FROM projects WHERE key = $1";
const ENTRY_TEXTS: &str = "SELECT id, content, rationale, author FROM memory WHERE project = $1";
const RECORD_AUTHORS: &str = "SELECT record, author FROM records WHERE project = $1";
const CHUNKS: &str = "SELECT digest, data FROM chunks WHERE project = $1";
const EVENT_BODIES: &str = "SELECT revision, body FROM events WHERE project = $1";
const CONFLICT_BODIES: &str = "SELECT id, body FROM conflicts WHERE project = $1";
const REPLIES: &str = "SELECT request_id, reply FROM requests WHERE project = $1";
const PENDING_WRITES: &str = "SELECT checkpoint_id, task_id, idx, channel, task_path, value_type, value, revision \
     FROM pending_writes WHERE project = $1";
/// $1 project, $2 revision.
const EVENTS_BELOW: &str = "SELECT COUNT(*) FROM events WHERE project = $1 AND revision < $2";
/// $1 project, $2 time.
const CHUNKS_BEFORE: &str = "SELECT digest FROM chunks WHERE project = $1 AND created_us < $2";
/// $1 project, $2 digest.
const CHUNK: &str = "SELECT data FROM chunks WHERE project = $1 AND digest = $2";
/// $1 project, $2 record.
const RECORD_REVISIONS: &str = "SELECT (SELECT revision FROM records WHERE project = $1 AND record = $2) AS record, \
     (SELECT MAX(revision) FROM memory WHERE project = $1 AND record = $2) AS newest_entry";

impl<B, DB> MaintenanceTx for Tx<B>
where
    B: Backend<Db = DB>,
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> String: Encode<'q, DB> + Type<DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'r> Session: FromRow<'r, DB::Row>,
    for<'r> Checkpoint: FromRow<'r, DB::Row>,
    for<'r> MemoryRow: FromRow<'r, DB::Row>,
    for<'r> EntryText: FromRow<'r, DB::Row>,
    for<'r> TreeRow: FromRow<'r, DB::Row>,
    for<'r> BlobsRow: FromRow<'r, DB::Row>,
    for<'r> RecordAuthor: FromRow<'r, DB::Row>,
    for<'r> ChunkData: FromRow<'r, DB::Row>,
    for<'r> LogRow: FromRow<'r, DB::Row>,
    for<'r> ConflictBody: FromRow<'r, DB::Row>,
    for<'r> StoredReply: FromRow<'r, DB::Row>,
    for<'r> RecordRevisions: FromRow<'r, DB::Row>,
    for<'r> PendingWrite: FromRow<'r, DB::Row>,
    for<'r> (String,): FromRow<'r, DB::Row>,
    for<'r> (i64,): FromRow<'r, DB::Row>,
    for<'r> (Vec<u8>,): FromRow<'r, DB::Row>,
{
    async fn checkpoint_tree(&mut self) -> Result<Vec<TreeRow>> {
        Ok(sqlx::query_as(CHECKPOINT_TREE).bind(self.project.clone()).fetch_all(self.conn()).await?)
    }

    async fn session_heads(&mut self) -> Result<Vec<String>> {
        Ok(sqlx::query_scalar(SESSION_HEADS).bind(self.project.clone()).fetch_all(self.conn()).await?)
    }

    async fn checkpoint_blobs(&mut self) -> Result<Vec<BlobsRow>> {
        Ok(sqlx::query_as(CHECKPOINT_BLOBS).bind(self.project.clone()).fetch_all(self.conn()).await?)
    }

    async fn chunks_before(&mut self, before_us: i64) -> Result<Vec<String>> {
        let query = sqlx::query_scalar(CHUNKS_BEFORE).bind(self.project.clone()).bind(before_us);
        Ok(query.fetch_all(self.conn()).await?)
    }

    async fn events_from(&mut self) -> Result<i64> {
        Ok(sqlx::query_scalar(EVENTS_FROM).bind(self.project.clone()).fetch_one(self.conn()).await?)
    }

    async fn events_below(&mut self, revision: i64) -> Result<i64> {
        let query = sqlx::query_scalar(EVENTS_BELOW).bind(self.project.clone()).bind(revision);
        Ok(query.fetch_one(self.conn()).await?)
    }

    async fn sessions(&mut self) -> Result<Vec<Session>> {
        Ok(sqlx::query_as(SESSIONS).bind(self.project.clone()).fetch_all(self.conn()).await?)
    }

    async fn entry_texts(&mut self) -> Result<Vec<EntryText>> {
        Ok(sqlx::query_as(ENTRY_TEXTS).bind(self.project.clone()).fetch_all(self.conn()).await?)
    }

    async fn record_authors(&mut self) -> Result<Vec<RecordAuthor>> {
        Ok(sqlx::query_as(RECORD_AUTHORS).bind(self.project.clone()).fetch_all(self.conn()).await?)
    }

    async fn chunk(&mut self, digest: &str) -> Result<Option<Vec<u8>>> {
        let query = sqlx::query_scalar(CHUNK).bind(self.project.clone()).bind(digest.to_owned());
        Ok(query.fetch_optional(self.conn()).await?)
    }

    async fn chunks(&mut self) -> Result<Vec<ChunkData>> {
        Ok(sqlx::query_as(CHUNKS).bind(self.project.clone()).fetch_all(self.conn()).await?)
    }

    async fn event_bodies(&mut self) -> Result<Vec<LogRow>> {
        Ok(sqlx::query_as(EVENT_BODIES).bind(self.project.clone()).fetch_all(self.conn()).await?)
    }

    async fn conflict_bodies(&mut self) -> Result<Vec<ConflictBody>> {
        Ok(sqlx::query_as(CONFLICT_BODIES).bind(self.project.clone()).fetch_all(self.conn()).await?)
    }

    async fn replies(&mut self) -> Result<Vec<StoredReply>> {
        Ok(sqlx::query_as(REPLIES).bind(self.project.clone()).fetch_all(self.conn()).await?)
    }

    async fn owner(&mut self, table: Table, id: &str) -> Result<Option<String>> {
        let text = match table {
            Table::Sessions => SESSION_PROJECT,
            Table::Checkpoints => CHECKPOINT_PROJECT,
            Table::Memory => ENTRY_PROJECT,
        };
        Ok(sqlx::query_scalar(text).bind(id.to_owned()).fetch_optional(self.conn()).await?)
    }

    async fn sessions_after(&mut self, after: &str, limit: i64) -> Result<Vec<Session>> {
        let query = sqlx::query_as(SESSIONS_AFTER).bind(self.project.clone()).bind(after.to_owned());
        Ok(query.bind(limit).fetch_all(self.conn()).await?)
    }

    async fn checkpoints_after(&mut self, after: &str, limit: i64) -> Result<Vec<Checkpoint>> {
        let query = sqlx::query_as(CHECKPOINTS_AFTER).bind(self.project.clone()).bind(after.to_owned());
        Ok(query.bind(limit).fetch_all(self.conn()).await?)
    }

    async fn entries_after(&mut self, after: &str, limit: i64) -> Result<Vec<MemoryRow>> {
        let query = sqlx::query_as(ENTRIES_AFTER).bind(self.project.clone()).bind(after.to_owned());
        Ok(query.bind(limit).fetch_all(self.conn()).await?)
    }

    async fn pending_writes(&mut self) -> Result<Vec<PendingWrite>> {
        Ok(sqlx::query_as(PENDING_WRITES).bind(self.project.clone()).fetch_all(self.conn()).await?)
    }

    async fn record_revisions(&mut self, record: &str) -> Result<RecordRevisions> {
        let query = sqlx::query_as(RECORD_REVISIONS).bind(self.project.clone()).bind(record.to_owned());
        Ok(query.fetch_one(self.conn()).await?)
    }
}
