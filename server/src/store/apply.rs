//! A write as both backends run it (`write`): what its body keeps is applied by the backend,
//! all or nothing (`Apply`), and the project's watchers are woken once it is durable.

use std::future::Future;
use std::sync::Arc;

use sqlx::{Database, Executor};

use super::model::{Lock, Log};
use super::writer::{Backend, Body, Done, OnCommit, Tx, Writer};
use super::{Commits, Decided, Kept, WriteBody};
use crate::error::Result;

/// How a backend applies a write's changes and log: at once, or left to go with the lane's
/// next statement (`writer::Tx::defer`).
pub(crate) trait Apply {
    fn apply(&mut self, kept: Kept) -> impl Future<Output = Result<()>> + Send;
}

/// `body`, with what it keeps applied, and `committed(log)` run once that is durable.
fn applying<B, R>(
    body: WriteBody<Tx<B>, R>,
    committed: impl FnOnce(&Log) -> OnCommit + Send + 'static,
) -> Body<B, R>
where
    B: Backend,
    Tx<B>: Apply,
    R: Send + 'static,
{
    Box::new(move |tx, locked| {
        Box::pin(async move {
            let (mut tx, decided) = body(tx, locked).await;
            let done = match decided {
                Ok(Decided { value, kept: Some(kept) }) => {
                    let on_commit = committed(&kept.log);
                    tx.apply(kept).await.map(|()| Done { value, keep: true, on_commit: Some(on_commit) })
                }
                Ok(Decided { value, kept: None }) => Ok(Done { value, keep: false, on_commit: None }),
                Err(e) => Err(e),
            };
            (tx, done)
        })
    })
}

/// A write through `writer`, as both backends' `Store::write` run it: the project's watch
/// reader held first when the write rewrites the log (`Lock::rewrites_log`), and once the
/// write's changes are durable, the reader handed the events it wrote (a copy, if a reader
/// runs), then the hold ended.
pub(crate) async fn write<B, R>(
    writer: &Writer<B>,
    commits: &Arc<dyn Commits>,
    lock: Lock,
    body: WriteBody<Tx<B>, R>,
) -> Result<R>
where
    B: Backend,
    Tx<B>: Apply,
    R: Send + 'static,
    for<'c> &'c mut <B::Db as Database>::Connection: Executor<'c, Database = B::Db>,
{
    // Before the write can join a batch (`Commits::hold`).
    let hold = lock.rewrites_log.then(|| commits.hold(&lock.project));
    let (commits, project) = (commits.clone(), lock.project.clone());
    let committed = move |log: &Log| {
        let fed = commits.copy_for_reader(&project, &log.events);
        let newest = log.events.iter().map(|e| e.revision).max();
        Box::new(move || {
            commits.committed(&project, newest, fed);
            drop(hold);
        }) as OnCommit
    };
    writer.run(lock, applying(body, committed)).await
}
