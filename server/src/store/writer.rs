//! The batching writer (group commit), for both backends.
//!
//! One task owns a write transaction and lends its connection to one write at a time, each
//! inside its own savepoint (ARCHITECTURE.md: a write's rejection or failure rolls back
//! alone). Writes that queue while one runs join the same transaction, which commits when
//! the queue is empty (or the batch is full); each write answers only after that commit, so
//! nothing is acknowledged before it is durable.
//!
//! Why: every statement is a hand-off (SQLite's connection thread, a Postgres round trip)
//! and every transaction pays its BEGIN, COMMIT and commit record. On SQLite, concurrent
//! writers left to the pool also queue on SQLite's busy handler, which sleeps (1, 2, 5,
//! 10 … ms) instead of handing over the lock when it is free. On Postgres, writers of one
//! hot project queue on its row lock and all wake at each commit; in a batch, the lock is
//! taken once and held while the batch's writes run back to back.
//!
//! SQLite has one write lock per database: one lane. Postgres takes row locks per project:
//! `lanes` writers, each project always on the same lane, so a batch never waits for
//! another lane's batch of the same server. Across servers sharing one database, a batch
//! that already holds some projects' locks waits only briefly for another's
//! ([`Lease::bounded`]); if that runs out, the write starts again at the head of a fresh
//! batch ([`Writer::lease`] with `fresh`), which holds nothing while it waits. So no cycle
//! of waits can form between batches of different servers. The price of lanes: a write
//! that waits for a lock held outside Baton (an open psql transaction on a project row)
//! holds up its lane, not only its project; Baton's own batches hold locks for milliseconds.
//!
//! A write holds a [`Lease`]: the connection, dereferencing to the backend's connection.
//! It ends with [`Lease::commit`] (kept; waits for the batch's commit) or
//! [`Lease::rollback`]; a lease dropped without either (an error, a cancelled request) is
//! rolled back.

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::pool::PoolConnection;
use sqlx::{Connection, Database, Executor, IntoArguments, Pool, QueryBuilder};
use tokio::sync::{mpsc, oneshot};

const LOST: &str = "the write's connection was lost";

type Reply<DB> = oneshot::Sender<Result<Lease<DB>, String>>;
type Committed = oneshot::Sender<Result<(), sqlx::Error>>;

/// How a backend batches its writes.
#[derive(Clone, Copy, Debug)]
pub struct Dialect {
    /// Opens a batch's transaction.
    pub begin: &'static str,
    /// Writes per transaction at most: bounds the wait of the batch's first write (and, on
    /// Postgres, keeps a transaction's subtransactions within the 64 that each backend
    /// tracks in shared memory; beyond them every snapshot in the cluster gets slower).
    pub max_batch: usize,
    /// Writers, each with its own transaction; a project always uses the same one.
    pub lanes: usize,
    /// Whether a batch's waits for a project lock it does not hold yet are bounded (other
    /// servers may batch the same projects in another order).
    pub bound_new_projects: bool,
    /// Whether a write that asks to (`Writer::lease` with `opens`) sends its own savepoint
    /// statements with its first statement ([`Lease::take_opening`]) instead of the writer
    /// sending them alone: one round trip less per write where each costs one (Postgres).
    pub writes_open_savepoints: bool,
    /// With `writes_open_savepoints`: a batch's first write also sends its `BEGIN` if the
    /// lane's connection answered less than this long ago (trusted to be alive, as the
    /// pool trusts its idle connections); otherwise the writer begins alone, so that a
    /// connection that broke while idle is replaced before a write sees it.
    pub trust_idle_for: Duration,
    /// Whether the writer sends a write's last statements ([`Lease::commit_after`]) in
    /// front of its own next ones (the batch's COMMIT, the next write's savepoint), as one
    /// query: one hand-off less per write. Only where a query may hold several statements
    /// with bound parameters (SQLite); elsewhere the write sends them itself.
    pub writer_sends_last: bool,
}

/// One write waiting for the connection.
struct Job<DB: Database> {
    project: String,
    /// Must be the first write of its batch.
    fresh: bool,
    /// Will send its savepoint statements itself (see `Dialect::writes_open_savepoints`).
    opens: bool,
    /// Needs no savepoint: it makes its changes in a subtransaction of its own, and nothing
    /// before them (see `Writer::lease_own`).
    own: bool,
    reply: Reply<DB>,
}

/// What a lane's task is asked to do.
enum Message<DB: Database> {
    Write(Job<DB>),
    /// Give the lane's connection back to the pool (it is closing), then say so.
    Close(oneshot::Sender<()>),
}

/// A handle to the database's writer tasks (cheap to clone).
pub struct Writer<DB: Database> {
    lanes: Arc<[mpsc::UnboundedSender<Message<DB>>]>,
}

impl<DB: Database> Clone for Writer<DB> {
    fn clone(&self) -> Self {
        Self { lanes: self.lanes.clone() }
    }
}

/// What a write gives back when it is done with the connection.
struct Returned<DB: Database> {
    conn: PoolConnection<DB>,
    /// `Some` = keep the write (and tell it when the batch commits); `None` = roll it back.
    keep: Option<Committed>,
    /// Whether its savepoint may exist: its opening was sent by the writer, or taken by the
    /// write (which may or may not have reached the database).
    opened: bool,
    /// A kept write's last statements, for the writer to send (`Dialect::writer_sends_last`).
    last: Option<QueryBuilder<DB>>,
}

