//! A write on SQLite, as the writer runs it (`store::writer`): the project lock with the
//! write's first read (`Lock::first_read`) as one query, any other reads, and one query
//! holding all its changes, its log and its project's new head (`Apply`). Every statement is
//! a hand-off to the connection's thread; a query may hold several, with values bound in
//! order (`baton-bench`: "small writes over 100 projects" on SQLite).

use futures::future::BoxFuture;
use sqlx::sqlite::{SqliteArguments, SqliteRow};
use sqlx::{Arguments as _, FromRow as _, Sqlite, SqliteConnection};

use super::sql;
use crate::core::resume::Asked;
use crate::core::search::tokens::fts5_text;
use crate::error::{Error, Result};
use crate::store::Kept;
use crate::store::apply::Apply;
use crate::store::model::{
    Change, Checkpoint, EarlierRequest, Entry, FirstRead, FirstReadDone, Index, Lock, Locked, Log,
    PendingWrite, RecordState, Session,
};
use crate::store::rows::{MemoryRow, RecordStateRow, encode_actor, record_state};
use crate::store::writer::{Backend, Committing, Locking, Taken, Tx};

/// A write in progress (see the module header).
pub type SqliteTx = Tx<Lanes>;

/// SQLite as the writer's backend. One write lock per database: one lane, and
/// `BEGIN IMMEDIATE`, so a batch takes the lock before it reads anything.
pub struct Lanes;

/// Statements sent as one query: constant texts, their values bound in order (a write's
/// changes, as the writer holds them until its next statement).
#[derive(Default)]
pub struct Statements {
    sql: String,
    args: SqliteArguments,
    count: usize,
}

impl Statements {
    pub(super) fn push(&mut self, sql: &str) -> &mut Self {
        if !self.sql.is_empty() {
            self.sql.push_str("; ");
        }
        self.sql.push_str(sql);
        self.count += 1;
        self
    }

    pub(super) fn bind<'t, T: sqlx::Encode<'t, Sqlite> + sqlx::Type<Sqlite>>(
        &mut self,
        value: T,
    ) -> &mut Self {
        // Encoding a value Baton itself holds (text, integers, bytes) does not fail; if it
        // ever did, the statement would run with fewer values and fail at the database.
        if let Err(e) = self.args.add(value) {
            tracing::error!(error = %e, "a value could not be bound");
        }
        self
    }
}

/// The lock's row.
#[derive(sqlx::FromRow)]
struct LockRow {
    head_revision: i64,
    last_write_us: i64,
    memory_caps: String,
    request_hash: Option<Vec<u8>>,
    reply: Option<Vec<u8>>,
}

impl Backend for Lanes {
    type Db = Sqlite;
    /// The write's changes as one query in a savepoint (`Apply`), sent in front of the
    /// lane's next statement.
    type Changes = Statements;
    const BEGIN: &'static str = "BEGIN IMMEDIATE";
    const LANES: usize = 1;
    const MAX_BATCH: usize = 64;

    fn lock<'c>(
        conn: &'c mut SqliteConnection,
        changes: Option<Statements>,
        lock: &'c Lock,
        _bounded: bool,
    ) -> BoxFuture<'c, Locking> {
        // The database's write lock is the batch's: nothing is ever locked elsewhere.
        Box::pin(async move {
            let (applied, read) = after(conn, changes, |query| locking(query, lock)).await;
            let taken = match read {
                Ok(rows) => take_lock(conn, lock, rows).await.map(Some),
                Err(e) => Err(e),
            };
            Locking { applied, taken }
        })
    }

    fn apply(conn: &mut SqliteConnection, changes: Statements) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move { after(conn, Some(changes), |_| {}).await.0 })
    }

    fn commit(conn: &mut SqliteConnection, changes: Option<Statements>) -> BoxFuture<'_, Committing> {
        Box::pin(async move {
            let (applied, committed) = after(conn, changes, |query| {
                query.push("COMMIT");
            })
            .await;
            let committed = committed.map(drop);
            Committing { applied, committed }
        })
    }
}

