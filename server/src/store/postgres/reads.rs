//! Reads on Postgres outside a write: one statement each, on a pool connection.

use sqlx::QueryBuilder;

use super::{PgStore, sql};
use crate::error::Result;
use crate::store::SessionQuery;
use crate::store::model::{Checkpoint, Node, Session};

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

    pub(super) async fn checkpoints_by_id(&self, ids: Vec<String>) -> Result<Vec<Checkpoint>> {
        Ok(sqlx::query_as(sql::CHECKPOINTS_LIGHT).bind(ids).fetch_all(&self.pool).await?)
    }
}
