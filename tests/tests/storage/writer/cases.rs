//! The writer's cases, the same on both backends: each backend's module (`super`) gives
//! the database type, its `BEGIN` and a fresh pool with the table `t`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton_server::store::writer::{Dialect, Lease, OnCommit, Writer};
use sqlx::Pool;

use super::{BEGIN, Db, fresh};

/// A writer with `dialect` on a new database (the first value keeps it alive).
async fn writer(dialect: Dialect) -> (impl Sized, Pool<Db>, Writer<Db>) {
    let (keep, pool) = fresh().await;
    let writer = Writer::spawn(&pool, dialect);
    (keep, pool, writer)
}

pub(super) async fn values(pool: &Pool<Db>) -> Vec<String> {
    sqlx::query_scalar("SELECT v FROM t ORDER BY v").fetch_all(pool).await.unwrap()
}

pub(super) const DIALECT: Dialect = Dialect {
    begin: BEGIN,
    max_batch: 64,
    lanes: 1,
    bound_new_projects: true,
    writes_open_savepoints: false,
    trust_idle_for: Duration::ZERO,
    writer_sends_last: false,
    begins_ahead: false,
};

/// What on-commit work ran, in order, and the work that records its name there.
pub(super) fn recorder() -> (Arc<Mutex<Vec<&'static str>>>, impl Fn(&'static str) -> OnCommit) {
    let ran = Arc::new(Mutex::new(Vec::new()));
    let record = {
        let ran = ran.clone();
        move |v: &'static str| {
            let ran = ran.clone();
            Box::new(move || ran.lock().unwrap().push(v)) as OnCommit
        }
    };
    (ran, record)
}

pub(super) async fn insert(lease: &mut Lease<Db>, v: &str) -> Result<(), sqlx::Error> {
    sqlx::query("INSERT INTO t (v) VALUES ($1)").bind(v).execute(&mut **lease).await.map(drop)
}

