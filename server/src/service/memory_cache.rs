//! The brief's memory section (a project's newest live entries, project-wide and of one
//! branch), kept while the project's memory is unchanged.
//!
//! Every brief needs it, and it is the brief's biggest read (up to 500 rows). Entries are
//! keyed by the project's `memory_revision`, which each write that may touch memory sets to
//! its own revision with its changes (`Lock::memory`), and which a brief reads from the
//! database before anything else. So a cached section is used only while no write, from this
//! server or another instance, has changed the project's memory since it was read. Serves
//! `baton-bench`'s "resume p99" and `hook-bench`'s SessionStart.

use std::sync::{Arc, Mutex, PoisonError};

use baton_proto::v1::MemoryEntry;
use hashlink::LruCache;

/// (project, branch) pairs kept, least recently used dropped first.
const CAPACITY: usize = 128;
/// And the encoded bytes of their entries, at most: sections are up to 500 entries of up to
/// 32 KiB each, so a count alone would let what others stored decide the server's memory.
const BYTES: usize = 32 * 1024 * 1024;

/// (project, branch).
type Key = (String, String);
/// (the project's memory revision when read, the section, its size in bytes).
type Kept = (i64, Arc<Vec<MemoryEntry>>, usize);

#[derive(Clone)]
pub struct MemoryCache(Arc<Mutex<Lru>>);

struct Lru {
    sections: LruCache<Key, Kept>,
    bytes: usize,
    max_bytes: usize,
}

impl Default for MemoryCache {
    fn default() -> Self {
        Self::with_bytes(BYTES)
    }
}

impl MemoryCache {
    fn with_bytes(max_bytes: usize) -> Self {
        Self(Arc::new(Mutex::new(Lru { sections: LruCache::new_unbounded(), bytes: 0, max_bytes })))
    }

    /// The section read when the project's memory was at `memory_revision`, if kept.
    pub fn get(&self, project: &str, branch: &str, memory_revision: i64) -> Option<Arc<Vec<MemoryEntry>>> {
        let mut cache = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match cache.sections.get(&(project.to_owned(), branch.to_owned())) {
            Some((revision, entries, _)) if *revision == memory_revision => Some(entries.clone()),
            _ => None,
        }
    }

    /// Keeps a section read after the project's memory was seen at `memory_revision` (rows
    /// read later may be newer than that, never older: a later change only causes a miss).
    pub fn put(&self, project: &str, branch: &str, memory_revision: i64, entries: Arc<Vec<MemoryEntry>>) {
        let size =
            project.len() + branch.len() + entries.iter().map(prost::Message::encoded_len).sum::<usize>();
        let mut cache = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (project.to_owned(), branch.to_owned());
        // Concurrent briefs may fill it out of order; the newer memory revision stays.
        if cache.sections.peek(&key).is_some_and(|(kept, ..)| *kept > memory_revision) {
            return;
        }
        if let Some((.., replaced)) = cache.sections.remove(&key) {
            cache.bytes -= replaced;
        }
        if size > cache.max_bytes {
            return;
        }
        cache.sections.insert(key, (memory_revision, entries, size));
        cache.bytes += size;
        while cache.bytes > cache.max_bytes || cache.sections.len() > CAPACITY {
            match cache.sections.remove_lru() {
                Some((_, (.., dropped))) => cache.bytes -= dropped,
                None => break,
            }
        }
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
    fn bounded_in_bytes() {
        let big = |n| Arc::new(vec![MemoryEntry { content: "x".repeat(n), ..Default::default() }; 10]);
        let cache = MemoryCache::with_bytes(100_000);
        for i in 0..5 {
            cache.put(&format!("p{i}"), "", 1, big(3_000));
        }
        assert!(
            cache.get("p0", "", 1).is_none() && cache.get("p1", "", 1).is_none(),
            "over the bytes: oldest dropped"
        );
        assert!(cache.get("p4", "", 1).is_some() && cache.get("p3", "", 1).is_some());
        assert!(cache.0.lock().unwrap().bytes <= 100_000);
        // A section larger than the whole cache is not kept (and drops nothing).
        cache.put("huge", "", 1, big(20_000));
        assert!(cache.get("huge", "", 1).is_none());
        assert!(cache.get("p4", "", 1).is_some());
        // Replacing a section counts its new size only.
        cache.put("p4", "", 2, entries("small"));
        let total: usize = cache.0.lock().unwrap().sections.iter().map(|(_, (.., n))| *n).sum();
        assert_eq!(cache.0.lock().unwrap().bytes, total);
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
