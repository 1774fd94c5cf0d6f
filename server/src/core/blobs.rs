//! A checkpoint's blob list (an encoded `BlobRefs`) as the `blobs` column holds it: packed
//! (`core::packed`). The digests and every rule see the plain encoding.

use std::borrow::Cow;

use prost::Message;

use baton_proto::v1::{BlobRef, BlobRefs};

use super::checkpoint::IntegrityError;
use super::packed;

/// The plain encoding of `blobs` (empty when there are none), for digests.
pub fn encode(blobs: &[BlobRef]) -> Vec<u8> {
    if blobs.is_empty() { Vec::new() } else { BlobRefs { blobs: blobs.to_vec() }.encode_to_vec() }
}

/// What to store for a plain encoding.
pub fn pack(plain: Vec<u8>) -> Vec<u8> {
    packed::pack(plain)
}

/// The plain encoding of a stored list (either form).
pub fn unpack(stored: &[u8]) -> Result<Cow<'_, [u8]>, IntegrityError> {
    packed::unpack(stored, packed::MAX_RECORD_BYTES)
}
/// The plain encoding a stored row's digest is checked over: a list that does not unpack
/// is taken as it is stored, so the digest fails.
pub fn for_digest(stored: &[u8]) -> Cow<'_, [u8]> {
    unpack(stored).unwrap_or(Cow::Borrowed(stored))
}

/// The blobs of a stored list.
pub fn decode(stored: &[u8]) -> Result<Vec<BlobRef>, IntegrityError> {
    let plain = unpack(stored)?;
    BlobRefs::decode(plain.as_ref()).map(|r| r.blobs).map_err(IntegrityError::Decode)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refs(chunks: usize) -> Vec<BlobRef> {
        vec![BlobRef {
            role: "langgraph-channel".into(),
            digest: "ab".repeat(32),
            size_bytes: 1000,
            chunks: (0..chunks).map(|i| format!("{i:064x}")).collect(),
            ..Default::default()
        }]
    }

    #[test]
    fn long_lists_are_stored_smaller_and_read_back_the_same() {
        let plain = encode(&refs(20));
        let stored = pack(plain.clone());
        assert!(stored.len() < plain.len() && stored[0] == 0x28);
        assert_eq!(unpack(&stored).unwrap().as_ref(), plain.as_slice());
        assert_eq!(decode(&stored).unwrap(), refs(20));
    }

    #[test]
    fn short_lists_and_lists_stored_before_stay_as_they_are() {
        let short = vec![BlobRef { role: "r".into(), digest: "ab".into(), ..Default::default() }];
        let plain = encode(&short);
        assert_eq!(pack(plain.clone()), plain);
        assert_eq!(plain[0], 0x0a);
        assert!(matches!(unpack(&plain).unwrap(), Cow::Borrowed(_)));
        assert_eq!(decode(&plain).unwrap(), short);
        // A long list stored before lists were packed reads as it is.
        assert_eq!(decode(&encode(&refs(20))).unwrap(), refs(20));
        assert!(encode(&[]).is_empty() && pack(Vec::new()).is_empty() && decode(&[]).unwrap().is_empty());
    }

    #[test]
    fn damaged_lists_are_errors() {
        let mut stored = pack(encode(&refs(20)));
        stored.truncate(stored.len() / 2);
        assert!(decode(&stored).is_err());
        assert!(decode(&[0x0a, 0xff]).is_err());
    }
}
