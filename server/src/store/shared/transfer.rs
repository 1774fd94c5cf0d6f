// Export and import: pages of rows out; batches of lines in, each one write under the
// project lock with one event per imported record (revisions renumbered, ids kept).

use crate::store::transfer::{ChunkLine, CheckpointLine, Cursor, Line, MemoryLine, RecordLine, SessionLine, Table};

const SESSION_COLUMNS: &str = "id, agent, agent_session_id, host, user_name, cwd, branch, goal, status, lease_ttl_ms, last_seen_us, \
     head_checkpoint_id, git_base, git_head, summary, tool_count, resumed_from, resumed_by, metadata, created_us, updated_us, \
     written_us, author, head_written_us, head_author";
const CHECKPOINT_COLUMNS: &str = "id, session_id, parent_id, kind, reason, state, payload, payload_content_type, compression, \
     size_bytes, digest, created_us, author, blobs";

impl Backend {
    /// Up to `limit` rows of a table after `after`, and the cursor past them (None at the end).
    pub(crate) async fn do_export_page(&self, project: String, table: Table, after: Cursor, limit: i64) -> Result<(Vec<Line>, Option<Cursor>)> {
        let mut conn = self.pool.acquire().await?;
        // A page that ended on its bytes rather than its count.
        let mut cut_short = false;
        let (lines, next): (Vec<Line>, Option<Cursor>) = match table {
            Table::Chunks => {
                let rows: Vec<ChunkLine> = sqlx::query_as("SELECT digest, data, size_bytes, created_us FROM chunks WHERE project = $1 AND digest > $2 ORDER BY digest LIMIT $3")
                    .bind(&project).bind(&after.key).bind(limit).fetch_all(&mut *conn).await?;
                let next = rows.last().map(|r| Cursor { key: r.digest.clone(), ..Cursor::default() });
                (rows.into_iter().map(Line::Chunk).collect(), next)
            }
            Table::Sessions => {
                let rows: Vec<SessionLine> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
                    "SELECT {SESSION_COLUMNS} FROM sessions WHERE project = $1 AND id > $2 ORDER BY id LIMIT $3"
                )))
                .bind(&project).bind(&after.key).bind(limit).fetch_all(&mut *conn).await?;
                let next = rows.last().map(|r| Cursor { key: r.id.clone(), ..Cursor::default() });
                (rows.into_iter().map(|r| Line::Session(Box::new(r))).collect(), next)
            }
            Table::Checkpoints => {
                // Checkpoints may be megabytes each: a page ends within EXPORT_BYTES of stored
                // content (sizes read first), however many rows that is.
                const EXPORT_BYTES: usize = 64 * 1024 * 1024;
                let sizes: Vec<(i64, i64)> = sqlx::query_as(
                    "SELECT revision, CAST(length(state) + length(payload) AS BIGINT) FROM checkpoints \
                     WHERE project = $1 AND revision > $2 ORDER BY revision LIMIT $3",
                )
                .bind(&project).bind(after.n).bind(limit).fetch_all(&mut *conn).await?;
                let mut page = crate::core::page::Budget::with_bytes(limit, EXPORT_BYTES);
                let taken = sizes.iter().take_while(|(_, n)| page.take(usize::try_from(*n).unwrap_or(usize::MAX))).count();
                let count = i64::try_from(taken).unwrap_or(limit);
                cut_short = taken < sizes.len();
                // By revision: a parent is always older than its children.
                let rows: Vec<(i64, CheckpointLine)> = sqlx::query_as::<_, CheckpointWithRevision>(sqlx::AssertSqlSafe(format!(
                    "SELECT revision, {CHECKPOINT_COLUMNS} FROM checkpoints WHERE project = $1 AND revision > $2 ORDER BY revision LIMIT $3"
                )))
                .bind(&project).bind(after.n).bind(count).fetch_all(&mut *conn).await?
                .into_iter().map(|r| (r.revision, r.line)).collect();
                let next = rows.last().map(|(revision, _)| Cursor { n: *revision, ..Cursor::default() });
                (rows.into_iter().map(|(_, r)| Line::Checkpoint(Box::new(r))).collect(), next)
            }
            Table::Memory => {
                let rows: Vec<MemoryWithPosition> = sqlx::query_as(
                    "SELECT revision, id, category, branch, key, record, content, rationale, author, seq, created_us, evicted FROM memory \
                     WHERE project = $1 AND (revision > $2 OR (revision = $2 AND seq > $3)) ORDER BY revision, seq LIMIT $4",
                )
                .bind(&project).bind(after.n).bind(after.m).bind(limit).fetch_all(&mut *conn).await?;
                let next = rows.last().map(|r| Cursor { n: r.revision, m: r.line.seq, ..Cursor::default() });
                (rows.into_iter().map(|r| Line::Memory(r.line)).collect(), next)
            }
            Table::Records => {
                let rows: Vec<RecordLine> = sqlx::query_as("SELECT record, written_us, author FROM records WHERE project = $1 AND record > $2 ORDER BY record LIMIT $3")
                    .bind(&project).bind(&after.key).bind(limit).fetch_all(&mut *conn).await?;
                let next = rows.last().map(|r| Cursor { key: r.record.clone(), ..Cursor::default() });
                (rows.into_iter().map(Line::Record).collect(), next)
            }
        };
        let next = if (lines.len() as i64) < limit && !cut_short { None } else { next };
        Ok((lines, next))
    }
}

#[derive(sqlx::FromRow)]
struct CheckpointWithRevision {
    revision: i64,
    #[sqlx(flatten)]
    line: CheckpointLine,
}

#[derive(sqlx::FromRow)]
struct MemoryWithPosition {
    revision: i64,
    #[sqlx(flatten)]
    line: MemoryLine,
}
