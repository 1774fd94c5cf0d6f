//! Maintenance on SQLite: the statements of `model::Maintenance` (its reads are
//! `store::maintenance`'s), sent with the write's other changes. Values are bound in the order
//! their `?` appear.

use super::write::Statements;
use crate::store::model::{Checkpoint, Maintenance, PendingWrite};

/// Binds: project, id.
const DELETE_CHECKPOINT: &str = "DELETE FROM checkpoints WHERE project = ? AND id = ?";
/// Binds: project, session id (checkpoints first: they refer to their session).
const DELETE_SESSION_CHECKPOINTS: &str = "DELETE FROM checkpoints WHERE project = ? AND session_id = ?";
const DELETE_SESSION: &str = "DELETE FROM sessions WHERE project = ? AND id = ?";
/// A deleted session's commit links and their fingerprints. Binds: project, session.
const DELETE_SESSION_LINKS: &str = "DELETE FROM commit_links WHERE project = ? AND session_id = ?";
const DELETE_SESSION_LINES: &str = "DELETE FROM commit_lines WHERE project = ? AND session_id = ?";
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
     blobs = ?, author = ?, state_digest = ?, metadata = ?, run_id = ? WHERE project = ? AND id = ?";
/// Binds: channel, task path, value type, value, project, checkpoint, task, index.
const MASK_WRITE: &str = "UPDATE pending_writes SET channel = ?, task_path = ?, value_type = ?, value = ? \
     WHERE project = ? AND checkpoint_id = ? AND task_id = ? AND idx = ?";
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
        Maintenance::DeleteSessions { ids } => {
            for id in ids {
                query.push(DELETE_SESSION_CHECKPOINTS).bind(project).bind(id.as_str());
                query.push(DELETE_SESSION_LINKS).bind(project).bind(id.as_str());
                query.push(DELETE_SESSION_LINES).bind(project).bind(id.as_str());
                query.push(DELETE_SESSION).bind(project).bind(id.as_str());
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
        Maintenance::MaskCheckpoint(c) => push_mask_checkpoint(query, project, c),
        Maintenance::MaskWrite(p) => push_mask_write(query, project, p),
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

fn push_mask_checkpoint(query: &mut Statements, project: &str, c: &Checkpoint) {
    query.push(MASK_CHECKPOINT).bind(c.reason.as_str()).bind(c.state.as_slice()).bind(c.payload.as_slice());
    query.bind(c.digest.as_str()).bind(c.blobs.as_slice()).bind(c.author.as_slice());
    query.bind(c.state_digest.as_deref()).bind(c.metadata.as_deref()).bind(c.run_id.as_deref());
    query.bind(project).bind(c.id.as_str());
}

fn push_mask_write(query: &mut Statements, project: &str, p: &PendingWrite) {
    query.push(MASK_WRITE).bind(p.channel.as_str()).bind(p.task_path.as_str()).bind(p.value_type.as_str());
    query.bind(p.value.as_slice()).bind(project).bind(p.checkpoint_id.as_str()).bind(p.task_id.as_str());
    query.bind(p.idx);
}

/// Binds: project.
const SEARCH_BACKFILLED: &str = "DELETE FROM search_backfill WHERE project = ?";
