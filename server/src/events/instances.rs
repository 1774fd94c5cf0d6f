//! Other server instances on the same Postgres database: each commit of this one is
//! announced by `NOTIFY baton_events` (project and newest revision, coalesced at most every
//! `NOTIFY_EVERY`), and theirs, heard by LISTEN, wake this one's readers. A hint only: a
//! reader reads the event table for any revision it has not sent (and polls it).

use std::collections::HashMap;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use sqlx::{PgPool, Postgres};

use super::Wakers;
use crate::store::Commits;
use crate::store::model::LoggedEvent;

/// The NOTIFY channel.
pub const CHANNEL: &str = "baton_events";

/// The most often the notifier sends: what another instance's watcher may wait longer.
const NOTIFY_EVERY: Duration = Duration::from_millis(10);

/// What the Postgres store tells of its commits: this process's readers (`Wakers`), then
/// the other instances.
#[derive(Clone)]
pub struct Instances {
    wakers: Wakers,
    queue: tokio::sync::mpsc::UnboundedSender<(String, i64)>,
}

impl Instances {
    /// Starts announcing this instance's commits and listening for the others', on
    /// connections of their own to the database `options` names (made when first needed,
    /// and again after one breaks). Ends when `stop` is dropped or says so.
    pub fn start(
        options: &PgConnectOptions,
        wakers: Wakers,
        stop: tokio::sync::watch::Receiver<bool>,
    ) -> Self {
        // One connection listens, one notifies.
        let pool = PgPoolOptions::new().max_connections(2).connect_lazy_with(options.clone());
        let (queue, commits) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(send_notifies(pool.clone(), commits));
        tokio::spawn(listen(pool, wakers.clone(), stop));
        Self { wakers, queue }
    }
}

impl Commits for Instances {
    fn hold(&self, project: &str) -> Box<dyn Send> {
        Box::new(self.wakers.hold(project))
    }
    fn copy_for_reader(&self, project: &str, events: &[LoggedEvent]) -> Option<Vec<LoggedEvent>> {
        self.wakers.copy_for_reader(project, events)
    }
    fn committed(&self, project: &str, newest: Option<i64>, events: Option<Vec<LoggedEvent>>) {
        self.wakers.committed(project, events);
        if let Some(revision) = newest {
            let _ = self.queue.send((project.to_owned(), revision));
        }
    }
}

/// Sends the NOTIFYs that wake other instances' readers, after the commits they announce.
///
/// Not inside the write's transaction: Postgres serializes the commits of all transactions
/// that NOTIFY (a database-wide lock held through the commit), which made every write wait
/// for every other one. A hint only, so one task sends them, coalesced to each project's
/// newest revision, in one statement at most every `NOTIFY_EVERY`, on a connection of its
/// own, without waiting for its commit to be flushed: each NOTIFY is a transaction that
/// every listening connection of every instance must read, which at one per batch cost much
/// of the write throughput (the write rows of `baton-bench`).
async fn send_notifies(pool: PgPool, mut commits: tokio::sync::mpsc::UnboundedReceiver<(String, i64)>) {
    // Kept between sends (sqlx pings a pool connection when it is given back).
    let mut conn: Option<sqlx::pool::PoolConnection<Postgres>> = None;
    let mut sent_at = tokio::time::Instant::now() - NOTIFY_EVERY;
    // Ends when the store, which holds the sender, is gone.
    while let Some(first) = commits.recv().await {
        tokio::time::sleep_until(sent_at + NOTIFY_EVERY).await;
        sent_at = tokio::time::Instant::now();
        let mut newest: HashMap<String, i64> = HashMap::from([first]);
        while let Ok((project, revision)) = commits.try_recv() {
            let r = newest.entry(project).or_insert(revision);
            *r = (*r).max(revision);
        }
        let payloads: Vec<String> = newest.into_iter().map(|(p, r)| format!("{p}\n{r}")).collect();
        if let Err(e) = notify(&pool, &mut conn, &payloads).await {
            tracing::debug!(error = %e, "NOTIFY failed; other instances' readers poll instead");
            conn = None;
        }
    }
    drop(conn);
    pool.close().await;
}

/// One NOTIFY per payload, in one statement, on the notifier's connection.
async fn notify(
    pool: &PgPool,
    conn: &mut Option<sqlx::pool::PoolConnection<Postgres>>,
    payloads: &[String],
) -> Result<(), sqlx::Error> {
    let conn = match conn {
        Some(conn) => conn,
        None => conn.insert(pool.acquire().await?),
    };
    sqlx::query(
        "SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p, set_config('synchronous_commit', 'off', true)",
    )
    .bind(CHANNEL)
    .bind(payloads)
    .execute(&mut **conn)
    .await
    .map(drop)
}

/// Wakes local readers on other instances' commits. Reconnects by itself; while it is
/// down, readers still poll.
async fn listen(pool: PgPool, wakers: Wakers, mut stop: tokio::sync::watch::Receiver<bool>) {
    loop {
        let mut listener = match PgListener::connect_with(&pool).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, "cannot LISTEN for other instances' commits; retrying");
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_secs(2)) => continue,
                    _ = stop.changed() => return,
                }
            }
        };
        if let Err(e) = listener.listen(CHANNEL).await {
            tracing::warn!(error = %e, "LISTEN failed; retrying");
            tokio::select! {
                () = tokio::time::sleep(Duration::from_secs(2)) => continue,
                _ = stop.changed() => return,
            }
        }
        loop {
            let heard = tokio::select! {
                heard = listener.recv() => heard,
                _ = stop.changed() => return,
            };
            match heard {
                Ok(n) => match n.payload().rsplit_once('\n').map(|(p, r)| (p, r.parse::<i64>())) {
                    // "project\nrevision": a reader that has it already reads nothing.
                    Some((project, Ok(revision))) => wakers.announced(project, revision),
                    Some((project, Err(_))) => wakers.wake(project),
                    None => wakers.wake(n.payload()),
                },
                Err(e) => {
                    tracing::warn!(error = %e, "LISTEN connection lost; reconnecting");
                    break;
                }
            }
        }
    }
}
