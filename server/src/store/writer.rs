//! The SQLite batching writer (group commit).
//!
//! SQLite has one write lock per database. Left to the pool, concurrent writers each
//! `BEGIN IMMEDIATE` on their own connection and queue on SQLite's busy handler, which sleeps
//! (1, 2, 5, 10 … ms) instead of handing over the lock when it is free, and every write pays
//! its own commit. Instead, one task owns the write transaction and lends its connection to
//! one write at a time, each inside its own savepoint (ARCHITECTURE.md: a write's rejection
//! or failure rolls back alone). Writes that queue while one runs join the same transaction,
//! which commits when the queue is empty (or the batch is full); each write answers only
//! after that commit, so nothing is acknowledged before it is durable.
//!
//! A write holds a [`Lease`]: the connection, dereferencing to `SqliteConnection`. It ends
//! with [`Lease::commit`] (kept; waits for the batch's commit) or [`Lease::rollback`]; a
//! lease dropped without either (an error, a cancelled request) is rolled back.

use std::ops::{Deref, DerefMut};

use sqlx::pool::PoolConnection;
use sqlx::{Connection, Sqlite, SqliteConnection, SqlitePool};
use tokio::sync::{mpsc, oneshot};

/// Writes per transaction at most: bounds the wait of the batch's first write.
const MAX_BATCH: usize = 64;

const LOST: &str = "the write's connection was lost";

type Reply = oneshot::Sender<Result<Lease, String>>;
type Committed = oneshot::Sender<Result<(), String>>;

/// A handle to the database's writer task (cheap to clone).
#[derive(Clone)]
pub struct Writer {
    queue: mpsc::UnboundedSender<Reply>,
}

/// What a write gives back when it is done with the connection.
struct Returned {
    conn: PoolConnection<Sqlite>,
    /// `Some` = keep the write (and tell it when the batch commits); `None` = roll it back.
    keep: Option<Committed>,
}

/// The writer's connection, lent to one write inside its savepoint.
pub struct Lease {
    conn: Option<PoolConnection<Sqlite>>,
    back: Option<oneshot::Sender<Returned>>,
}

impl Writer {
    /// Starts the writer task for `pool`; it ends when the last handle is dropped.
    pub fn spawn(pool: SqlitePool) -> Self {
        let (queue, jobs) = mpsc::unbounded_channel();
        tokio::spawn(run(pool, jobs));
        Self { queue }
    }

    /// Waits for the connection, inside a fresh savepoint of the current transaction.
    pub async fn lease(&self) -> Result<Lease, sqlx::Error> {
        let (reply, lease) = oneshot::channel();
        self.queue.send(reply).map_err(|_| stopped())?;
        match lease.await {
            Ok(Ok(lease)) => Ok(lease),
            Ok(Err(message)) => Err(io_error(message)),
            Err(_) => Err(stopped()),
        }
    }
}

impl Lease {
    /// Keeps the write and waits until its transaction commits (durable on return).
    pub async fn commit(mut self) -> Result<(), sqlx::Error> {
        let (committed, outcome) = oneshot::channel();
        self.give_back(Some(committed));
        match outcome.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(message)) => Err(io_error(message)),
            Err(_) => Err(stopped()),
        }
    }

    /// Rolls the write back (to its savepoint; the other writes of the batch are kept).
    #[allow(clippy::unused_async)] // the same shape as `sqlx::Transaction::rollback`
    pub async fn rollback(mut self) -> Result<(), sqlx::Error> {
        self.give_back(None);
        Ok(())
    }

    fn give_back(&mut self, keep: Option<Committed>) {
        if let (Some(conn), Some(back)) = (self.conn.take(), self.back.take()) {
            // If the writer is gone, so is the transaction: nothing to keep either way.
            let _ = back.send(Returned { conn, keep });
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.give_back(None);
    }
}

impl Deref for Lease {
    type Target = SqliteConnection;
    #[allow(clippy::expect_used)] // present from creation until commit/rollback consume the lease
    fn deref(&self) -> &SqliteConnection {
        self.conn.as_ref().expect("lease holds its connection until it ends")
    }
}

