//! Maintenance on SQLite: the reads of `MaintenanceTx` and the statements of
//! `model::Maintenance`, sent with the write's other changes. Values are bound in the order
//! their `?` appear.

use super::write::{SqliteTx, Statements};
use crate::error::Result;
use crate::store::maintenance::{EntryText, MaintenanceTx, Table};
use crate::store::model::{Maintenance, Session};
use crate::store::sql::{CHECKPOINT_PROJECT, ENTRY_PROJECT, SESSION_PROJECT};

/// Binds: project, after id, limit.
const SESSIONS_AFTER: &str = concat!(
    "SELECT ",
    crate::store::rows::session_columns!(),
    " FROM sessions WHERE project = ? AND id > ? ORDER BY id LIMIT ?"
);
const CHECKPOINTS_AFTER: &str = concat!(
    "SELECT ",
    crate::store::rows::checkpoint_light_columns!(),
    " FROM checkpoints WHERE project = ? AND id > ? ORDER BY id LIMIT ?"
);
const ENTRIES_AFTER: &str =
    concat!(crate::store::rows::entry_columns!(), " WHERE m.project = ? AND m.id > ? ORDER BY m.id LIMIT ?");
/// Binds: project.
const CHECKPOINT_TREE: &str = "SELECT id, parent_id, created_us FROM checkpoints WHERE project = ?";
const SESSION_HEADS: &str =
    "SELECT head_checkpoint_id FROM sessions WHERE project = ? AND head_checkpoint_id IS NOT NULL";
const CHECKPOINT_BLOBS: &str = "SELECT id, blobs FROM checkpoints WHERE project = ? AND length(blobs) > 0";
const EVENTS_FROM: &str = "SELECT events_from FROM projects WHERE key = ?";
const ENTRY_TEXTS: &str = "SELECT id, content, rationale, author FROM memory WHERE project = ?";
const RECORD_AUTHORS: &str = "SELECT record, author FROM records WHERE project = ?";
const CHUNKS: &str = "SELECT digest, data FROM chunks WHERE project = ?";
const EVENT_BODIES: &str = "SELECT revision, body FROM events WHERE project = ?";
const CONFLICT_BODIES: &str = "SELECT id, body FROM conflicts WHERE project = ?";
const REPLIES: &str = "SELECT request_id, reply FROM requests WHERE project = ?";
/// Binds: project, revision.
const EVENTS_BELOW: &str = "SELECT COUNT(*) FROM events WHERE project = ? AND revision < ?";
/// Binds: project, time.
const CHUNKS_BEFORE: &str = "SELECT digest FROM chunks WHERE project = ? AND created_us < ?";
/// Binds: project, digest.
const CHUNK: &str = "SELECT data FROM chunks WHERE project = ? AND digest = ?";
/// Binds: project, record, project, record.
const RECORD_REVISIONS: &str = "SELECT (SELECT revision FROM records WHERE project = ? AND record = ?), \
     (SELECT MAX(revision) FROM memory WHERE project = ? AND record = ?)";

impl MaintenanceTx for SqliteTx {
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
        let query = sqlx::query_as(RECORD_REVISIONS)
            .bind(&self.project)
            .bind(record)
            .bind(&self.project)
            .bind(record);
        Ok(query.fetch_one(&mut *self.conn).await?)
    }
}

/// Binds: project, id.
const DELETE_CHECKPOINT: &str = "DELETE FROM checkpoints WHERE project = ? AND id = ?";
/// Binds: parent, project, id.
const SET_PARENT: &str = "UPDATE checkpoints SET parent_id = ? WHERE project = ? AND id = ?";
/// Binds: project, digest, data, size, created_us.
const PUT_CHUNK: &str = "INSERT INTO chunks (project, digest, data, size_bytes, created_us) VALUES (?, ?, ?, ?, ?) \
     ON CONFLICT (project, digest) DO NOTHING";
/// Binds: project, digest.
const DELETE_CHUNK: &str = "DELETE FROM chunks WHERE project = ? AND digest = ?";
/// Binds: project, revision; then revision, project.
const DELETE_EVENTS_BELOW: &str = "DELETE FROM events WHERE project = ? AND revision < ?";
const SET_EVENTS_FROM: &str = "UPDATE projects SET events_from = ? WHERE key = ?";
/// Binds: the columns in order, project, id.
const MASK_SESSION: &str = "UPDATE sessions SET agent_session_id = ?, host = ?, user_name = ?, cwd = ?, \
     branch = ?, goal = ?, summary = ?, metadata = ?, author = ?, head_author = ? WHERE project = ? AND id = ?";
