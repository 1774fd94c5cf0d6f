//! One reader per watched project, shared by all its watchers in this process.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use baton_proto::v1::Event;
use tokio::sync::{broadcast, watch};

use super::Wakers;
use super::wakers::Reader;
use crate::store::Store;
use crate::store::model::LoggedEvent;
use crate::store::rows::decode_event;

/// Events a reader buffers for its watchers; a watcher further behind than this catches
/// up from the table instead.
const FEED_CAPACITY: usize = 1024;
const READ_PAGE: i64 = 512;
const READ_BYTES: usize = 1024 * 1024;
/// An event larger than this is not kept in the feed: a stand-in (its revision, no kind)
/// sends each watcher to read it from the table, a page at a time. So a feed holds at most
/// FEED_CAPACITY times this, whatever was written.
pub(super) const FEED_EVENT_BYTES: usize = 16 * 1024;

/// The fan-out of event rows to watchers.
#[derive(Clone)]
pub struct Hub<S: Store> {
    store: S,
    wakers: Wakers,
    feeds: Arc<Mutex<HashMap<String, broadcast::Sender<Arc<Event>>>>>,
    /// Projects whose reader is being started: later subscribers wait for it (one head
    /// read per new reader, however many watchers connect at once).
    starting: Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>,
    /// How often readers read the table without a wake-up (a lost wake-up costs at most
    /// this much delay).
    poll: Duration,
    shutdown: watch::Receiver<bool>,
    /// Readers of projects that do not exist yet: they do not poll. One task (started with
    /// the first) asks the database every `poll` which of them exist now, in one query,
    /// and wakes those, and those whose watchers left; writes through this process (and,
    /// on Postgres, NOTIFY from other instances) wake them as they wake every reader.
    dormant: Arc<Mutex<HashMap<String, Dormant>>>,
    checking: Arc<std::sync::atomic::AtomicBool>,
}

/// A dormant reader: how to wake it, and its feed (to tell whether anyone still listens).
struct Dormant {
    reader: Arc<Reader>,
    feed: broadcast::Sender<Arc<Event>>,
}

/// Projects one existence query asks about.
const DORMANT_BATCH: usize = 500;

impl<S: Store> Hub<S> {
    pub fn new(store: S, wakers: Wakers, poll: Duration, shutdown: watch::Receiver<bool>) -> Self {
        Self {
            store,
            wakers,
            feeds: Arc::default(),
            starting: Arc::default(),
            poll,
            shutdown,
            dormant: Arc::default(),
            checking: Arc::default(),
        }
    }

    /// How often readers poll the table when nothing woke them.
    pub fn poll(&self) -> Duration {
        self.poll
    }

    /// Live events of `project`: every event after some revision that was committed
    /// before this returns. Subscribers replay the table after their cursor next, which
    /// covers what came before the feed, and skip what they already have.
    ///
    /// Why a new reader's starting head is read here, before anyone gets its feed: read by
    /// the reader later, it could include a write committed after a subscriber's replay,
    /// which the feed then never carries (a watcher waited for that event until the next
    /// write to the project).
    pub async fn subscribe(&self, project: &str) -> broadcast::Receiver<Arc<Event>> {
        if let Some(feed) = self.feed(project) {
            return feed;
        }
        let gate = {
            let mut starting = self.starting.lock().unwrap_or_else(PoisonError::into_inner);
            starting.entry(project.to_owned()).or_default().clone()
        };
        let turn = gate.lock().await;
        let feed = match self.feed(project) {
            Some(feed) => feed,
            None => self.start_reader(project).await,
        };
        drop(turn);
        let mut starting = self.starting.lock().unwrap_or_else(PoisonError::into_inner);
        if starting.get(project).is_some_and(|g| Arc::ptr_eq(g, &gate)) {
            starting.remove(project);
        }
        feed
    }

