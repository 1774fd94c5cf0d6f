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
//!
//! Decompression never produces more than the checkpoint's recorded size (state plus
//! payload, as encoded): a few hundred stored bytes can claim gigabytes, and an imported
//! row is no more trusted than a request.

use std::borrow::Cow;

use prost::Message;
use sha2::{Digest, Sha256};

use baton_proto::v1::CheckpointState;

/// Content at or above this many bytes is stored zstd-compressed, when that makes it smaller.
pub const COMPRESS_THRESHOLD: usize = 256;
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
    /// The encoded blob references, plain (`core::blobs::unpack` a stored list; empty when
    /// none: then the digest is as before blobs existed).
    pub blobs: Cow<'a, [u8]>,
    /// A thread's checkpoint's key and metadata (`None` for other checkpoints; then the
    /// digest is as before threads existed).
    pub thread: Option<ThreadPart<'a>>,
}

/// What a thread's checkpoint adds to the digested header: the orchestrator's key for it and
/// its metadata document (canonical JSON), whose "run_id" lists are read by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadPart<'a> {
    pub key: &'a str,
    pub metadata: &'a str,
}

impl<'a> ThreadPart<'a> {
    /// The part of a stored row: a row with a key is a thread's.
    pub fn of(key: Option<&'a str>, metadata: Option<&'a str>) -> Option<Self> {
        key.map(|key| Self { key, metadata: metadata.unwrap_or_default() })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum IntegrityError {
    #[error("stored checkpoint bytes do not decompress: {0}")]
    Decompress(std::io::Error),
    #[error("stored checkpoint bytes decompress to more than its recorded size of {0} bytes")]
    TooLarge(usize),
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
pub fn state_digest_of_stored(header: &Header<'_>, stored: &Stored<'_>, digest: &str) -> String {
    let verified = Compression::parse(stored.compression).and_then(|c| {
        let (state, payload) = unpack(stored, c).ok()?;
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
        h.update(&header.blobs);
    }
    if let Some(thread) = header.thread {
        h.update(b"thread\0");
        for part in [thread.key.as_bytes(), thread.metadata.as_bytes()] {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part);
        }
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
        let state = zstd::bulk::compress(&state_bytes, ZSTD_LEVEL)?;
        let packed = if payload.is_empty() { Vec::new() } else { zstd::bulk::compress(payload, ZSTD_LEVEL)? };
        if state.len() + packed.len() < size {
            return Ok(StoredContent {
                state,
                payload: packed,
                compression: Compression::Zstd,
                size_bytes,
                digest,
                state_digest,
            });
        }
    }
    Ok(StoredContent {
        state: state_bytes,
        payload: payload.to_vec(),
        compression: Compression::None,
        size_bytes,
        digest,
        state_digest,
    })
}

/// A checkpoint's content as stored: its bytes, how they are compressed, and the size
/// (state plus payload, uncompressed) it was stored with.
#[derive(Clone, Copy)]
pub struct Stored<'a> {
    pub state: &'a [u8],
    pub payload: &'a [u8],
    pub compression: &'a str,
    pub size_bytes: i64,
}

impl Stored<'_> {
    fn size(&self) -> usize {
        usize::try_from(self.size_bytes).unwrap_or(0)
    }

    fn compression(&self) -> Result<Compression, IntegrityError> {
        Compression::parse(self.compression)
            .ok_or_else(|| IntegrityError::Compression(self.compression.to_owned()))
    }
}

/// The bytes, decompressed into at most `limit` bytes: more is an error, found before
/// anything is decompressed when the frame says its size (as the frames this server writes
/// do: then exactly that much is allocated), else once `limit + 1` bytes are out.
pub fn decompress(bytes: &[u8], compression: Compression, limit: usize) -> Result<Vec<u8>, IntegrityError> {
    let out = match compression {
        Compression::None => bytes.to_vec(),
        Compression::Zstd if bytes.is_empty() => Vec::new(),
        Compression::Zstd => match zstd::zstd_safe::get_frame_content_size(bytes) {
            Ok(Some(size)) if size > u64::try_from(limit).unwrap_or(u64::MAX) => {
                return Err(IntegrityError::TooLarge(limit));
            }
            // A frame that lies about its size, or more than one frame: read as a stream.
            Ok(Some(size)) => zstd::bulk::decompress(bytes, usize::try_from(size).unwrap_or(limit))
                .or_else(|_| stream(bytes, limit))?,
            _ => stream(bytes, limit)?,
        },
    };
    if out.len() > limit {
        return Err(IntegrityError::TooLarge(limit));
    }
    Ok(out)
}

/// Decompresses a zstd stream, stopping after `limit + 1` bytes.
fn stream(bytes: &[u8], limit: usize) -> Result<Vec<u8>, IntegrityError> {
    use std::io::Read as _;
    let decoder = zstd::stream::read::Decoder::with_buffer(bytes).map_err(IntegrityError::Decompress)?;
    let mut out = Vec::new();
    decoder
        .take(u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1))
        .read_to_end(&mut out)
        .map_err(IntegrityError::Decompress)?;
    Ok(out)
}

