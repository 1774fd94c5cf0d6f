//! What is not a revisioned write on SQLite: access tokens, the project list and counts,
//! transcript chunks, old replies. One statement each; the writes go through the writer
//! (a transaction of their own), so they never wait on SQLite's busy handler behind a batch.

use futures::future::BoxFuture;
use sqlx::pool::PoolConnection;
use sqlx::{Sqlite, SqliteConnection};

use super::SqliteStore;
use crate::error::Result;
use crate::store::TokenRow;
use crate::store::model::ProjectCounts;

/// Binds: id, name, role, project, hash, created_us.
const INSERT_TOKEN: &str =
    "INSERT INTO tokens (id, name, role, project, secret_hash, created_us) VALUES (?, ?, ?, ?, ?, ?)";
const TOKENS: &str =
    "SELECT id, name, role, project, created_us, last_used_us, revoked_us FROM tokens ORDER BY created_us";
/// Binds: name.
const TOKEN_BY_NAME: &str =
    "SELECT id, name, role, project, created_us, last_used_us, revoked_us FROM tokens WHERE name = ?";
/// Binds: hash.
const TOKEN_BY_HASH: &str =
    "SELECT id, name, role, project, created_us, last_used_us, revoked_us FROM tokens WHERE secret_hash = ?";
const ANY_TOKEN: &str = "SELECT EXISTS (SELECT 1 FROM tokens)";
/// Binds: time, name.
const REVOKE_TOKEN: &str = "UPDATE tokens SET revoked_us = ? WHERE name = ? AND revoked_us IS NULL";
/// Binds: time, id.
const TOUCH_TOKEN: &str = "UPDATE tokens SET last_used_us = ? WHERE id = ?";
const PROJECTS: &str = "SELECT key, memory_caps FROM projects ORDER BY key";
/// Binds: keys as a JSON array.
const EXISTING_PROJECTS: &str = "SELECT key FROM projects WHERE key IN (SELECT value FROM json_each(?))";
/// Binds: id.
pub(super) const SESSION_PROJECT: &str = "SELECT project FROM sessions WHERE id = ?";
pub(super) const CHECKPOINT_PROJECT: &str = "SELECT project FROM checkpoints WHERE id = ?";
pub(super) const ENTRY_PROJECT: &str = "SELECT project FROM memory WHERE id = ?";
/// Binds: project.
const HEAD_REVISION: &str = "SELECT head_revision FROM projects WHERE key = ?";
/// Binds: time.
const PROJECTS_WITH_OLD_CHECKPOINTS: &str =
    "SELECT DISTINCT project FROM checkpoints WHERE created_us < ? ORDER BY project";
const PRUNE_REQUESTS: &str = "DELETE FROM requests WHERE created_us < ?";
/// Binds: project.
const PROJECT_HEAD: &str = "SELECT head_revision, events_from FROM projects WHERE key = ?";
const PROJECT_STATUSES: &str = "SELECT status, COUNT(*) FROM sessions WHERE project = ? GROUP BY status";
const PROJECT_CHECKPOINTS: &str =
    "SELECT COUNT(*), CAST(COALESCE(SUM(size_bytes), 0) AS BIGINT) FROM checkpoints WHERE project = ?";
const PROJECT_CHUNKS: &str =
    "SELECT COUNT(*), CAST(COALESCE(SUM(size_bytes), 0) AS BIGINT) FROM chunks WHERE project = ?";
const PROJECT_MEMORY: &str = "SELECT COUNT(*) FROM memory WHERE project = ?";
const PROJECT_EVENTS: &str = "SELECT COUNT(*) FROM events WHERE project = ?";
const SESSION_COUNTS: &str = "SELECT status, COUNT(*) FROM sessions GROUP BY status";
/// Binds: project, digest, data, size, created_us.
const PUT_CHUNK: &str = "INSERT INTO chunks (project, digest, data, size_bytes, created_us) VALUES (?, ?, ?, ?, ?) \
     ON CONFLICT (project, digest) DO NOTHING";
/// Binds: project, digest.
const CHUNK: &str = "SELECT data, size_bytes FROM chunks WHERE project = ? AND digest = ?";
/// Binds: caps, project.
const SET_CAPS_IF_NONE: &str = "UPDATE projects SET memory_caps = ? WHERE key = ? AND memory_caps = '{}'";

/// Binds: after (id).
const UNSTAMPED: &str =
    "SELECT id FROM checkpoints WHERE state_digest IS NULL AND id > ? ORDER BY id LIMIT 100";
