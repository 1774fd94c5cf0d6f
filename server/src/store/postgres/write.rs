//! A write on Postgres: a savepoint in its lane's batch (`store::writer`, which opens it),
//! begun by the project lock and ended by one statement holding all its changes and its
//! log (`sql::APPLY`). Every statement is a round trip: a write makes two, plus its reads.

use sqlx::Arguments as _;
use sqlx::Postgres;
use sqlx::postgres::PgArguments;

use super::{BOUNDED_LOCK_WAIT_MS, PgStore, sql};
use crate::error::Result;
use crate::store::model::{Change, EarlierRequest, Entry, Lock, Locked, Log, RecordState, Session};
use crate::store::rows::{MemoryRow, RecordStateRow, encode_actor, record_state};
use crate::store::writer::Lease;

/// SQLSTATE lock_not_available: a bounded wait for a lock ran out.
const LOCK_NOT_AVAILABLE: &str = "55P03";

/// A write in progress (see the module header).
pub struct PgTx {
    lease: Lease<Postgres>,
    store: PgStore,
    project: String,
}

/// The lock's row (`sql::LOCK`).
#[derive(sqlx::FromRow)]
struct LockRow {
    out_revision: i64,
    out_now_us: i64,
    out_caps: String,
    out_hash: Option<Vec<u8>>,
    out_reply: Option<Vec<u8>>,
}

impl PgStore {
    pub(super) async fn begin_write(&self, lock: Lock<'_>) -> Result<(PgTx, Locked)> {
        // A write that joins a batch holding other projects waits for its own lock only
        // briefly; if that runs out, it starts again at the head of a batch of its own,
        // which holds nothing while it waits (see `store::writer`).
        let mut fresh = false;
        let (lease, row) = loop {
            let mut lease = self.writer.lease(lock.project, fresh, false).await?;
            let wait_ms = if lease.bounded() { BOUNDED_LOCK_WAIT_MS } else { 0 };
            let locked = sqlx::query_as::<_, LockRow>(sql::LOCK)
                .bind(lock.project)
                .bind(lock.request_id)
                .bind(lock.memory)
                .bind(wait_ms)
                .fetch_one(&mut *lease)
                .await;
            match locked {
                Ok(row) => break (lease, row),
                Err(e) if lease.bounded() && is_lock_not_available(&e) => {
                    lease.rollback().await?;
                    fresh = true;
                }
                Err(e) => return Err(e.into()),
            }
        };
        let earlier = match (row.out_hash, row.out_reply) {
            (Some(request_hash), Some(reply)) => Some(EarlierRequest { request_hash, reply }),
            _ => None,
        };
        let locked =
            Locked { revision: row.out_revision, now_us: row.out_now_us, memory_caps: row.out_caps, earlier };
        Ok((PgTx { lease, store: self.clone(), project: lock.project.to_owned() }, locked))
    }
}

fn is_lock_not_available(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Database(db) if db.code().as_deref() == Some(LOCK_NOT_AVAILABLE))
}

impl crate::store::WriteTx for PgTx {
    async fn record_state(&mut self, record: &str) -> Result<RecordState> {
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
        Ok(sqlx::query_as(sql::SESSION).bind(id).bind(&self.project).fetch_optional(&mut *self.lease).await?)
    }

    async fn entry(&mut self, id: &str) -> Result<Option<Entry>> {
        let row: Option<MemoryRow> =
            sqlx::query_as(sql::ENTRY).bind(id).bind(&self.project).fetch_optional(&mut *self.lease).await?;
        Ok(row.as_ref().map(MemoryRow::to_entry))
    }

    async fn commit(self, changes: Vec<Change>, log: Log) -> Result<()> {
        let newest = log.events.iter().map(|e| e.revision).max();
        let apply = apply(&self.project, changes, log);
        self.lease.commit_after(apply).await?;
        self.store.wakers.wake(&self.project);
        if let Some(revision) = newest {
            self.store.notifier.announce(&self.project, revision);
        }
        Ok(())
    }