/// Writes queued together share a transaction, yet each one's rollback (or failure, or
/// being dropped half-way) undoes only its own statements; kept writes are visible to
/// other connections as soon as their `commit` returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_write_rolls_back_alone_within_a_batch() {
    let (_keep, pool, writer) = writer(DIALECT).await;
    // Hold the connection so the next writes queue up and join one batch.
    let mut first = writer.lease("p", false, false).await.unwrap();
    insert(&mut first, "a").await.unwrap();
    let tasks: Vec<_> = ["b", "c", "d", "e", "f"]
        .into_iter()
        .map(|v| {
            let writer = writer.clone();
            let pool = pool.clone();
            tokio::spawn(async move {
                let mut lease = writer.lease("p", false, false).await.unwrap();
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
    let mut lease = writer.lease("p", false, false).await.unwrap();
    insert(&mut lease, "g").await.unwrap();
    lease.commit().await.unwrap();
    assert_eq!(values(&pool).await, vec!["a", "b", "f", "g"]);
}

/// Writes of their own (`lease_own`: no savepoint, their changes in one statement) share
/// a batch with writes in savepoints: those kept commit with the batch, one dropped
/// before changing anything leaves nothing, and a savepoint write's rollback next to
/// them undoes only its own statements. A batch of own writes alone commits too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_of_their_own_share_a_batch_with_savepoint_writes() {
    let (_keep, pool, writer) = writer(DIALECT).await;
    let mut first = writer.lease_own("p", false).await.unwrap();
    // Probed inside a savepoint of the test's own: on Postgres a failed statement would
    // otherwise fail the whole transaction.
    sqlx::raw_sql("SAVEPOINT probe").execute(&mut *first).await.unwrap();
    let released = sqlx::raw_sql("RELEASE SAVEPOINT w1").execute(&mut *first).await;
    assert!(released.is_err(), "the writer opened no savepoint for it");
    sqlx::raw_sql("ROLLBACK TO SAVEPOINT probe; RELEASE SAVEPOINT probe").execute(&mut *first).await.unwrap();
    insert(&mut first, "a").await.unwrap();
    let spawn = |v: &'static str, own: bool, keep: bool| {
        let writer = writer.clone();
        tokio::spawn(async move {
            let mut lease =
                if own { writer.lease_own("p", false).await } else { writer.lease("p", false, false).await }
                    .unwrap();
            if own && !keep {
                // Refused before its one statement: nothing to undo.
                return lease.rollback().await.unwrap();
            }
            insert(&mut lease, v).await.unwrap();
            if keep { lease.commit().await.unwrap() } else { lease.rollback().await.unwrap() }
        })
    };
    let tasks =
        [spawn("b", false, true), spawn("c", true, true), spawn("d", false, false), spawn("e", true, false)];
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    first.commit().await.unwrap();
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(values(&pool).await, vec!["a", "b", "c"]);
    let mut lease = writer.lease_own("p", false).await.unwrap();
    insert(&mut lease, "f").await.unwrap();
    lease.commit().await.unwrap();
    assert_eq!(values(&pool).await, vec!["a", "b", "c", "f"]);
}

/// A write joining a batch that holds other projects but not its own is bounded; one
/// for a project the batch holds (or the first of a batch) is not; a `fresh` lease ends
/// the batch before it (what is committed is visible when it runs) and is not bounded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_are_bounded_for_projects_the_batch_does_not_hold() {
    let (_keep, pool, writer) = writer(DIALECT).await;
    let mut first = writer.lease("a", false, false).await.unwrap();
    assert!(!first.bounded(), "the first write of a batch holds nothing while it waits");
    insert(&mut first, "a1").await.unwrap();
    let lease_of = |project: &'static str, fresh: bool| {
        let writer = writer.clone();
        let pool = pool.clone();
        tokio::spawn(async move {
            let mut lease = writer.lease(project, fresh, false).await.unwrap();
            let bounded = lease.bounded();
            let seen = values(&pool).await;
            insert(&mut lease, &format!("{project}{}", seen.len() + 10)).await.unwrap();
            lease.commit().await.unwrap();
            (bounded, seen)
        })
    };
    let same = lease_of("a", false);
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let other = lease_of("b", false);
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let fresh = lease_of("c", true);
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    first.commit().await.unwrap();
    let (same_bounded, same_seen) = same.await.unwrap();
    let (other_bounded, other_seen) = other.await.unwrap();
    let (fresh_bounded, fresh_seen) = fresh.await.unwrap();
    assert!(!same_bounded, "the batch already holds project a");
    assert!(other_bounded, "the batch holds a, not b");
    assert!(!fresh_bounded, "a fresh lease starts a batch of its own");
    // Nothing was committed while the first batch ran; the fresh one ran after its commit.
    assert!(same_seen.is_empty() && other_seen.is_empty());
    assert_eq!(fresh_seen.len(), 3, "the fresh write saw the first batch committed: {fresh_seen:?}");
}

pub(super) const OPENING: Dialect = Dialect { writes_open_savepoints: true, ..DIALECT };

/// An insert that sends the lease's opening (its savepoint statements) in front, as the
/// Postgres project lock does.
pub(super) async fn insert_opening(lease: &mut Lease<Db>, v: &str) -> Result<(), sqlx::Error> {
    let opening = lease.take_opening().map(|o| o + "; ").unwrap_or_default();
    let sql = format!("{opening}INSERT INTO t (v) VALUES ('{v}')");
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&mut **lease).await.map(drop)
}

