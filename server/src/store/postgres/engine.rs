//! What Postgres does its own way (`store::engine`): a write that takes no lock is one
//! autocommit statement on a pool connection, a list is bound as an array, the brief's
//! statements run side by side, search on connections of its own under a statement timeout.

use sqlx::postgres::{PgQueryResult, Postgres};
use sqlx::{PgPool, QueryBuilder};

use super::{PgStore, PgTx, sql};
use crate::error::{Error, Result};
use crate::store::brief::{self, BriefKeys, BriefRows};
use crate::store::engine::{Engine, List, Unrevisioned};
use crate::store::model::{Lock, SearchPage, SearchQuery, SearchRow};
use crate::store::{WriteBody, apply};

/// The brief's statements (`store::brief`).
static BRIEF: std::sync::LazyLock<[String; 7]> =
    std::sync::LazyLock::new(|| brief::statements("baton_now_us()"));

impl Engine for PgStore {
    type Db = Postgres;
    type Tx = PgTx;
    const TOUCH_SESSION: &'static str = sql::TOUCH_SESSION;
    const EXPIRED_SESSIONS: &'static str = sql::EXPIRED_SESSIONS;
    const SHARE_PROJECT: &'static str = sql::SHARE_PROJECT;
    const RENEW_RESERVATIONS: &'static str = sql::RENEW_RESERVATIONS;

    fn pool(&self) -> &PgPool {
        &self.pool
    }

    fn push_in(query: &mut QueryBuilder<Postgres>, list: List) {
        query.push(" = ANY(");
        match list {
            List::Text(values) => query.push_bind(values),
            List::Int(values) => query.push_bind(values),
        };
        query.push(")");
    }

    fn push_metadata_eq(query: &mut QueryBuilder<Postgres>, key: String, value: String) {
        query.push(" AND (CAST(metadata AS jsonb) -> CAST(").push_bind(key).push(" AS text)) = CAST(");
        query.push_bind(value).push(" AS jsonb)");
    }

    fn rows_affected(done: &PgQueryResult) -> u64 {
        done.rows_affected()
    }

    /// On a pool connection; each statement commits alone (every such write is one
    /// statement, or statements that may be repeated: an import's chunks and caps).
    async fn unrevisioned<R: Send + 'static>(&self, body: Unrevisioned<Postgres, R>) -> Result<R> {
        let mut conn = self.pool.acquire().await?;
        body(&mut conn).await
    }

    async fn write<R: Send + 'static>(&self, lock: Lock, body: WriteBody<PgTx, R>) -> Result<R> {
        apply::write(&self.writer, &self.commits, lock, body).await
    }

    /// The head first, then the other statements side by side, each on its own connection:
    /// every statement is a round trip, and waiting on them side by side is most of the
    /// latency. Serves `baton-bench`'s row "resume p99". Every read sees at least what the
    /// first one saw.
    async fn brief_rows(&self, keys: BriefKeys) -> Result<BriefRows> {
        let fetch = |text: &'static String| {
            let mut query = sqlx::query(sqlx::AssertSqlSafe(text.as_str()));
            for value in keys.values() {
                query = query.bind(value.to_owned());
            }
            query.fetch_all(&self.pool)
        };
        let [head, rest @ ..] = &*BRIEF;
        let head = fetch(head).await?;
        let rest = futures::future::try_join_all(rest.iter().map(fetch)).await?;
        Ok(brief::decode(std::iter::once(head).chain(rest).collect())?)
    }

    /// On the search pool, in a transaction whose statements Postgres stops once the
    /// search's time limit has passed.
    async fn search(&self, q: SearchQuery) -> Result<SearchPage> {
        let limit = q.time_limit;
        let mut tx = self.search_pool.begin().await?;
        sqlx::query(sql::SEARCH_TIME_LIMIT)
            .bind(format!("{}ms", limit.as_millis().max(1)))
            .execute(&mut *tx)
            .await?;
        let (head, partial): (i64, bool) = sqlx::query_as(sql::SEARCH_HEAD)
            .bind(&q.project)
            .fetch_one(&mut *tx)
            .await
            .map_err(|e| Error::search(e, limit))?;
        let first_page = q.bounds.is_none();
        let (max_revision, max_id) = q.bounds.unwrap_or((head, i64::MAX));
        let candidates = sqlx::query_as(sql::SEARCH)
            .persistent(false)
            .bind(q.query.tsquery())
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
            .fetch_all(&mut *tx)
            .await
            .map_err(|e| Error::search(e, limit))?;
        tx.commit().await?;
        let max_id =
            if first_page { crate::core::search::rank::newest_candidate(&candidates) } else { max_id };
        Ok(SearchPage { candidates, partial, bounds: (max_revision, max_id) })
    }

    async fn search_rows(&self, ids: Vec<i64>) -> Result<Vec<SearchRow>> {
        Ok(sqlx::query_as(sql::SEARCH_ROWS).bind(ids).fetch_all(&self.pool).await?)
    }

    fn connections(&self) -> (u32, usize) {
        (self.pool.size(), self.pool.num_idle())
    }

    async fn close(&self) {
        // The writer's lanes hold their connections; the pool's close waits for them.
        self.writer.close().await;
        self.pool.close().await;
        self.search_pool.close().await;
    }
}