    async fn rollback(self) -> Result<()> {
        Ok(self.lease.rollback().await?)
    }
}

/// A write's changes and log as the arrays of `sql::APPLY`.
#[derive(Default)]
struct Arrays {
    deleted_records: Vec<String>,
    deleted_entries: Vec<String>,
    evicted: Vec<String>,
    added: Vec<(String, Entry)>,
    versions: Vec<(String, i64, i64, Vec<u8>)>,
    memory_caps: Option<String>,
    added_sessions: Vec<Session>,
    put_sessions: Vec<Session>,
}

fn apply(project: &str, changes: Vec<Change>, log: Log) -> sqlx::QueryBuilder<Postgres> {
    let mut a = Arrays::default();
    for change in changes {
        match change {
            Change::DeleteRecord { record } => a.deleted_records.push(record),
            Change::DeleteEntries { ids } => a.deleted_entries.extend(ids),
            Change::Evict { ids } => a.evicted.extend(ids),
            Change::InsertEntries { record, entries } => {
                a.added.extend(entries.into_iter().map(|e| (record.clone(), e)));
            }
            Change::PutRecordVersion { record, revision, written_us, author } => {
                a.versions.push((record, revision, written_us, encode_actor(&author)));
            }
            Change::SetMemoryCaps { json } => a.memory_caps = Some(json),
            Change::InsertSession(s) => a.added_sessions.push(*s),
            Change::PutSession(s) => a.put_sessions.push(*s),
        }
    }
    let column = |f: fn(&(String, Entry)) -> String| a.added.iter().map(f).collect::<Vec<String>>();
    let mut args = PgArguments::default();
    let bind = |r: Result<(), sqlx::error::BoxDynError>| {
        if let Err(e) = r {
            tracing::error!(error = %e, "a value could not be bound");
        }
    };
    bind(args.add(project));
    bind(args.add(&a.deleted_records));
    bind(args.add(&a.deleted_entries));
    bind(args.add(&a.evicted));
    bind(args.add(column(|(_, e)| e.id.clone())));
    bind(args.add(column(|(_, e)| e.category.clone())));
    bind(args.add(column(|(_, e)| e.branch.clone())));
    bind(args.add(column(|(_, e)| e.key.clone())));
    bind(args.add(column(|(record, _)| record.clone())));
    bind(args.add(column(|(_, e)| e.content.clone())));
    bind(args.add(column(|(_, e)| e.rationale.clone())));
    bind(args.add(a.added.iter().map(|(_, e)| encode_actor(&e.author)).collect::<Vec<_>>()));
    bind(args.add(a.added.iter().map(|(_, e)| e.revision).collect::<Vec<_>>()));
    bind(args.add(a.added.iter().map(|(_, e)| e.seq).collect::<Vec<_>>()));
    bind(args.add(a.added.iter().map(|(_, e)| e.created_us).collect::<Vec<_>>()));
    bind(args.add(a.added.iter().map(|(_, e)| e.evicted).collect::<Vec<_>>()));
    bind(args.add(a.versions.iter().map(|v| v.0.clone()).collect::<Vec<_>>()));
    bind(args.add(a.versions.iter().map(|v| v.1).collect::<Vec<_>>()));
    bind(args.add(a.versions.iter().map(|v| v.2).collect::<Vec<_>>()));
    bind(args.add(a.versions.into_iter().map(|v| v.3).collect::<Vec<_>>()));
    bind(args.add(log.events.iter().map(|e| e.revision).collect::<Vec<_>>()));
    bind(args.add(log.events.iter().map(|e| e.kind).collect::<Vec<_>>()));
    bind(args.add(log.events.into_iter().map(|e| e.body).collect::<Vec<_>>()));
    bind(args.add(log.conflicts.iter().map(|c| c.id.clone()).collect::<Vec<_>>()));
    bind(args.add(log.conflicts.iter().map(|c| c.revision).collect::<Vec<_>>()));
    bind(args.add(log.conflicts.into_iter().map(|c| c.body).collect::<Vec<_>>()));
    let request = log.request;
    bind(args.add(request.as_ref().map(|r| r.request_id.clone())));
    bind(args.add(request.as_ref().map(|r| r.request_hash.clone())));
    bind(args.add(request.as_ref().map(|r| r.reply.clone())));
    bind(args.add(request.as_ref().map(|r| r.created_us)));
    bind(args.add(a.memory_caps));
    bind(args.add(log.head));
    bind_added_sessions(&mut args, &a.added_sessions);
    bind_put_sessions(&mut args, &a.put_sessions);
    sqlx::QueryBuilder::with_arguments(sql::APPLY, args)
}

