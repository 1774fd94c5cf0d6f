//! A write on Postgres, as the writer runs it (`store::writer`): one call of the write
//! function (`apply.rs`) takes the write's lock and reads its first read
//! (`Lock::first_read`), sending the previous write's changes first; then any other reads;
//! its changes go with the lane's next statement (the next write's lock, or the commit),
//! or at once after the statements of any maintenance changes.

use futures::future::BoxFuture;
use sqlx::postgres::{PgArguments, PgRow};
use sqlx::{FromRow as _, PgConnection, Postgres, Row as _};

use super::{apply, commit_links, items, maintenance, reservations, sql};
use crate::core::resume::Asked;
use crate::error::{Error, Result};
use crate::store::Kept;
use crate::store::apply::Apply;
use crate::store::model::{
    Checkpoint, EarlierRequest, Entry, FirstRead, FirstReadDone, Lock, Locked, RecordState, Session,
};
use crate::store::rows::{MemoryRow, RecordStateRow, record_state};
use crate::store::writer::{Backend, Committing, Locking, Taken, Tx};

/// A write in progress (see the module header).
pub type PgTx = Tx<Lanes>;

/// Postgres as the writer's backend: row locks per project, so several lanes, each
/// project always on the same one. At most 32 writes per transaction: each write's
/// savepoint is a subtransaction, and beyond 64 of them Postgres overflows the per-backend
/// cache that snapshots consult.
pub struct Lanes;

impl Backend for Lanes {
    type Db = Postgres;
    /// The write function's arguments for a write's changes (`apply.rs`).
    type Changes = PgArguments;
    const BEGIN: &'static str = "BEGIN";
    const LANES: usize = 4;
    const MAX_BATCH: usize = 32;

    fn lock<'c>(
        conn: &'c mut PgConnection,
        changes: Option<PgArguments>,
        lock: &'c Lock,
        bounded: bool,
    ) -> BoxFuture<'c, Locking> {
        Box::pin(async move {
            let (applied, taken) = call(conn, changes, Some((lock, bounded))).await;
            Locking { applied, taken }
        })
    }

    fn apply(conn: &mut PgConnection, changes: PgArguments) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move { call(conn, Some(changes), None).await.0 })
    }

    fn commit(conn: &mut PgConnection, changes: Option<PgArguments>) -> BoxFuture<'_, Committing> {
        Box::pin(async move {
            let applied = match changes {
                Some(changes) => call(conn, Some(changes), None).await.0,
                None => Ok(()),
            };
            // The query fails in a failed transaction, whose COMMIT Postgres would take as a
            // ROLLBACK without an error.
            let committed =
                sqlx::raw_sql("SELECT 1; COMMIT").execute(conn).await.map(drop).map_err(Error::from);
            Committing { applied, committed }
        })
    }
}

/// The write function's answer (`apply::CALL`): whether the changes were made, and the
/// lock's columns (NULL when a bounded lock ran out).
#[derive(sqlx::FromRow)]
struct Answer {
    out_code: Option<String>,
    out_message: Option<String>,
    out_revision: Option<i64>,
    out_now_us: Option<i64>,
    out_caps: Option<String>,
    out_hash: Option<Vec<u8>>,
    out_reply: Option<Vec<u8>>,
}

