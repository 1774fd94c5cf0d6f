//! The batching writer (group commit), for both backends.
//!
//! One task owns a write transaction and lends its connection to one write at a time, each
//! inside its own savepoint, so a write's rejection or failure rolls back alone
//! (docs/architecture.md, A write, step by step). Writes that queue while one runs join the
//! same transaction, which commits when the queue is empty (or the batch is full); each
//! write answers only after that commit, so nothing is acknowledged before it is durable.
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
//! It ends with [`Lease::commit`] (kept; waits for the batch's commit), [`Lease::hand_over`]
//! (kept once its last statement is made; below) or [`Lease::rollback`]; a lease dropped
//! without either (an error, a cancelled request) is rolled back. What must follow a kept
//! write's commit whether or not its request still waits (waking its watchers) it leaves to
//! the writer ([`Lease::on_commit`]).
//!
//! A kept write may leave its last statement to the write after it ([`Lease::hand_over`]),
//! which sends it in front of its own first statement, in one round trip
//! ([`Lease::take_handover`]); the writer sends it alone when no write of its own follows,
//! and if no other write of the batch waits for the commit either, as the only write the
//! batch keeps ([`Handover::send_alone`]: a failure of it may end the transaction, which is
//! then rolled back). The write it came from is kept once that statement has made its
//! changes. This is for
//! the rows of `baton-bench` whose writes queue on one project's lane (Postgres: "small
//! memory writes, one hot project" and "Baton/etcd" at 8 and 32 clients).
//!
//! Its cases run on both backends in the storage conformance suite
//! (`tests/tests/storage/writer/`), which is why this module is public.

use std::any::Any;
use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use sqlx::pool::PoolConnection;
use sqlx::{Connection, Database, Executor, IntoArguments, Pool, QueryBuilder};
use tokio::sync::{mpsc, oneshot};

const LOST: &str = "the write's connection was lost";

type Reply<DB> = oneshot::Sender<Result<Lease<DB>, String>>;

/// What a kept write runs once its batch has committed (`Lease::on_commit`).
pub type OnCommit = Box<dyn FnOnce() + Send>;

/// A write's line back from the writer: told whether its batch committed, and, if it did,
/// first running what the write left to run then. Run by the writer, in the order the
/// batch lent the connection to its writes (`order`; a write that handed over its last
/// statement is kept after the write that took it, yet runs before), so it runs even if
/// the write's request was cancelled meanwhile.
struct Committed {
    tell: oneshot::Sender<Result<(), sqlx::Error>>,
    on_commit: Option<OnCommit>,
    /// The write's place in its batch (`Batch::lent` when it was lent the connection).
    order: usize,
}

impl Committed {
    fn new(on_commit: Option<OnCommit>) -> (Self, oneshot::Receiver<Result<(), sqlx::Error>>) {
        let (tell, told) = oneshot::channel();
        (Self { tell, on_commit, order: 0 }, told)
    }

    fn placed(mut self, order: usize) -> Self {
        self.order = order;
        self
    }

    fn send(self, result: Result<(), sqlx::Error>) -> Result<(), Result<(), sqlx::Error>> {
        if result.is_ok()
            && let Some(on_commit) = self.on_commit
        {
            on_commit();
        }
        self.tell.send(result)
    }
}

/// A kept write's last statement, handed to the write after it in the batch, which sends it
/// in front of its own first statement ([`Lease::take_handover`]); or sent alone by the
/// writer, when no write of its own follows.
pub trait Handover<DB: Database>: Send + 'static {
    /// Sends it alone: whether its changes were made, or refused (undone by a
    /// subtransaction of its own; the write that handed it over is told why by the
    /// handover itself). An error leaves the transaction in doubt: the batch is abandoned.
    fn send(self: Box<Self>, conn: &mut DB::Connection) -> BoxFuture<'_, Result<Handed, sqlx::Error>>;

    /// Sends it alone as the only write its batch keeps (no other write waits for the
    /// batch's commit): a failure then loses no other write, so a backend may make the
    /// changes without a subtransaction, in one statement, and answer [`Handed::Aborted`]
    /// if their failure ended the transaction. By default, as `send`.
    fn send_alone(self: Box<Self>, conn: &mut DB::Connection) -> BoxFuture<'_, Result<Handed, sqlx::Error>> {
        self.send(conn)
    }

    /// For the write that takes it, which knows its type.
    fn into_any(self: Box<Self>) -> Box<dyn Any + Send>;
}

