//! The writer's cases on a throwaway Postgres, and the ones only Postgres has: its
//! connection terminated under it, in a batch and between batches.

use std::time::Duration;

use baton_server::store::writer::Writer;

pub type Db = sqlx::Postgres;
pub const BEGIN: &str = "BEGIN";

/// A new database in the throwaway cluster.
pub async fn fresh() -> ((), sqlx::PgPool) {
    let url = baton_tests::postgres::fresh_database().await.unwrap();
    let pool = sqlx::postgres::PgPoolOptions::new().max_connections(4).connect(&url).await.unwrap();
    sqlx::raw_sql("CREATE TABLE t (v TEXT PRIMARY KEY)").execute(&pool).await.unwrap();
    ((), pool)
}

// The same cases for each backend: the file holds the cases, its parent the backend.
#[allow(clippy::duplicate_mod)]
#[path = "cases.rs"]
mod cases;

use cases::{Plan, Test, keep, lock, values, write};

/// A connection terminated while a batch runs fails that batch's writes (none is kept, each
/// is told); the writes queued behind them run on a new connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_terminated_in_a_batch_fails_that_batch_only() {
    let (_keep, pool) = fresh().await;
    let writer: Writer<Test> = Writer::spawn(&pool);
    let (release, wait) = tokio::sync::oneshot::channel();
    let first = {
        let writer = writer.clone();
        tokio::spawn(async move { write(&writer, "p", Plan { wait: Some(wait), ..keep(&["a"]) }).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let second = {
        let writer = writer.clone();
        tokio::spawn(async move { write(&writer, "p", keep(&["b"])).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let killed = baton_tests::postgres::terminate_idle_in_transaction(&pool).await.unwrap();
    assert_eq!(killed, vec![true], "the batch waits in its transaction");
    release.send(()).unwrap();
    assert!(first.await.unwrap().is_err(), "its batch did not commit");
    // The second write was queued while the first ran: it may have joined its batch (and
    // failed with it) or started the next one.
    let second = second.await.unwrap();
    write(&writer, "p", keep(&["c"])).await.unwrap();
    let expected = if second.is_ok() { vec!["b", "c"] } else { vec!["c"] };
    assert_eq!(values(&pool).await, expected);
}

/// The writer keeps its connection between batches; one terminated while idle (a restart,
/// an idle timeout) is replaced before a write sees it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_terminated_while_idle_is_replaced() {
    let (_keep, pool) = fresh().await;
    let writer: Writer<Test> = Writer::spawn(&pool);
    write(&writer, "p", keep(&["a"])).await.unwrap();
    let killed = baton_tests::postgres::terminate_idle_after(&pool, "SELECT 1; COMMIT").await.unwrap();
    assert_eq!(killed, vec![true], "the writer's connection waits between batches");
    write(&writer, "p", keep(&["b"])).await.unwrap();
    assert_eq!(values(&pool).await, vec!["a", "b"]);
}

/// A write whose statement fails outside a savepoint ends the Postgres transaction: the
/// writer finds it cannot go on, and none of the batch's writes is kept, each told so; the
/// next batch runs as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_statement_outside_a_savepoint_fails_its_batch() {
    use baton_server::error::Error;
    use baton_server::store::model::Locked;
    use baton_server::store::writer::{Done, Tx};
    use futures::FutureExt as _;
    use futures::future::BoxFuture;

    let (_keep, pool) = fresh().await;
    let writer: Writer<Test> = Writer::spawn(&pool);
    let (release, wait) = tokio::sync::oneshot::channel();
    let mut first = Box::pin({
        let writer = writer.clone();
        async move { write(&writer, "p", Plan { wait: Some(wait), ..keep(&["a"]) }).await }
    });
    assert!((&mut first).now_or_never().is_none());
    let first = tokio::spawn(first);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let failing = {
        let writer = writer.clone();
        let mut failing = Box::pin(async move {
            let body = Box::new(|mut tx: Tx<Test>, _: Locked| -> BoxFuture<'static, (Tx<Test>, _)> {
                Box::pin(async move {
                    let failed = sqlx::query("SELECT 1 / 0").execute(tx.conn()).await;
                    let result: Result<Done<()>, Error> =
                        Err(failed.map(drop).map_err(Error::from).unwrap_err());
                    (tx, result)
                })
            });
            writer.run(lock("p"), body).await
        });
        assert!((&mut failing).now_or_never().is_none());
        tokio::spawn(failing)
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    release.send(()).unwrap();
    let told = first.await.unwrap();
    assert!(matches!(told, Err(Error::Unavailable(_))), "its batch did not commit: {told:?}");
    assert!(failing.await.unwrap().is_err());
    assert!(values(&pool).await.is_empty());
    write(&writer, "p", keep(&["b"])).await.unwrap();
    assert_eq!(values(&pool).await, vec!["b"]);
}
