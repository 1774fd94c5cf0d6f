//! The SQLite backend (the default): one file in WAL mode.
//!
//! Writes begin with `BEGIN IMMEDIATE`, so a writer takes the database's write lock before
//! it reads anything: concurrent writers queue on the busy timeout instead of failing with
//! SQLITE_BUSY half-way through. `synchronous = FULL` makes every acknowledged commit
//! durable, across power loss as well as a killed process.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::sqlite::SqliteRow as Row;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Sqlite as Db, SqlitePool as Pool};

use crate::store::Commits;
use crate::store::writer::Writer;

mod commit_links;
mod engine;
mod files;
mod items;
mod maintenance;
mod reservations;
mod sql;
mod write;

pub use write::SqliteTx;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/sqlite");

/// Baton's store on SQLite.
#[derive(Clone)]
pub struct SqliteStore {
    pool: Pool,
    commits: Arc<dyn Commits>,
    /// Every write goes through it (see `writer.rs`), on a connection of its own
    /// (`writer_pool`); reads use the pool.
    writer: Writer<write::Lanes>,
    writer_pool: Pool,
    /// Searches read through connections of their own, each keeping a larger page cache
    /// (`SEARCH_CACHE`).
    search_pool: Pool,
}

/// The page cache of a search connection (KiB): a search looks up each of its up to
/// `search::RANKED` candidates' documents, spread over the whole table; with SQLite's
/// default 2 MiB cache the 1% row of `baton-bench` missed its target (docs/performance.md). Only the two search connections keep it, so the memory row
/// (every other read ignoring paging) stays as it was.
const SEARCH_CACHE: &str = "-16384";

/// The writer's connection keeps its temporary data in memory (`temp_store = MEMORY`), its
/// savepoints' journals above all: SQLite writes a statement journal past 64 KiB to a new
/// file, and a small write's savepoint journals about twenty pages (each table and index it
/// touches, the search index's among them), so every write created, wrote and deleted a file
/// in the temporary folder (the etcd rows of `baton-bench`; docs/performance.md). The
/// journal lasts one transaction; the writer's queries read by key, so nothing else it keeps
/// there is large.
const WRITER_TEMP_STORE: &str = "memory";

/// The write-ahead log's size (pages) at which a commit copies it into the database file
/// (SQLite's default is 1,000, 4 MB). A small write logs about twenty pages, mostly the same
/// ones as the writes before it (each index's newest leaf, the project's row), so at 1,000
/// every fiftieth commit copied and synced pages that the next fifty overwrite again, in the
/// committing write's time. At 10,000 (a log of up to 40 MB, kept and reused) a copy writes
/// each page once for ten times as many writes (the etcd rows of `baton-bench`, throughput
/// and the 1-client p99; docs/performance.md).
const CHECKPOINT_AFTER_PAGES: &str = "10000";

impl SqliteStore {
    /// Opens (creating if missing) and migrates the database at `url` (`sqlite://path`).
    pub async fn connect(url: &str, commits: impl Commits) -> anyhow::Result<Self> {
        let options = SqliteConnectOptions::from_str(url)?;
        let file = options.get_filename();
        if !url.contains(":memory:") && !url.contains("mode=memory") {
            files::make_private(file).map_err(|e| {
                anyhow::anyhow!("cannot make the database file {} private: {e}", file.display())
            })?;
        }
        let options = options
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(30))
            .pragma("wal_autocheckpoint", CHECKPOINT_AFTER_PAGES)
            // A write's changes and log go as one query: a few texts per kind of write,
            // more than sqlx's default of 100 in all.
            .statement_cache_capacity(400);
        let search_pool = SqlitePoolOptions::new()
            .max_connections(2)
            .test_before_acquire(false)
            .acquire_timeout(Duration::from_secs(30))
            .connect_lazy_with(options.clone().pragma("cache_size", SEARCH_CACHE));
        let writer_pool = SqlitePoolOptions::new()
            .max_connections(u32::try_from(<write::Lanes as crate::store::writer::Backend>::LANES)?)
            .test_before_acquire(false)
            .acquire_timeout(Duration::from_secs(30))
            .connect_lazy_with(options.clone().pragma("temp_store", WRITER_TEMP_STORE));
        let pool = SqlitePoolOptions::new()
            .max_connections(8)
            // An embedded database's connections do not go stale like network ones: no ping
            // (a hand-off to the connection's thread) before every use.
            .test_before_acquire(false)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(options)
            .await?;
        crate::store::schema::migrate_sqlite(&mut *pool.acquire().await?, &MIGRATOR).await?;
        let writer = Writer::spawn(&writer_pool);
        let store = Self { pool, commits: Arc::new(commits), writer, writer_pool, search_pool };
        Ok(store)
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
