//! Storage: the `Store` trait and its write transaction (`WriteTx`), over Baton's own types
//! (`model`), implemented for SQLite (`sqlite/`) and Postgres (`postgres/`), each with its
//! SQL beside it; the batching writer (`writer`) is group commit behind them.
//!
//! A write is a body the writer runs (`Store::write`, `writer`): the project's lock gives
//! it its revision and time, the service layer (`crate::service`) reads through the write's
//! transaction and lets `core` decide, and the backend applies what was decided in one go
//! (`apply::Apply`), all or nothing. The writer batches writes: one commit for the batch.
//!
//! Reads outside a write are thin too: one statement each (`reads.rs` and `admin.rs` of
//! each backend; `export.rs`, one text for both), returning Baton's rows; the service
//! layer pages them and builds the API's replies. Maintenance writes (retention,
//! compaction, purge, import) read through `maintenance::MaintenanceTx` and apply
//! `model::Maintenance` changes.
//!
//! Performance devices are listed, with the `baton-bench` row each serves, in
//! docs/performance.md ("Performance devices"); each one's module names its row.

use std::collections::HashMap;
use std::future::Future;

use futures::future::BoxFuture;

use baton_proto::v1::{Actor, CreateCheckpointRequest, SessionStatus};
use uuid::Uuid;

pub use crate::core::brief::BriefData;
use crate::core::checkpoint::StoredContent;
use crate::core::lww::WriteIntent;
use crate::error::Result;
pub use commits::Commits;

pub(crate) mod apply;
pub mod brief;
pub mod commit_links;
mod commits;
mod engine;
mod export;
pub mod items;
pub mod maintenance;
pub mod model;
pub mod reservations;
/// Whose brief, of what.
#[derive(Debug, Clone, Default)]
pub struct BriefFor {
    pub project: String,
    /// The caller's session: left out of the lists; its previous session is looked up.
    pub session_id: Option<Uuid>,
    /// Memory of this branch too ("" = project-wide only; see `resuming`).
    pub branch: String,
    /// The session the caller is resuming, when the brief is read side by side with the
    /// resume's write: left out of the lists (it is no longer unfinished), taken as the
    /// caller's previous session, and its branch used when `branch` is "" (as the new
    /// session's is).
    pub resuming: Option<String>,
}

pub mod postgres;
pub(crate) mod rows;
mod schema;
mod sql;
pub mod sqlite;
pub mod threads;
pub mod transfer;
/// Public for the storage conformance suite, which runs its cases on both backends.
pub mod writer;

pub use postgres::PgStore;
pub use sqlite::SqliteStore;

/// Everything about a write besides its payload: idempotency, conflict intent, author.
#[derive(Debug, Clone, Default)]
pub struct WriteCtx {
    /// Idempotency key; `None` = not deduplicated.
    pub request_id: Option<String>,
    /// sha256 of the request (its clock fields cleared), to tell a retry from a misuse.
    pub request_hash: Vec<u8>,
    pub base_revision: Option<i64>,
    pub policy: crate::core::lww::Policy,
    /// For queued writes: (written_at, client_now), µs since the epoch.
    pub queued: Option<(i64, i64)>,
    pub actor: Actor,
    /// Secrets redacted from the request.
    pub redacted: u32,
}

impl WriteCtx {
    /// The LWW intent, with the queued time corrected against the server clock `now_us`.
    pub fn intent(&self, now_us: i64) -> WriteIntent {
        WriteIntent {
            base_revision: self.base_revision,
            policy: self.policy,
            queued_at_us: self
                .queued
                .map(|(at, client_now)| crate::core::lww::corrected_written_at(at, client_now, now_us)),
        }
    }

    /// Whether the write claims to have been made after the client sent it (`written_at`
    /// past `client_now`): its time is clamped (`corrected_written_at`) and its events and
    /// reply say so.
    pub fn clamped(&self) -> bool {
        self.queued.is_some_and(|(at, client_now)| at > client_now)
    }

    /// The time a write is recorded at: the corrected client time for queued writes.
    pub fn written_us(&self, now_us: i64) -> i64 {
        self.intent(now_us).queued_at_us.unwrap_or(now_us)
    }

