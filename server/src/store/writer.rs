//! The batching writer (group commit), for both backends.
//!
//! A write reaches its lane as a unit of work ([`Writer::run`]): the project lock it takes
//! and a body that reads through the write's transaction ([`Tx`]), decides, and applies what
//! it keeps. The lane's task runs it: one transaction per batch of queued writes. Writes
//! that queue while one runs join the batch, which commits when the queue is empty (or the
//! batch is full). Every write is answered only once its batch has committed: nothing is
//! acknowledged before it is durable, and nothing a write read from another write of its
//! batch is told before that write is kept (docs/architecture.md, "A write, step by step").
//!
//! A write changes nothing before it applies what it keeps, and a backend applies that all
//! or nothing (SQLite in a savepoint, Postgres in its write function's subtransaction). So
//! a write that fails, or is not kept, rolls back alone without a savepoint of the
//! writer's: on Postgres each is a round trip, and a write in a batch would pay one more.
//!
//! What a write keeps goes with the lane's next statement ([`Tx::defer`]): the next write's
//! lock, or the batch's commit. A write's answer waits for the commit anyway, so nothing
//! waits longer, and SQLite sends the changes in front of that statement in one query: a
//! hand-off to its connection's thread fewer per write (`baton-bench`: "vs etcd: small
//! writes", 1 and 8 clients, on SQLite; docs/performance.md). Changes that fail answer
//! their write with the error; the batch goes on.
//!
//! Why: every statement is a hand-off (SQLite's connection thread, a Postgres round trip)
//! and every transaction pays its BEGIN, COMMIT and commit record. On SQLite, concurrent
//! writers left to the pool also queue on SQLite's busy handler, which sleeps instead of
//! handing over the lock when it is free. On Postgres, writers of one hot project queue on
//! its row lock and all wake at each commit; in a batch, the lock is taken once and held
//! while the batch's writes run back to back.
//!
//! SQLite has one write lock per database: one lane. Postgres takes row locks per project:
//! several lanes, each project always on the same one, so a batch never waits for another
//! lane's batch of the same server. Across servers sharing one database, a batch that
//! already holds some projects' locks waits only briefly for another's (`bounded`, see
//! [`Backend::lock`]); if that runs out, the write starts again at the head of a new batch,
//! which holds nothing while it waits. So no cycle of waits can form between batches of
//! different servers. The price of lanes: a write that waits for a lock held outside Baton
//! (an open psql transaction on a project row) holds up its lane, not only its project.
//!
//! Its cases run on both backends in the storage conformance suite
//! (`tests/tests/storage/writer/`), which is why this module is public.

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt as _;
use futures::future::BoxFuture;
use sqlx::pool::PoolConnection;
use sqlx::{Database, Executor, Pool};
use tokio::sync::{mpsc, oneshot};

use super::model::{FirstReadDone, Lock, Locked};
use crate::error::{Error, Result};

/// What a backend tells the writer: how a batch begins, its lanes and batch size, and how
/// a write takes its project's lock.
pub trait Backend: Send + Sync + 'static {
    type Db: Database;
    /// A kept write's changes, ready to send (`Tx::defer`): they go with the lane's next
    /// statement (the next write's lock, or the batch's commit), all or nothing.
    type Changes: Send + 'static;
    /// Opens a batch's transaction.
    const BEGIN: &'static str;
    /// Writers, each with its own transaction; a project always uses the same one.
    const LANES: usize;
    /// Writes per transaction at most: bounds the wait of the batch's first write.
    const MAX_BATCH: usize;

    /// Takes `lock`, changing nothing the write's rollback would have to undo (it may create
    /// the project's row): allocates the write's revision and reads
    /// its time, the project's caps, an earlier reply to its request id and its first read
    /// (creating the project on first use). With `bounded` (the batch holds other projects'
    /// locks) it waits only briefly for a lock held elsewhere: `None` if that runs out, and
    /// the write then starts again at the head of a batch of its own.
    ///
    /// `changes`, a previous write's, go first, all or nothing (`Locking::applied`).
    fn lock<'c>(
        conn: &'c mut <Self::Db as Database>::Connection,
        changes: Option<Self::Changes>,
        lock: &'c Lock,
        bounded: bool,
    ) -> BoxFuture<'c, Locking>;

    /// Sends `changes`, all or nothing (before a write that takes no lock).
    fn apply(
        conn: &mut <Self::Db as Database>::Connection,
        changes: Self::Changes,
    ) -> BoxFuture<'_, Result<()>>;

    /// Sends `changes`, all or nothing, then commits the batch's transaction (even when they
    /// fail: the batch's other writes are kept).
    fn commit(
        conn: &mut <Self::Db as Database>::Connection,
        changes: Option<Self::Changes>,
    ) -> BoxFuture<'_, Committing>;
}

