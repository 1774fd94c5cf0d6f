//! Pages of list replies: a count and a byte budget, and the opaque tokens that continue
//! them. A reply's size must not grow with what others stored: every list stops at
//! whichever of its page size or `REPLY_BUDGET` comes first.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::core::validate::{Invalid, invalid};

/// The encoded bytes of the items of one reply, at most (one item larger than this comes
/// alone). Under gRPC's usual 4 MiB receive limit, with room for the rest of the reply.
pub const REPLY_BUDGET: usize = 3 * 1024 * 1024;

/// What one page may still take.
#[derive(Debug)]
pub struct Budget {
    items_left: usize,
    bytes_left: usize,
    taken: usize,
}

impl Budget {
    pub fn new(page_size: i64) -> Self {
        Self::with_bytes(page_size, REPLY_BUDGET)
    }

    pub fn with_bytes(page_size: i64, bytes: usize) -> Self {
        Self { items_left: usize::try_from(page_size).unwrap_or(0).max(1), bytes_left: bytes, taken: 0 }
    }

    /// Whether an item of `bytes` fits; takes it if so. The first item always fits (a list
    /// must make progress), so a page is never empty while items remain.
    pub fn take(&mut self, bytes: usize) -> bool {
        if self.items_left == 0 || (self.taken > 0 && bytes > self.bytes_left) {
            return false;
        }
        self.items_left -= 1;
        self.bytes_left = self.bytes_left.saturating_sub(bytes);
        self.taken += 1;
        true
    }

    pub fn taken(&self) -> usize {
        self.taken
    }
}

/// A page token: the position after the last item of the page, opaque to clients.
pub fn token<T: Serialize>(position: &T) -> String {
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(position).unwrap_or_default())
}

/// The position a page token holds; `INVALID_ARGUMENT` for anything this list did not give.
pub fn position<T: DeserializeOwned>(field: &str, token: &str) -> Result<T, Invalid> {
    URL_SAFE_NO_PAD
        .decode(token.as_bytes())
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .ok_or_else(|| invalid(field, "is not a token this list gave: pass a reply's next_page_token as it is, or none for the first page"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_stops_at_its_count_or_its_bytes_whichever_first() {
        let mut b = Budget::with_bytes(3, 100);
        assert!(b.take(10) && b.take(10) && b.take(10));
        assert!(!b.take(1));
        let mut b = Budget::with_bytes(10, 100);
        assert!(b.take(60));
        assert!(!b.take(41));
        assert!(b.take(40));
        assert_eq!(b.taken(), 2);
    }

    #[test]
    fn the_first_item_always_fits() {
        let mut b = Budget::with_bytes(10, 100);
        assert!(b.take(1_000));
        assert!(!b.take(1));
    }

    #[test]
    fn tokens_round_trip_and_strangers_are_refused() {
        let t = token(&("goal", 7i64));
        assert_eq!(position::<(String, i64)>("page_token", &t).unwrap(), ("goal".to_owned(), 7));
        for bad in ["", "!!", "bm90IGpzb24", &token(&"a string")] {
            assert!(position::<(String, i64)>("page_token", bad).is_err(), "{bad}");
        }
    }
}
