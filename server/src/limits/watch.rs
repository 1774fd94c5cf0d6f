//! A cap on concurrent watch streams per token, so one runaway orchestrator cannot hold
//! every stream the server can afford while other tokens keep theirs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::error::Error;

#[derive(Debug)]
pub struct WatchSlots {
    max: usize,
    open: Mutex<HashMap<String, usize>>,
}

/// One open watch stream; frees its slot when dropped (the stream ended or the client left).
#[derive(Debug)]
pub struct Slot {
    slots: Arc<WatchSlots>,
    key: String,
}

impl WatchSlots {
    pub fn new(max: usize) -> Arc<Self> {
        Arc::new(Self { max, open: Mutex::default() })
    }

    /// Takes a slot for `key` (a token's name; the peer address while the hub is open).
    pub fn acquire(self: &Arc<Self>, key: &str, who: &str) -> Result<Slot, Error> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let count = open.entry(key.to_owned()).or_default();
        if *count >= self.max {
            return Err(Error::ResourceExhausted(format!(
                "{who} already has {count} watch streams open, the limit per token (--max-watches-per-token \
                 {}); close one, or watch several projects in one stream",
                self.max
            )));
        }
        *count += 1;
        crate::metrics::set_active_watchers(open.values().sum());
        Ok(Slot { slots: self.clone(), key: key.to_owned() })
    }

    /// Streams open for `key` now.
    pub fn open(&self, key: &str) -> usize {
        self.open.lock().unwrap_or_else(PoisonError::into_inner).get(key).copied().unwrap_or(0)
    }

    /// Streams open in total (for metrics).
    pub fn total(&self) -> usize {
        self.open.lock().unwrap_or_else(PoisonError::into_inner).values().sum()
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.slots.open.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = open.get_mut(&self.key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.remove(&self.key);
            }
        }
        crate::metrics::set_active_watchers(open.values().sum());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_key_and_freed_on_drop() {
        let slots = WatchSlots::new(2);
        let a1 = slots.acquire("a", "token \"a\"").unwrap();
        let _a2 = slots.acquire("a", "token \"a\"").unwrap();
        let err = slots.acquire("a", "token \"a\"").unwrap_err();
        assert!(err.to_string().contains("--max-watches-per-token 2"), "{err}");
        // Another token is not affected.
        let _b = slots.acquire("b", "token \"b\"").unwrap();
        assert_eq!((slots.open("a"), slots.total()), (2, 3));
        drop(a1);
        assert!(slots.acquire("a", "token \"a\"").is_ok());
    }
}