/// What sending a write's lock, after a previous write's changes, gave.
pub struct Locking {
    /// Whether the previous write's changes were made (`Ok` if there were none).
    pub applied: Result<()>,
    pub taken: Result<Option<Taken>>,
}

/// What sending a batch's commit, after its last write's changes, gave.
pub struct Committing {
    /// Whether the last write's changes were made (`Ok` if there were none).
    pub applied: Result<()>,
    pub committed: Result<()>,
}

/// What a write's lock gave it.
pub struct Taken {
    pub locked: Locked,
    /// What the lock read besides (`Lock::first_read`), if the backend read it then.
    pub first: Option<FirstReadDone>,
}

/// A write's transaction, as its body reads through it and its backend applies its changes.
pub struct Tx<B: Backend> {
    pub(crate) conn: PoolConnection<B::Db>,
    pub project: String,
    /// The revision and time the lock gave the write.
    pub revision: i64,
    pub now_us: i64,
    /// Whether the write may change the project's memory (`Lock::memory`).
    pub memory: bool,
    /// The first read, until the write asks for it.
    pub first: Option<FirstReadDone>,
    /// The write's changes, when its backend sends them with the lane's next statement.
    deferred: Option<B::Changes>,
}

impl<B: Backend> Tx<B> {
    /// The connection, in the batch's transaction.
    pub fn conn(&mut self) -> &mut <B::Db as Database>::Connection {
        &mut self.conn
    }

    /// Leaves the write's changes to go with the lane's next statement. The write is then
    /// answered with their outcome: an error from them is its answer, and it is not kept.
    pub fn defer(&mut self, changes: B::Changes) {
        self.deferred = Some(changes);
    }
}

/// What a kept write runs once its batch has committed, before its answer (`Done::on_commit`).
pub type OnCommit = Box<dyn FnOnce() + Send>;

/// What a write's body gives back.
pub struct Done<R> {
    /// The write's answer, sent once its batch has committed.
    pub value: R,
    /// Whether it applied changes to keep (its `on_commit` then runs once they are durable).
    pub keep: bool,
    /// For a kept write: what must follow its commit whether or not its request still waits
    /// (waking watchers). Run by the writer, in batch order; quick, as it holds up the lane.
    pub on_commit: Option<OnCommit>,
}

/// A write's body: reads through the transaction, changes what it decides, and gives the
/// transaction back with what it decided. An error rolls the write back and is its answer.
pub type Body<B, R> = Box<dyn FnOnce(Tx<B>, Locked) -> BoxFuture<'static, (Tx<B>, Result<Done<R>>)> + Send>;

/// A handle to the database's writer tasks (cheap to clone).
pub struct Writer<B: Backend> {
    lanes: Arc<[mpsc::UnboundedSender<Message<B>>]>,
}

impl<B: Backend> Clone for Writer<B> {
    fn clone(&self) -> Self {
        Self { lanes: self.lanes.clone() }
    }
}

impl<B: Backend> Writer<B>
where
    for<'c> &'c mut <B::Db as Database>::Connection: Executor<'c, Database = B::Db>,
{
    /// Starts the writer tasks for `pool`; they end when the last handle is dropped.
    pub fn spawn(pool: &Pool<B::Db>) -> Self {
        let lanes: Vec<_> = (0..B::LANES.max(1))
            .map(|_| {
                let (queue, messages) = mpsc::unbounded_channel();
                tokio::spawn(Lane::<B> { pool: pool.clone(), messages, held: None, carried: None }.run());
                queue
            })
            .collect();
        Self { lanes: lanes.into() }
    }

    /// Runs `body` as a write of `lock`'s project in its lane's next batch, and answers
    /// once that batch has committed (or failed: then nothing of the write is kept). The
    /// write runs to its end even if the caller stops waiting.
    pub async fn run<R: Send + 'static>(&self, lock: Lock, body: Body<B, R>) -> Result<R> {
        let (reply, answer) = oneshot::channel();
        self.send(Box::new(Job { lock, body, reply }), answer).await
    }

    /// Runs `body` as a write that takes no lock, in a batch as `run` does: kept if it
    /// succeeds, rolled back alone if not, answered once its batch has committed.
    pub async fn run_plain<R: Send + 'static>(&self, body: PlainBody<B::Db, R>) -> Result<R> {
        let (reply, answer) = oneshot::channel();
        self.send(Box::new(Plain { body, reply }), answer).await
    }

    /// Queues `work` on its lane and waits for its answer.
    async fn send<R>(&self, work: Box<dyn Work<B>>, answer: oneshot::Receiver<Result<R>>) -> Result<R> {
        let mut hasher = DefaultHasher::new();
        work.lane().hash(&mut hasher);
        let lane = usize::try_from(hasher.finish()).unwrap_or(0) % self.lanes.len();
        self.lanes[lane]
            .send(Message::Write(work))
            .map_err(|_| unavailable("the database writer has stopped"))?;
        answer.await.unwrap_or_else(|_| Err(unavailable("the write's batch ended without an answer")))
    }
}

