//! Wake-ups for project readers: a commit in this process, or a Postgres NOTIFY from
//! another instance, wakes the reader of that project. A wake-up is only a hint: readers
//! read the event table when a wake-up does not say everything that changed, and poll it
//! anyway, so a lost wake-up delays but never loses an event.
//!
//! A performance device, for `baton-bench`'s row "vs etcd: watch latency": a commit in
//! this process hands its reader the events it wrote (`Wakers::committed`), and the reader
//! sends them on without reading them back from the table when they follow, gapless, what
//! it sent last (revisions are gapless and a project's commits are ordered by its lock);
//! anything else — a gap, another instance's commit, a poll — reads the table as before.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;

use crate::store::model::LoggedEvent;

/// Events a reader's inbox holds before it gives up on them and reads the table.
const INBOX_EVENTS: usize = 1024;

#[derive(Clone, Default)]
pub struct Wakers {
    inner: Arc<Mutex<HashMap<String, Arc<Reader>>>>,
}

/// A project's reader, as the writers see it: its wake-up and what they told it.
#[derive(Default)]
pub struct Reader {
    wake: Notify,
    inbox: Mutex<Inbox>,
}

/// What the reader was told since it last looked.
#[derive(Default)]
pub struct Inbox {
    /// Events committed by this process, in the order their commits reported them.
    pub events: Vec<LoggedEvent>,
    /// The newest revision another instance announced (0: none).
    pub announced: i64,
    /// Something changed that only the event table can tell.
    pub read_table: bool,
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
    pub fn take(&self) -> Inbox {
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

    /// Whether a reader of `project` runs: a commit then keeps a copy of its events for it.
    pub fn watched(&self, project: &str) -> bool {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner).contains_key(project)
    }

    /// After a commit in this process: hands the reader of `project` the events it wrote
    /// (`None`: no copy was kept, as nobody watched when the write began), or wakes it to
    /// read the table.
    pub fn committed(&self, project: &str, events: Option<Vec<LoggedEvent>>) {
        let Some(reader) = self.reader(project) else { return };
        reader.tell(|inbox| match events {
            Some(events) if inbox.events.len() + events.len() <= INBOX_EVENTS => inbox.events.extend(events),
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
        let mut map = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        map.entry(project.to_owned()).or_default().clone()
    }

    pub fn unregister(&self, project: &str) {
        let mut map = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        map.remove(project);
    }

    fn reader(&self, project: &str) -> Option<Arc<Reader>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner).get(project).cloned()
    }
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
        assert!(!wakers.watched("p"));
        wakers.committed("p", Some(events(1..3)));
        let reader = wakers.register("p");
        assert!(wakers.watched("p"));
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
}
