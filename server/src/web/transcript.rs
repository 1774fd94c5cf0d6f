//! A carried transcript, shown a part at a time: its chunks fetched a few at a time (never
//! the whole blob for one page), each line read as an agent's JSONL record (Claude Code's,
//! Codex's…) and shown as who said it and what, every text clipped.

use baton_proto::v1::checkpoint_service_server::CheckpointService;
use baton_proto::v1::{BlobRef, GetChunksRequest};

use super::Web;
use super::render::{WebError, clip};
use super::signin::Viewer;
use crate::store::Store;

/// Chunks per part: the parts of a transcript are its chunks in groups of this many.
const CHUNKS_PER_PART: usize = 4;
/// How far past its part a line that starts in it may be read to its end, in chunks.
const MAX_LINE_CHUNKS: usize = 16;
const MAX_TEXT: usize = 4000;

pub struct Line {
    pub role: String,
    pub text: String,
}

pub struct Part {
    /// 1-based, of `parts`.
    pub part: usize,
    pub parts: usize,
    pub size_text: String,
    pub lines: Vec<Line>,
}

pub fn parts_of(blob: &BlobRef) -> usize {
    blob.chunks.len().div_ceil(CHUNKS_PER_PART).max(1)
}

async fn fetch<S: Store>(
    web: &Web<S>,
    viewer: &Viewer,
    project: &str,
    digests: &[String],
) -> Result<Vec<u8>, WebError> {
    let request = GetChunksRequest { project: project.to_owned(), digests: digests.to_vec() };
    let reply = CheckpointService::get_chunks(&web.api, viewer.request(request)).await?.into_inner();
    if reply.chunks.len() != digests.len() {
        return Err(WebError::NotFound("part of this transcript is no longer stored".into()));
    }
    Ok(reply.chunks.into_iter().flat_map(|c| c.data).collect())
}

/// Part `part` (1-based) of a transcript: the lines that start in its chunks.
pub async fn read<S: Store>(
    web: &Web<S>,
    viewer: &Viewer,
    project: &str,
    blob: &BlobRef,
    part: usize,
) -> Result<Part, WebError> {
    let parts = parts_of(blob);
    let part = part.clamp(1, parts);
    let start = (part - 1) * CHUNKS_PER_PART;
    let end = (start + CHUNKS_PER_PART).min(blob.chunks.len());
    let mut bytes = fetch(web, viewer, project, &blob.chunks[start..end]).await?;
    // A line that began in the part before belongs to it.
    if start > 0 {
        let cut = bytes.iter().position(|b| *b == b'\n').map_or(bytes.len(), |at| at + 1);
        bytes.drain(..cut);
    }
    // A line that ends in the part after is read to its end.
    let mut next = end;
    while !bytes.ends_with(b"\n") && next < blob.chunks.len() && next < end + MAX_LINE_CHUNKS {
        let more = fetch(web, viewer, project, &blob.chunks[next..=next]).await?;
        match more.iter().position(|b| *b == b'\n') {
            Some(at) => {
                bytes.extend_from_slice(&more[..=at]);
                break;
            }
            None => bytes.extend_from_slice(&more),
        }
        next += 1;
    }
    let text = String::from_utf8_lossy(&bytes);
    let lines = text.lines().filter(|l| !l.trim().is_empty()).map(line).collect();
    Ok(Part { part, parts, size_text: super::render::size(blob.size_bytes), lines })
}

/// One record: its role and its text (every `text` field in it, and the tools it names).
fn line(raw: &str) -> Line {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(raw) else {
        return Line { role: "text".into(), text: clip(raw, MAX_TEXT) };
    };
    let role = ["/message/role", "/payload/role", "/role", "/type", "/payload/type"]
        .iter()
        .find_map(|p| value.pointer(p).and_then(|v| v.as_str()))
        .unwrap_or("record")
        .to_owned();
    let mut texts = Vec::new();
    collect(&value, &mut texts, 0);
    let text = if texts.is_empty() { raw.to_owned() } else { texts.join("\n") };
    Line { role: clip(&role, 40), text: clip(&text, MAX_TEXT) }
}

fn collect(value: &serde_json::Value, out: &mut Vec<String>, depth: usize) {
    if depth > 12 || out.len() > 64 {
        return;
    }
    match value {
        serde_json::Value::Object(map) => {
            let kind = map.get("type").and_then(|t| t.as_str()).unwrap_or_default();
            if let (true, Some(name)) =
                (kind.contains("tool") || kind.contains("function"), map.get("name").and_then(|n| n.as_str()))
            {
                out.push(format!("[tool: {name}]"));
            }
            for (key, v) in map {
                match v {
                    serde_json::Value::String(s)
                        if key == "text" || key == "summary" || (key == "content" && depth > 0) =>
                    {
                        out.push(s.clone());
                    }
                    _ => collect(v, out, depth + 1),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| collect(v, out, depth + 1)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_and_codex_records_read_as_role_and_text() {
        let claude = r#"{"type":"user","message":{"role":"user","content":"fix the login test"}}"#;
        let l = line(claude);
        assert_eq!((l.role.as_str(), l.text.as_str()), ("user", "fix the login test"));
        let tool = r#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"Running it"},{"type":"tool_use","name":"Bash","input":{"command":"cargo test"}}]}}"#;
        let l = line(tool);
        assert_eq!(l.role, "assistant");
        assert!(l.text.contains("Running it") && l.text.contains("[tool: Bash]"), "{}", l.text);
        let codex = r#"{"type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"done"}]}}"#;
        assert_eq!(line(codex).text, "done");
        assert_eq!(line("not json").role, "text");
    }
}