impl<B: Backend> Writer<B> {
    /// Closes the lanes' connections, so that `Pool::close` can finish. Writes after this
    /// take a connection from the pool (and fail if it is closed).
    pub async fn close(&self) {
        for lane in self.lanes.iter() {
            let (done, closed) = oneshot::channel();
            if lane.send(Message::Close(done)).is_ok() {
                let _ = closed.await;
            }
        }
    }
}

/// What a lane's task is asked to do.
enum Message<B: Backend> {
    Write(Box<dyn Work<B>>),
    /// Close the lane's connection (the pool is closing), then say so.
    Close(oneshot::Sender<()>),
}

/// A write as its lane sees it, whatever its answer's type.
trait Work<B: Backend>: Send {
    /// The project lock it takes, if any, and the lane it runs on.
    fn lock(&self) -> Option<&Lock>;
    fn lane(&self) -> &str;
    /// Runs the body (on the locked transaction: `taken`, when it takes a lock); with the
    /// changes it left to send.
    fn run(self: Box<Self>, conn: PoolConnection<B::Db>, taken: Option<Taken>) -> BoxFuture<'static, Ran<B>>;
    /// The write failed before its body ran.
    fn failed(self: Box<Self>, error: Error) -> Finished;
}

/// What running a write's body gave back.
struct Ran<B: Backend> {
    conn: PoolConnection<B::Db>,
    finished: Finished,
    /// Its changes, to send with the lane's next statement.
    deferred: Option<B::Changes>,
}

/// How a write ended, as its answer is told.
enum Outcome<'a> {
    /// Its batch committed.
    Committed,
    /// Its own changes failed (the batch went on).
    Failed(Error),
    /// Its batch did not commit, and why.
    NotCommitted(&'a str),
}

/// Gives a write its answer, told how it ended.
type Answer = Box<dyn FnOnce(Outcome<'_>) + Send>;

/// A write done with, waiting for its batch's end.
struct Finished {
    keep: bool,
    /// Its deferred changes failed with this.
    failed: Option<Error>,
    answer: Answer,
}

struct Job<B: Backend, R> {
    lock: Lock,
    body: Body<B, R>,
    reply: oneshot::Sender<Result<R>>,
}

impl<B: Backend, R: Send + 'static> Work<B> for Job<B, R> {
    fn lock(&self) -> Option<&Lock> {
        Some(&self.lock)
    }

    fn lane(&self) -> &str {
        &self.lock.project
    }

    fn run(self: Box<Self>, conn: PoolConnection<B::Db>, taken: Option<Taken>) -> BoxFuture<'static, Ran<B>> {
        let Self { lock, body, reply } = *self;
        Box::pin(async move {
            let Some(Taken { locked, first }) = taken else {
                let error = Error::internal("a write ran without its lock");
                return Ran { conn, finished: Finished::answered(reply, Err(error)), deferred: None };
            };
            let tx = Tx {
                conn,
                project: lock.project,
                revision: locked.revision,
                now_us: locked.now_us,
                memory: lock.memory,
                first,
                deferred: None,
            };
            let (tx, result) = body(tx, locked).await;
            let keep = matches!(&result, Ok(done) if done.keep);
            let result = result.map(|done| (done.value, if done.keep { done.on_commit } else { None }));
            let answer = Box::new(move |outcome: Outcome<'_>| {
                let answer = match (outcome, result) {
                    (Outcome::NotCommitted(why), _) => Err(not_committed(why)),
                    (Outcome::Failed(e), _) | (Outcome::Committed, Err(e)) => Err(e),
                    (Outcome::Committed, Ok((value, on_commit))) => {
                        if let Some(on_commit) = on_commit {
                            on_commit();
                        }
                        Ok(value)
                    }
                };
                // The request may be gone: the write was made (or not) all the same.
                let _ = reply.send(answer);
            });
            let deferred = if keep { tx.deferred } else { None };
            Ran { conn: tx.conn, finished: Finished { keep, failed: None, answer }, deferred }
        })
    }

    fn failed(self: Box<Self>, error: Error) -> Finished {
        Finished::answered(self.reply, Err(error))
    }
}