    /// Who wrote, with what intent, as the write's conflict and result carry it.
    pub fn writer(&self) -> crate::core::conflict::Writer<'_> {
        crate::core::conflict::Writer {
            actor: &self.actor,
            base_revision: self.base_revision,
            redacted: self.redacted,
            clamped: self.clamped(),
        }
    }
}

/// Sessions filter for `list_sessions` (validated).
#[derive(Debug, Clone, Default)]
pub struct SessionQuery {
    pub project: String,
    pub statuses: Vec<SessionStatus>,
    pub agent: Option<i32>,
    pub host: Option<String>,
    pub user: Option<String>,
    pub branch: Option<String>,
    pub since_us: Option<i64>,
    pub limit: i64,
    /// Sessions with ids below this one (ids are uuid v7, so this is creation order).
    pub before_id: Option<String>,
}

/// A checkpoint write after validation: ids made, content encoded and digested.
#[derive(Debug, Clone)]
pub struct NewCheckpoint {
    pub request: CreateCheckpointRequest,
    pub session_id: Uuid,
    pub id: Uuid,
    pub content: StoredContent,
    pub state_tool_count: i64,
    /// Encoded `BlobRefs` (empty when none), and the chunks they need.
    pub blobs: Vec<u8>,
    pub chunk_digests: Vec<String>,
}

/// Sessions whose liveness ran out, as found by the reaper.
#[derive(Debug, Clone, Copy)]
pub struct Expiry {
    /// Sessions without a lease go idle after this long without activity.
    pub idle_after_us: i64,
}

/// A write's body: reads through the write's transaction and decides; gives the transaction
/// back with what it decided (`Store::write`).
pub type WriteBody<T, R> =
    Box<dyn FnOnce(T, model::Locked) -> BoxFuture<'static, (T, Result<Decided<R>>)> + Send>;

/// What a write's body decided: its answer, and what to keep (`None`: nothing, the write
/// is rolled back).
pub struct Decided<R> {
    pub value: R,
    pub kept: Option<Kept>,
}

/// A write's changes and log, applied together.
pub struct Kept {
    pub changes: Vec<model::Change>,
    pub log: model::Log,
}

/// A write in progress, as its body reads through it (the project's lock is held).
pub trait WriteTx: Send {
    /// A memory record's LWW version and its live entries, in order.
    fn record_state(&mut self, record: &str) -> impl Future<Output = Result<model::RecordState>> + Send;
    /// A memory record's entries in order, evicted ones too if asked.
    fn record_entries(
        &mut self,
        record: &str,
        include_evicted: bool,
    ) -> impl Future<Output = Result<Vec<model::Entry>>> + Send;
    /// A session of the project, by id.
    fn session(&mut self, id: &str) -> impl Future<Output = Result<Option<model::Session>>> + Send;
    /// The sessions a resume may take over (`core::resume::choose` picks one): the one
    /// named, or the session of the checkpoint named, or the project's most recently updated
    /// session of each status crashed, idle and completed. Only the project's.
    fn resume_candidates(
        &mut self,
        asked: crate::core::resume::Asked<'_>,
    ) -> impl Future<Output = Result<Vec<model::Session>>> + Send;
    /// A checkpoint of the project, by id, with its state and payload.
    fn checkpoint(&mut self, id: &str) -> impl Future<Output = Result<Option<model::Checkpoint>>> + Send;
    /// Whether a session of any project has this id (ids are one space across projects: a
    /// taken id is refused the same way wherever it is taken).
    fn session_taken(&mut self, id: &str) -> impl Future<Output = Result<bool>> + Send;
    /// The project and session of a checkpoint of any project, by id.
    fn checkpoint_owner(
        &mut self,
        id: &str,
    ) -> impl Future<Output = Result<Option<model::CheckpointOwner>>> + Send;
    /// Which of these chunk digests the project has no chunk for, in their order.
    fn missing_chunks(&mut self, digests: &[String]) -> impl Future<Output = Result<Vec<String>>> + Send;
    /// One memory entry of the project, by id.
    fn entry(&mut self, id: &str) -> impl Future<Output = Result<Option<model::Entry>>> + Send;
}

