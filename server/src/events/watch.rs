//! One watcher: replay from the table after its cursor, then follow the project's feed.
//! Revisions are delivered in order with no gap and no duplicate: a live event that is not
//! the next revision (the feed started later, or this watcher lagged) sends the watcher
//! back to the table.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use baton_proto::v1::Event;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{mpsc, watch as signal};
use tonic::Status;

use super::Hub;
use crate::error::Error;
use crate::store::Store;

const REPLAY_PAGE: i64 = 1000;

/// What a watch stream carries until it is encoded: events shared with the project's other
/// watchers (each watcher's copy is made once, by the encoder's side) and boxed errors, so
/// every hop moves two words instead of an event and a `Status` by value (with 1,000
/// watchers, those moves were a tenth of the server's fan-out work).
pub type Delivery = Result<Arc<Event>, Box<Status>>;

/// What a watcher asked for, validated.
#[derive(Debug, Clone)]
pub struct Watch {
    pub cursors: Vec<(String, i64)>,
    pub kinds: HashSet<i32>,
}

/// Starts a watch; the returned channel ends when the client goes away or the server
/// shuts down (cleanly, without an error).
pub fn watch<S: Store>(
    store: S,
    hub: &Hub<S>,
    request: Watch,
    shutdown: signal::Receiver<bool>,
    buffer: usize,
) -> mpsc::Receiver<Delivery> {
    let (out, rx) = mpsc::channel(buffer);
    let kinds = Arc::new(request.kinds);
    for (project, cursor) in request.cursors {
        spawn_follower(&store, hub, project, cursor, kinds.clone(), out.clone(), shutdown.clone());
    }
    rx
}

/// Follows one project from `cursor` into `out`.
pub(super) fn spawn_follower<S: Store>(
    store: &S,
    hub: &Hub<S>,
    project: String,
    cursor: i64,
    kinds: Arc<HashSet<i32>>,
    out: mpsc::Sender<Delivery>,
    shutdown: signal::Receiver<bool>,
) {
    let (store, hub) = (store.clone(), hub.clone());
    tokio::spawn(async move {
        // The feed first, then the replay: together they miss nothing (`Hub::subscribe`).
        let live = tokio::select! {
            live = hub.subscribe(&project) => live,
            () = out.closed() => return,
        };
        Follower { store, hub, live, project, cursor, kinds, out }.run(shutdown).await;
    });
}

struct Follower<S: Store> {
    store: S,
    hub: Hub<S>,
    live: tokio::sync::broadcast::Receiver<Arc<Event>>,
    project: String,
    cursor: i64,
    kinds: Arc<HashSet<i32>>,
    out: mpsc::Sender<Delivery>,
}

enum Step {
    CatchUp,
    Stop,
}

impl<S: Store> Follower<S> {
    async fn run(mut self, mut shutdown: signal::Receiver<bool>) {
        loop {
            if let Step::Stop = self.catch_up(&mut shutdown).await {
                return;
            }
            if let Step::Stop = self.follow(&mut shutdown).await {
                return;
            }
        }
    }

    /// Sends an event (unless filtered out); false when the client went away.
    async fn deliver(&mut self, event: Arc<Event>) -> bool {
        self.cursor = event.revision;
        if !self.kinds.is_empty() && !self.kinds.contains(&event.kind) {
            return true;
        }
        self.out.send(Ok(event)).await.is_ok()
    }

    /// Replays the table after the cursor until it is exhausted. While the database is
    /// unreachable it waits and retries, so the stream carries on once it is back.
    async fn catch_up(&mut self, shutdown: &mut signal::Receiver<bool>) -> Step {
        let mut backoff = Duration::from_millis(50);
        loop {
            let events = match self.store.events_after(self.project.clone(), self.cursor, REPLAY_PAGE).await {
                Ok(events) => events,
                Err(e @ Error::Unavailable(_)) => {
                    tracing::warn!(project = %self.project, error = %e, "watch cannot read events; retrying");
                    tokio::select! {
                        () = self.out.closed() => return Step::Stop,
                        _ = shutdown.changed() => return Step::Stop,
                        () = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                    continue;
                }
                Err(e) => {
                    let _ = self.out.send(Err(Box::new(Status::from(e)))).await;
                    return Step::Stop;
                }
            };
            backoff = Duration::from_millis(50);
            let full = events.len() as i64 == REPLAY_PAGE;
            for event in events {
                if !self.deliver(Arc::new(event)).await {
                    return Step::Stop;
                }
            }
            if !full {
                return Step::CatchUp;
            }
        }
    }

    /// Follows the live feed until a gap, a lag, or the end.
    async fn follow(&mut self, shutdown: &mut signal::Receiver<bool>) -> Step {
        loop {
            let received = tokio::select! {
                () = self.out.closed() => return Step::Stop,
                _ = shutdown.changed() => return Step::Stop,
                r = self.live.recv() => r,
            };
            match received {
                Ok(event) if event.revision <= self.cursor => {}
                Ok(event) if event.revision == self.cursor + 1 => {
                    if !self.deliver(event).await {
                        return Step::Stop;
                    }
                }
                // A gap (this feed started after our cursor) or a lag: back to the table.
                Ok(_) | Err(RecvError::Lagged(_)) => return Step::CatchUp,
                Err(RecvError::Closed) => {
                    // The reader stopped (server shutting down or it had no watchers left
                    // for an instant): take the current feed.
                    if *shutdown.borrow() {
                        return Step::Stop;
                    }
                    self.live = self.hub.subscribe(&self.project).await;
                    return Step::CatchUp;
                }
            }
        }
    }
}
