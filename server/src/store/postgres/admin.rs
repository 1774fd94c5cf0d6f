//! What is not a revisioned write on Postgres: access tokens, the project list and counts,
//! transcript chunks, old replies. One statement each, on a pool connection; a write is a
//! statement of its own (autocommit).

use super::PgStore;
use crate::error::Result;
use crate::store::TokenRow;
use crate::store::model::ProjectCounts;

/// In order: id, name, role, project, hash, created_us.
const INSERT_TOKEN: &str =
    "INSERT INTO tokens (id, name, role, project, secret_hash, created_us) VALUES ($1, $2, $3, $4, $5, $6)";
const TOKENS: &str =
    "SELECT id, name, role, project, created_us, last_used_us, revoked_us FROM tokens ORDER BY created_us";
/// In order: name.
const TOKEN_BY_NAME: &str =
    "SELECT id, name, role, project, created_us, last_used_us, revoked_us FROM tokens WHERE name = $1";
/// In order: hash.
const TOKEN_BY_HASH: &str =
    "SELECT id, name, role, project, created_us, last_used_us, revoked_us FROM tokens WHERE secret_hash = $1";
const ANY_TOKEN: &str = "SELECT EXISTS (SELECT 1 FROM tokens)";
/// In order: time, name.
const REVOKE_TOKEN: &str = "UPDATE tokens SET revoked_us = $1 WHERE name = $2 AND revoked_us IS NULL";
/// In order: time, id.
const TOUCH_TOKEN: &str = "UPDATE tokens SET last_used_us = $1 WHERE id = $2";
const PROJECTS: &str = "SELECT key, memory_caps FROM projects ORDER BY key";
/// $1 keys.
const EXISTING_PROJECTS: &str = "SELECT key FROM projects WHERE key = ANY($1)";
/// In order: id.
pub(super) const SESSION_PROJECT: &str = "SELECT project FROM sessions WHERE id = $1";
pub(super) const CHECKPOINT_PROJECT: &str = "SELECT project FROM checkpoints WHERE id = $1";
pub(super) const ENTRY_PROJECT: &str = "SELECT project FROM memory WHERE id = $1";
/// In order: project.
const HEAD_REVISION: &str = "SELECT head_revision FROM projects WHERE key = $1";
/// In order: time.
const PROJECTS_WITH_OLD_CHECKPOINTS: &str =
    "SELECT DISTINCT project FROM checkpoints WHERE created_us < $1 ORDER BY project";
const PRUNE_REQUESTS: &str = "DELETE FROM requests WHERE created_us < $1";
/// In order: project.
const PROJECT_HEAD: &str = "SELECT head_revision, events_from FROM projects WHERE key = $1";
const PROJECT_STATUSES: &str = "SELECT status, COUNT(*) FROM sessions WHERE project = $1 GROUP BY status";
const PROJECT_CHECKPOINTS: &str =
    "SELECT COUNT(*), CAST(COALESCE(SUM(size_bytes), 0) AS BIGINT) FROM checkpoints WHERE project = $1";
const PROJECT_CHUNKS: &str =
    "SELECT COUNT(*), CAST(COALESCE(SUM(size_bytes), 0) AS BIGINT) FROM chunks WHERE project = $1";
const PROJECT_MEMORY: &str = "SELECT COUNT(*) FROM memory WHERE project = $1";
const PROJECT_EVENTS: &str = "SELECT COUNT(*) FROM events WHERE project = $1";
const SESSION_COUNTS: &str = "SELECT status, COUNT(*) FROM sessions GROUP BY status";
/// In order: project, digest, data, size, created_us.
const PUT_CHUNK: &str = "INSERT INTO chunks (project, digest, data, size_bytes, created_us) VALUES ($1, $2, $3, $4, $5) \
     ON CONFLICT (project, digest) DO NOTHING";
/// In order: project, digest.
const CHUNK: &str = "SELECT data, size_bytes FROM chunks WHERE project = $1 AND digest = $2";
/// In order: caps, project.
const SET_CAPS_IF_NONE: &str = "UPDATE projects SET memory_caps = $1 WHERE key = $2 AND memory_caps = '{}'";

/// $1 after (id).
const UNSTAMPED: &str =
    "SELECT id FROM checkpoints WHERE state_digest IS NULL AND id > $1 ORDER BY id LIMIT 100";
/// $1 digest, $2 id.
const STAMP: &str = "UPDATE checkpoints SET state_digest = $1 WHERE id = $2 AND state_digest IS NULL";

impl PgStore {
    pub(super) async fn insert_token(&self, t: &TokenRow, hash: &str) -> Result<()> {
        let query = sqlx::query(INSERT_TOKEN).bind(&t.id).bind(&t.name).bind(&t.role).bind(&t.project);
        query.bind(hash).bind(t.created_us).execute(&self.pool).await?;
        Ok(())
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
        let done = sqlx::query(REVOKE_TOKEN).bind(now_us).bind(name).execute(&self.pool).await?;
        Ok(done.rows_affected() > 0)
    }

    pub(super) async fn token_used(&self, id: String, now_us: i64) -> Result<()> {
        sqlx::query(TOUCH_TOKEN).bind(now_us).bind(id).execute(&self.pool).await?;
        Ok(())
    }

    pub(super) async fn projects(&self) -> Result<Vec<(String, String)>> {
        Ok(sqlx::query_as(PROJECTS).fetch_all(&self.pool).await?)
    }

    pub(super) async fn existing(&self, keys: Vec<String>) -> Result<Vec<String>> {
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
        let done = sqlx::query(PRUNE_REQUESTS).bind(before_us).execute(&self.pool).await?;
        Ok(done.rows_affected())
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
        let query = sqlx::query_scalar(super::sql::MISSING_CHUNKS).bind(project).bind(digests);
        Ok(query.fetch_all(&self.pool).await?)
    }

    /// Stores chunks the project does not have; returns how many were new.
    pub(super) async fn store_chunks(
        &self,
        project: String,
        chunks: Vec<(String, Vec<u8>, i64)>,
        now_us: i64,
    ) -> Result<u64> {
        let mut stored = 0;
        for (digest, data, size) in chunks {
            let query = sqlx::query(PUT_CHUNK).bind(&project).bind(digest).bind(data).bind(size).bind(now_us);
            stored += query.execute(&self.pool).await?.rows_affected();
        }
        Ok(stored)
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
        // One transaction: the caps and the chunks of a batch go in together.
        let mut write = self.pool.begin().await?;
        if let Some(caps) = memory_caps {
            sqlx::query(SET_CAPS_IF_NONE).bind(caps).bind(&project).execute(&mut *write).await?;
        }
        let (mut imported, mut skipped) = (0, 0);
        for c in chunks {
            let query = sqlx::query(PUT_CHUNK).bind(&project).bind(c.digest).bind(c.data).bind(c.size_bytes);
            match query.bind(c.created_us).execute(&mut *write).await?.rows_affected() {
                1 => imported += 1,
                _ => skipped += 1,
            }
        }
        write.commit().await?;
        Ok((imported, skipped))
    }

    pub(super) async fn unstamped(&self, after: String) -> Result<Vec<String>> {
        Ok(sqlx::query_scalar(UNSTAMPED).bind(after).fetch_all(&self.pool).await?)
    }

    pub(super) async fn stamp(&self, id: String, digest: String) -> Result<()> {
        sqlx::query(STAMP).bind(digest).bind(id).execute(&self.pool).await?;
        Ok(())
    }
}
