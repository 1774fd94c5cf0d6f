//! The SQLite backend (the default): one file in WAL mode.
//!
//! Writes begin with `BEGIN IMMEDIATE`, so a writer takes the database's write lock before
//! it reads anything: concurrent writers queue on the busy timeout instead of failing with
//! SQLITE_BUSY half-way through. `synchronous = FULL` makes every acknowledged commit
//! durable, across power loss as well as a killed process.

use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Sqlite as Db, SqliteConnection as Conn, SqlitePool as Pool};

use crate::events::Wakers;
use crate::store::memory_cache::MemoryCache;
use crate::store::writer::{Dialect, Writer};

/// µs since the epoch by the database clock.
macro_rules! now_us {
    () => {
        "CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)"
    };
}

mod admin;
mod liveness;
mod maintenance;
mod reads;
mod sql;
mod write;

pub use write::SqliteTx;

/// This backend's write transaction (`Store::Tx`).
type BackendTx = SqliteTx;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/sqlite");

/// Baton's store on SQLite.
#[derive(Clone)]
pub struct SqliteStore {
    pool: Pool,
    wakers: Wakers,
    /// Every write goes through it (see `writer.rs`); reads use the pool.
    writer: Writer<Db>,
    memory_cache: MemoryCache,
}

type Backend = SqliteStore;

impl SqliteStore {
    /// Opens (creating if missing) and migrates the database at `url` (`sqlite://path`).
    pub async fn connect(url: &str, wakers: Wakers) -> anyhow::Result<Self> {
        let options = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(30))
            // The writer's connection keeps each write's log prepared together with the
            // statements the writer sends after it (`writer_sends_last`): a few texts per
            // kind of write, more than sqlx's default of 100 in all.
            .statement_cache_capacity(400);
        let pool = SqlitePoolOptions::new()
            .max_connections(8)
            // An embedded database's connections do not go stale like network ones: no ping
            // (a hand-off to the connection's thread) before every use.
            .test_before_acquire(false)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(options)
            .await?;
        MIGRATOR.run(&pool).await?;
        backfill_state_digests(&mut *pool.acquire().await?).await?;
        let writer = Writer::spawn(pool.clone(), DIALECT);
        Ok(Self { pool, wakers, writer, memory_cache: MemoryCache::default() })
    }
}

/// SQLite has one write lock per database: one writer, `BEGIN IMMEDIATE` so the batch
/// takes the lock before it reads anything.
const DIALECT: Dialect = Dialect {
    begin: "BEGIN IMMEDIATE",
    max_batch: 64,
    lanes: 1,
    bound_new_projects: false,
    // Every statement is a hand-off to the connection's thread, and a query may hold
    // several statements with bound parameters: a write's savepoint goes with its project
    // lock, and its log with the writer's COMMIT.
    writes_open_savepoints: true,
    // An embedded database's connection does not go stale while idle.
    trust_idle_for: std::time::Duration::MAX,
    writer_sends_last: true,
};

impl SqliteStore {
    /// Runs `reads` in order as one query on one connection: one hand-off in all. Each
    /// statement reads the database as its turn comes, so every read sees at least what
    /// the first one saw. The rows come back by statement.
    async fn read_together(&self, reads: Vec<Read>) -> Result<Vec<Vec<Row>>> {
        let mut sql = String::new();
        let mut bound = 0;
        for read in &reads {
            if !sql.is_empty() {
                sql.push_str("; ");
            }
            sql.push_str(&shift_parameters(read.sql, bound));
            bound += read.binds.len();
        }
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for value in reads.into_iter().flat_map(|r| r.binds) {
            query = query.bind(value);
        }
        let mut conn = self.pool.acquire().await?;
        Ok(rows_by_statement(sqlx::Executor::fetch_many(&mut *conn, query)).await?)
    }
}

/// The rows of a query of several statements, by statement: each statement's rows come
/// before its completion. One list per statement, and one more (empty) after the last.
async fn rows_by_statement<S>(mut results: S) -> Result<Vec<Vec<Row>>, sqlx::Error>
where
    S: futures::Stream<Item = Result<sqlx::Either<<Db as sqlx::Database>::QueryResult, Row>, sqlx::Error>>
        + Unpin,
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

/// `sql` with each parameter `$n` renumbered `$n+by`, to follow another statement's in one
/// query (SQLite binds `$n` to the query's n-th value, whichever statement it is in). Only
/// for Baton's own statements: a `$` in a string literal would be renumbered too.
fn shift_parameters(sql: &str, by: usize) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut rest = sql;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..=at]);
        rest = &rest[at + 1..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        match rest[..digits].parse::<usize>() {
            Ok(n) => out.push_str(&(n + by).to_string()),
            Err(_) => out.push_str(&rest[..digits]),
        }
        rest = &rest[digits..];
    }
    out + rest
}

/// A resume's brief is read once the write has read all it needs (`service::resume`):
/// SQLite's reads and writes all compete for the same cores, and read side by side they
/// slowed each other (the write's lease waited up to a scheduler slice, 0.75 ms, p90).
const RESUME_BRIEF_WAITS: bool = true;

include!("../shared/head.rs");
include!("../shared/memory.rs");
include!("../shared/reads.rs");
include!("../shared/transfer.rs");
include!("../shared/store_impl.rs");
include!("../shared/backfill.rs");

#[cfg(test)]
mod tests {
    use super::shift_parameters;

    #[test]
    fn parameters_are_renumbered_whole() {
        assert_eq!(shift_parameters("a = $1 AND b IN ($2, $10) OR $3", 3), "a = $4 AND b IN ($5, $13) OR $6");
        assert_eq!(shift_parameters("no parameters, a $ alone", 3), "no parameters, a $ alone");
    }
}