/// What became of a handover's statement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handed {
    /// Its changes were made: the write that handed it over is kept.
    Applied,
    /// Its changes failed and were undone alone: that write is not kept.
    Refused,
    /// Its changes, sent by [`Handover::send_alone`], failed and ended the transaction:
    /// that write is not kept, and the writer rolls back the batch, which kept no other.
    Aborted,
}

/// How a backend batches its writes.
#[derive(Clone, Copy, Debug)]
#[expect(clippy::struct_excessive_bools, reason = "a backend's independent choices")]
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
    /// Whether a batch's COMMIT also begins the next batch's transaction (`COMMIT; BEGIN`),
    /// so that a batch whose first write comes within `trust_idle_for` sends no `BEGIN` of
    /// its own: a round trip less per batch where a statement with bound parameters travels
    /// alone (Postgres; `baton-bench`'s rows "over 100 projects" and "Baton/etcd", whose
    /// batches hold few writes). Not where a begun transaction holds a lock (SQLite's
    /// `BEGIN IMMEDIATE`). A transaction begun ahead is rolled back once the connection has
    /// been idle for `trust_idle_for`, and before the connection leaves the lane.
    pub begins_ahead: bool,
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

impl<DB: Database> Job<DB> {
    /// Whether the write sends its own savepoint statements under `dialect`.
    fn opens_under(&self, dialect: Dialect) -> bool {
        dialect.writes_open_savepoints && self.opens
    }
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

/// How a write ends: by default (all `None`), rolled back.
struct Ending<DB: Database> {
    /// `Some` = keep the write (and tell it when the batch commits).
    keep: Option<Committed>,
    /// A write rolled back that is told when the batch commits all the same (`Lease::settle`).
    settles: Option<Committed>,
    /// A kept write's last statements, for the writer to send (`Dialect::writer_sends_last`).
    last: Option<QueryBuilder<DB>>,
    /// A kept write's handover ([`Lease::hand_over`]).
    hands_over: Option<Box<dyn Handover<DB>>>,
}

impl<DB: Database> Default for Ending<DB> {
    fn default() -> Self {
        Self { keep: None, settles: None, last: None, hands_over: None }
    }
}

/// What a write gives back when it is done with the connection.
struct Returned<DB: Database> {
    conn: PoolConnection<DB>,
    ending: Ending<DB>,
    /// Whether its savepoint may exist: its opening was sent by the writer, or taken by the
    /// write (which may or may not have reached the database).
    opened: bool,
    /// What became of the previous write's handover, lent with this write.
    previous: Previous<DB>,
}

/// The previous write's handover, as the write it was lent with leaves it.
enum Previous<DB: Database> {
    /// There was none.
    None,
    /// Not taken: nothing was sent for it.
    Untaken(Box<dyn Handover<DB>>),
    /// Taken, and what became of it, if the write learnt it (else: sent, or not, in doubt).
    Taken(Option<Handed>),
    /// Taken, and the statement it went with failed: the transaction is in doubt, and the
    /// write it came from gets the error.
    Failed(sqlx::Error),
}

/// The writer's connection, lent to one write inside its savepoint.
#[expect(clippy::struct_excessive_bools, reason = "independent facts about one write")]
pub struct Lease<DB: Database> {
    conn: Option<PoolConnection<DB>>,
    back: Option<oneshot::Sender<Returned<DB>>>,
    bounded: bool,
    /// Whether the write is the first on a transaction begun ahead (`Dialect::begins_ahead`)
    /// since the connection last answered: see [`Lease::begun_ahead`].
    begun_ahead: bool,
    /// The savepoint statements the write is to send ahead of its first statement.
    opening: Option<String>,
    opened: bool,
    /// `Dialect::writer_sends_last`.
    writer_sends_last: bool,
    /// The previous write's handover, to send in front of the first statement.
    previous: Previous<DB>,
    /// What to run once the write is kept and its batch has committed.
    on_commit: Option<OnCommit>,
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

