//! A write on Postgres, as the writer runs it (`store::writer`): one statement takes the
//! project's lock, changing nothing, and reads the write's first read with it
//! (`Lock::first_read`; `sql::LOCK`, which says when what it read predates the row it
//! locked, and is then run again); any other reads; and one call of the write function with
//! all its changes (`apply.rs`), sent before the lane's next statement (or at once, after
//! the statements of any maintenance changes). A project's first write makes its row first
//! (`CREATE_PROJECT`).

use futures::future::BoxFuture;
use sqlx::postgres::{PgArguments, PgRow};
use sqlx::{FromRow as _, PgConnection, Postgres, Row as _};

use super::{apply, maintenance, sql};
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
    /// The write function's arguments (`apply.rs`).
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
            let applied = match changes {
                Some(changes) => call(conn, changes).await,
                None => Ok(()),
            };
            Locking { applied, taken: take_lock(conn, lock, bounded).await }
        })
    }

    fn apply(conn: &mut PgConnection, changes: PgArguments) -> BoxFuture<'_, Result<()>> {
        Box::pin(call(conn, changes))
    }

    fn commit(conn: &mut PgConnection, changes: Option<PgArguments>) -> BoxFuture<'_, Committing> {
        Box::pin(async move {
            let applied = match changes {
                Some(changes) => call(conn, changes).await,
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

/// One call of the write function.
async fn call(conn: &mut PgConnection, args: PgArguments) -> Result<()> {
    let refused: (Option<String>, Option<String>) =
        sqlx::query_as_with(apply::CALL.as_str(), args).fetch_one(conn).await?;
    refusal(refused)
}

/// The lock's columns (`sql::LOCK`).
#[derive(sqlx::FromRow)]
struct LockRow {
    current: bool,
    out_revision: i64,
    out_now_us: i64,
    out_caps: String,
    out_hash: Option<Vec<u8>>,
    out_reply: Option<Vec<u8>>,
}

/// What one run of the lock's statement found.
enum LockRead {
    /// Locked, and read with a snapshot that sees every write before the lock.
    Done(Vec<PgRow>, LockRow),
    /// Locked, but read with a snapshot taken before a write that committed while it
    /// waited: read again (the lock is held, so the next snapshot sees it).
    Stale,
    /// The project has no row yet, or (bounded) its row is locked elsewhere.
    Absent,
}

/// Runs the lock's statement for `lock` (`sql::LOCK`, or `LOCK_BOUNDED`).
async fn try_lock(conn: &mut PgConnection, lock: &Lock, bounded: bool) -> Result<LockRead> {
    let statements = if bounded { &sql::LOCK_BOUNDED } else { &sql::LOCK };
    let (project, request_id) = (&lock.project, lock.request_id.as_deref());
    let query = match &lock.first_read {
        None => sqlx::query(statements[0]).bind(project).bind(request_id),
        Some(FirstRead::Record(record)) => {
            sqlx::query(statements[1]).bind(project).bind(request_id).bind(record)
        }
        Some(FirstRead::Session(id)) => sqlx::query(statements[2]).bind(project).bind(request_id).bind(id),
    };
    let rows = query.fetch_all(conn).await?;
    let Some(row) = rows.first() else { return Ok(LockRead::Absent) };
    let lock_row = LockRow::from_row(row)?;
    Ok(if lock_row.current { LockRead::Done(rows, lock_row) } else { LockRead::Stale })
}

/// Takes the lock: makes the project's row if it has none, and reads again when stale.
/// `None`: a bounded lock ran out (the row is locked elsewhere, or the project is new), and
/// the write starts again in a batch of its own.
async fn take_row(
    conn: &mut PgConnection,
    lock: &Lock,
    bounded: bool,
) -> Result<Option<(Vec<PgRow>, LockRow)>> {
    // At most: the project made, then read again once stale (another server's write
    // committed while this one waited for the row it made).
    for _ in 0..3 {
        match try_lock(conn, lock, bounded).await? {
            LockRead::Done(rows, lock_row) => return Ok(Some((rows, lock_row))),
            LockRead::Absent if bounded => return Ok(None),
            LockRead::Absent => {
                sqlx::query(sql::CREATE_PROJECT).bind(&lock.project).execute(&mut *conn).await?;
            }
            LockRead::Stale => {}
        }
    }
    if bounded {
        return Ok(None);
    }
    Err(Error::internal("the project lock found no row it could read"))
}

/// Takes the lock (`Backend::lock`).
async fn take_lock(conn: &mut PgConnection, lock: &Lock, bounded: bool) -> Result<Option<Taken>> {
    let Some((rows, lock_row)) = take_row(conn, lock, bounded).await? else { return Ok(None) };
    let first = match &lock.first_read {
        None => None,
        Some(FirstRead::Record(record)) => {
            let state = rows.iter().map(RecordStateRow::from_row).collect::<Result<Vec<_>, _>>()?;
            Some(FirstReadDone::Record(record.to_owned(), record_state(state)))
        }
        Some(FirstRead::Session(id)) => {
            let row = rows.first().ok_or_else(|| Error::internal("the project lock returned no row"))?;
            let present: Option<String> = row.try_get("id")?;
            let session = present.map(|_| Session::from_row(row)).transpose()?.map(Box::new);
            Some(FirstReadDone::Session(id.to_owned(), session))
        }
    };
    let earlier = match (lock_row.out_hash, lock_row.out_reply) {
        (Some(request_hash), Some(reply)) => Some(EarlierRequest { request_hash, reply }),
        _ => None,
    };
    let locked = Locked {
        revision: lock_row.out_revision,
        now_us: lock_row.out_now_us,
        memory_caps: lock_row.out_caps,
        earlier,
    };
    Ok(Some(Taken { locked, first }))
}

impl Apply for PgTx {
    /// One call of the write function, sent with the lane's next statement (`Lanes`); a
    /// write with maintenance changes (rare: round trips do not count) is applied at once,
    /// its maintenance first.
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
        // Maintenance (rare: round trips do not count) goes first, in a savepoint of its own:
        // its statements are outside the function's subtransaction.
        sqlx::raw_sql("SAVEPOINT maintenance").execute(&mut *self.conn).await?;
        let mut done = Ok(());
        for change in maintenance {
            if let Err(e) = maintenance::run(&mut self.conn, &project, change).await {
                done = Err(Error::from(e));
                break;
            }
        }
        if done.is_ok() {
            done = call(&mut self.conn, args).await;
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

/// What the write function answered: nothing, or the SQLSTATE and message of what failed.
fn refusal((code, message): (Option<String>, Option<String>)) -> Result<()> {
    match code {
        Some(code) => Err(Error::postgres(&code, &message.unwrap_or_default())),
        None => Ok(()),
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

    async fn checkpoint_owner(&mut self, id: &str) -> Result<Option<(String, String)>> {
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