/// The writer's connection, lent to one write inside its savepoint.
pub struct Lease<DB: Database> {
    conn: Option<PoolConnection<DB>>,
    back: Option<oneshot::Sender<Returned<DB>>>,
    bounded: bool,
    /// The savepoint statements the write is to send ahead of its first statement.
    opening: Option<String>,
    opened: bool,
    /// `Dialect::writer_sends_last`.
    writer_sends_last: bool,
}

impl<DB: Database> Writer<DB>
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
{
    /// Starts the writer tasks for `pool`; they end when the last handle is dropped.
    pub fn spawn(pool: &Pool<DB>, dialect: Dialect) -> Self {
        let lanes: Vec<_> = (0..dialect.lanes.max(1))
            .map(|_| {
                let (queue, jobs) = mpsc::unbounded_channel();
                tokio::spawn(run(pool.clone(), dialect, jobs));
                queue
            })
            .collect();
        Self { lanes: lanes.into() }
    }

    /// Waits for the connection, inside a fresh savepoint of the current transaction of
    /// `project`'s lane; with `fresh`, of a transaction that holds nothing yet. With `opens`,
    /// the write promises to send [`Lease::take_opening`] ahead of its first statement
    /// (the savepoint is then its own to open, where the dialect allows it).
    pub async fn lease(&self, project: &str, fresh: bool, opens: bool) -> Result<Lease<DB>, sqlx::Error> {
        self.send(project, fresh, opens, false).await
    }

    /// Like `lease`, for a write that needs no savepoint from the writer: it changes nothing
    /// until one statement that makes all its changes in a subtransaction of its own (which
    /// rolls back alone if it fails, as a savepoint would), so a write that is refused, or
    /// fails before that statement, leaves nothing to undo. The writer sends nothing for it:
    /// a round trip less per write where each statement costs one (Postgres).
    pub async fn lease_own(&self, project: &str, fresh: bool) -> Result<Lease<DB>, sqlx::Error> {
        self.send(project, fresh, false, true).await
    }

    async fn send(
        &self,
        project: &str,
        fresh: bool,
        opens: bool,
        own: bool,
    ) -> Result<Lease<DB>, sqlx::Error> {
        let mut hasher = DefaultHasher::new();
        project.hash(&mut hasher);
        let lane = usize::try_from(hasher.finish()).unwrap_or(0) % self.lanes.len();
        let (reply, lease) = oneshot::channel();
        let job = Job { project: project.to_owned(), fresh, opens, own, reply };
        self.lanes[lane].send(Message::Write(job)).map_err(|_| stopped())?;
        match lease.await {
            Ok(Ok(lease)) => Ok(lease),
            Ok(Err(message)) => Err(io_error(message)),
            Err(_) => Err(stopped()),
        }
    }
}

impl<DB: Database> Writer<DB> {
    /// Gives the lanes' connections back to the pool, so that `Pool::close` can finish.
    /// Writes after this take a connection from the pool (and fail if it is closed).
    pub async fn close(&self) {
        for lane in self.lanes.iter() {
            let (done, closed) = oneshot::channel();
            if lane.send(Message::Close(done)).is_ok() {
                let _ = closed.await;
            }
        }
    }
}

impl<DB: Database> Lease<DB> {
    /// Whether this write joined a batch that holds other projects' locks but not its own:
    /// its lock must be taken with a bounded wait (and, if that runs out, the write
    /// started again with a fresh lease).
    pub fn bounded(&self) -> bool {
        self.bounded
    }

    /// The savepoint statements to send ahead of the write's first statement, in the same
    /// query (`;`-separated, for the simple query protocol); `None` when the writer already
    /// sent them, or once taken. Once taken, the write's savepoint counts as opened, even
    /// if the query fails: the writer then rolls back to it, or abandons the batch if it
    /// does not exist.
    pub fn take_opening(&mut self) -> Option<String> {
        let opening = self.opening.take();
        self.opened |= opening.is_some();
        opening
    }

    /// Keeps the write and waits until its transaction commits (durable on return).
    pub async fn commit(mut self) -> Result<(), sqlx::Error> {
        let (committed, outcome) = oneshot::channel();
        self.give_back(Some(committed), None);
        match outcome.await {
            Ok(result) => result,
            Err(_) => Err(stopped()),
        }
    }

    /// Runs the write's `last` statements, then keeps it as `commit` does. Where the
    /// dialect lets it (`Dialect::writer_sends_last`), the writer sends them together with
    /// what it sends next anyway. If that query fails while the write's savepoint still
    /// exists, the write alone is rolled back and gets the error (its own statements'
    /// almost always: the writer's `RELEASE` of it does not fail in practice); if the
    /// savepoint is gone (released, or the whole transaction rolled back by an error such
    /// as a full disk), the batch is abandoned and none of its writes is kept.
    pub async fn commit_after(mut self, last: QueryBuilder<DB>) -> Result<(), sqlx::Error>
    where
        for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
        DB::Arguments: IntoArguments<DB>,
    {
        if let Some(opening) = self.take_opening() {
            // Nothing was sent yet: the savepoint goes first, so `last` runs inside it.
            sqlx::raw_sql(sqlx::AssertSqlSafe(opening)).execute(&mut *self).await?;
        }
        let mut last = last;
        if !self.writer_sends_last {
            last.build().execute(&mut *self).await?;
            return self.commit().await;
        }
        let (committed, outcome) = oneshot::channel();
        self.give_back(Some(committed), Some(last));
        match outcome.await {
            Ok(result) => result,
            Err(_) => Err(stopped()),
        }
    }