/// A write that takes no project lock and allocates no revision (a heartbeat, a token).
pub type PlainBody<DB, R> =
    Box<dyn FnOnce(PoolConnection<DB>) -> BoxFuture<'static, (PoolConnection<DB>, Result<R>)> + Send>;

struct Plain<DB: Database, R> {
    body: PlainBody<DB, R>,
    reply: oneshot::Sender<Result<R>>,
}

impl<B: Backend, R: Send + 'static> Work<B> for Plain<B::Db, R>
where
    for<'c> &'c mut <B::Db as Database>::Connection: Executor<'c, Database = B::Db>,
{
    fn lock(&self) -> Option<&Lock> {
        None
    }

    fn lane(&self) -> &'static str {
        ""
    }

    fn run(
        self: Box<Self>,
        conn: PoolConnection<B::Db>,
        _taken: Option<Taken>,
    ) -> BoxFuture<'static, Ran<B>> {
        let Self { body, reply } = *self;
        Box::pin(async move {
            let mut conn = conn;
            if let Err(e) = execute(&mut conn, "SAVEPOINT plain").await {
                return Ran {
                    conn,
                    finished: Finished::answered(reply, Err(Error::from(e))),
                    deferred: None,
                };
            }
            let (mut conn, result) = body(conn).await;
            let end = match result {
                Ok(_) => "RELEASE SAVEPOINT plain",
                Err(_) => "ROLLBACK TO SAVEPOINT plain; RELEASE SAVEPOINT plain",
            };
            let result = match execute(&mut conn, end).await {
                Ok(()) => result,
                Err(e) => Err(Error::from(e)),
            };
            Ran { conn, finished: Finished::answered(reply, result), deferred: None }
        })
    }

    fn failed(self: Box<Self>, error: Error) -> Finished {
        Finished::answered(self.reply, Err(error))
    }
}

impl Finished {
    /// A write whose answer is known, given once its batch commits (or why it did not).
    fn answered<R: Send + 'static>(reply: oneshot::Sender<Result<R>>, result: Result<R>) -> Self {
        let keep = result.is_ok();
        let answer = Box::new(move |outcome: Outcome<'_>| {
            let _ = reply.send(match outcome {
                Outcome::NotCommitted(why) => Err(not_committed(why)),
                Outcome::Failed(e) => Err(e),
                Outcome::Committed => result,
            });
        });
        Self { keep, failed: None, answer }
    }

    /// Answers the write: `why` if its batch did not commit, else how it ended.
    fn tell(self, why: Option<&str>) {
        let outcome = match (why, self.failed) {
            (Some(why), _) => Outcome::NotCommitted(why),
            (None, Some(e)) => Outcome::Failed(e),
            (None, None) => Outcome::Committed,
        };
        (self.answer)(outcome);
    }
}

/// A lane's writer task and what it keeps between batches.
struct Lane<B: Backend> {
    pool: Pool<B::Db>,
    messages: mpsc::UnboundedReceiver<Message<B>>,
    /// The lane keeps its connection between batches (sqlx pings a pool connection when it
    /// is given back).
    held: Option<PoolConnection<B::Db>>,
    /// A write that must start a batch of its own (its bounded lock ran out).
    carried: Option<Box<dyn Work<B>>>,
}

/// One batch, from its first write to its commit.
struct Batch<B: Backend> {
    /// Its writes, in order, answered when it ends.
    finished: Vec<Finished>,
    /// Projects whose locks the transaction holds (through writes it keeps).
    locked: HashSet<String>,
    /// A close asked for while the batch ran: answered when it ends.
    closing: Option<oneshot::Sender<()>>,
    /// A write taken off the queue that must start a batch of its own.
    carry: Option<Box<dyn Work<B>>>,
    /// The last kept write's changes, not sent yet, and that write's place in `finished`.
    pending: Option<(B::Changes, usize)>,
}

