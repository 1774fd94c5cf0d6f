//! The reads of thread writes (`service::thread`), implemented once for both backends on
//! the write's transaction (each statement one text, `$n`), within the write's project.

use std::future::Future;

use sqlx::{Database, Encode, Executor, FromRow, IntoArguments, Type};

use super::model::{Checkpoint, PendingWrite, Session};
use super::rows::{checkpoint_columns, checkpoint_light_columns, session_columns};
use super::writer::{Backend, Tx};
use crate::error::Result;

/// A write's reads of threads.
pub trait ThreadTx: Send {
    /// The sessions of a thread (one per namespace), by namespace.
    fn thread_sessions(&mut self, thread: &str) -> impl Future<Output = Result<Vec<Session>>> + Send;
    /// A session's checkpoint by its key, without its payload.
    fn keyed_checkpoint(
        &mut self,
        session_id: &str,
        key: &str,
    ) -> impl Future<Output = Result<Option<Checkpoint>>> + Send;
    /// A session's checkpoints by key, with their payloads only if asked.
    fn session_checkpoints(
        &mut self,
        session_id: &str,
        payload: bool,
    ) -> impl Future<Output = Result<Vec<Checkpoint>>> + Send;
    /// A checkpoint's pending writes, by (task_id, idx).
    fn checkpoint_writes(
        &mut self,
        checkpoint_id: &str,
    ) -> impl Future<Output = Result<Vec<PendingWrite>>> + Send;
    /// The sessions with checkpoints whose metadata's run_id is this.
    fn run_sessions(&mut self, run_id: &str) -> impl Future<Output = Result<Vec<String>>> + Send;
}

/// $1 project, $2 thread.
pub(crate) const THREAD_SESSIONS: &str = concat!(
    "SELECT ",
    session_columns!(),
    " FROM sessions WHERE project = $1 AND thread_key = $2 ORDER BY thread_ns"
);
/// $1 project, $2 session, $3 key.
const KEYED_CHECKPOINT: &str = concat!(
    "SELECT ",
    checkpoint_light_columns!(),
    " FROM checkpoints WHERE project = $1 AND session_id = $2 AND ordered_key = $3"
);
/// $1 project, $2 session.
const SESSION_CHECKPOINTS: &str = concat!(
    "SELECT ",
    checkpoint_columns!(),
    " FROM checkpoints WHERE project = $1 AND session_id = $2 ORDER BY ordered_key"
);
const SESSION_CHECKPOINTS_LIGHT: &str = concat!(
    "SELECT ",
    checkpoint_light_columns!(),
    " FROM checkpoints WHERE project = $1 AND session_id = $2 ORDER BY ordered_key"
);
/// $1 project, $2 checkpoint.
const CHECKPOINT_WRITES: &str = "SELECT checkpoint_id, task_id, idx, channel, task_path, value_type, value, revision \
     FROM pending_writes WHERE project = $1 AND checkpoint_id = $2 ORDER BY task_id, idx";
/// $1 project, $2 run id.
const RUN_SESSIONS: &str =
    "SELECT DISTINCT session_id FROM checkpoints WHERE project = $1 AND run_id = $2 ORDER BY session_id";

impl<B, DB> ThreadTx for Tx<B>
where
    B: Backend<Db = DB>,
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'q> String: Encode<'q, DB> + Type<DB>,
    for<'r> Session: FromRow<'r, DB::Row>,
    for<'r> Checkpoint: FromRow<'r, DB::Row>,
    for<'r> PendingWrite: FromRow<'r, DB::Row>,
    for<'r> (String,): FromRow<'r, DB::Row>,
{
    async fn thread_sessions(&mut self, thread: &str) -> Result<Vec<Session>> {
        let query = sqlx::query_as(THREAD_SESSIONS).bind(self.project.clone()).bind(thread.to_owned());
        Ok(query.fetch_all(self.conn()).await?)
    }

    async fn keyed_checkpoint(&mut self, session_id: &str, key: &str) -> Result<Option<Checkpoint>> {
        let query = sqlx::query_as(KEYED_CHECKPOINT).bind(self.project.clone()).bind(session_id.to_owned());
        Ok(query.bind(key.to_owned()).fetch_optional(self.conn()).await?)
    }

    async fn session_checkpoints(&mut self, session_id: &str, payload: bool) -> Result<Vec<Checkpoint>> {
        let text = if payload { SESSION_CHECKPOINTS } else { SESSION_CHECKPOINTS_LIGHT };
        let query = sqlx::query_as(text).bind(self.project.clone()).bind(session_id.to_owned());
        Ok(query.fetch_all(self.conn()).await?)
    }

    async fn checkpoint_writes(&mut self, checkpoint_id: &str) -> Result<Vec<PendingWrite>> {
        let query =
            sqlx::query_as(CHECKPOINT_WRITES).bind(self.project.clone()).bind(checkpoint_id.to_owned());
        Ok(query.fetch_all(self.conn()).await?)
    }

    async fn run_sessions(&mut self, run_id: &str) -> Result<Vec<String>> {
        let query = sqlx::query_scalar(RUN_SESSIONS).bind(self.project.clone()).bind(run_id.to_owned());
        Ok(query.fetch_all(self.conn()).await?)
    }
}