    /// Whether the write's transaction was begun ahead (`Dialect::begins_ahead`) on a
    /// connection that has not answered since it went idle: if its first statement fails
    /// because the connection broke, nothing of it can have been kept, and it may start
    /// again with a fresh lease (which begins on a connection that answers).
    pub fn begun_ahead(&self) -> bool {
        self.begun_ahead
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

    /// Leaves `f` to run once the write is kept and its batch has committed: by the writer,
    /// before it tells the batch's writes, in the order it lent them the connection, whether or not the
    /// write's own request still waits. For what must follow every commit (waking watchers)
    /// and must be quick (it holds up the lane). Not run if the write is not kept.
    pub fn on_commit(&mut self, f: OnCommit) {
        debug_assert!(self.on_commit.is_none(), "one on_commit per write");
        self.on_commit = Some(f);
    }

    /// Keeps the write and waits until its transaction commits (durable on return).
    pub async fn commit(mut self) -> Result<(), sqlx::Error> {
        let (committed, outcome) = Committed::new(self.on_commit.take());
        self.give_back(Ending { keep: Some(committed), ..Ending::default() });
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
        let (committed, outcome) = Committed::new(self.on_commit.take());
        self.give_back(Ending { keep: Some(committed), last: Some(last), ..Ending::default() });
        match outcome.await {
            Ok(result) => result,
            Err(_) => Err(stopped()),
        }
    }

    /// Keeps the write once `last`, its last statement, has made its changes, and waits
    /// until its transaction commits. The next write of the batch sends `last` in front of
    /// its first statement if it takes it ([`Lease::take_handover`]), else the writer sends
    /// it alone. An error: the write was not kept (`last` refused, or the batch failed).
    pub async fn hand_over(mut self, last: Box<dyn Handover<DB>>) -> Result<(), sqlx::Error> {
        let (committed, outcome) = Committed::new(self.on_commit.take());
        self.give_back(Ending { keep: Some(committed), hands_over: Some(last), ..Ending::default() });
        match outcome.await {
            Ok(result) => result,
            Err(_) => Err(stopped()),
        }
    }

    /// The previous write's handover, if it left one and this write is the first to ask:
    /// to be sent in front of (or as part of) this write's first statement, and what became
    /// of it told with [`Lease::handed`]. A handover taken and never told about leaves the
    /// transaction in doubt: the batch is abandoned when this write ends.
    pub fn take_handover(&mut self) -> Option<Box<dyn Any + Send>> {
        match std::mem::replace(&mut self.previous, Previous::None) {
            Previous::Untaken(handover) => {
                self.previous = Previous::Taken(None);
                Some(handover.into_any())
            }
            other => {
                self.previous = other;
                None
            }
        }
    }

    /// Tells what became of the handover this write took.
    pub fn handed(&mut self, handed: Handed) {
        if matches!(self.previous, Previous::Taken(None)) {
            self.previous = Previous::Taken(Some(handed));
        }
    }

    /// Tells that the statement the taken handover went with failed (`error`): the batch is
    /// abandoned, and the write that handed it over gets `error`, which may be its own.
    pub fn handover_failed(&mut self, error: sqlx::Error) {
        if matches!(self.previous, Previous::Taken(None)) {
            self.previous = Previous::Failed(error);
        }
    }

    /// Rolls the write back, as `rollback` does, and waits until its transaction commits:
    /// what it read is then durable, though it may have been written by a write of the same
    /// batch (which is not acknowledged before that commit either).
    pub async fn settle(mut self) -> Result<(), sqlx::Error> {
        let (committed, outcome) = Committed::new(None);
        self.give_back(Ending { settles: Some(committed), ..Ending::default() });
        match outcome.await {
            Ok(result) => result,
            Err(_) => Err(stopped()),
        }
    }

    /// Rolls the write back (to its savepoint; the other writes of the batch are kept).
    #[allow(clippy::unused_async)] // the same shape as `sqlx::Transaction::rollback`
    pub async fn rollback(mut self) -> Result<(), sqlx::Error> {
        self.give_back(Ending::default());
        Ok(())
    }

    fn give_back(&mut self, ending: Ending<DB>) {
        if let (Some(conn), Some(back)) = (self.conn.take(), self.back.take()) {
            let previous = std::mem::replace(&mut self.previous, Previous::None);
            // If the writer is gone, so is the transaction: nothing to keep either way.
            let _ = back.send(Returned { conn, ending, opened: self.opened, previous });
        }
    }
}

impl<DB: Database> Drop for Lease<DB> {
    fn drop(&mut self) {
        self.give_back(Ending::default());
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
async fn run<DB: Database>(pool: Pool<DB>, dialect: Dialect, jobs: mpsc::UnboundedReceiver<Message<DB>>)
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
{
    let mut lane = Lane { pool, dialect, jobs, carried: None, held: None };
    while let Some(first) = lane.first().await {
        let Some((conn, mut batch, first)) = lane.open(first).await else {
            continue;
        };
        let error = lane.run_batch(&mut batch, conn, first).await;
        lane.end(batch, &error).await;
    }
    lane.give_back().await;
}

/// The lane's connection between batches.
struct Held<DB: Database> {
    conn: PoolConnection<DB>,
    /// When it last answered the writer.
    answered: Instant,
    /// Whether it is in a transaction begun ahead (`Dialect::begins_ahead`).
    begun: bool,
}

/// A lane's writer task's state between batches.
struct Lane<DB: Database> {
    pool: Pool<DB>,
    dialect: Dialect,
    jobs: mpsc::UnboundedReceiver<Message<DB>>,
    /// A write that must start a batch of its own, taken off the queue while a batch ran.
    carried: Option<Job<DB>>,
    /// The lane keeps its connection between batches (sqlx pings a pool connection when it
    /// is given back, and the pools may ping one when it is taken).
    held: Option<Held<DB>>,
}

/// One batch's state, from its first write to its commit.
struct Batch<DB: Database> {
    /// Whether BEGIN was sent: else the next opening sent carries it.
    began: bool,
    /// When the connection last answered the writer.
    answered: Instant,
    /// The kept writes, told when the batch commits.
    waiting: Vec<Committed>,
    /// Projects whose locks this transaction holds (through writes it keeps).
    locked: HashSet<String>,
    /// Writes lent the connection so far.
    lent: usize,
    /// A kept write's savepoint, released with the next write's opening (or by COMMIT).
    release: Option<&'static str>,
    /// The next write's savepoint, when the writer opened it.
    upcoming: Option<&'static str>,
    /// A close asked for while the batch ran: answered when it ends.
    closing: Option<oneshot::Sender<()>>,
    /// Whether a write of its own ran in this batch (see `then_send`).
    had_own: bool,
    /// Whether the transaction was begun ahead and the connection has not answered since
    /// it went idle (`Lease::begun_ahead`).
    unconfirmed: bool,
    /// A kept write's handover, not sent yet, and the write, told once it is.
    handover: Option<(Box<dyn Handover<DB>>, Committed)>,
}

/// What became of a write lent the connection.
#[expect(clippy::struct_excessive_bools, reason = "independent facts about one write")]
struct Lent<DB: Database> {
    project: String,
    /// Its place in the batch (`Committed::order`).
    order: usize,
    savepoint: &'static str,
    kept: bool,
    newly_locked: bool,
    /// Whether its savepoint may exist (`Returned::opened`).
    opened: bool,
    /// A kept write's last statements, for the writer to send.
    last: Option<QueryBuilder<DB>>,
    /// Whether it was the first on a transaction begun ahead (`Lease::begun_ahead`).
    begun_ahead: bool,
    /// The previous write's handover, lent with it, and that write, to be told.
    previous: Option<(Previous<DB>, Committed)>,
}

impl<DB: Database> Lane<DB>
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
{
    /// The next batch's first write, answering closes while there is none; `None` when the
    /// last handle of the writer is gone. A transaction begun ahead is rolled back when the
    /// connection has been idle for `trust_idle_for`: an idle server's connections are not
    /// left in a transaction.
    async fn first(&mut self) -> Option<Job<DB>> {
        if let Some(job) = self.carried.take() {
            return Some(job);
        }
        loop {
            let idle_until = self
                .held
                .as_ref()
                .filter(|held| held.begun)
                .and_then(|held| held.answered.checked_add(self.dialect.trust_idle_for));
            let message = match idle_until {
                Some(idle_until) => {
                    let Ok(message) = tokio::time::timeout_at(idle_until.into(), self.jobs.recv()).await
                    else {
                        self.end_begun().await;
                        continue;
                    };
                    message?
                }
                None => self.jobs.recv().await?,
            };
            match message {
                Message::Write(job) => return Some(job),
                Message::Close(done) => {
                    self.give_back().await;
                    let _ = done.send(());
                }
            }
        }
    }

    /// Rolls back the held connection's transaction begun ahead, if any; a connection that
    /// fails to is closed.
    async fn end_begun(&mut self) {
        let Some(mut held) = self.held.take() else { return };
        if held.begun {
            if let Err(e) = sqlx::raw_sql("ROLLBACK").execute(&mut *held.conn).await {
                tracing::debug!(error = %e, "the writer's idle connection broke; closing it");
                let _ = held.conn.detach().close().await;
                return;
            }
            held.answered = Instant::now();
            held.begun = false;
        }
        self.held = Some(held);
    }

    /// Gives the held connection back to the pool, out of any transaction.
    async fn give_back(&mut self) {
        self.end_begun().await;
        self.held = None;
    }

    /// Begins a batch for `first`, on the lane's connection or a new one; `None` (with
    /// `first` told why) when that fails. A trusted connection is not sent BEGIN alone: the
    /// first write's opening carries it.
    async fn open(&mut self, first: Job<DB>) -> Option<(PoolConnection<DB>, Batch<DB>, Job<DB>)> {
        // A trusted connection is used as it is by a write that sends its own opening (with
        // BEGIN if none was sent), and by a write of its own if its transaction was begun
        // ahead: a write of its own sends no BEGIN.
        let opens = first.opens_under(self.dialect);
        let as_is = opens || first.own;
        let usable = |held: &Held<DB>| {
            held.answered.elapsed() < self.dialect.trust_idle_for && (opens || (first.own && held.begun))
        };
        let (conn, began, answered, unconfirmed) = match self.held.take() {
            Some(held) if usable(&held) => (held.conn, held.begun, held.answered, held.begun),
            kept => {
                let begin_sql = if as_is {
                    self.dialect.begin.to_owned()
                } else {
                    opening(Some(self.dialect.begin), None, "w1")
                };
                match begin(&self.pool, kept.map(|held| (held.conn, held.begun)), &begin_sql).await {
                    Ok(conn) => (conn, true, Instant::now(), false),
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot begin a write transaction");
                        let _ = first.reply.send(Err(e.to_string()));
                        return None;
                    }
                }
            }
        };
        let batch = Batch {
            began,
            answered,
            waiting: Vec::new(),
            locked: HashSet::new(),
            lent: 1,
            release: None,
            upcoming: None,
            closing: None,
            had_own: false,
            unconfirmed,
            handover: None,
        };
        Some((conn, batch, first))
    }

    /// Lends the connection to the batch's writes in turn, each followed by what the writer
    /// sends for it; returns why the batch ended without committing (empty: it committed).
    async fn run_batch(
        &mut self,
        batch: &mut Batch<DB>,
        mut conn: PoolConnection<DB>,
        first: Job<DB>,
    ) -> String {
        let mut job = first;
        loop {
            let Some((back, mut lent)) = batch.lend(self.dialect, conn, job).await else {
                // The connection went with the lease: so did the transaction.
                return LOST.to_owned();
            };
            conn = back;
            if let Some((previous, committed)) = lent.previous.take()
                && let Err(e) = batch.settle_previous(&mut conn, previous, committed, lent.kept).await
            {
                abandon(conn).await;
                return e;
            }
            // The first write on a transaction begun ahead that was not kept may have found
            // the connection broken: the batch ends with it, and the writes queued behind
            // it start the next one, which begins on a connection that answers.
            let mut next = if lent.begun_ahead && !lent.kept { None } else { self.next_in_batch(batch) };
            // A handover goes with the next write if it is one of its own, else now.
            if !next.as_ref().is_some_and(|next| next.own)
                && let Some((handover, committed)) = batch.handover.take()
            {
                // Alone when no other write of the batch (kept or settled) waits for its commit.
                let alone = next.is_none() && batch.waiting.is_empty();
                match batch.send_handover(&mut conn, handover, committed, alone).await {
                    Err(e) => {
                        if let Some(next) = next {
                            let _ = next.reply.send(Err(e.clone()));
                        }
                        abandon(conn).await;
                        return e;
                    }
                    Ok(Handed::Aborted) => return self.roll_back(conn).await,
                    Ok(Handed::Applied | Handed::Refused) => {}
                }
                // A write that came meanwhile joins the batch (not after a write that must
                // start the next one, or a close).
                if next.is_none() && self.carried.is_none() && batch.closing.is_none() {
                    next = self.next_in_batch(batch);
                }
            }
            let sent = batch.send_after(self.dialect, &mut conn, lent, next.as_ref()).await;
            match (sent, next) {
                (Ok(()), Some(next)) => {
                    job = next;
                    batch.lent += 1;
                }
                (Ok(()), None) => {
                    // Tests hold the report of a commit (`return(ms)`) without blocking a thread.
                    if let Some(ms) = held_report() {
                        tokio::time::sleep(Duration::from_millis(ms)).await;
                    }
                    batch.waiting.sort_by_key(|c| c.order);
                    for w in batch.waiting.drain(..) {
                        let _ = w.send(Ok(()));
                    }
                    // A batch that began commits, and then begins the next (`then_send`).
                    let begun = self.dialect.begins_ahead && batch.began;
                    self.held = Some(Held { conn, answered: batch.answered, begun });
                    return String::new();
                }
                (Err(e), next) => {
                    if let Some(next) = next {
                        let _ = next.reply.send(Err(e.to_string()));
                    }
                    abandon(conn).await;
                    return e.to_string();
                }
            }
        }
    }

    /// Ends a batch whose transaction the changes of a write it kept alone ended
    /// ([`Handed::Aborted`]): it is rolled back, and nothing else is lost (the empty answer).
    async fn roll_back(&mut self, mut conn: PoolConnection<DB>) -> String {
        let mut sql = vec!["ROLLBACK".to_owned()];
        if self.dialect.begins_ahead {
            sql.push(self.dialect.begin.to_owned());
        }
        match send(&mut conn, &sql).await {
            Ok(()) => {
                self.held = Some(Held { conn, answered: Instant::now(), begun: self.dialect.begins_ahead });
                String::new()
            }
            Err(e) => {
                abandon(conn).await;
                e.to_string()
            }
        }
    }

    /// The write that joins the batch next, if one is queued and the batch has room. A
    /// write that must be first, or a close, ends the batch here.
    fn next_in_batch(&mut self, batch: &mut Batch<DB>) -> Option<Job<DB>> {
        if batch.lent >= self.dialect.max_batch {
            return None;
        }
        match self.jobs.try_recv() {
            Ok(Message::Write(job)) if job.fresh => {
                self.carried = Some(job);
                None
            }
            Ok(Message::Write(job)) => Some(job),
            Ok(Message::Close(done)) => {
                batch.closing = Some(done);
                None
            }
            Err(_) => None,
        }
    }

    /// After a batch: answers a close asked for while it ran, and tells its kept writes
    /// that they were not kept if it did not commit (`error`).
    async fn end(&mut self, mut batch: Batch<DB>, error: &str) {
        if let Some(done) = batch.closing.take() {
            self.give_back().await;
            let _ = done.send(());
        }
        // A handover not sent: its write was not kept either.
        if let Some((_, committed)) = batch.handover.take() {
            batch.waiting.push(committed);
        }
        if batch.waiting.is_empty() {
            return;
        }
        tracing::warn!(
            error,
            writes = batch.waiting.len(),
            "write transaction failed; its writes are not kept"
        );
        for w in batch.waiting {
            let _ = w.send(Err(io_error(format!("the write's transaction did not commit: {error}"))));
        }
    }
}

impl<DB: Database> Batch<DB> {
    /// Lends `conn` to `job` inside its savepoint and waits for it back; `None` when the
    /// write kept it (the transaction went with it).
    async fn lend(
        &mut self,
        dialect: Dialect,
        conn: PoolConnection<DB>,
        job: Job<DB>,
    ) -> Option<(PoolConnection<DB>, Lent<DB>)> {
        let bounded =
            dialect.bound_new_projects && !self.locked.is_empty() && !self.locked.contains(&job.project);
        let savepoint = self.upcoming.take().unwrap_or_else(|| savepoint_after(self.release));
        // The write sends its opening (the previous savepoint's release and its own), or
        // the writer already did.
        let begin = (!self.began).then_some(dialect.begin);
        let sent_by_write = job.opens_under(dialect).then(|| opening(begin, self.release, savepoint));
        // A write of its own has no savepoint: nothing to release or undo for it.
        let own = job.own;
        self.had_own |= own;
        let (back, returned) = oneshot::channel();
        let begun_ahead = std::mem::take(&mut self.unconfirmed);
        // A write of its own sends the previous write's handover with its first statement
        // (the writer sent it before lending to any other).
        let (previous, committed) = match self.handover.take() {
            Some((handover, committed)) => (Previous::Untaken(handover), Some(committed)),
            None => (Previous::None, None),
        };
        let lease = Lease {
            conn: Some(conn),
            back: Some(back),
            bounded,
            begun_ahead,
            opened: !own && sent_by_write.is_none(),
            opening: sent_by_write,
            writer_sends_last: dialect.writer_sends_last,
            previous,
            on_commit: None,
        };
        // If the write is gone (its request was cancelled), the lease is dropped here and
        // comes straight back as a rollback.
        let _ = job.reply.send(Ok(lease));
        let Returned { conn, ending: Ending { keep, settles, last, hands_over }, opened, previous } =
            returned.await.ok()?;
        let order = self.lent;
        self.waiting.extend(settles.map(|c| c.placed(order)));
        let keep = keep.map(|c| c.placed(order));
        let kept = keep.is_some();
        let newly_locked = kept && self.locked.insert(job.project.clone());
        match (keep, hands_over) {
            // Kept once its handover is sent and applied.
            (Some(keep), Some(handover)) => self.handover = Some((handover, keep)),
            (keep, _) => self.waiting.extend(keep),
        }
        // A rolled-back write's last statements are never sent.
        let last = last.filter(|_| kept);
        let previous = committed.map(|committed| (previous, committed));
        Some((
            conn,
            Lent {
                project: job.project,
                order,
                savepoint,
                kept,
                newly_locked,
                opened,
                last,
                begun_ahead,
                previous,
            },
        ))
    }

