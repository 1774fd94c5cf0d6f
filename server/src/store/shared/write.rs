// The old write machinery, still used by the writes that have not moved to `service/`
// (resume, checkpoints, purge, retention, transfer): lock the project row (allocating the
// revision), deduplicate by request_id, emit exactly one event per revision, commit, wake
// the readers. Included into `sqlite/mod.rs` and `postgres/mod.rs`, where `Db`, `Conn`, `Tx`, `Pool`,
// `Backend` (with its `writer`), `plain_write`, `open_statement`, `close_statements`,
// `announce`, `lock_project`, `now_us!` and `greatest!` are the backend's own.
//
// Every statement costs a hand-off (SQLite's connection thread, a Postgres round trip), and
// a write holds the project lock from its first statement to its commit, so a write is kept
// to few statements: the lock also looks up the request id; a write's events, conflicts,
// stored reply go out together at the end (`Combined`).

use std::collections::{HashMap, HashSet};

use baton_proto::v1::{
    Actor, CheckpointRef, Conflict, Event, EventKind, MemoryChange, SessionStatus,
};
use prost::Message;

use crate::error::{Error, Result};
use crate::store::rows::{decode_actor, decode_conflict, decode_event, ts};
#[allow(unused_imports)] // used only when the failpoints feature is on
use crate::service::write::injected;
use crate::store::WriteCtx;

/// A write transaction in progress.
struct Write {
    tx: Tx,
    project: String,
    now_us: i64,
    /// A revision allocated but not yet given its event.
    pending: Option<i64>,
    /// The revision the lock allocated (the project's head as far as the database knows).
    locked: i64,
    last: i64,
    /// (event kind, conflict outcome) of each event, for the metrics once committed.
    emitted: Vec<(i32, Option<i32>)>,
    /// Encoded events (revision, kind, body) and conflicts (id, revision, body), inserted by
    /// `finish` together with the stored reply.
    events: Vec<(i64, i32, Vec<u8>)>,
    conflicts: Vec<(String, i64, Vec<u8>)>,
    /// Changes that need no answer before the commit, sent with the log by `finish`.
    deferred: Combined,
    /// The write's `written_at` was after its `client_now` and was clamped (its events say so).
    clamped: bool,
}

/// Where each part of a project lock's query is, counted in statements: each statement's
/// rows come before its completion.
struct LockLayout {
    lock: usize,
    /// The request id lookup, where it is a statement of its own.
    request: Option<usize>,
}

/// The rows of a query of several statements, by statement: each statement's rows come
/// before its completion. One list per statement, and one more (empty) after the last.
async fn rows_by_statement<S>(mut results: S) -> Result<Vec<Vec<Row>>, sqlx::Error>
where
    S: futures::Stream<Item = Result<sqlx::Either<<Db as sqlx::Database>::QueryResult, Row>, sqlx::Error>> + Unpin,
{
    use futures::TryStreamExt;

    let (mut rows, mut current) = (Vec::new(), Vec::new());
    while let Some(item) = results.try_next().await? {
        match item {
            sqlx::Either::Left(_) => rows.push(std::mem::take(&mut current)),
            sqlx::Either::Right(row) => current.push(row),
        }
    }
    rows.push(current);
    Ok(rows)
}

/// Decodes the rows of a project lock's query (`lock_project`), by statement: the lock's
/// row (`L`) and the request id lookup's row where it has its own statement.
async fn lock_rows<L, S>(
    results: S,
    layout: LockLayout,
) -> Result<(L, (Option<Vec<u8>>, Option<Vec<u8>>)), sqlx::Error>
where
    L: for<'r> sqlx::FromRow<'r, Row>,
    S: futures::Stream<Item = Result<sqlx::Either<<Db as sqlx::Database>::QueryResult, Row>, sqlx::Error>> + Unpin,
{
    use sqlx::FromRow;

    let rows = rows_by_statement(results).await?;
    let of = |at: usize| rows.get(at).map(Vec::as_slice).unwrap_or_default();
    let lock = of(layout.lock)
        .first()
        .ok_or_else(|| sqlx::Error::Protocol("the project lock returned no row".into()))
        .and_then(L::from_row)?;
    let request = match layout.request.and_then(|at| of(at).first()) {
        Some(row) => FromRow::from_row(row)?,
        None => (None, None),
    };
    Ok((lock, request))
}

