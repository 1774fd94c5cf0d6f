//! A write's body as a lane runs it (`writer::Body`): what the body keeps is applied by the
//! backend inside the write's savepoint, and the project's watchers are woken once it is
//! durable.

use std::future::Future;

use sqlx::Database;

use super::model::Log;
use super::writer::{Body, Done, OnCommit, Tx};
use super::{Decided, Kept, WriteBody};
use crate::error::Result;
use crate::events::Wakers;

/// How a backend applies a write's changes and log.
pub(crate) trait Apply {
    fn apply(&mut self, kept: Kept) -> impl Future<Output = Result<()>> + Send;
}

/// `body`, with what it keeps applied, and `committed(log)` run once that is durable.
pub(crate) fn applying<DB, R>(
    body: WriteBody<Tx<DB>, R>,
    committed: impl FnOnce(&Log) -> OnCommit + Send + 'static,
) -> Body<DB, R>
where
    DB: Database,
    Tx<DB>: Apply,
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

/// What follows a write's commit in this process: the project's watch reader is handed the
/// events it wrote (a copy, if a reader runs), then `also` runs (a backend's own telling).
/// The hold of a write that rewrites the log (`Lock::rewrites_log`) ends there.
pub(crate) fn wake(
    wakers: &Wakers,
    project: &str,
    hold: Option<crate::events::Hold>,
    log: &Log,
    also: Option<OnCommit>,
) -> OnCommit {
    let fed = wakers.copy_for_reader(project, &log.events);
    let (wakers, project) = (wakers.clone(), project.to_owned());
    Box::new(move || {
        wakers.committed(&project, fed);
        if let Some(also) = also {
            also();
        }
        drop(hold);
    })
}
