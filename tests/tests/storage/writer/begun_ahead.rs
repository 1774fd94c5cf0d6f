//! Postgres only: what a transaction begun ahead (`Dialect::begins_ahead`) looks like from
//! the database, and a connection that breaks while it waits.

use std::time::Duration;

use baton_server::store::writer::{Dialect, Writer};

use super::cases::{DIALECT, insert, values};
use super::fresh;

/// Connections of this database in a transaction, waiting for their client.
async fn idle_in_transaction(pool: &sqlx::PgPool) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity \
         WHERE datname = current_database() AND state = 'idle in transaction'",
    )
    .fetch_one(pool)
    .await
    .unwrap()
}

/// The lane's connection waits in a transaction only between batches that come within
/// `trust_idle_for` of each other: after that, and when the writer closes, it is rolled back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_begun_ahead_ends_when_idle_or_closed() {
    // Long enough for the checks below on a busy machine.
    let idle = Duration::from_millis(1500);
    let (_keep, pool) = fresh().await;
    let writer = Writer::spawn(&pool, Dialect { begins_ahead: true, trust_idle_for: idle, ..DIALECT });
    let write = |v: &'static str| {
        let writer = writer.clone();
        async move {
            let mut lease = writer.lease_own("p", false).await.unwrap();
            insert(&mut lease, v).await.unwrap();
            lease.commit().await.unwrap();
        }
    };
    // Also opens the pool connection the checks use, before the writer takes one.
    assert_eq!(idle_in_transaction(&pool).await, 0);
    write("a").await;
    assert_eq!(idle_in_transaction(&pool).await, 1, "the COMMIT began the next transaction");
    tokio::time::sleep(idle * 2).await;
    assert_eq!(idle_in_transaction(&pool).await, 0, "rolled back once idle");
    write("b").await;
    assert_eq!(idle_in_transaction(&pool).await, 1);
    writer.close().await;
    assert_eq!(idle_in_transaction(&pool).await, 0, "rolled back before going back to the pool");
    assert_eq!(values(&pool).await, vec!["a", "b"]);
}

/// A connection that broke while its transaction was begun ahead fails only the write that
/// finds it; the writes queued behind that one run on a new connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_broken_while_begun_ahead_fails_one_write() {
    let (_keep, pool) = fresh().await;
    let dialect = Dialect { begins_ahead: true, trust_idle_for: Duration::from_hours(1), ..DIALECT };
    let writer = Writer::spawn(&pool, dialect);
    let mut lease = writer.lease_own("p", false).await.unwrap();
    insert(&mut lease, "a").await.unwrap();
    lease.commit().await.unwrap();
    let killed = baton_tests::postgres::terminate_idle_in_transaction(&pool).await.unwrap();
    assert_eq!(killed, vec![true]);
    let mut broken = writer.lease_own("p", false).await.unwrap();
    assert!(broken.begun_ahead());
    let behind = {
        let writer = writer.clone();
        tokio::spawn(async move {
            let mut lease = writer.lease_own("p", false).await.unwrap();
            insert(&mut lease, "c").await.unwrap();
            lease.commit().await
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(insert(&mut broken, "b").await.is_err(), "its connection is gone");
    drop(broken);
    behind.await.unwrap().unwrap();
    assert_eq!(values(&pool).await, vec!["a", "c"]);
}