    /// Rolls the write back (to its savepoint; the other writes of the batch are kept).
    #[allow(clippy::unused_async)] // the same shape as `sqlx::Transaction::rollback`
    pub async fn rollback(mut self) -> Result<(), sqlx::Error> {
        self.give_back(None, None);
        Ok(())
    }

    fn give_back(&mut self, keep: Option<Committed>, last: Option<QueryBuilder<DB>>) {
        if let (Some(conn), Some(back)) = (self.conn.take(), self.back.take()) {
            // If the writer is gone, so is the transaction: nothing to keep either way.
            let _ = back.send(Returned { conn, keep, opened: self.opened, last });
        }
    }
}

impl<DB: Database> Drop for Lease<DB> {
    fn drop(&mut self) {
        self.give_back(None, None);
    }
}

impl<DB: Database> Deref for Lease<DB> {
    type Target = DB::Connection;
    #[allow(clippy::expect_used)] // present from creation until commit/rollback consume the lease
    fn deref(&self) -> &DB::Connection {
        self.conn.as_ref().expect("lease holds its connection until it ends")
    }
}

impl<DB: Database> DerefMut for Lease<DB> {
    #[allow(clippy::expect_used)] // as above
    fn deref_mut(&mut self) -> &mut DB::Connection {
        self.conn.as_mut().expect("lease holds its connection until it ends")
    }
}