    /// Sends what becomes of a write (its savepoint kept for release, or undone), with its
    /// last statements if the writer sends them, then the next write's opening or the end
    /// of the batch (`then_send`).
    async fn send_after(
        &mut self,
        dialect: Dialect,
        conn: &mut PoolConnection<DB>,
        lent: Lent<DB>,
        next: Option<&Job<DB>>,
    ) -> Result<(), sqlx::Error>
    where
        for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
        DB::Arguments: IntoArguments<DB>,
    {
        let mut sql = Vec::new();
        if lent.opened {
            // BEGIN and the previous savepoint's release went with this write's opening,
            // or the writer sent them before lending.
            self.began = true;
            self.release = None;
            if lent.kept {
                self.release = Some(lent.savepoint);
            } else {
                // Fails if the savepoint does not exist (the opening never reached the
                // database): then the batch is abandoned, never another write undone.
                sql.push(undo(lent.savepoint));
            }
        }
        let began_before = self.began;
        sql.extend(self.then_send(dialect, next));
        if !sql.is_empty() || lent.last.is_some() {
            self.answered = Instant::now();
        }
        let Some(mut last) = lent.last else { return send(conn, &sql).await };
        if !sql.is_empty() {
            last.push("; ").push(sql.join("; "));
        }
        let Err(e) = last.build().execute(&mut **conn).await else { return Ok(()) };
        // If the write's savepoint is still there, its own statements failed: it alone is
        // rolled back, gets their error, and the writer sends its next statements again,
        // without its release. If not (the writer's statements failed after the release,
        // or the error rolled back the whole transaction), the batch is abandoned.
        if send(conn, &[undo(lent.savepoint)]).await.is_err() {
            return Err(e);
        }
        // Its own line back (a write whose handover it took may have been kept after it).
        if let Some(at) = self.waiting.iter().rposition(|c| c.order == lent.order) {
            let _ = self.waiting.remove(at).send(Err(e));
        }
        if lent.newly_locked {
            self.locked.remove(&lent.project);
        }
        self.began = began_before;
        self.release = None;
        let sql = self.then_send(dialect, next);
        send(conn, &sql).await
    }

