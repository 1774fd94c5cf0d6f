//! Wake-ups for project readers: a commit in this process, or a Postgres NOTIFY from
//! another instance (`instances.rs`), wakes the reader of that project. A wake-up is only a hint: readers
//! read the event table when a wake-up does not say everything that changed, and poll it
//! anyway, so a lost wake-up delays but never loses an event.
//!
//! A performance device, for `baton-bench`'s row "vs etcd: watch latency": a commit in
//! this process hands its reader the events it wrote (`Wakers::committed`), and the reader
//! sends them on without reading them back from the table when they follow, gapless, what
//! it sent last (revisions are gapless and a project's commits are ordered by its lock);
//! anything else — a gap, another instance's commit, a poll, a maintenance event (a purge
//! rewrites stored bodies), an event too large for the feed — reads the table as before.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;

use super::hub::FEED_EVENT_BYTES;
use crate::store::model::LoggedEvent;

/// Events a reader's inbox holds before it gives up on them and reads the table; each at
/// most `FEED_EVENT_BYTES`, so an inbox holds at most 16 MiB, however slow its reader.
const INBOX_EVENTS: usize = 1024;

#[derive(Clone, Default)]
pub struct Wakers {
    inner: Arc<Mutex<Inner>>,
}

/// The store tells the fan-out of its commits through `Commits`.
impl crate::store::Commits for Wakers {
    fn hold(&self, project: &str) -> Box<dyn Send> {
        Box::new(Wakers::hold(self, project))
    }
    fn copy_for_reader(&self, project: &str, events: &[LoggedEvent]) -> Option<Vec<LoggedEvent>> {
        Wakers::copy_for_reader(self, project, events)
    }
    fn committed(&self, project: &str, _newest: Option<i64>, events: Option<Vec<LoggedEvent>>) {
        Wakers::committed(self, project, events);
    }
}

#[derive(Default)]
struct Inner {
    readers: HashMap<String, Arc<Reader>>,
    /// Projects with a write in progress that rewrites or deletes events (`Wakers::hold`).
    held: HashMap<String, usize>,
}

/// While it lives, commits of its project hand their reader nothing (see `Wakers::hold`).
pub struct Hold {
    wakers: Wakers,
    project: String,
}

impl Drop for Hold {
    fn drop(&mut self) {
        let mut inner = self.wakers.lock();
        if let Some(n) = inner.held.get_mut(&self.project) {
            *n -= 1;
            if *n == 0 {
                inner.held.remove(&self.project);
            }
        }
    }
}

/// A project's reader, as the writers see it: its wake-up and what they told it.
#[derive(Default)]
pub struct Reader {
    wake: Notify,
    inbox: Mutex<Inbox>,
}

/// What the reader was told since it last looked.
#[derive(Default)]
pub(super) struct Inbox {
    /// Events committed by this process, in the order their commits reported them.
    pub(super) events: Vec<LoggedEvent>,
    /// The newest revision another instance announced (0: none).
    pub(super) announced: i64,
    /// Something changed that only the event table can tell.
    pub(super) read_table: bool,
}

impl Reader {
    /// Waits for the next wake-up. `notify_one` keeps a permit when the reader is busy, so a
    /// wake-up between its read and its wait is not lost.
    pub async fn woken(&self) {
        self.wake.notified().await;
    }

    /// Wakes the reader to read the table.
    pub fn wake(&self) {
        self.tell(|inbox| inbox.read_table = true);
    }