/// Sends `changes` (a write's, in their savepoint) and then `then`, as one query: whether
/// the changes were made, and the rows of `then`'s statements. A query stops at its first
/// failing statement, and the savepoint says where: still open, the changes failed (they
/// are rolled back, and `then` is sent alone); released, `then` did.
async fn after(
    conn: &mut SqliteConnection,
    changes: Option<Statements>,
    then: impl Fn(&mut Statements),
) -> (Result<()>, Result<Vec<Vec<SqliteRow>>>) {
    let alone = |then: &dyn Fn(&mut Statements)| {
        let mut query = Statements::default();
        then(&mut query);
        query
    };
    let Some(mut query) = changes else { return (Ok(()), send(conn, alone(&then)).await) };
    let skip = query.count;
    then(&mut query);
    match send(conn, query).await {
        Ok(rows) => (Ok(()), Ok(rows.into_iter().skip(skip).collect())),
        Err(e) => {
            let undo = "ROLLBACK TO SAVEPOINT apply; RELEASE SAVEPOINT apply";
            match sqlx::raw_sql(undo).execute(&mut *conn).await {
                Ok(_) => (Err(e), send(conn, alone(&then)).await),
                Err(_) => (Ok(()), Err(e)),
            }
        }
    }
}

/// Sends `query`; rows by statement.
async fn send(conn: &mut SqliteConnection, query: Statements) -> Result<Vec<Vec<SqliteRow>>> {
    if query.count == 0 {
        return Ok(Vec::new());
    }
    let query = sqlx::query_with(sqlx::AssertSqlSafe(query.sql), query.args);
    Ok(super::rows_by_statement(sqlx::Executor::fetch_many(conn, query)).await?)
}

async fn take_lock(conn: &mut SqliteConnection, lock: &Lock, mut rows: Vec<Vec<SqliteRow>>) -> Result<Taken> {
    if rows.first().is_none_or(Vec::is_empty) {
        // The project's first write makes its row.
        sqlx::query(sql::CREATE_PROJECT).bind(&lock.project).execute(&mut *conn).await?;
        let mut query = Statements::default();
        locking(&mut query, lock);
        rows = send(conn, query).await?;
    }
    let of = |i: usize| rows.get(i).map(Vec::as_slice).unwrap_or_default();
    // Rows by statement: the lock, the first read.
    let row = of(0).first().ok_or_else(|| Error::internal("the project lock returned no row"))?;
    let row = LockRow::from_row(row)?;
    let first = match &lock.first_read {
        Some(FirstRead::Record(record)) => {
            let state = of(1).iter().map(RecordStateRow::from_row).collect::<Result<Vec<_>, _>>()?;
            Some(FirstReadDone::Record(record.to_owned(), record_state(state)))
        }
        Some(FirstRead::Session(id)) => {
            let session = of(1).first().map(Session::from_row).transpose()?.map(Box::new);
            Some(FirstReadDone::Session(id.to_owned(), session))
        }
        None => None,
    };
    let earlier = match (row.request_hash, row.reply) {
        (Some(request_hash), Some(reply)) => Some(EarlierRequest { request_hash, reply }),
        _ => None,
    };
    let locked = Locked {
        revision: row.head_revision,
        now_us: row.last_write_us,
        memory_caps: row.memory_caps,
        earlier,
    };
    Ok(Taken { locked, first })
}

/// The lock's row and the write's first read, after `query`'s statements.
fn locking(query: &mut Statements, lock: &Lock) {
    query.push(sql::LOCK).bind(&lock.project).bind(lock.request_id.as_deref());
    query.bind(&lock.project).bind(lock.request_id.as_deref()).bind(&lock.project);
    match &lock.first_read {
        Some(FirstRead::Record(record)) => {
            query.push(sql::RECORD_STATE).bind(&lock.project).bind(record).bind(&lock.project).bind(record);
        }
        Some(FirstRead::Session(id)) => {
            query.push(sql::SESSION).bind(id).bind(&lock.project);
        }
        None => {}
    }
}

impl Apply for SqliteTx {
    /// All of it as one query, in a savepoint, sent in front of the lane's next statement
    /// (`Lanes`): a statement that fails rolls back the write's other changes, and no other
    /// write's.
    async fn apply(&mut self, kept: Kept) -> Result<()> {
        let mut query = Statements::default();
        query.push("SAVEPOINT apply");
        for change in &kept.changes {
            push_change(&mut query, &self.project, change);
        }
        push_log(&mut query, &self.project, &kept.log);
        let head = kept.log.head.unwrap_or(self.revision);
        query.push(sql::SET_PROJECT).bind(head).bind(self.now_us);
        query.bind(self.memory.then_some(self.revision)).bind(&self.project);
        query.push("RELEASE SAVEPOINT apply");
        self.defer(query);
        Ok(())
    }
}