    /// Reads the head and starts the reader from it (see `subscribe`).
    async fn start_reader(&self, project: &str) -> broadcast::Receiver<Arc<Event>> {
        fail::fail_point!("hub.before_reader_head");
        let head = match crate::store::head_revision(&self.store, project.to_owned()).await {
            Ok(head) => head,
            Err(e) => {
                tracing::warn!(%project, error = %e, "reader cannot read the head revision; starting from 0");
                0
            }
        };
        let mut feeds = self.feeds.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(feed) = feeds.get(project) {
            // Started meanwhile by a subscriber whose turn was cancelled mid-start.
            return feed.subscribe();
        }
        let (tx, rx) = broadcast::channel(FEED_CAPACITY);
        feeds.insert(project.to_owned(), tx.clone());
        let reader = self.wakers.register(project);
        tokio::spawn(self.clone().read(project.to_owned(), tx, reader, head));
        rx
    }

    /// Number of readers waiting for their project to exist (stats and tests).
    pub fn dormant(&self) -> usize {
        self.dormant.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// Puts a reader to sleep until its project exists (or its watchers leave).
    fn sleep_until_created(&self, project: &str, reader: &Arc<Reader>, feed: &broadcast::Sender<Arc<Event>>) {
        self.dormant
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(project.to_owned(), Dormant { reader: reader.clone(), feed: feed.clone() });
        if !self.checking.swap(true, std::sync::atomic::Ordering::SeqCst) {
            tokio::spawn(self.clone().check_dormant());
        }
    }

    /// Every `poll`: one query for all dormant projects; wakes those that exist now and
    /// those nobody watches any more.
    async fn check_dormant(self) {
        let mut shutdown = self.shutdown.clone();
        loop {
            tokio::select! {
                () = tokio::time::sleep(self.poll) => {}
                _ = shutdown.changed() => return,
            }
            let keys: Vec<String> = {
                let mut dormant = self.dormant.lock().unwrap_or_else(PoisonError::into_inner);
                dormant.retain(|_, d| {
                    let watched = d.feed.receiver_count() > 0;
                    if !watched {
                        d.reader.wake();
                    }
                    watched
                });
                dormant.keys().cloned().collect()
            };
            for batch in keys.chunks(DORMANT_BATCH) {
                fail::fail_point!("hub.dormant_check");
                match self.store.projects(Some(batch.to_vec())).await {
                    Ok(existing) => {
                        let mut dormant = self.dormant.lock().unwrap_or_else(PoisonError::into_inner);
                        for project in existing {
                            if let Some(d) = dormant.remove(&project.key) {
                                d.reader.wake();
                            }
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot tell which watched projects exist; will retry");
                    }
                }
            }
        }
    }

    fn feed(&self, project: &str) -> Option<broadcast::Receiver<Arc<Event>>> {
        let feeds = self.feeds.lock().unwrap_or_else(PoisonError::into_inner);
        feeds.get(project).map(broadcast::Sender::subscribe)
    }

    /// Number of projects with a running reader (for stats and tests).
    pub fn readers(&self) -> usize {
        self.feeds.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// Sends the events after `last` (the head when the feed started: watchers replay
    /// older events themselves) into the feed, on each wake-up and poll: those a commit in
    /// this process handed over when they follow `last`, else read from the table.
    async fn read(
        self,
        project: String,
        tx: broadcast::Sender<Arc<Event>>,
        reader: Arc<Reader>,
        mut last: i64,
    ) {
        let mut shutdown = self.shutdown.clone();
        // The first read at once: a commit after the head was read and before the reader
        // was registered told no one.
        let mut first = true;
        loop {
            let polled = if std::mem::take(&mut first) {
                true
            } else if last == 0 {
                // Nothing to read yet (the project does not exist): no polling.
                self.sleep_until_created(&project, &reader, &tx);
                tokio::select! {
                    () = reader.woken() => {}
                    _ = shutdown.changed() => break,
                }
                self.dormant.lock().unwrap_or_else(PoisonError::into_inner).remove(&project);
                false
            } else {
                tokio::select! {
                    () = reader.woken() => false,
                    () = tokio::time::sleep(self.poll) => true,
                    _ = shutdown.changed() => break,
                }
            };
            {
                // Under the lock, so a concurrent subscribe either sees this feed alive or
                // starts a new reader.
                let mut feeds = self.feeds.lock().unwrap_or_else(PoisonError::into_inner);
                if tx.receiver_count() == 0 {
                    feeds.remove(&project);
                    self.wakers.unregister(&project);
                    break;
                }
            }
            let told = reader.take();
            // A poll is the safety net for lost wake-ups, and a wake-up that only the table
            // can answer may come with handed events a purge has masked since: both read the
            // table, and the handed events go unused.
            let whole = !polled && !told.read_table && send_committed(&tx, told.events, &mut last);
            if !whole || told.announced > last {
                self.read_table(&project, &tx, &mut last).await;
            }
        }
        tracing::debug!(%project, "event reader stopped");
    }

    /// Reads the events after `last` from the table into the feed, a page at a time.
    async fn read_table(&self, project: &str, tx: &broadcast::Sender<Arc<Event>>, last: &mut i64) {
        fail::fail_point!("hub.read_table");
        loop {
            let page = crate::service::log::events_after(
                &self.store,
                project.to_owned(),
                *last,
                READ_PAGE,
                READ_BYTES,
            )
            .await;
            match page {
                Ok((events, more)) => {
                    for event in events {
                        *last = event.revision;
                        send(tx, event);
                    }
                    if !more {
                        return;
                    }
                }
                Err(e) => {
                    tracing::warn!(%project, error = %e, "reader cannot read events; will retry");
                    return;
                }
            }
        }
    }
}

/// Sends the events a commit in this process handed over that follow `last`, in order;
/// false when one does not (a gap: another instance's commit, or a commit whose events
/// have not come yet), and the table must tell the rest.
fn send_committed(tx: &broadcast::Sender<Arc<Event>>, mut events: Vec<LoggedEvent>, last: &mut i64) -> bool {
    // The writer reports a project's commits in order (`writer::Done::on_commit`); sorting costs
    // little and keeps that order from being a contract here.
    events.sort_unstable_by_key(|e| e.revision);
    for logged in events {
        if logged.revision <= *last {
            continue;
        }
        if logged.revision != *last + 1 {
            return false;
        }
        let Ok(event) = decode_event(&logged.body) else { return false };
        *last = logged.revision;
        send(tx, event);
    }
    true
}

/// Puts an event in the feed, or its stand-in when it is too large to keep there.
fn send(tx: &broadcast::Sender<Arc<Event>>, event: Event) {
    let event = if prost::Message::encoded_len(&event) > FEED_EVENT_BYTES {
        Event { revision: event.revision, ..Event::default() }
    } else {
        event
    };
    // No receivers is fine: the next turn ends this reader.
    let _ = tx.send(Arc::new(event));
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;
    use crate::events::{Watch, watch};
    use crate::store::SqliteStore;

    /// A hub over a new SQLite store, polling every `poll`; keep the directory and the
    /// sender while the test runs.
    async fn sqlite_hub(
        poll: Duration,
    ) -> (
        tempfile::TempDir,
        SqliteStore,
        Hub<SqliteStore>,
        tokio::sync::watch::Sender<bool>,
        tokio::sync::watch::Receiver<bool>,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("t.db").display());
        let wakers = Wakers::default();
        let store = SqliteStore::connect(&url, wakers.clone()).await.unwrap();
        let (stop, stop_rx) = tokio::sync::watch::channel(false);
        let hub = Hub::new(store.clone(), wakers, poll, stop_rx.clone());
        (dir, store, hub, stop, stop_rx)
    }

    async fn until(mut f: impl FnMut() -> bool) {
        for _ in 0..200 {
            if f() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("condition not reached");
    }

    #[tokio::test]
    async fn one_reader_per_project_freed_when_watchers_leave() {
        let (_dir, store, hub, _stop, stop_rx) = sqlite_hub(Duration::from_millis(20)).await;
        let _only = FAIL_POINT.lock().await;

        let request = |p: &str| Watch { cursors: vec![(p.to_owned(), 0)], kinds: HashSet::new() };
        let a1 = watch(&store, &hub, &request("a"), &stop_rx, 8);
        let a2 = watch(&store, &hub, &request("a"), &stop_rx, 8);
        let b = watch(&store, &hub, &request("b"), &stop_rx, 8);
        // Two watchers of "a" share one reader.
        until(|| hub.readers() == 2).await;
        drop(a1);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(hub.readers(), 2, "a still has a watcher");
        // A cancelled watch frees its follower, and the last one frees the reader.
        drop(a2);
        drop(b);
        until(|| hub.readers() == 0).await;
    }

    /// A write committed after a new watcher replayed the table, while the project's new
    /// reader is slow to start (a fail point holds it 300 ms), is delivered. (Polling is
    /// off, so nothing but the feed or the replay can deliver it.)
    #[cfg(feature = "failpoints")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_while_a_new_reader_starts_is_delivered() {
        use baton_proto::v1::{MemoryItem, MemoryOp, PutMemoryRequest};

        let (_dir, store, hub, _stop, stop_rx) = sqlite_hub(Duration::from_hours(1)).await;
        let put = |revision: i64| {
            let req = PutMemoryRequest {
                project: "p".into(),
                category: "note".into(),
                key: "k".into(),
                op: MemoryOp::Upsert as i32,
                items: vec![MemoryItem { content: format!("v{revision}"), rationale: String::new() }],
                ..Default::default()
            };
            crate::service::memory::put(&store, crate::store::WriteCtx::default(), req)
        };
        put(1).await.unwrap();
        let _only = FAIL_POINT.lock().await;
        fail::cfg("hub.before_reader_head", "sleep(300)").unwrap();
        let request = Watch { cursors: vec![("p".to_owned(), 1)], kinds: HashSet::new() };
        let mut events = watch(&store, &hub, &request, &stop_rx, 8);
        // The write lands while the new reader is held, before it reads its head. (Read by
        // the reader itself, after the watcher's replay had run, the head included the
        // write and the feed skipped it.)
        tokio::time::sleep(Duration::from_millis(100)).await;
        put(2).await.unwrap();
        let got = tokio::time::timeout(Duration::from_secs(5), events.recv()).await;
        fail::remove("hub.before_reader_head");
        let event = got.expect("the write is delivered").unwrap().unwrap();
        assert_eq!(event.event.revision, 2);
    }

    /// Readers of projects that do not exist do not poll: one query per poll asks about all
    /// of them; a project created by another process (no wake-up) is found by it, and its
    /// watchers get the write.
    #[cfg(feature = "failpoints")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn watching_projects_that_do_not_exist_costs_one_query_per_poll() {
        use std::sync::atomic::{AtomicUsize, Ordering};

        use baton_proto::v1::{MemoryItem, MemoryOp, PutMemoryRequest};

        let (dir, store, hub, _stop, stop_rx) = sqlite_hub(Duration::from_millis(50)).await;
        let _only = FAIL_POINT.lock().await;
        let checks = Arc::new(AtomicUsize::new(0));
        let counted = checks.clone();
        fail::cfg_callback("hub.dormant_check", move || {
            counted.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
        let mut watchers: Vec<_> = (0..300)
            .map(|i| {
                let request = Watch { cursors: vec![(format!("nowhere/{i}"), 0)], kinds: HashSet::new() };
                watch(&store, &hub, &request, &stop_rx, 8)
            })
            .collect();
        until(|| hub.dormant() == 300).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let polls = checks.load(Ordering::SeqCst);
        fail::remove("hub.dormant_check");
        // About 10 polls of 50 ms: one query each, not one per project.
        assert!((3..=20).contains(&polls), "{polls} existence queries for 300 projects in 0.5 s");

        // Another process (its own store on the same file: no wake-up here) creates one.
        let other = SqliteStore::connect(
            &format!("sqlite://{}", dir.path().join("t.db").display()),
            Wakers::default(),
        )
        .await
        .unwrap();
        let req = PutMemoryRequest {
            project: "nowhere/7".into(),
            category: "note".into(),
            key: "k".into(),
            op: MemoryOp::Upsert as i32,
            items: vec![MemoryItem { content: "hello".into(), rationale: String::new() }],
            ..Default::default()
        };
        crate::service::memory::put(&other, crate::store::WriteCtx::default(), req).await.unwrap();
        let got = tokio::time::timeout(Duration::from_secs(5), watchers[7].recv()).await;
        assert_eq!(got.expect("delivered").unwrap().unwrap().event.revision, 1);
        until(|| hub.dormant() == 299).await;
        // Watchers that leave free their dormant readers.
        watchers.clear();
        until(|| hub.readers() == 0 && hub.dormant() == 0).await;
    }

    /// Writes through this process reach the feed from their commits, without reading the
    /// table; a write it did not make (another process on the same file, which wakes no
    /// one here) leaves a gap, and the next commit's events make the reader read the table:
    /// both arrive, in order. (Polling is off.)
    #[cfg(feature = "failpoints")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn commits_feed_the_reader_and_a_gap_reads_the_table() {
        use std::sync::atomic::{AtomicUsize, Ordering};

        use baton_proto::v1::{MemoryItem, MemoryOp, PutMemoryRequest};

        let (dir, store, hub, _stop, stop_rx) = sqlite_hub(Duration::from_hours(1)).await;
        let _only = FAIL_POINT.lock().await;
        let put = |store: SqliteStore, key: String| async move {
            let req = PutMemoryRequest {
                project: "p".into(),
                category: "note".into(),
                key: key.clone(),
                op: MemoryOp::Upsert as i32,
                items: vec![MemoryItem { content: format!("value of {key}"), rationale: String::new() }],
                ..Default::default()
            };
            crate::service::memory::put(&store, crate::store::WriteCtx::default(), req).await.unwrap();
        };
        put(store.clone(), "before".into()).await;
        let reads = Arc::new(AtomicUsize::new(0));
        let counted = reads.clone();
        fail::cfg_callback("hub.read_table", move || {
            counted.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
        let request = Watch { cursors: vec![("p".to_owned(), 1)], kinds: HashSet::new() };
        let mut events = watch(&store, &hub, &request, &stop_rx, 64);
        // The reader's first turn reads the table; from then on, count.
        until(|| reads.load(Ordering::SeqCst) == 1).await;
        reads.store(0, Ordering::SeqCst);
        macro_rules! next {
            ($revision:expr) => {{
                let got = tokio::time::timeout(Duration::from_secs(5), events.recv()).await;
                let delivery = got.expect("delivered").unwrap().unwrap();
                assert_eq!(delivery.event.revision, $revision);
                delivery.event
            }};
        }
        // Ten writes one after another.
        for i in 0..10 {
            put(store.clone(), format!("k{i}")).await;
            let event = next!(i + 2);
            assert!(event.entity_id.ends_with(&format!("/k{i}")), "{event:?}");
        }
        assert_eq!(reads.load(Ordering::SeqCst), 0, "the reader read the table for events it was handed");
        // Ten at once (batched), in order.
        let at_once: Vec<_> = (10..20).map(|i| tokio::spawn(put(store.clone(), format!("k{i}")))).collect();
        for write in at_once {
            write.await.unwrap();
        }
        for revision in 12..22 {
            next!(revision);
        }
        let before = reads.load(Ordering::SeqCst);

        let other = SqliteStore::connect(
            &format!("sqlite://{}", dir.path().join("t.db").display()),
            Wakers::default(),
        )
        .await
        .unwrap();
        put(other, "elsewhere".into()).await;
        put(store.clone(), "here".into()).await;
        assert!(next!(22).entity_id.ends_with("/elsewhere"));
        assert!(next!(23).entity_id.ends_with("/here"));
        fail::remove("hub.read_table");
        assert!(reads.load(Ordering::SeqCst) > before, "the gap was filled from the table");
    }

    /// Handed events go out in revision order from the one after `last`; older ones are
    /// skipped; a gap or a body that does not decode stops there and asks for the table.
    #[test]
    fn handed_events_follow_the_last_sent_or_ask_for_the_table() {
        let logged = |revision: i64| LoggedEvent {
            revision,
            kind: 5,
            body: prost::Message::encode_to_vec(&Event { revision, ..Event::default() }),
        };
        let (tx, mut rx) = broadcast::channel::<Arc<Event>>(16);
        let mut sent = || std::iter::from_fn(|| rx.try_recv().ok().map(|e| e.revision)).collect::<Vec<i64>>();

        let mut last = 2;
        assert!(send_committed(&tx, vec![logged(4), logged(2), logged(3)], &mut last));
        assert_eq!((sent(), last), (vec![3, 4], 4));

        assert!(!send_committed(&tx, vec![logged(7), logged(5)], &mut last), "6 is missing");
        assert_eq!((sent(), last), (vec![5], 5));
        assert!(!send_committed(&tx, vec![logged(9)], &mut last));
        assert_eq!((sent(), last), (vec![], 5));

        let garbled = LoggedEvent { revision: 6, kind: 5, body: vec![0xff, 0xff, 0xff] };
        assert!(!send_committed(&tx, vec![garbled, logged(7)], &mut last));
        assert_eq!((sent(), last), (vec![], 5));
    }

    /// A large event is not kept in the shared feed: a stand-in with its revision sends the
    /// watchers to the table, where they read it whole and in order.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn large_events_stay_out_of_the_feed() {
        use baton_proto::v1::{MemoryItem, MemoryOp, PutMemoryRequest};

        let (_dir, store, hub, _stop, stop_rx) = sqlite_hub(Duration::from_millis(50)).await;
        // Its reader passes the fail points others count.
        let _only = FAIL_POINT.lock().await;
        let put = |key: &str, content: String| {
            let req = PutMemoryRequest {
                project: "p".into(),
                category: "note".into(),
                key: key.into(),
                op: MemoryOp::Upsert as i32,
                items: vec![MemoryItem { rationale: content.clone(), content }],
                ..Default::default()
            };
            crate::service::memory::put(&store, crate::store::WriteCtx::default(), req)
        };
        put("first", "small".into()).await.unwrap();
        let mut feed = hub.subscribe("p").await;
        let request = Watch { cursors: vec![("p".to_owned(), 1)], kinds: HashSet::new() };
        let mut events = watch(&store, &hub, &request, &stop_rx, 8);
        tokio::time::sleep(Duration::from_millis(200)).await;
        put("big", "x".repeat(16 * 1024)).await.unwrap();
        put("small", "small".into()).await.unwrap();
        let mut fed = Vec::new();
        for _ in 0..2 {
            fed.push(tokio::time::timeout(Duration::from_secs(5), feed.recv()).await.unwrap().unwrap());
        }
        assert_eq!((fed[0].revision, fed[0].kind, fed[0].value.is_none()), (2, 0, true), "a stand-in");
        assert!(prost::Message::encoded_len(&*fed[0]) < 64);
        assert_eq!((fed[1].revision, fed[1].kind), (3, baton_proto::v1::EventKind::MemoryChanged as i32));
        for revision in [2, 3] {
            let got =
                tokio::time::timeout(Duration::from_secs(5), events.recv()).await.unwrap().unwrap().unwrap();
            assert_eq!(got.event.revision, revision);
            assert_eq!(got.event.kind, baton_proto::v1::EventKind::MemoryChanged as i32);
        }
    }

    /// Fail points are the process's: one test at a time sets them, and tests that start
    /// readers (which pass the fail points) take turns with those that count them.
    static FAIL_POINT: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

    /// Many watchers of a project without a reader, connecting at once, start one reader,
    /// which reads the head once.
    #[cfg(feature = "failpoints")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn watchers_connecting_at_once_start_one_reader() {
        use std::sync::atomic::{AtomicUsize, Ordering};

        let (_dir, store, hub, _stop, stop_rx) = sqlite_hub(Duration::from_hours(1)).await;
        let _only = FAIL_POINT.lock().await;
        let heads = Arc::new(AtomicUsize::new(0));
        let counted = heads.clone();
        fail::cfg_callback("hub.before_reader_head", move || {
            counted.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(50));
        })
        .unwrap();
        let watchers: Vec<_> = (0..50)
            .map(|_| {
                let request = Watch { cursors: vec![("p".to_owned(), 0)], kinds: HashSet::new() };
                watch(&store, &hub, &request, &stop_rx, 8)
            })
            .collect();
        until(|| hub.readers() == 1).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        fail::remove("hub.before_reader_head");
        assert_eq!(heads.load(Ordering::SeqCst), 1);
        assert!(hub.starting.lock().unwrap().is_empty());
        drop(watchers);
    }
}
