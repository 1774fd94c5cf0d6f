//! Caps on what one token may have running at once (watch streams, searches), so one
//! runaway orchestrator cannot hold all the server can afford while other tokens wait.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::error::Error;

/// What is capped, as the refusal names it.
#[derive(Debug)]
pub struct Kind {
    /// What a slot holds, plural ("watch streams open").
    pub what: &'static str,
    /// The flag that sets the cap.
    pub flag: &'static str,
    /// What to do instead.
    pub advice: &'static str,
    /// Told the total held after each change (a metric), if anything is.
    pub report: Option<fn(usize)>,
}

pub const WATCHES: Kind = Kind {
    what: "watch streams open",
    flag: "--max-watches-per-token",
    advice: "close one, or watch several projects in one stream",
    report: Some(crate::metrics::set_active_watchers),
};

pub const SEARCHES: Kind = Kind {
    what: "searches running",
    flag: "--max-searches-per-token",
    advice: "wait for one to answer",
    report: None,
};

#[derive(Debug)]
pub struct Slots {
    max: usize,
    kind: &'static Kind,
    open: Mutex<HashMap<String, usize>>,
}

/// One slot held (a stream open, a search running); freed when dropped (it ended, or the
/// client left).
#[derive(Debug)]
pub struct Slot {
    slots: Arc<Slots>,
    key: String,
}

impl Slots {
    pub fn new(max: usize, kind: &'static Kind) -> Arc<Self> {
        Arc::new(Self { max, kind, open: Mutex::default() })
    }

    /// Takes a slot for `key` (a token's name; the peer address while the hub is open).
    pub fn acquire(self: &Arc<Self>, key: &str, who: &str) -> Result<Slot, Error> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let count = open.entry(key.to_owned()).or_default();
        if *count >= self.max {
            let Kind { what, flag, advice, .. } = self.kind;
            return Err(Error::ResourceExhausted(format!(
                "{who} already has {count} {what}, the limit per token ({flag} {}); {advice}",
                self.max
            )));
        }
        *count += 1;
        if let Some(report) = self.kind.report {
            report(open.values().sum());
        }
        Ok(Slot { slots: self.clone(), key: key.to_owned() })
    }

    /// Slots held for `key` now.
    pub fn open(&self, key: &str) -> usize {
        self.open.lock().unwrap_or_else(PoisonError::into_inner).get(key).copied().unwrap_or(0)
    }

    /// Slots held in total (for metrics).
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
        if let Some(report) = self.slots.kind.report {
            report(open.values().sum());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_key_and_freed_on_drop() {
        let slots = Slots::new(2, &WATCHES);
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
