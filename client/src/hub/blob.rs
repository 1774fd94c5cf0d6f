//! Transcript carry-over: an agent's transcript uploaded in content-addressed chunks (so
//! what a previous upload sent is never sent again), and restored where the agent looks
//! for it on another machine, with the project path rewritten.

use std::path::{Path, PathBuf};

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

/// A blob's role: the agent's transcript, or Claude Code's task files of the conversation.
pub const TRANSCRIPT: &str = "transcript";
pub const CLAUDE_TASKS: &str = "claude-tasks";
/// Task files are small JSON documents: at most this many, each at most this large.
const MAX_TASK_FILES: usize = 1000;
const MAX_TASK_FILE: usize = 64 * 1024;

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

/// Claude Code's project directory name for a cwd: every non-alphanumeric becomes `-`.
pub fn claude_project_dir(cwd: &Path) -> String {
    cwd.display().to_string().chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect()
}

/// Writes a Claude Code transcript where Claude Code looks for it for `cwd` on this machine,
/// with the old project path rewritten to `cwd`. Returns the file written.
pub fn restore_claude(data: &[u8], blob: &BlobRef, cwd: &Path, home: &Path) -> anyhow::Result<PathBuf> {
    // One plain name, or nothing is written (the hub or a teammate chose it).
    let name = crate::safe::agent_session_id(&blob.agent_session_id)?;
    let file = claude_root(home).join("projects").join(claude_project_dir(cwd)).join(format!("{name}.jsonl"));
    write_whole(&file, &rehomed(data, blob, cwd))?;
    Ok(file)
}

/// The transcript text with the project path it was written at replaced by this one.
fn rehomed(data: &[u8], blob: &BlobRef, cwd: &Path) -> String {
    let text = String::from_utf8_lossy(data);
    let new_cwd = cwd.display().to_string();
    if blob.cwd.is_empty() || blob.cwd == new_cwd {
        text.into_owned()
    } else {
        text.replace(&blob.cwd, &new_cwd)
    }
}

/// Writes `text` to `file` through a temporary file beside it (never half a file).
fn write_whole(file: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(dir) = file.parent() {
        crate::fsperm::create_private_dir(dir)?;
    }
    let name = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = file.with_file_name(format!("{name}.baton-tmp"));
    crate::fsperm::write_private(&tmp, text.as_bytes())?;
    std::fs::rename(&tmp, file)?;
    Ok(())
}

/// A file under `dir` (at most `depth` folders down) whose name satisfies `matches`.
pub fn find_under(dir: &Path, matches: &dyn Fn(&str) -> bool, depth: u32) -> Option<PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else { continue };
        if kind.is_dir() {
            if depth > 0
                && let Some(found) = find_under(&path, matches, depth - 1)
            {
                return Some(found);
            }
        } else if kind.is_file() && path.file_name().and_then(|n| n.to_str()).is_some_and(matches) {
            return Some(path);
        }
    }
    None
}

/// Codex's home (`CODEX_HOME`, else `~/.codex`).
pub fn codex_home(home: &Path) -> PathBuf {
    std::env::var_os("CODEX_HOME").map_or_else(|| home.join(".codex"), PathBuf::from)
}

/// The rollout of a Codex conversation on this machine, if any.
pub fn codex_rollout(home: &Path, id: &str) -> Option<PathBuf> {
    let suffix = format!("-{id}.jsonl");
    find_under(&codex_home(home).join("sessions"), &|n| n.starts_with("rollout-") && n.ends_with(&suffix), 4)
}

/// Writes a Codex rollout where `codex resume <id>` finds it on this machine, with the old
/// project path rewritten: over the conversation's rollout if this machine has one (Codex's
/// index then still points at it), else under today's folder of `sessions/` (Codex finds a
/// conversation it does not know by the id in the file's name). Returns the file written.
pub fn restore_codex(data: &[u8], blob: &BlobRef, cwd: &Path, home: &Path) -> anyhow::Result<PathBuf> {
    let id = crate::safe::agent_session_id(&blob.agent_session_id)?;
    let file = if let Some(existing) = codex_rollout(home, id) {
        existing
    } else {
        let now = chrono::Local::now();
        codex_home(home)
            .join("sessions")
            .join(now.format("%Y/%m/%d").to_string())
            .join(format!("rollout-{}-{id}.jsonl", now.format("%Y-%m-%dT%H-%M-%S")))
    };
    write_whole(&file, &rehomed(data, blob, cwd))?;
    Ok(file)
}

/// The chats folder of Gemini CLI for a project folder (named by the folder's base name).
fn gemini_chats(home: &Path, cwd: &Path) -> PathBuf {
    let short = cwd.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    home.join(".gemini/tmp").join(short).join("chats")
}