/// Writes that send their own savepoints (the first with the batch's `BEGIN` already
/// sent, the next ones releasing the previous savepoint) keep and roll back alone
/// just like those whose savepoint the writer sends, in one batch with them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_that_open_their_savepoints_roll_back_alone() {
    let (_keep, pool, writer) = writer(OPENING).await;
    let mut first = writer.lease("p", false, true).await.unwrap();
    assert_eq!(first.take_opening().as_deref(), Some("SAVEPOINT w1"));
    sqlx::raw_sql("SAVEPOINT w1; INSERT INTO t (v) VALUES ('a')").execute(&mut *first).await.unwrap();
    let spawn = |v: &'static str, opens: bool| {
        let writer = writer.clone();
        tokio::spawn(async move {
            let mut lease = writer.lease("p", false, opens).await.unwrap();
            if v == "e" {
                // Dropped before it sent anything (its opening goes to the next write).
                drop(lease);
                return;
            }
            insert_opening(&mut lease, v).await.unwrap();
            if v == "c" {
                lease.rollback().await.unwrap();
            } else if v == "d" {
                // A statement that fails, after a good one: the write goes.
                assert!(insert_opening(&mut lease, "a").await.is_err(), "duplicate key");
            } else {
                lease.commit().await.unwrap();
            }
        })
    };
    let tasks = [
        spawn("b", true),
        spawn("c", true),
        spawn("d", true),
        spawn("e", true),
        spawn("f", false),
        spawn("g", true),
    ];
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    first.commit().await.unwrap();
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(values(&pool).await, vec!["a", "b", "f", "g"]);
}

/// Where writes open their savepoints and the lane's connection answered recently, a
/// batch's BEGIN rides with its first write's opening; if that write sends nothing, the
/// next write's opening carries it, and a batch in which no write sent anything ends
/// without a COMMIT.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn begin_rides_with_the_first_opening_sent() {
    let (_dir, pool, writer) = writer(Dialect { trust_idle_for: Duration::from_hours(1), ..OPENING }).await;
    // No connection yet: the writer begins alone.
    let mut lease = writer.lease("p", false, true).await.unwrap();
    assert_eq!(lease.take_opening().as_deref(), Some("SAVEPOINT w1"));
    sqlx::raw_sql("SAVEPOINT w1; INSERT INTO t (v) VALUES ('a')").execute(&mut *lease).await.unwrap();
    lease.commit().await.unwrap();
    // Its connection answered just now: the next batch's first write sends BEGIN.
    let mut lease = writer.lease("p", false, true).await.unwrap();
    assert_eq!(lease.take_opening().as_deref(), Some(format!("{BEGIN}; SAVEPOINT w1").as_str()));
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("{BEGIN}; SAVEPOINT w1; INSERT INTO t (v) VALUES ('b')")))
        .execute(&mut *lease)
        .await
        .unwrap();
    lease.commit().await.unwrap();
    // A first write that sends nothing: the next one in its batch begins.
    let first = writer.lease("p", false, true).await.unwrap();
    let next = {
        let writer = writer.clone();
        tokio::spawn(async move {
            let mut lease = writer.lease("p", false, true).await.unwrap();
            // No savepoint of the batch exists: any name will do.
            assert_eq!(lease.take_opening().as_deref(), Some(format!("{BEGIN}; SAVEPOINT w1").as_str()));
            sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                "{BEGIN}; SAVEPOINT w1; INSERT INTO t (v) VALUES ('c')"
            )))
            .execute(&mut *lease)
            .await
            .unwrap();
            lease.commit().await.unwrap();
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    drop(first);
    next.await.unwrap();
    // A batch of one write that sends nothing: no transaction to end, and on it goes.
    drop(writer.lease("p", false, true).await.unwrap());
    let mut lease = writer.lease("p", false, true).await.unwrap();
    insert_opening(&mut lease, "d").await.unwrap();
    lease.commit().await.unwrap();
    assert_eq!(values(&pool).await, vec!["a", "b", "c", "d"]);
}

