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
use crate::store::writer::{Dialect, Lease, Writer};

/// A write: the batching writer's connection, inside the write's own savepoint.
type Tx = Lease<Db>;

/// µs since the epoch by the database clock.
macro_rules! now_us {
    () => {
        "CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)"
    };
}

/// The two-argument maximum.
macro_rules! greatest {
    () => {
        "MAX"
    };
}

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
            .busy_timeout(Duration::from_secs(30));
        let pool = SqlitePoolOptions::new()
            .max_connections(8)
            // An embedded database's connections do not go stale like network ones: no ping
            // (a hand-off to the connection's thread) before every use.
            .test_before_acquire(false)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(options)
            .await?;
        MIGRATOR.run(&pool).await?;
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
    // A statement is a hand-off to the connection's thread, not a round trip: the writer
    // sends the savepoints.
    writes_open_savepoints: false,
    trust_idle_for: std::time::Duration::ZERO,
};

/// Writes that take no revision (liveness, chunks, token use) go through the writer too, so
/// they never wait on SQLite's busy handler behind a batch.
async fn plain_write(store: &Backend) -> Result<Tx> {
    Ok(store.writer.lease("", false, false).await?)
}

/// The project-row lock (see `shared/write.rs`): creates the project on first use, allocates
/// the next revision, reads the write's time (never earlier than the project's previous
/// write) and memory caps, sets `memory_revision` when the write changes memory ($3), and
/// looks up the request id ($2) — safe in one statement here, as
/// the writer already holds the database's write lock when it runs.
const LOCK_PROJECT: &str = concat!(
    "INSERT INTO projects (key, head_revision, last_write_us, created_us, memory_revision) VALUES ($1, 1, ",
    now_us!(),
    ", ",
    now_us!(),
    ", CASE WHEN $3 THEN 1 ELSE 0 END) ON CONFLICT (key) DO UPDATE SET head_revision = projects.head_revision + 1, ",
    "memory_revision = CASE WHEN $3 THEN projects.head_revision + 1 ELSE projects.memory_revision END, ",
    "last_write_us = MAX(projects.last_write_us, ",
    now_us!(),
    ") RETURNING head_revision, last_write_us, memory_caps, ",
    "(SELECT request_hash FROM requests WHERE project = $1 AND request_id = $2), ",
    "(SELECT reply FROM requests WHERE project = $1 AND request_id = $2)"
);

/// Reads no record with the lock: here a statement is a hand-off to the connection's thread,
/// not a round trip, so the write reads it when it needs it.
async fn lock_project(
    tx: &mut Tx,
    project: &str,
    request_id: Option<&str>,
    memory: bool,
    _prefetch: Option<&Prefetch<'_>>,
) -> Result<(Locked, Option<Prefetched>), sqlx::Error> {
    let locked =
        sqlx::query_as(LOCK_PROJECT).bind(project).bind(request_id).bind(memory).fetch_one(&mut **tx).await?;
    Ok((locked, None))
}

/// Joins the statements of a `Combined` query: SQLite runs `;`-separated statements in order.
fn open_statement(sql: &mut sqlx::QueryBuilder<Db>, before: usize) {
    if before > 0 {
        sql.push("; ");
    }
}

fn close_statements(_sql: &mut sqlx::QueryBuilder<Db>) {}

/// Nothing to announce: other processes do not share this database's watchers.
fn announce(_store: &Backend, _project: &str, _revision: i64) {}

include!("shared/write.rs");
include!("shared/sessions.rs");
include!("shared/checkpoints.rs");
include!("shared/memory.rs");
include!("shared/reads.rs");
include!("shared/tokens.rs");
include!("shared/retention.rs");
include!("shared/purge.rs");
include!("shared/transfer.rs");
include!("shared/store_impl.rs");
