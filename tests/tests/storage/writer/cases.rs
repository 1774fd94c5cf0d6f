//! The writer's cases, the same on both backends: each backend's module (`super`) gives
//! the database type, its `BEGIN` and a fresh pool with the table `t`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton_server::error::{Error, Result};
use baton_server::store::model::{Lock, Locked};
use baton_server::store::writer::{Backend, Committing, Done, Locking, OnCommit, Taken, Tx, Writer};
use futures::FutureExt as _;
use futures::future::BoxFuture;
use sqlx::Pool;
use tokio::sync::oneshot;

use super::{BEGIN, Db, fresh};

type Conn = <Db as sqlx::Database>::Connection;

/// The writer's backend for these cases: the table `t` is all there is, a write's changes
/// are the values it inserts, and the project lock reads nothing. The project "elsewhere"
/// is locked by another server: a bounded lock of it runs out. The revision a write is
/// given says whether its lock was bounded.
pub(super) struct Test;

impl Backend for Test {
    type Db = Db;
    type Changes = Vec<&'static str>;
    const BEGIN: &'static str = BEGIN;
    const LANES: usize = 1;
    const MAX_BATCH: usize = 64;

    fn lock<'c>(
        conn: &'c mut Conn,
        changes: Option<Vec<&'static str>>,
        lock: &'c Lock,
        bounded: bool,
    ) -> BoxFuture<'c, Locking> {
        Box::pin(async move {
            let applied = insert(conn, &changes.unwrap_or_default()).await;
            if bounded && lock.project == "elsewhere" {
                return Locking { applied, taken: Ok(None) };
            }
            let locked =
                Locked { revision: i64::from(bounded), now_us: 0, memory_caps: String::new(), earlier: None };
            Locking { applied, taken: Ok(Some(Taken { locked, first: None })) }
        })
    }

    fn apply<'c>(conn: &'c mut Conn, changes: Vec<&'static str>) -> BoxFuture<'c, Result<()>> {
        Box::pin(async move { insert(conn, &changes).await })
    }

    fn commit<'c>(conn: &'c mut Conn, changes: Option<Vec<&'static str>>) -> BoxFuture<'c, Committing> {
        Box::pin(async move {
            let applied = insert(conn, &changes.unwrap_or_default()).await;
            let committed =
                sqlx::raw_sql("SELECT 1; COMMIT").execute(conn).await.map(drop).map_err(Error::from);
            Committing { applied, committed }
        })
    }
}

/// A writer on a new database (the first value keeps it alive).
pub(super) async fn writer() -> (impl Sized, Pool<Db>, Writer<Test>) {
    let (keep, pool) = fresh().await;
    let writer = Writer::spawn(&pool);
    (keep, pool, writer)
}

pub(super) async fn values(pool: &Pool<Db>) -> Vec<String> {
    sqlx::query_scalar("SELECT v FROM t ORDER BY v").fetch_all(pool).await.unwrap()
}

pub(super) fn lock(project: &str) -> Lock {
    Lock {
        project: project.to_owned(),
        request_id: None,
        memory: false,
        first_read: None,
        rewrites_log: false,
    }
}

/// Inserts `values`, all or nothing, as a backend applies a write's changes.
pub(super) async fn insert(conn: &mut Conn, values: &[&str]) -> Result<()> {
    if values.is_empty() {
        return Ok(());
    }
    sqlx::raw_sql("SAVEPOINT t").execute(&mut *conn).await?;
    let mut inserted = Ok(());
    for v in values {
        if let Err(e) = sqlx::query("INSERT INTO t (v) VALUES ($1)").bind(*v).execute(&mut *conn).await {
            inserted = Err(e);
            break;
        }
    }
    let end =
        if inserted.is_ok() { "RELEASE SAVEPOINT t" } else { "ROLLBACK TO SAVEPOINT t; RELEASE SAVEPOINT t" };
    sqlx::raw_sql(end).execute(&mut *conn).await?;
    Ok(inserted?)
}

