//! Session liveness on Postgres: heartbeats that change nothing but `last_seen_at` (no
//! revision, no lock: one autocommit statement), and the reaper's scan for sessions whose
//! liveness ran out.

use baton_proto::v1::SessionStatus;

use super::{PgStore, sql};
use crate::error::Result;
use crate::store::{Expiry, Within};

impl PgStore {
    pub(super) async fn liveness(
        &self,
        id: String,
        tool_count: i64,
        status: Option<SessionStatus>,
        within: Within,
    ) -> Result<Option<(i32, i64)>> {
        Ok(sqlx::query_as(sql::TOUCH_SESSION)
            .bind(&id)
            .bind(tool_count)
            .bind(status.map(|s| s as i32))
            .bind(within)
            .fetch_optional(&self.pool)
            .await?)
    }

    pub(super) async fn expired(&self, expiry: Expiry) -> Result<Vec<(String, String, i32, i64)>> {
        Ok(sqlx::query_as(sql::EXPIRED_SESSIONS)
            .bind(SessionStatus::Initializing as i32)
            .bind(SessionStatus::Active as i32)
            .bind(SessionStatus::Idle as i32)
            .bind(SessionStatus::Active as i32)
            .bind(expiry.idle_after_us)
            .fetch_all(&self.pool)
            .await?)
    }
}
