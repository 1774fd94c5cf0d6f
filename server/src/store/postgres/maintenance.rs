//! Maintenance on Postgres: the statements of `model::Maintenance` (its reads are
//! `store::maintenance`'s), which a write's `Apply` runs one by one before the write function
//! (maintenance is rare: round trips do not count).

use sqlx::{PgConnection, Postgres};

use crate::error::Result;
use crate::store::model::Maintenance;

/// $1 project, $2 ids.
const DELETE_CHECKPOINTS: &str = "DELETE FROM checkpoints WHERE project = $1 AND id = ANY($2)";
/// $1 project, $2 session ids (checkpoints first: they refer to their session).
const DELETE_SESSION_CHECKPOINTS: &str =
    "DELETE FROM checkpoints WHERE project = $1 AND session_id = ANY($2)";
const DELETE_SESSIONS: &str = "DELETE FROM sessions WHERE project = $1 AND id = ANY($2)";
/// Deleted sessions' commit links and their fingerprints. $1 project, $2 sessions.
const DELETE_SESSION_LINKS: &str = "DELETE FROM commit_links WHERE project = $1 AND session_id = ANY($2)";
const DELETE_SESSION_LINES: &str = "DELETE FROM commit_lines WHERE project = $1 AND session_id = ANY($2)";
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
     blobs = $7, author = $8, state_digest = $9, metadata = $10, run_id = $11 WHERE project = $1 AND id = $2";
/// $1 project, $2 checkpoint, $3 task, $4 index, then the columns in order.
const MASK_WRITE: &str = "UPDATE pending_writes SET channel = $5, task_path = $6, value_type = $7, value = $8 \
     WHERE project = $1 AND checkpoint_id = $2 AND task_id = $3 AND idx = $4";
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
        Maintenance::DeleteSessions { ids } => {
            query(DELETE_SESSION_CHECKPOINTS).bind(ids.clone()).execute(&mut *conn).await?;
            query(DELETE_SESSION_LINKS).bind(ids.clone()).execute(&mut *conn).await?;
            query(DELETE_SESSION_LINES).bind(ids.clone()).execute(&mut *conn).await?;
            query(DELETE_SESSIONS).bind(ids)
        }
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
                .bind(c.metadata)
                .bind(c.run_id)
        }
        Maintenance::MaskWrite(p) => {
            let p = *p;
            let query = query(MASK_WRITE).bind(p.checkpoint_id).bind(p.task_id).bind(p.idx);
            query.bind(p.channel).bind(p.task_path).bind(p.value_type).bind(p.value)
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