/// Why a batch cannot go on: the transaction is in doubt, and nothing of it is kept.
struct Broken(String);

impl<B: Backend> Lane<B>
where
    for<'c> &'c mut <B::Db as Database>::Connection: Executor<'c, Database = B::Db>,
{
    async fn run(mut self) {
        while let Some(first) = self.next_first().await {
            self.batch(first).await;
        }
    }

    /// The next batch's first write, closing the connection when asked while there is none;
    /// `None` once the last handle of the writer is gone.
    async fn next_first(&mut self) -> Option<Box<dyn Work<B>>> {
        if let Some(work) = self.carried.take() {
            return Some(work);
        }
        loop {
            match self.messages.recv().await? {
                Message::Write(work) => return Some(work),
                Message::Close(done) => {
                    self.close().await;
                    let _ = done.send(());
                }
            }
        }
    }

    async fn close(&mut self) {
        if let Some(conn) = self.held.take() {
            let _ = conn.close().await;
        }
    }

    /// One transaction: `first`, then the writes that queue while it runs.
    async fn batch(&mut self, first: Box<dyn Work<B>>) {
        let mut conn = match begin::<B>(&self.pool, self.held.take()).await {
            Ok(conn) => conn,
            Err(e) => return first.failed(Error::from(e)).tell(None),
        };
        let mut batch =
            Batch { finished: Vec::new(), locked: HashSet::new(), closing: None, carry: None, pending: None };
        let mut next = Some(first);
        let outcome = loop {
            let Some(work) = next.take() else {
                break match batch.commit(&mut conn).await {
                    Ok(()) => {
                        self.held = Some(conn);
                        Ok(())
                    }
                    Err(why) => {
                        abandon(conn).await;
                        Err(why)
                    }
                };
            };
            conn = match batch.step(conn, work).await {
                Ok(back) => back,
                Err((back, why)) => {
                    if let Some(conn) = back {
                        abandon(conn).await;
                    }
                    break Err(why);
                }
            };
            if batch.carry.is_some() || batch.finished.len() >= B::MAX_BATCH {
                continue;
            }
            match self.messages.try_recv() {
                Ok(Message::Write(work)) => next = Some(work),
                Ok(Message::Close(done)) => batch.closing = Some(done),
                Err(_) => {}
            }
        };
        self.end(batch, outcome).await;
    }

    /// Answers the batch's writes: in order, once it committed; or with why it did not.
    async fn end(&mut self, mut batch: Batch<B>, outcome: Result<(), Broken>) {
        self.carried = batch.carry.take();
        match outcome {
            Ok(()) => {
                if let Some(ms) = held_report() {
                    tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
                }
                for finished in batch.finished {
                    finished.tell(None);
                }
            }
            Err(Broken(why)) => {
                tracing::warn!(
                    error = why,
                    writes = batch.finished.len(),
                    "write transaction failed; its writes are not kept"
                );
                for finished in batch.finished {
                    finished.tell(Some(&why));
                }
            }
        }
        if let Some(done) = batch.closing.take() {
            self.close().await;
            let _ = done.send(());
        }
    }
}

/// A connection given back by a write step, or lost with it (a body that panicked).
type StepResult<DB> = std::result::Result<PoolConnection<DB>, (Option<PoolConnection<DB>>, Broken)>;