/// The storage contract, over Baton's model types; `impl Future + Send` so that tonic
/// services can await it. Implemented once for both backends (`engine.rs`, which runs
/// `sql.rs`'s statements) over what each backend does its own way (`engine::Engine`).
pub trait Store:
    Clone + Send + Sync + 'static + items::ItemReads + reservations::ReservationReads + commit_links::CommitReads
{
    type Tx: WriteTx
        + maintenance::MaintenanceTx
        + threads::ThreadTx
        + items::ItemTx
        + reservations::ReservationTx
        + commit_links::CommitTx;
    /// Runs `body` as one write of `lock`'s project (see `writer`): takes the lock (creating
    /// the project on first use), which allocates the write's revision and reads its time,
    /// caps and any earlier reply to its request id; runs the body; applies the changes it
    /// keeps and, once they are durable, wakes the project's watchers. Answers once the
    /// write's batch has committed, whether or not it kept anything.
    fn write<R: Send + 'static>(
        &self,
        lock: model::Lock,
        body: WriteBody<Self::Tx, R>,
    ) -> impl Future<Output = Result<R>> + Send;
    /// Liveness without a write: moves a session's `last_seen_at` to now and its
    /// `tool_count` forward, if it is in `status` (any status if `None`) and `within`.
    /// `None` if no session matched.
    fn touch_session(
        &self,
        id: String,
        tool_count: i64,
        status: Option<SessionStatus>,
        within: Within,
    ) -> impl Future<Output = Result<Option<model::Liveness>>> + Send;
    /// Sessions whose liveness ran out, at most 500.
    fn expired_sessions(
        &self,
        expiry: Expiry,
    ) -> impl Future<Output = Result<Vec<model::ExpiredSession>>> + Send;
    /// A session of any project, by id.
    fn session(&self, id: String) -> impl Future<Output = Result<Option<model::Session>>> + Send;
    /// The sessions a query selects, the newest id first, at most `limit + 1`.
    fn sessions(&self, query: SessionQuery) -> impl Future<Output = Result<Vec<model::Session>>> + Send;
    /// A checkpoint of any project, by id; its payload only if asked (else left empty).
    fn checkpoint(
        &self,
        id: String,
        payload: bool,
    ) -> impl Future<Output = Result<Option<model::Checkpoint>>> + Send;
    /// A session's checkpoints as tree nodes, in creation order.
    fn checkpoint_nodes(&self, session_id: String) -> impl Future<Output = Result<Vec<model::Node>>> + Send;
    /// Checkpoints of `project` by id, without their payloads, in no order (ids not found
    /// in the project left out: an id is never read across projects).
    fn checkpoints(
        &self,
        project: String,
        ids: Vec<String>,
    ) -> impl Future<Output = Result<Vec<model::Checkpoint>>> + Send;
    /// The sessions of an orchestrator's thread (one per namespace), by namespace.
    fn thread_sessions(
        &self,
        project: String,
        thread: String,
    ) -> impl Future<Output = Result<Vec<model::Session>>> + Send;
    /// The thread checkpoints a query selects, the greatest key first, at most `limit + 1`.
    fn thread_checkpoints(
        &self,
        query: model::ThreadQuery,
    ) -> impl Future<Output = Result<Vec<model::ThreadRow>>> + Send;
    /// The stored bytes of the pending writes of each of these checkpoints of `project` that
    /// has any.
    fn pending_write_sizes(
        &self,
        project: String,
        checkpoint_ids: Vec<String>,
    ) -> impl Future<Output = Result<Vec<(String, i64)>>> + Send;
    /// The pending writes of these checkpoints of `project`, by checkpoint, task path, task
    /// and index.
    fn pending_writes(
        &self,
        project: String,
        checkpoint_ids: Vec<String>,
    ) -> impl Future<Output = Result<Vec<model::PendingWrite>>> + Send;
    /// A memory record's LWW revision, if it was ever written.
    fn record_revision(
        &self,
        project: String,
        record: String,
    ) -> impl Future<Output = Result<Option<i64>>> + Send;
    /// The memory entries a query selects, in its order, at most `limit + 1`.
    fn memory(&self, query: model::MemoryQuery) -> impl Future<Output = Result<Vec<model::EntryRow>>> + Send;
    /// A project's newest live memory entries, project-wide and of a branch, newest first.
    fn newest_memory(
        &self,
        project: String,
        branch: String,
        limit: i64,
    ) -> impl Future<Output = Result<Vec<model::EntryRow>>> + Send;
    /// What a brief reads (`store::brief`'s statements), each read once the one before it
    /// began, the head first.
    fn brief_rows(&self, keys: brief::BriefKeys) -> impl Future<Output = Result<brief::BriefRows>> + Send;
    /// A search's candidates, whether the project's older records are still being indexed,
    /// and the pages' bounds.
    fn search(&self, query: model::SearchQuery) -> impl Future<Output = Result<model::SearchPage>> + Send;
    /// Search documents by id (in any order), for a page of hits.
    fn search_rows(&self, ids: Vec<i64>) -> impl Future<Output = Result<Vec<model::SearchRow>>> + Send;
    /// The revisions and body sizes of a log's rows after a revision, in order, at most
    /// `limit`; events of these kinds only (all when empty).
    fn log_sizes(
        &self,
        table: model::LogTable,
        project: String,
        after: i64,
        limit: i64,
        kinds: Vec<i32>,
    ) -> impl Future<Output = Result<Vec<model::LogSize>>> + Send;
    /// A log's rows after a revision up to another, in order; events of these kinds only
    /// (all when empty).
    fn log_rows(
        &self,
        table: model::LogTable,
        project: String,
        after: i64,
        through: i64,
        kinds: Vec<i32>,
    ) -> impl Future<Output = Result<Vec<model::LogRow>>> + Send;
    /// The chunks of these digests the project has, in no order, with their stored bytes
    /// only if `data`.
    fn chunks(
        &self,
        project: String,
        digests: Vec<String>,
        data: bool,
    ) -> impl Future<Output = Result<Vec<model::Chunk>>> + Send;
    /// Stores verified, compressed chunks (present ones skipped); returns how many were new.
    fn put_chunks(
        &self,
        project: String,
        chunks: Vec<model::Chunk>,
    ) -> impl Future<Output = Result<u64>> + Send;
    /// The tokens a key selects.
    fn tokens(&self, key: model::TokenKey) -> impl Future<Output = Result<Vec<TokenRow>>> + Send;
    /// Changes the token table; whether a row changed.
    fn write_token(&self, write: model::TokenWrite) -> impl Future<Output = Result<bool>> + Send;
    /// The web session of that cookie secret's hash, unless expired by `now_us`.
    fn web_session(
        &self,
        secret_hash: String,
        now_us: i64,
    ) -> impl Future<Output = Result<Option<model::WebSessionRow>>> + Send;
    /// Changes the web sessions; whether a row changed.
    fn write_web_session(&self, write: model::WebSessionWrite) -> impl Future<Output = Result<bool>> + Send;
    /// These projects (all, by key, when `None`), those that exist, by key.
    fn projects(
        &self,
        keys: Option<Vec<String>>,
    ) -> impl Future<Output = Result<Vec<model::ProjectRow>>> + Send;
    /// The project of a session, checkpoint or memory entry of any project.
    fn project_of(&self, kind: Entity, id: String) -> impl Future<Output = Result<Option<String>>> + Send;
    /// Counts for one project (`None` when it does not exist).
    fn project_stats(
        &self,
        project: String,
        sessions_only: bool,
    ) -> impl Future<Output = Result<Option<model::ProjectCounts>>> + Send;
    /// Projects that have checkpoints older than the cut-off.
    fn projects_with_old_checkpoints(
        &self,
        cutoff_us: i64,
    ) -> impl Future<Output = Result<Vec<String>>> + Send;
    /// Forgets idempotency replies older than `before_us`; returns how many.
    fn prune_requests(&self, before_us: i64) -> impl Future<Output = Result<u64>> + Send;
    /// The stored sizes of a project's checkpoints (state and payload) or items (value)
    /// after a cursor, in the table's export order, at most `limit`.
    fn export_sizes(
        &self,
        project: String,
        table: transfer::Table,
        after: transfer::Cursor,
        limit: i64,
    ) -> impl Future<Output = Result<Vec<i64>>> + Send;
    /// Up to `limit` rows of one of a project's tables after a cursor, in the table's
    /// export order, each with its own cursor.
    fn export_rows(
        &self,
        project: String,
        table: transfer::Table,
        after: transfer::Cursor,
        limit: i64,
    ) -> impl Future<Output = Result<Vec<(transfer::Cursor, transfer::Line)>>> + Send;
    /// Imports what of an archive's batch carries no revision (`service::import`, which
    /// checks the chunks): the project's memory caps, if it has none, and transcript chunks
    /// (present ones skipped).
    fn import_unrevisioned(
        &self,
        project: String,
        memory_caps: Option<String>,
        chunks: Vec<transfer::ChunkLine>,
    ) -> impl Future<Output = Result<transfer::ImportCounts>> + Send;
    /// Up to 100 ids, after `after` in id order, of checkpoints without a state digest
    /// (written before it existed; `jobs::backfill`).
    fn unstamped_checkpoints(&self, after: String) -> impl Future<Output = Result<Vec<String>>> + Send;
    /// Gives a checkpoint without one its state digest.
    fn stamp_state_digest(&self, id: String, digest: String) -> impl Future<Output = Result<()>> + Send;
    /// Sessions per status and the database connections, for the metrics.
    fn metrics(&self) -> impl Future<Output = model::StoreMetrics> + Send;
    /// Closes the database's connections (shutdown).
    fn close(&self) -> impl Future<Output = ()> + Send;
}

