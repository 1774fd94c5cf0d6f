//! Reads on SQLite outside a write: one statement each, on a pool connection.

use std::time::{Duration, Instant};

use sqlx::QueryBuilder;
use sqlx::pool::PoolConnection;
use sqlx::sqlite::Sqlite;

use super::{SqliteStore, rows_by_statement, sql};
use crate::core::search::rank::Candidate;
use crate::error::{Error, Result};
use crate::store::SessionQuery;
use crate::store::brief::{self, BriefKeys, BriefRows};
use crate::store::model::{
    Checkpoint, EntryRow, LogTable, MemoryQuery, Node, SearchPage, SearchQuery, SearchRow, Session,
};

/// The brief's statements as one query: SQLite binds `$n` to the query's n-th value,
/// whichever statement it is in, so the four values are bound once. One hand-off to the
/// connection's thread instead of seven (`baton-bench`'s row "resume p99").
static BRIEF: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| brief::statements(sql::NOW_US).join("; "));

/// How many virtual-machine steps of a search's statement SQLite runs between two looks at
/// its time limit: a look is one clock read, and this many steps are a sliver of a limit.
const PROGRESS_STEPS: i32 = 4000;

impl SqliteStore {
    pub(super) async fn session_by_id(&self, id: String) -> Result<Option<Session>> {
        Ok(sqlx::query_as(sql::SESSION_BY_ID).bind(id).fetch_optional(&self.pool).await?)
    }

    /// The filters that are set, each a bound value.
    pub(super) async fn session_list(&self, q: SessionQuery) -> Result<Vec<Session>> {
        let mut query = QueryBuilder::new(sql::LIST_SESSIONS);
        query.push_bind(q.project);
        if !q.statuses.is_empty() {
            query.push(" AND status IN (SELECT value FROM json_each(");
            let statuses: Vec<i32> = q.statuses.iter().map(|s| *s as i32).collect();
            query.push_bind(serde_json::to_string(&statuses).unwrap_or_else(|_| "[]".to_owned())).push("))");
        }
        if let Some(agent) = q.agent {
            query.push(" AND agent = ").push_bind(agent);
        }
        if let Some(host) = q.host {
            query.push(" AND host = ").push_bind(host);
        }
        if let Some(since) = q.since_us {
            query.push(" AND updated_us >= ").push_bind(since);
        }
        if let Some(before) = q.before_id {
            query.push(" AND id < ").push_bind(before);
        }
        query.push(" ORDER BY id DESC LIMIT ").push_bind(q.limit.saturating_add(1));
        Ok(query.build_query_as().fetch_all(&self.pool).await?)
    }

    pub(super) async fn checkpoint_by_id(&self, id: String, payload: bool) -> Result<Option<Checkpoint>> {
        let sql = if payload { sql::CHECKPOINT_BY_ID } else { sql::CHECKPOINT_LIGHT_BY_ID };
        Ok(sqlx::query_as(sql).bind(id).fetch_optional(&self.pool).await?)
    }

    pub(super) async fn nodes(&self, session_id: String) -> Result<Vec<Node>> {
        Ok(sqlx::query_as(sql::CHECKPOINT_NODES).bind(session_id).fetch_all(&self.pool).await?)
    }

    pub(super) async fn checkpoints_by_id(
        &self,
        project: String,
        ids: Vec<String>,
    ) -> Result<Vec<Checkpoint>> {
        let ids = serde_json::to_string(&ids).map_err(crate::error::Error::internal)?;
        Ok(sqlx::query_as(sql::CHECKPOINTS_LIGHT).bind(ids).bind(project).fetch_all(&self.pool).await?)
    }

    pub(super) async fn caps(&self, project: String) -> Result<Option<String>> {
        Ok(sqlx::query_scalar(sql::MEMORY_CAPS).bind(project).fetch_optional(&self.pool).await?)
    }

    pub(super) async fn record_version(&self, project: String, record: String) -> Result<Option<i64>> {
        Ok(sqlx::query_scalar(sql::RECORD_REVISION)
            .bind(project)
            .bind(record)
            .fetch_optional(&self.pool)
            .await?)
    }

    /// The filters that are set, each a bound value.
    pub(super) async fn memory_list(&self, q: MemoryQuery) -> Result<Vec<EntryRow>> {
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
        query
            .push(" ORDER BY m.category, m.branch, m.key, m.revision, m.seq LIMIT ")
            .push_bind(q.limit.saturating_add(1));
        Ok(query.build_query_as().fetch_all(&self.pool).await?)
    }

    pub(super) async fn sizes(
        &self,
        table: LogTable,
        project: String,
        after: i64,
        limit: i64,
        kinds: Vec<i32>,
    ) -> Result<Vec<(i64, i64)>> {
        let query = match (table, kinds.is_empty()) {
            (LogTable::Events, true) => {
                sqlx::query_as(sql::EVENT_SIZES).bind(project).bind(after).bind(limit)
            }
            (LogTable::Events, false) => {
                let kinds = serde_json::to_string(&kinds).map_err(crate::error::Error::internal)?;
                sqlx::query_as(sql::EVENT_SIZES_OF_KINDS).bind(project).bind(after).bind(kinds).bind(limit)
            }
            (LogTable::Conflicts, _) => {
                sqlx::query_as(sql::CONFLICT_SIZES).bind(project).bind(after).bind(limit)
            }
        };
        Ok(query.fetch_all(&self.pool).await?)
    }