/// A write transaction: a savepoint in the batch of `project`'s lane (see `writer.rs`), or
/// with `fresh` at the head of a batch of its own. Its first statement is the project lock,
/// which sends the savepoint's opening where the backend lets writes send it.
async fn begin_write(store: &Backend, project: &str, fresh: bool) -> Result<Tx> {
    Ok(store.writer.lease(project, fresh, true).await?)
}

/// A bounded wait for the project lock ran out (SQLSTATE 55P03, lock_not_available). Only
/// a bounded lease (Postgres, see `Lease::bounded`) waits with a bound.
fn lock_ran_out(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Database(db) if db.code().as_deref() == Some("55P03"))
}

/// What the project lock returns: the write's revision and time (µs), the project's memory
/// caps (JSON), and the stored hash and reply of an earlier request with this request id.
type Locked = (i64, i64, String, Option<Vec<u8>>, Option<Vec<u8>>);

/// Rows per INSERT when a write logs many events (an import): well under both databases'
/// limits on bound parameters.
const ROWS_PER_INSERT: usize = 200;

#[allow(clippy::large_enum_variant)] // built once per write and matched at once: boxing buys nothing
enum Begun {
    Fresh(Write),
    /// An earlier request with the same request_id (these writes have none).
    Replay,
}

impl Backend {
    /// Begins a write that may change the project's memory: its lock also records the
    /// write's revision as the project's `memory_revision`, which tells briefs that their
    /// cached memory section is out of date (`MemoryCache`).
    async fn begin_memory(&self, project: &str, ctx: &WriteCtx) -> Result<Begun> {
        self.begin_with(project, ctx, true).await
    }


    async fn begin_with(&self, project: &str, ctx: &WriteCtx, memory: bool) -> Result<Begun> {
        // A write that joins a batch holding other projects waits for its own lock only
        // briefly (`Lease::bounded`); if that runs out, it starts again at the head of a
        // batch of its own, which holds nothing while it waits.
        let mut fresh = false;
        let (tx, (revision, now_us, _caps, stored_hash, stored_reply)) = loop {
            let mut tx = begin_write(self, project, fresh).await?;
            match lock_project(&mut tx, project, ctx.request_id.as_deref(), memory).await {
                Ok(locked) => break (tx, locked),
                Err(e) if tx.bounded() && lock_ran_out(&e) => {
                    tx.rollback().await?;
                    fresh = true;
                }
                Err(e) => return Err(e.into()),
            }
        };
        fail::fail_point!("write.after_lock", |_| Err(injected("write.after_lock")));
        if let (Some(request_id), Some(hash), Some(reply)) = (&ctx.request_id, stored_hash, stored_reply) {
            // Nothing of this transaction is kept: the revision is not used.
            tx.rollback().await?;
            if hash != ctx.request_hash {
                return Err(Error::InvalidArgument(format!(
                    "write.request_id: {request_id:?} was already used for a different request in \
                     project {project:?}; a new write needs a new request_id"
                )));
            }
            drop(reply);
            return Ok(Begun::Replay);
        }
        Ok(Begun::Fresh(Write {
            tx,
            project: project.to_owned(),
            now_us,
            pending: Some(revision),
            locked: revision,
            last: revision,
            emitted: Vec::new(),
            events: Vec::new(),
            conflicts: Vec::new(),
            deferred: Combined::new(),
            clamped: ctx.clamped(),
        }))
    }
}

impl Write {
    /// The revision the next event will get (allocated on first ask). The project lock is
    /// held, so the next number is this write's to take; `finish` records the new head.
    fn revision(&mut self) -> i64 {
        if let Some(revision) = self.pending {
            return revision;
        }
        let revision = self.last + 1;
        self.pending = Some(revision);
        self.last = revision;
        revision
    }

    /// Records the event of the pending revision (and its conflict, if any); returns it as
    /// stored, its conflict stamped with project, revision and time.
    async fn emit(&mut self, mut event: Event) -> Result<Event> {
        let revision = self.revision();
        self.pending = None;
        event.project = self.project.clone();
        event.revision = revision;
        event.at = Some(ts(self.now_us));
        event.written_at_clamped = self.clamped;
        if let Some(conflict) = event.conflict.as_mut() {
            conflict.project = self.project.clone();
            conflict.revision = revision;
            conflict.at = Some(ts(self.now_us));
            self.conflicts.push((conflict.id.clone(), revision, conflict.encode_to_vec()));
        }
        fail::fail_point!("write.before_event", |_| Err(injected("write.before_event")));
        self.emitted.push((event.kind, event.conflict.as_ref().map(|c| c.outcome)));
        self.events.push((revision, event.kind, event.encode_to_vec()));
        Ok(event)
    }