/// A lane's writer task: one transaction per batch of queued writes, a savepoint per write.
/// Rolling back to one can never undo another write: its name is never that of the only
/// other savepoint that may exist, the kept one still to be released (`savepoint_after`),
/// and a rollback to a savepoint that does not exist fails and abandons the batch. The
/// savepoint statements ride with others: the transaction's own (`BEGIN; SAVEPOINT w1`,
/// `COMMIT`), the write's first statement (`Dialect::writes_open_savepoints`), or the
/// previous write's end (`RELEASE w1; SAVEPOINT w2`). So a lone write costs no more
/// hand-offs than a plain transaction, and on Postgres a batched write none of its own.
#[expect(
    clippy::too_many_lines,
    reason = "one batch's state (began, release, upcoming, locked, waiting) moves together through this loop; \
              it is split when the writer's unit tests cover each of its transitions on both backends"
)]
async fn run<DB: Database>(pool: Pool<DB>, dialect: Dialect, mut jobs: mpsc::UnboundedReceiver<Message<DB>>)
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
{
    // A write that must start a batch of its own, taken off the queue while a batch ran.
    let mut carried: Option<Job<DB>> = None;
    // The lane keeps its connection between batches (sqlx pings a pool connection when it
    // is given back, and the pools may ping one when it is taken), with the time it last
    // answered the writer.
    let mut held: Option<(PoolConnection<DB>, Instant)> = None;
    let opens = |job: &Job<DB>| dialect.writes_open_savepoints && job.opens;
    loop {
        let first = match carried.take() {
            Some(job) => job,
            None => match jobs.recv().await {
                Some(Message::Write(job)) => job,
                Some(Message::Close(done)) => {
                    held = None;
                    let _ = done.send(());
                    continue;
                }
                None => return,
            },
        };
        let trusted = held.as_ref().is_some_and(|(_, answered)| answered.elapsed() < dialect.trust_idle_for);
        // Whether BEGIN was sent: else the next opening sent carries it.
        let (mut conn, mut began, mut answered) = match held.take() {
            Some((conn, answered)) if trusted && opens(&first) => (conn, false, answered),
            kept => {
                let begin_sql = if opens(&first) || first.own {
                    dialect.begin.to_owned()
                } else {
                    opening(Some(dialect.begin), None, "w1")
                };
                match begin(&pool, kept.map(|(conn, _)| conn), &begin_sql).await {
                    Ok(conn) => (conn, true, Instant::now()),
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot begin a write transaction");
                        let _ = first.reply.send(Err(e.to_string()));
                        continue;
                    }
                }
            }
        };
        let mut waiting: Vec<Committed> = Vec::new();
        // Projects whose locks this transaction holds (through writes it keeps).
        let mut locked: HashSet<String> = HashSet::new();
        let mut job = first;
        let mut lent = 1;
        // A kept write's savepoint, released with the next write's opening (or by COMMIT).
        let mut release: Option<&'static str> = None;
        // The next write's savepoint, when the writer opened it.
        let mut upcoming: Option<&'static str> = None;
        let mut closing: Option<oneshot::Sender<()>> = None;
        // Whether a write of its own ran in this batch (see `then_send`).
        let mut had_own = false;
        let error = loop {
            let bounded = dialect.bound_new_projects && !locked.is_empty() && !locked.contains(&job.project);
            let savepoint = upcoming.take().unwrap_or_else(|| savepoint_after(release));
            // The write sends its opening (the previous savepoint's release and its own), or
            // the writer already did.
            let begin = (!began).then_some(dialect.begin);
            let sent_by_write = opens(&job).then(|| opening(begin, release, savepoint));
            // A write of its own has no savepoint: nothing to release or undo for it.
            let own = job.own;
            had_own |= own;
            let (back, returned) = oneshot::channel();
            let lease = Lease {
                conn: Some(conn),
                back: Some(back),
                bounded,
                opened: !own && sent_by_write.is_none(),
                opening: sent_by_write,
                writer_sends_last: dialect.writer_sends_last,
            };
            // If the write is gone (its request was cancelled), the lease is dropped here and
            // comes straight back as a rollback.
            let _ = job.reply.send(Ok(lease));
            let Ok(Returned { conn: back, keep, opened, last }) = returned.await else {
                // The connection went with the lease: so did the transaction.
                break LOST.to_owned();
            };
            conn = back;
            let kept = keep.is_some();
            let newly_locked = kept && locked.insert(job.project.clone());
            waiting.extend(keep);
            // A rolled-back write's last statements are never sent.
            let last = last.filter(|_| kept);
            let mut next = None;
            if lent < dialect.max_batch {
                match jobs.try_recv() {
                    // It starts the next batch: this one ends here.
                    Ok(Message::Write(job)) if job.fresh => carried = Some(job),
                    Ok(Message::Write(job)) => next = Some(job),
                    // Closing: this batch ends here, and its connection goes back.
                    Ok(Message::Close(done)) => closing = Some(done),
                    Err(_) => {}
                }
            }
            // What the writer sends before the next write (or to end the batch): first
            // what becomes of this write.
            let mut sql = Vec::new();
            if opened {
                // BEGIN and the previous savepoint's release went with this write's opening,
                // or the writer sent them before lending.
                began = true;
                release = None;
                if kept {
                    release = Some(savepoint);
                } else {
                    // Fails if the savepoint does not exist (the opening never reached the
                    // database): then the batch is abandoned, never another write undone.
                    sql.push(undo(savepoint));
                }
            }
            let began_before = began;
            sql.extend(then_send(dialect, next.as_ref(), had_own, &mut began, &mut release, &mut upcoming));
            let sends = !sql.is_empty() || last.is_some();
            let sent = match last {
                None => send(&mut conn, &sql).await,
                Some(mut last) => {
                    if !sql.is_empty() {
                        last.push("; ").push(sql.join("; "));
                    }
                    match last.build().execute(&mut *conn).await {
                        Ok(_) => Ok(()),
                        // If the write's savepoint is still there, its own statements failed:
                        // it alone is rolled back, gets their error, and the writer sends its
                        // next statements again, without its release. If not (the writer's
                        // statements failed after the release, or the error rolled back the
                        // whole transaction), the batch is abandoned.
                        Err(e) => match send(&mut conn, &[undo(savepoint)]).await {
                            Ok(()) => {
                                if let Some(committed) = waiting.pop() {
                                    let _ = committed.send(Err(e));
                                }
                                if newly_locked {
                                    locked.remove(&job.project);
                                }
                                began = began_before;
                                release = None;
                                let sql = then_send(
                                    dialect,
                                    next.as_ref(),
                                    had_own,
                                    &mut began,
                                    &mut release,
                                    &mut upcoming,
                                );
                                send(&mut conn, &sql).await
                            }
                            Err(_) => Err(e),
                        },
                    }
                }
            };
            if sends {
                answered = Instant::now();
            }
            match (sent, next) {
                (Ok(()), Some(next)) => {
                    job = next;
                    lent += 1;
                }
                (Ok(()), None) => {
                    for w in waiting.drain(..) {
                        let _ = w.send(Ok(()));
                    }
                    held = Some((conn, answered));
                    break String::new();
                }
                (Err(e), next) => {
                    if let Some(next) = next {
                        let _ = next.reply.send(Err(e.to_string()));
                    }
                    abandon(conn).await;
                    break e.to_string();
                }
            }
        };
        if let Some(done) = closing {
            held = None;
            let _ = done.send(());
        }
        if waiting.is_empty() {
            continue;
        }
        tracing::warn!(error, writes = waiting.len(), "write transaction failed; its writes are not kept");
        for w in waiting {
            let _ = w.send(Err(io_error(format!("the write's transaction did not commit: {error}"))));
        }
    }
}

