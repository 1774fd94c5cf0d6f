//! Checkpoint content: canonical bytes, compression and the integrity digest.
//!
//! The digest covers what a restore needs (session, kind, reason, state, payload) but not
//! `parent_id`, which retention may re-point. It is computed over the uncompressed bytes and
//! checked on every read, so flipped bits in storage surface as `DATA_LOSS`, not as a
//! silently wrong restore.
//!
//! A second digest, the state digest, covers the same header and the state but not the
//! payload: lists and the brief verify what they return with it without reading (or
//! decompressing) payloads, which may be megabytes each.

use prost::Message;
use sha2::{Digest, Sha256};

use baton_proto::v1::CheckpointState;

/// Content at or above this many bytes is stored zstd-compressed.
pub const COMPRESS_THRESHOLD: usize = 1024;
pub const ZSTD_LEVEL: i32 = 3;

/// How a checkpoint's bytes are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Zstd,
}

impl Compression {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Zstd => "zstd",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "none" => Some(Self::None),
            "zstd" => Some(Self::Zstd),
            _ => None,
        }
    }
}

/// The stored form of a checkpoint's content.
#[derive(Debug, Clone)]
pub struct StoredContent {
    pub state: Vec<u8>,
    pub payload: Vec<u8>,
    pub compression: Compression,
    pub size_bytes: i64,
    pub digest: String,
    pub state_digest: String,
}

/// What identifies a checkpoint's content besides state and payload.
pub struct Header<'a> {
    pub session_id: &'a str,
    pub kind: i32,
    pub reason: &'a str,
    pub payload_content_type: &'a str,
    /// The encoded blob references (empty when none; then the digest is as before blobs
    /// existed).
    pub blobs: &'a [u8],
}

#[derive(Debug, thiserror::Error)]
pub enum IntegrityError {
    #[error("stored checkpoint bytes do not decompress: {0}")]
    Decompress(std::io::Error),
    #[error("stored checkpoint digest mismatch (expected {expected}, computed {computed})")]
    Digest { expected: String, computed: String },
    #[error("stored checkpoint state does not decode: {0}")]
    Decode(prost::DecodeError),
    #[error("unknown compression {0:?}")]
    Compression(String),
}

/// sha256 over the canonical content, hex.
pub fn digest(header: &Header<'_>, state: &[u8], payload: &[u8]) -> String {
    let mut h = header_hash(b"baton-checkpoint-v1\0", header);
    h.update((state.len() as u64).to_le_bytes());
    h.update(state);
    h.update((payload.len() as u64).to_le_bytes());
    h.update(payload);
    blobs_hash(&mut h, header);
    hex::encode(h.finalize())
}

/// sha256 over the header and the state (not the payload), hex.
pub fn state_digest(header: &Header<'_>, state: &[u8]) -> String {
    let mut h = header_hash(b"baton-checkpoint-state-v1\0", header);
    h.update((state.len() as u64).to_le_bytes());
    h.update(state);
    blobs_hash(&mut h, header);
    hex::encode(h.finalize())
}

/// What the state digest of a row is set to when its full digest does not verify (when it
/// is first computed for an existing row or an imported one): no hex digest equals it, so
/// the row reads as corrupt everywhere.
pub const UNVERIFIABLE: &str = "unverifiable";

/// The state digest for stored content that has none yet: computed when the content
/// verifies against its full digest, else `UNVERIFIABLE`.
pub fn state_digest_of_stored(
    header: &Header<'_>,
    state: &[u8],
    payload: &[u8],
    compression: &str,
    digest: &str,
) -> String {
    let verified = Compression::parse(compression).and_then(|c| {
        let state = decompress(state, c).ok()?;
        let payload = decompress(payload, c).ok()?;
        (self::digest(header, &state, &payload) == digest).then_some(state)
    });
    match verified {
        Some(state) => state_digest(header, &state),
        None => UNVERIFIABLE.to_owned(),
    }
}

fn header_hash(tag: &[u8], header: &Header<'_>) -> Sha256 {
    let mut h = Sha256::new();
    h.update(tag);
    for part in
        [header.session_id.as_bytes(), header.reason.as_bytes(), header.payload_content_type.as_bytes()]
    {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part);
    }
    h.update(header.kind.to_le_bytes());
    h
}

fn blobs_hash(h: &mut Sha256, header: &Header<'_>) {
    if !header.blobs.is_empty() {
        h.update(b"blobs\0");
        h.update((header.blobs.len() as u64).to_le_bytes());
        h.update(header.blobs);
    }
}

/// Encodes, digests and (above the threshold) compresses a checkpoint's content.
pub fn encode(
    header: &Header<'_>,
    state: &CheckpointState,
    payload: &[u8],
) -> std::io::Result<StoredContent> {
    let state_bytes = state.encode_to_vec();
    let digest = digest(header, &state_bytes, payload);
    let state_digest = state_digest(header, &state_bytes);
    let size = state_bytes.len() + payload.len();
    let size_bytes = i64::try_from(size).unwrap_or(i64::MAX);
    if size >= COMPRESS_THRESHOLD {
        Ok(StoredContent {
            state: zstd::bulk::compress(&state_bytes, ZSTD_LEVEL)?,
            payload: if payload.is_empty() { Vec::new() } else { zstd::bulk::compress(payload, ZSTD_LEVEL)? },
            compression: Compression::Zstd,
            size_bytes,
            digest,
            state_digest,
        })
    } else {
        Ok(StoredContent {
            state: state_bytes,
            payload: payload.to_vec(),
            compression: Compression::None,
            size_bytes,
            digest,
            state_digest,
        })
    }
}