/// A stored access token (never its secret).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct TokenRow {
    pub id: String,
    pub name: String,
    pub role: String,
    pub project: Option<String>,
    pub created_us: i64,
    pub last_used_us: Option<i64>,
    pub revoked_us: Option<i64>,
}

/// A project's row, if it exists.
pub async fn project<S: Store>(store: &S, key: String) -> Result<Option<model::ProjectRow>> {
    Ok(store.projects(Some(vec![key])).await?.pop())
}

/// A project's current revision (0 for an unknown project).
pub async fn head_revision<S: Store>(store: &S, key: String) -> Result<i64> {
    Ok(project(store, key).await?.map_or(0, |p| p.head_revision))
}

/// Which of these chunk digests the project has no chunk for, in their order.
pub async fn missing_chunks<S: Store>(
    store: &S,
    project: String,
    digests: Vec<String>,
) -> Result<Vec<String>> {
    if digests.is_empty() {
        return Ok(Vec::new());
    }
    let present = store.chunks(project, digests.clone(), false).await?;
    let present: std::collections::HashSet<String> = present.into_iter().map(|c| c.digest).collect();
    Ok(digests.into_iter().filter(|d| !present.contains(d)).collect())
}

/// Whether any token was ever created (then every request needs one).
pub async fn any_tokens<S: Store>(store: &S) -> Result<bool> {
    Ok(!store.tokens(model::TokenKey::All).await?.is_empty())
}