/// What the writer sends once a write is done with, after what becomes of that write: the
/// next write's opening if the writer sends it, or the end of the batch. Updates whether
/// BEGIN was sent, the savepoint still to release and the next write's savepoint.
fn then_send<DB: Database>(
    dialect: Dialect,
    next: Option<&Job<DB>>,
    had_own: bool,
    began: &mut bool,
    release: &mut Option<&'static str>,
    upcoming: &mut Option<&'static str>,
) -> Vec<String> {
    match next {
        // It needs no savepoint, but the transaction must have begun.
        Some(next) if next.own => {
            if *began {
                vec![]
            } else {
                *began = true;
                vec![dialect.begin.to_owned()]
            }
        }
        Some(next) if !(dialect.writes_open_savepoints && next.opens) => {
            let begin = (!*began).then_some(dialect.begin);
            let savepoint = savepoint_after(*release);
            *upcoming = Some(savepoint);
            *began = true;
            vec![opening(begin, release.take(), savepoint)]
        }
        // The release is kept at the end because on Postgres a COMMIT of a failed
        // transaction rolls it back without an error, where the RELEASE fails: a batch
        // never reports a commit that did not happen.
        // A write of its own that failed outside its subtransaction (an error of its lock or
        // its reads) leaves the transaction failed with no savepoint to show it: a statement
        // in front of the COMMIT fails then too.
        None if *began => vec![match release.take() {
            Some(last) => format!("RELEASE SAVEPOINT {last}; COMMIT"),
            None if had_own => "SELECT 1; COMMIT".to_owned(),
            None => "COMMIT".to_owned(),
        }],
        // No write sent anything: there is no transaction.
        Some(_) | None => vec![],
    }
}

/// Sends the writer's own statements (none: nothing to send).
async fn send<DB: Database>(conn: &mut PoolConnection<DB>, sql: &[String]) -> Result<(), sqlx::Error>
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
{
    if sql.is_empty() {
        return Ok(());
    }
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql.join("; "))).execute(&mut **conn).await.map(drop)
}

/// Rolls a write back to its savepoint; fails if the savepoint does not exist.
fn undo(savepoint: &str) -> String {
    format!("ROLLBACK TO SAVEPOINT {savepoint}; RELEASE SAVEPOINT {savepoint}")
}

/// The next write's savepoint: any name but that of the kept write whose release is still
/// to be sent (`pending`), which is the only one of the batch that may exist while the next
/// is opened. So two names do, and a write's opening, which a backend may send in front of
/// its first statement, comes in a handful of texts (each a statement the connection keeps
/// prepared), not one per place in the batch.
fn savepoint_after(pending: Option<&str>) -> &'static str {
    if pending == Some("w1") { "w2" } else { "w1" }
}

/// The statements that open a write's savepoint: the batch's BEGIN if not sent yet, the
/// previous write's release, its own savepoint.
fn opening(begin: Option<&str>, release: Option<&str>, savepoint: &str) -> String {
    let begin = begin.map(|b| format!("{b}; ")).unwrap_or_default();
    let release = release.map(|r| format!("RELEASE SAVEPOINT {r}; ")).unwrap_or_default();
    format!("{begin}{release}SAVEPOINT {savepoint}")
}

/// Begins a batch on the lane's connection, or on a new one if it has none or it broke while
/// idle (a database restart).
async fn begin<DB: Database>(
    pool: &Pool<DB>,
    held: Option<PoolConnection<DB>>,
    sql: &str,
) -> Result<PoolConnection<DB>, sqlx::Error>
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
{
    if let Some(mut conn) = held {
        match sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&mut *conn).await {
            Ok(_) => return Ok(conn),
            Err(e) => {
                tracing::debug!(error = %e, "the writer's connection broke while idle; taking another");
                abandon(conn).await;
            }
        }
    }
    let mut conn = pool.acquire().await?;
    if let Err(e) = sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&mut *conn).await {
        abandon(conn).await;
        return Err(e);
    }
    Ok(conn)
}

/// Rolls a failed transaction back and keeps the connection out of the pool: whatever
/// broke the transaction may have broken the connection.
async fn abandon<DB: Database>(mut conn: PoolConnection<DB>)
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
{
    let _ = sqlx::raw_sql("ROLLBACK").execute(&mut *conn).await;
    let _ = conn.detach().close().await;
}

fn io_error(message: String) -> sqlx::Error {
    sqlx::Error::Io(std::io::Error::other(message))
}