/// The chat file of a Gemini conversation: its name carries only the id's first 8
/// characters, its first line the whole id.
pub fn gemini_chat(home: &Path, id: &str) -> Option<PathBuf> {
    let prefix: String = id.chars().take(8).collect();
    let suffix = format!("-{prefix}.jsonl");
    let root = home.join(".gemini/tmp");
    for project in std::fs::read_dir(&root).ok()?.flatten() {
        for chat in std::fs::read_dir(project.path().join("chats")).into_iter().flatten().flatten() {
            let name = chat.file_name().to_string_lossy().into_owned();
            if name.starts_with("session-")
                && name.ends_with(&suffix)
                && chat_id(&chat.path()).as_deref() == Some(id)
            {
                return Some(chat.path());
            }
        }
    }
    None
}

/// The conversation id a Gemini chat file names on its first line.
fn chat_id(path: &Path) -> Option<String> {
    use std::io::BufRead as _;
    let file = std::fs::File::open(path).ok()?;
    let mut first = String::new();
    std::io::Read::take(std::io::BufReader::new(file), 64 * 1024).read_line(&mut first).ok()?;
    let line: serde_json::Value = serde_json::from_str(&first).ok()?;
    line.get("sessionId").and_then(serde_json::Value::as_str).map(str::to_owned)
}

/// Writes a Gemini chat where `gemini --resume <id>` finds it for `cwd` on this machine:
/// over the conversation's chat if this machine has one in that folder, else a new file
/// named as Gemini names them (its start time, the id's first 8 characters).
pub fn restore_gemini(data: &[u8], blob: &BlobRef, cwd: &Path, home: &Path) -> anyhow::Result<PathBuf> {
    let id = crate::safe::agent_session_id(&blob.agent_session_id)?;
    let text = rehomed(data, blob, cwd);
    let dir = gemini_chats(home, cwd);
    let existing = gemini_chat(home, id).filter(|f| f.parent() == Some(dir.as_path()));
    let file = if let Some(file) = existing {
        file
    } else {
        // Gemini's own name: session-<start, to the minute>-<first 8 of the id>.jsonl.
        let first: serde_json::Value =
            text.lines().next().and_then(|l| serde_json::from_str(l).ok()).unwrap_or_default();
        let started = first
            .get("startTime")
            .and_then(serde_json::Value::as_str)
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .map_or_else(chrono::Utc::now, |t| t.with_timezone(&chrono::Utc));
        let prefix: String = id.chars().take(8).collect();
        dir.join(format!("session-{}-{prefix}.jsonl", started.format("%Y-%m-%dT%H-%M")))
    };
    write_whole(&file, &text)?;
    Ok(file)
}

/// Where Claude Code keeps its files (`CLAUDE_CONFIG_DIR`, else `~/.claude`).
pub fn claude_root(home: &Path) -> PathBuf {
    std::env::var_os("CLAUDE_CONFIG_DIR").map_or_else(|| home.join(".claude"), PathBuf::from)
}