/// A write that took its opening but whose savepoint never reached the database cannot
/// be rolled back to it: the writer then abandons the batch (its writes are told they
/// were not kept) instead of rolling back to another write's savepoint. Also when a
/// write that sent nothing came in between: the savepoint names alternate, but never
/// onto the name of a savepoint still to be released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_opening_that_never_ran_abandons_the_batch() {
    let (_keep, pool, writer) = writer(OPENING).await;
    let mut first = writer.lease("p", false, true).await.unwrap();
    insert_opening(&mut first, "a").await.unwrap();
    let lease_then = |expected: &'static str, take: bool| {
        let writer = writer.clone();
        tokio::spawn(async move {
            let mut lease = writer.lease("p", false, true).await.unwrap();
            if take {
                assert_eq!(lease.take_opening().as_deref(), Some(expected));
            }
            lease.rollback().await.unwrap();
        })
    };
    // Sends nothing: the first write's savepoint stays to be released.
    let second = lease_then("", false);
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let third = lease_then("RELEASE SAVEPOINT w1; SAVEPOINT w2", true);
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    assert!(first.commit().await.is_err(), "the batch was abandoned: its write is not acknowledged");
    second.await.unwrap();
    third.await.unwrap();
    assert!(values(&pool).await.is_empty(), "nothing of the abandoned batch was committed");
    // The writer carries on with a new connection.
    let mut lease = writer.lease("p", false, true).await.unwrap();
    insert_opening(&mut lease, "b").await.unwrap();
    lease.commit().await.unwrap();
    assert_eq!(values(&pool).await, vec!["b"]);
}

/// The writer keeps its connection between batches; `close` gives it back, so the
/// pool's close (which waits for every connection) finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_gives_the_connection_back_to_the_pool() {
    let (_keep, pool, writer) = writer(DIALECT).await;
    let mut lease = writer.lease("p", false, false).await.unwrap();
    insert(&mut lease, "a").await.unwrap();
    lease.commit().await.unwrap();
    writer.close().await;
    tokio::time::timeout(std::time::Duration::from_secs(10), pool.close())
        .await
        .expect("the pool closes once the writer gave its connection back");
    assert!(writer.lease("p", false, false).await.is_err(), "no writes on a closed pool");
}

/// With `begins_ahead`, a batch's COMMIT begins the next transaction: the next batch's
/// first write finds it begun (`Lease::begun_ahead`), the writes that join it do not, and
/// a write dropped there ends the batch. After `trust_idle_for` idle, the writer rolls the
/// transaction back and begins alone again; a close gives the connection back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_begins_the_next_transaction() {
    // Long enough that the timings below keep a margin of 300 ms on a busy machine.
    let idle = Duration::from_millis(600);
    let dialect = Dialect { begins_ahead: true, trust_idle_for: idle, ..DIALECT };
    let (_keep, pool, writer) = writer(dialect).await;
    // A write of its own; returns whether it found its transaction begun ahead.
    let write = |v: &'static str| {
        let writer = writer.clone();
        async move {
            let mut lease = writer.lease_own("p", false).await.unwrap();
            let ahead = lease.begun_ahead();
            insert(&mut lease, v).await.unwrap();
            lease.commit().await.unwrap();
            ahead
        }
    };
    let own = |v: &'static str| tokio::spawn(write(v));
    assert!(!own("a").await.unwrap(), "no connection yet: the writer began alone");
    assert!(own("b").await.unwrap(), "begun by the last COMMIT");
    // A batch: its first write on the transaction begun ahead, the next joining it.
    let mut first = writer.lease_own("p", false).await.unwrap();
    assert!(first.begun_ahead());
    insert(&mut first, "c").await.unwrap();
    // Polled once, its lease is asked for: it queues behind `first`, in its batch.
    let mut joined = Box::pin(write("d"));
    assert!(futures::FutureExt::now_or_never(&mut joined).is_none());
    let joined = tokio::spawn(joined);
    first.commit().await.unwrap();
    assert!(!joined.await.unwrap(), "only a batch's first write finds it begun ahead");
    // A first write dropped: the batch ends (the next write begins the next one).
    drop(writer.lease_own("p", false).await.unwrap());
    assert!(own("e").await.unwrap(), "the dropped write's batch committed nothing, and began the next");
    // Idle for longer than it is trusted: rolled back. Soon after the rollback (the
    // connection answered it, so it is trusted) a write of its own still gets a
    // transaction, begun alone: what it writes is not seen before its commit.
    tokio::time::sleep(idle + idle / 2).await;
    let mut lease = writer.lease_own("p", false).await.unwrap();
    assert!(!lease.begun_ahead(), "rolled back after the idle time");
    insert(&mut lease, "f").await.unwrap();
    assert!(!values(&pool).await.contains(&"f".to_owned()), "the write runs in a transaction");
    lease.commit().await.unwrap();
    // Long after: begun alone too.
    tokio::time::sleep(idle * 3).await;
    assert!(!own("g").await.unwrap(), "the writer began alone after the idle time");
    assert_eq!(values(&pool).await, vec!["a", "b", "c", "d", "e", "f", "g"]);
    writer.close().await;
    tokio::time::timeout(Duration::from_secs(10), pool.close())
        .await
        .expect("the pool closes once the writer gave its connection back");
}

