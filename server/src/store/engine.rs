//! `Store`, once for both backends: each method one of `sql.rs`'s statements on the
//! backend's pool, or what the backend does its own way (`Engine`: its writer, its brief
//! and search reads, how it binds a list, its clock).

use std::future::Future;

use baton_proto::v1::SessionStatus;
use futures::future::BoxFuture;
use sqlx::{Database, Encode, Executor, FromRow, IntoArguments, Pool, QueryBuilder, Type};

use super::maintenance::MaintenanceTx;
use super::model::{
    Checkpoint, Chunk, EntryRow, ExpiredSession, Liveness, LogRow, LogSize, LogTable, MemoryQuery, Node,
    ProjectCounts, ProjectRow, Session, StatusCount, StoreMetrics, TokenKey, TokenWrite, WebSessionRow,
    WebSessionWrite,
};
use super::transfer::{CheckpointLine, ChunkLine, Cursor, ImportCounts, Line, MemoryLine, RecordLine, Table};
use super::{
    Entity, Expiry, SessionQuery, Store, TokenRow, Within, WriteBody, WriteTx, brief, export, model, sql,
};
use crate::error::Result;

/// A write that takes no project lock and allocates no revision (a heartbeat, a token, a
/// chunk), on the connection the backend gives it (`Engine::unrevisioned`).
pub type Unrevisioned<DB, R> =
    Box<dyn for<'c> FnOnce(&'c mut <DB as Database>::Connection) -> BoxFuture<'c, Result<R>> + Send>;

/// A list of values a statement reads as one (`Engine::push_in`).
#[derive(Debug, Clone)]
pub enum List {
    Text(Vec<String>),
    Int(Vec<i64>),
}

/// What each backend does its own way.
pub trait Engine: Clone + Send + Sync + 'static {
    type Db: Database;
    type Tx: WriteTx
        + MaintenanceTx
        + super::threads::ThreadTx
        + super::items::ItemTx
        + super::reservations::ReservationTx
        + super::commit_links::CommitTx;
    /// Liveness without a write (`Store::touch_session`), by the database clock. $1 id,
    /// $2 tool count, $3 status (NULL: any), $4 project (NULL: any).
    const TOUCH_SESSION: &'static str;
    /// Sessions whose liveness ran out, by the database clock. $1–$3 the live statuses, $4
    /// active, $5 the idle time (µs).
    const EXPIRED_SESSIONS: &'static str;
    /// Waits for the project's lock to be free and keeps writes out until the transaction
    /// ends (a renewal, `ReservationReads::renew_reservations`). $1 project.
    const SHARE_PROJECT: &'static str;
    /// Renews a session's held reservations by the database clock. $1 project, $2 session,
    /// $3 the time to live (µs); returns the rows (`reservation_columns!`).
    const RENEW_RESERVATIONS: &'static str;

    /// The pool reads run on.
    fn pool(&self) -> &Pool<Self::Db>;
    /// Appends ` IN` a list of values, bound as one value.
    fn push_in(query: &mut QueryBuilder<Self::Db>, list: List);
    /// Appends ` AND` a condition that a checkpoint's metadata has `key` with a value equal to
    /// `value` (canonical JSON), both bound.
    fn push_metadata_eq(query: &mut QueryBuilder<Self::Db>, key: String, value: String);
    /// How many rows a statement changed.
    fn rows_affected(done: &<Self::Db as Database>::QueryResult) -> u64;
    /// Runs a write that takes no lock, all or nothing.
    fn unrevisioned<R: Send + 'static>(
        &self,
        body: Unrevisioned<Self::Db, R>,
    ) -> impl Future<Output = Result<R>> + Send;
    /// `Store::write`.
    fn write<R: Send + 'static>(
        &self,
        lock: model::Lock,
        body: WriteBody<Self::Tx, R>,
    ) -> impl Future<Output = Result<R>> + Send;
    /// `Store::brief_rows`.
    fn brief_rows(&self, keys: brief::BriefKeys) -> impl Future<Output = Result<brief::BriefRows>> + Send;
    /// `Store::search`.
    fn search(&self, query: model::SearchQuery) -> impl Future<Output = Result<model::SearchPage>> + Send;
    /// `Store::search_rows`.
    fn search_rows(&self, ids: Vec<i64>) -> impl Future<Output = Result<Vec<model::SearchRow>>> + Send;
    /// Database connections: (open, idle).
    fn connections(&self) -> (u32, usize);
    /// `Store::close`.
    fn close(&self) -> impl Future<Output = ()> + Send;
}

