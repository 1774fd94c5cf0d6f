//! Session liveness on SQLite: heartbeats that change nothing but `last_seen_at` (no
//! revision, no lock), and the reaper's scan for sessions whose liveness ran out.

use baton_proto::v1::SessionStatus;

use super::{SqliteStore, sql};
use crate::error::Result;
use crate::store::{Expiry, Within};

impl SqliteStore {
    pub(super) async fn liveness(
        &self,
        id: String,
        tool_count: i64,
        status: Option<SessionStatus>,
        within: Within,
    ) -> Result<Option<(i32, i64)>> {
        // Through the writer, like every write: it never waits on SQLite's busy handler.
        self.plain(move |conn| {
            Box::pin(async move {
                Ok(sqlx::query_as(sql::TOUCH_SESSION)
                    .bind(tool_count)
                    .bind(&id)
                    .bind(status.map(|s| s as i32))
                    .bind(within)
                    .fetch_optional(conn)
                    .await?)
            })
        })
        .await
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