const MASK_CHECKPOINT: &str = "UPDATE checkpoints SET reason = ?, state = ?, payload = ?, digest = ?, \
     blobs = ?, author = ?, state_digest = ? WHERE project = ? AND id = ?";
const MASK_ENTRY: &str =
    "UPDATE memory SET content = ?, rationale = ?, author = ? WHERE project = ? AND id = ?";
/// Binds: the value, project, key.
const SET_RECORD_AUTHOR: &str = "UPDATE records SET author = ? WHERE project = ? AND record = ?";
const SET_EVENT_BODY: &str = "UPDATE events SET body = ? WHERE project = ? AND revision = ?";
const SET_CONFLICT_BODY: &str = "UPDATE conflicts SET body = ? WHERE project = ? AND id = ?";
const SET_REPLY: &str = "UPDATE requests SET reply = ? WHERE project = ? AND request_id = ?";

/// The statements of a maintenance change.
pub(super) fn push(query: &mut Statements, project: &str, change: &Maintenance) {
    match change {
        Maintenance::DeleteCheckpoints { ids } => {
            for id in ids {
                query.push(DELETE_CHECKPOINT).bind(project).bind(id.as_str());
            }
        }
        Maintenance::SetParent { checkpoint, parent } => {
            query.push(SET_PARENT).bind(parent.as_deref()).bind(project).bind(checkpoint.as_str());
        }
        Maintenance::PutChunk { digest, data, size_bytes, created_us } => {
            query.push(PUT_CHUNK).bind(project).bind(digest.as_str()).bind(data.as_slice());
            query.bind(*size_bytes).bind(*created_us);
        }
        Maintenance::DeleteChunks { digests } => {
            for digest in digests {
                query.push(DELETE_CHUNK).bind(project).bind(digest.as_str());
            }
        }
        Maintenance::CompactEvents { below } => {
            query.push(DELETE_EVENTS_BELOW).bind(project).bind(*below);
            query.push(SET_EVENTS_FROM).bind(*below).bind(project);
        }
        Maintenance::MaskSession(s) => {
            query.push(MASK_SESSION).bind(s.agent_session_id.as_str()).bind(s.host.as_str());
            query
                .bind(s.user_name.as_str())
                .bind(s.cwd.as_str())
                .bind(s.branch.as_str())
                .bind(s.goal.as_str());
            query.bind(s.summary.as_str()).bind(s.metadata.as_str()).bind(s.author.as_slice());
            query.bind(s.head_author.as_slice()).bind(project).bind(s.id.as_str());
        }
        Maintenance::MaskCheckpoint(c) => {
            query
                .push(MASK_CHECKPOINT)
                .bind(c.reason.as_str())
                .bind(c.state.as_slice())
                .bind(c.payload.as_slice());
            query.bind(c.digest.as_str()).bind(c.blobs.as_slice()).bind(c.author.as_slice());
            query.bind(c.state_digest.as_deref()).bind(project).bind(c.id.as_str());
        }
        Maintenance::MaskEntry { id, content, rationale, author } => {
            query.push(MASK_ENTRY).bind(content.as_str()).bind(rationale.as_str()).bind(author.as_slice());
            query.bind(project).bind(id.as_str());
        }
        Maintenance::SetRecordAuthor { record, author } => {
            query.push(SET_RECORD_AUTHOR).bind(author.as_slice()).bind(project).bind(record.as_str());
        }
        Maintenance::SetEventBody { revision, body } => {
            query.push(SET_EVENT_BODY).bind(body.as_slice()).bind(project).bind(*revision);
        }
        Maintenance::SetConflictBody { id, body } => {
            query.push(SET_CONFLICT_BODY).bind(body.as_slice()).bind(project).bind(id.as_str());
        }
        Maintenance::SetReply { request_id, reply } => {
            query.push(SET_REPLY).bind(reply.as_slice()).bind(project).bind(request_id.as_str());
        }
        Maintenance::SearchBackfilled => {
            query.push(SEARCH_BACKFILLED).bind(project);
        }
    }
}

/// Binds: project.
const SEARCH_BACKFILLED: &str = "DELETE FROM search_backfill WHERE project = ?";