impl<E, DB> Store for E
where
    E: Engine<Db = DB>,
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> String: Encode<'q, DB> + Type<DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'q> i32: Encode<'q, DB> + Type<DB>,
    for<'q> bool: Encode<'q, DB> + Type<DB>,
    for<'q> Vec<u8>: Encode<'q, DB> + Type<DB>,
    for<'q> Option<String>: Encode<'q, DB> + Type<DB>,
    for<'q> Option<i32>: Encode<'q, DB> + Type<DB>,
    for<'r> Session: FromRow<'r, DB::Row>,
    for<'r> Checkpoint: FromRow<'r, DB::Row>,
    for<'r> Node: FromRow<'r, DB::Row>,
    for<'r> EntryRow: FromRow<'r, DB::Row>,
    for<'r> Liveness: FromRow<'r, DB::Row>,
    for<'r> ExpiredSession: FromRow<'r, DB::Row>,
    for<'r> LogSize: FromRow<'r, DB::Row>,
    for<'r> LogRow: FromRow<'r, DB::Row>,
    for<'r> Chunk: FromRow<'r, DB::Row>,
    for<'r> TokenRow: FromRow<'r, DB::Row>,
    for<'r> WebSessionRow: FromRow<'r, DB::Row>,
    for<'r> ProjectRow: FromRow<'r, DB::Row>,
    for<'r> StatusCount: FromRow<'r, DB::Row>,
    for<'r> model::ThreadRow: FromRow<'r, DB::Row>,
    for<'r> model::PendingWrite: FromRow<'r, DB::Row>,
    for<'r> model::ItemLog: FromRow<'r, DB::Row>,
    for<'r> model::Item: FromRow<'r, DB::Row>,
    for<'r> crate::core::reservation::Row: FromRow<'r, DB::Row>,
    for<'r> model::ReservationSettingsRow: FromRow<'r, DB::Row>,
    for<'r> crate::core::commit::Link: FromRow<'r, DB::Row>,
    for<'r> (String, String, String): FromRow<'r, DB::Row>,
    for<'r> (String, String, i64): FromRow<'r, DB::Row>,
    for<'r> (i64, i64): FromRow<'r, DB::Row>,
    for<'r> (i64, i64, i64): FromRow<'r, DB::Row>,
    for<'r> (String, i64): FromRow<'r, DB::Row>,
    for<'r> (i64,): FromRow<'r, DB::Row>,
    for<'r> (String,): FromRow<'r, DB::Row>,
    for<'r> ChunkLine: FromRow<'r, DB::Row>,
    for<'r> RecordLine: FromRow<'r, DB::Row>,
    for<'r> super::transfer::WriteLine: FromRow<'r, DB::Row>,
    for<'r> super::transfer::ItemLogLine: FromRow<'r, DB::Row>,
    for<'r> super::transfer::ItemLine: FromRow<'r, DB::Row>,
    for<'r> super::transfer::CommitLinkLine: FromRow<'r, DB::Row>,
    for<'r> crate::store::transfer::SessionLine: FromRow<'r, DB::Row>,
    for<'r> export::WithRevision<CheckpointLine>: FromRow<'r, DB::Row>,
    for<'r> export::WithRevision<MemoryLine>: FromRow<'r, DB::Row>,
{
    type Tx = <E as Engine>::Tx;

    #[tracing::instrument(level = "debug", skip_all)]
    async fn write<R: Send + 'static>(&self, lock: model::Lock, body: WriteBody<Self::Tx, R>) -> Result<R> {
        Engine::write(self, lock, body).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn touch_session(
        &self,
        id: String,
        tool_count: i64,
        status: Option<SessionStatus>,
        within: Within,
    ) -> Result<Option<Liveness>> {
        let status = status.map(|s| s as i32);
        self.unrevisioned(Box::new(move |conn| {
            Box::pin(async move {
                let query = sqlx::query_as(E::TOUCH_SESSION).bind(id).bind(tool_count).bind(status);
                Ok(query.bind(within).fetch_optional(conn).await?)
            })
        }))
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn expired_sessions(&self, expiry: Expiry) -> Result<Vec<ExpiredSession>> {
        use SessionStatus::{Active, Idle, Initializing};
        let query = sqlx::query_as(E::EXPIRED_SESSIONS).bind(Initializing as i32).bind(Active as i32);
        let query = query.bind(Idle as i32).bind(Active as i32).bind(expiry.idle_after_us);
        Ok(query.fetch_all(self.pool()).await?)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn session(&self, id: String) -> Result<Option<Session>> {
        Ok(sqlx::query_as(sql::SESSION_BY_ID).bind(id).fetch_optional(self.pool()).await?)
    }

    /// The filters that are set, each a bound value.
    #[tracing::instrument(level = "debug", skip_all)]
    async fn sessions(&self, q: SessionQuery) -> Result<Vec<Session>> {
        let mut query = QueryBuilder::new(sql::LIST_SESSIONS);
        query.push_bind(q.project);
        if !q.statuses.is_empty() {
            query.push(" AND status");
            E::push_in(&mut query, List::Int(q.statuses.iter().map(|s| i64::from(*s as i32)).collect()));
        }
        if let Some(agent) = q.agent {
            query.push(" AND agent = ").push_bind(agent);
        }
        if let Some(host) = q.host {
            query.push(" AND host = ").push_bind(host);
        }
        if let Some(user) = q.user {
            query.push(" AND user_name = ").push_bind(user);
        }
        if let Some(branch) = q.branch {
            query.push(" AND branch = ").push_bind(branch);
        }
        if let Some(since) = q.since_us {
            query.push(" AND updated_us >= ").push_bind(since);
        }
        if let Some(before) = q.before_id {
            query.push(" AND id < ").push_bind(before);
        }
        query.push(" ORDER BY id DESC LIMIT ").push_bind(q.limit.saturating_add(1));
        Ok(query.build_query_as().fetch_all(self.pool()).await?)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn checkpoint(&self, id: String, payload: bool) -> Result<Option<Checkpoint>> {
        let text = if payload { sql::CHECKPOINT_BY_ID } else { sql::CHECKPOINT_LIGHT_BY_ID };
        Ok(sqlx::query_as(text).bind(id).fetch_optional(self.pool()).await?)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn checkpoint_nodes(&self, session_id: String) -> Result<Vec<Node>> {
        Ok(sqlx::query_as(sql::CHECKPOINT_NODES).bind(session_id).fetch_all(self.pool()).await?)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn checkpoints(&self, project: String, ids: Vec<String>) -> Result<Vec<Checkpoint>> {
        let mut query = QueryBuilder::new(sql::CHECKPOINTS_LIGHT);
        query.push_bind(project).push(" AND id");
        E::push_in(&mut query, List::Text(ids));
        Ok(query.build_query_as().fetch_all(self.pool()).await?)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn thread_sessions(&self, project: String, thread: String) -> Result<Vec<Session>> {
        let query = sqlx::query_as(super::threads::THREAD_SESSIONS).bind(project).bind(thread);
        Ok(query.fetch_all(self.pool()).await?)
    }

    /// The filters that are set, each a bound value.
    #[tracing::instrument(level = "debug", skip_all)]
    async fn thread_checkpoints(&self, q: model::ThreadQuery) -> Result<Vec<model::ThreadRow>> {
        let text = if q.payload { sql::THREAD_CHECKPOINTS } else { sql::THREAD_CHECKPOINTS_LIGHT };
        let mut query = QueryBuilder::new(text);
        query.push_bind(q.project.clone()).push(" AND ordered_key IS NOT NULL");
        if let Some(sessions) = q.sessions {
            query.push(" AND session_id");
            E::push_in(&mut query, List::Text(sessions));
        }
        if let Some(namespace) = q.namespace {
            query
                .push(" AND session_id IN (SELECT id FROM sessions WHERE project = ")
                .push_bind(q.project.clone());
            query.push(" AND thread_ns = ").push_bind(namespace).push(")");
        }
        if let Some(ids) = q.ids {
            query.push(" AND id");
            E::push_in(&mut query, List::Text(ids));
        }
        if let Some(key) = q.key {
            query.push(" AND ordered_key = ").push_bind(key);
        }
        if let Some(before) = q.before_key {
            query.push(" AND ordered_key < ").push_bind(before);
        }
        if let Some((key, id)) = q.after {
            query.push(" AND (ordered_key < ").push_bind(key.clone());
            query.push(" OR (ordered_key = ").push_bind(key).push(" AND id < ").push_bind(id).push("))");
        }
        for (key, value) in q.filter {
            E::push_metadata_eq(&mut query, key, value);
        }
        query.push(" ORDER BY ordered_key DESC, id DESC LIMIT ").push_bind(q.limit.saturating_add(1));
        Ok(query.build_query_as().fetch_all(self.pool()).await?)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn pending_write_sizes(&self, project: String, ids: Vec<String>) -> Result<Vec<(String, i64)>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut query = QueryBuilder::new(sql::PENDING_WRITE_SIZES);
        query.push_bind(project).push(" AND checkpoint_id");
        E::push_in(&mut query, List::Text(ids));
        query.push(" GROUP BY checkpoint_id");
        Ok(query.build_query_as().fetch_all(self.pool()).await?)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn pending_writes(&self, project: String, ids: Vec<String>) -> Result<Vec<model::PendingWrite>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut query = QueryBuilder::new(sql::PENDING_WRITES);
        query.push_bind(project).push(" AND checkpoint_id");
        E::push_in(&mut query, List::Text(ids));
        query.push(" ORDER BY checkpoint_id, task_path, task_id, idx");
        Ok(query.build_query_as().fetch_all(self.pool()).await?)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn record_revision(&self, project: String, record: String) -> Result<Option<i64>> {
        let query = sqlx::query_scalar(sql::RECORD_REVISION).bind(project).bind(record);
        Ok(query.fetch_optional(self.pool()).await?)
    }

    /// The filters that are set, each a bound value.
    #[tracing::instrument(level = "debug", skip_all)]
    async fn memory(&self, q: MemoryQuery) -> Result<Vec<EntryRow>> {
        let mut query = QueryBuilder::new(sql::LIST_MEMORY);
        query.push_bind(q.project);
        if !q.category.is_empty() {
            query.push(" AND m.category = ").push_bind(q.category);
        }
        if let Some(branch) = q.branch {
            query.push(" AND m.branch = ").push_bind(branch);
        }
        if !q.include_evicted {
            query.push(" AND m.evicted = FALSE");
        }
        if let Some(p) = q.after {
            query.push(" AND (m.category, m.branch, m.key, m.revision, m.seq) > (").push_bind(p.category);
            query.push(", ").push_bind(p.branch).push(", ").push_bind(p.key);
            query.push(", ").push_bind(p.revision).push(", ").push_bind(p.seq).push(")");
        }
        query.push(" ORDER BY m.category, m.branch, m.key, m.revision, m.seq LIMIT ");
        query.push_bind(q.limit.saturating_add(1));
        Ok(query.build_query_as().fetch_all(self.pool()).await?)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn newest_memory(&self, project: String, branch: String, limit: i64) -> Result<Vec<EntryRow>> {
        let query = sqlx::query_as(sql::NEWEST_MEMORY).bind(project).bind(branch).bind(limit);
        Ok(query.fetch_all(self.pool()).await?)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn brief_rows(&self, keys: brief::BriefKeys) -> Result<brief::BriefRows> {
        Engine::brief_rows(self, keys).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn search(&self, query: model::SearchQuery) -> Result<model::SearchPage> {
        Engine::search(self, query).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn search_rows(&self, ids: Vec<i64>) -> Result<Vec<model::SearchRow>> {
        Engine::search_rows(self, ids).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn log_sizes(
        &self,
        table: LogTable,
        project: String,
        after: i64,
        limit: i64,
        kinds: Vec<i32>,
    ) -> Result<Vec<LogSize>> {
        let text = match table {
            LogTable::Events => sql::EVENT_SIZES,
            LogTable::Conflicts => sql::CONFLICT_SIZES,
        };
        let mut query = QueryBuilder::new(text);
        query.push_bind(project).push(" AND revision > ").push_bind(after);
        push_kinds::<E>(&mut query, table, kinds);
        query.push(" ORDER BY revision LIMIT ").push_bind(limit);
        Ok(query.build_query_as().fetch_all(self.pool()).await?)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn log_rows(
        &self,
        table: LogTable,
        project: String,
        after: i64,
        through: i64,
        kinds: Vec<i32>,
    ) -> Result<Vec<LogRow>> {
        let text = match table {
            LogTable::Events => sql::EVENT_ROWS,
            LogTable::Conflicts => sql::CONFLICT_ROWS,
        };
        let mut query = QueryBuilder::new(text);
        query.push_bind(project).push(" AND revision > ").push_bind(after);
        query.push(" AND revision <= ").push_bind(through);
        push_kinds::<E>(&mut query, table, kinds);
        query.push(" ORDER BY revision");
        Ok(query.build_query_as().fetch_all(self.pool()).await?)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn chunks(&self, project: String, digests: Vec<String>, data: bool) -> Result<Vec<Chunk>> {
        let mut query = QueryBuilder::new(if data { sql::CHUNKS_WITH_DATA } else { sql::CHUNKS });
        query.push_bind(project).push(" AND digest");
        E::push_in(&mut query, List::Text(digests));
        Ok(query.build_query_as().fetch_all(self.pool()).await?)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn put_chunks(&self, project: String, chunks: Vec<Chunk>) -> Result<u64> {
        let now_us = crate::core::time::now_us();
        self.unrevisioned(Box::new(move |conn| {
            Box::pin(async move {
                let mut stored = 0;
                for c in chunks {
                    let query = sqlx::query(sql::PUT_CHUNK).bind(project.clone()).bind(c.digest).bind(c.data);
                    let done = query.bind(c.size_bytes).bind(now_us).execute(&mut *conn).await?;
                    stored += E::rows_affected(&done);
                }
                Ok(stored)
            })
        }))
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn tokens(&self, key: TokenKey) -> Result<Vec<TokenRow>> {
        let query = match key {
            TokenKey::All => sqlx::query_as(sql::TOKENS),
            TokenKey::Name(name) => sqlx::query_as(sql::TOKEN_BY_NAME).bind(name),
            TokenKey::SecretHash(hash) => sqlx::query_as(sql::TOKEN_BY_HASH).bind(hash),
        };
        Ok(query.fetch_all(self.pool()).await?)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn write_token(&self, write: TokenWrite) -> Result<bool> {
        self.unrevisioned(Box::new(move |conn| {
            Box::pin(async move {
                let query = match write {
                    TokenWrite::Create { token: t, secret_hash } => {
                        let query = sqlx::query(sql::INSERT_TOKEN).bind(t.id).bind(t.name).bind(t.role);
                        query.bind(t.project).bind(secret_hash).bind(t.created_us)
                    }
                    TokenWrite::Revoke { name, now_us } => {
                        sqlx::query(sql::REVOKE_TOKEN).bind(now_us).bind(name)
                    }
                    TokenWrite::Used { id, now_us } => sqlx::query(sql::TOUCH_TOKEN).bind(now_us).bind(id),
                };
                Ok(E::rows_affected(&query.execute(conn).await?) > 0)
            })
        }))
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn web_session(&self, secret_hash: String, now_us: i64) -> Result<Option<WebSessionRow>> {
        let query = sqlx::query_as(sql::WEB_SESSION).bind(secret_hash).bind(now_us);
        Ok(query.fetch_optional(self.pool()).await?)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn write_web_session(&self, write: WebSessionWrite) -> Result<bool> {
        self.unrevisioned(Box::new(move |conn| {
            Box::pin(async move {
                let query = match write {
                    WebSessionWrite::Create { secret_hash, token_hash, created_us, expires_us } => {
                        let query = sqlx::query(sql::INSERT_WEB_SESSION).bind(secret_hash).bind(token_hash);
                        query.bind(created_us).bind(expires_us)
                    }
                    WebSessionWrite::Delete { secret_hash } => {
                        sqlx::query(sql::DELETE_WEB_SESSION).bind(secret_hash)
                    }
                    WebSessionWrite::Expire { now_us } => sqlx::query(sql::EXPIRE_WEB_SESSIONS).bind(now_us),
                };
                Ok(E::rows_affected(&query.execute(conn).await?) > 0)
            })
        }))
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn projects(&self, keys: Option<Vec<String>>) -> Result<Vec<ProjectRow>> {
        let mut query = QueryBuilder::new(sql::PROJECTS);
        match keys {
            Some(keys) => {
                query.push(" WHERE key");
                E::push_in(&mut query, List::Text(keys));
            }
            None => {
                query.push(" ORDER BY key");
            }
        }
        Ok(query.build_query_as().fetch_all(self.pool()).await?)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn project_of(&self, kind: Entity, id: String) -> Result<Option<String>> {
        let text = match kind {
            Entity::Session => sql::SESSION_PROJECT,
            Entity::Checkpoint => sql::CHECKPOINT_PROJECT,
            Entity::Entry => sql::ENTRY_PROJECT,
        };
        Ok(sqlx::query_scalar(text).bind(id).fetch_optional(self.pool()).await?)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn project_stats(&self, project: String, sessions_only: bool) -> Result<Option<ProjectCounts>> {
        let pool = self.pool();
        let head: Option<(i64, i64)> =
            sqlx::query_as(sql::PROJECT_HEAD).bind(project.clone()).fetch_optional(pool).await?;
        let Some((head_revision, events_from)) = head else { return Ok(None) };
        let statuses = sqlx::query_as(sql::PROJECT_STATUSES).bind(project.clone()).fetch_all(pool).await?;
        if sessions_only {
            return Ok(Some(ProjectCounts {
                head_revision,
                events_from,
                statuses,
                ..ProjectCounts::default()
            }));
        }
        let (checkpoints, checkpoint_bytes) =
            sqlx::query_as(sql::PROJECT_CHECKPOINTS).bind(project.clone()).fetch_one(pool).await?;
        let (chunks, chunk_bytes) =
            sqlx::query_as(sql::PROJECT_CHUNKS).bind(project.clone()).fetch_one(pool).await?;
        let memory_entries =
            sqlx::query_scalar(sql::PROJECT_MEMORY).bind(project.clone()).fetch_one(pool).await?;
        let (item_logs, items, item_bytes) =
            sqlx::query_as(sql::PROJECT_ITEMS).bind(project.clone()).fetch_one(pool).await?;
        let events = sqlx::query_scalar(sql::PROJECT_EVENTS).bind(project).fetch_one(pool).await?;
        Ok(Some(ProjectCounts {
            head_revision,
            events_from,
            statuses,
            checkpoints,
            checkpoint_bytes,
            chunks,
            chunk_bytes,
            memory_entries,
            events,
            item_logs,
            items,
            item_bytes,
        }))
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn projects_with_old_checkpoints(&self, cutoff_us: i64) -> Result<Vec<String>> {
        let query = sqlx::query_scalar(sql::PROJECTS_WITH_OLD_CHECKPOINTS).bind(cutoff_us);
        Ok(query.fetch_all(self.pool()).await?)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn prune_requests(&self, before_us: i64) -> Result<u64> {
        self.unrevisioned(Box::new(move |conn| {
            Box::pin(async move {
                let done = sqlx::query(sql::PRUNE_REQUESTS).bind(before_us).execute(conn).await?;
                Ok(E::rows_affected(&done))
            })
        }))
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn export_sizes(
        &self,
        project: String,
        table: Table,
        after: Cursor,
        limit: i64,
    ) -> Result<Vec<i64>> {
        export::sizes(self.pool(), project, table, after, limit).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn export_rows(
        &self,
        project: String,
        table: Table,
        after: Cursor,
        limit: i64,
    ) -> Result<Vec<(Cursor, Line)>> {
        export::rows(self.pool(), project, table, after, limit).await
    }

    /// Each statement may be repeated: an import run again skips what is present.
    #[tracing::instrument(level = "debug", skip_all)]
    async fn import_unrevisioned(
        &self,
        project: String,
        memory_caps: Option<String>,
        chunks: Vec<ChunkLine>,
    ) -> Result<ImportCounts> {
        self.unrevisioned(Box::new(move |conn| {
            Box::pin(async move {
                if let Some(caps) = memory_caps {
                    let query = sqlx::query(sql::SET_CAPS_IF_NONE).bind(caps).bind(project.clone());
                    query.execute(&mut *conn).await?;
                }
                let mut counts = ImportCounts::default();
                for c in chunks {
                    let query = sqlx::query(sql::PUT_CHUNK).bind(project.clone()).bind(c.digest).bind(c.data);
                    let done = query.bind(c.size_bytes).bind(c.created_us).execute(&mut *conn).await?;
                    match E::rows_affected(&done) {
                        1 => counts.imported += 1,
                        _ => counts.skipped += 1,
                    }
                }
                Ok(counts)
            })
        }))
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn unstamped_checkpoints(&self, after: String) -> Result<Vec<String>> {
        Ok(sqlx::query_scalar(sql::UNSTAMPED).bind(after).fetch_all(self.pool()).await?)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn stamp_state_digest(&self, id: String, digest: String) -> Result<()> {
        self.unrevisioned(Box::new(move |conn| {
            Box::pin(async move {
                sqlx::query(sql::STAMP).bind(digest).bind(id).execute(conn).await?;
                Ok(())
            })
        }))
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn metrics(&self) -> StoreMetrics {
        let sessions = sqlx::query_as(sql::SESSION_COUNTS).fetch_all(self.pool()).await;
        let (connections, idle_connections) = self.connections();
        StoreMetrics { sessions: sessions.map_err(Into::into), connections, idle_connections }
    }

    async fn close(&self) {
        Engine::close(self).await;
    }
}

/// ` AND kind IN (…)` for events of some kinds (conflicts have no kind).
fn push_kinds<E: Engine>(query: &mut QueryBuilder<E::Db>, table: LogTable, kinds: Vec<i32>) {
    if table == LogTable::Events && !kinds.is_empty() {
        query.push(" AND kind");
        E::push_in(query, List::Int(kinds.into_iter().map(i64::from).collect()));
    }
}