impl DerefMut for Lease {
    #[allow(clippy::expect_used)] // as above
    fn deref_mut(&mut self) -> &mut SqliteConnection {
        self.conn.as_mut().expect("lease holds its connection until it ends")
    }
}

/// The writer task: one transaction per batch of queued writes, a savepoint per write.
async fn run(pool: SqlitePool, mut jobs: mpsc::UnboundedReceiver<Reply>) {
    while let Some(first) = jobs.recv().await {
        let conn = match begin(&pool).await {
            Ok(conn) => conn,
            Err(e) => {
                tracing::warn!(error = %e, "cannot begin a write transaction");
                let _ = first.send(Err(e.to_string()));
                continue;
            }
        };
        let mut waiting: Vec<Committed> = Vec::new();
        let mut conn = Some(conn);
        let mut next = Some(first);
        let mut failed = None;
        let mut lent = 0;
        while let Some(job) = next.take() {
            let Some(lending) = conn.take() else { break };
            lent += 1;
            match lend(lending, job).await {
                (Some(back), Ok(kept)) => {
                    conn = Some(back);
                    waiting.extend(kept);
                }
                (back, result) => {
                    conn = back;
                    failed = Some(result.err().map_or_else(|| LOST.to_owned(), |e| e.to_string()));
                    break;
                }
            }
            if lent < MAX_BATCH {
                next = jobs.try_recv().ok();
            }
        }
        let error = match (conn, failed) {
            (Some(mut conn), None) => match sqlx::raw_sql("COMMIT").execute(&mut *conn).await {
                Ok(_) => {
                    for w in waiting {
                        let _ = w.send(Ok(()));
                    }
                    continue;
                }
                Err(e) => {
                    abandon(conn).await;
                    e.to_string()
                }
            },
            (conn, failed) => {
                if let Some(conn) = conn {
                    abandon(conn).await;
                }
                failed.unwrap_or_else(|| LOST.to_owned())
            }
        };
        tracing::warn!(error, writes = waiting.len(), "write transaction failed; its writes are not kept");
        for w in waiting {
            let _ = w.send(Err(format!("the write's transaction did not commit: {error}")));
        }
    }
}

async fn begin(pool: &SqlitePool) -> Result<PoolConnection<Sqlite>, sqlx::Error> {
    let mut conn = pool.acquire().await?;
    sqlx::raw_sql("BEGIN IMMEDIATE").execute(&mut *conn).await?;
    Ok(conn)
}

/// Rolls a failed transaction back and keeps the connection out of the pool: whatever
/// broke the transaction may have broken the connection.
async fn abandon(mut conn: PoolConnection<Sqlite>) {
    let _ = sqlx::raw_sql("ROLLBACK").execute(&mut *conn).await;
    let _ = conn.detach().close().await;
}

/// Lends the connection to one write inside a savepoint and takes it back. `Ok(Some)` = the
/// write is kept and waits for the commit; an error or a lost connection fails the batch.
async fn lend(
    mut conn: PoolConnection<Sqlite>,
    job: Reply,
) -> (Option<PoolConnection<Sqlite>>, Result<Option<Committed>, sqlx::Error>) {
    if let Err(e) = sqlx::raw_sql("SAVEPOINT write").execute(&mut *conn).await {
        let _ = job.send(Err(e.to_string()));
        return (Some(conn), Err(e));
    }
    let (back, returned) = oneshot::channel();
    // If the write is gone (its request was cancelled), the lease is dropped here and comes
    // straight back as a rollback.
    let _ = job.send(Ok(Lease { conn: Some(conn), back: Some(back) }));
    let Ok(Returned { mut conn, keep }) = returned.await else {
        return (None, Ok(None));
    };
    let end = if keep.is_some() { "RELEASE write" } else { "ROLLBACK TO write; RELEASE write" };
    match sqlx::raw_sql(end).execute(&mut *conn).await {
        Ok(_) => (Some(conn), Ok(keep)),
        Err(e) => {
            if let Some(kept) = keep {
                let _ = kept.send(Err(e.to_string()));
            }
            (Some(conn), Err(e))
        }
    }
}

fn io_error(message: String) -> sqlx::Error {
    sqlx::Error::Io(std::io::Error::other(message))
}

fn stopped() -> sqlx::Error {
    io_error("the database writer has stopped".to_owned())
}