/// One call of the write function: a write's changes, a lock, or both, changes first. A
/// call that fails as a whole ends the transaction, and with it the batch: its error goes to
/// the lock if there is one, else to the changes.
async fn call(
    conn: &mut PgConnection,
    changes: Option<PgArguments>,
    lock: Option<(&Lock, bool)>,
) -> (Result<()>, Result<Option<Taken>>) {
    let failed = |e: Error| if lock.is_some() { (Ok(()), Err(e)) } else { (Err(e), Ok(None)) };
    let statement = apply::call_for(changes.is_some(), lock.is_some());
    let mut args = changes.unwrap_or_default();
    if let Some((lock, bounded)) = lock
        && let Err(e) = apply::lock_arguments(&mut args, lock, bounded)
    {
        return failed(Error::internal(format!("the write function's arguments: {e}")));
    }
    let rows = match sqlx::query_with(statement, args).fetch_all(conn).await {
        Ok(rows) => rows,
        Err(e) => return failed(e.into()),
    };
    let answer = match rows.first().map(Answer::from_row).transpose() {
        Ok(Some(answer)) => answer,
        Ok(None) => return failed(Error::internal("the write function returned no row")),
        Err(e) => return failed(e.into()),
    };
    let applied = match &answer.out_code {
        Some(code) => Err(Error::postgres(code, answer.out_message.as_deref().unwrap_or_default())),
        None => Ok(()),
    };
    let taken = match lock {
        Some((lock, bounded)) => taken(lock, bounded, answer, &rows),
        None => Ok(None),
    };
    (applied, taken)
}

/// What the lock gave the write, from the function's answer and rows.
fn taken(lock: &Lock, bounded: bool, answer: Answer, rows: &[PgRow]) -> Result<Option<Taken>> {
    let (Some(revision), Some(now_us), Some(memory_caps)) =
        (answer.out_revision, answer.out_now_us, answer.out_caps)
    else {
        if bounded {
            return Ok(None);
        }
        return Err(Error::internal("the project lock found no row it could read"));
    };
    let first = match &lock.first_read {
        None => None,
        Some(FirstRead::Record(record)) => {
            let state = rows.iter().map(RecordStateRow::from_row).collect::<Result<Vec<_>, _>>()?;
            Some(FirstReadDone::Record(record.to_owned(), record_state(state)))
        }
        Some(FirstRead::Session(id)) => {
            let row = rows.first().ok_or_else(|| Error::internal("the write function returned no row"))?;
            let present: Option<String> = row.try_get("id")?;
            let session = present.map(|_| Session::from_row(row)).transpose()?.map(Box::new);
            Some(FirstReadDone::Session(id.to_owned(), session))
        }
    };
    let earlier = match (answer.out_hash, answer.out_reply) {
        (Some(request_hash), Some(reply)) => Some(EarlierRequest { request_hash, reply }),
        _ => None,
    };
    Ok(Some(Taken { locked: Locked { revision, now_us, memory_caps, earlier }, first }))
}

impl Apply for PgTx {
    /// One call of the write function, sent with the lane's next statement (`Lanes`); a
    /// write with changes the function does not make (maintenance, item logs) is applied at
    /// once, their statements first.
    async fn apply(&mut self, kept: Kept) -> Result<()> {
        let Kept { changes, log } = kept;
        let project = self.project.clone();
        let write = apply::Write {
            project: &project,
            head: log.head.unwrap_or(self.revision),
            now_us: self.now_us,
            memory_revision: self.memory.then_some(self.revision),
        };
        let (changes, maintenance) = apply::Changes::of(changes);
        let args = apply::arguments(&write, changes, log)
            .map_err(|e| Error::internal(format!("the write function's arguments: {e}")))?;
        if maintenance.is_empty() {
            self.defer(args);
            return Ok(());
        }
        // Maintenance and item logs go first, in a savepoint of their own: their statements
        // are outside the function's subtransaction. No benchmark row needs them in the
        // function, so they stay plain statements.
        sqlx::raw_sql("SAVEPOINT maintenance").execute(&mut *self.conn).await?;
        let mut done = Ok(());
        for change in maintenance {
            let ran = match change {
                apply::Plain::Maintenance(m) => maintenance::run(&mut self.conn, &project, m).await,
                apply::Plain::Items(i) => items::run(&mut self.conn, &project, i).await,
                apply::Plain::Reservations(r) => reservations::run(&mut self.conn, &project, r).await,
                apply::Plain::Commits(c) => commit_links::run(&mut self.conn, &project, c).await,
            };
            if let Err(e) = ran {
                done = Err(Error::from(e));
                break;
            }
        }
        if done.is_ok() {
            done = call(&mut self.conn, Some(args), None).await.0;
        }
        let end = if done.is_ok() {
            "RELEASE SAVEPOINT maintenance"
        } else {
            "ROLLBACK TO SAVEPOINT maintenance; RELEASE SAVEPOINT maintenance"
        };
        sqlx::raw_sql(end).execute(&mut *self.conn).await?;
        done
    }
}

