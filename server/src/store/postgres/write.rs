//! A write on Postgres: a part of its lane's batch (`store::writer`) in one or two round trips.
//!
//! Every statement is a round trip, and a project's writes in a batch run back to back
//! holding its lock, so the round trips of a write bound how fast one project can be
//! written (`baton-bench`'s rows "small memory writes, one hot project" and "over 100
//! projects"). A write alone makes two: one statement takes the project's lock, changing nothing,
//! and reads the write's first read with it (`Lock::first_read`; `sql::LOCK`, which says
//! when what it read predates the row it locked, and is then run again); `baton_apply_lock`
//! makes all its changes in a subtransaction of its own, which rolls back alone if it
//! fails, as a savepoint would, without the round trip a SAVEPOINT costs
//! (`Writer::lease_own`). A project's first write makes its row first (`CREATE_PROJECT`).
//! In a batch, a write leaves its changes to the write after it, which sends them with
//! its lock as one call (`handover.rs`): one round trip a write where writes queue.

use sqlx::postgres::PgRow;
use sqlx::{FromRow as _, Postgres, Row as _};

use super::{PgStore, apply, handover, maintenance, sql};
use crate::core::resume::Asked;
use crate::error::{Error, Result};
use crate::events::Hold;
use crate::store::model::{
    Change, Checkpoint, EarlierRequest, Entry, FirstRead, FirstReadDone, Lock, Locked, Log, RecordState,
    Session,
};
use crate::store::rows::{MemoryRow, RecordStateRow, record_state};
use crate::store::writer::Lease;

/// A write in progress (see the module header).
pub struct PgTx {
    pub(super) lease: Lease<Postgres>,
    store: PgStore,
    pub(super) project: String,
    /// The revision and time the lock gave the write, and whether it may change memory.
    locked: (i64, i64, bool),
    /// What was read with the lock, until the write asks for it.
    first: Option<FirstReadDone>,
    /// Held until the commit is reported (`Lock::rewrites_log`).
    hold: Option<Hold>,
}

/// The lock's columns (`sql::LOCK`, `sql::APPLY_LOCK`).
#[derive(sqlx::FromRow)]
pub(super) struct LockRow {
    fresh: bool,
    out_revision: i64,
    out_now_us: i64,
    out_caps: String,
    out_hash: Option<Vec<u8>>,
    out_reply: Option<Vec<u8>>,
}

/// What one run of the lock's statement found.
pub(super) enum Locking {
    /// Locked, and read with a snapshot that sees every write before the lock.
    Done(Vec<PgRow>, LockRow),
    /// Locked, but read with a snapshot taken before a write that committed while it
    /// waited: read again (the lock is held, so the next snapshot sees it).
    Stale,
    /// The project has no row yet, or (bounded) its row is locked elsewhere.
    Absent,
}

/// Runs the lock's statement for `lock` (`sql::LOCK`) on the lease's connection.
async fn try_lock(lease: &mut Lease<Postgres>, lock: &Lock) -> Result<Locking> {
    let statements = if lease.bounded() { &sql::LOCK_BOUNDED } else { &sql::LOCK };
    let query = match &lock.first_read {
        None => sqlx::query(statements[0]).bind(&lock.project).bind(lock.request_id.as_deref()),
        Some(FirstRead::Record(record)) => {
            sqlx::query(statements[1]).bind(&lock.project).bind(lock.request_id.as_deref()).bind(record)
        }
        Some(FirstRead::Session(id)) => {
            sqlx::query(statements[2]).bind(&lock.project).bind(lock.request_id.as_deref()).bind(id)
        }
    };
    locking(query.fetch_all(&mut **lease).await?)
}

/// What the lock's rows say.
pub(super) fn locking(rows: Vec<PgRow>) -> Result<Locking> {
    let Some(row) = rows.first() else { return Ok(Locking::Absent) };
    let lock_row = LockRow::from_row(row)?;
    Ok(if lock_row.fresh { Locking::Done(rows, lock_row) } else { Locking::Stale })
}