    pub(super) async fn rows(
        &self,
        table: LogTable,
        project: String,
        after: i64,
        through: i64,
        kinds: Vec<i32>,
    ) -> Result<Vec<(i64, Vec<u8>)>> {
        let query = match (table, kinds.is_empty()) {
            (LogTable::Events, true) => {
                sqlx::query_as(sql::EVENT_ROWS).bind(project).bind(after).bind(through)
            }
            (LogTable::Events, false) => {
                let kinds = serde_json::to_string(&kinds).map_err(crate::error::Error::internal)?;
                sqlx::query_as(sql::EVENT_ROWS_OF_KINDS).bind(project).bind(after).bind(through).bind(kinds)
            }
            (LogTable::Conflicts, _) => {
                sqlx::query_as(sql::CONFLICT_ROWS).bind(project).bind(after).bind(through)
            }
        };
        Ok(query.fetch_all(&self.pool).await?)
    }

    pub(super) async fn kept_from(&self, project: String) -> Result<Option<i64>> {
        Ok(sqlx::query_scalar(sql::EVENTS_FROM).bind(project).fetch_optional(&self.pool).await?)
    }

    /// Each statement reads the database as its turn comes, so every read sees at least
    /// what the first one saw.
    pub(super) async fn brief(&self, keys: BriefKeys) -> Result<BriefRows> {
        let mut query = sqlx::query(sqlx::AssertSqlSafe(BRIEF.as_str()));
        for value in keys.values() {
            query = query.bind(value.to_owned());
        }
        let mut conn = self.pool.acquire().await?;
        let rows = rows_by_statement(sqlx::Executor::fetch_many(&mut *conn, query)).await?;
        Ok(brief::decode(rows)?)
    }

    pub(super) async fn memory_newest(
        &self,
        project: String,
        branch: String,
        limit: i64,
    ) -> Result<Vec<EntryRow>> {
        let query = sqlx::query_as(sql::NEWEST_MEMORY).bind(project).bind(branch).bind(limit);
        Ok(query.fetch_all(&self.pool).await?)
    }

    /// A search connection whose statements SQLite stops once `limit` has passed (none:
    /// no limit): its progress handler, run every `PROGRESS_STEPS` steps of a statement,
    /// says so. Set anew on every use, as one left by a search whose caller went away has
    /// passed its time.
    async fn search_connection(&self, limit: Option<Duration>) -> Result<PoolConnection<Sqlite>> {
        let mut conn = self.search_pool.acquire().await?;
        let mut handle = conn.lock_handle().await?;
        match limit {
            Some(limit) => {
                let deadline = Instant::now() + limit;
                handle.set_progress_handler(PROGRESS_STEPS, move || Instant::now() < deadline);
            }
            None => handle.remove_progress_handler(),
        }
        drop(handle);
        Ok(conn)
    }

    pub(super) async fn search_candidates(&self, q: SearchQuery) -> Result<SearchPage> {
        let limit = q.time_limit;
        let mut conn = self.search_connection(Some(limit)).await?;
        let (head, partial): (i64, bool) = sqlx::query_as(sql::SEARCH_HEAD)
            .bind(&q.project)
            .fetch_one(&mut *conn)
            .await
            .map_err(|e| Error::search(e, limit))?;
        let first_page = q.bounds.is_none();
        let (max_revision, max_id) = q.bounds.unwrap_or((head, i64::MAX));
        let candidates: String = sqlx::query_scalar(sql::SEARCH)
            .bind(q.query.fts5(&q.project))
            .bind(q.project.clone())
            .bind(q.kinds)
            .bind(q.session_id)
            .bind(q.branch)
            .bind(q.author)
            .bind(q.after_us)
            .bind(q.before_us)
            .bind(max_revision)
            .bind(max_id)
            .bind(q.ranked)
            .fetch_one(&mut *conn)
            .await
            .map_err(|e| Error::search(e, limit))?;
        // Each candidate a JSON array of the fields in order.
        let candidates: Vec<Candidate> = serde_json::from_str(&candidates).map_err(Error::internal)?;
        let max_id =
            if first_page { crate::core::search::rank::newest_candidate(&candidates) } else { max_id };
        Ok(SearchPage { candidates, partial, bounds: (max_revision, max_id) })
    }

    pub(super) async fn search_docs_by_id(&self, ids: Vec<i64>) -> Result<Vec<SearchRow>> {
        let ids = serde_json::to_string(&ids).map_err(Error::internal)?;
        let mut conn = self.search_connection(None).await?;
        Ok(sqlx::query_as(sql::SEARCH_ROWS).bind(ids).fetch_all(&mut *conn).await?)
    }

    pub(super) async fn search_backfill_projects(&self) -> Result<Vec<String>> {
        Ok(sqlx::query_scalar(sql::SEARCH_BACKFILL).fetch_all(&self.pool).await?)
    }
}
