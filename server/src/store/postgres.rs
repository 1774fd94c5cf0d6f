//! The Postgres backend (teams; several server instances may share one database).
//!
//! The project-row lock is the row lock of `INSERT … ON CONFLICT DO UPDATE`, held to commit,
//! so revisions are allocated in commit order across instances. Each commit sends a
//! `NOTIFY baton_events` (project and revision) that wakes the other instances' readers: a
//! hint only, as readers always read the event table.

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use sqlx::{PgConnection as Conn, PgPool as Pool, Postgres as Db};

use crate::events::Wakers;
use crate::store::memory_cache::MemoryCache;

type Tx = sqlx::Transaction<'static, Db>;

/// µs since the epoch by the database clock (the same clock for every instance).
macro_rules! now_us {
    () => {
        "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000 AS BIGINT)"
    };
}

/// The two-argument maximum.
macro_rules! greatest {
    () => {
        "GREATEST"
    };
}

/// The NOTIFY channel.
pub const CHANNEL: &str = "baton_events";

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/postgres");

/// Baton's store on Postgres.
#[derive(Clone)]
pub struct PgStore {
    pool: Pool,
    wakers: Wakers,
    notifier: Notifier,
    memory_cache: MemoryCache,
}

type Backend = PgStore;

impl PgStore {
    /// Connects to and migrates the database at `url`, and starts listening for other
    /// instances' commits.
    pub async fn connect(url: &str, wakers: Wakers) -> anyhow::Result<Self> {
        let options: PgConnectOptions = url.parse()?;
        let pool = PgPoolOptions::new()
            .max_connections(16)
            // While the database is unreachable, requests answer UNAVAILABLE after this long.
            .acquire_timeout(Duration::from_secs(5))
            .connect_with(options)
            .await?;
        MIGRATOR.run(&pool).await?;
        let notifier = Notifier::spawn(pool.clone());
        let store = Self { pool, wakers, notifier, memory_cache: MemoryCache::default() };
        store.spawn_listener();
        Ok(store)
    }

    /// Wakes local readers on other instances' commits. Reconnects by itself (PgListener
    /// does); when it is down, readers still poll.
    fn spawn_listener(&self) {
        let pool = self.pool.clone();
        let wakers = self.wakers.clone();
        tokio::spawn(async move {
            loop {
                let mut listener = match PgListener::connect_with(&pool).await {
                    Ok(l) => l,
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot LISTEN for other instances' commits; retrying");
                        tokio::time::sleep(Duration::from_secs(2)).await;
                        continue;
                    }
                };
                if let Err(e) = listener.listen(CHANNEL).await {
                    tracing::warn!(error = %e, "LISTEN failed; retrying");
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    continue;
                }
                loop {
                    match listener.recv().await {
                        Ok(n) => {
                            let project = n.payload().rsplit_once('\n').map_or(n.payload(), |(p, _)| p);
                            wakers.wake(project);
                        }
                        Err(sqlx::Error::PoolClosed) => return,
                        Err(e) => {
                            tracing::warn!(error = %e, "LISTEN connection lost; reconnecting");
                            break;
                        }
                    }
                }
            }
        });
    }
}

async fn begin_write(store: &Backend) -> Result<Tx> {
    Ok(store.pool.begin().await?)
}

/// Writes that take no revision run as single statements (autocommit): one round trip each.
async fn plain_write(store: &Backend) -> Result<Plain> {
    Ok(Plain(store.pool.acquire().await?))
}

/// A pool connection in autocommit mode, shaped like SQLite's writer lease.
struct Plain(sqlx::pool::PoolConnection<Db>);

impl Plain {
    /// Every statement already committed on its own.
    #[allow(clippy::unused_async)]
    async fn commit(self) -> Result<()> {
        Ok(())
    }
}

impl std::ops::Deref for Plain {
    type Target = Conn;
    fn deref(&self) -> &Conn {
        &self.0
    }
}

impl std::ops::DerefMut for Plain {
    fn deref_mut(&mut self) -> &mut Conn {
        &mut self.0
    }
}

/// The project-row lock (see `shared/write.rs` and the `baton_lock` migration): the lock,
/// then the request id's lookup with a snapshot taken after the lock, in one round trip. $3:
/// the write changes the project's memory (sets `memory_revision`).
const LOCK_PROJECT: &str =
    "SELECT out_revision, out_now_us, out_caps, out_hash, out_reply FROM baton_lock($1, $2, $3)";

/// Joins the statements of a `Combined` query: data-modifying CTEs of one statement.
fn open_statement(sql: &mut sqlx::QueryBuilder<Db>, before: usize) {
    sql.push(if before == 0 { "WITH " } else { "), " }).push(format_args!("s{before} AS ("));
}

fn close_statements(sql: &mut sqlx::QueryBuilder<Db>) {
    sql.push(") SELECT 1");
}

/// Tells the other instances' readers about a commit (see `Notifier`).
fn announce(store: &Backend, project: &str, revision: i64) {
    store.notifier.announce(project, revision);
}

/// Sends the NOTIFYs that wake other instances' readers, after the commits they announce.
///
/// Not inside the write's transaction: Postgres serializes the commits of all transactions
/// that NOTIFY (a database-wide lock held through the commit), which made every write wait
/// for every other one. A hint only (readers always read the event table and poll), so
/// one task sends them, coalesced to each project's newest revision, in one statement.
#[derive(Clone)]
struct Notifier {
    queue: tokio::sync::mpsc::UnboundedSender<(String, i64)>,
}

impl Notifier {
    fn spawn(pool: Pool) -> Self {
        let (queue, mut commits) = tokio::sync::mpsc::unbounded_channel::<(String, i64)>();
        tokio::spawn(async move {
            while let Some(first) = commits.recv().await {
                let mut newest: HashMap<String, i64> = HashMap::from([first]);
                while let Ok((project, revision)) = commits.try_recv() {
                    let r = newest.entry(project).or_insert(revision);
                    *r = (*r).max(revision);
                }
                let payloads: Vec<String> = newest.into_iter().map(|(p, r)| format!("{p}\n{r}")).collect();
                let sent = sqlx::query("SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p")
                    .bind(CHANNEL)
                    .bind(&payloads)
                    .execute(&pool)
                    .await;
                if let Err(e) = sent {
                    tracing::debug!(error = %e, "NOTIFY failed; other instances' readers poll instead");
                }
            }
        });
        Self { queue }
    }

    fn announce(&self, project: &str, revision: i64) {
        let _ = self.queue.send((project.to_owned(), revision));
    }
}

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