    /// Settles the previous write's handover as the write it was lent with left it: that
    /// write is kept if its changes were made, told it is not if they were refused; an
    /// untaken handover is sent alone, unless the write it was lent with was kept (what that
    /// write read did not see it: a write of its own must send it first). Taken with no word
    /// of what became of it (its statement failed, or was cancelled under way), the
    /// transaction is in doubt. Either is an error, and the batch is abandoned.
    async fn settle_previous(
        &mut self,
        conn: &mut PoolConnection<DB>,
        previous: Previous<DB>,
        committed: Committed,
        lent_kept: bool,
    ) -> Result<(), String> {
        match previous {
            Previous::Untaken(_) if lent_kept => {
                self.waiting.push(committed);
                Err("a write was kept without sending first the changes handed to it".to_owned())
            }
            Previous::Untaken(handover) => {
                self.send_handover(conn, handover, committed, false).await.map(drop)
            }
            Previous::Taken(Some(handed)) => {
                self.settle(handed, committed);
                Ok(())
            }
            Previous::Failed(e) => Err(fail(committed, e)),
            Previous::Taken(None) | Previous::None => {
                self.waiting.push(committed);
                Err("a write's changes went with the next write's first statement, which did not finish"
                    .to_owned())
            }
        }
    }

    /// Sends a kept write's handover by itself; with `alone`, as the only write the batch
    /// keeps ([`Handover::send_alone`]). What became of it, once its write is told.
    async fn send_handover(
        &mut self,
        conn: &mut PoolConnection<DB>,
        handover: Box<dyn Handover<DB>>,
        committed: Committed,
        alone: bool,
    ) -> Result<Handed, String> {
        let sent =
            if alone { handover.send_alone(&mut **conn).await } else { handover.send(&mut **conn).await };
        self.answered = Instant::now();
        match sent {
            Ok(handed) => {
                self.settle(handed, committed);
                Ok(handed)
            }
            Err(e) => Err(fail(committed, e)),
        }
    }