/// Takes the lock from the statement's first run: makes the project's row if it has none
/// and reads again when stale. `None`: a bounded lock ran out (the row is locked elsewhere,
/// or the project is new), and the write starts again in a batch of its own.
async fn settle(
    lease: &mut Lease<Postgres>,
    lock: &Lock,
    first: Locking,
) -> Result<Option<(Vec<PgRow>, LockRow)>> {
    let mut locking = first;
    // At most: the project made, then read again once stale (another server's write
    // committed while this one waited for the row it made).
    for _ in 0..3 {
        match locking {
            Locking::Done(rows, lock_row) => return Ok(Some((rows, lock_row))),
            Locking::Absent if lease.bounded() => return Ok(None),
            Locking::Absent => {
                sqlx::query(sql::CREATE_PROJECT).bind(&lock.project).execute(&mut **lease).await?;
            }
            Locking::Stale => {}
        }
        locking = try_lock(lease, lock).await?;
    }
    if lease.bounded() {
        return Ok(None);
    }
    Err(Error::internal("the project lock found no row it could read"))
}

impl PgStore {
    pub(super) async fn begin_write(&self, lock: Lock) -> Result<(PgTx, Locked)> {
        // A write that joins a batch holding other projects waits for its own lock only
        // briefly; if that runs out, it starts again at the head of a batch of its own,
        // which holds nothing while it waits (see `store::writer`).
        // Before the write can join a batch (`events::Wakers::hold`).
        let hold = lock.rewrites_log.then(|| self.wakers.hold(&lock.project));
        let mut fresh = false;
        let mut retried = false;
        let (lease, rows, lock_row) = loop {
            let mut lease = self.writer.lease_own(&lock.project, fresh).await?;
            // With the changes of the write before it in the batch, if it left them.
            let mut found = None;
            if let Some(taken) = lease.take_handover() {
                let (back, locking) = handover::send_with_lock(lease, taken, &lock).await?;
                lease = back;
                found = locking;
            }
            let locking = match found {
                Some(locking) => Ok(locking),
                None => try_lock(&mut lease, &lock).await,
            };
            let locking = match locking {
                Ok(locking) => locking,
                // Its transaction was begun ahead on a connection that was lost while idle (a
                // Postgres restart, an idle timeout): nothing of the write can be kept, and
                // the writer begins the next batch on a connection that answers.
                Err(Error::Unavailable(e))
                    if lease.begun_ahead() && !retried && crate::error::connection_lost(&e) =>
                {
                    tracing::debug!(error = %e, "the writer's connection was lost while idle; the write starts again");
                    drop(lease);
                    retried = true;
                    continue;
                }
                Err(e) => return Err(e),
            };
            if let Some((rows, lock_row)) = settle(&mut lease, &lock, locking).await? {
                break (lease, rows, lock_row);
            }
            lease.rollback().await?;
            fresh = true;
        };
        let (revision, now_us) = (lock_row.out_revision, lock_row.out_now_us);
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
        let tx = PgTx {
            lease,
            store: self.clone(),
            project: lock.project.clone(),
            locked: (revision, now_us, lock.memory),
            first,
            hold,
        };
        Ok((tx, Locked { revision, now_us, memory_caps: lock_row.out_caps, earlier }))
    }
}

impl PgTx {
    /// Once the batch commits (`Lease::on_commit`, so even if the request is gone by then):
    /// the project's watch reader is handed the write's events (a copy, if it runs) and
    /// other instances are told of its newest revision (NOTIFY). A purge's hold ends there.
    fn tell_on_commit(&mut self, log: &Log) {
        let fed = self.store.wakers.copy_for_reader(&self.project, &log.events);
        let newest = log.events.iter().map(|e| e.revision).max();
        let (wakers, notifier, project, hold) =
            (self.store.wakers.clone(), self.store.notifier.clone(), self.project.clone(), self.hold.take());
        self.lease.on_commit(Box::new(move || {
            wakers.committed(&project, fed);
            if let Some(revision) = newest {
                notifier.announce(&project, revision);
            }
            drop(hold);
        }));
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
            .fetch_all(&mut *self.lease)
            .await?;
        Ok(record_state(rows))
    }

    async fn record_entries(&mut self, record: &str, include_evicted: bool) -> Result<Vec<Entry>> {
        let rows: Vec<MemoryRow> = sqlx::query_as(sql::RECORD_ENTRIES)
            .bind(&self.project)
            .bind(record)
            .bind(include_evicted)
            .fetch_all(&mut *self.lease)
            .await?;
        Ok(rows.iter().map(MemoryRow::to_entry).collect())
    }

