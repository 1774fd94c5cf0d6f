//! Maintenance on Postgres: the reads of `MaintenanceTx`, and the statements of
//! `model::Maintenance`, which a write's `Apply` runs one by one before the write function
//! (maintenance is rare: round trips do not count).

use sqlx::{PgConnection, Postgres};

use super::write::PgTx;
use crate::error::Result;
use crate::store::maintenance::{EntryText, MaintenanceTx, Table};
use crate::store::model::{Maintenance, Session};
use crate::store::sql::{CHECKPOINT_PROJECT, ENTRY_PROJECT, SESSION_PROJECT};

/// Binds: project, after id, limit.
const SESSIONS_AFTER: &str = concat!(
    "SELECT ",
    crate::store::rows::session_columns!(),
    " FROM sessions WHERE project = $1 AND id > $2 ORDER BY id LIMIT $3"
);
const CHECKPOINTS_AFTER: &str = concat!(
    "SELECT ",
    crate::store::rows::checkpoint_light_columns!(),
    " FROM checkpoints WHERE project = $1 AND id > $2 ORDER BY id LIMIT $3"
);
const ENTRIES_AFTER: &str = concat!(
    crate::store::rows::entry_columns!(),
    " WHERE m.project = $1 AND m.id > $2 ORDER BY m.id LIMIT $3"
);
/// $1 project.
const CHECKPOINT_TREE: &str = "SELECT id, parent_id, created_us FROM checkpoints WHERE project = $1";
const SESSION_HEADS: &str =
    "SELECT head_checkpoint_id FROM sessions WHERE project = $1 AND head_checkpoint_id IS NOT NULL";
const CHECKPOINT_BLOBS: &str = "SELECT id, blobs FROM checkpoints WHERE project = $1 AND length(blobs) > 0";
const EVENTS_FROM: &str = "SELECT events_from FROM projects WHERE key = $1";
const ENTRY_TEXTS: &str = "SELECT id, content, rationale, author FROM memory WHERE project = $1";
const RECORD_AUTHORS: &str = "SELECT record, author FROM records WHERE project = $1";
const CHUNKS: &str = "SELECT digest, data FROM chunks WHERE project = $1";
const EVENT_BODIES: &str = "SELECT revision, body FROM events WHERE project = $1";
const CONFLICT_BODIES: &str = "SELECT id, body FROM conflicts WHERE project = $1";
const REPLIES: &str = "SELECT request_id, reply FROM requests WHERE project = $1";
/// $1 project, $2 revision.
const EVENTS_BELOW: &str = "SELECT COUNT(*) FROM events WHERE project = $1 AND revision < $2";
/// $1 project, $2 time.
const CHUNKS_BEFORE: &str = "SELECT digest FROM chunks WHERE project = $1 AND created_us < $2";
/// $1 project, $2 digest.
const CHUNK: &str = "SELECT data FROM chunks WHERE project = $1 AND digest = $2";
/// $1 project, $2 record.
const RECORD_REVISIONS: &str = "SELECT (SELECT revision FROM records WHERE project = $1 AND record = $2), \
     (SELECT MAX(revision) FROM memory WHERE project = $1 AND record = $2)";

impl MaintenanceTx for PgTx {
    async fn checkpoint_tree(&mut self) -> Result<Vec<(String, Option<String>, i64)>> {
        Ok(sqlx::query_as(CHECKPOINT_TREE).bind(&self.project).fetch_all(&mut *self.conn).await?)
    }

    async fn session_heads(&mut self) -> Result<Vec<String>> {
        Ok(sqlx::query_scalar(SESSION_HEADS).bind(&self.project).fetch_all(&mut *self.conn).await?)
    }

    async fn checkpoint_blobs(&mut self) -> Result<Vec<(String, Vec<u8>)>> {
        Ok(sqlx::query_as(CHECKPOINT_BLOBS).bind(&self.project).fetch_all(&mut *self.conn).await?)
    }

    async fn chunks_before(&mut self, before_us: i64) -> Result<Vec<String>> {
        let query = sqlx::query_scalar(CHUNKS_BEFORE).bind(&self.project).bind(before_us);
        Ok(query.fetch_all(&mut *self.conn).await?)
    }

    async fn events_from(&mut self) -> Result<i64> {
        Ok(sqlx::query_scalar(EVENTS_FROM).bind(&self.project).fetch_one(&mut *self.conn).await?)
    }