/// The state and the payload, together at most the recorded size.
pub fn unpack(stored: &Stored<'_>, compression: Compression) -> Result<(Vec<u8>, Vec<u8>), IntegrityError> {
    let state = decompress(stored.state, compression, stored.size())?;
    let payload = decompress(stored.payload, compression, stored.size() - state.len())?;
    Ok((state, payload))
}

/// Decompresses and verifies stored content; returns the state's encoded bytes and the
/// payload.
pub fn verified_bytes(
    header: &Header<'_>,
    stored: &Stored<'_>,
    expected_digest: &str,
) -> Result<(Vec<u8>, Vec<u8>), IntegrityError> {
    let (state, payload) = unpack(stored, stored.compression()?)?;
    let computed = digest(header, &state, &payload);
    if computed != expected_digest {
        return Err(IntegrityError::Digest { expected: expected_digest.to_owned(), computed });
    }
    Ok((state, payload))
}

/// Decompresses and verifies stored content; returns the state and the payload.
pub fn decode(
    header: &Header<'_>,
    stored: &Stored<'_>,
    expected_digest: &str,
) -> Result<(CheckpointState, Vec<u8>), IntegrityError> {
    let (state, payload) = verified_bytes(header, stored, expected_digest)?;
    let state = CheckpointState::decode(state.as_slice()).map_err(IntegrityError::Decode)?;
    Ok((state, payload))
}

/// Decompresses and decodes a stored state without verifying it: for content this server
/// has just encoded itself, in the same write (the search index reads it so).
pub fn decode_state_unverified(stored: &Stored<'_>) -> Result<CheckpointState, IntegrityError> {
    let state = decompress(stored.state, stored.compression()?, stored.size())?;
    CheckpointState::decode(state.as_slice()).map_err(IntegrityError::Decode)
}