impl crate::store::WriteTx for SqliteTx {
    async fn record_state(&mut self, record: &str) -> Result<RecordState> {
        if let Some(state) = FirstReadDone::record(&mut self.first, record) {
            return Ok(state);
        }
        let rows: Vec<RecordStateRow> = sqlx::query_as(sql::RECORD_STATE)
            .bind(&self.project)
            .bind(record)
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
            Asked::Checkpoint(id) => {
                sqlx::query_as(sql::CHECKPOINT_SESSION).bind(&self.project).bind(id).bind(&self.project)
            }
            Asked::Latest => sqlx::query_as(sqlx::AssertSqlSafe(sql::LATEST_ENDED.as_str()))
                .bind(&self.project)
                .bind(&self.project)
                .bind(&self.project),
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
        let digests = serde_json::to_string(digests).map_err(Error::internal)?;
        Ok(sqlx::query_scalar(sql::MISSING_CHUNKS)
            .bind(digests)
            .bind(&self.project)
            .fetch_all(&mut *self.conn)
            .await?)
    }

    async fn entry(&mut self, id: &str) -> Result<Option<Entry>> {
        let row: Option<MemoryRow> =
            sqlx::query_as(sql::ENTRY).bind(id).bind(&self.project).fetch_optional(&mut *self.conn).await?;
        Ok(row.as_ref().map(MemoryRow::to_entry))
    }
}

fn push_change(query: &mut Statements, project: &str, change: &Change) {
    match change {
        Change::DeleteRecord { record } => {
            query.push(sql::DELETE_RECORD).bind(project).bind(record.as_str());
        }
        Change::DeleteEntries { ids } => {
            for id in ids {
                query.push(sql::DELETE_ENTRY).bind(project).bind(id.as_str());
            }
        }
        Change::Evict { ids } => {
            for id in ids {
                query.push(sql::EVICT_ENTRY).bind(project).bind(id.as_str());
            }
        }
        Change::InsertEntries { record, entries } => {
            for e in entries {
                query.push(sql::INSERT_ENTRY).bind(e.id.as_str()).bind(project);
                query
                    .bind(e.category.as_str())
                    .bind(e.branch.as_str())
                    .bind(e.key.as_str())
                    .bind(record.as_str());
                query.bind(e.content.as_str()).bind(e.rationale.as_str()).bind(encode_actor(&e.author));
                query.bind(e.revision).bind(e.seq).bind(e.created_us).bind(e.evicted);
            }
        }
        Change::PutRecordVersion { record, revision, written_us, author } => {
            query.push(sql::PUT_RECORD_VERSION).bind(project).bind(record.as_str());
            query.bind(*revision).bind(*written_us).bind(encode_actor(author));
        }
        Change::SetMemoryCaps { json } => {
            query.push(sql::SET_MEMORY_CAPS).bind(json.as_str()).bind(project);
        }
        Change::InsertSession(s) => push_insert_session(query, s),
        Change::PutSession(s) => push_put_session(query, s),
        Change::InsertCheckpoint(c) => push_insert_checkpoint(query, c),
        Change::Maintenance(m) => super::maintenance::push(query, project, m),
        Change::Index(index) => push_index(query, project, index),
        Change::PutWrites(writes) => push_put_writes(query, project, writes),
        Change::Items(change) => super::items::push(query, project, change),
        Change::Reservations(change) => super::reservations::push(query, project, change),
        Change::Commits(change) => super::commit_links::push(query, project, change),
    }
}

/// The search index's changes; FTS5 follows `search_docs` by its triggers (the migration
/// `search`).
fn push_index(query: &mut Statements, project: &str, index: &Index) {
    match index {
        Index::Put(d) => {
            query.push(sql::INDEX_PUT).bind(project).bind(d.kind as i64).bind(d.record_id.as_str());
            query.bind(d.record.as_str()).bind(d.session_id.as_str()).bind(d.branch.as_str());
            query.bind(d.author.as_str()).bind(d.created_us).bind(d.revision).bind(d.body.as_str());
            query.bind(fts5_text(project, &d.words));
        }
        Index::Retext { kind, record_id, body, words } => {
            query.push(sql::INDEX_RETEXT).bind(body.as_str()).bind(fts5_text(project, words));
            query.bind(project).bind(*kind as i64).bind(record_id.as_str());
        }
        Index::Drop { kind, record_ids } => {
            for id in record_ids {
                query.push(sql::INDEX_DROP).bind(project).bind(*kind as i64).bind(id.as_str());
            }
        }
        Index::DropRecord { record } => {
            query.push(sql::INDEX_DROP_RECORD).bind(project).bind(project).bind(record.as_str());
        }
    }
}