/// A task file's name as Claude Code makes them: `<number>.json`.
fn is_task_file(name: &str) -> bool {
    name.strip_suffix(".json")
        .is_some_and(|n| !n.is_empty() && n.len() <= 9 && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Claude Code's task files of a conversation (`tasks/<id>/<n>.json`) as one JSON object
/// `{name: content}`, secrets redacted; None when it has none.
pub fn bundle_claude_tasks(home: &Path, agent_session_id: &str) -> anyhow::Result<Option<Vec<u8>>> {
    let id = crate::safe::agent_session_id(agent_session_id)?;
    let dir = claude_root(home).join("tasks").join(id);
    let Ok(entries) = std::fs::read_dir(&dir) else { return Ok(None) };
    let mut files = serde_json::Map::new();
    for entry in entries.flatten().take(MAX_TASK_FILES) {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !is_task_file(&name) || entry.metadata().map_or(u64::MAX, |m| m.len()) > MAX_TASK_FILE as u64 {
            continue;
        }
        let text = std::fs::read_to_string(entry.path())?;
        files.insert(name, serde_json::Value::String(baton_proto::redact::redact(&text).0.into_owned()));
    }
    if files.is_empty() {
        return Ok(None);
    }
    Ok(Some(serde_json::to_vec(&files)?))
}

/// Writes a conversation's task files where Claude Code keeps them on this machine. What
/// the hub sent is checked first: the conversation id one plain name, every file named
/// `<number>.json` and small, so nothing is written outside `tasks/<id>/`. Returns the
/// folder written.
pub fn restore_claude_tasks(data: &[u8], blob: &BlobRef, home: &Path) -> anyhow::Result<PathBuf> {
    let id = crate::safe::agent_session_id(&blob.agent_session_id)?;
    let files: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(data)
        .map_err(|e| anyhow::anyhow!("the task files are not a JSON object: {e}"))?;
    if files.len() > MAX_TASK_FILES {
        anyhow::bail!("{} task files: at most {MAX_TASK_FILES}", files.len());
    }
    let mut checked = Vec::new();
    for (name, content) in &files {
        let content = content
            .as_str()
            .ok_or_else(|| anyhow::anyhow!("task file {} is not text", crate::safe::line(name)))?;
        if !is_task_file(name) || content.len() > MAX_TASK_FILE {
            anyhow::bail!(
                "refusing task file {}: not <number>.json of at most 64 KiB",
                crate::safe::line(name)
            );
        }
        checked.push((name.clone(), content.to_owned()));
    }
    let dir = claude_root(home).join("tasks").join(id);
    for (name, content) in checked {
        write_whole(&dir.join(&name), &content)?;
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restore_refuses_names_that_are_not_one_plain_component() {
        let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let cwd = home.path().join("repo");
        for id in ["../../work/repo/planted", "/tmp/abs", "..", "a/b"] {
            let blob = BlobRef { agent_session_id: id.into(), ..Default::default() };
            assert!(restore_claude(b"x", &blob, &cwd, home.path()).is_err(), "{id}");
        }
        let mut written = Vec::new();
        for entry in std::fs::read_dir(home.path()).into_iter().flatten().flatten() {
            written.push(entry.path());
        }
        assert!(written.is_empty(), "{written:?}");
    }

    /// A hostile hub names the conversation: Codex rollouts and Gemini chats are written only
    /// under the agent's own folder, named by one plain component, or not at all.
    #[test]
    fn rollouts_and_chats_are_written_only_inside_the_agents_folders() {
        let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let cwd = home.path().join("work/repo");
        for id in ["../../.bashrc", "/etc/passwd", "..", "a/b", "-rf", ""] {
            let blob = BlobRef { agent_session_id: id.into(), ..Default::default() };
            assert!(restore_codex(b"{}\n", &blob, &cwd, home.path()).is_err(), "{id}");
            assert!(restore_gemini(b"{}\n", &blob, &cwd, home.path()).is_err(), "{id}");
        }
        assert!(std::fs::read_dir(home.path()).into_iter().flatten().next().is_none(), "nothing written");
        let blob = BlobRef {
            agent_session_id: "019a0000-0000-7000-8000-000000000001".into(),
            cwd: "/old/repo".into(),
            ..Default::default()
        };
        let rollout = restore_codex(b"{\"cwd\":\"/old/repo\"}\n", &blob, &cwd, home.path())
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(rollout.starts_with(home.path().join(".codex/sessions")), "{}", rollout.display());
        assert_eq!(
            std::fs::read_to_string(&rollout).unwrap_or_default(),
            format!("{{\"cwd\":\"{}\"}}\n", cwd.display())
        );
        // Again: over the same file (Codex's index points at it), not a second one.
        assert_eq!(
            restore_codex(b"{}\n", &blob, &cwd, home.path()).unwrap_or_else(|e| panic!("{e}")),
            rollout
        );
        let chat_blob =
            BlobRef { agent_session_id: "8c66f21c-0f6c-4470-ac65-887cafd0ed91".into(), ..Default::default() };
        let chat = restore_gemini(
            br#"{"sessionId":"8c66f21c-0f6c-4470-ac65-887cafd0ed91","startTime":"2026-11-25T13:30:52.974Z"}"#,
            &chat_blob,
            &cwd,
            home.path(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(chat, home.path().join(".gemini/tmp/repo/chats/session-2026-11-25T13-30-8c66f21c.jsonl"));
        assert_eq!(gemini_chat(home.path(), &chat_blob.agent_session_id), Some(chat));
    }

    #[test]
    fn task_files_are_written_only_inside_their_folder() {
        let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let blob = |id: &str| BlobRef { agent_session_id: id.into(), ..Default::default() };
        for (id, files) in [
            ("ok-id", r#"{"../../../.bashrc": "x"}"#),
            ("ok-id", r#"{"1.json/../../x": "x"}"#),
            ("ok-id", r#"{".json": "x"}"#),
            ("ok-id", r#"{"1.json": 7}"#),
            ("ok-id", r#"["1.json"]"#),
            ("../escape", r#"{"1.json": "x"}"#),
        ] {
            assert!(restore_claude_tasks(files.as_bytes(), &blob(id), home.path()).is_err(), "{id} {files}");
        }
        assert!(std::fs::read_dir(home.path()).into_iter().flatten().next().is_none(), "nothing written");
        let dir = restore_claude_tasks(br#"{"1.json": "{}", "12.json": "{}"}"#, &blob("ok-id"), home.path())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(dir, home.path().join(".claude/tasks/ok-id"));
        assert!(dir.join("12.json").exists());
        let bundled =
            bundle_claude_tasks(home.path(), "ok-id").unwrap_or_else(|e| panic!("{e}")).unwrap_or_default();
        let back: serde_json::Value = serde_json::from_slice(&bundled).unwrap_or_default();
        assert_eq!(back["12.json"], "{}");
    }

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

    #[test]
    fn project_dir_names() {
        assert_eq!(
            claude_project_dir(Path::new("/Users/esd/projects/cc-session")),
            "-Users-esd-projects-cc-session"
        );
        assert_eq!(claude_project_dir(Path::new("/a/b.c_d")), "-a-b-c-d");
    }
}
