//! Export reads on Postgres (`service::export`): one table's rows after a keyset cursor.

use super::PgStore;
use crate::error::Result;
use crate::store::transfer::{
    CheckpointLine, ChunkLine, Cursor, Line, MemoryLine, RecordLine, SessionLine, Table,
};

/// $1 project, $2 after (digest), $3 limit.
const CHUNKS: &str = "SELECT digest, data, size_bytes, created_us FROM chunks WHERE project = $1 AND digest > $2 \
     ORDER BY digest LIMIT $3";
/// $1 project, $2 after (id), $3 limit.
const SESSIONS: &str = "SELECT id, agent, agent_session_id, host, user_name, cwd, branch, goal, status, \
     lease_ttl_ms, last_seen_us, head_checkpoint_id, git_base, git_head, summary, tool_count, resumed_from, \
     resumed_by, metadata, created_us, updated_us, written_us, author, head_written_us, head_author FROM sessions \
     WHERE project = $1 AND id > $2 ORDER BY id LIMIT $3";
/// By revision: a parent is always older than its children. $1 project, $2 after
/// (revision), $3 limit.
const CHECKPOINT_SIZES: &str = "SELECT CAST(length(state) + length(payload) AS BIGINT) FROM checkpoints \
     WHERE project = $1 AND revision > $2 ORDER BY revision LIMIT $3";
const CHECKPOINTS: &str = "SELECT revision, id, session_id, parent_id, kind, reason, state, payload, \
     payload_content_type, compression, size_bytes, digest, created_us, author, blobs FROM checkpoints \
     WHERE project = $1 AND revision > $2 ORDER BY revision LIMIT $3";
/// $1 project, $2 after (revision), $3 after (seq), $4 limit.
const MEMORY: &str = "SELECT revision, id, category, branch, key, record, content, rationale, author, seq, \
     created_us, evicted FROM memory WHERE project = $1 AND (revision > $2 OR (revision = $2 AND seq > $3)) \
     ORDER BY revision, seq LIMIT $4";
/// $1 project, $2 after (record), $3 limit.
const RECORDS: &str = "SELECT record, written_us, author FROM records WHERE project = $1 AND record > $2 ORDER BY record LIMIT $3";

/// A checkpoint or memory line with the revision its cursor holds.
#[derive(sqlx::FromRow)]
struct WithRevision<T> {
    revision: i64,
    #[sqlx(flatten)]
    line: T,
}

impl PgStore {
    pub(super) async fn export_sizes(&self, project: String, after: i64, limit: i64) -> Result<Vec<i64>> {
        let query = sqlx::query_scalar(CHECKPOINT_SIZES).bind(project).bind(after).bind(limit);
        Ok(query.fetch_all(&self.pool).await?)
    }

    pub(super) async fn export(
        &self,
        project: String,
        table: Table,
        after: Cursor,
        limit: i64,
    ) -> Result<Vec<(Cursor, Line)>> {
        let key = |key: &str| Cursor { key: key.to_owned(), ..Cursor::default() };
        Ok(match table {
            Table::Chunks => {
                let query = sqlx::query_as::<_, ChunkLine>(CHUNKS).bind(project).bind(after.key).bind(limit);
                query
                    .fetch_all(&self.pool)
                    .await?
                    .into_iter()
                    .map(|c| (key(&c.digest), Line::Chunk(c)))
                    .collect()
            }
            Table::Sessions => {
                let query =
                    sqlx::query_as::<_, SessionLine>(SESSIONS).bind(project).bind(after.key).bind(limit);
                let rows = query.fetch_all(&self.pool).await?;
                rows.into_iter().map(|s| (key(&s.id), Line::Session(Box::new(s)))).collect()
            }
            Table::Checkpoints => {
                let query = sqlx::query_as::<_, WithRevision<CheckpointLine>>(CHECKPOINTS);
                let rows = query.bind(project).bind(after.n).bind(limit).fetch_all(&self.pool).await?;
                let cursor = |n| Cursor { n, ..Cursor::default() };
                rows.into_iter().map(|r| (cursor(r.revision), Line::Checkpoint(Box::new(r.line)))).collect()
            }
            Table::Memory => {
                let query = sqlx::query_as::<_, WithRevision<MemoryLine>>(MEMORY).bind(project).bind(after.n);
                let rows = query.bind(after.m).bind(limit).fetch_all(&self.pool).await?;
                let cursor = |n, m| Cursor { n, m, ..Cursor::default() };
                rows.into_iter().map(|r| (cursor(r.revision, r.line.seq), Line::Memory(r.line))).collect()
            }
            Table::Records => {
                let query =
                    sqlx::query_as::<_, RecordLine>(RECORDS).bind(project).bind(after.key).bind(limit);
                query
                    .fetch_all(&self.pool)
                    .await?
                    .into_iter()
                    .map(|r| (key(&r.record), Line::Record(r)))
                    .collect()
            }
        })
    }
}
