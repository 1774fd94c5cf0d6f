//! The Postgres backend (teams; several server instances may share one database).
//!
//! The project-row lock is the row lock of `INSERT … ON CONFLICT DO UPDATE`, held to commit,
//! so revisions are allocated in commit order across instances. The store tells its commits
//! to `Commits`; the other instances hear of them through `events::Instances`.

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgConnection as Conn, PgPool as Pool};

use crate::store::Commits;
use crate::store::writer::Writer;

/// How long the server waits for Postgres to answer a new connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections for searches, apart from the 16 of everything else.
const SEARCH_CONNECTIONS: u32 = 4;
/// How long the server waits for a Postgres that is still starting up.
const RECOVERY_WAIT: Duration = Duration::from_mins(5);

/// The first connection. Postgres refuses connections while it starts up, and after a
/// crash or a power cut that is while it replays its WAL: a server started beside it (the
/// machine coming back) waits for it, rather than fail to start.
async fn connect_first(options: &PgConnectOptions) -> anyhow::Result<Conn> {
    let deadline = tokio::time::Instant::now() + RECOVERY_WAIT;
    let mut said = false;
    loop {
        let tried = tokio::time::timeout(CONNECT_TIMEOUT, <Conn as sqlx::Connection>::connect_with(options))
            .await
            .map_err(|_| anyhow::anyhow!("no answer from Postgres within {CONNECT_TIMEOUT:?}"))?;
        match tried {
            Ok(conn) => return Ok(conn),
            // 57P03 cannot_connect_now: starting up, recovering.
            Err(sqlx::Error::Database(e))
                if e.code().as_deref() == Some("57P03") && tokio::time::Instant::now() < deadline =>
            {
                if !said {
                    tracing::info!(reason = %e.message(), "Postgres is starting up; waiting for it");
                    said = true;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// A pool of at most `max` connections, as every pool of the store is made.
fn pool_options(max: u32) -> PgPoolOptions {
    PgPoolOptions::new()
        .max_connections(max)
        // While the database is unreachable, requests answer UNAVAILABLE after this long.
        .acquire_timeout(CONNECT_TIMEOUT)
        // sqlx pings every connection it hands out (a round trip before each read): only one
        // that sat idle long enough to have gone stale is tested.
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for > STALE_AFTER {
                    sqlx::Connection::ping(conn).await?;
                }
                Ok(true)
            })
        })
}

mod apply;
mod commit_links;
mod engine;
mod items;
mod maintenance;
mod reservations;
mod sql;
mod write;

pub use write::PgTx;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/postgres");

/// Baton's store on Postgres.
#[derive(Clone)]
pub struct PgStore {
    pool: Pool,
    /// Searches' own connections (`SEARCH_CONNECTIONS`).
    search_pool: Pool,
    commits: Arc<dyn Commits>,
    /// Every revisioned write goes through it (see `writer.rs`); reads use the pool.
    writer: Writer<write::Lanes>,
}

impl PgStore {
    /// Connects to and migrates the database at `url`.
    pub async fn connect(url: &str, commits: impl Commits) -> anyhow::Result<Self> {
        let options: PgConnectOptions = url.parse()?;
        // Migrated first, on a connection of its own: the pool's connections prepare
        // statements on the tables as they connect.
        let mut conn = connect_first(&options).await?;
        crate::store::schema::migrate_postgres(&mut conn, &MIGRATOR).await?;
        apply::install(&mut conn).await?;
        if let Err(e) = sqlx::Connection::close(conn).await {
            tracing::debug!(error = %e, "closing the migration connection failed");
        }
        // Searches have connections of their own, few: however many run, and however long
        // each may take (their time limit), the rest of the API keeps its connections.
        let search_pool = pool_options(SEARCH_CONNECTIONS).connect_lazy_with(options.clone());
        let pool = pool_options(16).connect_with(options).await?;
        let writer = Writer::spawn(&pool);
        let store = Self { pool, search_pool, commits: Arc::new(commits), writer };
        spawn_analyzer(store.pool.clone());
        Ok(store)
    }
}

/// Analyzes Baton's tables while they grow: each one that holds twice the rows Postgres
/// last counted for it (at its last ANALYZE or VACUUM; at least 200), checked every 2 s.
///
/// Why: a connection plans a prepared statement once for all (a generic plan) after five
/// runs, from the statistics of that moment, and plans again only when the table is
/// analyzed. Planned on a new, still empty database, the lookup of a memory record by
/// (project, record) took the (project, revision) index and filtered every entry of the
/// project, and a busy project's writes slowed down many times over; planned on a table
/// much smaller than it grew, the brief's session reads slowed too. Autovacuum
/// analyzes after a tenth has changed but looks only about once a minute, which is long
/// for a table that is growing fast (a new server, an import); this keeps the plans made
/// from statistics of at least half the table. Growth only, not every change: each
/// ANALYZE makes every connection plan its statements again (five custom plans each before
/// a generic one), and counted by changes, the one-row-per-project table, updated by every
/// write, was analyzed every few hundred writes, each time putting slow resumes in the
/// "resume p99" row of `baton-bench`. Changes that do not grow a table are autovacuum's to
/// analyze.
fn spawn_analyzer(pool: Pool) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(2));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            // Quoted by Postgres (%I): table names taken from the catalog, not from a request.
            // `reltuples`: the rows counted by the last ANALYZE or VACUUM (-1 before any).
            let due: Result<Vec<(String,)>, _> = sqlx::query_as(
                "SELECT format('ANALYZE %I.%I', s.schemaname, s.relname) FROM pg_stat_user_tables s \
                 JOIN pg_class c ON c.oid = s.relid WHERE s.schemaname = current_schema() \
                 AND s.n_mod_since_analyze > 0 AND s.n_live_tup >= GREATEST($1, 2 * c.reltuples)",
            )
            .bind(ANALYZE_AFTER)
            .fetch_all(&pool)
            .await;
            match due {
                Ok(due) => {
                    for (analyze,) in due {
                        if let Err(e) =
                            sqlx::raw_sql(sqlx::AssertSqlSafe(analyze.clone())).execute(&pool).await
                        {
                            tracing::debug!(error = %e, %analyze, "ANALYZE failed; autovacuum will do it");
                        }
                    }
                }
                Err(sqlx::Error::PoolClosed) => return,
                Err(e) => tracing::debug!(error = %e, "cannot read table statistics; retrying"),
            }
        }
    });
}

/// Rows a table holds before the server analyzes it (and twice as many as last time).
const ANALYZE_AFTER: i64 = 200;

/// A pooled connection idle longer than this is pinged before use.
const STALE_AFTER: Duration = Duration::from_secs(2);