fn stopped() -> sqlx::Error {
    io_error("the database writer has stopped".to_owned())
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};
    use sqlx::{Sqlite, SqlitePool};

    use super::*;

    async fn pool(dir: &tempfile::TempDir) -> SqlitePool {
        let options =
            SqliteConnectOptions::from_str(&format!("sqlite://{}", dir.path().join("w.db").display()))
                .unwrap()
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal);
        let pool = SqlitePoolOptions::new().max_connections(4).connect_with(options).await.unwrap();
        sqlx::raw_sql("CREATE TABLE t (v TEXT PRIMARY KEY)").execute(&pool).await.unwrap();
        pool
    }

    /// A writer with `dialect` on a new database (which lives as long as the directory).
    async fn writer(dialect: Dialect) -> (tempfile::TempDir, SqlitePool, Writer<Sqlite>) {
        let dir = tempfile::tempdir().unwrap();
        let pool = pool(&dir).await;
        let writer = Writer::spawn(&pool, dialect);
        (dir, pool, writer)
    }

    async fn values(pool: &SqlitePool) -> Vec<String> {
        sqlx::query_scalar("SELECT v FROM t ORDER BY v").fetch_all(pool).await.unwrap()
    }

    const DIALECT: Dialect = Dialect {
        begin: "BEGIN IMMEDIATE",
        max_batch: 64,
        lanes: 1,
        bound_new_projects: true,
        writes_open_savepoints: false,
        trust_idle_for: Duration::ZERO,
        writer_sends_last: false,
    };

    async fn insert(lease: &mut Lease<Sqlite>, v: &str) -> Result<(), sqlx::Error> {
        sqlx::query("INSERT INTO t (v) VALUES ($1)").bind(v).execute(&mut **lease).await.map(drop)
    }

    /// Writes queued together share a transaction, yet each one's rollback (or failure, or
    /// being dropped half-way) undoes only its own statements; kept writes are visible to
    /// other connections as soon as their `commit` returns.
    #[tokio::test]
    async fn each_write_rolls_back_alone_within_a_batch() {
        let (_dir, pool, writer) = writer(DIALECT).await;
        // Hold the connection so the next writes queue up and join one batch.
        let mut first = writer.lease("p", false, false).await.unwrap();
        insert(&mut first, "a").await.unwrap();
        let tasks: Vec<_> = ["b", "c", "d", "e", "f"]
            .into_iter()
            .map(|v| {
                let writer = writer.clone();
                let pool = pool.clone();
                tokio::spawn(async move {
                    let mut lease = writer.lease("p", false, false).await.unwrap();
                    insert(&mut lease, v).await.unwrap();
                    match v {
                        "c" => lease.rollback().await.unwrap(),
                        // A failing statement after a good one: the whole write goes.
                        "d" => {
                            assert!(insert(&mut lease, "a").await.is_err(), "duplicate key");
                            drop(lease);
                        }
                        // Dropped without an end, as when a request is cancelled.
                        "e" => drop(lease),
                        _ => {
                            lease.commit().await.unwrap();
                            // Committed, so visible to any other connection, once it returns.
                            assert!(values(&pool).await.contains(&v.to_owned()));
                        }
                    }
                })
            })
            .collect();
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        first.commit().await.unwrap();
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(values(&pool).await, vec!["a", "b", "f"]);
        // The writer carries on after all that.
        let mut lease = writer.lease("p", false, false).await.unwrap();
        insert(&mut lease, "g").await.unwrap();
        lease.commit().await.unwrap();
        assert_eq!(values(&pool).await, vec!["a", "b", "f", "g"]);
    }

    /// Writes of their own (`lease_own`: no savepoint, their changes in one statement) share
    /// a batch with writes in savepoints: those kept commit with the batch, one dropped
    /// before changing anything leaves nothing, and a savepoint write's rollback next to
    /// them undoes only its own statements. A batch of own writes alone commits too.
    #[tokio::test]
    async fn writes_of_their_own_share_a_batch_with_savepoint_writes() {
        let (_dir, pool, writer) = writer(DIALECT).await;
        let mut first = writer.lease_own("p", false).await.unwrap();
        let released = sqlx::raw_sql("RELEASE SAVEPOINT w1").execute(&mut *first).await;
        assert!(released.is_err(), "the writer opened no savepoint for it");
        insert(&mut first, "a").await.unwrap();
        let spawn = |v: &'static str, own: bool, keep: bool| {
            let writer = writer.clone();
            tokio::spawn(async move {
                let mut lease = if own {
                    writer.lease_own("p", false).await
                } else {
                    writer.lease("p", false, false).await
                }
                .unwrap();
                if own && !keep {
                    // Refused before its one statement: nothing to undo.
                    return lease.rollback().await.unwrap();
                }
                insert(&mut lease, v).await.unwrap();
                if keep { lease.commit().await.unwrap() } else { lease.rollback().await.unwrap() }
            })
        };
        let tasks = [
            spawn("b", false, true),
            spawn("c", true, true),
            spawn("d", false, false),
            spawn("e", true, false),
        ];
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        first.commit().await.unwrap();
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(values(&pool).await, vec!["a", "b", "c"]);
        let mut lease = writer.lease_own("p", false).await.unwrap();
        insert(&mut lease, "f").await.unwrap();
        lease.commit().await.unwrap();
        assert_eq!(values(&pool).await, vec!["a", "b", "c", "f"]);
    }

    /// A write joining a batch that holds other projects but not its own is bounded; one
    /// for a project the batch holds (or the first of a batch) is not; a `fresh` lease ends
    /// the batch before it (what is committed is visible when it runs) and is not bounded.
    #[tokio::test]
    async fn leases_are_bounded_for_projects_the_batch_does_not_hold() {
        let (_dir, pool, writer) = writer(DIALECT).await;
        let mut first = writer.lease("a", false, false).await.unwrap();
        assert!(!first.bounded(), "the first write of a batch holds nothing while it waits");
        insert(&mut first, "a1").await.unwrap();
        let lease_of = |project: &'static str, fresh: bool| {
            let writer = writer.clone();
            let pool = pool.clone();
            tokio::spawn(async move {
                let mut lease = writer.lease(project, fresh, false).await.unwrap();
                let bounded = lease.bounded();
                let seen = values(&pool).await;
                insert(&mut lease, &format!("{project}{}", seen.len() + 10)).await.unwrap();
                lease.commit().await.unwrap();
                (bounded, seen)
            })
        };
        let same = lease_of("a", false);
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        let other = lease_of("b", false);
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        let fresh = lease_of("c", true);
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        first.commit().await.unwrap();
        let (same_bounded, same_seen) = same.await.unwrap();
        let (other_bounded, other_seen) = other.await.unwrap();
        let (fresh_bounded, fresh_seen) = fresh.await.unwrap();
        assert!(!same_bounded, "the batch already holds project a");
        assert!(other_bounded, "the batch holds a, not b");
        assert!(!fresh_bounded, "a fresh lease starts a batch of its own");
        // Nothing was committed while the first batch ran; the fresh one ran after its commit.
        assert!(same_seen.is_empty() && other_seen.is_empty());
        assert_eq!(fresh_seen.len(), 3, "the fresh write saw the first batch committed: {fresh_seen:?}");
    }

    const OPENING: Dialect = Dialect { writes_open_savepoints: true, ..DIALECT };

    /// An insert that sends the lease's opening (its savepoint statements) in front, as the
    /// Postgres project lock does.
    async fn insert_opening(lease: &mut Lease<Sqlite>, v: &str) -> Result<(), sqlx::Error> {
        let opening = lease.take_opening().map(|o| o + "; ").unwrap_or_default();
        let sql = format!("{opening}INSERT INTO t (v) VALUES ('{v}')");
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&mut **lease).await.map(drop)
    }

    /// Writes that send their own savepoints (the first with the batch's `BEGIN` already
    /// sent, the next ones releasing the previous savepoint) keep and roll back alone
    /// just like those whose savepoint the writer sends, in one batch with them.
    #[tokio::test]
    async fn writes_that_open_their_savepoints_roll_back_alone() {
        let (_dir, pool, writer) = writer(OPENING).await;
        let mut first = writer.lease("p", false, true).await.unwrap();
        assert_eq!(first.take_opening().as_deref(), Some("SAVEPOINT w1"));
        sqlx::raw_sql("SAVEPOINT w1; INSERT INTO t (v) VALUES ('a')").execute(&mut *first).await.unwrap();
        let spawn = |v: &'static str, opens: bool| {
            let writer = writer.clone();
            tokio::spawn(async move {
                let mut lease = writer.lease("p", false, opens).await.unwrap();
                if v == "e" {
                    // Dropped before it sent anything (its opening goes to the next write).
                    drop(lease);
                    return;
                }
                insert_opening(&mut lease, v).await.unwrap();
                if v == "c" {
                    lease.rollback().await.unwrap();
                } else if v == "d" {
                    // A statement that fails, after a good one: the write goes.
                    assert!(insert_opening(&mut lease, "a").await.is_err(), "duplicate key");
                } else {
                    lease.commit().await.unwrap();
                }
            })
        };
        let tasks = [
            spawn("b", true),
            spawn("c", true),
            spawn("d", true),
            spawn("e", true),
            spawn("f", false),
            spawn("g", true),
        ];
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        first.commit().await.unwrap();
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(values(&pool).await, vec!["a", "b", "f", "g"]);
    }

    /// Where writes open their savepoints and the lane's connection answered recently, a
    /// batch's BEGIN rides with its first write's opening; if that write sends nothing, the
    /// next write's opening carries it, and a batch in which no write sent anything ends
    /// without a COMMIT.
    #[tokio::test]
    async fn begin_rides_with_the_first_opening_sent() {
        let (_dir, pool, writer) =
            writer(Dialect { trust_idle_for: Duration::from_hours(1), ..OPENING }).await;
        // No connection yet: the writer begins alone.
        let mut lease = writer.lease("p", false, true).await.unwrap();
        assert_eq!(lease.take_opening().as_deref(), Some("SAVEPOINT w1"));
        sqlx::raw_sql("SAVEPOINT w1; INSERT INTO t (v) VALUES ('a')").execute(&mut *lease).await.unwrap();
        lease.commit().await.unwrap();
        // Its connection answered just now: the next batch's first write sends BEGIN.
        let mut lease = writer.lease("p", false, true).await.unwrap();
        assert_eq!(lease.take_opening().as_deref(), Some("BEGIN IMMEDIATE; SAVEPOINT w1"));
        sqlx::raw_sql("BEGIN IMMEDIATE; SAVEPOINT w1; INSERT INTO t (v) VALUES ('b')")
            .execute(&mut *lease)
            .await
            .unwrap();
        lease.commit().await.unwrap();
        // A first write that sends nothing: the next one in its batch begins.
        let first = writer.lease("p", false, true).await.unwrap();
        let next = {
            let writer = writer.clone();
            tokio::spawn(async move {
                let mut lease = writer.lease("p", false, true).await.unwrap();
                // No savepoint of the batch exists: any name will do.
                assert_eq!(lease.take_opening().as_deref(), Some("BEGIN IMMEDIATE; SAVEPOINT w1"));
                sqlx::raw_sql("BEGIN IMMEDIATE; SAVEPOINT w1; INSERT INTO t (v) VALUES ('c')")
                    .execute(&mut *lease)
                    .await
                    .unwrap();
                lease.commit().await.unwrap();
            })
        };
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        drop(first);
        next.await.unwrap();
        // A batch of one write that sends nothing: no transaction to end, and on it goes.
        drop(writer.lease("p", false, true).await.unwrap());
        let mut lease = writer.lease("p", false, true).await.unwrap();
        insert_opening(&mut lease, "d").await.unwrap();
        lease.commit().await.unwrap();
        assert_eq!(values(&pool).await, vec!["a", "b", "c", "d"]);
    }

    /// A write that took its opening but whose savepoint never reached the database cannot
    /// be rolled back to it: the writer then abandons the batch (its writes are told they
    /// were not kept) instead of rolling back to another write's savepoint. Also when a
    /// write that sent nothing came in between: the savepoint names alternate, but never
    /// onto the name of a savepoint still to be released.
    #[tokio::test]
    async fn an_opening_that_never_ran_abandons_the_batch() {
        let (_dir, pool, writer) = writer(OPENING).await;
        let mut first = writer.lease("p", false, true).await.unwrap();
        insert_opening(&mut first, "a").await.unwrap();
        let lease_then = |expected: &'static str, take: bool| {
            let writer = writer.clone();
            tokio::spawn(async move {
                let mut lease = writer.lease("p", false, true).await.unwrap();
                if take {
                    assert_eq!(lease.take_opening().as_deref(), Some(expected));
                }
                lease.rollback().await.unwrap();
            })
        };
        // Sends nothing: the first write's savepoint stays to be released.
        let second = lease_then("", false);
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        let third = lease_then("RELEASE SAVEPOINT w1; SAVEPOINT w2", true);
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(first.commit().await.is_err(), "the batch was abandoned: its write is not acknowledged");
        second.await.unwrap();
        third.await.unwrap();
        assert!(values(&pool).await.is_empty(), "nothing of the abandoned batch was committed");
        // The writer carries on with a new connection.
        let mut lease = writer.lease("p", false, true).await.unwrap();
        insert_opening(&mut lease, "b").await.unwrap();
        lease.commit().await.unwrap();
        assert_eq!(values(&pool).await, vec!["b"]);
    }

    const SENDS_LAST: Dialect = Dialect { writer_sends_last: true, trust_idle_for: Duration::MAX, ..OPENING };

    fn insert_query(v: &str) -> QueryBuilder<Sqlite> {
        let mut query = QueryBuilder::new("INSERT INTO t (v) VALUES (");
        query.push_bind(v.to_owned()).push(")");
        query
    }

    /// A write whose last statements the writer sends with its own (`commit_after`) is kept
    /// with them; if they fail, it alone is rolled back and gets their error (the
    /// database's, not a lost transaction's), alone in its batch or among others.
    #[tokio::test]
    async fn the_writer_sends_a_writes_last_statements() {
        let (_dir, pool, writer) = writer(SENDS_LAST).await;
        // Alone in its batch: the last statements ride with the COMMIT.
        let mut lease = writer.lease("p", false, true).await.unwrap();
        insert_opening(&mut lease, "a").await.unwrap();
        lease.commit_after(insert_query("b")).await.unwrap();
        assert_eq!(values(&pool).await, vec!["a", "b"]);
        let mut lease = writer.lease("p", false, true).await.unwrap();
        insert_opening(&mut lease, "c").await.unwrap();
        let error = lease.commit_after(insert_query("a")).await.unwrap_err();
        assert!(matches!(error, sqlx::Error::Database(_)), "the duplicate key's own error: {error:?}");
        assert_eq!(values(&pool).await, vec!["a", "b"], "c went with its failed last statement");
        // In a batch: each write's last statements go with the next write's opening.
        let mut first = writer.lease("p", false, true).await.unwrap();
        insert_opening(&mut first, "d").await.unwrap();
        let spawn = |v: &'static str, last: &'static str, opens: bool| {
            let writer = writer.clone();
            tokio::spawn(async move {
                let mut lease = writer.lease("p", false, opens).await.unwrap();
                insert_opening(&mut lease, v).await.unwrap();
                lease.commit_after(insert_query(last)).await
            })
        };
        let tasks =
            [spawn("e", "f", true), spawn("g", "a", true), spawn("h", "i", false), spawn("j", "b", true)];
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        first.commit().await.unwrap();
        let outcomes: Vec<bool> =
            futures::future::join_all(tasks).await.into_iter().map(|t| t.unwrap().is_ok()).collect();
        assert_eq!(outcomes, vec![true, false, true, false]);
        assert_eq!(values(&pool).await, vec!["a", "b", "d", "e", "f", "h", "i"]);
        // And the writer carries on.
        let mut lease = writer.lease("p", false, true).await.unwrap();
        insert_opening(&mut lease, "k").await.unwrap();
        lease.commit().await.unwrap();
        assert_eq!(values(&pool).await.last().map(String::as_str), Some("k"));
    }

    /// The writer keeps its connection between batches; `close` gives it back, so the
    /// pool's close (which waits for every connection) finishes.
    #[tokio::test]
    async fn close_gives_the_connection_back_to_the_pool() {
        let (_dir, pool, writer) = writer(DIALECT).await;
        let mut lease = writer.lease("p", false, false).await.unwrap();
        insert(&mut lease, "a").await.unwrap();
        lease.commit().await.unwrap();
        writer.close().await;
        tokio::time::timeout(std::time::Duration::from_secs(10), pool.close())
            .await
            .expect("the pool closes once the writer gave its connection back");
        assert!(writer.lease("p", false, false).await.is_err(), "no writes on a closed pool");
    }
}