fn push_log(query: &mut Statements, project: &str, log: &Log) {
    for c in &log.conflicts {
        query.push(sql::INSERT_CONFLICT).bind(c.id.as_str()).bind(project).bind(c.revision);
        query.bind(c.body.as_slice());
    }
    for e in &log.events {
        query.push(sql::INSERT_EVENT).bind(project).bind(e.revision).bind(e.kind).bind(e.body.as_slice());
    }
    if let Some(r) = &log.request {
        query.push(sql::INSERT_REQUEST).bind(project).bind(r.request_id.as_str());
        query.bind(r.request_hash.as_slice()).bind(r.reply.as_slice()).bind(r.created_us);
    }
}

fn push_insert_session(query: &mut Statements, s: &Session) {
    query.push(sql::INSERT_SESSION).bind(s.id.as_str()).bind(s.project.as_str()).bind(s.agent);
    query
        .bind(s.agent_session_id.as_str())
        .bind(s.host.as_str())
        .bind(s.user_name.as_str())
        .bind(s.cwd.as_str());
    query
        .bind(s.branch.as_str())
        .bind(s.goal.as_str())
        .bind(s.status)
        .bind(s.lease_ttl_ms)
        .bind(s.last_seen_us);
    query.bind(s.head_checkpoint_id.as_deref()).bind(s.git_base.as_str()).bind(s.git_head.as_str());
    query
        .bind(s.summary.as_str())
        .bind(s.tool_count)
        .bind(s.resumed_from.as_deref())
        .bind(s.resumed_by.as_deref());
    query.bind(s.metadata.as_str()).bind(s.created_us).bind(s.updated_us).bind(s.revision).bind(s.written_us);
    query
        .bind(s.author.as_slice())
        .bind(s.head_revision)
        .bind(s.head_written_us)
        .bind(s.head_author.as_slice());
    query.bind(s.thread_key.as_deref()).bind(s.thread_ns.as_deref()).bind(s.revision);
}

fn push_put_session(query: &mut Statements, s: &Session) {
    query
        .push(sql::PUT_SESSION)
        .bind(s.agent_session_id.as_str())
        .bind(s.branch.as_str())
        .bind(s.goal.as_str());
    query.bind(s.status).bind(s.last_seen_us).bind(s.head_checkpoint_id.as_deref()).bind(s.git_head.as_str());
    query.bind(s.summary.as_str()).bind(s.tool_count).bind(s.resumed_by.as_deref()).bind(s.metadata.as_str());
    query
        .bind(s.updated_us)
        .bind(s.revision)
        .bind(s.written_us)
        .bind(s.author.as_slice())
        .bind(s.head_revision);
    query.bind(s.head_written_us).bind(s.head_author.as_slice()).bind(s.id.as_str()).bind(s.project.as_str());
}

fn push_insert_checkpoint(query: &mut Statements, c: &Checkpoint) {
    // In `checkpoint_columns!`'s order.
    query
        .push(&sql::INSERT_CHECKPOINT)
        .bind(c.id.as_str())
        .bind(c.session_id.as_str())
        .bind(c.project.as_str());
    query.bind(c.parent_id.as_deref()).bind(c.kind).bind(c.reason.as_str()).bind(c.state.as_slice());
    query.bind(c.payload_content_type.as_str()).bind(c.compression.as_str()).bind(c.size_bytes);
    query.bind(c.digest.as_str()).bind(c.created_us).bind(c.revision).bind(c.author.as_slice());
    query.bind(c.blobs.as_slice()).bind(c.state_digest.as_deref()).bind(c.ordered_key.as_deref());
    query.bind(c.metadata.as_deref()).bind(c.run_id.as_deref()).bind(c.payload.as_slice());
}

fn push_put_writes(query: &mut Statements, project: &str, writes: &[PendingWrite]) {
    for w in writes {
        query.push(sql::PUT_WRITE).bind(w.checkpoint_id.as_str()).bind(w.task_id.as_str()).bind(w.idx);
        query.bind(project).bind(w.channel.as_str()).bind(w.task_path.as_str()).bind(w.value_type.as_str());
        query.bind(w.value.as_slice()).bind(w.revision);
    }
}