impl crate::store::WriteTx for PgTx {
    async fn record_state(&mut self, record: &str) -> Result<RecordState> {
        if let Some(state) = FirstReadDone::record(&mut self.first, record) {
            return Ok(state);
        }
        let rows: Vec<RecordStateRow> = sqlx::query_as(sql::RECORD_STATE)
            .bind(&self.project)
            .bind(record)
            .fetch_all(&mut *self.conn)
            .await?;
        Ok(record_state(rows))
    }

    async fn record_entries(&mut self, record: &str, include_evicted: bool) -> Result<Vec<Entry>> {
        let rows: Vec<MemoryRow> = sqlx::query_as(sql::RECORD_ENTRIES)
            .bind(&self.project)
            .bind(record)
            .bind(include_evicted)
            .fetch_all(&mut *self.conn)
            .await?;
        Ok(rows.iter().map(MemoryRow::to_entry).collect())
    }

    async fn session(&mut self, id: &str) -> Result<Option<Session>> {
        if let Some(session) = FirstReadDone::session(&mut self.first, id) {
            return Ok(session);
        }
        Ok(sqlx::query_as(sql::SESSION).bind(id).bind(&self.project).fetch_optional(&mut *self.conn).await?)
    }

    async fn resume_candidates(&mut self, asked: Asked<'_>) -> Result<Vec<Session>> {
        let query = match asked {
            // Read with the lock when the write named it (`Lock::first_read`).
            Asked::Session(id) => return Ok(self.session(id).await?.into_iter().collect()),
            Asked::Checkpoint(id) => sqlx::query_as(sql::CHECKPOINT_SESSION).bind(&self.project).bind(id),
            Asked::Latest => {
                sqlx::query_as(sqlx::AssertSqlSafe(sql::LATEST_ENDED.as_str())).bind(&self.project)
            }
        };
        Ok(query.fetch_all(&mut *self.conn).await?)
    }

    async fn checkpoint(&mut self, id: &str) -> Result<Option<Checkpoint>> {
        Ok(sqlx::query_as(sql::CHECKPOINT)
            .bind(id)
            .bind(&self.project)
            .fetch_optional(&mut *self.conn)
            .await?)
    }

    async fn session_taken(&mut self, id: &str) -> Result<bool> {
        let row: Option<(i32,)> =
            sqlx::query_as(sql::SESSION_TAKEN).bind(id).fetch_optional(&mut *self.conn).await?;
        Ok(row.is_some())
    }

    async fn checkpoint_owner(&mut self, id: &str) -> Result<Option<crate::store::model::CheckpointOwner>> {
        Ok(sqlx::query_as(sql::CHECKPOINT_OWNER).bind(id).fetch_optional(&mut *self.conn).await?)
    }

    async fn missing_chunks(&mut self, digests: &[String]) -> Result<Vec<String>> {
        if digests.is_empty() {
            return Ok(Vec::new());
        }
        Ok(sqlx::query_scalar(sql::MISSING_CHUNKS)
            .bind(&self.project)
            .bind(digests)
            .fetch_all(&mut *self.conn)
            .await?)
    }

    async fn entry(&mut self, id: &str) -> Result<Option<Entry>> {
        let row: Option<MemoryRow> =
            sqlx::query_as(sql::ENTRY).bind(id).bind(&self.project).fetch_optional(&mut *self.conn).await?;
        Ok(row.as_ref().map(MemoryRow::to_entry))
    }
}