    async fn events_below(&mut self, revision: i64) -> Result<i64> {
        let query = sqlx::query_scalar(EVENTS_BELOW).bind(&self.project).bind(revision);
        Ok(query.fetch_one(&mut *self.conn).await?)
    }

    async fn sessions(&mut self) -> Result<Vec<Session>> {
        Ok(sqlx::query_as(super::sql::PROJECT_SESSIONS)
            .bind(&self.project)
            .fetch_all(&mut *self.conn)
            .await?)
    }

    async fn entry_texts(&mut self) -> Result<Vec<EntryText>> {
        Ok(sqlx::query_as(ENTRY_TEXTS).bind(&self.project).fetch_all(&mut *self.conn).await?)
    }

    async fn record_authors(&mut self) -> Result<Vec<(String, Vec<u8>)>> {
        Ok(sqlx::query_as(RECORD_AUTHORS).bind(&self.project).fetch_all(&mut *self.conn).await?)
    }

    async fn chunk(&mut self, digest: &str) -> Result<Option<Vec<u8>>> {
        let query = sqlx::query_scalar(CHUNK).bind(&self.project).bind(digest);
        Ok(query.fetch_optional(&mut *self.conn).await?)
    }

    async fn chunks(&mut self) -> Result<Vec<(String, Vec<u8>)>> {
        Ok(sqlx::query_as(CHUNKS).bind(&self.project).fetch_all(&mut *self.conn).await?)
    }

    async fn event_bodies(&mut self) -> Result<Vec<(i64, Vec<u8>)>> {
        Ok(sqlx::query_as(EVENT_BODIES).bind(&self.project).fetch_all(&mut *self.conn).await?)
    }

    async fn conflict_bodies(&mut self) -> Result<Vec<(String, Vec<u8>)>> {
        Ok(sqlx::query_as(CONFLICT_BODIES).bind(&self.project).fetch_all(&mut *self.conn).await?)
    }

    async fn replies(&mut self) -> Result<Vec<(String, Vec<u8>)>> {
        Ok(sqlx::query_as(REPLIES).bind(&self.project).fetch_all(&mut *self.conn).await?)
    }

    async fn owner(&mut self, table: Table, id: &str) -> Result<Option<String>> {
        let sql = match table {
            Table::Sessions => SESSION_PROJECT,
            Table::Checkpoints => CHECKPOINT_PROJECT,
            Table::Memory => ENTRY_PROJECT,
        };
        Ok(sqlx::query_scalar(sql).bind(id).fetch_optional(&mut *self.conn).await?)
    }

    async fn sessions_after(&mut self, after: &str, limit: i64) -> Result<Vec<Session>> {
        let query = sqlx::query_as(SESSIONS_AFTER).bind(&self.project).bind(after).bind(limit);
        Ok(query.fetch_all(&mut *self.conn).await?)
    }

    async fn checkpoints_after(
        &mut self,
        after: &str,
        limit: i64,
    ) -> Result<Vec<crate::store::model::Checkpoint>> {
        let query = sqlx::query_as(CHECKPOINTS_AFTER).bind(&self.project).bind(after).bind(limit);
        Ok(query.fetch_all(&mut *self.conn).await?)
    }

    async fn entries_after(&mut self, after: &str, limit: i64) -> Result<Vec<crate::store::rows::MemoryRow>> {
        let query = sqlx::query_as(ENTRIES_AFTER).bind(&self.project).bind(after).bind(limit);
        Ok(query.fetch_all(&mut *self.conn).await?)
    }

    async fn record_revisions(&mut self, record: &str) -> Result<(Option<i64>, Option<i64>)> {
        let query = sqlx::query_as(RECORD_REVISIONS).bind(&self.project).bind(record);
        Ok(query.fetch_one(&mut *self.conn).await?)
    }
}

/// $1 project, $2 ids.
const DELETE_CHECKPOINTS: &str = "DELETE FROM checkpoints WHERE project = $1 AND id = ANY($2)";
/// $1 project, $2 id, $3 parent.
const SET_PARENT: &str = "UPDATE checkpoints SET parent_id = $3 WHERE project = $1 AND id = $2";
/// $1 project, $2 digest, $3 data, $4 size, $5 created_us.
const PUT_CHUNK: &str = "INSERT INTO chunks (project, digest, data, size_bytes, created_us) \
     VALUES ($1, $2, $3, $4, $5) ON CONFLICT (project, digest) DO NOTHING";
