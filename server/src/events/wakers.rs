//! Wake-ups for project readers: a commit in this process, or a Postgres NOTIFY from
//! another instance, wakes the reader of that project. A wake-up is only a hint: readers
//! always read the event table, and poll it anyway, so a lost wake-up delays but never
//! loses an event.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;

#[derive(Clone, Default)]
pub struct Wakers {
    inner: Arc<Mutex<HashMap<String, Arc<Notify>>>>,
}

impl Wakers {
    /// Wakes the reader of `project`, if one runs. `notify_one` keeps a permit when the
    /// reader is busy, so a wake-up between its read and its wait is not lost.
    pub fn wake(&self, project: &str) {
        let map = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(notify) = map.get(project) {
            notify.notify_one();
        }
    }

    /// The wake-up of a project's reader (created on first use).
    pub fn register(&self, project: &str) -> Arc<Notify> {
        let mut map = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        map.entry(project.to_owned()).or_default().clone()
    }

    pub fn unregister(&self, project: &str) {
        let mut map = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        map.remove(project);
    }
}