    /// Stores the reply for idempotency, commits and wakes the project's readers.
    async fn finish(mut self, store: &Backend, ctx: &WriteCtx, reply: &impl Message) -> Result<()> {
        if self.pending.is_some() {
            // A revision without its event would be a gap in the log: refuse to commit.
            return Err(Error::internal("write allocated a revision without an event"));
        }
        fail::fail_point!("write.before_reply", |_| Err(injected("write.before_reply")));
        // Deferred changes, conflicts, events and the stored reply: one statement (or a few for a
        // write with very many events).
        let mut log = std::mem::replace(&mut self.deferred, Combined::new());
        for chunk in self.conflicts.chunks(ROWS_PER_INSERT) {
            log.statement().push("INSERT INTO conflicts (id, project, revision, body) ").push_values(chunk, |mut row, (id, revision, body)| {
                row.push_bind(id.clone()).push_bind(self.project.clone()).push_bind(*revision).push_bind(body.clone());
            });
        }
        for (i, chunk) in self.events.chunks(ROWS_PER_INSERT).enumerate() {
            if i > 0 && i % 25 == 0 {
                // Keep a single query's parameters well under the limits.
                std::mem::replace(&mut log, Combined::new()).execute(&mut self.tx).await?;
            }
            log.statement().push("INSERT INTO events (project, revision, kind, body) ").push_values(chunk, |mut row, (revision, kind, body)| {
                row.push_bind(self.project.clone()).push_bind(*revision).push_bind(*kind).push_bind(body.clone());
            });
        }
        if let Some(request_id) = &ctx.request_id {
            log.statement()
                .push("INSERT INTO requests (project, request_id, request_hash, reply, created_us) VALUES (")
                .push_bind(self.project.clone())
                .push(", ")
                .push_bind(request_id.clone())
                .push(", ")
                .push_bind(ctx.request_hash.clone())
                .push(", ")
                .push_bind(reply.encode_to_vec())
                .push(", ")
                .push_bind(self.now_us)
                .push(")");
        }
        if self.last > self.locked {
            // Revisions after the lock's were taken in memory: record the head.
            log.statement()
                .push("UPDATE projects SET head_revision = ")
                .push_bind(self.last)
                .push(" WHERE key = ")
                .push_bind(self.project.clone());
        }
        fail::fail_point!("write.before_commit", |_| Err(injected("write.before_commit")));
        // The log rides with the commit where the backend's writer can send them together.
        match log.into_query() {
            Some(last) => self.tx.commit_after(last).await?,
            None => self.tx.commit().await?,
        }
        crate::metrics::record_commit(&self.emitted);
        store.wakers.wake(&self.project);
        announce(store, &self.project, self.last);
        // Committed, but the reply is lost (as when the network drops it): a retry with the
        // same request_id must get the stored reply.
        fail::fail_point!("write.after_commit", |_| Err(injected("write.after_commit")));
        Ok(())
    }
}

/// Statements sent as one query: one hand-off to SQLite's connection thread, one round trip
/// to Postgres. How statements are joined is the backend's (`open_statement`,
/// `close_statements`: SQLite runs `;`-separated statements in order, Postgres takes them
/// as data-modifying CTEs of one statement).
struct Combined {
    sql: sqlx::QueryBuilder<Db>,
    statements: usize,
}

impl Combined {
    fn new() -> Self {
        Self { sql: sqlx::QueryBuilder::new(""), statements: 0 }
    }

    /// Starts the next statement; write it into the returned builder.
    fn statement(&mut self) -> &mut sqlx::QueryBuilder<Db> {
        open_statement(&mut self.sql, self.statements);
        self.statements += 1;
        &mut self.sql
    }

    async fn execute(self, conn: &mut Conn) -> Result<()> {
        if let Some(mut query) = self.into_query() {
            query.build().execute(conn).await?;
        }
        Ok(())
    }

    /// The finished query; `None` if it has no statement.
    fn into_query(mut self) -> Option<sqlx::QueryBuilder<Db>> {
        (self.statements > 0).then(|| {
            close_statements(&mut self.sql);
            self.sql
        })
    }
}



/// Builds the conflict of a write that was not simply applied (`core::conflict`).
/// The project's head revision (0 for an unknown project).
async fn head_revision(conn: &mut Conn, project: &str) -> Result<i64> {
    let head: Option<(i64,)> = sqlx::query_as("SELECT head_revision FROM projects WHERE key = $1")
        .bind(project)
        .fetch_optional(&mut *conn)
        .await?;
    Ok(head.map_or(0, |(h,)| h))
}

