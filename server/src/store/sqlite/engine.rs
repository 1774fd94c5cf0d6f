//! What SQLite does its own way (`store::engine`): every write through the writer (so none
//! waits on SQLite's busy handler behind a batch), a list bound as one JSON array, the
//! brief as one query, search on connections of its own that stop at its time limit.

use std::time::{Duration, Instant};

use sqlx::pool::PoolConnection;
use sqlx::sqlite::{Sqlite, SqliteQueryResult};
use sqlx::{QueryBuilder, SqlitePool};

use super::{SqliteStore, SqliteTx, rows_by_statement, sql};
use crate::core::search::rank::Candidate;
use crate::error::{Error, Result};
use crate::store::brief::{self, BriefKeys, BriefRows};
use crate::store::engine::{Engine, List, Unrevisioned};
use crate::store::model::{Lock, SearchPage, SearchQuery, SearchRow};
use crate::store::{WriteBody, apply};

/// The brief's statements as one query: SQLite binds `$n` to the query's n-th value,
/// whichever statement it is in, so the four values are bound once. Serves `baton-bench`'s
/// row "resume p99" (one hand-off to the connection's thread instead of seven).
static BRIEF: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| brief::statements(sql::NOW_US).join("; "));

/// How many virtual-machine steps of a search's statement SQLite runs between two looks at
/// its time limit: a look is one clock read, and this many steps are a sliver of a limit.
const PROGRESS_STEPS: i32 = 4000;

impl Engine for SqliteStore {
    type Db = Sqlite;
    type Tx = SqliteTx;
    const TOUCH_SESSION: &'static str = sql::TOUCH_SESSION;
    const EXPIRED_SESSIONS: &'static str = sql::EXPIRED_SESSIONS;
    const SHARE_PROJECT: &'static str = sql::SHARE_PROJECT;
    const RENEW_RESERVATIONS: &'static str = sql::RENEW_RESERVATIONS;

    fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    fn push_in(query: &mut QueryBuilder<Sqlite>, list: List) {
        let json = match list {
            List::Text(values) => serde_json::to_string(&values),
            List::Int(values) => serde_json::to_string(&values),
        };
        // A list of strings or numbers always serializes.
        query.push(" IN (SELECT value FROM json_each(").push_bind(json.unwrap_or_default()).push("))");
    }

    fn push_metadata_eq(query: &mut QueryBuilder<Sqlite>, key: String, value: String) {
        // The stored document and the value are both canonical: SQLite renders each the same.
        query.push(" AND (metadata -> ").push_bind(format!("$.\"{key}\"")).push(") = json(");
        query.push_bind(value).push(")");
    }

    fn rows_affected(done: &SqliteQueryResult) -> u64 {
        done.rows_affected()
    }

    /// On the writer's connection, in a batch like any write: kept if it succeeds.
    async fn unrevisioned<R: Send + 'static>(&self, body: Unrevisioned<Sqlite, R>) -> Result<R> {
        let body =
            Box::new(move |mut conn: PoolConnection<Sqlite>| -> futures::future::BoxFuture<'static, _> {
                Box::pin(async move {
                    let result = body(&mut conn).await;
                    (conn, result)
                })
            });
        self.writer.run_plain(body).await
    }

    async fn write<R: Send + 'static>(&self, lock: Lock, body: WriteBody<SqliteTx, R>) -> Result<R> {
        apply::write(&self.writer, &self.commits, lock, body).await
    }

    /// Each statement reads the database as its turn comes, so every read sees at least
    /// what the first one saw.
    async fn brief_rows(&self, keys: BriefKeys) -> Result<BriefRows> {
        let mut query = sqlx::query(sqlx::AssertSqlSafe(BRIEF.as_str()));
        for value in keys.values() {
            query = query.bind(value.to_owned());
        }
        let mut conn = self.pool.acquire().await?;
        let rows = rows_by_statement(sqlx::Executor::fetch_many(&mut *conn, query)).await?;
        Ok(brief::decode(rows)?)
    }

    async fn search(&self, q: SearchQuery) -> Result<SearchPage> {
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

    async fn search_rows(&self, ids: Vec<i64>) -> Result<Vec<SearchRow>> {
        let ids = serde_json::to_string(&ids).map_err(Error::internal)?;
        let mut conn = self.search_connection(None).await?;
        Ok(sqlx::query_as(sql::SEARCH_ROWS).bind(ids).fetch_all(&mut *conn).await?)
    }

    fn connections(&self) -> (u32, usize) {
        // The writer's connection is one of the database's connections too.
        (self.pool.size() + self.writer_pool.size(), self.pool.num_idle() + self.writer_pool.num_idle())
    }

    async fn close(&self) {
        // The writer's lanes hold their connections; the pool's close waits for them.
        self.writer.close().await;
        self.writer_pool.close().await;
        self.pool.close().await;
        self.search_pool.close().await;
    }
}

impl SqliteStore {
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
}
