//! Watching every project a token may read: the projects that exist when the watch starts
//! are followed from their current head (what happens from now on), and projects created
//! later are discovered by polling and followed from their first revision.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch as signal};
use tonic::Status;

use super::Hub;
use super::watch::{Delivery, Sink, spawn_follower};
use crate::error::Error;
use crate::store::Store;

/// Starts a watch over every project (or, for a project-scoped token, its one project).
/// `max_projects` bounds the followers; past it the stream ends with RESOURCE_EXHAUSTED.
pub async fn watch_all<S: Store>(
    store: S,
    hub: Hub<S>,
    scope: Option<String>,
    kinds: HashSet<i32>,
    shutdown: signal::Receiver<bool>,
    max_projects: usize,
    discover_every: Duration,
) -> Result<mpsc::Receiver<Delivery>, Error> {
    let initial = projects(&store, scope.as_deref()).await?;
    if initial.len() > max_projects {
        return Err(too_many(initial.len(), max_projects));
    }
    let (out, rx) = Sink::channel(256);
    let kinds = Arc::new(kinds);
    let mut followed = HashSet::new();
    for project in initial {
        let head = crate::store::head_revision(&store, project.clone()).await?;
        spawn_follower(&store, &hub, project.clone(), head, kinds.clone(), out.clone(), shutdown.clone());
        followed.insert(project);
    }
    tokio::spawn(discover(store, hub, scope, kinds, out, shutdown, followed, max_projects, discover_every));
    Ok(rx)
}

async fn projects<S: Store>(store: &S, scope: Option<&str>) -> Result<Vec<String>, Error> {
    Ok(store
        .projects(None)
        .await?
        .into_iter()
        .map(|p| p.key)
        .filter(|key| scope.is_none_or(|s| s == key))
        .collect())
}

fn too_many(n: usize, max: usize) -> Error {
    Error::ResourceExhausted(format!(
        "watching all projects would follow {n} projects, over this server's limit of {max} per watch \
         (--max-watch-projects); name the projects to watch instead"
    ))
}

#[allow(clippy::too_many_arguments)]
async fn discover<S: Store>(
    store: S,
    hub: Hub<S>,
    scope: Option<String>,
    kinds: Arc<HashSet<i32>>,
    out: Sink,
    mut shutdown: signal::Receiver<bool>,
    mut followed: HashSet<String>,
    max_projects: usize,
    every: Duration,
) {
    loop {
        tokio::select! {
            () = out.closed() => return,
            _ = shutdown.changed() => return,
            () = tokio::time::sleep(every) => {}
        }
        let found = match projects(&store, scope.as_deref()).await {
            Ok(found) => found,
            // Transient: look again next turn.
            Err(e) => {
                tracing::debug!(error = %e, "watch-all cannot list projects; retrying");
                continue;
            }
        };
        for project in found {
            if followed.contains(&project) {
                continue;
            }
            if followed.len() >= max_projects {
                out.fail(Status::from(too_many(followed.len() + 1, max_projects))).await;
                return;
            }
            // New since the watch began: all of its events.
            spawn_follower(&store, &hub, project.clone(), 0, kinds.clone(), out.clone(), shutdown.clone());
            followed.insert(project);
        }
    }
}