/// What a write's body does.
#[derive(Default)]
pub(super) struct Plan {
    /// Rows it inserts, all or nothing (one already there fails the write).
    pub inserts: Vec<&'static str>,
    /// Whether it keeps what it did (a write not kept inserts nothing).
    pub keep: bool,
    /// Inserts at once, instead of leaving its rows to go with the lane's next statement.
    pub at_once: bool,
    /// Waits for this before it ends (holding the lane, so writes queue behind it).
    pub wait: Option<oneshot::Receiver<()>>,
    /// Runs once the write is kept and its batch committed.
    pub on_commit: Option<OnCommit>,
    /// Reads what other connections see, before inserting.
    pub look: Option<Pool<Db>>,
}

/// What a write's body saw: whether its lock was bounded, and what other connections saw.
#[derive(Debug)]
pub(super) struct Seen {
    pub bounded: bool,
    pub committed: Vec<String>,
}

/// Runs a write of `project` as `plan` says.
pub(super) async fn write(writer: &Writer<Test>, project: &str, plan: Plan) -> Result<Seen> {
    let body = Box::new(move |mut tx: Tx<Test>, locked: Locked| -> BoxFuture<'static, _> {
        Box::pin(async move {
            let result = run(&mut tx, locked, plan).await;
            (tx, result)
        })
    });
    writer.run(lock(project), body).await
}

async fn run(tx: &mut Tx<Test>, locked: Locked, plan: Plan) -> Result<Done<Seen>> {
    let committed = match &plan.look {
        Some(pool) => values(pool).await,
        None => Vec::new(),
    };
    if plan.keep && plan.at_once {
        insert(tx.conn(), &plan.inserts).await?;
    } else if plan.keep {
        tx.defer(plan.inserts);
    }
    if let Some(wait) = plan.wait {
        let _ = wait.await;
    }
    let seen = Seen { bounded: locked.revision == 1, committed };
    Ok(Done { value: seen, keep: plan.keep, on_commit: plan.on_commit })
}

pub(super) fn keep(inserts: &[&'static str]) -> Plan {
    Plan { inserts: inserts.to_vec(), keep: true, ..Plan::default() }
}

/// A write that holds the lane until the sender is used or dropped.
fn holding(inserts: &[&'static str]) -> (Plan, oneshot::Sender<()>) {
    let (release, wait) = oneshot::channel();
    (Plan { wait: Some(wait), ..keep(inserts) }, release)
}

/// Queues a write (its first poll sends it to the lane), then lets it run on.
fn queued<R: Send + 'static>(
    write: impl std::future::Future<Output = Result<R>> + Send + 'static,
) -> tokio::task::JoinHandle<Result<R>> {
    let mut write = Box::pin(write);
    assert!((&mut write).now_or_never().is_none(), "answered before its batch ran");
    tokio::spawn(write)
}

fn spawn_write(
    writer: &Writer<Test>,
    project: &'static str,
    plan: Plan,
) -> tokio::task::JoinHandle<Result<Seen>> {
    let writer = writer.clone();
    queued(async move { write(&writer, project, plan).await })
}

/// Lets spawned writes reach the lane's queue.
async fn pause() {
    tokio::time::sleep(Duration::from_millis(50)).await;
}

/// Writes queued together share a transaction (none sees another's rows from outside),
/// yet one that fails half-way, or is not kept, leaves the others' rows; kept writes are
/// visible to other connections once answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_write_rolls_back_alone_within_a_batch() {
    let (_keep, pool, writer) = writer().await;
    let (first, release) = holding(&["a"]);
    let first = spawn_write(&writer, "p", first);
    pause().await;
    let look = |plan: Plan| Plan { look: Some(pool.clone()), ..plan };
    let b = spawn_write(&writer, "p", look(keep(&["b"])));
    let c = spawn_write(&writer, "p", Plan { inserts: vec!["c"], keep: false, ..Plan::default() });
    // Its second row fails it at once, and its first goes with it.
    let e = spawn_write(&writer, "p", Plan { at_once: true, ..keep(&["e", "e"]) });
    // A failing statement after a good one: the whole write goes.
    let d = spawn_write(&writer, "p", keep(&["d", "a"]));
    let f = spawn_write(&writer, "p", look(keep(&["f"])));
    pause().await;
    release.send(()).unwrap();
    first.await.unwrap().unwrap();
    assert!(values(&pool).await.contains(&"a".to_owned()), "answered once committed");
    let b = b.await.unwrap().unwrap();
    assert!(b.committed.is_empty(), "b ran in a's transaction, before its commit: {b:?}");
    c.await.unwrap().unwrap();
    assert!(d.await.unwrap().is_err(), "d's duplicate key fails it");
    assert!(e.await.unwrap().is_err(), "e's own duplicate fails it");
    let f = f.await.unwrap().unwrap();
    assert!(f.committed.is_empty(), "f ran in the same batch: {f:?}");
    assert_eq!(values(&pool).await, vec!["a", "b", "f"]);
    // The writer carries on after all that.
    write(&writer, "p", keep(&["g"])).await.unwrap();
    assert_eq!(values(&pool).await, vec!["a", "b", "f", "g"]);
}

