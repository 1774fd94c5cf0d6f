//! Encoded protobuf records as stored: zstd-compressed when that makes them smaller (a
//! checkpoint's blob list, an event's body). Hex digests and uuids make up most of both, so
//! they compress to about three quarters or less.
//!
//! Whatever reads a stored record unpacks it first; records stored before this existed are
//! read as they are. The two forms cannot be confused: an encoded record starts with a
//! field tag, and none of these messages has a field 5 of wire type 0 (0x28, the first byte
//! of a zstd frame).

use std::borrow::Cow;

use super::checkpoint::{Compression, IntegrityError, ZSTD_LEVEL, decompress};

/// The most a stored record may unpack to: far above any record a request can make.
pub const MAX_RECORD_BYTES: usize = 64 << 20;
/// Records shorter than this are stored as they are.
const PACK_FROM: usize = 128;
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// What to store for an encoded record.
pub fn pack(plain: Vec<u8>) -> Vec<u8> {
    if plain.len() >= PACK_FROM
        && let Ok(packed) = zstd::bulk::compress(&plain, ZSTD_LEVEL)
        && packed.len() < plain.len()
    {
        return packed;
    }
    plain
}

/// The encoded record of a stored one (either form), at most `limit` bytes.
pub fn unpack(stored: &[u8], limit: usize) -> Result<Cow<'_, [u8]>, IntegrityError> {
    if stored.starts_with(&ZSTD_MAGIC) {
        decompress(stored, Compression::Zstd, limit).map(Cow::Owned)
    } else {
        Ok(Cow::Borrowed(stored))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_records_are_stored_smaller_short_ones_as_they_are() {
        let plain = [b"\x0a\x40".as_slice(), "0123456789abcdef".repeat(16).as_bytes()].concat();
        let stored = pack(plain.clone());
        assert!(stored.len() < plain.len() && stored.starts_with(&ZSTD_MAGIC));
        assert_eq!(unpack(&stored, 1 << 20).unwrap().as_ref(), plain.as_slice());
        let short = b"\x0a\x03abc".to_vec();
        assert_eq!(pack(short.clone()), short);
        assert!(matches!(unpack(&short, 1 << 20).unwrap(), Cow::Borrowed(_)));
        assert!(pack(Vec::new()).is_empty());
    }

    #[test]
    fn damaged_or_oversized_records_are_errors() {
        let stored = pack("0123456789abcdef".repeat(64).into_bytes());
        assert!(unpack(&stored, 100).is_err(), "over the limit");
        assert!(unpack(&stored[..stored.len() / 2], 1 << 20).is_err(), "cut short");
    }
}