/// Decompresses and verifies the stored state alone, against the state digest.
pub fn decode_state(
    header: &Header<'_>,
    stored: &Stored<'_>,
    expected_state_digest: &str,
) -> Result<CheckpointState, IntegrityError> {
    let state = decompress(stored.state, stored.compression()?, stored.size())?;
    let computed = state_digest(header, &state);
    if computed != expected_state_digest {
        return Err(IntegrityError::Digest { expected: expected_state_digest.to_owned(), computed });
    }
    CheckpointState::decode(state.as_slice()).map_err(IntegrityError::Decode)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(stored: &StoredContent) -> Stored<'_> {
        Stored {
            state: &stored.state,
            payload: &stored.payload,
            compression: stored.compression.as_str(),
            size_bytes: stored.size_bytes,
        }
    }

    fn header() -> Header<'static> {
        Header {
            session_id: "s",
            kind: 1,
            reason: "r",
            payload_content_type: "application/json",
            blobs: Cow::Borrowed(b""),
            thread: None,
        }
    }

    #[test]
    fn round_trip_small_and_large() {
        // Below the threshold, or where zstd does not make it smaller (random bytes): as is.
        let noise: Vec<u8> = (0u8..20).flat_map(|i| Sha256::digest([i]).to_vec()).collect();
        for (n, payload, compressed) in
            [(1, &b"payload"[..], false), (300, b"payload", true), (1, noise.as_slice(), false)]
        {
            let state = CheckpointState { phase: "x".repeat(n), ..Default::default() };
            let stored = encode(&header(), &state, payload).unwrap();
            assert_eq!(stored.compression == Compression::Zstd, compressed);
            let (back, read) = decode(&header(), &view(&stored), &stored.digest).unwrap();
            assert_eq!(back, state);
            assert_eq!(read, payload);
        }
    }

    #[test]
    fn flipped_bytes_are_detected() {
        let state = CheckpointState { phase: "plan".into(), ..Default::default() };
        let mut stored = encode(&header(), &state, b"").unwrap();
        let last = stored.state.len() - 1;
        stored.state[last] ^= 0xff;
        assert!(decode(&header(), &view(&stored), &stored.digest).is_err());
    }

    #[test]
    fn the_state_digest_verifies_the_state_without_the_payload() {
        let state = CheckpointState { phase: "p".repeat(3000), ..Default::default() };
        let stored = encode(&header(), &state, &vec![7u8; 5000]).unwrap();
        assert_eq!(decode_state(&header(), &view(&stored), &stored.state_digest).unwrap(), state);
        // The same for content that predates the column: computed once it verifies.
        let backfilled = state_digest_of_stored(&header(), &view(&stored), &stored.digest);
        assert_eq!(backfilled, stored.state_digest);
        let mut flipped = stored.state.clone();
        flipped[10] ^= 1;
        let flipped_view = Stored { state: &flipped, ..view(&stored) };
        assert!(decode_state(&header(), &flipped_view, &stored.state_digest).is_err());
        let other = Header { reason: "other", ..header() };
        assert!(decode_state(&other, &view(&stored), &stored.state_digest).is_err());
        // A row whose payload no longer verifies gets a state digest nothing matches.
        let mut payload = stored.payload.clone();
        payload[3] ^= 1;
        let damaged = Stored { payload: &payload, ..view(&stored) };
        let unverifiable = state_digest_of_stored(&header(), &damaged, &stored.digest);
        assert_eq!(unverifiable, UNVERIFIABLE);
        assert!(decode_state(&header(), &view(&stored), &unverifiable).is_err());
    }

    #[test]
    fn digest_ignores_nothing_it_covers() {
        let a = digest(&header(), b"s", b"p");
        let other = Header { reason: "other", ..header() };
        assert_ne!(a, digest(&other, b"s", b"p"));
        assert_ne!(a, digest(&header(), b"s", b"q"));
        assert_ne!(a, digest(&Header { blobs: Cow::Borrowed(b"x"), ..header() }, b"s", b"p"));
        let thread = |key, metadata| Some(ThreadPart { key, metadata });
        let keyed = digest(&Header { thread: thread("k", "{}"), ..header() }, b"s", b"p");
        assert_ne!(a, keyed);
        assert_ne!(keyed, digest(&Header { thread: thread("k2", "{}"), ..header() }, b"s", b"p"));
        assert_ne!(keyed, digest(&Header { thread: thread("k", r#"{"a":1}"#), ..header() }, b"s", b"p"));
    }

    /// A few hundred stored bytes that claim megabytes decompress no further than the
    /// recorded size: the state alone, and the state and payload together.
    #[test]
    fn decompression_stops_at_the_recorded_size() {
        let bomb = zstd::bulk::compress(&vec![0u8; 64 << 20], ZSTD_LEVEL).unwrap();
        assert!(bomb.len() < 10_000);
        let err = decompress(&bomb, Compression::Zstd, 4096).unwrap_err();
        assert!(matches!(err, IntegrityError::TooLarge(4096)), "{err}");
        assert!(decompress(b"12345", Compression::None, 4).is_err());
        // A stream without its size in the header, and two frames: bounded all the same.
        let mut unsized_bomb = Vec::new();
        {
            let mut enc = zstd::stream::write::Encoder::new(&mut unsized_bomb, ZSTD_LEVEL).unwrap();
            std::io::Write::write_all(&mut enc, &vec![0u8; 8 << 20]).unwrap();
            enc.finish().unwrap();
        }
        assert!(matches!(
            decompress(&unsized_bomb, Compression::Zstd, 4096),
            Err(IntegrityError::TooLarge(_))
        ));
        assert_eq!(decompress(&unsized_bomb, Compression::Zstd, 8 << 20).unwrap().len(), 8 << 20);
        let two = [zstd::bulk::compress(b"ab", 3).unwrap(), zstd::bulk::compress(b"cd", 3).unwrap()].concat();
        assert_eq!(decompress(&two, Compression::Zstd, 4).unwrap(), b"abcd");
        assert!(decompress(&two, Compression::Zstd, 3).is_err());
        let state = CheckpointState { phase: "p".repeat(3000), ..Default::default() };
        let stored = encode(&header(), &state, &vec![7u8; 5000]).unwrap();
        let mut small = view(&stored);
        small.size_bytes -= 1;
        assert!(matches!(decode(&header(), &small, &stored.digest), Err(IntegrityError::TooLarge(_))));
        let swollen = Stored { payload: &bomb, ..view(&stored) };
        assert!(matches!(decode(&header(), &swollen, &stored.digest), Err(IntegrityError::TooLarge(_))));
        assert!(matches!(
            decode_state_unverified(&Stored { state: &bomb, ..view(&stored) }),
            Err(IntegrityError::TooLarge(_))
        ));
        assert_eq!(decode(&header(), &view(&stored), &stored.digest).unwrap().0, state);
    }
}
