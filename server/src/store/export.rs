//! Export reads (`service::export`), one text for both backends: one table's rows after a
//! keyset cursor.

use sqlx::{Database, Encode, Executor, FromRow, IntoArguments, Pool, Type};

use crate::error::Result;
use crate::store::rows::checkpoint_columns;
use crate::store::transfer::{
    CheckpointLine, ChunkLine, CommitLinkLine, Cursor, ItemLine, ItemLogLine, Line, MemoryLine, RecordLine,
    SessionLine, Table, WriteLine,
};

/// $1 project, $2 after (digest), $3 limit.
const CHUNKS: &str = "SELECT digest, data, size_bytes, created_us FROM chunks WHERE project = $1 \
     AND digest > $2 ORDER BY digest LIMIT $3";
/// $1 project, $2 after (id), $3 limit.
const SESSIONS: &str = concat!(
    "SELECT ",
    crate::store::rows::session_columns!(),
    " FROM sessions WHERE project = $1 AND id > $2 ORDER BY id LIMIT $3"
);
/// By revision: a parent is always older than its children. $1 project, $2 after
/// (revision), $3 limit.
const CHECKPOINT_SIZES: &str = "SELECT CAST(length(state) + length(payload) AS BIGINT) FROM checkpoints \
     WHERE project = $1 AND revision > $2 ORDER BY revision LIMIT $3";
const CHECKPOINTS: &str = concat!(
    "SELECT ",
    checkpoint_columns!(),
    " FROM checkpoints WHERE project = $1 AND revision > $2 ORDER BY revision LIMIT $3"
);
/// $1 project, $2 after (revision), $3 after (seq), $4 limit.
const MEMORY: &str = "SELECT revision, id, category, branch, key, record, content, rationale, author, seq, \
     created_us, evicted FROM memory WHERE project = $1 AND (revision > $2 OR (revision = $2 AND seq > $3)) \
     ORDER BY revision, seq LIMIT $4";
/// By (checkpoint, task, index). $1 project, $2–$4 after (checkpoint, task, index), $5 limit.
const WRITES: &str = "SELECT checkpoint_id, task_id, idx, channel, task_path, value_type, value FROM pending_writes \
     WHERE project = $1 AND (checkpoint_id > $2 OR (checkpoint_id = $2 AND (task_id > $3 OR (task_id = $3 \
     AND idx > $4)))) ORDER BY checkpoint_id, task_id, idx LIMIT $5";
/// $1 project, $2 after (key), $3 limit.
const ITEM_LOGS: &str = "SELECT key, created_us, updated_us, author, summary, summary_us FROM item_logs \
     WHERE project = $1 AND key > $2 ORDER BY key LIMIT $3";
/// By (log key, seq). $1 project, $2 after (log key), $3 after (seq), $4 limit.
const ITEMS: &str = "SELECT log_key, seq, item_key, content_type, value, created_us FROM items \
     WHERE project = $1 AND (log_key > $2 OR (log_key = $2 AND seq > $3)) ORDER BY log_key, seq LIMIT $4";
const ITEM_SIZES: &str = "SELECT CAST(length(value) AS BIGINT) FROM items \
     WHERE project = $1 AND (log_key > $2 OR (log_key = $2 AND seq > $3)) ORDER BY log_key, seq LIMIT $4";
/// By (commit, session). $1 project, $2 after (commit), $3 after (session), $4 limit.
const COMMIT_LINKS: &str = "SELECT commit_id, session_id, checkpoint_id, patch_id, made_by, seen_by, ambiguous, \
     branch, subject, committed_us, files, prompt, task, lines_truncated, created_us, author FROM commit_links \
     WHERE project = $1 AND (commit_id > $2 OR (commit_id = $2 AND session_id > $3)) \
     ORDER BY commit_id, session_id LIMIT $4";
/// $1 project, $2 commit, $3 session.
const COMMIT_LINES: &str = "SELECT fingerprint FROM commit_lines WHERE project = $1 AND commit_id = $2 \
     AND session_id = $3 ORDER BY fingerprint";
/// $1 project, $2 after (record), $3 limit.
const RECORDS: &str = "SELECT record, written_us, author FROM records WHERE project = $1 AND record > $2 ORDER BY record LIMIT $3";

/// A checkpoint or memory line with the revision its cursor holds.
#[derive(sqlx::FromRow)]
pub(crate) struct WithRevision<T> {
    revision: i64,
    #[sqlx(flatten)]
    line: T,
}

/// The sizes of a project's checkpoints, or items, after `after`, in export order.
pub(crate) async fn sizes<DB>(
    pool: &Pool<DB>,
    project: String,
    table: Table,
    after: Cursor,
    limit: i64,
) -> Result<Vec<i64>>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> String: Encode<'q, DB> + Type<DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'r> (i64,): FromRow<'r, DB::Row>,
{
    let query = if table == Table::Items {
        sqlx::query_scalar(ITEM_SIZES).bind(project).bind(after.key).bind(after.n)
    } else {
        sqlx::query_scalar(CHECKPOINT_SIZES).bind(project).bind(after.n)
    };
    Ok(query.bind(limit).fetch_all(pool).await?)
}

