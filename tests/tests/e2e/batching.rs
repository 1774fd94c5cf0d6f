//! The Postgres batching writer (`server/src/store/writer.rs`): batches of two instances
//! that lock the same projects in crossing orders never wait for each other for good, a
//! batch does not wait for a lock held elsewhere, a write's lock leaves its project row
//! without a MultiXact, and the server analyzes its new tables within seconds (so
//! connections do not keep plans made on empty tables).

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use baton_tests::{Backend, Server};
use sqlx::Connection;

use crate::{all_events, assert_gapless, project, put_note, write};

/// Two instances, each with clients writing to two projects of one lane in random order,
/// so that their batches take the two project locks in crossing orders. Every write succeeds (no
/// deadlock error, no UNAVAILABLE) and both logs are gapless.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crossing_batches_of_two_instances_all_commit() {
    let a = Server::start(Backend::Postgres).await.unwrap();
    let b = Server::start_on(Backend::Postgres, &a.database_url, &[]).unwrap();
    let (ca, cb) = (a.clients().await, b.clients().await);
    let p = project();
    let q = on_the_same_lane(&p);
    let writes = 120;
    let mut tasks = Vec::new();
    for (i, c) in
        [ca.clone(), ca.clone(), ca.clone(), cb.clone(), cb.clone(), cb.clone()].into_iter().enumerate()
    {
        let (p, q) = (p.clone(), q.clone());
        tasks.push(tokio::spawn(async move {
            let mut c = c;
            let mut to_p = 0;
            for n in 0..writes {
                // Each client picks at random, so batches hold both projects in any order.
                let target = if uuid::Uuid::new_v4().as_bytes()[0] & 1 == 0 { &p } else { &q };
                to_p += usize::from(target == &p);
                put_note(&mut c, target, &format!("c{i}-{n}"), "crossing", write())
                    .await
                    .unwrap_or_else(|s| panic!("client {i} write {n} on {target}: {s:?}"));
            }
            to_p
        }));
    }
    let mut to_p = 0;
    for t in tasks {
        to_p += tokio::time::timeout(Duration::from_mins(2), t).await.expect("writes stalled").unwrap();
    }
    let mut ca = ca;
    for (target, n) in [(&p, to_p), (&q, 6 * writes - to_p)] {
        let events = all_events(&mut ca, target).await;
        assert_eq!(events.len(), n, "every write to {target} has its event");
        assert_gapless(&events);
    }
}

