//! One watcher: replay from the table after its cursor, then follow the project's feed.
//! Revisions are delivered in order with no gap and no duplicate: a live event that is not
//! the next revision (the feed started later, or this watcher lagged) sends the watcher
//! back to the table.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use baton_proto::v1::Event;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch as signal};
use tonic::Status;

use super::Hub;
use crate::error::Error;
use crate::store::Store;

/// A replay page: what one follower holds while its watcher takes it. A watch follows up
/// to --max-watch-projects projects, each with its page.
const REPLAY_PAGE: i64 = 1000;
const REPLAY_BYTES: usize = 256 * 1024;

/// What a watch stream carries until it is encoded: events shared with the project's other
/// watchers (each watcher's copy is made once, by the encoder's side) and boxed errors, so
/// every hop moves a few words instead of an event and a `Status` by value (with 1,000
/// watchers, those moves were a tenth of the server's fan-out work).
pub type Delivery = Result<Queued, Box<Status>>;

/// An event in a stream's channel, holding its share of the stream's byte allowance until
/// the encoder takes it.
pub struct Queued {
    pub event: Arc<Event>,
    _bytes: OwnedSemaphorePermit,
}

/// What one stream's channel may hold besides its count of events, in KiB of encoded
/// events: a client that stops reading holds no more of the server's memory than this
/// (and each follower's replay page) however large the events.
const STREAM_KIB: u32 = 4 * 1024;

/// The sending side of one watch stream, shared by its followers.
#[derive(Clone)]
pub struct Sink {
    tx: mpsc::Sender<Delivery>,
    bytes: Arc<Semaphore>,
}

impl Sink {
    /// A stream of at most `buffer` events and `STREAM_KIB` KiB.
    pub fn channel(buffer: usize) -> (Self, mpsc::Receiver<Delivery>) {
        let (tx, rx) = mpsc::channel(buffer);
        (Self { tx, bytes: Arc::new(Semaphore::new(STREAM_KIB as usize)) }, rx)
    }

    /// Queues an event once its bytes fit; false when the client went away.
    pub async fn send(&self, event: Arc<Event>) -> bool {
        let kib = u32::try_from(prost::Message::encoded_len(&*event) / 1024 + 1)
            .unwrap_or(u32::MAX)
            .min(STREAM_KIB);
        let permit = tokio::select! {
            permit = self.bytes.clone().acquire_many_owned(kib) => permit,
            () = self.tx.closed() => return false,
        };
        let Ok(permit) = permit else { return false };
        self.tx.send(Ok(Queued { event, _bytes: permit })).await.is_ok()
    }

    /// Ends the stream with an error.
    pub async fn fail(&self, status: Status) {
        let _ = self.tx.send(Err(Box::new(status))).await;
    }

    pub async fn closed(&self) {
        self.tx.closed().await;
    }
}

/// What a watcher asked for, validated.
#[derive(Debug, Clone)]
pub struct Watch {
    pub cursors: Vec<(String, i64)>,
    pub kinds: HashSet<i32>,
}

/// Starts a watch; the returned channel ends when the client goes away or the server
/// shuts down (cleanly, without an error).
pub fn watch<S: Store>(
    store: &S,
    hub: &Hub<S>,
    request: &Watch,
    shutdown: &signal::Receiver<bool>,
    buffer: usize,
) -> mpsc::Receiver<Delivery> {
    let (out, rx) = Sink::channel(buffer);
    let kinds = Arc::new(request.kinds.clone());
    for (project, cursor) in &request.cursors {
        spawn_follower(store, hub, project.clone(), *cursor, kinds.clone(), out.clone(), shutdown.clone());
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
    out: Sink,
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
    out: Sink,
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
        self.out.send(event).await
    }

    /// Replays the table after the cursor until it is exhausted. While the database is
    /// unreachable it waits and retries, so the stream carries on once it is back.
    async fn catch_up(&mut self, shutdown: &mut signal::Receiver<bool>) -> Step {
        let mut backoff = Duration::from_millis(50);
        loop {
            let (events, more) = match crate::service::log::events_after(
                &self.store,
                self.project.clone(),
                self.cursor,
                REPLAY_PAGE,
                REPLAY_BYTES,
            )
            .await
            {
                Ok(page) => page,
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
                    self.out.fail(Status::from(e)).await;
                    return Step::Stop;
                }
            };
            backoff = Duration::from_millis(50);
            for event in events {
                if !self.deliver(Arc::new(event)).await {
                    return Step::Stop;
                }
            }
            if !more {
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
                // A large event's stand-in (see `FEED_EVENT_BYTES`): read it from the table.
                Ok(event) if event.kind == 0 => return Step::CatchUp,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A client that stops reading holds at most STREAM_KIB of events in its queue: the
    /// next send waits until the queue is read.
    #[tokio::test]
    async fn a_stream_queue_is_bounded_in_bytes() {
        let (sink, mut rx) = Sink::channel(256);
        let event = |n: i64| {
            Arc::new(Event { revision: n, entity_id: "x".repeat(1024 * 1024), ..Default::default() })
        };
        for n in 1..=3 {
            assert!(sink.send(event(n)).await);
        }
        // Three of 1 MiB (and a bit) in a 4 MiB queue: the fourth does not fit.
        let blocked = tokio::time::timeout(Duration::from_millis(200), sink.send(event(4))).await;
        assert!(blocked.is_err(), "a fourth MiB was queued");
        let first = rx.recv().await.unwrap().unwrap();
        assert_eq!(first.event.revision, 1);
        drop(first);
        assert!(tokio::time::timeout(Duration::from_secs(2), sink.send(event(4))).await.unwrap());
        // Larger than the whole queue: it waits for an empty queue, then goes alone.
        let whole =
            Arc::new(Event { revision: 5, entity_id: "y".repeat(8 * 1024 * 1024), ..Default::default() });
        let sending = tokio::spawn({
            let sink = sink.clone();
            async move { sink.send(whole).await }
        });
        for n in 2..=4 {
            assert_eq!(rx.recv().await.unwrap().unwrap().event.revision, n);
        }
        assert!(sending.await.unwrap());
        assert_eq!(rx.recv().await.unwrap().unwrap().event.revision, 5);
        drop(rx);
        assert!(!sink.send(event(6)).await, "the client went away");
    }
}
