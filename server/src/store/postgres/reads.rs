//! Reads on Postgres outside a write: one statement each, on a pool connection.

use sqlx::QueryBuilder;

use super::{PgStore, sql};
use crate::error::{Error, Result};
use crate::store::SessionQuery;
use crate::store::brief::{self, BriefKeys, BriefRows};
use crate::store::model::{
    Checkpoint, EntryRow, LogTable, MemoryQuery, Node, SearchPage, SearchQuery, SearchRow, Session,
};

/// The brief's statements (`store::brief`).
static BRIEF: std::sync::LazyLock<[String; 7]> =
    std::sync::LazyLock::new(|| brief::statements("baton_now_us()"));

impl PgStore {
    pub(super) async fn session_by_id(&self, id: String) -> Result<Option<Session>> {
        Ok(sqlx::query_as(sql::SESSION_BY_ID).bind(id).fetch_optional(&self.pool).await?)
    }

    /// The filters that are set, each a bound value.
    pub(super) async fn session_list(&self, q: SessionQuery) -> Result<Vec<Session>> {
        let mut query = QueryBuilder::new(sql::LIST_SESSIONS);
        query.push_bind(q.project);
        if !q.statuses.is_empty() {
            let statuses: Vec<i32> = q.statuses.iter().map(|s| *s as i32).collect();
            query.push(" AND status = ANY(").push_bind(statuses).push(")");
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
                sqlx::query_as(sql::EVENT_SIZES_OF_KINDS).bind(project).bind(after).bind(limit).bind(kinds)
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

    /// The head first, then the other statements side by side, each on its own connection:
    /// every statement is a round trip, and waiting on them side by side is most of the
    /// latency (`baton-bench`'s row "resume p99"). Every read sees at least what the first
    /// one saw.
    pub(super) async fn brief(&self, keys: BriefKeys) -> Result<BriefRows> {
        let fetch = |sql: &'static String| {
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql.as_str()));
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

    pub(super) async fn memory_newest(
        &self,
        project: String,
        branch: String,
        limit: i64,
    ) -> Result<Vec<EntryRow>> {
        let query = sqlx::query_as(sql::NEWEST_MEMORY).bind(project).bind(branch).bind(limit);
        Ok(query.fetch_all(&self.pool).await?)
    }

    /// On the search pool, in a transaction whose statements Postgres stops once the
    /// search's time limit has passed.
    pub(super) async fn search_candidates(&self, q: SearchQuery) -> Result<SearchPage> {
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

    pub(super) async fn search_docs_by_id(&self, ids: Vec<i64>) -> Result<Vec<SearchRow>> {
        Ok(sqlx::query_as(sql::SEARCH_ROWS).bind(ids).fetch_all(&self.pool).await?)
    }

    pub(super) async fn search_backfill_projects(&self) -> Result<Vec<String>> {
        Ok(sqlx::query_scalar(sql::SEARCH_BACKFILL).fetch_all(&self.pool).await?)
    }
}