/// A write is answered only once its batch has committed: a kept write, one not kept and
/// one that failed all wait for the batch's last write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_are_answered_once_their_batch_commits() {
    let (_keep, pool, writer) = writer().await;
    let (first, release_first) = holding(&["a"]);
    let first = spawn_write(&writer, "p", first);
    pause().await;
    let (last, release_last) = holding(&["z"]);
    let kept = spawn_write(&writer, "p", keep(&["b"]));
    let undone = spawn_write(&writer, "p", Plan { inserts: vec!["c"], ..Plan::default() });
    let failed = spawn_write(&writer, "p", keep(&["a"]));
    let last = spawn_write(&writer, "p", last);
    pause().await;
    release_first.send(()).unwrap();
    pause().await;
    for task in [&first, &kept, &undone, &failed] {
        assert!(!task.is_finished(), "answered before the batch committed");
    }
    assert!(values(&pool).await.is_empty());
    release_last.send(()).unwrap();
    first.await.unwrap().unwrap();
    kept.await.unwrap().unwrap();
    undone.await.unwrap().unwrap();
    assert!(failed.await.unwrap().is_err());
    last.await.unwrap().unwrap();
    assert_eq!(values(&pool).await, vec!["a", "b", "z"]);
}

/// A write joining a batch that holds other projects but not its own is bounded; one for
/// a project the batch holds (or the first of a batch) is not. A bounded lock that runs
/// out starts the write again at the head of a batch of its own, after the batch before
/// it committed, not bounded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_are_bounded_for_projects_the_batch_does_not_hold() {
    let (_keep, pool, writer) = writer().await;
    let (first, release) = holding(&["a1"]);
    let first = spawn_write(&writer, "a", first);
    pause().await;
    let look = |inserts: &[&'static str]| Plan { look: Some(pool.clone()), ..keep(inserts) };
    let same = spawn_write(&writer, "a", look(&["a2"]));
    let other = spawn_write(&writer, "b", look(&["b1"]));
    let elsewhere = spawn_write(&writer, "elsewhere", look(&["e1"]));
    pause().await;
    release.send(()).unwrap();
    assert!(
        !first.await.unwrap().unwrap().bounded,
        "the first write of a batch holds nothing while it waits"
    );
    let same = same.await.unwrap().unwrap();
    let other = other.await.unwrap().unwrap();
    let elsewhere = elsewhere.await.unwrap().unwrap();
    assert!(!same.bounded, "the batch already holds project a");
    assert!(other.bounded, "the batch holds a, not b");
    assert!(!elsewhere.bounded, "started again in a batch of its own");
    assert!(same.committed.is_empty() && other.committed.is_empty());
    assert_eq!(elsewhere.committed, vec!["a1", "a2", "b1"], "it ran after the first batch committed");
    assert_eq!(values(&pool).await, vec!["a1", "a2", "b1", "e1"]);
}