/// Binds: digest, id.
const STAMP: &str = "UPDATE checkpoints SET state_digest = ? WHERE id = ? AND state_digest IS NULL";

impl SqliteStore {
    /// A write that takes no lock, through the writer like every write (it never waits on
    /// SQLite's busy handler): `f` on the writer's connection, kept if it succeeds.
    pub(super) async fn plain<R, F>(&self, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: for<'c> FnOnce(&'c mut SqliteConnection) -> BoxFuture<'c, Result<R>> + Send + 'static,
    {
        let body = Box::new(move |mut conn: PoolConnection<Sqlite>| -> BoxFuture<'static, _> {
            Box::pin(async move {
                let result = f(&mut conn).await;
                (conn, result)
            })
        });
        self.writer.run_plain(body).await
    }

    pub(super) async fn insert_token(&self, t: TokenRow, hash: String) -> Result<()> {
        self.plain(move |conn| {
            Box::pin(async move {
                let query =
                    sqlx::query(INSERT_TOKEN).bind(&t.id).bind(&t.name).bind(&t.role).bind(&t.project);
                query.bind(hash).bind(t.created_us).execute(conn).await?;
                Ok(())
            })
        })
        .await
    }

    pub(super) async fn token_named(&self, name: String) -> Result<Option<TokenRow>> {
        Ok(sqlx::query_as(TOKEN_BY_NAME).bind(name).fetch_optional(&self.pool).await?)
    }

    pub(super) async fn tokens(&self) -> Result<Vec<TokenRow>> {
        Ok(sqlx::query_as(TOKENS).fetch_all(&self.pool).await?)
    }

    pub(super) async fn token_hashed(&self, hash: String) -> Result<Option<TokenRow>> {
        Ok(sqlx::query_as(TOKEN_BY_HASH).bind(hash).fetch_optional(&self.pool).await?)
    }

    pub(super) async fn any_token(&self) -> Result<bool> {
        Ok(sqlx::query_scalar(ANY_TOKEN).fetch_one(&self.pool).await?)
    }

    pub(super) async fn revoke(&self, name: String, now_us: i64) -> Result<bool> {
        self.plain(move |conn| {
            Box::pin(async move {
                let done = sqlx::query(REVOKE_TOKEN).bind(now_us).bind(name).execute(conn).await?;
                Ok(done.rows_affected() > 0)
            })
        })
        .await
    }

    pub(super) async fn token_used(&self, id: String, now_us: i64) -> Result<()> {
        self.plain(move |conn| {
            Box::pin(async move {
                sqlx::query(TOUCH_TOKEN).bind(now_us).bind(id).execute(conn).await?;
                Ok(())
            })
        })
        .await
    }

    pub(super) async fn projects(&self) -> Result<Vec<(String, String)>> {
        Ok(sqlx::query_as(PROJECTS).fetch_all(&self.pool).await?)
    }

    pub(super) async fn existing(&self, keys: Vec<String>) -> Result<Vec<String>> {
        let keys = serde_json::to_string(&keys).map_err(crate::error::Error::internal)?;
        Ok(sqlx::query_scalar(EXISTING_PROJECTS).bind(keys).fetch_all(&self.pool).await?)
    }

    pub(super) async fn project_of_id(
        &self,
        kind: crate::store::Entity,
        id: String,
    ) -> Result<Option<String>> {
        let sql = match kind {
            crate::store::Entity::Session => SESSION_PROJECT,
            crate::store::Entity::Checkpoint => CHECKPOINT_PROJECT,
            crate::store::Entity::Entry => ENTRY_PROJECT,
        };
        Ok(sqlx::query_scalar(sql).bind(id).fetch_optional(&self.pool).await?)
    }

    pub(super) async fn head(&self, project: String) -> Result<i64> {
        let head: Option<i64> =
            sqlx::query_scalar(HEAD_REVISION).bind(project).fetch_optional(&self.pool).await?;
        Ok(head.unwrap_or(0))
    }

    pub(super) async fn with_old_checkpoints(&self, cutoff_us: i64) -> Result<Vec<String>> {
        Ok(sqlx::query_scalar(PROJECTS_WITH_OLD_CHECKPOINTS).bind(cutoff_us).fetch_all(&self.pool).await?)
    }

    pub(super) async fn forget_requests(&self, before_us: i64) -> Result<u64> {
        self.plain(move |conn| {
            Box::pin(async move {
                let done = sqlx::query(PRUNE_REQUESTS).bind(before_us).execute(conn).await?;
                Ok(done.rows_affected())
            })
        })
        .await
    }

    pub(super) async fn counts(&self, project: String) -> Result<Option<ProjectCounts>> {
        let head: Option<(i64, i64)> =
            sqlx::query_as(PROJECT_HEAD).bind(&project).fetch_optional(&self.pool).await?;
        let Some((head_revision, events_from)) = head else { return Ok(None) };
        let statuses = sqlx::query_as(PROJECT_STATUSES).bind(&project).fetch_all(&self.pool).await?;
        let (checkpoints, checkpoint_bytes) =
            sqlx::query_as(PROJECT_CHECKPOINTS).bind(&project).fetch_one(&self.pool).await?;
        let (chunks, chunk_bytes) =
            sqlx::query_as(PROJECT_CHUNKS).bind(&project).fetch_one(&self.pool).await?;
        let memory_entries = sqlx::query_scalar(PROJECT_MEMORY).bind(&project).fetch_one(&self.pool).await?;
        let events = sqlx::query_scalar(PROJECT_EVENTS).bind(&project).fetch_one(&self.pool).await?;
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
        }))
    }

    pub(super) async fn statuses(&self) -> Result<Vec<(i32, i64)>> {
        Ok(sqlx::query_as(SESSION_COUNTS).fetch_all(&self.pool).await?)
    }

    pub(super) async fn missing(&self, project: String, digests: &[String]) -> Result<Vec<String>> {
        let digests = serde_json::to_string(digests).map_err(crate::error::Error::internal)?;
        let query = sqlx::query_scalar(super::sql::MISSING_CHUNKS).bind(digests).bind(project);
        Ok(query.fetch_all(&self.pool).await?)
    }

    /// Stores chunks the project does not have; returns how many were new.
    pub(super) async fn store_chunks(
        &self,
        project: String,
        chunks: Vec<(String, Vec<u8>, i64)>,
        now_us: i64,
    ) -> Result<u64> {
        self.plain(move |conn| {
            Box::pin(async move {
                let mut stored = 0;
                for (digest, data, size) in chunks {
                    let query =
                        sqlx::query(PUT_CHUNK).bind(&project).bind(digest).bind(data).bind(size).bind(now_us);
                    stored += query.execute(&mut *conn).await?.rows_affected();
                }
                Ok(stored)
            })
        })
        .await
    }

    pub(super) async fn chunk_data(
        &self,
        project: String,
        digests: Vec<String>,
    ) -> Result<Vec<(String, Vec<u8>, i64)>> {
        let mut out = Vec::with_capacity(digests.len());
        for digest in digests {
            let found: Option<(Vec<u8>, i64)> =
                sqlx::query_as(CHUNK).bind(&project).bind(&digest).fetch_optional(&self.pool).await?;
            if let Some((data, size)) = found {
                out.push((digest, data, size));
            }
        }
        Ok(out)
    }

    /// An archive's chunks (already checked) and memory caps (if the project has none).
    pub(super) async fn import_chunks(
        &self,
        project: String,
        memory_caps: Option<String>,
        chunks: Vec<crate::store::transfer::ChunkLine>,
    ) -> Result<(u64, u64)> {
        self.plain(move |conn| {
            Box::pin(async move {
                if let Some(caps) = memory_caps {
                    sqlx::query(SET_CAPS_IF_NONE).bind(caps).bind(&project).execute(&mut *conn).await?;
                }
                let (mut imported, mut skipped) = (0, 0);
                for c in chunks {
                    let query =
                        sqlx::query(PUT_CHUNK).bind(&project).bind(c.digest).bind(c.data).bind(c.size_bytes);
                    match query.bind(c.created_us).execute(&mut *conn).await?.rows_affected() {
                        1 => imported += 1,
                        _ => skipped += 1,
                    }
                }
                Ok((imported, skipped))
            })
        })
        .await
    }

    pub(super) async fn unstamped(&self, after: String) -> Result<Vec<String>> {
        Ok(sqlx::query_scalar(UNSTAMPED).bind(after).fetch_all(&self.pool).await?)
    }

    pub(super) async fn stamp(&self, id: String, digest: String) -> Result<()> {
        self.plain(move |conn| {
            Box::pin(async move {
                sqlx::query(STAMP).bind(digest).bind(id).execute(conn).await?;
                Ok(())
            })
        })
        .await
    }
}
