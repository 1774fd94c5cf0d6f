//! Transcript chunks as stored: zstd-compressed, addressed by the sha256 of their bytes.
//! Unpacking never produces more than the size the chunk was stored with (at most
//! `MAX_CHUNK`), whatever the stored bytes would decompress to, and checks the digest.

use sha2::{Digest, Sha256};

/// The largest chunk the server accepts and serves.
pub const MAX_CHUNK: usize = 1024 * 1024;

/// Why stored chunk bytes cannot be served or imported.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ChunkError {
    #[error("declared size {0} is outside 0..={MAX_CHUNK}")]
    Size(i64),
    #[error("does not decompress to its declared {0} bytes")]
    Decompress(usize),
    #[error("sha256 is {0}, not its digest")]
    Digest(String),
}

/// Compresses a chunk for storage.
pub fn pack(data: &[u8]) -> std::io::Result<Vec<u8>> {
    zstd::bulk::compress(data, 3)
}

/// The bytes of a stored chunk: decompressed into at most `size` bytes, exactly `size`
/// long, and matching `digest`.
pub fn unpack(digest: &str, packed: &[u8], size: i64) -> Result<Vec<u8>, ChunkError> {
    let declared = usize::try_from(size).ok().filter(|s| *s <= MAX_CHUNK).ok_or(ChunkError::Size(size))?;
    let data = zstd::bulk::decompress(packed, declared).map_err(|_| ChunkError::Decompress(declared))?;
    if data.len() != declared {
        return Err(ChunkError::Decompress(declared));
    }
    let computed = hex::encode(Sha256::digest(&data));
    if computed != digest {
        return Err(ChunkError::Digest(computed));
    }
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unpacking_is_bounded_by_the_declared_size_and_checked() {
        let data = vec![7u8; 4096];
        let digest = hex::encode(Sha256::digest(&data));
        let packed = pack(&data).unwrap_or_default();
        assert_eq!(unpack(&digest, &packed, 4096), Ok(data.clone()));
        // A bomb: 64 MiB of zeros declared as 10 bytes never decompresses past 10.
        let bomb = pack(&vec![0u8; 64 * 1024 * 1024]).unwrap_or_default();
        assert_eq!(unpack(&digest, &bomb, 10), Err(ChunkError::Decompress(10)));
        assert_eq!(unpack(&digest, &packed, 1 << 40), Err(ChunkError::Size(1 << 40)));
        assert!(matches!(unpack(&"0".repeat(64), &packed, 4096), Err(ChunkError::Digest(_))));
    }
}