pub fn decompress(bytes: &[u8], compression: Compression) -> Result<Vec<u8>, IntegrityError> {
    match compression {
        Compression::None => Ok(bytes.to_vec()),
        Compression::Zstd if bytes.is_empty() => Ok(Vec::new()),
        Compression::Zstd => zstd::stream::decode_all(bytes).map_err(IntegrityError::Decompress),
    }
}

/// Decompresses and verifies stored content; returns the state and the payload.
pub fn decode(
    header: &Header<'_>,
    stored_state: &[u8],
    stored_payload: &[u8],
    compression: &str,
    expected_digest: &str,
) -> Result<(CheckpointState, Vec<u8>), IntegrityError> {
    let compression =
        Compression::parse(compression).ok_or_else(|| IntegrityError::Compression(compression.to_owned()))?;
    let state = decompress(stored_state, compression)?;
    let payload = decompress(stored_payload, compression)?;
    let computed = digest(header, &state, &payload);
    if computed != expected_digest {
        return Err(IntegrityError::Digest { expected: expected_digest.to_owned(), computed });
    }
    let state = CheckpointState::decode(state.as_slice()).map_err(IntegrityError::Decode)?;
    Ok((state, payload))
}

/// Decompresses and decodes a stored state without verifying it: for content this server
/// has just encoded itself, in the same write (the search index reads it so).
pub fn decode_state_unverified(
    stored_state: &[u8],
    compression: &str,
) -> Result<CheckpointState, IntegrityError> {
    let compression =
        Compression::parse(compression).ok_or_else(|| IntegrityError::Compression(compression.to_owned()))?;
    let state = decompress(stored_state, compression)?;
    CheckpointState::decode(state.as_slice()).map_err(IntegrityError::Decode)
}

/// Decompresses and verifies the stored state alone, against the state digest.
pub fn decode_state(
    header: &Header<'_>,
    stored_state: &[u8],
    compression: &str,
    expected_state_digest: &str,
) -> Result<CheckpointState, IntegrityError> {
    let compression =
        Compression::parse(compression).ok_or_else(|| IntegrityError::Compression(compression.to_owned()))?;
    let state = decompress(stored_state, compression)?;
    let computed = state_digest(header, &state);
    if computed != expected_state_digest {
        return Err(IntegrityError::Digest { expected: expected_state_digest.to_owned(), computed });
    }
    CheckpointState::decode(state.as_slice()).map_err(IntegrityError::Decode)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> Header<'static> {
        Header { session_id: "s", kind: 1, reason: "r", payload_content_type: "application/json", blobs: b"" }
    }

    #[test]
    fn round_trip_small_and_large() {
        for n in [1usize, 5000] {
            let state = CheckpointState { phase: "x".repeat(n), ..Default::default() };
            let stored = encode(&header(), &state, b"payload").unwrap();
            assert_eq!(stored.compression == Compression::Zstd, n > 1000);
            let (back, payload) = decode(
                &header(),
                &stored.state,
                &stored.payload,
                stored.compression.as_str(),
                &stored.digest,
            )
            .unwrap();
            assert_eq!(back, state);
            assert_eq!(payload, b"payload");
        }
    }

    #[test]
    fn flipped_bytes_are_detected() {
        let state = CheckpointState { phase: "plan".into(), ..Default::default() };
        let mut stored = encode(&header(), &state, b"").unwrap();
        let last = stored.state.len() - 1;
        stored.state[last] ^= 0xff;
        assert!(decode(&header(), &stored.state, &stored.payload, "none", &stored.digest).is_err());
    }

    #[test]
    fn the_state_digest_verifies_the_state_without_the_payload() {
        let state = CheckpointState { phase: "p".repeat(3000), ..Default::default() };
        let stored = encode(&header(), &state, &vec![7u8; 5000]).unwrap();
        let c = stored.compression.as_str();
        assert_eq!(decode_state(&header(), &stored.state, c, &stored.state_digest).unwrap(), state);
        // The same for content that predates the column: computed once it verifies.
        let backfilled = state_digest_of_stored(&header(), &stored.state, &stored.payload, c, &stored.digest);
        assert_eq!(backfilled, stored.state_digest);
        let mut flipped = stored.state.clone();
        flipped[10] ^= 1;
        assert!(decode_state(&header(), &flipped, c, &stored.state_digest).is_err());
        let other = Header { reason: "other", ..header() };
        assert!(decode_state(&other, &stored.state, c, &stored.state_digest).is_err());
        // A row whose payload no longer verifies gets a state digest nothing matches.
        let mut payload = stored.payload.clone();
        payload[3] ^= 1;
        let unverifiable = state_digest_of_stored(&header(), &stored.state, &payload, c, &stored.digest);
        assert_eq!(unverifiable, UNVERIFIABLE);
        assert!(decode_state(&header(), &stored.state, c, &unverifiable).is_err());
    }

    #[test]
    fn digest_ignores_nothing_it_covers() {
        let a = digest(&header(), b"s", b"p");
        let other = Header { reason: "other", ..header() };
        assert_ne!(a, digest(&other, b"s", b"p"));
        assert_ne!(a, digest(&header(), b"s", b"q"));
        assert_ne!(a, digest(&Header { blobs: b"x", ..header() }, b"s", b"p"));
    }
}