    /// Takes what the reader was told.
    pub(super) fn take(&self) -> Inbox {
        std::mem::take(&mut *self.inbox.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn tell(&self, f: impl FnOnce(&mut Inbox)) {
        f(&mut self.inbox.lock().unwrap_or_else(PoisonError::into_inner));
        self.wake.notify_one();
    }
}

impl Wakers {
    /// Wakes the reader of `project`, if one runs, to read the table.
    pub fn wake(&self, project: &str) {
        if let Some(reader) = self.reader(project) {
            reader.wake();
        }
    }

    /// A copy of a write's events for the reader of `project`, taken before the write
    /// commits (for a backend that gives its log away to do so): `None` when no reader
    /// runs, or when the reader would read the table for them anyway (see `committed`).
    pub fn copy_for_reader(&self, project: &str, events: &[LoggedEvent]) -> Option<Vec<LoggedEvent>> {
        let handing = {
            let inner = self.lock();
            inner.readers.contains_key(project) && !inner.held.contains_key(project)
        };
        (handing && events.iter().all(handed_over)).then(|| events.to_vec())
    }

    /// For a write that rewrites or deletes events (a purge masks their bodies), taken
    /// before it joins a batch and dropped once its commit is reported: until then, the
    /// commits of its project hand their reader nothing and send it to the table. A write
    /// earlier in the same batch, whose commit is reported first, would otherwise hand over
    /// bodies the purge masked in the same transaction.
    pub fn hold(&self, project: &str) -> Hold {
        *self.lock().held.entry(project.to_owned()).or_default() += 1;
        Hold { wakers: self.clone(), project: project.to_owned() }
    }

    /// After a commit in this process: hands the reader of `project` the events it wrote,
    /// or wakes it to read the table when they are not ones to hand over or no copy was
    /// kept (`None`: nobody watched when the commit began).
    pub fn committed(&self, project: &str, events: Option<Vec<LoggedEvent>>) {
        let (reader, held) = {
            let inner = self.lock();
            (inner.readers.get(project).cloned(), inner.held.contains_key(project))
        };
        let Some(reader) = reader else { return };
        reader.tell(|inbox| match events {
            Some(events)
                if !held
                    && !inbox.read_table
                    && inbox.events.len() + events.len() <= INBOX_EVENTS
                    && events.iter().all(handed_over) =>
            {
                inbox.events.extend(events);
            }
            _ => {
                inbox.events.clear();
                inbox.read_table = true;
            }
        });
    }

    /// Another instance committed `project` up to `revision` (a Postgres NOTIFY).
    pub fn announced(&self, project: &str, revision: i64) {
        if let Some(reader) = self.reader(project) {
            reader.tell(|inbox| inbox.announced = inbox.announced.max(revision));
        }
    }

    /// The reader of a project (created on first use).
    pub fn register(&self, project: &str) -> Arc<Reader> {
        self.lock().readers.entry(project.to_owned()).or_default().clone()
    }

    pub fn unregister(&self, project: &str) {
        self.lock().readers.remove(project);
    }

    fn reader(&self, project: &str) -> Option<Arc<Reader>> {
        self.lock().readers.get(project).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Whether a committed event goes to the reader as it is: not one too large for the feed
/// (its stand-in is made from the table), nor a maintenance event, whose write may have
/// rewritten events the reader has not sent yet (a purge masks their bodies) or deleted them.
fn handed_over(event: &LoggedEvent) -> bool {
    use baton_proto::v1::EventKind;
    let maintenance = [
        EventKind::CheckpointsPruned,
        EventKind::EventsCompacted,
        EventKind::Purged,
        EventKind::SearchIndexed,
    ];
    event.body.len() <= FEED_EVENT_BYTES && !maintenance.iter().any(|k| *k as i32 == event.kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(revisions: std::ops::Range<i64>) -> Vec<LoggedEvent> {
        revisions.map(|revision| LoggedEvent { revision, kind: 1, body: vec![1, 2, 3] }).collect()
    }

    #[test]
    fn a_reader_is_told_what_changed_and_reads_the_table_when_that_is_not_all() {
        let wakers = Wakers::default();
        // Nobody watches: no copy is kept, nothing is held.
        assert!(wakers.copy_for_reader("p", &events(1..3)).is_none());
        wakers.committed("p", Some(events(1..3)));
        let reader = wakers.register("p");
        assert!(wakers.copy_for_reader("p", &events(1..3)).is_some());
        let told = reader.take();
        assert!(told.events.is_empty() && !told.read_table);

        wakers.committed("p", Some(events(1..3)));
        wakers.committed("p", Some(events(3..4)));
        wakers.announced("p", 7);
        wakers.announced("p", 5);
        let told = reader.take();
        assert_eq!(told.events.iter().map(|e| e.revision).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(told.announced, 7);
        assert!(!told.read_table);
        assert!(reader.take().events.is_empty(), "taking empties the inbox");

        // A commit that kept no copy, and an inbox that would overflow, send it to the table.
        wakers.committed("p", None);
        assert!(reader.take().read_table);
        wakers.committed("p", Some(events(1..1024)));
        wakers.committed("p", Some(events(2000..2002)));
        let told = reader.take();
        assert!(told.read_table && told.events.is_empty());
        wakers.wake("p");
        assert!(reader.take().read_table);
    }

    /// What the reader must read from the table is not handed over: events too large for the
    /// feed, maintenance events, anything while a write that rewrites events (a purge) is in
    /// progress, and anything once the reader was sent to the table.
    #[test]
    fn what_the_table_must_tell_is_not_handed_over() {
        let wakers = Wakers::default();
        let reader = wakers.register("p");

        let large = LoggedEvent { revision: 1, kind: 5, body: vec![0; FEED_EVENT_BYTES + 1] };
        assert!(wakers.copy_for_reader("p", std::slice::from_ref(&large)).is_none());
        wakers.committed("p", Some(vec![large]));
        assert!(reader.take().read_table);

        let purged =
            LoggedEvent { revision: 1, kind: baton_proto::v1::EventKind::Purged as i32, body: vec![1] };
        wakers.committed("p", Some(vec![purged]));
        assert!(reader.take().read_table);

        // A purge of the same batch reports its commit after this write: its hold, taken
        // before it joined the batch, sends the reader to the table.
        let hold = wakers.hold("p");
        let second = wakers.hold("p");
        assert!(wakers.copy_for_reader("p", &events(1..2)).is_none());
        wakers.committed("p", Some(events(1..2)));
        drop(hold);
        wakers.committed("p", Some(events(2..3)));
        let told = reader.take();
        assert!(told.read_table && told.events.is_empty());
        drop(second);
        assert!(wakers.copy_for_reader("p", &events(3..4)).is_some());

        // Once sent to the table, later events wait for that read too.
        wakers.wake("p");
        wakers.committed("p", Some(events(3..4)));
        let told = reader.take();
        assert!(told.read_table && told.events.is_empty());
        wakers.committed("p", Some(events(4..5)));
        assert_eq!(reader.take().events.len(), 1);
    }
}