/// A write that joins a batch holding another project, and finds its own project's row
/// locked elsewhere (another instance, an open psql), gives up after a bounded wait and
/// starts again in a batch of its own: the writes already in the batch commit at once
/// instead of waiting for that lock with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_does_not_wait_for_a_lock_held_elsewhere() {
    let server = Server::start(Backend::Postgres).await.unwrap();
    let c = server.clients().await;
    let p = project();
    let q = on_the_same_lane(&p);
    put_note(&mut c.clone(), &q, "k", "v", write()).await.unwrap();
    let mut holder = hold_project_row(&server, &q).await;

    // Writes to p, back to back from several clients: the lane always has a batch holding p.
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..16)
        .map(|i| {
            let (mut c, p, stop) = (c.clone(), p.clone(), stop.clone());
            tokio::spawn(async move {
                let mut done = Vec::new();
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    let started = Instant::now();
                    put_note(&mut c, &p, &format!("c{i}-{n}"), "busy", write()).await.unwrap();
                    done.push((started, Instant::now()));
                    n += 1;
                }
                done
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let joined = Instant::now();
    let blocked = {
        let (mut c, q) = (c.clone(), q.clone());
        tokio::spawn(async move { put_note(&mut c, &q, "k", "after the lock", write()).await })
    };
    tokio::time::sleep(Duration::from_secs(3)).await;
    let released = Instant::now();
    sqlx::raw_sql("COMMIT").execute(&mut holder).await.unwrap();
    blocked.await.unwrap().expect("the write to the locked project goes through once it is free");
    stop.store(true, Ordering::Relaxed);
    // Each writer has one write to p in flight when the write to q is sent. Had the batch
    // waited for q's lock, nearly all of them would end after the release. One sent just
    // before q's may still reach the lane after it, and wait behind q's batch of its own:
    // the server handles a connection's requests on several threads, so arrival order is
    // not send order (a loaded machine widens that window).
    let (mut in_flight, mut waited) = (0, 0);
    for w in writers {
        let done = w.await.unwrap();
        if let Some(&(_, finished)) = done.iter().rev().find(|(started, _)| *started < joined) {
            in_flight += 1;
            waited += usize::from(finished > released);
        }
    }
    assert_eq!(in_flight, 16, "every writer had a write to p under way when the write to q came");
    assert!(
        waited <= 3,
        "{waited} of the {in_flight} writes to p under way when the write to q joined their batch waited for q's lock"
    );
    let mut c = c;
    for target in [&p, &q] {
        assert_gapless(&all_events(&mut c, target).await);
    }
}

/// A connection of its own, in a transaction that holds `project`'s row lock (as another
/// instance's batch or an open psql would) until it commits or rolls back.
async fn hold_project_row(server: &Server, project: &str) -> sqlx::PgConnection {
    let mut holder = sqlx::PgConnection::connect(&server.database_url).await.unwrap();
    sqlx::raw_sql("BEGIN").execute(&mut holder).await.unwrap();
    sqlx::query("SELECT key FROM projects WHERE key = $1 FOR UPDATE")
        .bind(project)
        .execute(&mut holder)
        .await
        .unwrap();
    holder
}

/// A project that the writer puts on the same lane as `p` (its lane is the project key's
/// `DefaultHasher` hash modulo the lanes, 4 on Postgres): only writes of one lane share
/// batches, so only they can lock both projects in one transaction.
fn on_the_same_lane(p: &str) -> String {
    let lane = |key: &str| {
        let mut hasher = DefaultHasher::new();
        key.hash(&mut hasher);
        hasher.finish() % 4
    };
    loop {
        let q = project();
        if lane(&q) == lane(p) {
            return q;
        }
    }
}

/// A new database's tables are analyzed by the server once they have taken some writes,
/// well before autovacuum's first round (a minute) would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_tables_are_analyzed_within_seconds() {
    let server = Server::start(Backend::Postgres).await.unwrap();
    let mut c = server.clients().await;
    let mut db = sqlx::PgConnection::connect(&server.database_url).await.unwrap();
    // Autovacuum may visit a new database early: keep it off these tables, so that only
    // the server's own ANALYZE can count.
    for table in ["memory", "events", "records", "requests", "projects"] {
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("ALTER TABLE {table} SET (autovacuum_enabled = false)")))
            .execute(&mut db)
            .await
            .unwrap();
    }
    let p = project();
    for i in 0..250 {
        put_note(&mut c, &p, &format!("k{i}"), "a note", write()).await.unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let analyzed: Vec<(String,)> =
            sqlx::query_as("SELECT relname::TEXT FROM pg_stat_user_tables WHERE last_analyze IS NOT NULL")
                .fetch_all(&mut db)
                .await
                .unwrap();
        let names: Vec<&str> = analyzed.iter().map(|(n,)| n.as_str()).collect();
        if ["memory", "events", "records", "requests"].iter().all(|t| names.contains(t)) {
            break;
        }
        assert!(Instant::now() < deadline, "tables not analyzed after 30 s: only {names:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let analyses = |table: &'static str| {
        let url = server.database_url.clone();
        async move {
            let mut db = sqlx::PgConnection::connect(&url).await.unwrap();
            let (n,): (i64,) =
                sqlx::query_as("SELECT analyze_count FROM pg_stat_user_tables WHERE relname = $1")
                    .bind(table)
                    .fetch_one(&mut db)
                    .await
                    .unwrap();
            n
        }
    };
    // Again once a table has doubled; never for one that only changes (the project's row,
    // updated by each write: every ANALYZE costs every connection its plans).
    assert_eq!(analyses("memory").await, 1);
    for i in 250..550 {
        put_note(&mut c, &p, &format!("k{i}"), "a note", write()).await.unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while analyses("memory").await < 2 {
        assert!(Instant::now() < deadline, "memory not analyzed again after doubling");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(analyses("projects").await, 0, "the projects table grew by nothing");
}

/// A write's lock is its project row's update: a row locked by `FOR UPDATE` in the write's
/// savepoint and then updated gets a MultiXact as its locker, which every later lock and
/// read of the row must look up. Batches of several writes to one project; then no version
/// of the project's row has one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_updates_its_project_row_without_a_multixact() {
    let server = Server::start(Backend::Postgres).await.unwrap();
    let c = server.clients().await;
    let p = project();
    let writers: Vec<_> = (0..8)
        .map(|i| {
            let (mut c, p) = (c.clone(), p.clone());
            tokio::spawn(async move {
                for n in 0..5 {
                    put_note(&mut c, &p, &format!("c{i}-{n}"), "v", write()).await.unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
    let mut db = sqlx::PgConnection::connect(&server.database_url).await.unwrap();
    sqlx::raw_sql("CREATE EXTENSION IF NOT EXISTS pageinspect").execute(&mut db).await.unwrap();
    // Every version of the row still on the table's pages, dead ones included (0x1000 is
    // HEAP_XMAX_IS_MULTI).
    let (versions, multi): (i64, i64) = sqlx::query_as(
        "SELECT count(*), count(*) FILTER (WHERE t_infomask & 4096 <> 0) \
         FROM generate_series(0, pg_relation_size('projects') / current_setting('block_size')::int - 1) b, \
         heap_page_items(get_raw_page('projects', b::int)) WHERE t_xmin IS NOT NULL",
    )
    .fetch_one(&mut db)
    .await
    .unwrap();
    assert!(versions > 10, "the row's versions are still on its page ({versions})");
    assert_eq!(multi, 0, "{multi} of the {versions} versions of the project's row have a MultiXact");
}
