//! The brief's memory section (a project's newest live entries, project-wide and of one
//! branch), kept while the project's memory is unchanged.
//!
//! Every brief needs it, and it is the brief's biggest read (up to 500 rows). Entries are
//! keyed by the project's `memory_revision`, which each write that touches memory sets to
//! its own revision in the same statement that locks the project (see `Write`), and which a
//! brief reads from the database before anything else. So a cached section is used only while
//! no write, from this server or another instance, has changed the project's memory since it
//! was read.

use std::sync::{Arc, Mutex, PoisonError};

use baton_proto::v1::MemoryEntry;
use hashlink::LruCache;

/// (project, branch) pairs kept: at most 500 entries each, least recently used dropped first.
const CAPACITY: usize = 128;

/// (project, branch).
type Key = (String, String);
/// (the project's memory revision when read, the section).
type Kept = (i64, Arc<Vec<MemoryEntry>>);

#[derive(Clone)]
pub struct MemoryCache(Arc<Mutex<LruCache<Key, Kept>>>);

impl Default for MemoryCache {
    fn default() -> Self {
        Self(Arc::new(Mutex::new(LruCache::new(CAPACITY))))
    }
}

impl MemoryCache {
    /// The section read when the project's memory was at `memory_revision`, if kept.
    pub fn get(&self, project: &str, branch: &str, memory_revision: i64) -> Option<Arc<Vec<MemoryEntry>>> {
        let mut cache = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match cache.get(&(project.to_owned(), branch.to_owned())) {
            Some((revision, entries)) if *revision == memory_revision => Some(entries.clone()),
            _ => None,
        }
    }

    /// Keeps a section read after the project's memory was seen at `memory_revision` (rows
    /// read later may be newer than that, never older: a later change only causes a miss).
    pub fn put(&self, project: &str, branch: &str, memory_revision: i64, entries: Arc<Vec<MemoryEntry>>) {
        let mut cache = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (project.to_owned(), branch.to_owned());
        // Concurrent briefs may fill it out of order; the newer memory revision stays.
        if cache.peek(&key).is_some_and(|(kept, _)| *kept > memory_revision) {
            return;
        }
        cache.insert(key, (memory_revision, entries));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(content: &str) -> Arc<Vec<MemoryEntry>> {
        Arc::new(vec![MemoryEntry { content: content.into(), ..Default::default() }])
    }

    #[test]
    fn used_only_at_the_same_memory_revision() {
        let cache = MemoryCache::default();
        cache.put("p", "main", 7, entries("a"));
        assert_eq!(cache.get("p", "main", 7).unwrap()[0].content, "a");
        assert!(cache.get("p", "main", 8).is_none(), "memory changed since: read again");
        assert!(cache.get("p", "dev", 7).is_none(), "another branch has its own section");
        assert!(cache.get("q", "main", 7).is_none());
    }

    #[test]
    fn an_older_read_does_not_replace_a_newer_one() {
        let cache = MemoryCache::default();
        cache.put("p", "", 9, entries("new"));
        cache.put("p", "", 8, entries("old"));
        assert_eq!(cache.get("p", "", 9).unwrap()[0].content, "new");
        cache.put("p", "", 10, entries("newer"));
        assert_eq!(cache.get("p", "", 10).unwrap()[0].content, "newer");
    }

    #[test]
    fn bounded() {
        let cache = MemoryCache::default();
        for i in 0..CAPACITY + 10 {
            cache.put(&format!("p{i}"), "", 1, entries("x"));
        }
        assert!(cache.get("p0", "", 1).is_none(), "the least recently used went first");
        assert!(cache.get(&format!("p{}", CAPACITY + 9), "", 1).is_some());
    }
}
