//! A kept write's last statement handed to the write after it (`Lease::hand_over`,
//! `Lease::take_handover`): kept once applied, refused alone, sent by the writer when the
//! next write does not take it or is not one of its own; a handover taken without a word
//! of what became of it abandons the batch, and so does one whose statement fails, its
//! write getting the error, or a write kept without sending it first. One that no other
//! write of its batch waits for is sent alone, and its failure rolls back only its batch.

use std::any::Any;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton_server::store::writer::{Handed, Handover, Lease, Writer};
use futures::future::BoxFuture;
use sqlx::{Database, Pool};

use super::cases::{DIALECT, insert, recorder, values};
use super::{Db, fresh};

/// A write's last statement: the insert of `v`, refused (changing nothing) if `v` exists.
struct Insert(&'static str);

/// A write's last statement that fails.
struct Broken;

impl Handover<Db> for Broken {
    fn send(
        self: Box<Self>,
        conn: &mut <Db as Database>::Connection,
    ) -> BoxFuture<'_, Result<Handed, sqlx::Error>> {
        Box::pin(async move {
            sqlx::query("INSERT INTO no_such_table VALUES (1)").execute(conn).await?;
            Ok(Handed::Applied)
        })
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any + Send> {
        self
    }
}

async fn apply(conn: &mut <Db as Database>::Connection, v: &str) -> Result<Handed, sqlx::Error> {
    let done =
        sqlx::query("INSERT INTO t (v) VALUES ($1) ON CONFLICT DO NOTHING").bind(v).execute(conn).await?;
    Ok(if done.rows_affected() == 1 { Handed::Applied } else { Handed::Refused })
}

impl Handover<Db> for Insert {
    fn send(
        self: Box<Self>,
        conn: &mut <Db as Database>::Connection,
    ) -> BoxFuture<'_, Result<Handed, sqlx::Error>> {
        Box::pin(async move { apply(conn, self.0).await })
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any + Send> {
        self
    }
}

/// What a write of its own does with the previous write's handover.
#[derive(Clone, Copy)]
enum Takes {
    /// Sends it and tells what became of it.
    AndTells,
    /// Ends without sending it (as when a request is cancelled before its first statement).
    Not,
    /// Takes it and ends without a word (its statement failed, or was cancelled under way).
    Silently,
}

/// Takes the previous write's handover as `takes` says; `Some(v)`: the write then hands
/// over the insert of `v` and returns whether it was kept.
async fn own_write(writer: Writer<Db>, takes: Takes, hands_over: Option<&'static str>) -> Option<bool> {
    let mut lease: Lease<Db> = writer.lease_own("p", false).await.unwrap();
    match takes {
        Takes::Not => return None,
        Takes::Silently => {
            drop(lease.take_handover());
            return None;
        }
        Takes::AndTells => send_handover(&mut lease).await,
    }
    let v = hands_over?;
    Some(lease.hand_over(Box::new(Insert(v))).await.is_ok())
}

/// Sends the previous write's handover, if one was lent, and tells what became of it.
async fn send_handover(lease: &mut Lease<Db>) {
    if let Some(taken) = lease.take_handover() {
        let Insert(v) = *taken.downcast::<Insert>().unwrap();
        let handed = apply(lease, v).await.unwrap();
        lease.handed(handed);
    }
}

/// Lets the write just sent reach the writer's queue before the next one is sent.
async fn queued() {
    tokio::time::sleep(Duration::from_millis(50)).await;
}

/// A write of its own that hands over `handover`, under way.
fn spawn_hand_over(
    writer: &Writer<Db>,
    handover: Box<dyn Handover<Db>>,
) -> tokio::task::JoinHandle<Result<(), sqlx::Error>> {
    let writer = writer.clone();
    tokio::spawn(async move { writer.lease_own("p", false).await.unwrap().hand_over(handover).await })
}

/// Queues the writes in order behind `first`, which holds the connection, then lets them run
/// in one batch; whether `first` was kept, and their outcomes in order.
async fn batch(
    writer: &Writer<Db>,
    first: Lease<Db>,
    writes: &[(Takes, Option<&'static str>)],
) -> (bool, Vec<Option<bool>>) {
    let mut tasks = Vec::new();
    for &(takes, hands_over) in writes {
        tasks.push(tokio::spawn(own_write(writer.clone(), takes, hands_over)));
        // Each one queued before the next.
        queued().await;
    }
    let first = first.commit().await.is_ok();
    let mut outcomes = Vec::new();
    for t in tasks {
        outcomes.push(t.await.unwrap());
    }
    (first, outcomes)
}

async fn started() -> (impl Sized, Pool<Db>, Writer<Db>, Lease<Db>) {
    let (keep, pool) = fresh().await;
    let writer = Writer::spawn(&pool, DIALECT);
    let mut first = writer.lease("p", false, false).await.unwrap();
    insert(&mut first, "a").await.unwrap();
    (keep, pool, writer, first)
}

/// Handed over along a batch: kept once applied by the write that took it, or by the
/// writer (the next write ended without taking it, or none followed); refused alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handover_is_kept_once_applied_and_refused_alone() {
    let (_keep, pool, writer, first) = started().await;
    let (first, outcomes) = batch(
        &writer,
        first,
        &[
            (Takes::AndTells, Some("b")),
            // Applies b, then hands over a, which exists: refused.
            (Takes::AndTells, Some("a")),
            // Tells the refusal of a, then hands over c.
            (Takes::AndTells, Some("c")),
            // Does not take c: the writer sends it.
            (Takes::Not, None),
            // Nothing to take; d is the batch's last: the writer sends it before COMMIT.
            (Takes::AndTells, Some("d")),
        ],
    )
    .await;
    assert!(first);
    assert_eq!(outcomes, vec![Some(true), Some(false), Some(true), None, Some(true)]);
    assert_eq!(values(&pool).await, vec!["a", "b", "c", "d"]);
}

/// A handover taken and never told about leaves the transaction in doubt: the batch is
/// abandoned, so no write of it is kept, the one that handed it over included; the
/// writer carries on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handover_in_doubt_abandons_the_batch() {
    let (_keep, pool, writer, first) = started().await;
    let (first, outcomes) =
        batch(&writer, first, &[(Takes::AndTells, Some("b")), (Takes::Silently, None)]).await;
    assert!(!first);
    assert_eq!(outcomes, vec![Some(false), None]);
    assert_eq!(values(&pool).await, Vec::<String>::new(), "a went with the batch");
    let kept = own_write(writer.clone(), Takes::AndTells, Some("c")).await;
    assert_eq!(kept, Some(true));
    assert_eq!(values(&pool).await, vec!["c"]);
}

/// A write that is not one of its own (the writer opens its savepoint) never takes a
/// handover: the writer sends it before lending, so the write reads its changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handover_goes_before_a_savepoint_write() {
    let (_keep, pool, writer, first) = started().await;
    let handing = tokio::spawn(own_write(writer.clone(), Takes::AndTells, Some("b")));
    queued().await;
    let next = tokio::spawn({
        let writer = writer.clone();
        async move {
            let mut lease = writer.lease("p", false, false).await.unwrap();
            let seen: Vec<String> =
                sqlx::query_scalar("SELECT v FROM t ORDER BY v").fetch_all(&mut *lease).await.unwrap();
            lease.commit().await.unwrap();
            seen
        }
    });
    queued().await;
    first.commit().await.unwrap();
    assert_eq!(handing.await.unwrap(), Some(true));
    assert_eq!(next.await.unwrap(), vec!["a", "b"]);
    assert_eq!(values(&pool).await, vec!["a", "b"]);
}