    fn settle(&mut self, handed: Handed, committed: Committed) {
        match handed {
            Handed::Applied => self.waiting.push(committed),
            Handed::Refused | Handed::Aborted => {
                let _ = committed.send(Err(io_error("the write's changes were refused".to_owned())));
            }
        }
    }

    /// What the writer sends once a write is done with, after what becomes of that write:
    /// the next write's opening if the writer sends it, or the end of the batch. Updates
    /// whether BEGIN was sent, the savepoint still to release and the next write's savepoint.
    fn then_send(&mut self, dialect: Dialect, next: Option<&Job<DB>>) -> Vec<String> {
        match next {
            // It needs no savepoint, but the transaction must have begun.
            Some(next) if next.own => {
                if self.began {
                    vec![]
                } else {
                    self.began = true;
                    vec![dialect.begin.to_owned()]
                }
            }
            Some(next) if !next.opens_under(dialect) => {
                let begin = (!self.began).then_some(dialect.begin);
                let savepoint = savepoint_after(self.release);
                self.upcoming = Some(savepoint);
                self.began = true;
                vec![opening(begin, self.release.take(), savepoint)]
            }
            // The release is kept at the end because on Postgres a COMMIT of a failed
            // transaction rolls it back without an error, where the RELEASE fails: a batch
            // never reports a commit that did not happen.
            // A write of its own that failed outside its subtransaction (an error of its lock
            // or its reads) leaves the transaction failed with no savepoint to show it: a
            // statement in front of the COMMIT fails then too.
            None if self.began => {
                let commit = match self.release.take() {
                    Some(last) => format!("RELEASE SAVEPOINT {last}; COMMIT"),
                    None if self.had_own => "SELECT 1; COMMIT".to_owned(),
                    None => "COMMIT".to_owned(),
                };
                // Statements after one that fails are not run: a batch that did not commit
                // begins nothing.
                if dialect.begins_ahead { vec![commit, dialect.begin.to_owned()] } else { vec![commit] }
            }
            // No write sent anything: there is no transaction.
            Some(_) | None => vec![],
        }
    }
}

/// Gives a handover's error to the write it came from; the message, for the batch's others.
fn fail(committed: Committed, error: sqlx::Error) -> String {
    let message = error.to_string();
    let _ = committed.send(Err(error));
    message
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

/// Begins a batch on the lane's connection (rolling back a transaction it began ahead and
/// may no longer trust), or on a new one if it has none or it broke while idle (a database
/// restart).
async fn begin<DB: Database>(
    pool: &Pool<DB>,
    held: Option<(PoolConnection<DB>, bool)>,
    sql: &str,
) -> Result<PoolConnection<DB>, sqlx::Error>
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
{
    if let Some((mut conn, begun)) = held {
        let sql = if begun { format!("ROLLBACK; {sql}") } else { sql.to_owned() };
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

/// The fail point `writer.committed`: how long to hold a commit's report, if set.
fn held_report() -> Option<u64> {
    fail::fail_point!("writer.committed", |ms| ms.and_then(|ms| ms.parse().ok()));
    None
}

fn io_error(message: String) -> sqlx::Error {
    sqlx::Error::Io(std::io::Error::other(message))
}

fn stopped() -> sqlx::Error {
    io_error("the database writer has stopped".to_owned())
}