/// A settled write (`Lease::settle`) is rolled back, and returns only once its batch has
/// committed: what it read from the batch's other writes is durable by then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settled_write_is_rolled_back_and_waits_for_the_commit() {
    let (_keep, pool, writer) = writer(DIALECT).await;
    let mut first = writer.lease("p", false, false).await.unwrap();
    insert(&mut first, "a").await.unwrap();
    let settled = tokio::spawn({
        let (writer, pool) = (writer.clone(), pool.clone());
        async move {
            let mut lease = writer.lease("p", false, false).await.unwrap();
            let seen: Vec<String> =
                sqlx::query_scalar("SELECT v FROM t ORDER BY v").fetch_all(&mut *lease).await.unwrap();
            insert(&mut lease, "b").await.unwrap();
            lease.settle().await.unwrap();
            (seen, values(&pool).await)
        }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    first.commit().await.unwrap();
    let (seen, after) = settled.await.unwrap();
    assert_eq!(seen, vec!["a"], "it read the batch's uncommitted write");
    assert_eq!(after, vec!["a"], "returned once that write was committed; its own rolled back");
}

/// What a write leaves to run on commit (`Lease::on_commit`) runs once its batch has
/// committed, in the order the batch lent the connection to its writes, for kept writes
/// only, and even when the write stopped waiting for the commit (its request cancelled).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_commit_runs_for_kept_writes_in_order_once_the_batch_commits() {
    let (_keep, pool, writer) = writer(DIALECT).await;
    let (ran, note) = recorder();
    let lent = Arc::new(Mutex::new(vec!["a"]));
    let mut first = writer.lease("p", false, false).await.unwrap();
    insert(&mut first, "a").await.unwrap();
    first.on_commit(note("a"));
    let mut tasks = Vec::new();
    for v in ["b", "c", "d", "e", "f"] {
        let (writer, on_commit, lent) = (writer.clone(), note(v), lent.clone());
        tasks.push(tokio::spawn(async move {
            let mut lease = writer.lease("p", false, false).await.unwrap();
            lent.lock().unwrap().push(v);
            insert(&mut lease, v).await.unwrap();
            lease.on_commit(on_commit);
            match v {
                "c" => lease.rollback().await.unwrap(),
                "d" => drop(lease),
                // Gives up waiting for the commit once the write is handed back: it is kept
                // all the same.
                "e" => assert!(futures::FutureExt::now_or_never(lease.commit()).is_none()),
                _ => lease.commit().await.unwrap(),
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(ran.lock().unwrap().is_empty(), "nothing runs before the batch commits");
    first.commit().await.unwrap();
    for t in tasks {
        t.await.unwrap();
    }
    let kept: Vec<&str> = lent.lock().unwrap().iter().copied().filter(|v| !["c", "d"].contains(v)).collect();
    assert_eq!(*ran.lock().unwrap(), kept);
    assert_eq!(values(&pool).await, ["a", "b", "e", "f"]);
}
