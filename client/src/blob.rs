//! Transcript carry-over: an agent's transcript uploaded in content-addressed chunks (so
//! what a previous upload sent is never sent again), and restored where the agent looks
//! for it on another machine, with the project path rewritten.

use std::path::{Path, PathBuf};

use baton_proto::v1::{BlobRef, Chunk, GetChunksRequest, MissingChunksRequest, PutChunksRequest};
use sha2::{Digest, Sha256};

use crate::remote::{self, Hub};

/// Fixed-size chunks: an append-only transcript keeps its earlier chunks byte-identical,
/// so each upload sends only the new tail.
pub const CHUNK: usize = 512 * 1024;
/// Chunks per PutChunks call (the server takes up to 8 MiB).
const PUT_BATCH: usize = 8;
const GET_BATCH: usize = 16;

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

/// Uploads the chunks the hub lacks and returns the reference for a checkpoint.
pub async fn upload(
    hub: &mut Hub,
    project: &str,
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
        role: "transcript".into(),
        digest: sha(data),
        size_bytes: i64::try_from(data.len()).unwrap_or(i64::MAX),
        chunks: digests,
        content_type: "application/x-ndjson".into(),
        agent_session_id: agent_session_id.to_owned(),
        cwd: cwd.display().to_string(),
    })
}

/// Downloads a blob and checks it against its digest.
pub async fn download(hub: &mut Hub, project: &str, blob: &BlobRef) -> anyhow::Result<Vec<u8>> {
    let mut data = Vec::with_capacity(usize::try_from(blob.size_bytes).unwrap_or(0));
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
                .ok_or_else(|| anyhow::anyhow!("chunk {digest} missing"))?;
            data.extend_from_slice(&chunk.data);
        }
    }
    if sha(&data) != blob.digest {
        anyhow::bail!("the downloaded transcript does not match its digest");
    }
    Ok(data)
}

/// Claude Code's project directory name for a cwd: every non-alphanumeric becomes `-`.
pub fn claude_project_dir(cwd: &Path) -> String {
    cwd.display().to_string().chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect()
}

/// Writes a Claude Code transcript where Claude Code looks for it for `cwd` on this machine,
/// with the old project path rewritten to `cwd`. Returns the file written.
pub fn restore_claude(data: &[u8], blob: &BlobRef, cwd: &Path, home: &Path) -> anyhow::Result<PathBuf> {
    let text = String::from_utf8_lossy(data);
    let new_cwd = cwd.display().to_string();
    let text = if blob.cwd.is_empty() || blob.cwd == new_cwd {
        text.into_owned()
    } else {
        text.replace(&blob.cwd, &new_cwd)
    };
    let root = std::env::var_os("CLAUDE_CONFIG_DIR").map_or_else(|| home.join(".claude"), PathBuf::from);
    let dir = root.join("projects").join(claude_project_dir(cwd));
    std::fs::create_dir_all(&dir)?;
    let file = dir.join(format!("{}.jsonl", blob.agent_session_id));
    let tmp = file.with_extension("jsonl.baton-tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, &file)?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn project_dir_names() {
        assert_eq!(
            claude_project_dir(Path::new("/Users/esd/projects/cc-session")),
            "-Users-esd-projects-cc-session"
        );
        assert_eq!(claude_project_dir(Path::new("/a/b.c_d")), "-a-b-c-d");
    }
}