/// A project's rows of `table` after `after`, each with its cursor.
pub(crate) async fn rows<DB>(
    pool: &Pool<DB>,
    project: String,
    table: Table,
    after: Cursor,
    limit: i64,
) -> Result<Vec<(Cursor, Line)>>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> String: Encode<'q, DB> + Type<DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'r> ChunkLine: FromRow<'r, DB::Row>,
    for<'r> SessionLine: FromRow<'r, DB::Row>,
    for<'r> WithRevision<CheckpointLine>: FromRow<'r, DB::Row>,
    for<'r> WithRevision<MemoryLine>: FromRow<'r, DB::Row>,
    for<'r> RecordLine: FromRow<'r, DB::Row>,
    for<'r> WriteLine: FromRow<'r, DB::Row>,
    for<'r> ItemLogLine: FromRow<'r, DB::Row>,
    for<'r> ItemLine: FromRow<'r, DB::Row>,
    for<'r> CommitLinkLine: FromRow<'r, DB::Row>,
    for<'r> (String,): FromRow<'r, DB::Row>,
{
    let key = |key: &str| Cursor { key: key.to_owned(), ..Cursor::default() };
    Ok(match table {
        Table::Chunks => {
            let query = sqlx::query_as::<_, ChunkLine>(CHUNKS).bind(project).bind(after.key).bind(limit);
            let rows = query.fetch_all(pool).await?;
            rows.into_iter().map(|c| (key(&c.digest), Line::Chunk(c))).collect()
        }
        Table::Sessions => {
            let query = sqlx::query_as::<_, SessionLine>(SESSIONS).bind(project).bind(after.key).bind(limit);
            let rows = query.fetch_all(pool).await?;
            rows.into_iter().map(|s| (key(&s.id), Line::Session(Box::new(s)))).collect()
        }
        Table::Checkpoints => {
            let query = sqlx::query_as::<_, WithRevision<CheckpointLine>>(CHECKPOINTS);
            let rows = query.bind(project).bind(after.n).bind(limit).fetch_all(pool).await?;
            let cursor = |n| Cursor { n, ..Cursor::default() };
            rows.into_iter().map(|r| (cursor(r.revision), Line::Checkpoint(Box::new(r.line)))).collect()
        }
        Table::Memory => {
            let query = sqlx::query_as::<_, WithRevision<MemoryLine>>(MEMORY).bind(project).bind(after.n);
            let rows = query.bind(after.m).bind(limit).fetch_all(pool).await?;
            let cursor = |n, m| Cursor { n, m, ..Cursor::default() };
            rows.into_iter().map(|r| (cursor(r.revision, r.line.seq), Line::Memory(r.line))).collect()
        }
        Table::Writes => {
            // The cursor: the checkpoint id, NUL (which no task id holds), the task id.
            let (checkpoint, task) = after.key.split_once('\0').unwrap_or((after.key.as_str(), ""));
            let query = sqlx::query_as::<_, WriteLine>(WRITES).bind(project).bind(checkpoint.to_owned());
            let idx = if after.key.is_empty() { i64::MIN } else { after.n };
            let rows = query.bind(task.to_owned()).bind(idx).bind(limit).fetch_all(pool).await?;
            let cursor = |w: &WriteLine| Cursor {
                n: i64::from(w.idx),
                m: 0,
                key: format!("{}\0{}", w.checkpoint_id, w.task_id),
            };
            rows.into_iter().map(|w| (cursor(&w), Line::Write(w))).collect()
        }
        Table::ItemLogs => {
            let query = sqlx::query_as::<_, ItemLogLine>(ITEM_LOGS).bind(project).bind(after.key).bind(limit);
            let rows = query.fetch_all(pool).await?;
            rows.into_iter().map(|l| (key(&l.key), Line::ItemLog(l))).collect()
        }
        Table::Items => {
            let query = sqlx::query_as::<_, ItemLine>(ITEMS).bind(project).bind(after.key).bind(after.n);
            let rows = query.bind(limit).fetch_all(pool).await?;
            let cursor = |i: &ItemLine| Cursor { n: i.seq, m: 0, key: i.log_key.clone() };
            rows.into_iter().map(|i| (cursor(&i), Line::Item(i))).collect()
        }
        Table::CommitLinks => {
            // The cursor: the commit, NUL (which no commit id holds), the session.
            let (commit, session) = after.key.split_once('\0').unwrap_or((after.key.as_str(), ""));
            let query = sqlx::query_as::<_, CommitLinkLine>(COMMIT_LINKS).bind(project.clone());
            let query = query.bind(commit.to_owned()).bind(session.to_owned()).bind(limit);
            let mut rows = query.fetch_all(pool).await?;
            for l in &mut rows {
                let query = sqlx::query_scalar(COMMIT_LINES).bind(project.clone()).bind(l.commit_id.clone());
                l.fingerprints = query.bind(l.session_id.clone()).fetch_all(pool).await?;
            }
            let cursor = |l: &CommitLinkLine| key(&format!("{}\0{}", l.commit_id, l.session_id));
            rows.into_iter().map(|l| (cursor(&l), Line::CommitLink(Box::new(l)))).collect()
        }
        Table::Records => {
            let query = sqlx::query_as::<_, RecordLine>(RECORDS).bind(project).bind(after.key).bind(limit);
            let rows = query.fetch_all(pool).await?;
            rows.into_iter().map(|r| (key(&r.record), Line::Record(r))).collect()
        }
    })
}