impl<B: Backend> Batch<B>
where
    for<'c> &'c mut <B::Db as Database>::Connection: Executor<'c, Database = B::Db>,
{
    /// Runs one write: its lock (after the previous write's changes), then its body. Neither
    /// changes anything before the backend sends what the body keeps, all or nothing
    /// (`Backend`), so a write that fails or is not kept leaves nothing to undo; but on
    /// Postgres an error ends the transaction, so after one the writer checks that the
    /// batch can go on.
    async fn step(&mut self, mut conn: PoolConnection<B::Db>, work: Box<dyn Work<B>>) -> StepResult<B::Db> {
        let project = work.lock().map(|lock| lock.project.clone());
        let (changes, owner) = self.pending.take().unzip();
        let taken = if let (Some(lock), Some(project)) = (work.lock(), &project) {
            let bounded = !self.locked.is_empty() && !self.locked.contains(project);
            let Locking { applied, taken } = B::lock(&mut conn, changes, lock, bounded).await;
            // A transaction that the changes' failure ended fails the lock too.
            self.applied(owner, applied);
            match taken {
                Ok(Some(taken)) => Some(taken),
                Ok(None) => {
                    self.carry = Some(work);
                    return Ok(conn);
                }
                Err(e) => {
                    self.finished.push(work.failed(e));
                    return check(conn).await;
                }
            }
        } else {
            if let Some(changes) = changes {
                let applied = B::apply(&mut conn, changes).await;
                self.applied(owner, applied);
            }
            None
        };
        let Ok(ran) = AssertUnwindSafe(work.run(conn, taken)).catch_unwind().await else {
            // The connection went with the body (closed when dropped, `begin`).
            return Err((None, Broken("a write's body panicked".to_owned())));
        };
        let Ran { conn, finished, deferred } = ran;
        let keep = finished.keep;
        self.finished.push(finished);
        self.pending = deferred.map(|changes| (changes, self.finished.len() - 1));
        if keep {
            self.locked.extend(project);
            Ok(conn)
        } else {
            check(conn).await
        }
    }

    /// Sends the last write's changes and commits.
    async fn commit(&mut self, conn: &mut PoolConnection<B::Db>) -> Result<(), Broken> {
        let (changes, owner) = self.pending.take().unzip();
        let Committing { applied, committed } = B::commit(conn, changes).await;
        self.applied(owner, applied);
        committed.map_err(|e| Broken(e.to_string()))
    }

    /// Records how a write's deferred changes went: if they failed, the write is answered
    /// with the error.
    fn applied(&mut self, owner: Option<usize>, applied: Result<()>) {
        if let (Some(owner), Err(e)) = (owner, applied)
            && let Some(finished) = self.finished.get_mut(owner)
        {
            finished.failed = Some(e);
        }
    }
}

/// Whether the transaction can go on after a write that was not kept: if not (Postgres ends
/// a transaction at an error), the batch is abandoned.
async fn check<DB: Database>(mut conn: PoolConnection<DB>) -> StepResult<DB>
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
{
    match execute(&mut conn, "SELECT 1").await {
        Ok(()) => Ok(conn),
        Err(e) => Err((Some(conn), Broken(e.to_string()))),
    }
}

/// Begins a batch on the lane's connection, or on a new one if it
/// has none or it broke while idle (a database restart). The lane's connections are
/// closed, never given back to the pool, when dropped: one dropped in a transaction (by a
/// write's body that panicked) must not serve reads.
async fn begin<B: Backend>(
    pool: &Pool<B::Db>,
    held: Option<PoolConnection<B::Db>>,
) -> std::result::Result<PoolConnection<B::Db>, sqlx::Error>
where
    for<'c> &'c mut <B::Db as Database>::Connection: Executor<'c, Database = B::Db>,
{
    if let Some(mut conn) = held {
        match execute(&mut conn, B::BEGIN).await {
            Ok(()) => return Ok(conn),
            Err(e) => {
                tracing::debug!(error = %e, "the writer's connection broke while idle; taking another");
                abandon(conn).await;
            }
        }
    }
    let mut conn = pool.acquire().await?;
    conn.close_on_drop();
    if let Err(e) = execute(&mut conn, B::BEGIN).await {
        abandon(conn).await;
        return Err(e);
    }
    Ok(conn)
}

/// Sends the writer's own statements (no values).
async fn execute<DB: Database>(
    conn: &mut PoolConnection<DB>,
    sql: &str,
) -> std::result::Result<(), sqlx::Error>
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
{
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned())).execute(&mut **conn).await.map(drop)
}

/// Rolls a failed transaction back and closes the connection: whatever broke the
/// transaction may have broken the connection.
async fn abandon<DB: Database>(mut conn: PoolConnection<DB>)
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
{
    let _ = execute(&mut conn, "ROLLBACK").await;
    let _ = conn.close().await;
}

/// The fail point `writer.committed`: how long to hold a commit's report, if set.
fn held_report() -> Option<u64> {
    fail::fail_point!("writer.committed", |ms| ms.and_then(|ms| ms.parse().ok()));
    None
}

fn unavailable(message: &str) -> Error {
    Error::Unavailable(sqlx::Error::Io(std::io::Error::other(message.to_owned())))
}

fn not_committed(why: &str) -> Error {
    unavailable(&format!("the write's transaction did not commit: {why}"))
}