/// Adds one array parameter: a column of `rows`.
fn column<'a, T>(args: &mut PgArguments, rows: &'a [Session], f: impl Fn(&'a Session) -> T)
where
    Vec<T>: for<'q> sqlx::Encode<'q, Postgres> + sqlx::Type<Postgres>,
{
    if let Err(e) = args.add(rows.iter().map(f).collect::<Vec<T>>()) {
        tracing::error!(error = %e, "a value could not be bound");
    }
}

/// $33–$59 of `sql::APPLY`.
fn bind_added_sessions(args: &mut PgArguments, rows: &[Session]) {
    column(args, rows, |s| s.id.as_str());
    column(args, rows, |s| s.agent);
    column(args, rows, |s| s.agent_session_id.as_str());
    column(args, rows, |s| s.host.as_str());
    column(args, rows, |s| s.user_name.as_str());
    column(args, rows, |s| s.cwd.as_str());
    column(args, rows, |s| s.branch.as_str());
    column(args, rows, |s| s.goal.as_str());
    column(args, rows, |s| s.status);
    column(args, rows, |s| s.lease_ttl_ms);
    column(args, rows, |s| s.last_seen_us);
    column(args, rows, |s| s.head_checkpoint_id.clone());
    column(args, rows, |s| s.git_base.as_str());
    column(args, rows, |s| s.git_head.as_str());
    column(args, rows, |s| s.summary.as_str());
    column(args, rows, |s| s.tool_count);
    column(args, rows, |s| s.resumed_from.clone());
    column(args, rows, |s| s.resumed_by.clone());
    column(args, rows, |s| s.metadata.as_str());
    column(args, rows, |s| s.created_us);
    column(args, rows, |s| s.updated_us);
    column(args, rows, |s| s.revision);
    column(args, rows, |s| s.written_us);
    column(args, rows, |s| s.author.as_slice());
    column(args, rows, |s| s.head_revision);
    column(args, rows, |s| s.head_written_us);
    column(args, rows, |s| s.head_author.as_slice());
}

/// $60–$78 of `sql::APPLY`.
fn bind_put_sessions(args: &mut PgArguments, rows: &[Session]) {
    column(args, rows, |s| s.agent_session_id.as_str());
    column(args, rows, |s| s.branch.as_str());
    column(args, rows, |s| s.goal.as_str());
    column(args, rows, |s| s.status);
    column(args, rows, |s| s.last_seen_us);
    column(args, rows, |s| s.head_checkpoint_id.clone());
    column(args, rows, |s| s.git_head.as_str());
    column(args, rows, |s| s.summary.as_str());
    column(args, rows, |s| s.tool_count);
    column(args, rows, |s| s.resumed_by.clone());
    column(args, rows, |s| s.metadata.as_str());
    column(args, rows, |s| s.updated_us);
    column(args, rows, |s| s.revision);
    column(args, rows, |s| s.written_us);
    column(args, rows, |s| s.author.as_slice());
    column(args, rows, |s| s.head_revision);
    column(args, rows, |s| s.head_written_us);
    column(args, rows, |s| s.head_author.as_slice());
    column(args, rows, |s| s.id.as_str());
}