/// $1 project, $2 digests.
const DELETE_CHUNKS: &str = "DELETE FROM chunks WHERE project = $1 AND digest = ANY($2)";
/// $1 project, $2 revision.
const DELETE_EVENTS_BELOW: &str = "DELETE FROM events WHERE project = $1 AND revision < $2";
const SET_EVENTS_FROM: &str = "UPDATE projects SET events_from = $2 WHERE key = $1";
/// $1 project, $2 id, then the columns in order.
const MASK_SESSION: &str = "UPDATE sessions SET agent_session_id = $3, host = $4, user_name = $5, cwd = $6, \
     branch = $7, goal = $8, summary = $9, metadata = $10, author = $11, head_author = $12 \
     WHERE project = $1 AND id = $2";
const MASK_CHECKPOINT: &str = "UPDATE checkpoints SET reason = $3, state = $4, payload = $5, digest = $6, \
     blobs = $7, author = $8, state_digest = $9 WHERE project = $1 AND id = $2";
const MASK_ENTRY: &str =
    "UPDATE memory SET content = $3, rationale = $4, author = $5 WHERE project = $1 AND id = $2";
/// $1 project, $2 key, $3 the value.
const SET_RECORD_AUTHOR: &str = "UPDATE records SET author = $3 WHERE project = $1 AND record = $2";
const SET_EVENT_BODY: &str = "UPDATE events SET body = $3 WHERE project = $1 AND revision = $2";
const SET_CONFLICT_BODY: &str = "UPDATE conflicts SET body = $3 WHERE project = $1 AND id = $2";
const SET_REPLY: &str = "UPDATE requests SET reply = $3 WHERE project = $1 AND request_id = $2";

/// $1 project.
const SEARCH_BACKFILLED: &str = "DELETE FROM search_backfill WHERE project = $1";

/// Runs the statements of a maintenance change.
pub(super) async fn run(
    conn: &mut PgConnection,
    project: &str,
    change: Maintenance,
) -> Result<(), sqlx::Error> {
    let query = |sql: &'static str| sqlx::query::<Postgres>(sql).bind(project.to_owned());
    let query = match change {
        Maintenance::DeleteCheckpoints { ids } => query(DELETE_CHECKPOINTS).bind(ids),
        Maintenance::SetParent { checkpoint, parent } => query(SET_PARENT).bind(checkpoint).bind(parent),
        Maintenance::PutChunk { digest, data, size_bytes, created_us } => {
            query(PUT_CHUNK).bind(digest).bind(data).bind(size_bytes).bind(created_us)
        }
        Maintenance::DeleteChunks { digests } => query(DELETE_CHUNKS).bind(digests),
        Maintenance::CompactEvents { below } => {
            query(DELETE_EVENTS_BELOW).bind(below).execute(&mut *conn).await?;
            query(SET_EVENTS_FROM).bind(below)
        }
        Maintenance::MaskSession(s) => {
            let s = *s;
            query(MASK_SESSION)
                .bind(s.id)
                .bind(s.agent_session_id)
                .bind(s.host)
                .bind(s.user_name)
                .bind(s.cwd)
                .bind(s.branch)
                .bind(s.goal)
                .bind(s.summary)
                .bind(s.metadata)
                .bind(s.author)
                .bind(s.head_author)
        }
        Maintenance::MaskCheckpoint(c) => {
            let c = *c;
            query(MASK_CHECKPOINT)
                .bind(c.id)
                .bind(c.reason)
                .bind(c.state)
                .bind(c.payload)
                .bind(c.digest)
                .bind(c.blobs)
                .bind(c.author)
                .bind(c.state_digest)
        }
        Maintenance::MaskEntry { id, content, rationale, author } => {
            query(MASK_ENTRY).bind(id).bind(content).bind(rationale).bind(author)
        }
        Maintenance::SetRecordAuthor { record, author } => query(SET_RECORD_AUTHOR).bind(record).bind(author),
        Maintenance::SetEventBody { revision, body } => query(SET_EVENT_BODY).bind(revision).bind(body),
        Maintenance::SetConflictBody { id, body } => query(SET_CONFLICT_BODY).bind(id).bind(body),
        Maintenance::SetReply { request_id, reply } => query(SET_REPLY).bind(request_id).bind(reply),
        Maintenance::SearchBackfilled => query(SEARCH_BACKFILLED),
    };
    query.execute(conn).await.map(drop)
}
