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

/// The writer task: one transaction per batch of queued writes, a savepoint per write. The
/// savepoint statements ride with the transaction's own (`BEGIN …; SAVEPOINT`, `RELEASE …;
/// COMMIT`), so a lone write costs no more hand-offs than a plain transaction.
async fn run(pool: SqlitePool, mut jobs: mpsc::UnboundedReceiver<Reply>) {
    while let Some(first) = jobs.recv().await {
        let mut conn = match begin(&pool).await {
            Ok(conn) => conn,
            Err(e) => {
                tracing::warn!(error = %e, "cannot begin a write transaction");
                let _ = first.send(Err(e.to_string()));
                continue;
            }
        };
        let mut waiting: Vec<Committed> = Vec::new();
        let mut job = first;
        let mut lent = 1;
        let error = loop {
            let (back, returned) = oneshot::channel();
            // If the write is gone (its request was cancelled), the lease is dropped here and
            // comes straight back as a rollback.
            let _ = job.send(Ok(Lease { conn: Some(conn), back: Some(back) }));
            let Ok(Returned { conn: back, keep }) = returned.await else {
                // The connection went with the lease: so did the transaction.
                break LOST.to_owned();
            };
            conn = back;
            let kept = keep.is_some();
            waiting.extend(keep);
            let next = if lent < MAX_BATCH { jobs.try_recv().ok() } else { None };
            let end = match (kept, next.is_some()) {
                (true, true) => "RELEASE write; SAVEPOINT write",
                (true, false) => "RELEASE write; COMMIT",
                (false, true) => "ROLLBACK TO write; RELEASE write; SAVEPOINT write",
                (false, false) => "ROLLBACK TO write; RELEASE write; COMMIT",
            };
            match (sqlx::raw_sql(end).execute(&mut *conn).await, next) {
                (Ok(_), Some(next)) => {
                    job = next;
                    lent += 1;
                }
                (Ok(_), None) => {
                    for w in waiting.drain(..) {
                        let _ = w.send(Ok(()));
                    }
                    break String::new();
                }
                (Err(e), next) => {
                    if let Some(next) = next {
                        let _ = next.send(Err(e.to_string()));
                    }
                    abandon(conn).await;
                    break e.to_string();
                }
            }
        };
        if waiting.is_empty() {
            continue;
        }
        tracing::warn!(error, writes = waiting.len(), "write transaction failed; its writes are not kept");
        for w in waiting {
            let _ = w.send(Err(format!("the write's transaction did not commit: {error}")));
        }
    }
}

async fn begin(pool: &SqlitePool) -> Result<PoolConnection<Sqlite>, sqlx::Error> {
    let mut conn = pool.acquire().await?;
    if let Err(e) = sqlx::raw_sql("BEGIN IMMEDIATE; SAVEPOINT write").execute(&mut *conn).await {
        abandon(conn).await;
        return Err(e);
    }
    Ok(conn)
}

/// Rolls a failed transaction back and keeps the connection out of the pool: whatever
/// broke the transaction may have broken the connection.
async fn abandon(mut conn: PoolConnection<Sqlite>) {
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

    async fn values(pool: &SqlitePool) -> Vec<String> {
        sqlx::query_scalar("SELECT v FROM t ORDER BY v").fetch_all(pool).await.unwrap()
    }

    async fn insert(lease: &mut Lease, v: &str) -> Result<(), sqlx::Error> {
        sqlx::query("INSERT INTO t (v) VALUES ($1)").bind(v).execute(&mut **lease).await.map(drop)
    }

    /// Writes queued together share a transaction, yet each one's rollback (or failure, or
    /// being dropped half-way) undoes only its own statements; kept writes are visible to
    /// other connections as soon as their `commit` returns.
    #[tokio::test]
    async fn each_write_rolls_back_alone_within_a_batch() {
        let dir = tempfile::tempdir().unwrap();
        let pool = pool(&dir).await;
        let writer = Writer::spawn(pool.clone());
        // Hold the connection so the next writes queue up and join one batch.
        let mut first = writer.lease().await.unwrap();
        insert(&mut first, "a").await.unwrap();
        let tasks: Vec<_> = ["b", "c", "d", "e", "f"]
            .into_iter()
            .map(|v| {
                let writer = writer.clone();
                let pool = pool.clone();
                tokio::spawn(async move {
                    let mut lease = writer.lease().await.unwrap();
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
        let mut lease = writer.lease().await.unwrap();
        insert(&mut lease, "g").await.unwrap();
        lease.commit().await.unwrap();
        assert_eq!(values(&pool).await, vec!["a", "b", "f", "g"]);
    }
}