/// A handover whose statement fails, sent by the writer or with the next write's, abandons
/// the batch; the write it came from gets that statement's error (its own), the others that
/// their transaction did not commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_handover_abandons_the_batch_and_its_write_gets_the_error() {
    let (_keep, pool, writer, first) = started().await;
    // Sent by the writer: it is the batch's last.
    let broken = spawn_hand_over(&writer, Box::new(Broken));
    queued().await;
    let first = first.commit().await.unwrap_err();
    assert!(matches!(first, sqlx::Error::Io(_)), "the batch did not commit: {first:?}");
    let broken = broken.await.unwrap().unwrap_err();
    assert!(matches!(broken, sqlx::Error::Database(_)), "the statement's own error: {broken:?}");
    assert_eq!(values(&pool).await, Vec::<String>::new());
    // Taken by the next write, whose statement fails with it.
    let mut first = writer.lease("p", false, false).await.unwrap();
    insert(&mut first, "a").await.unwrap();
    let handing = spawn_hand_over(&writer, Box::new(Insert("b")));
    queued().await;
    let taking = tokio::spawn({
        let writer = writer.clone();
        async move {
            let mut lease = writer.lease_own("p", false).await.unwrap();
            assert!(lease.take_handover().is_some());
            lease.handover_failed(sqlx::Error::Protocol("failed with the next write's".into()));
        }
    });
    queued().await;
    assert!(first.commit().await.is_err());
    let handing = handing.await.unwrap().unwrap_err();
    assert!(matches!(handing, sqlx::Error::Protocol(_)), "the error it went with: {handing:?}");
    taking.await.unwrap();
    assert_eq!(values(&pool).await, Vec::<String>::new());
    assert_eq!(
        own_write(writer.clone(), Takes::AndTells, Some("c")).await,
        Some(true),
        "the writer carries on"
    );
}

/// A write of its own kept without sending the handover lent to it first read without the
/// changes it carried: the batch is abandoned rather than the changes sent after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_kept_without_sending_its_handover_abandons_the_batch() {
    let (_keep, pool, writer, first) = started().await;
    let handing = tokio::spawn(own_write(writer.clone(), Takes::AndTells, Some("b")));
    queued().await;
    let ignoring = tokio::spawn({
        let writer = writer.clone();
        async move {
            let mut lease = writer.lease_own("p", false).await.unwrap();
            insert(&mut lease, "c").await.unwrap();
            lease.commit().await
        }
    });
    queued().await;
    assert!(first.commit().await.is_err());
    assert_eq!(handing.await.unwrap(), Some(false));
    assert!(ignoring.await.unwrap().is_err());
    assert_eq!(values(&pool).await, Vec::<String>::new());
}

