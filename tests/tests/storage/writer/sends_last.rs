//! SQLite only: the writer sends a write's last statements with its own (a query there may
//! hold several statements with bound parameters; on Postgres the write sends them).

use std::time::Duration;

use baton_server::store::writer::{Dialect, Writer};
use sqlx::QueryBuilder;

use super::cases::{OPENING, insert_opening, values};
use super::{Db, fresh};

const SENDS_LAST: Dialect = Dialect { writer_sends_last: true, trust_idle_for: Duration::MAX, ..OPENING };

fn insert_query(v: &str) -> QueryBuilder<Db> {
    let mut query = QueryBuilder::new("INSERT INTO t (v) VALUES (");
    query.push_bind(v.to_owned()).push(")");
    query
}

/// A write whose last statements the writer sends with its own (`commit_after`) is kept
/// with them; if they fail, it alone is rolled back and gets their error (the
/// database's, not a lost transaction's), alone in its batch or among others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_writer_sends_a_writes_last_statements() {
    let (_keep, pool) = fresh().await;
    let writer = Writer::spawn(&pool, SENDS_LAST);
    // Alone in its batch: the last statements ride with the COMMIT.
    let mut lease = writer.lease("p", false, true).await.unwrap();
    insert_opening(&mut lease, "a").await.unwrap();
    lease.commit_after(insert_query("b")).await.unwrap();
    assert_eq!(values(&pool).await, vec!["a", "b"]);
    let mut lease = writer.lease("p", false, true).await.unwrap();
    insert_opening(&mut lease, "c").await.unwrap();
    let error = lease.commit_after(insert_query("a")).await.unwrap_err();
    assert!(matches!(error, sqlx::Error::Database(_)), "the duplicate key's own error: {error:?}");
    assert_eq!(values(&pool).await, vec!["a", "b"], "c went with its failed last statement");
    // In a batch: each write's last statements go with the next write's opening.
    let mut first = writer.lease("p", false, true).await.unwrap();
    insert_opening(&mut first, "d").await.unwrap();
    let spawn = |v: &'static str, last: &'static str, opens: bool| {
        let writer = writer.clone();
        tokio::spawn(async move {
            let mut lease = writer.lease("p", false, opens).await.unwrap();
            insert_opening(&mut lease, v).await.unwrap();
            lease.commit_after(insert_query(last)).await
        })
    };
    let tasks = [spawn("e", "f", true), spawn("g", "a", true), spawn("h", "i", false), spawn("j", "b", true)];
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    first.commit().await.unwrap();
    let outcomes: Vec<bool> =
        futures::future::join_all(tasks).await.into_iter().map(|t| t.unwrap().is_ok()).collect();
    assert_eq!(outcomes, vec![true, false, true, false]);
    assert_eq!(values(&pool).await, vec!["a", "b", "d", "e", "f", "h", "i"]);
    // And the writer carries on.
    let mut lease = writer.lease("p", false, true).await.unwrap();
    insert_opening(&mut lease, "k").await.unwrap();
    lease.commit().await.unwrap();
    assert_eq!(values(&pool).await.last().map(String::as_str), Some("k"));
}
