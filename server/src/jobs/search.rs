//! After an upgrade, the records projects held before search are indexed in the background
//! (`service::index::backfill_batch`): the server serves at once, and a project's searches
//! say `partial` until its records are all in the index. SQL alone cannot do it in the
//! migration: the words are Baton's own (`core::search::tokens`).

use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::service::index::{Backfill, backfill_batch};
use crate::store::Store;

/// Indexes every listed project, a batch (one short write) at a time; a failed batch is
/// tried again after a pause. Ends when none is left or the server stops.
pub async fn backfill<S: Store>(store: S, mut stop: watch::Receiver<bool>) {
    let projects = match store.projects(None).await {
        Ok(p) => p.into_iter().filter(|p| p.indexing).map(|p| p.key).collect::<Vec<_>>(),
        Err(e) => {
            tracing::warn!(error = %e, "cannot list the projects to index for search");
            return;
        }
    };
    if projects.is_empty() {
        return;
    }
    tracing::info!(projects = projects.len(), "indexing the records of existing projects for search");
    let started = Instant::now();
    let mut total = 0;
    for project in projects {
        let mut b = Backfill::default();
        loop {
            if *stop.borrow() {
                return;
            }
            match backfill_batch(&store, &project, &mut b).await {
                Ok(true) => break,
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(project, error = %e, "a search index batch failed; trying again");
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_secs(5)) => {}
                        _ = stop.changed() => return,
                    }
                }
            }
        }
        total += b.indexed;
        tracing::info!(project, records = b.indexed, "project indexed for search");
    }
    tracing::info!(records = total, took = ?started.elapsed(), "every project indexed for search");
}