    async fn session(&mut self, id: &str) -> Result<Option<Session>> {
        if let Some(session) = FirstReadDone::session(&mut self.first, id) {
            return Ok(session);
        }
        Ok(sqlx::query_as(sql::SESSION).bind(id).bind(&self.project).fetch_optional(&mut *self.lease).await?)
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
        Ok(query.fetch_all(&mut *self.lease).await?)
    }

    async fn checkpoint(&mut self, id: &str) -> Result<Option<Checkpoint>> {
        Ok(sqlx::query_as(sql::CHECKPOINT)
            .bind(id)
            .bind(&self.project)
            .fetch_optional(&mut *self.lease)
            .await?)
    }

    async fn session_taken(&mut self, id: &str) -> Result<bool> {
        let row: Option<(i32,)> =
            sqlx::query_as(sql::SESSION_TAKEN).bind(id).fetch_optional(&mut *self.lease).await?;
        Ok(row.is_some())
    }

    async fn checkpoint_owner(&mut self, id: &str) -> Result<Option<(String, String)>> {
        Ok(sqlx::query_as(sql::CHECKPOINT_OWNER).bind(id).fetch_optional(&mut *self.lease).await?)
    }

    async fn missing_chunks(&mut self, digests: &[String]) -> Result<Vec<String>> {
        if digests.is_empty() {
            return Ok(Vec::new());
        }
        Ok(sqlx::query_scalar(sql::MISSING_CHUNKS)
            .bind(&self.project)
            .bind(digests)
            .fetch_all(&mut *self.lease)
            .await?)
    }

    async fn entry(&mut self, id: &str) -> Result<Option<Entry>> {
        let row: Option<MemoryRow> =
            sqlx::query_as(sql::ENTRY).bind(id).bind(&self.project).fetch_optional(&mut *self.lease).await?;
        Ok(row.as_ref().map(MemoryRow::to_entry))
    }

    async fn commit(mut self, changes: Vec<Change>, log: Log) -> Result<()> {
        let (revision, now_us, memory) = self.locked;
        let head = log.head.unwrap_or(revision);
        self.tell_on_commit(&log);
        let write = apply::Write {
            project: &self.project,
            head,
            now_us,
            memory_revision: memory.then_some(revision),
        };
        let (changes, maintenance) = apply::Changes::of(changes);
        let alone = changes.parts(&log);
        let args = apply::arguments(&write, changes, log)
            .map_err(|e| Error::internal(format!("baton_apply_lock's arguments: {e}")))?;
        if maintenance.is_empty() {
            // Sent with the next write's lock, or alone (`handover.rs`).
            let (apply, mut refusal) = handover::Apply::new(args, alone);
            let kept = self.lease.hand_over(Box::new(apply)).await;
            // Undone by its subtransaction; the batch carries on.
            if let Ok((code, message)) = refusal.try_recv() {
                return Err(Error::postgres(&code, &message));
            }
            kept?;
        } else {
            // Maintenance goes first, in a savepoint: a statement that fails must not end the
            // batch's transaction (`baton_apply_lock` has a subtransaction of its own).
            sqlx::query(sql::SAVEPOINT).execute(&mut *self.lease).await?;
            let mut failed = None;
            for change in maintenance {
                if let Err(e) = maintenance::run(&mut self.lease, &self.project, change).await {
                    failed = Some(Error::from(e));
                    break;
                }
            }
            if failed.is_none() {
                let refused: Option<handover::Refusal> =
                    sqlx::query_as_with(sql::APPLY, args).fetch_optional(&mut *self.lease).await?;
                failed = refused.map(|(code, message)| Error::postgres(&code, &message));
            }
            if let Some(e) = failed {
                sqlx::query(sql::ROLLBACK_TO_SAVEPOINT).execute(&mut *self.lease).await?;
                self.lease.rollback().await?;
                return Err(e);
            }
            sqlx::query(sql::RELEASE_SAVEPOINT).execute(&mut *self.lease).await?;
            self.lease.commit().await?;
        }
        Ok(())
    }

    async fn rollback(self) -> Result<()> {
        Ok(self.lease.rollback().await?)
    }

    async fn settle(self) -> Result<()> {
        Ok(self.lease.settle().await?)
    }
}