/// Records addressed by id, whose project a scoped token must be checked against.
#[derive(Debug, Clone, Copy)]
pub enum Entity {
    Session,
    Checkpoint,
    /// A memory entry.
    Entry,
}

impl Entity {
    pub fn noun(self) -> &'static str {
        match self {
            Self::Session => "session",
            Self::Checkpoint => "checkpoint",
            Self::Entry => "memory entry",
        }
    }
}

/// The project a request by id was authorized for: `Some` for a token scoped to one
/// project, `None` for any. A record outside it is answered as if it did not exist, in the
/// store as well as in `Auth::check_entity`, so that a mistake in one layer cannot reach
/// another project.
pub type Within = Option<String>;

/// Where a page of ListMemory ends: the last entry's place in the list's order.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MemoryPosition {
    pub category: String,
    pub branch: String,
    pub key: String,
    pub revision: i64,
    pub seq: i64,
}

/// Whether a record of `project` may be seen by a request `within`.
pub(crate) fn is_within(project: &str, within: &Within) -> bool {
    within.as_deref().is_none_or(|w| w == project)
}

/// Which backend a database URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    pub fn of(url: &str) -> Option<Self> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Some(Self::Postgres)
        } else if url.starts_with("sqlite:") {
            Some(Self::Sqlite)
        } else {
            None
        }
    }
}

/// Per-project memory caps as stored (JSON object).
pub(crate) fn parse_caps(json: &str) -> HashMap<String, i32> {
    serde_json::from_str(json).unwrap_or_default()
}
