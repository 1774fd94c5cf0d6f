//! The reads of maintenance writes (retention, compaction, purge, import): whole tables of
//! one project, which no request path reads. Their changes are `model::Maintenance`.

use std::future::Future;

use super::model::Session;
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

/// A write's reads for maintenance, all within its project unless said otherwise.
pub trait MaintenanceTx: Send {
    /// Every checkpoint: (id, parent, created_us).
    fn checkpoint_tree(&mut self) -> impl Future<Output = Result<Vec<(String, Option<String>, i64)>>> + Send;
    /// The head checkpoint of every session that has one.
    fn session_heads(&mut self) -> impl Future<Output = Result<Vec<String>>> + Send;
    /// (id, encoded `BlobRefs`) of every checkpoint with transcripts.
    fn checkpoint_blobs(&mut self) -> impl Future<Output = Result<Vec<(String, Vec<u8>)>>> + Send;
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
    /// (record, encoded author) of every memory record.
    fn record_authors(&mut self) -> impl Future<Output = Result<Vec<(String, Vec<u8>)>>> + Send;
    /// A chunk's data as stored (compressed).
    fn chunk(&mut self, digest: &str) -> impl Future<Output = Result<Option<Vec<u8>>>> + Send;
    /// Every chunk: (digest, data as stored).
    fn chunks(&mut self) -> impl Future<Output = Result<Vec<(String, Vec<u8>)>>> + Send;
    /// Every event: (revision, encoded `Event`).
    fn event_bodies(&mut self) -> impl Future<Output = Result<Vec<(i64, Vec<u8>)>>> + Send;
    /// Every conflict: (id, encoded `Conflict`).
    fn conflict_bodies(&mut self) -> impl Future<Output = Result<Vec<(String, Vec<u8>)>>> + Send;
    /// Every stored reply: (request id, reply).
    fn replies(&mut self) -> impl Future<Output = Result<Vec<(String, Vec<u8>)>>> + Send;
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
    ) -> impl Future<Output = Result<Vec<super::model::Checkpoint>>> + Send;
    /// Up to `limit` memory entries (evicted ones too) after an id, by id, with their record.
    fn entries_after(
        &mut self,
        after: &str,
        limit: i64,
    ) -> impl Future<Output = Result<Vec<super::rows::MemoryRow>>> + Send;
    /// A memory record's LWW revision, and the newest revision among its entries.
    fn record_revisions(
        &mut self,
        record: &str,
    ) -> impl Future<Output = Result<(Option<i64>, Option<i64>)>> + Send;
}