/// What a write leaves to run on commit runs once its batch has committed, in the batch's
/// order, for kept writes only, and even when the write's caller stopped waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_commit_runs_for_kept_writes_in_order_once_the_batch_commits() {
    let (_keep, pool, writer) = writer().await;
    let ran = Arc::new(Mutex::new(Vec::new()));
    let record = |v: &'static str| {
        let ran = ran.clone();
        Some(Box::new(move || ran.lock().unwrap().push(v)) as OnCommit)
    };
    let (first, release) = holding(&["a"]);
    let first = spawn_write(&writer, "p", Plan { on_commit: record("a"), ..first });
    pause().await;
    let b = spawn_write(&writer, "p", Plan { on_commit: record("b"), ..keep(&["b"]) });
    let c = spawn_write(&writer, "p", Plan { on_commit: record("c"), ..Plan::default() });
    let gone = spawn_write(&writer, "p", Plan { on_commit: record("d"), ..keep(&["d"]) });
    let e = spawn_write(&writer, "p", Plan { on_commit: record("e"), ..keep(&["e"]) });
    pause().await;
    // Its caller stops waiting: the write is made all the same.
    gone.abort();
    assert!(ran.lock().unwrap().is_empty());
    release.send(()).unwrap();
    for task in [first, b, c, e] {
        task.await.unwrap().unwrap();
    }
    assert_eq!(*ran.lock().unwrap(), vec!["a", "b", "d", "e"]);
    assert_eq!(values(&pool).await, vec!["a", "b", "d", "e"]);
}

/// A body that panics ends its batch: none of the batch's writes is kept, each is told so,
/// and the writer carries on with a new connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_panics_fails_its_batch_and_the_writer_carries_on() {
    let (_keep, pool, writer) = writer().await;
    let (first, release) = holding(&["a"]);
    let first = spawn_write(&writer, "p", first);
    pause().await;
    let panics = {
        let writer = writer.clone();
        queued(async move {
            let body =
                Box::new(|tx: Tx<Test>, _: Locked| -> BoxFuture<'static, (Tx<Test>, Result<Done<()>>)> {
                    Box::pin(async move {
                        assert!(tx.revision < 0, "a bug in a write's body");
                        (tx, Err(Error::internal("unreachable")))
                    })
                });
            writer.run(lock("p"), body).await
        })
    };
    pause().await;
    release.send(()).unwrap();
    let told = first.await.unwrap();
    assert!(matches!(told, Err(Error::Unavailable(_))), "the batch did not commit: {told:?}");
    assert!(panics.await.unwrap().is_err());
    assert!(values(&pool).await.is_empty());
    write(&writer, "p", keep(&["b"])).await.unwrap();
    assert_eq!(values(&pool).await, vec!["b"]);
}

/// A write that takes no lock (`run_plain`) is kept when it succeeds and rolled back alone
/// when it fails, in a batch with locked writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_writes_share_batches_and_roll_back_alone() {
    let (_keep, pool, writer) = writer().await;
    let (first, release) = holding(&["a"]);
    let first = spawn_write(&writer, "p", first);
    pause().await;
    let plain = |v: &'static str| {
        let writer = writer.clone();
        queued(async move {
            let body = Box::new(move |mut conn: sqlx::pool::PoolConnection<Db>| -> BoxFuture<'static, _> {
                Box::pin(async move {
                    let result =
                        sqlx::query("INSERT INTO t (v) VALUES ($1)").bind(v).execute(&mut *conn).await;
                    (conn, result.map(drop).map_err(Error::from))
                })
            });
            writer.run_plain(body).await
        })
    };
    let ok = plain("b");
    let duplicate = plain("a");
    pause().await;
    release.send(()).unwrap();
    first.await.unwrap().unwrap();
    ok.await.unwrap().unwrap();
    assert!(duplicate.await.unwrap().is_err());
    assert_eq!(values(&pool).await, vec!["a", "b"]);
}

/// The writer keeps its connection between batches; `close` closes it, so the pool's
/// close (which waits for every connection) finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_gives_the_connection_back_to_the_pool() {
    let (_keep, pool, writer) = writer().await;
    write(&writer, "p", keep(&["a"])).await.unwrap();
    writer.close().await;
    tokio::time::timeout(Duration::from_secs(10), pool.close())
        .await
        .expect("the pool closes once the writer gave its connection back");
    assert!(write(&writer, "p", keep(&["b"])).await.is_err(), "no writes on a closed pool");
}