/// What kept writes leave to run on commit (`Lease::on_commit`) runs in the batch's order,
/// though a write that hands over its last statement is kept only once the write after it
/// has sent it; a refused write's does not run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_commit_runs_in_the_batch_order_across_handovers() {
    let (_keep, pool, writer, mut first) = started().await;
    let (ran, note) = recorder();
    first.on_commit(note("a"));
    // b hands over its insert; c takes it, then hands over its own (refused: a exists); d
    // takes that, tells the refusal, and hands over its own; e takes that and commits, so e
    // is kept before d (whose changes it sent), yet d's runs first.
    let writes = [("b", Some("b")), ("c", Some("a")), ("d", Some("d")), ("e", None)];
    let mut tasks = Vec::new();
    for (name, hands_over) in writes {
        let (writer, on_commit) = (writer.clone(), note(name));
        tasks.push(tokio::spawn(async move {
            let mut lease: Lease<Db> = writer.lease_own("p", false).await.unwrap();
            send_handover(&mut lease).await;
            lease.on_commit(on_commit);
            match hands_over {
                Some(v) => lease.hand_over(Box::new(Insert(v))).await.is_ok(),
                None => lease.commit().await.is_ok(),
            }
        }));
        queued().await;
    }
    first.commit().await.unwrap();
    let kept: Vec<bool> = futures::future::join_all(tasks).await.into_iter().map(Result::unwrap).collect();
    assert_eq!(kept, [true, false, true, true]);
    assert_eq!(*ran.lock().unwrap(), ["a", "b", "d", "e"]);
    assert_eq!(values(&pool).await, ["a", "b", "d"]);
}

/// A write's last statement with a plain form for a batch that keeps it alone
/// (`Handover::send_alone`): the insert of `v`, which ends the transaction if `v` exists.
/// Says how each was sent.
struct Alone(&'static str, Arc<Mutex<Vec<&'static str>>>);

impl Handover<Db> for Alone {
    fn send(
        self: Box<Self>,
        conn: &mut <Db as Database>::Connection,
    ) -> BoxFuture<'_, Result<Handed, sqlx::Error>> {
        self.1.lock().unwrap().push("with others");
        Box::pin(async move { apply(conn, self.0).await })
    }

    fn send_alone(
        self: Box<Self>,
        conn: &mut <Db as Database>::Connection,
    ) -> BoxFuture<'_, Result<Handed, sqlx::Error>> {
        self.1.lock().unwrap().push("alone");
        Box::pin(async move {
            match sqlx::query("INSERT INTO t (v) VALUES ($1)").bind(self.0).execute(conn).await {
                Ok(_) => Ok(Handed::Applied),
                Err(sqlx::Error::Database(_)) => Ok(Handed::Aborted),
                Err(e) => Err(e),
            }
        })
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any + Send> {
        self
    }
}

/// A handover is sent alone only when no other write of its batch waits for the commit;
/// one that ends the transaction that way rolls back its batch, which kept nothing else,
/// and the writer carries on, on the same connection (a temporary table is still there).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handover_kept_alone_goes_alone_and_its_failure_rolls_back_only_it() {
    let (_keep, pool, writer, first) = started().await;
    let sent = Arc::new(Mutex::new(Vec::new()));
    let alone = |v| -> Box<dyn Handover<Db>> { Box::new(Alone(v, sent.clone())) };
    // Behind a kept write: sent with the function's safety net.
    let handing = spawn_hand_over(&writer, alone("b"));
    queued().await;
    first.commit().await.unwrap();
    assert!(handing.await.unwrap().is_ok());
    assert_eq!(*sent.lock().unwrap(), ["with others"]);
    let mut marking = writer.lease_own("p", false).await.unwrap();
    sqlx::raw_sql("CREATE TEMP TABLE mark (x INTEGER)").execute(&mut *marking).await.unwrap();
    marking.commit().await.unwrap();
    // Alone: kept; then refused (b exists), which rolls back its batch alone.
    assert!(spawn_hand_over(&writer, alone("c")).await.unwrap().is_ok());
    assert!(spawn_hand_over(&writer, alone("b")).await.unwrap().is_err());
    assert_eq!(*sent.lock().unwrap(), ["with others", "alone", "alone"]);
    let mut next = writer.lease_own("p", false).await.unwrap();
    let marked = sqlx::query("SELECT count(*) FROM mark").execute(&mut *next).await;
    assert!(marked.is_ok(), "the lane's connection was kept: {marked:?}");
    assert!(next.hand_over(alone("d")).await.is_ok());
    assert_eq!(values(&pool).await, ["a", "b", "c", "d"]);
}
