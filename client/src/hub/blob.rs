//! Transcript carry-over on the hub's side: an agent's transcript prepared and uploaded in
//! content-addressed chunks (so what a previous upload sent is never sent again), and
//! checked and downloaded again. Where each agent keeps it is `agents`'
//! (`Agent::restore_transcript`).

use std::path::Path;

use baton_proto::v1::{BlobRef, Chunk, GetChunksRequest, MissingChunksRequest, PutChunksRequest};
use sha2::{Digest, Sha256};

use crate::hub::remote::{self, Hub};

/// Fixed-size chunks: an append-only transcript keeps its earlier chunks byte-identical,
/// so each upload sends only the new tail.
pub const CHUNK: usize = 512 * 1024;
/// Chunks per PutChunks call (the server takes up to 8 MiB).
const PUT_BATCH: usize = 8;
/// Chunks per GetChunks call: the server's chunks are at most 1 MiB (this client makes
/// 512 KiB ones), so a reply stays under `MAX_REPLY`.
pub const GET_BATCH: usize = 8;
/// The largest GetChunks reply the client decodes.
pub const MAX_REPLY: usize = GET_BATCH * 1024 * 1024 + 64 * 1024;
/// The largest chunk the server stores.
const MAX_SERVER_CHUNK: i64 = 1024 * 1024;
/// The largest transcript the client restores.
pub const MAX_TRANSCRIPT: i64 = 1 << 30;

fn sha(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// Reads and redacts a transcript (secrets never leave the machine); returns the bytes and
/// how many secrets were redacted.
pub fn prepare(path: &Path) -> anyhow::Result<(Vec<u8>, u32)> {
    let text = std::fs::read_to_string(path)?;
    let (redacted, count) = baton_proto::redact::redact(&text);
    Ok((redacted.into_owned().into_bytes(), count))
}

/// The role of the blob that is the agent's transcript (the files an agent keeps beside it
/// have their own role: `Spec::side_files_role`).
pub const TRANSCRIPT: &str = "transcript";
/// Uploads the chunks the hub lacks and returns the reference for a checkpoint.
pub async fn upload(
    hub: &mut Hub,
    project: &str,
    role: &str,
    data: &[u8],
    agent_session_id: &str,
    cwd: &Path,
) -> anyhow::Result<BlobRef> {
    let pieces: Vec<&[u8]> = data.chunks(CHUNK).collect();
    let digests: Vec<String> = pieces.iter().map(|p| sha(p)).collect();
    let mut missing = Vec::new();
    for batch in digests.chunks(5000) {
        let reply = hub
            .checkpoints
            .missing_chunks(MissingChunksRequest { project: project.to_owned(), digests: batch.to_vec() })
            .await
            .map_err(remote::fail)?;
        missing.extend(reply.into_inner().missing);
    }
    let to_send: Vec<Chunk> = pieces
        .iter()
        .zip(&digests)
        .filter(|(_, d)| missing.contains(d))
        .map(|(p, d)| Chunk { digest: d.clone(), data: p.to_vec() })
        .collect();
    for batch in to_send.chunks(PUT_BATCH) {
        hub.checkpoints
            .put_chunks(PutChunksRequest { project: project.to_owned(), chunks: batch.to_vec() })
            .await
            .map_err(remote::fail)?;
    }
    Ok(BlobRef {
        role: role.to_owned(),
        digest: sha(data),
        size_bytes: i64::try_from(data.len()).unwrap_or(i64::MAX),
        chunks: digests,
        content_type: if role == TRANSCRIPT { "application/x-ndjson" } else { "application/json" }.into(),
        agent_session_id: agent_session_id.to_owned(),
        cwd: cwd.display().to_string(),
    })
}

/// Checks what a blob reference claims before anything is fetched or written for it: its
/// size is a remote number (never trusted for an allocation), its agent session id will
/// name a file.
pub fn check(blob: &BlobRef) -> anyhow::Result<()> {
    crate::safe::agent_session_id(&blob.agent_session_id)?;
    let chunks = i64::try_from(blob.chunks.len()).unwrap_or(i64::MAX);
    if blob.size_bytes < 0
        || blob.size_bytes > MAX_TRANSCRIPT
        || blob.size_bytes > chunks.saturating_mul(MAX_SERVER_CHUNK)
    {
        anyhow::bail!(
            "the transcript's stated size ({} bytes in {} chunks) is not possible (at most {MAX_TRANSCRIPT} bytes, 1 MiB per chunk)",
            blob.size_bytes,
            blob.chunks.len()
        );
    }
    Ok(())
}

/// Downloads a blob and checks it against its size and digest.
pub async fn download(hub: &mut Hub, project: &str, blob: &BlobRef) -> anyhow::Result<Vec<u8>> {
    check(blob)?;
    let size = usize::try_from(blob.size_bytes).unwrap_or(0);
    // Grows as chunks arrive: the stated size only bounds it.
    let mut data = Vec::with_capacity(size.min(CHUNK * GET_BATCH));
    for batch in blob.chunks.chunks(GET_BATCH) {
        let reply = hub
            .checkpoints
            .get_chunks(GetChunksRequest { project: project.to_owned(), digests: batch.to_vec() })
            .await
            .map_err(remote::fail)?
            .into_inner();
        for digest in batch {
            let chunk = reply
                .chunks
                .iter()
                .find(|c| &c.digest == digest)
                .ok_or_else(|| anyhow::anyhow!("chunk {} missing", crate::safe::line(digest)))?;
            if sha(&chunk.data) != *digest {
                anyhow::bail!("a downloaded chunk does not match its digest");
            }
            if data.len() + chunk.data.len() > size {
                anyhow::bail!("the transcript's chunks are larger than its stated size ({size} bytes)");
            }
            data.extend_from_slice(&chunk.data);
        }
    }
    if data.len() != size || sha(&data) != blob.digest {
        anyhow::bail!("the downloaded transcript does not match its size and digest");
    }
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn impossible_sizes_are_refused_before_any_allocation() {
        let blob = BlobRef {
            agent_session_id: "abc".into(),
            size_bytes: 1 << 62,
            chunks: vec!["0".repeat(64)],
            ..Default::default()
        };
        assert!(check(&blob).is_err());
        let negative = BlobRef { size_bytes: -1, ..blob.clone() };
        assert!(check(&negative).is_err());
        let fine = BlobRef { size_bytes: 1000, ..blob };
        assert!(check(&fine).is_ok());
    }
}
